#!/usr/bin/env bash
# concurrency.sh — pgbench concurrency check of the reservation transaction (issue 2).
#
# Uses the running cluster of the environment (PGHOST, PGPORT, PGUSER; `make test` and
# `test/harness.sh up` provide one).  Steps:
#   1. (re)creates database $DB, CREATE EXTENSION pg_sched, loads setup.sql: 50 nodes with
#      1-2 slots and small capacity, a second (GPU) worker on 10 of them, $REQUESTS queued
#      requests with mixed reservations (some need GPUs, some can never fit);
#   2. runs pgbench -n -c 8 -j 2 -T $DURATION with four weighted scripts:
#        dispatch_attempt.pgbench @6  dispatch_attempt of a request picked at random
#        dispatch_next.pgbench    @2  the queue-order dispatcher
#        start.pgbench            @1  start_attempt of a random DISPATCHED attempt
#        finish.pgbench           @3  finish_attempt of a random live attempt (frees the
#                                     slot and the reservation; 1 in 5 FAILED: requeued)
#        mirror_check.pgbench     @1  the client's fleet mirror against the tables, same
#                                     snapshot (must never differ)
#        fleet_change.pgbench     @1  re-weights a random node
#      and fails if pgbench reports any failed transaction (deadlock, serialization) or an
#      aborted client (any other error);
#   3. prints tps and what the dispatch calls answered;
#   4. invariants.sql: no worker above its slots, no node above its capacity, counters
#      equal to the sums over live attempts (also the tenants' fair-share counters), one attempt and one request per (step,
#      attempt number), every request in exactly one state with exactly one attempt when
#      DISPATCHED and none otherwise, every step exactly pending, live or terminal and
#      consistent with its execution, every execution's status consistent, attempts
#      referencing existing rows, no orphan command (its attempt and worker exist, and it
#      is for its attempt's worker session) and no orphan milestone (its execution and
#      attempt exist), one START command and one selection milestone per attempt, every
#      placement admissible, no key over its concurrency limit, no tenant over its quota,
#      no window over a key's rate limit (none is set here: limits.sh runs these on
#      limits; here only the self-test makes them fail); plus: slots were reused (more
#      attempts than slots), so the check exercised release and re-reservation;
#   5. self-test: each invariant must fail on a state corrupted on purpose (constraints
#      dropped, one row changed, in a transaction that is rolled back); a check that
#      cannot fail fails the run.
# Exits non-zero on any failure.  Takes about 30 s (DURATION 20 s).
#   env: SCHED_BENCH_DB (sched_pgbench), SCHED_BENCH_REQUESTS (20000),
#        SCHED_BENCH_DURATION (20), SCHED_BENCH_KEEP=1 keeps the database afterwards.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
DB=${SCHED_BENCH_DB:-sched_pgbench}
REQUESTS=${SCHED_BENCH_REQUESTS:-20000}
DURATION=${SCHED_BENCH_DURATION:-20}
: "${PGHOST:?PGHOST must point at the test cluster}" "${PGPORT:?PGPORT must be set}"
export PGUSER=${PGUSER:-postgres}
unset PGDATABASE

PSQL=(psql -X -q -v ON_ERROR_STOP=1)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

say() { printf '%s\n' "--- pgbench check [${SECONDS}s]: $*"; }
fail() { printf '%s\n' "FAIL (pgbench check): $*" >&2; exit 1; }
# shellcheck source=test/lib/common.sh
. "$HERE/../lib/common.sh"

# ---- 1. database, fleet, queue ---------------------------------------------------------
say "database $DB on $PGHOST:$PGPORT, $REQUESTS requests"
"${PSQL[@]}" -d postgres -c "SET client_min_messages = warning" \
    -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
"${PSQL[@]}" -d "$DB" -v requests="$REQUESTS" -f "$HERE/setup.sql" >"$WORK/setup.out"
read -r MIN_RID MAX_RID SLOTS < <(psql -X -At -F ' ' -d "$DB" -c \
    "SELECT min(request_id), max(request_id), (SELECT sum(slots) FROM sched.worker) FROM sched.request")
