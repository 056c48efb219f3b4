#!/usr/bin/env bash
# test/e2e/python.sh — end to end with the Python examples (examples/python): real worker
# processes and a scheduler loop, written as a user would from the README, against the
# running cluster of the environment (PGHOST, PGPORT, PGUSER; `test/harness.sh up` gives
# one, with pg_sched installed and preloaded), directly and through pgbouncer.
#
# Every scenario: 200 tasks of 0.05-0.2 s, 3 nodes with one worker of 4 slots each, the
# scheduler in audit mode; it waits until every step succeeded.  In the two "default"
# ones worker 3 starts its attempts as wait_commands delivers them (--start-on-delivery).
#   "default"    default settings.
#   "kill"       sched.lease_ttl 4s, sched.heartbeat_ttl 3s; once a third of the tasks
#                are done, kill -9 the worker holding the most live attempts.  Its
#                attempts must end LOST (reaped by the scheduler) and their steps succeed
#                later on another node.
#   "terminate"  sched.lease_ttl 6s, sched.heartbeat_ttl 3s; the first 6 tasks take 8 s
#                (longer than a lease: they live on renewals).  Once they all run,
#                pg_terminate_backend the main connection (the one in wait_commands) of
#                the worker running the most of them.  It must connect again, register
#                again (generation + 1), finish the attempts it was running (the long
#                ones renewed by the new session), and take new work; the only attempts
#                lost are ones dispatched to its old generation that it never started,
#                and they are retried.
#   "pooled-*"   the same three through pgbouncer (pool_mode = transaction, 5 server
#                connections per database and role): the workers (15 client connections
#                of one role), the scheduler and the submitter connect through it with
#                --pooler; the settings are the roles' (ALTER ROLE ... IN DATABASE), not
#                the database's.  Also: pgbouncer logged no error, its pools served more
#                clients than they had server connections, each role's sessions see their
#                role's settings before and after the run (nothing leaked), and psycopg's
#                prepared statements do collide through it (why --pooler exists).
# Checks, per scenario: every step has exactly one SUCCEEDED attempt and it is its last
#   attempt; the payload reached the worker (each task number succeeded once) and the
#   worker that ran an attempt is the one it was placed on; nothing is left live or
#   pending; the audit saw no dispatch_next call that left both a free slot and a request
#   that fits it, and its placements are all the attempts; the surviving workers stop
#   cleanly on SIGTERM (exit 0, runtime_state STOPPED).  "default" also: no attempt
#   other than SUCCEEDED.  Once: the examples issue no statement that needs a session
#   (SET, LISTEN, PREPARE, advisory locks, temporary tables, cursors WITH HOLD).  The
#   timeout (SCHED_E2E_TIMEOUT, 180 s per scenario) only catches hangs; no check depends
#   on elapsed time.
#
# SCHED_E2E_SCENARIOS selects scenarios (default: all six, in the order above).
# Installs python3-psycopg and pgbouncer (Debian) when missing.  pgbouncer runs as the OS
# user postgres when this runs as root, on a free loopback port, with its own ini file in
# the work directory.  Databases sched_e2e_py_<scenario> are (re)created and left for
# inspection; logs and audit files are in a directory under /tmp, printed at the start
# and removed when every check passed.  Every process started here (workers, scheduler,
# pgbouncer) is stopped at the end, also on failure.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
EX=$ROOT/examples/python
TASKS=${SCHED_E2E_TASKS:-200}
TIMEOUT=${SCHED_E2E_TIMEOUT:-180}
SCENARIOS=${SCHED_E2E_SCENARIOS:-default kill terminate pooled-default pooled-kill pooled-terminate}
POOL_SIZE=5            # server connections per (database, role) in pgbouncer
LONG=6 LONG_SLEEP=8    # "terminate": the tasks that outlive a lease (6 s)
: "${PGHOST:?PGHOST must point at the test cluster}" "${PGPORT:?PGPORT must be set}"
export PGUSER=${PGUSER:-postgres}
export PYTHONDONTWRITEBYTECODE=1      # (the audit's check imports scheduler.py from the tree)
DB_PORT=$PGPORT

