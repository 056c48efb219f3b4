#!/usr/bin/env bash
# limits.sh — pgbench concurrency check of the limits (issue 14): concurrency keys, rate
# limits and tenant quotas under 16 concurrent clients, checked afterwards against the
# whole history of the attempts, at every moment of the run.
#
# Uses the running cluster of the environment (PGHOST, PGPORT, PGUSER: a superuser;
# `make test` and `test/harness.sh up` provide one).  Steps:
#   1. (re)creates database $DB and two login roles (cluster-wide, kept for the next
#      run): sched_pgbench_limits_admin (granted sched_admin: the fleet and the limits)
#      and sched_pgbench_limits_app (granted sched_scheduler and sched_worker: it
#      registers the workers, submits, dispatches, starts and finishes, as the pgbench
#      clients); loads limits_setup.sql: 12 nodes, 48 slots, concurrency limits on 3 keys
#      (2, 4, 3 live), rate limits on 3 (3 per 2 s, 6 per 5 s, 5 per 3 s; one key has
#      both), quotas on 4 tenants (live attempts, cpu + gpus, live + memory, gpus), a key
#      and a tenant without limits, and $REQUESTS requests over every combination;
#   2. runs pgbench -n -c 16 -j 4 -T $DURATION as the app role with five scripts:
#        limits_dispatch_attempt.pgbench @6  dispatch_attempt of a random queued request
#        limits_dispatch_next.pgbench    @2  dispatch_next of 1 to 3 requests
#        limits_submit.pgbench           @1  one more request, random key and tenant
#        limits_start.pgbench            @1  start_attempt of a DISPATCHED attempt
#        limits_finish.pgbench           @3  finish_attempt of a live one (frees its key's
#                                            and tenant's share; 1 in 5 FAILED: requeued)
#      every dispatch script records what each call answered and, in its next statement
#      (so after the dispatch committed), a stamp: clock_timestamp(); fails if pgbench
#      reports any failed transaction or an aborted client;
#   3. the history (sched.attempt with the stamps): an attempt is surely live from its
#      dispatch's stamp (the dispatch was committed by then) until its finished_at (the
#      finish's `at`, taken before it committed), and may be live from dispatched_at (the
#      dispatch's `at`, before its commit) until the finish committed.  The limits
#      count what is committed when a dispatch checks, so the check is on the sure
#      intervals: at no moment (events swept in time order, an end before a start at the
#      same time) does a key have more surely-live attempts than its concurrency limit,
#      or a tenant's surely-live attempts hold more than its quota on any dimension.  The
#      rate limit is defined on dispatched_at itself (each caller's `at`; the check counts
#      dispatches within `per` on both sides, so commit order does not matter): no window
#      [t, t + per) holds more than `dispatches` dispatches of the key, t being any
#      dispatch's dispatched_at (the fullest window starts at one).  What the recorded
#      times alone show (intervals [dispatched_at, finished_at)) is printed, not checked:
#      a dispatch whose `at` precedes a concurrent finish's `at` but which counted after
#      that finish committed looks, by the recorded times, like an overlap;
#   4. the limits were hit, or the check proves nothing: each of concurrency_limit,
#      rate_limited and tenant_quota_exceeded was answered (counted from the answers, and
#      sched.dispatch_stats grew by at least as many), and dispatchers met each other on
#      a key's and a tenant's lock ("... is being dispatched by another transaction");
#      every refusal names the key's or tenant's limit as it is and a use at or over it;
#   5. invariants.sql holds (with its three checks of the limits).
# Exits non-zero on the first failure.  Takes about 50 s (DURATION 35 s).
#   env: SCHED_LIMITS_DB (sched_pgbench_limits), SCHED_LIMITS_REQUESTS (6000),
#        SCHED_LIMITS_DURATION (35), SCHED_LIMITS_KEEP=1 keeps the database afterwards.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
TEST_SUITE=pgbench-limits
# shellcheck source=test/lib/common.sh
. "$HERE/../lib/common.sh"
DB=${SCHED_LIMITS_DB:-sched_pgbench_limits}
REQUESTS=${SCHED_LIMITS_REQUESTS:-6000}
DURATION=${SCHED_LIMITS_DURATION:-35}
CLIENTS=16
ADMIN=sched_pgbench_limits_admin
APP=sched_pgbench_limits_app
: "${PGHOST:?PGHOST must point at the test cluster}" "${PGPORT:?PGPORT must be set}"
export PGUSER=${PGUSER:-postgres}
unset PGDATABASE

