#!/usr/bin/env bash
# Installs what mha needs from Debian (skipped when already there) and builds
# the `mha` binary into build/ (or $MHA_BUILD_DIR): the README's quick start.
# Extra arguments go to cmake's configure.
#
# MHA_SETUP=tests (scripts/test.sh sets it) also installs what the test suites
# and the fuzzers need (GoogleTest, PyTorch and numpy for the parity oracles,
# clang + libFuzzer, iproute2, ccache) and builds every target.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake g++ make libcli11-dev nlohmann-json3-dev libopenblas-dev libspdlog-dev zlib1g-dev
          openmpi-bin libopenmpi-dev)  # mpirun -np N mha run (src/parallel/)
targets=(--target mha)
if [ "${MHA_SETUP:-}" = "tests" ]; then
  packages+=(libgtest-dev python3-torch python3-numpy python3-matplotlib
             clang libclang-rt-14-dev  # clang + libFuzzer for scripts/fuzz.sh
             iproute2  # ip netns: tests/parallel's two-hosts-over-TCP test
             ccache)   # a re-run recompiles only what changed
  targets=()
fi
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

# ccache when installed: rebuilds after a first one (and the build folders of
# several checkouts) share compiled objects.
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi

build_dir="${MHA_BUILD_DIR:-build}"
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE="${MHA_BUILD_TYPE:-Release}" "${launcher[@]}" "$@" >/dev/null
cmake --build "$build_dir" -j"$(nproc)" "${targets[@]}"
