#!/usr/bin/env bash
# test/unit/sanitize.sh — the placement core's unit tests (test/unit/test_placement.c +
# src/placement.c) under AddressSanitizer and UndefinedBehaviorSanitizer, then the
# libFuzzer harness test/unit/fuzz_placement.c under the same sanitizers for a bounded
# number of executions.  Exit status non-zero on any failed test or sanitizer report.
#
#   bash test/unit/sanitize.sh
#
# Environment:
#   SANITIZE_CC             compilers to use, space separated (default: clang and gcc,
#                           those that are installed; at least one is needed)
#   SANITIZE_FUZZ_RUNS      executions of fuzz_placement (default 20000; 0 skips it)
#   SANITIZE_FUZZ_SECONDS   time bound for them (default 120)
#   SANITIZE_BIN_DIR        where the binaries go (default test/unit, ignored by git:
#                           test_placement_asan-<cc>, fuzz_placement_asan)
#
# No PostgreSQL needed.  -fno-sanitize-recover=all makes every UBSan report fatal;
# the ASan options make leaks, use-after-return and bad string arguments fatal too.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
BIN=${SANITIZE_BIN_DIR:-$ROOT/test/unit}
mkdir -p "$BIN"
FUZZ_RUNS=${SANITIZE_FUZZ_RUNS:-20000}
FUZZ_SECONDS=${SANITIZE_FUZZ_SECONDS:-120}

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:halt_on_error=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:abort_on_error=1}

SAN=(-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g -O1)
WARN=(-std=c99 -Wall -Wextra -Werror -Wno-missing-field-initializers -Iinclude)

if [ -n "${SANITIZE_CC:-}" ]; then
    read -r -a compilers <<<"$SANITIZE_CC"
else
    compilers=()
    for cc in clang gcc; do command -v "$cc" >/dev/null && compilers+=("$cc"); done
fi
[ ${#compilers[@]} -gt 0 ] || { echo "sanitize.sh: neither clang nor gcc found" >&2; exit 1; }

failed=0
# Runs "$@", its output to a log; fails on a non-zero status or a sanitizer report.
run_checked() {
    local name=$1 log=$2; shift 2
    local rc=0 t0 t1
    t0=$(date +%s.%N)
    "$@" >"$log" 2>&1 || rc=$?
    t1=$(date +%s.%N)
    if [ $rc -ne 0 ] || grep -qE 'runtime error:|ERROR: (Address|Leak|UndefinedBehavior)Sanitizer|SUMMARY: [A-Za-z]*Sanitizer' "$log"; then
        echo "FAIL $name (exit $rc) — log $log:"
        tail -n 60 "$log"
        failed=$((failed + 1))
    else
        printf 'ok   %s (%.1f s): %s\n' "$name" "$(awk "BEGIN { print $t1 - $t0 }")" "$(grep -E 'passed|^Done' "$log" | tail -n 1)"
    fi
}

LOGS=$(mktemp -d "${TMPDIR:-/tmp}/pg_sched-sanitize.XXXXXX")
for cc in "${compilers[@]}"; do
    out="$BIN/test_placement_asan-$cc"
    echo "=== $cc: test_placement with -fsanitize=address,undefined"
    "$cc" "${WARN[@]}" "${SAN[@]}" -o "$out" test/unit/test_placement.c src/placement.c
    run_checked "test_placement ($cc)" "$LOGS/test_placement-$cc.log" "$out"
done

if [ "$FUZZ_RUNS" -gt 0 ]; then
    echo "=== fuzz_placement under libFuzzer + address,undefined ($FUZZ_RUNS runs, at most $FUZZ_SECONDS s)"
    probe="$LOGS/probe.c"
    printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void) d; (void) n; return 0; }\n' >"$probe"
    if command -v clang >/dev/null && clang -fsanitize=fuzzer -o "$LOGS/probe" "$probe" 2>/dev/null; then
        clang -std=c99 -Iinclude -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
            -fno-omit-frame-pointer -g -O1 -o "$BIN/fuzz_placement_asan" \
            test/unit/fuzz_placement.c src/placement.c
        mkdir -p "$LOGS/corpus" "$LOGS/artifacts"
        run_checked "fuzz_placement" "$LOGS/fuzz_placement.log" \
            "$BIN/fuzz_placement_asan" -runs="$FUZZ_RUNS" -max_total_time="$FUZZ_SECONDS" -max_len=512 \
            -timeout=10 -print_final_stats=1 -artifact_prefix="$LOGS/artifacts/" "$LOGS/corpus"
        grep -E '^stat::(number_of_executed_units|average_exec_per_sec)' "$LOGS/fuzz_placement.log" | sed 's/^/     /' || true
    else
        echo "skip fuzz_placement: clang with libFuzzer (-fsanitize=fuzzer) is not installed"
    fi
fi

if [ $failed -eq 0 ]; then
    rm -rf "$LOGS"
    echo "sanitize.sh: all clean"
else
    echo "sanitize.sh: $failed failed (logs and crash inputs in $LOGS)"
    exit 1
fi
