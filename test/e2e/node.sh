#!/usr/bin/env bash
# test/e2e/node.sh — end to end with the Node.js worker (examples/node/worker.js, npm's
# `pg` as pinned in its package-lock.json, installed with `npm ci` into a copy of the
# example), the Python scheduler loop and submitter (examples/python), against the running
# cluster of the environment (PGHOST, PGPORT, PGUSER; `test/harness.sh up` gives one, with
# pg_sched installed and preloaded).
#
# One node, one Node worker of 4 slots, connected through pgbouncer in transaction mode
# (3 server connections for its up to 7 client connections; SCHED_E2E_NODE_DIRECT=1:
# straight to the server); sched.lease_ttl 4s and sched.heartbeat_ttl 3s set on the
# database before any process starts; the scheduler (a sched_scheduler) dispatches and
# reaps.  TASKS (100) tasks of 0.1-0.3 s, and two pairs of long tasks submitted on the way
# ahead of them (priority 100), one after a quarter of the tasks and one after half:
#   - the cut: while the first pair runs (5 s: longer than a lease, they live on
#     renewals), every connection of the worker is terminated (pg_terminate_backend).
#     The same process must connect and register again (a new generation), finish the
#     attempts it was running (repeating the calls that failed with their connection),
#     reported by it, the long ones after it registered again, and take new work.
#   - the kill: while the second pair runs (3 s), kill -9 the worker and start a fresh
#     process for the same node (it registers again).  The attempts the dead one held
#     must end LOST and succeed later.
# Then: every step has exactly one SUCCEEDED attempt, its last; each task number succeeded
# once, reported by the worker it was placed on; every LOST attempt is the kill's or one
# never started (its START lost with a connection), and was retried.  Then: a payload that
# fails (FAILED, retried up to max_attempts); a lease renewed while a task runs, then a
# CANCEL (the attempt ends CANCELLED); a drain: SIGTERM while all 4 slots run, which must
# say DRAINING (a task submitted then is not placed on it), finish them (SUCCEEDED), say
# STOPPED and exit 0.  Finally nothing is left live or pending, every slot and reservation
# is released.  Timeouts (SCHED_E2E_TIMEOUT, 60 s per wait) only catch hangs; no check
# depends on elapsed time.
#
# Installs Debian's nodejs and npm when node or npm is missing, python3-psycopg when no
# python3 can import psycopg, pgbouncer (test/lib/pgbouncer.sh) when missing; `npm ci`
# needs the npm registry (or npm's cache).  The database sched_e2e_node is (re)created
# and left for inspection; the copy of the example, the logs and pgbouncer's files are in
# a directory under /tmp, printed at the start and removed when every check passed.
# Every process started here is stopped at the end, also on failure.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
EX=$ROOT/examples/node
PYEX=$ROOT/examples/python
TASKS=${SCHED_E2E_TASKS:-100}
TIMEOUT=${SCHED_E2E_TIMEOUT:-60}
DB=sched_e2e_node
APP=sched_e2e_node_app          # sched_scheduler: submits, dispatches, reaps, cancels
WROLE=sched_e2e_node_worker     # sched_worker: the worker
: "${PGHOST:?PGHOST must point at the test cluster}" "${PGPORT:?PGPORT must be set}"
export PGUSER=${PGUSER:-postgres}
# shellcheck source=test/lib/common.sh
source "$ROOT/test/lib/common.sh"      # fail, pass, check_eq, stop_pid, apt_install, ...
# shellcheck source=test/lib/pgbouncer.sh
source "$ROOT/test/lib/pgbouncer.sh"

# ---- node, npm, python with psycopg 3 ------------------------------------------------------
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    apt_install --with-recommends nodejs npm
fi
node -e 'process.exit(+process.versions.node.split(".")[0] >= 18 ? 0 : 1)' \
    || { echo "FAIL: node $(node --version) is older than 18" >&2; exit 1; }
require_python_with_psycopg

WORK=$(mktemp -d /tmp/pg_sched_e2e_node.XXXXXX)
chmod 755 "$WORK"      # pgbouncer (as postgres) keeps its files in a directory below
DIR=$WORK
echo "node $(node --version), npm $(npm --version), python: $PY; work dir $WORK"

# ---- processes -----------------------------------------------------------------------------
PIDS=()          # every process started here