PSQL=(psql -X -q -v ON_ERROR_STOP=1)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
q() { psql -X -At -F ' ' -v ON_ERROR_STOP=1 -d "$DB" -c "$1"; }

# ---- 1. roles, database, fleet, limits, queue -------------------------------------------
say "database $DB on $PGHOST:$PGPORT, $REQUESTS requests"
"${PSQL[@]}" -d postgres <<SQL
SET client_min_messages = warning;
DO \$\$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '$ADMIN') THEN CREATE ROLE $ADMIN LOGIN; END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '$APP') THEN CREATE ROLE $APP LOGIN; END IF;
END
\$\$;
DROP DATABASE IF EXISTS $DB WITH (FORCE);
CREATE DATABASE $DB;
SQL
"${PSQL[@]}" -d "$DB" -v requests="$REQUESTS" -v admin="$ADMIN" -v app="$APP" \
    -f "$HERE/limits_setup.sql" >"$WORK/setup.out"
read -r MIN_RID MAX_RID < <(q "SELECT min(request_id), max(request_id) FROM sched.request")
check_eq "limits_setup.sql queued the requests" "$((MAX_RID - MIN_RID + 1))" "$REQUESTS"
check_eq "limits set (concurrency, rate, quota)" \
    "$(q "SELECT (SELECT count(*) FROM sched.concurrency_limit) || '/' || (SELECT count(*) FROM sched.rate_limit)
                 || '/' || (SELECT count(*) FROM sched.tenant_quota)")" "3/3/4"

# dispatch_stats is cluster-wide, counted when a call returns: its growth over the run
stats() { q "SELECT coalesce(string_agg(r || '=' || c, ' ' ORDER BY r), '') FROM (
                 SELECT coalesce(reason, outcome) AS r, calls AS c FROM sched.dispatch_stats) s"; }
STATS_BEFORE=$(stats)

# ---- 2. pgbench ---------------------------------------------------------------------------
say "pgbench -n -c $CLIENTS -j 4 -T $DURATION as $APP"
rc=0
pgbench -n -c "$CLIENTS" -j 4 -T "$DURATION" --failures-detailed -U "$APP" \
    -D min_rid="$MIN_RID" -D max_rid="$MAX_RID" -D clients="$CLIENTS" \
    -f "$HERE/limits_dispatch_attempt.pgbench@6" -f "$HERE/limits_dispatch_next.pgbench@2" \
    -f "$HERE/limits_submit.pgbench@1" -f "$HERE/limits_start.pgbench@1" \
    -f "$HERE/limits_finish.pgbench@3" \
    "$DB" >"$WORK/pgbench.out" 2>"$WORK/pgbench.err" || rc=$?
STATS_AFTER=$(stats)
check_pgbench_run "$rc" "$WORK/pgbench.out" "$WORK/pgbench.err"
processed=$PGB_PROCESSED tps=$PGB_TPS
pass "pgbench: $processed transactions, tps $tps, none failed, no client aborted"
awk '/^SQL script/ { name = $4; sub(".*/", "", name) } /^ - [0-9]+ transactions/ { n = $2 }
     /^ - latency average/ { printf "   %-32s %6d transactions, latency average %s ms\n", name, n, $5 }' "$WORK/pgbench.out"

