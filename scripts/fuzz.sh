#!/usr/bin/env bash
# Builds and runs the libFuzzer targets (tests/fuzz/) under AddressSanitizer +
# UndefinedBehaviorSanitizer. docs/FUZZING.md explains the targets and records
# the long runs.
#
#   scripts/fuzz.sh build                 configure and build build-fuzz/ (clang)
#   scripts/fuzz.sh smoke [SECONDS]       every target for SECONDS (default 20) each,
#                                         as many at once as there are cores;
#                                         exits non-zero if any crashed
#   scripts/fuzz.sh run TARGET [ARGS...]  one target on its seed corpus, with extra
#                                         libFuzzer ARGS (e.g. -runs=10000000)
#
# Targets: npy npz safetensors config compare checkpoint decode_parallel
# llama_params. New inputs a run finds go into
# BUILD/corpus/TARGET (the committed seeds in tests/fuzz/corpus/ are only
# read); a crashing input is written to BUILD/artifacts/. MHA_FUZZ_BUILD_DIR
# picks BUILD (default build-fuzz); a folder already configured, such as
# scripts/test.sh's build-asan/ (the suites and the fuzz targets in one clang
# build), is built as it is configured.
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir="${MHA_FUZZ_BUILD_DIR:-build-fuzz}"
targets=(npy npz safetensors config compare checkpoint decode_parallel llama_params)

# -O1 -g1 by default (MHA_FUZZ_OPT overrides, for a fresh folder): about
# half the compile time of -O2 -g for the whole library; line tables are all
# a crash report needs.
build() {
  if [ ! -f "$build_dir/CMakeCache.txt" ]; then
    local launcher=()
    if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
    cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
          -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="${MHA_FUZZ_OPT:--O1 -g1} -DNDEBUG" "${launcher[@]}" \
          -DMHA_FUZZ=ON -DMHA_BUILD_TESTS=OFF >/dev/null
  fi
  cmake --build "$build_dir" -j"$(nproc)" --target "${targets[@]/#/fuzz_}"
}

# run TARGET ARGS...: libFuzzer exits non-zero on a crash, a leak, a sanitizer
# report, a timeout (-timeout) or an input needing more than -rss_limit_mb.
run() {
  local t="$1"; shift
  mkdir -p "$build_dir/corpus/$t" "$build_dir/artifacts"
  ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}" \
    "$build_dir/tests/fuzz/fuzz_$t" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$build_dir/artifacts/$t-" "$@" "$build_dir/corpus/$t" "tests/fuzz/corpus/$t"
}

case "${1:-}" in
  build) build ;;
  smoke)
    seconds="${2:-20}"
    build
    # One core each: a target fuzzes as many inputs as it would alone.
    for t in "${targets[@]}"; do
      while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n || true; done
      echo "fuzz: $t for ${seconds}s" >&2
      ( if run "$t" -max_total_time="$seconds" > "$build_dir/smoke-$t.log" 2>&1; then echo 0; else echo 1; fi \
          > "$build_dir/smoke-$t.rc" ) &
    done
    wait
    failed=0
    for t in "${targets[@]}"; do
      if [ "$(cat "$build_dir/smoke-$t.rc")" != 0 ]; then
        tail -n 40 "$build_dir/smoke-$t.log" >&2
        echo "fuzz: $t FAILED (log: $build_dir/smoke-$t.log, input: $build_dir/artifacts/)" >&2
        failed=1
      fi
      grep -E "^#[0-9]+[[:space:]]+DONE" "$build_dir/smoke-$t.log" | sed "s/^/$t: /" >&2 || true
    done
    exit "$failed" ;;
  run) shift; t="${1:?usage: scripts/fuzz.sh run TARGET [ARGS...]}"; shift; run "$t" "$@" ;;
  *) sed -n '2,15p' "$0" >&2; exit 2 ;;
esac