on_exit() {
    local rc=$? pid f
    for pid in "${PIDS[@]}"; do
        kill -0 "$pid" 2>/dev/null && stop_pid "$pid" 5 >/dev/null 2>&1 || true
    done
    pgbouncer_stop
    if [ $rc -ne 0 ]; then
        for f in "$DIR"/*.log "$DIR"/pgbouncer/*.log; do
            [ -e "$f" ] || continue
            echo "--- tail of $f" >&2
            tail -n 15 "$f" >&2
        done
        echo "(kept $WORK)" >&2
    else
        rm -rf "$WORK"
    fi
    exit $rc
}
trap on_exit EXIT

# ---- queries (the checks: fail, pass, check_eq of test/lib/common.sh) -----------------------
q() { psql -X -qAt -v ON_ERROR_STOP=1 -d "$DB" -c "$1"; }
wait_until() {   # wait_until WHAT SQL: until SQL says t (fails after TIMEOUT s, or if a worker died)
    local deadline=$((SECONDS + TIMEOUT))
    until [ "$(q "$2")" = t ]; do
        [ $SECONDS -lt $deadline ] || fail "$1: not within ${TIMEOUT} s"
        kill -0 "$WORKER" 2>/dev/null || fail "$1: the worker exited"
        sleep 0.1
    done
}
quote_list() { paste -sd, "$1" | sed "s/[^,]*/'&'/g"; }   # a file of ids -> 'a','b'

# ---- the example, installed as a user would --------------------------------------------------
mkdir "$WORK/app"
cp "$EX/worker.js" "$EX/package.json" "$EX/package-lock.json" "$WORK/app/"
(cd "$WORK/app" && npm ci --no-audit --no-fund --loglevel=error >"$WORK/npm-ci.log" 2>&1) \
    || { cat "$WORK/npm-ci.log" >&2; fail "npm ci failed"; }
check_eq "npm ci installed the pinned pg" \
    "$(cd "$WORK/app" && node -p 'require("pg/package.json").version')" \
    "$(cd "$WORK/app" && node -p 'require("./package.json").dependencies.pg')"

# ---- database and roles --------------------------------------------------------------------
psql -X -q -v ON_ERROR_STOP=1 -d postgres <<SQL
SET client_min_messages = warning;
DO \$\$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '$APP') THEN
        CREATE ROLE $APP LOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '$WROLE') THEN
        CREATE ROLE $WROLE LOGIN;
    END IF;
END
\$\$;
DROP DATABASE IF EXISTS $DB WITH (FORCE);
CREATE DATABASE $DB;
ALTER DATABASE $DB SET sched.lease_ttl = '4s';
ALTER DATABASE $DB SET sched.heartbeat_ttl = '3s';
SQL
q "CREATE EXTENSION pg_sched"
q "SET client_min_messages = warning; GRANT sched_scheduler TO $APP; GRANT sched_worker TO $WROLE"
check_eq "short settings seen by new sessions" \
    "$(q "SELECT current_setting('sched.lease_ttl') || ' ' || current_setting('sched.heartbeat_ttl')")" "4s 3s"
# the fleet is the admin's: the node exists before its worker registers
q "SELECT FROM sched.upsert_node('node-1', cpu_millis => 4000, memory_mb => 8192)"

# ---- pgbouncer in front of the server, for the worker ------------------------------------------
# (SCHED_E2E_NODE_DIRECT=1: the worker connects to the server directly)
WPORT=$PGPORT
if [ -z "${SCHED_E2E_NODE_DIRECT:-}" ]; then
    # 3 server connections for the worker's up to 7 client connections (the pool's 6 and
    # the wait_commands one)
    PGBOUNCER_USERS=$WROLE pgbouncer_start "$WORK/pgbouncer" "$PGHOST" "$PGPORT" 3
    WPORT=$PGBOUNCER_PORT
    check_eq "pgbouncer: the worker's pool is in transaction mode" \
        "$(PGUSER=$WROLE psql -X -qAt -h 127.0.0.1 -p "$WPORT" -d "$DB" -c 'SELECT 1' >/dev/null &&
           pgbouncer_admin "SHOW POOLS" | awk -F'|' -v db=$DB -v u=$WROLE '
               NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
               $col["database"] == db && $col["user"] == u { print $col["pool_mode"] }')" transaction
fi