# ---- 3. the history ---------------------------------------------------------------------
# one row per attempt: its key, tenant, reservations, recorded times, and its dispatch's
# stamp (after the dispatch's commit)
"${PSQL[@]}" -d "$DB" <<'SQL'
CREATE TABLE public.limits_history AS
SELECT a.attempt_id, a.concurrency_key, a.tenant, a.reserve_cpu_millis AS cpu,
       a.reserve_memory_mb AS mem, a.reserve_gpus AS gpus, a.status, a.dispatched_at,
       a.finished_at, o.stamped_at, o.n AS outcomes
  FROM sched.attempt a
  LEFT JOIN (SELECT attempt_id, count(*) AS n, max(stamped_at) AS stamped_at
               FROM public.limits_outcome WHERE outcome = 'DISPATCHED' GROUP BY attempt_id) o
    ON o.attempt_id = a.attempt_id;
-- the events of the sure intervals [stamped_at, finished_at) of the attempts of a limited
-- key or tenant (an attempt that finished before its stamp was surely live at no moment);
-- at the same time an end (-1) comes before a start (+1): [s, e) is half open
CREATE TABLE public.limits_sure_events AS
SELECT h.concurrency_key, h.tenant, e.t, e.d, e.d * h.cpu AS cpu, e.d * h.mem AS mem, e.d * h.gpus AS gpus
  FROM public.limits_history h
 CROSS JOIN LATERAL (VALUES (h.stamped_at, 1), (h.finished_at, -1)) AS e(t, d)
 WHERE h.stamped_at < coalesce(h.finished_at, 'infinity') AND e.t IS NOT NULL;
-- the same, by the recorded times [dispatched_at, finished_at) (printed, not checked)
CREATE TABLE public.limits_recorded_events AS
SELECT h.concurrency_key, h.tenant, e.t, e.d, e.d * h.cpu AS cpu, e.d * h.mem AS mem, e.d * h.gpus AS gpus
  FROM public.limits_history h
 CROSS JOIN LATERAL (VALUES (h.dispatched_at, 1), (h.finished_at, -1)) AS e(t, d)
 WHERE h.dispatched_at < coalesce(h.finished_at, 'infinity') AND e.t IS NOT NULL;
SQL
read -r ATTEMPTS ENDED KEYED < <(q "SELECT count(*), count(finished_at), count(concurrency_key) FROM limits_history")
say "history: $ATTEMPTS attempts ($ENDED ended, $KEYED with a key)"
[ "$ATTEMPTS" -gt 0 ] || fail "no attempt was dispatched"
check_eq "every attempt has one DISPATCHED answer, stamped after dispatched_at" \
    "$(q "SELECT count(*) FROM limits_history WHERE outcomes IS DISTINCT FROM 1 OR NOT stamped_at >= dispatched_at")" 0
check_eq "every DISPATCHED answer is an attempt" \
    "$(q "SELECT count(*) FROM limits_outcome o WHERE outcome = 'DISPATCHED'
             AND NOT EXISTS (SELECT 1 FROM sched.attempt a WHERE a.attempt_id = o.attempt_id)")" 0
[ "$ENDED" -gt 0 ] || fail "no attempt ended: keys never freed up"

