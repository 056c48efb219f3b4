#!/usr/bin/env bash
# test/unit/fuzz.sh — builds the libFuzzer targets of the placement core with
# -fsanitize=fuzzer,address,undefined and runs each for a bounded number of executions.
#
#   bash test/unit/fuzz.sh [long|short] [TARGET...]
#
#   long   (default) FUZZ_RUNS executions per target, default 2,000,000: 14 million over
#          the seven targets of test/unit/fuzz_targets, plus FUZZ_PLACEMENT_RUNS (default
#          200,000) of the older all-in-one harness test/unit/fuzz_placement.c
#   short  for `make test`: 60,000 per target, 10,000 of fuzz_placement (430,000 in all)
#
#   TARGET  labels label_expr admission score rank summary preempt placement (default: all)
#
# Environment: FUZZ_RUNS, FUZZ_PLACEMENT_RUNS (per-target executions), FUZZ_CC (default
# clang; libFuzzer comes with Debian's libclang-rt-dev, which clang only recommends),
# FUZZ_BIN_DIR (default test/unit/fuzz_targets/bin, ignored by git), FUZZ_CORPUS_DIR
# (keep and grow corpora there, one subdirectory per target; default: a temporary
# directory), FUZZ_MAX_SECONDS (time bound per target, default 3600).
#
# Every input starts from an empty corpus in a temporary directory (removed at the end
# unless something failed).  A property violation abort()s, a sanitizer report is
# fatal (-fno-sanitize-recover=all); libFuzzer then saves the input as a crash file,
# whose path and replay command are printed.  Prints executions and executions per
# second per target (wall clock), and exits non-zero if any target failed.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"

mode=long
if [ $# -gt 0 ] && { [ "$1" = long ] || [ "$1" = short ]; }; then mode=$1; shift; fi
if [ "$mode" = short ]; then
    RUNS=${FUZZ_RUNS:-60000}
    PLACEMENT_RUNS=${FUZZ_PLACEMENT_RUNS:-10000}
else
    RUNS=${FUZZ_RUNS:-2000000}
    PLACEMENT_RUNS=${FUZZ_PLACEMENT_RUNS:-200000}
fi
MAX_SECONDS=${FUZZ_MAX_SECONDS:-3600}
CC=${FUZZ_CC:-clang}
BIN=${FUZZ_BIN_DIR:-$ROOT/test/unit/fuzz_targets/bin}
ALL_TARGETS=(labels label_expr admission score rank summary preempt placement)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${ALL_TARGETS[@]}")

WORK=$(mktemp -d "${TMPDIR:-/tmp}/pg_sched-fuzz.XXXXXX")
keep_work=0
cleanup() { [ $keep_work -eq 1 ] || rm -rf "$WORK"; }
trap cleanup EXIT

printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void) d; (void) n; return 0; }\n' >"$WORK/probe.c"
if ! command -v "$CC" >/dev/null || ! "$CC" -fsanitize=fuzzer,address,undefined -o "$WORK/probe" "$WORK/probe.c" 2>"$WORK/probe.log"; then
    echo "fuzz.sh: $CC cannot build libFuzzer targets (install clang and its runtime: apt-get install clang libclang-rt-dev)" >&2
    cat "$WORK/probe.log" >&2 || true
    exit 1
fi

source_of() {
    if [ "$1" = placement ]; then echo test/unit/fuzz_placement.c; else echo "test/unit/fuzz_targets/fuzz_$1.c"; fi
}

mkdir -p "$BIN"
echo "=== building ${targets[*]} with $CC -fsanitize=fuzzer,address,undefined"
pids=()
for t in "${targets[@]}"; do
    src=$(source_of "$t")
    [ -f "$src" ] || { echo "fuzz.sh: no target $t ($src)" >&2; exit 2; }
    "$CC" -std=c99 -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
        -fno-sanitize-recover=all -Wall -Wextra -Werror -Wno-missing-field-initializers -Wno-unused-function \
        -Iinclude -Itest/unit -o "$BIN/fuzz_$t" "$src" src/placement.c 2>"$WORK/build-$t.log" &
    pids+=($!)
done
build_failed=0
for i in "${!pids[@]}"; do
    if ! wait "${pids[$i]}"; then
        echo "build of ${targets[$i]} failed:"; cat "$WORK/build-${targets[$i]}.log"; build_failed=1
    fi
done
[ $build_failed -eq 0 ] || { keep_work=1; exit 1; }

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:abort_on_error=1}

failed=()
total_runs=0
t_start=$(date +%s.%N)
printf '\n%-10s %12s %9s %10s  %s\n' target executions seconds execs/s "corpus (inputs), coverage"
for t in "${targets[@]}"; do
    runs=$RUNS
    [ "$t" = placement ] && runs=$PLACEMENT_RUNS
    if [ -n "${FUZZ_CORPUS_DIR:-}" ]; then corpus="$FUZZ_CORPUS_DIR/$t"; else corpus="$WORK/corpus/$t"; fi
    mkdir -p "$corpus" "$WORK/artifacts"
    log="$WORK/$t.log"
    rc=0
    t0=$(date +%s.%N)
    "$BIN/fuzz_$t" -runs="$runs" -max_total_time="$MAX_SECONDS" -max_len=4096 -timeout=20 \
        -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$WORK/artifacts/$t-" \
        "$corpus" >"$log" 2>&1 || rc=$?
    t1=$(date +%s.%N)
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    execs=${execs:-0}
    cov=$(grep -E '^#[0-9]+.*(DONE|cov:)' "$log" | tail -n 1 | sed -E 's/.*(cov: [0-9]+).*(corp: [0-9]+).*/\2, \1/')
    total_runs=$((total_runs + execs))
    awk -v t="$t" -v e="$execs" -v a="$t0" -v b="$t1" -v c="$cov" \
        'BEGIN { s = b - a; printf "%-10s %12d %9.1f %10.0f  %s\n", t, e, s, (s > 0 ? e / s : 0), c }'
    if [ $rc -ne 0 ] || grep -qE 'runtime error:|ERROR: (Address|Leak|UndefinedBehavior)Sanitizer|property violated|deadly signal' "$log"; then
        failed+=("$t")
        keep_work=1
        echo "--- $t failed (exit $rc), log $log:"
        grep -E -B2 -A25 'property violated|runtime error:|ERROR: |deadly signal' "$log" | head -n 60
        for a in "$WORK/artifacts/$t-"*; do
            [ -e "$a" ] || continue
            echo "crash input: $a"
            echo "replay: $CC -std=c99 -g -DFUZZ_STANDALONE_MAIN -fsanitize=address,undefined -Iinclude -Itest/unit -o /tmp/replay $(source_of "$t") src/placement.c && /tmp/replay $a"
        done
    fi
done
t_end=$(date +%s.%N)
awk -v e="$total_runs" -v a="$t_start" -v b="$t_end" \
    'BEGIN { s = b - a; printf "%-10s %12d %9.1f %10.0f\n", "total", e, s, (s > 0 ? e / s : 0) }'

if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz.sh: ${#failed[@]} target(s) failed: ${failed[*]} (logs and crash inputs in $WORK)"
    exit 1
fi
echo "fuzz.sh: ${#targets[@]} targets, $total_runs executions, no failure"
