#!/usr/bin/env bash
# bench/diagnostics.sh — issue 4's cost target: every operator view and function well
# under a second on a fleet of 10,000 nodes and 100,000 pending requests; and issue 16's
# (target 5): sched.pending within 200 ms there, and with 1,000,000 pending requests
# sched.queue_stats and the first 100 rows of sched.pending within 1 s each.
#
# Uses the cluster of the environment (PGHOST, PGPORT, PGUSER), creates database
# sched_bench_diag (dropped at the end, also on failure), loads the fleet and queue with
# fixed arithmetic, times each query 5 times (psql \timing, after one warm-up run), then
# grows the queue to 1,000,000 (the same generator, two loaders at once) and times the two
# queries of issue 16 3 times each (after a warm-up; a statement that exceeds
# BENCH_DIAG_TIMEOUT is cancelled and reported as such), and appends a table of medians to
# $BENCH_OUT/RESULTS.md (default bench/RESULTS.md).
#   env: BENCH_DIAG_NODES (10000), BENCH_DIAG_PENDING (100000), BENCH_DIAG_BIG (1000000;
#        200000 with BENCH_QUICK=1), BENCH_DIAG_TIMEOUT (30 s), BENCH_DIAG_SLOW (2 s: a
#        query whose warm-up takes longer, twice its target, runs once), BENCH_KEEP=1
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${BENCH_OUT:-$HERE}
NODES=${BENCH_DIAG_NODES:-10000}
PENDING=${BENCH_DIAG_PENDING:-100000}
if [ "${BENCH_QUICK:-0}" = 1 ]; then BIG=${BENCH_DIAG_BIG:-200000}; else BIG=${BENCH_DIAG_BIG:-1000000}; fi
TIMEOUT=${BENCH_DIAG_TIMEOUT:-30}
SLOW=${BENCH_DIAG_SLOW:-2}
T_START=$(date +%s)
DB=sched_bench_diag
export PGUSER=${PGUSER:-postgres}
: "${PGHOST:?PGHOST must point at the benchmark cluster}" "${PGPORT:?PGPORT must be set}"

psql_q() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
# grouped N: 1000000 -> 1,000,000
grouped() { LC_ALL=C awk -v x="$1" 'BEGIN { s = sprintf("%d", x); o = ""
    while (length(s) > 3) { o = "," substr(s, length(s) - 2) o; s = substr(s, 1, length(s) - 3) }
    print s o }'; }