# shellcheck source=test/lib/common.sh
source "$ROOT/test/lib/common.sh"      # fail, pass, check_eq, stop_pid, require_python_with_psycopg
# shellcheck source=test/lib/pgbouncer.sh
source "$ROOT/test/lib/pgbouncer.sh"

# ---- python with psycopg 3, pgbouncer ----------------------------------------------------
require_python_with_psycopg
PGBOUNCER=""
if [[ " $SCENARIOS " == *" pooled-"* ]]; then
    pgbouncer_install
    PGBOUNCER=$PGBOUNCER_BIN
fi

WORK=$(mktemp -d /tmp/pg_sched_e2e_py.XXXXXX)
chmod 755 "$WORK"      # pgbouncer (as postgres) keeps its files in a directory below
echo "python: $PY (psycopg $("$PY" -c 'import psycopg; print(psycopg.__version__)'))${PGBOUNCER:+; $("$PGBOUNCER" --version | head -1)}; logs in $WORK"

# ---- roles ---------------------------------------------------------------------------------
# a login role per job, granted one pg_sched role each and nothing else (cluster-wide:
# made once, kept for the next run)
psql -X -q -v ON_ERROR_STOP=1 -d postgres <<'SQL'
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'sched_e2e_app') THEN
        CREATE ROLE sched_e2e_app LOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'sched_e2e_worker') THEN
        CREATE ROLE sched_e2e_worker LOGIN;
    END IF;
END
$$;
SQL

# ---- processes ---------------------------------------------------------------------------
PIDS=()          # every process started here
DIR=""           # the current scenario's directory (logs shown on failure)

