#!/usr/bin/env bash
# The project's whole test command: installs dependencies, builds, runs every
# test suite; then one clang build under AddressSanitizer +
# UndefinedBehaviorSanitizer (build-asan/: the suites and the libFuzzer
# targets over one instrumented library) runs the suites again and fuzzes
# each parser. MHA_SKIP_SANITIZE=1 skips the sanitizer suites,
# MHA_SKIP_FUZZ=1 the fuzzing (MHA_FUZZ_SECONDS: seconds per target, 10).
# Both builds compile the library in unity batches (MHA_UNITY_BUILD, CMakeLists.txt):
# a fresh build's headers are parsed once a batch, not once a file.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each phase's wall time goes to stderr, so a CI log shows where the time went.
phase() { echo "test.sh: $1 done at ${SECONDS}s" >&2; }
jobs="$(nproc)"
# One test more than there are cores: the mpirun suites (tests/parallel) spend
# nine tenths of their time waiting on the launch and its handshakes, not
# computing, and a core would idle behind each.
test_jobs=$((jobs + 1))
sanitize=1; [ "${MHA_SKIP_SANITIZE:-0}" != "1" ] || sanitize=0
fuzz=1; [ "${MHA_SKIP_FUZZ:-0}" != "1" ] || fuzz=0

MHA_SETUP=tests ./scripts/setup.sh -DMHA_UNITY_BUILD=ON
phase "setup + Release build"

if [ "$sanitize" = 1 ]; then
  # clang, -O1 -g1: line tables are all a sanitizer report needs, and clang
  # compiles this a quarter faster than g++ (the suites' own code builds at
  # -O0 here: tests/CMakeLists.txt says why). The torch-heavy parity suites
  # (label `slow`) are covered by the Release pass and not even built here; the
  # sanitizer pass checks mha's own memory safety on every other suite, less
  # tt-sim's widest bit-identity sweeps and float64 checks at large shapes
  # (label `numeric`: the Release pass proves their bits, and smaller cases run
  # the same kernels here; tests/CMakeLists.txt names them and the cases that
  # cover them). No suite runs the kernel benchmarks (bench/), so they are
  # not built here (MHA_BENCH_TOOLS). With MHA_FUZZ the library's sources
  # that the fuzz targets exercise also carry the fuzzers' coverage
  # instrumentation (CMakeLists.txt: MHA_FUZZED_SOURCE_REGEX; not the kernels,
  # the suites or the CLI), so the fuzz targets need no second library build.
  #
  # It builds while the Release tests run, at a lower priority: those tests
  # leave cores idle (the mpirun suites mostly wait on launches and
  # handshakes, torch oracles on one thread), and the build takes up what they
  # leave. Its output goes to a log, printed if it fails.
  asan_log="$(mktemp)"
  MHA_BUILD_DIR=build-asan MHA_BUILD_TYPE=RelWithDebInfo MHA_SETUP=tests setsid nice -n 10 ./scripts/setup.sh \
    -DMHA_UNITY_BUILD=ON -DCMAKE_CXX_COMPILER=clang++ -DMHA_SANITIZE=ON -DMHA_FUZZ="$([ "$fuzz" = 1 ] && echo ON || echo OFF)" \
    -DMHA_BUILD_TESTS=ON -DMHA_SLOW_TESTS=OFF -DMHA_BENCH_TOOLS=OFF -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
    -DMHA_LINKER=lld >"$asan_log" 2>&1 &
  asan_pid=$!
  # A failing Release pass ends the command; the build (its own process
  # group, through setsid) must not outlive it.
  trap 'kill -- -"$asan_pid" 2>/dev/null || true' EXIT
fi

(cd build && ctest --output-on-failure --no-tests=error -j"$test_jobs")
phase "Release tests"

if [ "$sanitize" = 1 ]; then
  if ! wait "$asan_pid"; then cat "$asan_log" >&2; echo "test.sh: the sanitizer build failed" >&2; exit 1; fi
  trap - EXIT
  rm -f "$asan_log"
  phase "sanitizer build (suites + fuzz targets; begun with the Release tests)"
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
     ctest --output-on-failure --no-tests=error -j"$test_jobs" -LE 'slow|numeric')
  phase "sanitizer tests"
fi

# Each libFuzzer target (tests/fuzz/) for a bounded time under ASan + UBSan,
# from its committed seed corpus (8 targets x 10 s), as many at once as there are cores; any
# crash fails the test command. Without the sanitizer pass, fuzz.sh builds
# build-fuzz/ for it.
if [ "$fuzz" = 1 ]; then
  MHA_FUZZ_BUILD_DIR="$([ "$sanitize" = 1 ] && echo build-asan || echo build-fuzz)" \
    ./scripts/fuzz.sh smoke "${MHA_FUZZ_SECONDS:-10}"
  phase "fuzz smoke"
fi
