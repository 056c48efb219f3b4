#!/usr/bin/env bash
# bench/full_fleet.sh — what a dispatch_next(100) call costs when the fleet is full
# (issue 9): 1,000 nodes whose every admissible slot is taken, 100,000 pending requests,
# next to a call that places 100 (after 100 attempts ended), in the same run.
#
# Each call is timed inside the server (clock_timestamp around the call, so connection
# and client time do not count), with the WAL it wrote and the request rows it locked or
# wrote; one transaction per call, like a scheduler loop.  Prints a markdown table of
# medians (and appends it to $BENCH_OUT/RESULTS.md when BENCH_APPEND=1).
#
# Uses the running cluster of the environment (PGHOST, PGPORT, PGUSER); creates and drops
# database sched_bench_full.  BENCH_QUICK=1: 200 nodes, 20,000 requests, fewer calls.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${BENCH_OUT:-$HERE}
: "${PGHOST:?PGHOST must point at the benchmark cluster}" "${PGPORT:?PGPORT must be set}"
export PGUSER=${PGUSER:-postgres}
unset PGDATABASE
DB=sched_bench_full
if [ "${BENCH_QUICK:-0}" = 1 ]; then NODES=200; QUEUE=20000; CALLS=15; else NODES=1000; QUEUE=100000; CALLS=31; fi

sql() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$DB" "$@"; }
say() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*"; }
cleanup() { [ "${BENCH_KEEP:-0}" = 1 ] || psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 || true; }
trap cleanup EXIT

psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB" >/dev/null
sql -c "CREATE EXTENSION pg_sched" -f "$HERE/load.sql" >/dev/null
sql <<SQL >/dev/null
SET session_replication_role = replica;
SELECT bench.load_fleet('node', 1, $NODES, 'build', true, 1, 100000, 1000000);
SELECT bench.load_requests(1, $QUEUE, 'build', now());
SQL
sql -c "VACUUM ANALYZE" >/dev/null

# one timed dispatch_next(100) per transaction; kind 'full' or 'places'
sql <<'SQL' >/dev/null
CREATE TABLE bench.full_fleet_calls (kind text, ms float8, wal_bytes bigint, placed int,
                                     tried int, request_rows_touched bigint);
CREATE FUNCTION bench.timed_dispatch(kind text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    t0 timestamptz; t1 timestamptz; w0 pg_lsn; w1 pg_lsn; placed int; tried int; touched bigint;
BEGIN
    w0 := pg_current_wal_insert_lsn();
    t0 := clock_timestamp();
    SELECT count(*) FILTER (WHERE outcome = 'DISPATCHED'), count(*) INTO placed, tried
      FROM sched.dispatch_next(100);
    t1 := clock_timestamp();
    w1 := pg_current_wal_insert_lsn();
    SELECT count(*) INTO touched FROM sched.request
     WHERE xmin = pg_current_xact_id()::xid OR xmax = pg_current_xact_id()::xid;
    INSERT INTO bench.full_fleet_calls
    VALUES (kind, extract(epoch FROM t1 - t0) * 1000, w1 - w0, placed, tried, touched);
END $$;
-- ends n live attempts as their workers would (finish_attempt), oldest first
CREATE FUNCTION bench.finish_some(n int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE a record; k int := 0;
BEGIN
    FOR a IN SELECT attempt_id, lease_version FROM sched.attempt
              WHERE status = 'DISPATCHED' ORDER BY dispatched_at, attempt_id LIMIT n LOOP
        PERFORM sched.finish_attempt(a.attempt_id, a.lease_version, 'SUCCEEDED');
        k := k + 1;
    END LOOP;
    RETURN k;
END $$;
SQL

say "filling the fleet ($NODES nodes, one slot each; $QUEUE requests pending)"
for _ in $(seq 1 $(( NODES / 100 + 5 ))); do
    n=$(sql -c "SELECT count(*) FROM sched.dispatch_next(100) WHERE outcome = 'DISPATCHED'")
    [ "$n" -eq 0 ] && break
done
free=$(sql -c "SELECT count(*) FROM sched.worker w JOIN sched.node n USING (node_id)
                WHERE w.live_attempts < w.slots AND w.runtime_state = 'READY'
                  AND w.scheduling_status = 'ELIGIBLE' AND n.management_status = 'ACTIVE'
                  AND w.last_heartbeat > now() - interval '1 day' AND '1.0' = ANY (w.capability_versions)")
live=$(sql -c "SELECT count(*) FROM sched.attempt WHERE status = 'DISPATCHED'")
say "full: $live live attempts, $free free admissible slots, $(sql -c "SELECT count(*) FROM sched.request WHERE state = 'PENDING'") pending"

say "$CALLS calls on the full fleet, then $CALLS calls that each follow 100 finished attempts"
# one session, as a scheduler loop keeps (its fleet mirror stays warm), one transaction
# per statement; the first call of the session loads the mirror and is not counted
{
    echo "SELECT count(*) FROM sched.dispatch_next(100);"
    for _ in $(seq 1 "$CALLS"); do echo "SELECT bench.timed_dispatch('full');"; done
    for _ in $(seq 1 "$CALLS"); do
        echo "SELECT bench.finish_some(100);"
        echo "SELECT bench.timed_dispatch('places');"
    done
} | sql >/dev/null

SHAPES=$(sql -c "SELECT count(DISTINCT shape) FROM sched.request")
TABLE=$(sql <<'SQL'
SELECT format('| %s | %s | %s | %s | %s | %s | %s |',
              CASE kind WHEN 'full' THEN 'full fleet: nothing can be placed'
                        ELSE 'after 100 attempts ended: places 100' END,
              count(*),
              to_char(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms), 'FM990.00'),
              percentile_cont(0.5) WITHIN GROUP (ORDER BY placed),
              percentile_cont(0.5) WITHIN GROUP (ORDER BY tried),
              percentile_cont(0.5) WITHIN GROUP (ORDER BY request_rows_touched),
              to_char(percentile_cont(0.5) WITHIN GROUP (ORDER BY wal_bytes), 'FM999,999,990'))
  FROM bench.full_fleet_calls GROUP BY kind ORDER BY kind DESC;
SQL
)
REPORT=$(cat <<EOF

## Issue 9: dispatch_next(100) on a full fleet ($(date -u +%Y-%m-%d), bench/full_fleet.sh)

$NODES nodes (one slot each, every admissible one taken), $QUEUE requests pending in
$SHAPES shapes; medians of the calls, each timed inside the server in its own
transaction, in one session, side by side in one run.

| call | calls | ms (median) | placed | rows returned | request rows locked or written | WAL bytes |
| --- | ---: | ---: | ---: | ---: | ---: | ---: |
$TABLE
EOF
)
echo "$REPORT"
[ "${BENCH_APPEND:-0}" = 1 ] && echo "$REPORT" >>"$OUT/RESULTS.md"
exit 0