# the sweep of an events table: per key, the live count after each event
key_sweep() {   # key_sweep EVENTS_TABLE: lines "key peak limit moments_over"
    q "SELECT r.concurrency_key, max(r.live), l.max_live, count(*) FILTER (WHERE r.live > l.max_live)
         FROM (SELECT concurrency_key, sum(d) OVER (PARTITION BY concurrency_key ORDER BY t, d
                                                    ROWS UNBOUNDED PRECEDING) AS live
                 FROM $1) r
         JOIN sched.concurrency_limit l ON l.concurrency_key = r.concurrency_key
        GROUP BY r.concurrency_key, l.max_live ORDER BY 1"
}
tenant_sweep() {   # tenant_sweep EVENTS_TABLE: lines "tenant peaks limits moments_over"
    q "SELECT r.tenant, format('%s/%s/%s/%s', max(r.live), max(r.cpu), max(r.mem), max(r.gpus)),
              format('%s/%s/%s/%s', coalesce(l.max_live::text, '-'), coalesce(l.max_cpu_millis::text, '-'),
                     coalesce(l.max_memory_mb::text, '-'), coalesce(l.max_gpus::text, '-')),
              count(*) FILTER (WHERE r.live > l.max_live OR r.cpu > l.max_cpu_millis
                                  OR r.mem > l.max_memory_mb OR r.gpus > l.max_gpus)
         FROM (SELECT tenant,
                      sum(d) OVER w AS live, sum(cpu) OVER w AS cpu, sum(mem) OVER w AS mem,
                      sum(gpus) OVER w AS gpus
                 FROM $1
               WINDOW w AS (PARTITION BY tenant ORDER BY t, d ROWS UNBOUNDED PRECEDING)) r
         JOIN sched.tenant_quota l ON l.tenant = r.tenant
        GROUP BY r.tenant, l.max_live, l.max_cpu_millis, l.max_memory_mb, l.max_gpus ORDER BY 1"
}
# rate: for each dispatch of a rate-limited key at t, the key's dispatches in [t, t + per)
rate_windows() {   # rate_windows HISTORY_TABLE: lines "key fullest_window dispatches per windows_over"
    q "SELECT l.concurrency_key, max(w.n), l.dispatches, l.per, count(*) FILTER (WHERE w.n > l.dispatches)
         FROM sched.rate_limit l
         JOIN $1 a ON a.concurrency_key = l.concurrency_key
        CROSS JOIN LATERAL (SELECT count(*) AS n FROM $1 b
                             WHERE b.concurrency_key = l.concurrency_key
                               AND b.dispatched_at >= a.dispatched_at
                               AND b.dispatched_at < a.dispatched_at + l.per) w
        GROUP BY l.concurrency_key, l.dispatches, l.per ORDER BY 1"
}

over=0
while read -r key peak limit moments; do
    printf '   key %-8s surely live at most %s at once (limit %s)\n' "$key" "$peak" "$limit"
    [ "$moments" -eq 0 ] || { echo "   key $key: $moments moments over its limit" >&2; over=1; }
done < <(key_sweep limits_sure_events)
[ "$over" -eq 0 ] || fail "a key had more live attempts than its concurrency limit (above; table limits_sure_events, SCHED_LIMITS_KEEP=1 keeps it)"
pass "no key ever had more live attempts than its concurrency limit"

while read -r tenant peaks limits moments; do
    printf '   tenant %-8s surely held at most %s live/mcpu/MB/GPUs at once (quota %s)\n' "$tenant" "$peaks" "$limits"
    [ "$moments" -eq 0 ] || { echo "   tenant $tenant: $moments moments over its quota" >&2; over=1; }
done < <(tenant_sweep limits_sure_events)
[ "$over" -eq 0 ] || fail "a tenant's live attempts held more than its quota (above)"
pass "no tenant's live attempts ever held more than its quota, on any dimension"

while read -r key fullest dispatches per windows; do
    printf '   key %-8s at most %s dispatches in a window of %s (limit %s)\n' "$key" "$fullest" "$per" "$dispatches"
    [ "$windows" -eq 0 ] || { echo "   key $key: $windows windows over its rate" >&2; over=1; }
done < <(rate_windows limits_history)
[ "$over" -eq 0 ] || fail "a window of a rate-limited key held more dispatches than its limit (above)"
pass "no window of length per held more than dispatches dispatches of a rate-limited key"

# the sweeps can fail: each finds the violations of a copy of the history changed to
# have some (the ends of one key's or tenant's attempts dropped, one key's dispatches
# moved to one time)
selftest() {   # selftest WHAT SWEEP TABLE SQL: SWEEP on a copy of TABLE changed by SQL must report
    local n
    "${PSQL[@]}" -d "$DB" -c "CREATE TABLE limits_selftest AS SELECT * FROM $3" -c "$4"
    n=$($2 limits_selftest | awk '{ s += $NF } END { print s + 0 }')
    "${PSQL[@]}" -d "$DB" -c "DROP TABLE limits_selftest"
    [ "$n" -gt 0 ] || fail "self-test: the $1 check finds nothing in a history where $1 is exceeded"
    pass "self-test: the $1 check finds $n moments or windows over it in a history changed to exceed it"
}
selftest "concurrency limit" key_sweep limits_sure_events \
    "DELETE FROM limits_selftest WHERE concurrency_key = 'k-conc2' AND d = -1"