cleanup() { psql_q -d postgres -c "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1 || true; }
trap cleanup EXIT
[ -n "${BENCH_KEEP:-}" ] && trap - EXIT

# requests FIRST LAST MS: the INSERT of requests FIRST..LAST, request g queued at 11:00 + g * MS ms
# (every one before the fixed `at`, 12:00); 20 tenants, 4 capabilities, a spread of shapes
requests() {
    cat <<SQL
INSERT INTO sched.request (execution_id, step_id, attempt_number, tenant, priority, capability,
                           capability_version, required_labels, preferred_labels, min_cpu_millis,
                           min_gpus, reserve_gpus, state, queued_at, available_at, sort_key, tries,
                           last_reason)
SELECT md5('e' || (g % 20))::uuid, md5('s' || g)::uuid, 1, 'tenant-' || (g % 20), g % 5,
       (ARRAY['render', 'transcode', 'train', 'index'])[1 + g % 4],
       CASE WHEN g % 50 = 0 THEN '3.0' ELSE '1.0' END,
       CASE WHEN g % 7 = 0 THEN jsonb_build_object('zone', 'z' || (g % 8)) ELSE '{}' END,
       CASE WHEN g % 3 = 0 THEN '{"tier": "fast"}'::jsonb ELSE '{}' END,
       (g % 9) * 4000, CASE WHEN g % 4 = 2 THEN 1 + g % 3 ELSE 0 END,
       CASE WHEN g % 4 = 2 THEN 1 ELSE 0 END,
       'PENDING', ts, ts, sched._queue_key(g % 5, ts), g % 4, NULL
  FROM (SELECT g, '2030-01-01 11:00:00+00'::timestamptz + g * interval '$3 ms' AS ts
          FROM generate_series($1, $2) g) x;
SQL
}

echo "[diagnostics] loading $NODES nodes and $PENDING pending requests"
cleanup
psql_q -d postgres -c "CREATE DATABASE $DB"
psql_q -d "$DB" <<SQL
CREATE EXTENSION pg_sched;
-- the fleet: 4 capabilities, labels, a few draining nodes, some stale or cordoned workers
INSERT INTO sched.node (node_id, management_status, labels, cpu_millis, memory_mb, gpus, weight)
SELECT 'node-' || lpad(g::text, 6, '0'),
       CASE WHEN g % 97 = 0 THEN 'DRAINING' ELSE 'ACTIVE' END,
       jsonb_build_object('zone', 'z' || (g % 8), 'tier', CASE WHEN g % 5 = 0 THEN 'fast' ELSE 'standard' END),
       (4 + g % 8 * 4) * 1000, (8 + g % 8 * 8) * 1024, CASE WHEN g % 10 = 0 THEN 4 ELSE 0 END,
       50 + g % 151
  FROM generate_series(1, $NODES) g;
INSERT INTO sched.worker (worker_id, node_id, capability, capability_versions, slots,
                          scheduling_status, last_heartbeat, generation)
SELECT md5('w' || g)::uuid, 'node-' || lpad(g::text, 6, '0'),
       (ARRAY['render', 'transcode', 'train', 'index'])[1 + g % 4], ARRAY['1.0', '2.0'], 4,
       CASE WHEN g % 89 = 0 THEN 'CORDONED' ELSE 'ELIGIBLE' END,
       '2030-01-01 12:00:00+00'::timestamptz - CASE WHEN g % 53 = 0 THEN interval '10 min' ELSE interval '5 s' END,
       1
  FROM generate_series(1, $NODES) g;
-- the queue: 20 tenants, 4 capabilities, a spread of shapes (some impossible)
INSERT INTO sched.execution (execution_id, tenant, status, created_at, updated_at)
SELECT md5('e' || t)::uuid, 'tenant-' || t, 'QUEUED', '2030-01-01', '2030-01-01' FROM generate_series(0, 19) t;
$(requests 1 "$PENDING" 30)
ANALYZE;
SQL

AT="'2030-01-01 12:00:00+00'"
RID=$(psql_q -d "$DB" -Atc "SELECT min(request_id) + 123 FROM sched.request")
declare -A QUERIES=(
    [node_overview]="SELECT count(*) FROM sched.node_overview($AT)"
    # (count(blocked): a query that reads no explanation computes none, the function
    # being inlined as the view is)
    [pending]="SELECT count(blocked) FROM sched.pending($AT)"
    [pending_view]="SELECT count(blocked) FROM sched.pending"
    [queue_stats]="SELECT count(*) FROM sched.queue_stats($AT)"
    [attempt_overview]="SELECT count(*) FROM sched.attempt_overview($AT)"
    [explain]="SELECT length(sched.explain($RID, $AT))"
    [qualification_reasons]="SELECT count(*) FROM sched.qualification_reasons($RID, $AT)"
)
ORDER="node_overview pending pending_view queue_stats attempt_overview explain qualification_reasons"
SHAPES=$(psql_q -d "$DB" -Atc "SELECT count(*) FROM (SELECT DISTINCT capability, capability_version, required_labels, min_cpu_millis, min_memory_mb, min_gpus, reserve_cpu_millis, reserve_memory_mb, reserve_gpus, node_id FROM sched.request WHERE state = 'PENDING') s")

# timed NAME QUERY N: a warm-up, then N runs of QUERY (psql \timing, client round trip
# included), each cancelled after $TIMEOUT s; sets TIMES (ms, or ">N000" for a cancelled run)
# and MEDIAN (empty when a run was cancelled).  A query whose warm-up took longer than
# $SLOW s is not repeated: its warm-up is its only run (marked with a *), so that a slow view
# costs the suite one run, not N + 1.
timed() {
    local name=$1 q=$2 n=$3 out ms k
    TIMES=(); MEDIAN=""
    for k in $(seq 0 "$n"); do
        out=$(psql_q -d "$DB" -o /dev/null -c "SET statement_timeout = '${TIMEOUT}s'" -c '\timing on' -c "$q" 2>&1) || true
        ms=$(printf '%s\n' "$out" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | tail -1)
        if printf '%s\n' "$out" | grep -q 'canceling statement due to statement timeout'; then
            TIMES+=(">$((TIMEOUT * 1000))")
            echo "[diagnostics] $name: cancelled after ${TIMEOUT} s"
            return 0
        fi
        [ -n "$ms" ] || { printf '%s\n' "$out" >&2; echo "[diagnostics] $name failed" >&2; exit 1; }
        if (( k == 0 )); then                     # run 0 is the warm-up
            if awk -v a="$ms" -v b="$SLOW" 'BEGIN { exit !(a > b * 1000) }'; then
                TIMES=("${ms}*"); MEDIAN=$ms
                echo "[diagnostics] $name: the warm-up took $ms ms, more than $SLOW s: not repeated"
                return 0
            fi
        else
            TIMES+=("$ms")
        fi
    done
    MEDIAN=$(printf '%s\n' "${TIMES[@]}" | sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
}
# verdict MEDIAN LIMIT_MS
verdict() { if [ -z "$1" ]; then echo "**no**"; elif awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b) }'; then echo "**yes**"; else echo "**no**"; fi; }

rows=""
for name in $ORDER; do
    q=${QUERIES[$name]}
    timed "$name" "$q" 5
    target="-"; met="-"
    if [ "$name" = pending ] || [ "$name" = pending_view ]; then target="<= 200 ms (issue 16)"; met=$(verdict "$MEDIAN" 200); fi
    echo "[diagnostics] $name: median ${MEDIAN:-n/a} ms (runs: ${TIMES[*]})"
    label="sched.$name"; [ "$name" = pending ] && label="sched.pending(at) (count(blocked))"
    [ "$name" = pending_view ] && label="sched.pending (the view: count(blocked))"
    rows+="| \`$label\` | $(grouped "$PENDING") | ${MEDIAN:-cancelled} | ${TIMES[*]} | $target | $met |"$'\n'
done
echo "[diagnostics] $NODES nodes, $PENDING pending: $(( $(date +%s) - T_START )) s so far"

# ---- issue 16: the queue grown to $BIG pending requests ------------------------------------
# requests PENDING+1 .. BIG by the same generator, 3 ms apart from 11:00 (the last at 11:50,
# before the fixed `at`), in two concurrent halves
if (( BIG > PENDING )); then
    echo "[diagnostics] growing the queue to $BIG pending requests"
    t_load=$(date +%s)
    mid=$(( (PENDING + 1 + BIG) / 2 ))
    psql_q -d "$DB" -c "$(requests $((PENDING + 1)) "$mid" 3)" >/dev/null & p1=$!
    psql_q -d "$DB" -c "$(requests $((mid + 1)) "$BIG" 3)" >/dev/null & p2=$!
    wait "$p1"; wait "$p2"
    psql_q -d "$DB" -c "VACUUM (ANALYZE) sched.request" >/dev/null
    have=$(psql_q -d "$DB" -Atc "SELECT count(*) FROM sched.request WHERE state = 'PENDING'")
    echo "[diagnostics] $have pending requests (load and vacuum: $(( $(date +%s) - t_load )) s)"
    BIG_SHAPES=$(psql_q -d "$DB" -Atc "SELECT count(*) FROM (SELECT DISTINCT capability, capability_version, required_labels, min_cpu_millis, min_memory_mb, min_gpus, reserve_cpu_millis, reserve_memory_mb, reserve_gpus, node_id FROM sched.request WHERE state = 'PENDING') s")
    declare -A BIG_QUERIES=(
        [queue_stats]="SELECT * FROM sched.queue_stats($AT)"
        [pending_first_100]="SELECT * FROM sched.pending($AT) LIMIT 100"
        [pending_view_first_100]="SELECT * FROM sched.pending LIMIT 100"
    )
    for name in queue_stats pending_view_first_100 pending_first_100; do
        q=${BIG_QUERIES[$name]}
        timed "$name" "$q" 3
        echo "[diagnostics] $name at $have pending: median ${MEDIAN:-n/a} ms (runs: ${TIMES[*]})"
        label="sched.$name"; [ "$name" = pending_first_100 ] && label="sched.pending(at) LIMIT 100"
        [ "$name" = pending_view_first_100 ] && label="sched.pending LIMIT 100 (the view)"
        rows+="| \`$label\` | $(grouped "$have") | ${MEDIAN:-cancelled} | ${TIMES[*]} | <= 1,000 ms (issue 16) | $(verdict "$MEDIAN" 1000) |"$'\n'
    done
fi
echo "[diagnostics] done in $(( $(date +%s) - T_START )) s"

{
    echo
    echo "## Operator diagnostics (issues 4 and 16)"
    echo
    echo "$NODES nodes (one worker each, 4 capabilities), $PENDING pending requests of 20 tenants"
    echo "in $SHAPES distinct admission shapes; every call with a fixed \`at\` but the view's (\`now()\`, before the data's times: the same work). Medians of 5 runs"
    echo "after a warm-up, from psql \`\\timing\` (client round trip included). Target: well under"
    echo "a second each (issue 4), \`sched.pending\` within 200 ms (issue 16).$( (( BIG > PENDING )) && echo " Then the queue grown to $(grouped "$have") pending (the same generator; $BIG_SHAPES shapes): \`sched.queue_stats\` and the first 100 rows of \`sched.pending\` (\`SELECT * FROM sched.pending LIMIT 100\`, the view, as an operator reads it, and the function \`sched.pending(at)\` the same way), medians of 3 runs after a warm-up, within 1 s each (issue 16).")"
    echo "A run is cancelled after $TIMEOUT s; a query whose warm-up took more than $SLOW s is not repeated, and its warm-up (marked *) is its figure."
    echo
    echo "| query | pending | median ms | runs ms | target | met |"
    echo "|---|---:|---:|---|---|---|"
    printf '%s' "$rows"
    echo
    echo "\`pending\` evaluates admission once per distinct shape over the capability's whole"
    echo "fleet, taken in classes of nodes alike for admission (src/diagnostics.c, src/fleet.c),"
    echo "so its cost grows with node classes x shapes plus nodes plus requests."
} >>"$OUT/RESULTS.md"
echo "[diagnostics] appended to $OUT/RESULTS.md"