submit() { PGUSER=$APP PGDATABASE=$DB "$PY" "$PYEX/submit.py" "$@"; }
start_worker() {   # start_worker N: a worker process for node-1, log worker-N.log; sets WORKER
    PGPORT=$WPORT PGUSER=$WROLE PGDATABASE=$DB node "$WORK/app/worker.js" --node node-1 --capability demo \
        --versions 1.0 --slots 4 -v >"$WORK/worker-$1.log" 2>&1 &
    WORKER=$!; PIDS+=($!)
}
generation() { q "SELECT generation FROM sched.worker WHERE node_id = 'node-1'"; }
live_of() {      # live_of GENERATION: its live attempts, one id a line
    q "SELECT attempt_id FROM sched.attempt WHERE worker_generation = $1
          AND status IN ('DISPATCHED', 'RUNNING') ORDER BY 1"
}

# The short tasks first; each pair of long tasks is submitted later, ahead of them in the
# queue (priority 100), so the cut and the kill happen while their pair runs: the worker
# surely holds live attempts then, and for the cut ones that outlive a lease and its
# reconnection.
TOTAL=$((TASKS + 4))
submit --count "$TASKS" --sleep 0.1 --sleep-max 0.3 -q
long_pair() {    # long_pair FIRST_TASK SECONDS NAME: two tasks, their step ids in $WORK/NAME
    PGUSER=$APP q "SELECT s.step_id FROM (SELECT t, gen_random_uuid() AS step_id FROM generate_series($1, $1 + 1) t) s,
                          LATERAL sched.submit(gen_random_uuid(), s.step_id, 'demo', '1.0', priority => 100,
                                               payload => jsonb_build_object('task', s.t, 'sleep', $2))" >"$WORK/$3"
    [ "$(wc -l <"$WORK/$3")" = 2 ] || fail "could not submit the pair $3"
}
check_eq "steps submitted" "$(q "SELECT count(DISTINCT step_id) FROM sched.request")" "$TASKS"

start_worker 1
wait_until "the worker registers" "SELECT count(*) = 1 FROM sched.worker WHERE runtime_state = 'READY'"
WID=$(q "SELECT worker_id FROM sched.worker")
check_eq "the worker is registered by its login role" "$(q "SELECT registered_by FROM sched.worker")" "$WROLE"
PGUSER=$APP PGDATABASE=$DB "$PY" "$PYEX/scheduler.py" >"$WORK/scheduler.log" 2>&1 &
SCHED=$!; PIDS+=($!)
wait_until "the worker heartbeats" "SELECT last_heartbeat > registered_at FROM sched.worker"
pass "the worker heartbeats (READY: $(q "SELECT runtime_state FROM sched.worker"))"

