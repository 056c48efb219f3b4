#!/usr/bin/env bash
# bench/diagnostics.sh — issue 4's cost target: every operator view and function well
# under a second on a fleet of 10,000 nodes and 100,000 pending requests.
#
# Uses the cluster of the environment (PGHOST, PGPORT, PGUSER), creates database
# sched_bench_diag (dropped at the end, also on failure), loads the fleet and queue with
# fixed arithmetic, times each query 5 times (psql \timing, after one warm-up run) and
# appends a table of medians to $BENCH_OUT/RESULTS.md (default bench/RESULTS.md).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${BENCH_OUT:-$HERE}
NODES=${BENCH_DIAG_NODES:-10000}
PENDING=${BENCH_DIAG_PENDING:-100000}
DB=sched_bench_diag
export PGUSER=${PGUSER:-postgres}
: "${PGHOST:?PGHOST must point at the benchmark cluster}" "${PGPORT:?PGPORT must be set}"

psql_q() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
cleanup() { psql_q -d postgres -c "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1 || true; }
trap cleanup EXIT
[ -n "${BENCH_KEEP:-}" ] && trap - EXIT

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
  FROM (SELECT g, '2030-01-01 11:00:00+00'::timestamptz + g * interval '30 ms' AS ts
          FROM generate_series(1, $PENDING) g) x;
ANALYZE;
SQL

AT="'2030-01-01 12:00:00+00'"
RID=$(psql_q -d "$DB" -Atc "SELECT min(request_id) + 123 FROM sched.request")
declare -A QUERIES=(
    [node_overview]="SELECT count(*) FROM sched.node_overview($AT)"
    [pending]="SELECT count(*) FROM sched.pending($AT)"
    [queue_stats]="SELECT count(*) FROM sched.queue_stats($AT)"
    [attempt_overview]="SELECT count(*) FROM sched.attempt_overview($AT)"
    [explain]="SELECT length(sched.explain($RID, $AT))"
    [qualification_reasons]="SELECT count(*) FROM sched.qualification_reasons($RID, $AT)"
)
ORDER="node_overview pending queue_stats attempt_overview explain qualification_reasons"
SHAPES=$(psql_q -d "$DB" -Atc "SELECT count(*) FROM (SELECT DISTINCT capability, capability_version, required_labels, min_cpu_millis, min_memory_mb, min_gpus, reserve_cpu_millis, reserve_memory_mb, reserve_gpus, node_id FROM sched.request WHERE state = 'PENDING') s")

rows=""
for name in $ORDER; do
    q=${QUERIES[$name]}
    times=()
    psql_q -d "$DB" -c "$q" >/dev/null              # warm-up
    for _ in 1 2 3 4 5; do
        ms=$(psql_q -d "$DB" -c '\timing on' -c "$q" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p')
        times+=("$ms")
    done
    median=$(printf '%s\n' "${times[@]}" | sort -n | sed -n 3p)
    echo "[diagnostics] $name: median ${median} ms (runs: ${times[*]})"
    rows+="| \`sched.$name\` | ${median} | ${times[*]} |"$'\n'
done

{
    echo
    echo "## Operator diagnostics (issue 4)"
    echo
    echo "$NODES nodes (one worker each, 4 capabilities), $PENDING pending requests of 20 tenants"
    echo "in $SHAPES distinct admission shapes; every call with a fixed \`at\`. Medians of 5 runs"
    echo "after a warm-up, from psql \`\\timing\` (client round trip included). Target: well under"
    echo "a second each."
    echo
    echo "| query | median ms | runs ms |"
    echo "|---|---:|---|"
    printf '%s' "$rows"
    echo
    echo "\`pending\` evaluates admission once per distinct shape over the capability's whole"
    echo "fleet (src/diagnostics.c), so its cost grows with nodes x shapes, not nodes x requests."
} >>"$OUT/RESULTS.md"
echo "[diagnostics] appended to $OUT/RESULTS.md"
