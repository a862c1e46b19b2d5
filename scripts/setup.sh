#!/usr/bin/env bash
# Installs what mha needs from Debian (skipped when already there) and builds
# it into build/ (or $MHA_BUILD_DIR). Extra arguments go to cmake's configure.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake g++ make libcli11-dev nlohmann-json3-dev libopenblas-dev libspdlog-dev
          libgtest-dev zlib1g-dev python3-torch python3-numpy python3-matplotlib
          clang libclang-rt-14-dev  # clang + libFuzzer for scripts/fuzz.sh
          openmpi-bin libopenmpi-dev  # mpirun -np N mha run (src/parallel/)
          iproute2)  # ip netns: tests/parallel's two-hosts-over-TCP test
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup: installing ${missing[*]}" >&2
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

build_dir="${MHA_BUILD_DIR:-build}"
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE="${MHA_BUILD_TYPE:-Release}" "$@" >/dev/null
cmake --build "$build_dir" -j"$(nproc)"