[ "$((MAX_RID - MIN_RID + 1))" -eq "$REQUESTS" ] || fail "setup queued $MIN_RID..$MAX_RID, not $REQUESTS requests"
say "fleet: $(psql -X -At -d "$DB" -c "SELECT count(*) || ' nodes, ' || (SELECT count(*) FROM sched.worker) || ' workers' FROM sched.node"), $SLOTS slots; requests $MIN_RID..$MAX_RID"

# ---- 2. pgbench ------------------------------------------------------------------------
say "pgbench -n -c 8 -j 2 -T $DURATION"
rc=0
pgbench -n -c 8 -j 2 -T "$DURATION" --failures-detailed \
    -D min_rid="$MIN_RID" -D max_rid="$MAX_RID" \
    -f "$HERE/dispatch_attempt.pgbench@6" -f "$HERE/dispatch_next.pgbench@2" \
    -f "$HERE/start.pgbench@1" -f "$HERE/finish.pgbench@3" \
    -f "$HERE/mirror_check.pgbench@1" -f "$HERE/fleet_change.pgbench@1" \
    "$DB" >"$WORK/pgbench.out" 2>"$WORK/pgbench.err" || rc=$?
sed -n '/^number of transactions actually processed/,/^tps/p' "$WORK/pgbench.out"
check_pgbench_run "$rc" "$WORK/pgbench.out" "$WORK/pgbench.err"
processed=$PGB_PROCESSED tps=$PGB_TPS