selftest "tenant quota" tenant_sweep limits_sure_events \
    "DELETE FROM limits_selftest WHERE tenant = 'tq-cpu' AND d = -1"
selftest "rate limit" rate_windows limits_history \
    "UPDATE limits_selftest SET dispatched_at = (SELECT min(dispatched_at) FROM limits_history) WHERE concurrency_key = 'k-rate3'"

# by the recorded times only: printed (see the header)
recorded=$( { key_sweep limits_recorded_events | awk '{ s += $4 } END { print s + 0 }'; } )
recorded_t=$( { tenant_sweep limits_recorded_events | awk '{ s += $4 } END { print s + 0 }'; } )
say "by the recorded times [dispatched_at, finished_at) alone: $recorded moments a key, $recorded_t a tenant, look over the limit (a dispatch's at before a concurrent finish's at, its check after that finish's commit)"

# ---- 4. the limits were hit ----------------------------------------------------------------
"${PSQL[@]}" -d "$DB" -c "
    SELECT script, CASE WHEN detail ~ '^(concurrency_limit|rate_limited|tenant_quota_exceeded):'
                        THEN substring(detail FROM '^[a-z_]+')
                        WHEN detail LIKE '% is being dispatched by another transaction'
                        THEN 'busy: ' || substring(detail FROM '^(concurrency key|tenant)')
                        ELSE outcome END AS answer, count(*)
      FROM limits_outcome GROUP BY 1, 2 ORDER BY 1, 2"
hits() { q "SELECT count(*) FROM limits_outcome WHERE outcome = 'UNSCHEDULABLE' AND detail LIKE '$1'"; }
delta() {   # growth of a dispatch_stats row over the run
    local b a
    b=$(grep -oE "(^| )$1=[0-9]+" <<<"$STATS_BEFORE" | sed 's/.*=//' || true)
    a=$(grep -oE "(^| )$1=[0-9]+" <<<"$STATS_AFTER" | sed 's/.*=//' || true)
    echo $(( ${a:-0} - ${b:-0} ))
}
for reason in concurrency_limit rate_limited tenant_quota_exceeded; do
    n=$(hits "$reason: %")
    d=$(delta "$reason")
    [ "$n" -gt 0 ] || fail "no dispatch answered $reason: that limit was never hit, the check proves nothing"
    [ "$d" -ge "$n" ] || fail "sched.dispatch_stats counted $d $reason over the run, but $n calls answered it"
    pass "$reason answered $n times (sched.dispatch_stats grew by $d)"
done
# Dispatchers meet on a limit either on its lock held to the commit (a rate-limited key:
# "being dispatched by another transaction") or, with the claims of src/limit_claims.c
# (a key without a rate limit, a tenant), through what a transaction not yet committed
# has claimed, which a refusal counts and says so.
busy_key=$(hits 'concurrency key "%" is being dispatched by another transaction')
busy_tenant=$(hits 'tenant "%" is being dispatched by another transaction')
claimed_key=$(hits 'concurrency_limit: % of them dispatched by transactions not yet committed)')
claimed_tenant=$(hits 'tenant_quota_exceeded: % of them dispatched by transactions not yet committed), %')
d=$(delta contention)
[ "$busy_key" -gt 0 ] && [ "$((claimed_key + busy_tenant + claimed_tenant))" -gt 0 ] ||
    fail "dispatchers never met on a key's lock ($busy_key), a key's claims ($claimed_key), a tenant's lock ($busy_tenant) or a tenant's claims ($claimed_tenant): the check proves little"
[ "$d" -ge $((busy_key + busy_tenant)) ] || fail "sched.dispatch_stats counted $d contention, fewer than the $((busy_key + busy_tenant)) answers"
pass "dispatchers met on a key's lock $busy_key times (contention grew by $d), on a tenant's $busy_tenant; refusals counting others' uncommitted claims: $claimed_key of a key, $claimed_tenant of a tenant"

