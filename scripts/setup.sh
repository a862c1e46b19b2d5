#!/usr/bin/env bash
# Installs what mha needs from Debian (skipped when already there) and builds
# the `mha` binary into build/ (or $MHA_BUILD_DIR): the README's quick start.
# Extra arguments go to cmake's configure.
#
# MHA_SETUP=tests (scripts/test.sh sets it) also installs what the test suites
# and the fuzzers need and builds every target. GoogleTest, which the suites
# compile against, installs first (with python3-dev and pybind11-dev for the
# Python package); the rest (PyTorch and numpy for the parity oracles and the
# Python package, clang + libFuzzer, iproute2, pytest), which only running them needs,
# downloads and unpacks while everything compiles.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake g++ make libcli11-dev nlohmann-json3-dev libopenblas-dev libspdlog-dev zlib1g-dev
          openmpi-bin libopenmpi-dev)  # mpirun -np N mha run (src/parallel/)
test_packages=(python3-torch python3-numpy python3-matplotlib
               clang libclang-rt-14-dev  # clang + libFuzzer: the sanitizer build, scripts/fuzz.sh
               lld  # links the sanitizer build (scripts/test.sh: MHA_LINKER)
               iproute2  # ip netns: tests/parallel's two-hosts-over-TCP test
               python3-pytest)  # tests/python: the Python package's tests
# The Python package (python/) builds when CMake finds Python's headers and
# pybind11 at configure time, so they install before it, with GoogleTest.
if [ "${MHA_SETUP:-}" = "tests" ]; then packages+=(libgtest-dev python3-dev pybind11-dev); fi

missing() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
updated=0
install() {
  [ $# -gt 0 ] || return 0
  echo "setup: installing $*" >&2
  if [ "$updated" = 0 ]; then $SUDO apt-get update -q; updated=1; fi
  # --force-unsafe-io: dpkg does not sync each unpacked file to disk before
  # renaming it into place (about 500 packages on a fresh machine), as in
  # Debian's Docker images; a machine that loses power mid-install reinstalls.
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends \
    -o Dpkg::Options::=--force-unsafe-io "$@"
}

build_dir="${MHA_BUILD_DIR:-build}"
configure() {
  # ccache when installed: rebuilds (and the build folders of several
  # checkouts) share compiled objects. A fresh machine has nothing to share.
  local launcher=()
  if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
  cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE="${MHA_BUILD_TYPE:-Release}" "${launcher[@]}" "$@" >/dev/null
}

mapfile -t need < <(missing "${packages[@]}")
install "${need[@]}"
if [ "${MHA_SETUP:-}" != "tests" ]; then
  configure "$@"
  cmake --build "$build_dir" -j"$(nproc)" --target mha
  exit 0
fi

mapfile -t need < <(missing "${test_packages[@]}")
apt_pid=""
if [ ${#need[@]} -gt 0 ]; then
  log="$(mktemp)"
  if [ "$updated" = 0 ]; then $SUDO apt-get update -q >"$log" 2>&1; updated=1; fi
  (install "${need[@]}") >>"$log" 2>&1 &
  apt_pid=$!
fi
configure "$@"
cmake --build "$build_dir" -j"$(nproc)"
if [ -n "$apt_pid" ]; then
  if ! wait "$apt_pid"; then cat "$log" >&2; echo "setup: installing ${need[*]} failed" >&2; exit 1; fi
  rm -f "$log"
fi
