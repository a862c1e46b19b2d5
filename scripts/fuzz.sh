#!/usr/bin/env bash
# Builds and runs the libFuzzer targets (tests/fuzz/) under AddressSanitizer +
# UndefinedBehaviorSanitizer. docs/FUZZING.md explains the targets and records
# the long runs.
#
#   scripts/fuzz.sh build                 configure and build build-fuzz/ (clang)
#   scripts/fuzz.sh smoke [SECONDS]       every target for SECONDS (default 20) each;
#                                         exits non-zero on the first crash
#   scripts/fuzz.sh run TARGET [ARGS...]  one target on its seed corpus, with extra
#                                         libFuzzer ARGS (e.g. -runs=10000000)
#
# Targets: npy npz safetensors config compare checkpoint decode_parallel
# llama_params. New inputs a run finds go into build-fuzz/corpus/TARGET (the
# committed seeds in tests/fuzz/corpus/ are only read); a crashing input is
# written to build-fuzz/artifacts/.
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir="${MHA_FUZZ_BUILD_DIR:-build-fuzz}"
targets=(npy npz safetensors config compare checkpoint decode_parallel llama_params)

# -O1 -g1 by default (MHA_FUZZ_OPT overrides): about half the compile time of
# -O2 -g for the whole library, which the test command's smoke run pays on
# every CI run; line tables are all a crash report needs.
build() {
  cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
        -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="${MHA_FUZZ_OPT:--O1 -g1} -DNDEBUG" \
        -DMHA_FUZZ=ON -DMHA_BUILD_TESTS=OFF >/dev/null
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
    for t in "${targets[@]}"; do
      echo "fuzz: $t for ${seconds}s" >&2
      if ! run "$t" -max_total_time="$seconds" > "$build_dir/smoke-$t.log" 2>&1; then
        tail -n 40 "$build_dir/smoke-$t.log" >&2
        echo "fuzz: $t FAILED (log: $build_dir/smoke-$t.log, input: $build_dir/artifacts/)" >&2
        exit 1
      fi
      grep -E "^#[0-9]+[[:space:]]+DONE" "$build_dir/smoke-$t.log" >&2 || true
    done ;;
  run) shift; t="${1:?usage: scripts/fuzz.sh run TARGET [ARGS...]}"; shift; run "$t" "$@" ;;
  *) sed -n '2,15p' "$0" >&2; exit 2 ;;
esac