on_exit() {
    local rc=$? pid
    for pid in "${PIDS[@]}"; do
        kill -0 "$pid" 2>/dev/null && stop_pid "$pid" >/dev/null 2>&1 || true
    done
    pgbouncer_stop
    if [ $rc -ne 0 ] && [ -n "$DIR" ]; then
        local f
        for f in "$DIR"/*.log; do
            [ -e "$f" ] || continue
            echo "--- tail of $f" >&2
            tail -n 15 "$f" >&2
        done
    fi
    [ $rc -eq 0 ] && rm -rf "$WORK"      # kept on failure, with its logs
    exit $rc
}
trap on_exit EXIT

# ---- queries (the checks: fail, pass, check_eq of test/lib/common.sh) -----------------------
q() { psql -X -qAt -v ON_ERROR_STOP=1 -p "$DB_PORT" -d "$DB" -c "$1"; }

# ---- pgbouncer (test/lib/pgbouncer.sh) ------------------------------------------------------
# started for the first pooled scenario: the three roles' pools, POOL_SIZE server
# connections each, in front of the cluster
start_pgbouncer() {
    PGBOUNCER_USERS="$PGUSER sched_e2e_app sched_e2e_worker" \
        pgbouncer_start "$WORK/pgbouncer" "$PGHOST" "$DB_PORT" "$POOL_SIZE" || exit 1
}

# ---- once: nothing in the examples needs a session -------------------------------------------
# A statement that leaves state in the session (or needs the same server connection for
# its next statement) breaks behind a pooler in transaction mode; settings come from the
# database or the role, choices are parameters of the calls.
bad=$(grep -nE '"[[:space:]]*(SET|RESET|LISTEN|UNLISTEN|PREPARE|EXECUTE|DEALLOCATE|DISCARD|DECLARE)[[:space:]]|pg_advisory_(lock|unlock|xact)|(TEMP|TEMPORARY)[[:space:]]+TABLE|WITH[[:space:]]+HOLD|set_config' \
          "$EX"/*.py || true)
[ -z "$bad" ] || fail "the examples issue statements that need a session: $bad"
pass "the examples issue no SET, LISTEN, PREPARE, advisory lock, temporary table or held cursor"

# ---- one scenario --------------------------------------------------------------------------
scenario() {     # scenario NAME
    local name=$1 mode=${1#pooled-} pooled=0
    [ "$name" != "$mode" ] && pooled=1
    DB=sched_e2e_py_${name//-/_}
    DIR=$WORK/$name
    mkdir -p "$DIR"
    echo
    echo "=== scenario $name: $TASKS tasks, 3 workers of 4 slots$([ $mode = kill ] && echo ', kill -9 one worker')$([ $mode = terminate ] && echo ', terminate the main connection of one worker')$([ $pooled = 1 ] && echo ', through pgbouncer')"

    psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "SET client_min_messages = warning" \
         -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" \
         -c "CREATE DATABASE $DB"
    q "CREATE EXTENSION pg_sched"
    q "SET client_min_messages = warning; GRANT sched_scheduler TO sched_e2e_app; GRANT sched_worker TO sched_e2e_worker"

    # the clients' connection: the cluster, or pgbouncer in front of it
    local cport=$DB_PORT pooler=() log_from=1
    if [ $pooled = 1 ]; then
        [ -n "$PGBOUNCER_PID" ] || start_pgbouncer
        cport=$PGBOUNCER_PORT pooler=(--pooler)
        log_from=$(pgbouncer_log_mark)
    fi
    cq() {       # cq ROLE SQL: a client session of ROLE, as the programs connect
        PGPORT=$cport PGUSER=$1 psql -X -qAt -v ON_ERROR_STOP=1 -d "$DB" -c "$2"
    }

    # the settings of the deployment: on the database directly, on each role through the
    # pooler (a pooler shares server connections per database and role, and so do these).
    # All before the first session through the pooler: a server connection keeps the
    # settings it started with.
    local lease="" heartbeat="" r
    case $mode in
        kill) lease=4s heartbeat=3s ;;
        terminate) lease=6s heartbeat=3s ;;
    esac
    if [ -n "$lease" ] && [ $pooled = 0 ]; then
        psql -X -q -v ON_ERROR_STOP=1 -d postgres \
             -c "ALTER DATABASE $DB SET sched.lease_ttl = '$lease'" \
             -c "ALTER DATABASE $DB SET sched.heartbeat_ttl = '$heartbeat'"
    elif [ -n "$lease" ]; then
        for r in "$PGUSER" sched_e2e_app sched_e2e_worker; do
            psql -X -q -v ON_ERROR_STOP=1 -d postgres \
                 -c "ALTER ROLE $r IN DATABASE $DB SET sched.lease_ttl = '$lease'" \
                 -c "ALTER ROLE $r IN DATABASE $DB SET sched.heartbeat_ttl = '$heartbeat'"
        done
    fi
    # through the pooler, also a setting that differs between roles: the scheduler's
    # role dispatches without the fleet mirror, the workers' role keeps the default
    [ $pooled = 1 ] && psql -X -q -v ON_ERROR_STOP=1 -d postgres \
        -c "ALTER ROLE \"$PGUSER\" IN DATABASE $DB SET sched.fleet_mirror = off"
    if [ -n "$lease" ]; then
        for r in "$PGUSER" sched_e2e_app sched_e2e_worker; do
            check_eq "$name: short settings seen by new sessions of $r" \
                "$(cq $r "SELECT current_setting('sched.lease_ttl') || ' ' || current_setting('sched.heartbeat_ttl')")" "$lease $heartbeat"
        done
    fi
    if [ $pooled = 1 ]; then
        check_eq "$name: role settings through the pooler (scheduler's role, workers' role)" \
            "$(cq "$PGUSER" "SHOW sched.fleet_mirror") $(cq sched_e2e_worker "SHOW sched.fleet_mirror")" "off on"
        # why --pooler: psycopg prepares a statement run 5 times, on whatever server
        # connection the pooler lends it; the next client there prepares the same name
        check_eq "$name: psycopg's prepared statements collide through the pooler, not without them" \
            "$(PGPORT=$cport PGDATABASE=$DB "$PY" - <<'EOF'
import psycopg
def run(threshold):
    a = psycopg.connect("", autocommit=True, prepare_threshold=threshold)
    b = psycopg.connect("", autocommit=True, prepare_threshold=threshold)
    try:
        for c in (a, b):                    # one after the other: the same server connection
            for _ in range(8):
                c.execute("SELECT 1")
        return "ok"
    except psycopg.errors.DuplicatePreparedStatement:
        return "DuplicatePreparedStatement"
    finally:
        a.close(); b.close()
print(run(5), run(None))
EOF
)" "DuplicatePreparedStatement ok"
    fi

    # the roles of a deployment (README "Privileges"): the fleet is the admin's, the
    # application submits and dispatches as a sched_scheduler, the workers run as a
    # sched_worker; no other grant
    q "SELECT sched.upsert_node('node-' || i, cpu_millis => 4000, memory_mb => 8192)
         FROM generate_series(1, 3) i" >/dev/null

    # all the work is queued before the scheduler starts (a request submitted while an
    # audited call runs would look left over to its check)
    if [ $mode = terminate ]; then
        PGPORT=$cport PGUSER=sched_e2e_app PGDATABASE=$DB "$PY" "$EX/submit.py" "${pooler[@]}" \
            --count $LONG --sleep $LONG_SLEEP -q
        PGPORT=$cport PGUSER=sched_e2e_app PGDATABASE=$DB "$PY" "$EX/submit.py" "${pooler[@]}" \
            --count $((TASKS - LONG)) --first-task $((LONG + 1)) --sleep 0.05 --sleep-max 0.2 -q
    else
        PGPORT=$cport PGUSER=sched_e2e_app PGDATABASE=$DB "$PY" "$EX/submit.py" "${pooler[@]}" \
            --count "$TASKS" --sleep 0.05 --sleep-max 0.2 -q
    fi

    # in the default scenarios worker 3 starts what it receives (wait_commands start =>
    # true); in the others every worker starts each attempt with start_attempt
    local i pids=() starts
    for i in 1 2 3; do
        starts=()
        [ $mode = default ] && [ $i = 3 ] && starts=(--start-on-delivery)
        PGPORT=$cport PGUSER=sched_e2e_worker PGDATABASE=$DB "$PY" "$EX/worker.py" "${pooler[@]}" \
            --node "node-$i" --capability demo --versions 1.0 --slots 4 "${starts[@]}" -v >"$DIR/worker-$i.log" 2>&1 &
        pids[$i]=$!; PIDS+=($!)
    done
    # the scheduler starts once the fleet is registered, so no registration runs
    # concurrently with an audited call
    local deadline=$((SECONDS + 30))
    until [ "$(q "SELECT count(*) FROM sched.worker WHERE runtime_state = 'READY'")" = 3 ]; do
        [ $SECONDS -lt $deadline ] || fail "$name: the 3 workers did not register within 30 s"
        for i in 1 2 3; do kill -0 "${pids[$i]}" 2>/dev/null || fail "$name: worker $i exited"; done
        sleep 0.1
    done
    check_eq "$name: the workers are registered by their login role" \
        "$(q "SELECT string_agg(DISTINCT registered_by::text, ',') FROM sched.worker")" sched_e2e_worker
    # the audit's own check, before anything is dispatched: every request fits, every slot is free
    # (so a call that placed nothing now would be a violation: the check can fail)
    check_eq "$name: the audit check sees fitting requests and free slots before dispatch" \
        "$(PGPORT=$DB_PORT PGDATABASE=$DB "$PY" -c "import sys; sys.path.insert(0, '$EX'); import psycopg, scheduler
c = psycopg.connect('')
print(c.execute(scheduler.LEFT_FITTING).fetchone()[0], c.execute(scheduler.FREE_SLOTS).fetchone()[0])")" \
        "$TASKS 12"
    # the audit locks sched.worker around each call (to freeze the fleet it checks
    # against), which only the tables' owner may: the audited scheduler runs as postgres
    PGPORT=$cport PGDATABASE=$DB "$PY" "$EX/scheduler.py" "${pooler[@]}" --audit "$DIR/audit.jsonl" >"$DIR/scheduler.log" 2>&1 &
    local sched_pid=$!; PIDS+=($!)

    local start=$SECONDS victim="" victim_node="" killed_at="" done=0 gen_before="" terminations=0
    local max_clients=0 max_servers=0 shared=0 c s
    deadline=$((SECONDS + TIMEOUT))
    while :; do
        done=$(q "SELECT count(DISTINCT step_id) FROM sched.attempt WHERE status = 'SUCCEEDED'")
        [ "$done" -ge "$TASKS" ] && break
        [ $SECONDS -lt $deadline ] || fail "$name: only $done/$TASKS tasks succeeded after ${TIMEOUT} s; $(q "SELECT count(*) || ' pending, ' || count(*) FILTER (WHERE blocked <> 'none') || ' blocked: ' || coalesce(string_agg(DISTINCT last_reason, '; '), '') FROM sched.pending")"
        kill -0 "$sched_pid" 2>/dev/null || fail "$name: the scheduler exited"
        for i in 1 2 3; do
            [ $mode = kill ] && [ "$i" = "$victim" ] && continue
            kill -0 "${pids[$i]}" 2>/dev/null || fail "$name: worker $i exited"
        done
        if [ $pooled = 1 ]; then
            # the workers' pool: its clients, and the server connections they share
            read -r c s <<<"$(pgbouncer_pool "$DB" sched_e2e_worker)"
            [ "${c:-0}" -gt $max_clients ] && max_clients=$c
            [ "${s:-0}" -gt $max_servers ] && max_servers=$s
            [ "${c:-0}" -gt "${s:-0}" ] && [ "${s:-0}" -gt 0 ] && shared=$((shared + 1))
        fi
        if [ $mode = kill ] && [ -z "$victim" ] && [ "$done" -ge $((TASKS / 3)) ]; then
            # the worker holding the most live attempts right now
            victim_node=$(q "SELECT w.node_id FROM sched.attempt a JOIN sched.worker w USING (worker_id)
                              WHERE a.status IN ('DISPATCHED', 'RUNNING')
                              GROUP BY w.node_id ORDER BY count(*) DESC, w.node_id LIMIT 1")
            if [ -n "$victim_node" ]; then
                victim=${victim_node#node-}
                kill -KILL "${pids[$victim]}"
                killed_at=$(q "SELECT now()")
                wait "${pids[$victim]}" 2>/dev/null || true
                # what it held when it died (read after the kill: nothing can end now
                # but the reaper, and leases have at least 2/3 of 4 s left)
                q "SELECT a.attempt_id FROM sched.attempt a JOIN sched.worker w USING (worker_id)
                    WHERE w.node_id = '$victim_node' AND a.status IN ('DISPATCHED', 'RUNNING')
                    ORDER BY 1" >"$DIR/held_by_victim"
                echo "killed worker $victim ($victim_node) with $done/$TASKS done, holding $(wc -l <"$DIR/held_by_victim") live attempts"
                [ -s "$DIR/held_by_victim" ] || fail "$name: the killed worker held no live attempt"
                pass "$name: killed $victim_node mid-task ($(wc -l <"$DIR/held_by_victim") live attempts)"
            fi
        fi
        if [ $mode = terminate ] && [ -z "$victim" ] &&
           [ "$(q "SELECT count(*) FROM sched.attempt a JOIN sched.request r USING (request_id)
                    WHERE a.status = 'RUNNING' AND (r.payload->>'task')::int <= $LONG")" = $LONG ]; then
            # every long task runs: the worker running the most of them, and its main
            # connection while it waits in wait_commands (through pgbouncer: the server
            # connection lent to it for that statement)
            victim_node=$(q "SELECT a.node_id FROM sched.attempt a JOIN sched.request r USING (request_id)
                              WHERE a.status = 'RUNNING' AND (r.payload->>'task')::int <= $LONG
                              GROUP BY a.node_id ORDER BY count(*) DESC, a.node_id LIMIT 1")
            victim=${victim_node#node-}
            gen_before=$(q "SELECT generation FROM sched.worker WHERE node_id = '$victim_node'")
            # what it runs now: started, so delivered to it and held
            q "SELECT attempt_id FROM sched.attempt WHERE node_id = '$victim_node' AND status = 'RUNNING'
                ORDER BY 1" >"$DIR/held_by_victim"
            # Terminate the backend that serves its wait, found and signalled in one
            # statement.  Through pgbouncer that server connection may pass to another
            # client of the pool in between (which must survive it too): try again until
            # the worker says it lost its main connection.
            local tdeadline=$((SECONDS + 30)) hit
            until grep -q 'main connection lost' "$DIR/worker-$victim.log"; do
                [ $SECONDS -lt $tdeadline ] || fail "$name: the main connection of $victim_node could not be terminated in wait_commands within 30 s ($terminations terminated)"
                hit=$(q "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
                          WHERE datname = '$DB' AND application_name = 'pg_sched worker $victim_node main'
                            AND state = 'active' AND query LIKE '%wait_commands%'")
                terminations=$((terminations + hit))
                sleep $([ "$hit" -gt 0 ] && echo 0.5 || echo 0.05)
            done
            echo "terminated $victim_node's main connection (generation $gen_before; $terminations backends terminated) with $done/$TASKS done, running $(wc -l <"$DIR/held_by_victim") attempts"
            pass "$name: terminated the main connection of $victim_node while it waited in wait_commands"
        fi
        sleep 0.2
    done
    echo "all $TASKS tasks succeeded after $((SECONDS - start)) s"

    # stop the scheduler, then the workers (SIGTERM: they drain and say STOPPED)
    stop_pid "$sched_pid" || fail "$name: the scheduler exited with status $? on SIGTERM"
    for i in 1 2 3; do
        [ $mode = kill ] && [ "$i" = "$victim" ] && continue
        local rc=0
        stop_pid "${pids[$i]}" || rc=$?
        check_eq "$name: worker $i exit status after SIGTERM" "$rc" 0
    done
    [ $mode != default ] && [ -z "$victim" ] && fail "$name: no worker was stopped mid-run"
    check_eq "$name: surviving workers report STOPPED" \
        "$(q "SELECT count(*) FROM sched.worker WHERE runtime_state = 'STOPPED'")" \
        "$([ $mode = kill ] && echo 2 || echo 3)"

    # ---- what happened, from the tables
    check_eq "$name: steps submitted" "$(q "SELECT count(DISTINCT step_id) FROM sched.request")" "$TASKS"
    check_eq "$name: steps with exactly one SUCCEEDED attempt, which is their last" \
        "$(q "SELECT count(*) FROM (
                SELECT step_id FROM sched.attempt GROUP BY step_id
                HAVING count(*) FILTER (WHERE status = 'SUCCEEDED') = 1
                   AND max(attempt_number) FILTER (WHERE status = 'SUCCEEDED') = max(attempt_number)) s")" "$TASKS"
    check_eq "$name: each task number succeeded once (payload delivered)" \
        "$(q "SELECT count(DISTINCT detail->>'task') || '/' || count(*) FROM sched.attempt WHERE status = 'SUCCEEDED'")" "$TASKS/$TASKS"
    check_eq "$name: attempts run by the worker they were placed on" \
        "$(q "SELECT count(*) FROM sched.attempt
               WHERE status = 'SUCCEEDED' AND (detail->>'node' IS DISTINCT FROM node_id
                                               OR (detail->>'worker')::uuid IS DISTINCT FROM worker_id
                                               OR (detail->>'attempt_number')::int IS DISTINCT FROM attempt_number)")" 0
    check_eq "$name: nothing live or pending left" \
        "$(q "SELECT (SELECT count(*) FROM sched.attempt WHERE status IN ('DISPATCHED', 'RUNNING'))
                  + (SELECT count(*) FROM sched.request WHERE state IN ('PENDING', 'CLAIMED'))")" 0
    check_eq "$name: slots and reservations all released" \
        "$(q "SELECT (SELECT coalesce(sum(live_attempts), 0) FROM sched.worker)
                  + (SELECT coalesce(sum(live_attempts + reserved_cpu_millis), 0) FROM sched.node)")" 0
    echo "attempts: $(q "SELECT string_agg(status || ' ' || n, ', ' ORDER BY status) FROM (SELECT status, count(*) n FROM sched.attempt GROUP BY status) s")"
    local held n
    [ -s "$DIR/held_by_victim" ] && held=$(paste -sd, "$DIR/held_by_victim" | sed "s/[^,]*/'&'/g")
    n=$([ -e "$DIR/held_by_victim" ] && wc -l <"$DIR/held_by_victim" || echo 0)
    case $mode in
    default)
        check_eq "$name: every attempt SUCCEEDED (no loss, no retry)" \
            "$(q "SELECT count(*) FROM sched.attempt WHERE status <> 'SUCCEEDED'")" 0
        # started in the call that delivered it: started_at is the delivery's time
        check_eq "$name: node-3's attempts were started as they were delivered, the others' later" \
            "$(q "SELECT count(*) FILTER (WHERE a.node_id = 'node-3' AND a.started_at = c.delivered_at) > 0
                  AND count(*) FILTER (WHERE a.node_id = 'node-3' AND a.started_at IS DISTINCT FROM c.delivered_at) = 0
                  AND count(*) FILTER (WHERE a.node_id <> 'node-3' AND a.started_at <= c.delivered_at) = 0
                  FROM sched.attempt a JOIN sched.command c ON c.attempt_id = a.attempt_id AND c.kind = 'START'")" t
        ;;
    kill)
        check_eq "$name: the killed worker's live attempts ended LOST" \
            "$(q "SELECT count(*) FILTER (WHERE status = 'LOST') || '/' || count(*) FROM sched.attempt WHERE attempt_id IN ($held)")" "$n/$n"
        check_eq "$name: their steps succeeded later on another node" \
            "$(q "SELECT count(*) FROM sched.attempt l JOIN sched.attempt s
                     ON s.step_id = l.step_id AND s.status = 'SUCCEEDED'
                    AND s.attempt_number > l.attempt_number AND s.node_id <> l.node_id
                  WHERE l.attempt_id IN ($held)")" "$n"
        check_eq "$name: every LOST attempt was on the killed worker, and was retried" \
            "$(q "SELECT count(*) FROM sched.attempt l WHERE l.status = 'LOST'
                     AND (l.node_id <> '$victim_node' OR NOT EXISTS (
                          SELECT 1 FROM sched.attempt s WHERE s.step_id = l.step_id
                             AND s.attempt_number = l.attempt_number + 1))")" 0
        echo "attempts placed on $victim_node after the kill: $(q "SELECT count(*) FROM sched.attempt WHERE node_id = '$victim_node' AND dispatched_at > '$killed_at'")"
        ;;
    terminate)
        local losses
        losses=$(grep -c 'main connection lost' "$DIR/worker-$victim.log" || true)
        [ "$losses" -ge 1 ] || fail "$name: $victim_node never said it lost its main connection"
        check_eq "$name: $victim_node registered again after each lost main connection" \
            "$(q "SELECT generation - $gen_before FROM sched.worker WHERE node_id = '$victim_node'")" "$losses"
        [ "$n" -gt 0 ] || fail "$name: $victim_node ran no attempt when its connection was terminated"
        check_eq "$name: the attempts it was running succeeded, reported by it" \
            "$(q "SELECT count(*) FROM sched.attempt WHERE attempt_id IN ($held) AND status = 'SUCCEEDED'
                     AND worker_generation = $gen_before")" "$n"
        check_eq "$name: among them long tasks, renewed and finished after it registered again" \
            "$(q "SELECT count(*) > 0 FROM sched.attempt a JOIN sched.request r USING (request_id)
                   WHERE a.attempt_id IN ($held) AND (r.payload->>'task')::int <= $LONG
                     AND a.status = 'SUCCEEDED' AND a.finished_at > (
                         SELECT registered_at FROM sched.worker WHERE node_id = '$victim_node')")" t
        check_eq "$name: it took new work in its new generation" \
            "$(q "SELECT count(*) > 0 FROM sched.attempt WHERE node_id = '$victim_node'
                     AND worker_generation = $((gen_before + 1)) AND status = 'SUCCEEDED'")" t
        # (through the pooler, a terminated backend may have served another worker's
        # wait instead: that worker registered again too)
        check_eq "$name: every LOST attempt was dispatched to a replaced generation, never started, and retried" \
            "$(q "SELECT count(*) FROM sched.attempt l WHERE l.status = 'LOST'
                     AND (l.worker_generation >= (SELECT w.generation FROM sched.worker w WHERE w.worker_id = l.worker_id)
                          OR l.started_at IS NOT NULL OR NOT EXISTS (
                              SELECT 1 FROM sched.attempt s WHERE s.step_id = l.step_id
                                 AND s.attempt_number = l.attempt_number + 1))")" 0
        echo "attempts of $victim_node: $(q "SELECT string_agg(format('generation %s %s %s', worker_generation, status, n), ', ' ORDER BY worker_generation, status)
                                              FROM (SELECT worker_generation, status, count(*) n FROM sched.attempt
                                                     WHERE node_id = '$victim_node' GROUP BY 1, 2) s")"
        ;;
    esac

    # ---- the audit: no dispatch_next call left a free slot and a request that fits it
    local audit
    audit=$("$PY" - "$DIR/audit.jsonl" <<'EOF'
import json, sys
calls = placed = violations = 0
first = None
for line in open(sys.argv[1]):
    r = json.loads(line)
    calls += 1
    placed += r["placed"]
    if r["placed"] < 100 and r["left_fitting"] > 0:
        violations += 1
        first = first or line.strip()
print(calls, placed, violations, first or "-")
EOF
)
    local calls placements violations first
    read -r calls placements violations first <<<"$audit"
    echo "audit: $calls dispatch_next calls, $placements placements, $violations violations"
    [ "$calls" -gt 0 ] || fail "$name: the audit recorded no call"
    [ "$violations" = 0 ] || fail "$name: $violations calls left both a free slot and a fitting request; first: $first"
    pass "$name: no dispatch_next call left both a free slot and a fitting request ($calls calls)"
    check_eq "$name: audited placements are all the attempts" "$placements" "$(q "SELECT count(*) FROM sched.attempt")"

    # ---- the pooler
    if [ $pooled = 1 ]; then
        echo "workers' pool: up to $max_clients clients on up to $max_servers server connections; $(pgbouncer_stat "$DB" total_xact_count) transactions, $(pgbouncer_stat "$DB" total_query_count) queries through pgbouncer"
        [ $max_servers -le $POOL_SIZE ] || fail "$name: the workers' pool had $max_servers server connections, more than $POOL_SIZE"
        [ $shared -gt 0 ] && [ $max_clients -gt $max_servers ] ||
            fail "$name: the workers' pool never had more clients than server connections ($max_clients clients, $max_servers servers)"
        pass "$name: the workers' $max_clients client connections shared at most $max_servers server connections"
        # what pgbouncer said about this scenario: no protocol or server error; a
        # terminated server connection is reported to the client it served (at least the
        # worker's, at most one per termination).  (Not pgbouncer_log_problems: it also
        # counts lines saying "unexpected".)
        local errors crashed
        errors=$(tail -n +"$log_from" "$PGBOUNCER_LOG" | grep -E 'ERROR|WARNING|FATAL|got packet|prepared statement' || true)
        crashed=$(printf '%s' "$errors" | grep -c 'pooler error: server conn crashed?' || true)
        check_eq "$name: pgbouncer's log has no error but 'server conn crashed?' of terminated connections" \
            "$(printf '%s' "$errors" | grep -vc 'pooler error: server conn crashed?' || true)" 0
        if [ $mode = terminate ]; then
            [ "$crashed" -ge 1 ] && [ "$crashed" -le "$terminations" ] ||
                fail "$name: pgbouncer reported $crashed crashed server connections for $terminations terminations"
            pass "$name: pgbouncer reported $crashed terminated server connection(s) to their clients ($terminations terminated)"
        else
            check_eq "$name: no server connection crashed" "$crashed" 0
        fi
        check_eq "$name: after the run, sessions of each role still see their role's settings" \
            "$(cq "$PGUSER" "SHOW sched.fleet_mirror") $(cq sched_e2e_worker "SHOW sched.fleet_mirror")$([ -n "$lease" ] && echo " $(cq sched_e2e_worker "SHOW sched.lease_ttl")")" \
            "off on${lease:+ $lease}"
    fi
}

for s in $SCENARIOS; do
    scenario "$s"
done
DIR=""
echo
echo "python e2e: $CHECKS checks passed"