# ---- 3. what happened ------------------------------------------------------------------
say "tps $tps, $processed transactions, 0 failed; dispatch outcomes:"
psql -X -d "$DB" -c "SELECT script, outcome, count(*) FROM bench_outcome GROUP BY 1, 2 ORDER BY 1, 2"
read -r DISPATCHED UNSCHEDULABLE ATTEMPTS ENDED LIVE < <(psql -X -At -F ' ' -d "$DB" -c "
    SELECT (SELECT coalesce(sum(placed), 0) FROM bench_outcome WHERE outcome = 'DISPATCHED'),
           (SELECT count(*) FROM bench_outcome WHERE outcome = 'UNSCHEDULABLE'),
           count(*), count(*) FILTER (WHERE status NOT IN ('DISPATCHED', 'RUNNING')),
           count(*) FILTER (WHERE status IN ('DISPATCHED', 'RUNNING'))
      FROM sched.attempt")
say "dispatched $DISPATCHED, unschedulable $UNSCHEDULABLE; attempts $ATTEMPTS ($ENDED ended, $LIVE live) on $SLOTS slots"
[ "$DISPATCHED" -eq "$ATTEMPTS" ] || fail "$DISPATCHED DISPATCHED outcomes but $ATTEMPTS attempts exist"
read -r CHECKS DIFFER < <(psql -X -At -F ' ' -d "$DB" -c "
    SELECT count(*), count(*) FILTER (WHERE outcome <> 'SAME') FROM bench_outcome WHERE script = 'mirror_check'")
say "fleet mirror checked $CHECKS times against the tables during the run: $DIFFER differed"
[ "$CHECKS" -gt 0 ] || fail "the fleet mirror was never checked"
[ "$DIFFER" -eq 0 ] || fail "the fleet mirror differed from the tables $DIFFER times"
[ "$ATTEMPTS" -gt "$SLOTS" ] || fail "only $ATTEMPTS attempts on $SLOTS slots: slots were never reused, the check proves little"

# ---- 4. invariants ---------------------------------------------------------------------
say "invariants"
"${PSQL[@]}" -d "$DB" -f "$HERE/invariants.sql" 2>&1 | sed 's/^psql:[^ ]* //' \
    || fail "invariants violated after the pgbench run (above)"

# the placement kinds of issue 15 were in the mix: gangs placed whole and left wholly
# pending, attempts preempted and their room held and taken
read -r GANGS PLACED_GANGS PREEMPTED PREEMPTIONS < <(psql -X -At -F ' ' -d "$DB" -c "
    SELECT count(*), count(*) FILTER (WHERE placed_at IS NOT NULL),
           (SELECT count(*) FROM sched.attempt WHERE status = 'PREEMPTED'),
           (SELECT count(*) FROM sched.timeline WHERE milestone_key LIKE 'step.preempting:%')
      FROM sched.gang")
say "gangs: $PLACED_GANGS of $GANGS placed whole (the others wholly pending); $PREEMPTED attempts preempted by $PREEMPTIONS preemptions"
[ "$PLACED_GANGS" -gt 0 ] || fail "no gang was placed during the run: the mix did not exercise gangs"
[ "$PLACED_GANGS" -lt "$GANGS" ] || fail "every gang was placed: the mix did not exercise a gang left pending"
[ "$PREEMPTED" -gt 0 ] || fail "no attempt was preempted during the run: the mix did not exercise preemption"

# ---- 5. self-test: every invariant can fail ---------------------------------------------
say "self-test: every invariant must fail on a corrupted state"
# Several cases corrupt live attempts (two of them for the concurrency limit's); the run
# may end with none, its finishes having outrun its dispatches: a dispatch now makes some,
# from the requests left pending (after the invariants above, and rolled back with none
# of the cases).  It dispatches two minutes ahead, after a reap at that time: at the
# run's end the room may be held for preemptors (sched.preemption_hold, 30 s) and the
# requests left may wait out their backoff (at most a minute); no lease (5 min) ends by
# then.  (Once a dispatch now placed nothing on 85 slots with one live attempt.)
LIVE_NOW=$(psql -X -At -d "$DB" -c "SELECT count(*) FROM sched.attempt WHERE status IN ('DISPATCHED', 'RUNNING')")
if [ "$LIVE_NOW" -lt 2 ]; then
    psql -X -At -d "$DB" -c "SELECT sched.reap_expired(now() + interval '2 minutes')" \
        -c "SELECT count(*) FROM sched.dispatch_next(20, at => now() + interval '2 minutes')" >/dev/null
    LIVE_NOW=$(psql -X -At -d "$DB" -c "SELECT count(*) FROM sched.attempt WHERE status IN ('DISPATCHED', 'RUNNING')")
    say "the run ended with fewer than 2 live attempts: dispatch_next(20) made $LIVE_NOW live for the self-test"
    [ "$LIVE_NOW" -ge 2 ] || fail "the self-test needs 2 live attempts, and dispatch_next(20) left $LIVE_NOW"
fi
# Each case: drop the CHECK, UNIQUE and FOREIGN KEY constraints that would refuse it,
# change one row, run invariants.sql, roll back.  invariants.sql must fail naming the case.
drop_constraints="DO \$\$ DECLARE c record; BEGIN
    FOR c IN SELECT conrelid::regclass AS tbl, conname FROM pg_constraint
              WHERE connamespace = 'sched'::regnamespace AND contype IN ('c', 'u', 'f')
                AND conrelid <> 0
              ORDER BY contype = 'f' DESC
    LOOP EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', c.tbl, c.conname); END LOOP;
END \$\$;"
live_worker="(SELECT worker_id FROM sched.worker WHERE live_attempts > 0 ORDER BY worker_id LIMIT 1)"
busy_node="(SELECT node_id FROM sched.node WHERE reserved_cpu_millis > 0 ORDER BY node_id LIMIT 1)"
ended_attempt="(SELECT attempt_id FROM sched.attempt WHERE status = 'SUCCEEDED' ORDER BY attempt_id LIMIT 1)"
pending_request="(SELECT min(request_id) FROM sched.request WHERE state = 'PENDING')"
live_attempt="(SELECT attempt_id FROM sched.attempt WHERE status IN ('DISPATCHED', 'RUNNING') ORDER BY attempt_id LIMIT 1)"
two_live_attempts="(SELECT attempt_id FROM sched.attempt WHERE status IN ('DISPATCHED', 'RUNNING') ORDER BY attempt_id LIMIT 2)"
two_attempts="(SELECT attempt_id FROM sched.attempt ORDER BY attempt_id LIMIT 2)"
# a copy x of request rows back into sched.request: every column but the generated shape,
# by name (concurrency_key, new in 0.2.0, follows shape: SELECT * no longer lines up)
insert_request_x="DO \$\$ BEGIN EXECUTE (SELECT format('INSERT INTO sched.request (%1\$s) SELECT %1\$s FROM x', string_agg(quote_ident(attname), ', ' ORDER BY attnum)) FROM pg_attribute WHERE attrelid = 'sched.request'::regclass AND attnum > 0 AND NOT attisdropped AND attgenerated = ''); END \$\$"
declare -A corrupt=(
    [worker_live_attempts_within_slots]="UPDATE sched.worker SET slots = live_attempts - 1 WHERE worker_id = $live_worker"
    [node_reservations_within_capacity]="UPDATE sched.node SET cpu_millis = reserved_cpu_millis - 1 WHERE node_id = $busy_node"
    [worker_counter_matches_attempts]="UPDATE sched.worker SET live_attempts = live_attempts + 1, slots = slots + 1 WHERE worker_id = $live_worker"
    [node_counters_match_attempts]="UPDATE sched.node SET reserved_memory_mb = reserved_memory_mb + 1, memory_mb = memory_mb + 1 WHERE node_id = $busy_node"
    [tenant_live_matches_attempts]="UPDATE sched.tenant_live SET live = live + 1 WHERE (tenant, backend) = (SELECT tenant, backend FROM sched.tenant_live ORDER BY tenant, backend LIMIT 1)"
    [tenant_live_sums_match_attempts]="UPDATE sched.tenant_live SET memory_mb = memory_mb + 1 WHERE (tenant, backend) = (SELECT tenant, backend FROM sched.tenant_live ORDER BY tenant, backend LIMIT 1)"
    [one_attempt_per_step_attempt]="CREATE TEMP TABLE x AS SELECT * FROM sched.attempt WHERE attempt_id = $ended_attempt; UPDATE x SET attempt_id = gen_random_uuid(); INSERT INTO sched.attempt SELECT * FROM x"
    [one_request_per_step_attempt]="CREATE TEMP TABLE x AS SELECT * FROM sched.request WHERE request_id = $pending_request; UPDATE x SET request_id = nextval('sched.request_id_seq'); $insert_request_x"
    [request_in_exactly_one_state]="UPDATE sched.request SET state = 'WAITING' WHERE request_id = $pending_request"
    [attempt_in_exactly_one_state]="UPDATE sched.attempt SET finished_at = NULL WHERE attempt_id = $ended_attempt"
    [dispatched_request_has_one_attempt]="UPDATE sched.request SET state = 'DISPATCHED' WHERE request_id = $pending_request"
    [undispatched_request_has_no_attempt]="UPDATE sched.request SET state = 'CANCELLED' WHERE attempt_id = $ended_attempt"
    [attempt_has_dispatched_request]="UPDATE sched.request SET state = 'PENDING' WHERE attempt_id = $ended_attempt"
    [attempt_references_exist]="UPDATE sched.attempt SET worker_id = gen_random_uuid() WHERE attempt_id = $ended_attempt"
    [step_in_exactly_one_state]="CREATE TEMP TABLE x AS SELECT * FROM sched.request WHERE request_id = (SELECT request_id FROM sched.attempt WHERE attempt_id = $live_attempt); UPDATE x SET request_id = nextval('sched.request_id_seq'), attempt_number = attempt_number + 1, state = 'PENDING', attempt_id = NULL; $insert_request_x"
    [step_state_matches_execution]="UPDATE sched.execution SET status = 'SUCCEEDED', finished_at = now() WHERE execution_id = (SELECT execution_id FROM sched.attempt WHERE attempt_id = $live_attempt)"
    [execution_state_consistent]="UPDATE sched.execution SET finished_at = now() WHERE execution_id = (SELECT execution_id FROM sched.request WHERE request_id = $pending_request)"
    [fleet_and_queue_references_exist]="UPDATE sched.request SET execution_id = gen_random_uuid() WHERE request_id = $pending_request"
    [no_orphan_command]="UPDATE sched.command SET attempt_id = gen_random_uuid() WHERE command_id = (SELECT min(command_id) FROM sched.command)"
    [command_matches_its_attempt]="UPDATE sched.command SET worker_generation = worker_generation + 1 WHERE command_id = (SELECT min(command_id) FROM sched.command)"
    [no_orphan_milestone]="UPDATE sched.timeline SET attempt_id = gen_random_uuid() WHERE timeline_id = (SELECT min(timeline_id) FROM sched.timeline WHERE attempt_id IS NOT NULL)"
    [attempt_has_one_start_command]="DELETE FROM sched.command WHERE kind = 'START' AND attempt_id = $ended_attempt"
    [attempt_has_selected_milestone]="DELETE FROM sched.timeline WHERE milestone_key LIKE 'step.worker.selected:%' AND attempt_id = $ended_attempt"
    [attempt_placement_admissible]="UPDATE sched.request SET required_labels = '{\"zone\":\"nowhere\"}' WHERE attempt_id = $ended_attempt"
    [attempt_keys_match_request]="UPDATE sched.attempt SET spread_key = 'selftest' WHERE attempt_id = $ended_attempt"
    [gang_placed_whole]="INSERT INTO sched.gang VALUES ('dddddddd-0000-4000-8000-00000000ffff', 't0', 2, false, now(), now())"
    [preemption_consistent]="UPDATE sched.attempt SET status = 'PREEMPTED' WHERE attempt_id = $ended_attempt"
    [key_live_within_concurrency_limit]="UPDATE sched.attempt SET concurrency_key = 'selftest' WHERE attempt_id IN $two_live_attempts; INSERT INTO sched.concurrency_limit VALUES ('selftest', 1)"
    [tenant_live_within_quota]="INSERT INTO sched.tenant_quota (tenant, max_cpu_millis) SELECT tenant, sum(reserve_cpu_millis) - 1 FROM sched.attempt WHERE status IN ('DISPATCHED', 'RUNNING') GROUP BY tenant ORDER BY tenant LIMIT 1 ON CONFLICT (tenant) DO UPDATE SET max_cpu_millis = excluded.max_cpu_millis"
    [key_dispatches_within_rate_limit]="UPDATE sched.attempt SET concurrency_key = 'selftest' WHERE attempt_id IN $two_attempts; INSERT INTO sched.rate_limit VALUES ('selftest', 1, '30 days')"
)
checks=$(grep -oE "^ *\('[a-z_]+', \\\$q\\\$" "$HERE/invariants.sql" | sed -E "s/^ *\('([a-z_]+)'.*/\1/")
[ "$(wc -l <<<"$checks")" -eq "${#corrupt[@]}" ] || fail "self-test covers ${#corrupt[@]} cases but invariants.sql has $(wc -l <<<"$checks") checks"
# one session: constraints dropped once, each case between a savepoint and its rollback;
# markers and errors both go to stderr, so they stay in order
{
    printf 'BEGIN;\n%s\nSAVEPOINT clean;\n' "$drop_constraints"
    for check in $checks; do
        printf '\\warn SELFTEST %s\n%s;\n\\i %s\nROLLBACK TO SAVEPOINT clean;\n' \
            "$check" "${corrupt[$check]:-SELECT 1}" "$HERE/invariants.sql"
    done
    printf '\\warn SELFTEST end\nROLLBACK;\n'
} >"$WORK/selftest.sql"
psql -X -q -v ON_ERROR_STOP=0 -d "$DB" -f "$WORK/selftest.sql" >"$WORK/selftest.out" 2>&1 || true
bad=0
for check in $checks; do
    block=$(sed -n "/^SELFTEST $check\$/,/^SELFTEST /p" "$WORK/selftest.out")
    if [ -n "${corrupt[$check]:-}" ] && grep -q "invariants violated: .*\b$check\b" <<<"$block"; then
        printf '  self-test %-40s fails as it must\n' "$check"
    else
        printf '  self-test %-40s DID NOT FAIL on a corrupted state\n%s\n' "$check" "$block" >&2
        bad=1
    fi
done
[ "$bad" -eq 0 ] || fail "an invariant check could not fail (self-test above)"

say "self-test done"
if [ -z "${SCHED_BENCH_KEEP:-}" ]; then
    "${PSQL[@]}" -d postgres -c "DROP DATABASE $DB WITH (FORCE)"
fi
say "passed: tps $tps, dispatched $DISPATCHED, unschedulable $UNSCHEDULABLE, 0 failed transactions, all invariants hold"