# every refusal names the limit as it is, and a use at or over it (OFFSET 0: each
# detail is matched once, not once per use of the match)
check_eq "every concurrency_limit answer names the key's limit and a use at it" "$(q "
    SELECT count(*) FROM (SELECT (regexp_match(o.detail, '^concurrency_limit: key \"(.*)\" has ([0-9]+) of ([0-9]+) live attempts( \\([0-9]+ of them dispatched by transactions not yet committed\\))?\$')) AS m
                            FROM limits_outcome o WHERE o.detail LIKE 'concurrency_limit:%' OFFSET 0) x
      LEFT JOIN sched.concurrency_limit l ON l.concurrency_key = x.m[1]
     WHERE x.m IS NULL OR l.max_live IS DISTINCT FROM x.m[3]::int OR x.m[2]::int < x.m[3]::int")" 0
check_eq "every rate_limited answer names the key's rate and a full window" "$(q "
    SELECT count(*) FROM (SELECT (regexp_match(o.detail, '^rate_limited: key \"(.*)\" has ([0-9]+) dispatches within (.*) of now \\(limit ([0-9]+) per (.*)\\); eligible at (.*)\$')) AS m
                            FROM limits_outcome o WHERE o.detail LIKE 'rate_limited:%' OFFSET 0) x
      LEFT JOIN sched.rate_limit l ON l.concurrency_key = x.m[1]
     WHERE x.m IS NULL OR l.dispatches IS DISTINCT FROM x.m[4]::int OR l.per IS DISTINCT FROM x.m[5]::interval
        OR x.m[3]::interval <> l.per OR x.m[2]::int < l.dispatches")" 0
check_eq "every tenant_quota_exceeded answer names the tenant's quota and a use + ask over it" "$(q "
    SELECT count(*) FROM (SELECT (regexp_match(o.detail, '^tenant_quota_exceeded: tenant \"(.*)\" (live attempts|cpu_millis|memory_mb|gpus): its live attempts hold ([0-9]+) of ([0-9]+)(?: \\([0-9]+ of them dispatched by transactions not yet committed\\))?, this request asks ([0-9]+)\$')) AS m
                            FROM limits_outcome o WHERE o.detail LIKE 'tenant_quota_exceeded:%' OFFSET 0) x
      LEFT JOIN sched.tenant_quota l ON l.tenant = x.m[1]
     WHERE x.m IS NULL
        OR CASE x.m[2] WHEN 'live attempts' THEN l.max_live WHEN 'cpu_millis' THEN l.max_cpu_millis
                       WHEN 'memory_mb' THEN l.max_memory_mb WHEN 'gpus' THEN l.max_gpus END
           IS DISTINCT FROM x.m[4]::bigint
        OR x.m[3]::bigint + x.m[5]::bigint <= x.m[4]::bigint")" 0
say "quota refusals by tenant and dimension: $(q "SELECT string_agg(format('%s %s: %s', t, dim, n), ', ' ORDER BY t, dim)
      FROM (SELECT m[1] AS t, m[2] AS dim, count(*) AS n
              FROM (SELECT regexp_match(detail, '^tenant_quota_exceeded: tenant \"(.*)\" ([a-z_ ]+):') AS m
                      FROM limits_outcome WHERE detail LIKE 'tenant_quota_exceeded:%') x GROUP BY 1, 2) y")"

# ---- 5. invariants --------------------------------------------------------------------------
say "invariants"
out=$("${PSQL[@]}" -d "$DB" -f "$HERE/invariants.sql" 2>&1) || { printf '%s\n' "$out" | sed 's/^psql:[^ ]* //' >&2; fail "invariants violated after the pgbench run (above)"; }
pass "invariants.sql holds ($(grep -c 'invariant .*: ok' <<<"$out") invariants)"

if [ -z "${SCHED_LIMITS_KEEP:-}" ]; then
    "${PSQL[@]}" -d postgres -c "DROP DATABASE $DB WITH (FORCE)"
fi
say "passed: $CHECKS checks, tps $tps, $ATTEMPTS attempts"