# ---- the work, the cut and the kill -----------------------------------------------------------
pair_running() {   # pair_running FILE: SQL, both attempts of that pair are RUNNING
    echo "(SELECT count(*) = 2 FROM sched.attempt WHERE status = 'RUNNING' AND step_id IN ($(quote_list "$WORK/$1")))"
}
start=$SECONDS
cut_gen="" cut_registered_at="" kill_gen="" done=0
deadline=$((SECONDS + 2 * TIMEOUT))
while :; do
    done=$(q "SELECT count(DISTINCT step_id) FROM sched.attempt WHERE status = 'SUCCEEDED'")
    [ "$done" -ge "$TOTAL" ] && break
    [ $SECONDS -lt $deadline ] || fail "only $done/$TOTAL steps succeeded after $((2 * TIMEOUT)) s; $(q "SELECT count(*) || ' pending: ' || coalesce(string_agg(DISTINCT last_reason, '; '), '') FROM sched.pending")"
    kill -0 "$SCHED" 2>/dev/null || fail "the scheduler exited"
    kill -0 "$WORKER" 2>/dev/null || fail "the worker exited"

    if [ ! -e "$WORK/cut_pair" ] && [ "$done" -ge $((TASKS / 4)) ]; then
        long_pair $((TASKS + 1)) 5 cut_pair
    fi
    if [ -z "$cut_gen" ] && [ -e "$WORK/cut_pair" ] && [ "$(q "SELECT $(pair_running cut_pair)")" = t ]; then
        # what it runs now: started, so delivered to it and held
        g=$(generation)
        q "SELECT attempt_id FROM sched.attempt WHERE status = 'RUNNING' ORDER BY 1" >"$WORK/held_at_cut"
        # Every connection of the worker, in one statement (pg_terminate_backend waits up
        # to 5 s for each to exit).  Through pgbouncer the wait may be between two server
        # connections just then: again until the worker says it lost its wait connection.
        cut_by=$((SECONDS + 30)) terminated=0
        until grep -q 'wait connection lost' "$WORK/worker-1.log"; do
            [ $SECONDS -lt $cut_by ] || fail "the cut: the worker's wait connection could not be terminated within 30 s ($terminated backends terminated)"
            n=$(q "SET client_min_messages = error;
                   SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity
                    WHERE datname = current_database() AND usename = '$WROLE'")
            terminated=$((terminated + n))
            sleep $([ "$n" -gt 0 ] && echo 0.5 || echo 0.05)
        done
        cut_gen=$g
        losses=$(grep -c 'wait connection lost' "$WORK/worker-1.log")
        echo "cut the worker's connections ($terminated backends terminated) at $done/$TOTAL done, running $(wc -l <"$WORK/held_at_cut") attempts (generation $g)"
        check_eq "the cut: the worker ran its long pair then" \
            "$(grep -cxFf "$WORK/cut_pair" <(q "SELECT step_id FROM sched.attempt WHERE attempt_id IN ($(quote_list "$WORK/held_at_cut"))"))" 2
        wait_until "the worker registers again after the cut" \
            "SELECT generation >= $g + $losses AND runtime_state = 'READY' FROM sched.worker"
        check_eq "the cut: the same worker process registered again after each lost wait connection ($losses), generation" \
            "$(kill -0 "$WORKER" && generation)" $((g + losses))
        cut_registered_at=$(q "SELECT registered_at FROM sched.worker")
    fi

    if [ -n "$cut_gen" ] && [ ! -e "$WORK/kill_pair" ] && [ "$done" -ge $((TASKS / 2)) ] &&
       [ "$(q "SELECT count(DISTINCT step_id) FROM sched.attempt WHERE status = 'SUCCEEDED'
                 AND step_id IN ($(quote_list "$WORK/cut_pair"))")" = 2 ]; then
        long_pair $((TASKS + 3)) 3 kill_pair
    fi
    if [ -z "$kill_gen" ] && [ -e "$WORK/kill_pair" ] && [ "$(q "SELECT $(pair_running kill_pair)")" = t ]; then
        kill_gen=$(generation)
        kill -KILL "$WORKER"
        wait "$WORKER" 2>/dev/null || true
        # its backends end their statement in flight, then see the socket closed; one
        # sleeping in wait_commands may go on until its timeout but reports nothing
        gone_by=$((SECONDS + TIMEOUT))
        until [ "$(q "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
                        AND usename = '$WROLE' AND state = 'active' AND query NOT LIKE '%wait_commands%'")" = 0 ]; do
            [ $SECONDS -lt $gone_by ] || fail "the kill: the dead worker's backends are still busy"
            sleep 0.1
        done
        live_of "$kill_gen" >"$WORK/held_at_kill"
        check_eq "the kill: the worker held its long pair then" \
            "$(grep -cxFf "$WORK/kill_pair" <(q "SELECT step_id FROM sched.attempt WHERE attempt_id IN ($(quote_list "$WORK/held_at_kill"))"))" 2
        pass "killed the worker with $done/$TOTAL done, holding $(wc -l <"$WORK/held_at_kill") live attempts (generation $kill_gen)"
        start_worker 2
        wait_until "the fresh worker registers" \
            "SELECT generation > $kill_gen AND runtime_state = 'READY' FROM sched.worker"
        check_eq "the fresh worker process registered the same worker again, generation" \
            "$(q "SELECT worker_id || ' ' || generation FROM sched.worker")" "$WID $((kill_gen + 1))"
    fi
    sleep 0.2
done
echo "all $TOTAL steps succeeded after $((SECONDS - start)) s"
[ -n "$cut_gen" ] || fail "the cut never happened"
[ -n "$kill_gen" ] || fail "the kill never happened"

# ---- what happened, from the tables
check_eq "steps with exactly one SUCCEEDED attempt, which is their last" \
    "$(q "SELECT count(*) FROM (
            SELECT step_id FROM sched.attempt GROUP BY step_id
            HAVING count(*) FILTER (WHERE status = 'SUCCEEDED') = 1
               AND max(attempt_number) FILTER (WHERE status = 'SUCCEEDED') = max(attempt_number)) s")" "$TOTAL"
check_eq "each task number succeeded once (payload delivered)" \
    "$(q "SELECT count(DISTINCT detail->>'task') || '/' || count(*) FROM sched.attempt WHERE status = 'SUCCEEDED'")" "$TOTAL/$TOTAL"
check_eq "attempts reported by the worker they were placed on, with their attempt number" \
    "$(q "SELECT count(*) FROM sched.attempt
           WHERE status = 'SUCCEEDED' AND (detail->>'node' IS DISTINCT FROM node_id
                                           OR (detail->>'worker')::uuid IS DISTINCT FROM worker_id
                                           OR (detail->>'attempt_number')::int IS DISTINCT FROM attempt_number)")" 0
echo "attempts: $(q "SELECT string_agg(status || ' ' || n, ', ' ORDER BY status) FROM (SELECT status, count(*) n FROM sched.attempt GROUP BY status) s")"
n=$(wc -l <"$WORK/held_at_cut")
check_eq "the cut: the attempts it was running succeeded, reported by it" \
    "$(q "SELECT count(*) FROM sched.attempt WHERE attempt_id IN ($(quote_list "$WORK/held_at_cut"))
             AND status = 'SUCCEEDED' AND worker_generation = $cut_gen AND detail->>'worker' = '$WID'")" "$n"
check_eq "the cut: its long pair renewed and finished after it registered again" \
    "$(q "SELECT count(*) FROM sched.attempt a WHERE a.step_id IN ($(quote_list "$WORK/cut_pair"))
             AND a.status = 'SUCCEEDED' AND a.attempt_number = 1 AND a.worker_generation = $cut_gen
             AND a.finished_at > '$cut_registered_at'")" 2
check_eq "the cut: it took new work in its new generation" \
    "$(q "SELECT count(*) > 0 FROM sched.attempt WHERE worker_generation = $((cut_gen + losses)) AND status = 'SUCCEEDED'")" t
n=$(wc -l <"$WORK/held_at_kill")
check_eq "the kill: the attempts held then ended LOST" \
    "$(q "SELECT count(*) FILTER (WHERE status = 'LOST') || '/' || count(*) FROM sched.attempt WHERE attempt_id IN ($(quote_list "$WORK/held_at_kill"))")" "$n/$n"
check_eq "the kill: their steps succeeded later, in a newer generation" \
    "$(q "SELECT count(*) FROM sched.attempt l JOIN sched.attempt s
             ON s.step_id = l.step_id AND s.status = 'SUCCEEDED'
            AND s.attempt_number > l.attempt_number AND s.worker_generation > $kill_gen
          WHERE l.attempt_id IN ($(quote_list "$WORK/held_at_kill"))")" "$n"
check_eq "every LOST attempt was of the killed generation, or never started; and it was retried" \
    "$(q "SELECT count(*) FROM sched.attempt l WHERE l.status = 'LOST'
             AND ((l.worker_generation <> $kill_gen AND l.started_at IS NOT NULL) OR NOT EXISTS (
                  SELECT 1 FROM sched.attempt s WHERE s.step_id = l.step_id
                     AND s.attempt_number = l.attempt_number + 1))")" 0

# ---- a payload that fails, a cancel, a drain ---------------------------------------------------
gen=$(generation)
T=$((TOTAL + 1))
submit --count 1 --first-task $T --fail --max-attempts 2 -q
wait_until "the failing task's attempts end" \
    "SELECT count(*) = 2 AND bool_and(finished_at IS NOT NULL) FROM sched.attempt WHERE detail->>'task' = '$T' OR (status IN ('DISPATCHED', 'RUNNING'))"
check_eq "a failing payload: FAILED, retried up to max_attempts, reported by the worker" \
    "$(q "SELECT string_agg(attempt_number || ' ' || status || ' ' || (detail->>'error'), ', ' ORDER BY attempt_number)
            FROM sched.attempt WHERE detail->>'task' = '$T'")" \
    "1 FAILED the payload asked to fail, 2 FAILED the payload asked to fail"

T=$((TOTAL + 2))
exec_id=$(submit --count 1 --first-task $T --sleep 120 | awk '{print $2}')
wait_until "the long task runs" \
    "SELECT count(*) = 1 FROM sched.attempt a JOIN sched.request r USING (request_id)
      WHERE r.execution_id = '$exec_id' AND a.status = 'RUNNING'"
wait_until "the long task's lease is renewed" \
    "SELECT a.lease_expires_at > a.started_at + current_setting('sched.lease_ttl')::interval
       FROM sched.attempt a JOIN sched.request r USING (request_id) WHERE r.execution_id = '$exec_id'"
pass "the worker renews the lease of a running attempt"
check_eq "cancel_execution" "$(PGUSER=$APP q "SELECT sched.cancel_execution('$exec_id')")" CANCELLED
wait_until "the cancelled attempt ends" \
    "SELECT bool_and(a.finished_at IS NOT NULL) FROM sched.attempt a JOIN sched.request r USING (request_id)
      WHERE r.execution_id = '$exec_id'"
check_eq "a CANCEL: the running attempt ended CANCELLED, reported by the worker" \
    "$(q "SELECT string_agg(a.status || ' ' || (a.detail->>'task'), ', ') FROM sched.attempt a
            JOIN sched.request r USING (request_id) WHERE r.execution_id = '$exec_id'")" "CANCELLED $T"

T=$((TOTAL + 3))
# (7 s: longer than a lease, and than the wait_commands in flight when SIGTERM comes, 5 s
# at most, after which a worker that did not wait for its attempts would leave)
submit --count 4 --first-task $T --sleep 7 -q
wait_until "4 long tasks run" "SELECT count(*) = 4 FROM sched.attempt WHERE status = 'RUNNING'"
if [ -z "${SCHED_E2E_NODE_DIRECT:-}" ]; then
    read -r clients servers <<<"$(pgbouncer_pool "$DB" "$WROLE")"
    [ "$clients" -ge 2 ] && [ "$servers" -le 3 ] ||
        fail "pgbouncer: the worker's pool has $clients clients and $servers server connections, expected >= 2 and <= 3"
    pass "the worker runs through pgbouncer ($clients client connections, $servers server connections)"
fi
kill -TERM "$WORKER"
wait_until "the worker says DRAINING" "SELECT runtime_state = 'DRAINING' FROM sched.worker"
pass "the drain: SIGTERM, the worker says DRAINING"
# work submitted now must wait: the worker takes none while it drains
late_exec=$(submit --count 1 --first-task $((T + 4)) --sleep 0.1 | awk '{print $2}')
exit_by=$((SECONDS + TIMEOUT))
while kill -0 "$WORKER" 2>/dev/null; do
    [ $SECONDS -lt $exit_by ] || fail "the drain: the worker did not exit within $TIMEOUT s of SIGTERM"
    sleep 0.1
done
rc=0
wait "$WORKER" || rc=$?
check_eq "the drain: the worker's exit status after SIGTERM" "$rc" 0
check_eq "the drain: the 4 running attempts were finished, SUCCEEDED" \
    "$(q "SELECT string_agg(status, ',') FROM (SELECT DISTINCT status FROM sched.attempt
            WHERE (detail->>'task')::int >= $T OR finished_at IS NULL) s")" SUCCEEDED
check_eq "the drain: tasks finished" \
    "$(q "SELECT count(*) FROM sched.attempt WHERE (detail->>'task')::int >= $T")" 4
check_eq "the drain: the worker says STOPPED, in the same session" \
    "$(q "SELECT runtime_state || ' ' || generation FROM sched.worker")" "STOPPED $gen"
check_eq "the drain: nothing submitted meanwhile was placed on it" \
    "$(q "SELECT count(*) FROM sched.attempt a JOIN sched.request r USING (request_id) WHERE r.execution_id = '$late_exec'")" 0
check_eq "cancel_execution of the task submitted during the drain" \
    "$(PGUSER=$APP q "SELECT sched.cancel_execution('$late_exec')")" CANCELLED
stop_pid "$SCHED" 10 || fail "the scheduler exited with status $? on SIGTERM"

if [ -z "${SCHED_E2E_NODE_DIRECT:-}" ]; then
    # what the cut and the kill leave there: terminated server connections (reported to
    # the client they served, or found dead while idle) and the killed worker's clients
    other=$(pgbouncer_log_problems 1 | grep -v -e 'pooler error: server conn crashed?' \
                -e "got packet 'E' from server when not linked" -e 'closing because: client unexpected eof' || true)
    [ -z "$other" ] || fail "pgbouncer logged problems: $(printf '%s\n' "$other" | head -3)"
    pass "pgbouncer's log: no problem but the cut's terminated server connections and the killed worker's clients"
fi
check_eq "nothing live or pending left" \
    "$(q "SELECT (SELECT count(*) FROM sched.attempt WHERE status IN ('DISPATCHED', 'RUNNING'))
              + (SELECT count(*) FROM sched.request WHERE state IN ('PENDING', 'CLAIMED'))")" 0
check_eq "slots and reservations all released" \
    "$(q "SELECT (SELECT coalesce(sum(live_attempts), 0) FROM sched.worker)
              + (SELECT coalesce(sum(live_attempts + reserved_cpu_millis), 0) FROM sched.node)")" 0
echo
echo "node e2e: $CHECKS checks passed in $((SECONDS)) s"
