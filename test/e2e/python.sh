#!/usr/bin/env bash
# test/e2e/python.sh — end to end with the Python examples (examples/python): real worker
# processes and a scheduler loop, written as a user would from the README, against the
# running cluster of the environment (PGHOST, PGPORT, PGUSER; `test/harness.sh up` gives
# one, with pg_sched installed and preloaded).
#
# Scenario "default" (default settings): 200 tasks of 0.1-0.3 s, 3 nodes with one worker
#   of 4 slots each, the scheduler in audit mode.  Waits until every step succeeded.
# Scenario "kill" (sched.lease_ttl 4s, sched.heartbeat_ttl 3s, set on the database before
#   any process starts): the same, and once about a third of the tasks are done, kill -9
#   the worker holding the most live attempts.  Its attempts must end LOST (reaped by the
#   scheduler) and their steps succeed later on another node.
# Checks, per scenario: every step has exactly one SUCCEEDED attempt and it is its last
#   attempt; the payload reached the worker (each task number succeeded once) and the
#   worker that ran an attempt is the one it was placed on; nothing is left live or
#   pending; the audit saw no dispatch_next call that left both a free slot and a request
#   that fits it, and its placements are all the attempts; the surviving workers stop
#   cleanly on SIGTERM (exit 0, runtime_state STOPPED).  "default" also: no attempt
#   other than SUCCEEDED.  The timeout (SCHED_E2E_TIMEOUT, 180 s per scenario) only
#   catches hangs; no check depends on elapsed time.
#
# Installs python3-psycopg (Debian) when no python3 can import psycopg.  Databases
# sched_e2e_py_default and sched_e2e_py_kill are (re)created and left for inspection;
# logs and audit files are in a directory under /tmp, printed at the start and removed
# when every check passed.  Every process started here is stopped at the end, also on
# failure.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
EX=$ROOT/examples/python
TASKS=${SCHED_E2E_TASKS:-200}
TIMEOUT=${SCHED_E2E_TIMEOUT:-180}
: "${PGHOST:?PGHOST must point at the test cluster}" "${PGPORT:?PGPORT must be set}"
export PGUSER=${PGUSER:-postgres}

# ---- python with psycopg 3 -------------------------------------------------------------
find_python() {
    local p
    for p in ${PYTHON:-} python3 /usr/bin/python3; do
        if command -v "$p" >/dev/null && "$p" -c 'import psycopg' 2>/dev/null; then
            PY=$(command -v "$p"); return 0
        fi
    done
    return 1
}
if ! find_python; then
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
    echo "installing python3-psycopg"
    $SUDO apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-psycopg >/dev/null
    find_python || { echo "FAIL: no python3 can import psycopg after installing python3-psycopg" >&2; exit 1; }
fi

WORK=$(mktemp -d /tmp/pg_sched_e2e_py.XXXXXX)
echo "python: $PY (psycopg $("$PY" -c 'import psycopg; print(psycopg.__version__)')); logs in $WORK"

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

stop_pid() {     # stop_pid PID: SIGTERM, up to 10 s, then SIGKILL; returns its exit status
    local pid=$1 i
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    local rc=0
    wait "$pid" 2>/dev/null || rc=$?
    return $rc
}

on_exit() {
    local rc=$? pid
    for pid in "${PIDS[@]}"; do
        kill -0 "$pid" 2>/dev/null && stop_pid "$pid" >/dev/null 2>&1 || true
    done
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

# ---- checks ------------------------------------------------------------------------------
CHECKS=0
fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { CHECKS=$((CHECKS + 1)); echo "ok $CHECKS - $*"; }
check_eq() {     # check_eq WHAT ACTUAL EXPECTED
    [ "$2" = "$3" ] || fail "$1: got '$2', expected '$3'"
    pass "$1 ($2)"
}

q() { psql -X -qAt -v ON_ERROR_STOP=1 -d "$DB" -c "$1"; }

# ---- one scenario --------------------------------------------------------------------------
scenario() {     # scenario NAME KILL(0|1)
    local name=$1 kill=$2
    DB=sched_e2e_py_$name
    DIR=$WORK/$name
    mkdir -p "$DIR"
    echo
    echo "=== scenario $name: $TASKS tasks, 3 workers of 4 slots$([ "$kill" = 1 ] && echo ', kill -9 one worker')"

    psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" \
         -c "CREATE DATABASE $DB"
    q "CREATE EXTENSION pg_sched"
    q "SET client_min_messages = warning; GRANT sched_scheduler TO sched_e2e_app; GRANT sched_worker TO sched_e2e_worker"
    if [ "$kill" = 1 ]; then
        # new sessions (all of those below) get these
        psql -X -q -v ON_ERROR_STOP=1 -d postgres \
             -c "ALTER DATABASE $DB SET sched.lease_ttl = '4s'" \
             -c "ALTER DATABASE $DB SET sched.heartbeat_ttl = '3s'"
        check_eq "$name: short settings seen by new sessions" \
            "$(q "SELECT current_setting('sched.lease_ttl') || ' ' || current_setting('sched.heartbeat_ttl')")" "4s 3s"
    fi

    # the roles of a deployment (README "Privileges"): the fleet is the admin's, the
    # application submits and dispatches as a sched_scheduler, the workers run as a
    # sched_worker; no other grant
    q "SELECT sched.upsert_node('node-' || i, cpu_millis => 4000, memory_mb => 8192)
         FROM generate_series(1, 3) i"

    # all the work is queued before the scheduler starts (a request submitted while an
    # audited call runs would look left over to its check)
    PGUSER=sched_e2e_app PGDATABASE=$DB "$PY" "$EX/submit.py" --count "$TASKS" --sleep 0.1 --sleep-max 0.3 -q

    local i pids=() nodes=()
    for i in 1 2 3; do
        PGUSER=sched_e2e_worker PGDATABASE=$DB "$PY" "$EX/worker.py" --node "node-$i" --capability demo --versions 1.0 \
            --slots 4 -v >"$DIR/worker-$i.log" 2>&1 &
        pids[$i]=$!; nodes[$i]=node-$i; PIDS+=($!)
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
        "$(PGDATABASE=$DB "$PY" -c "import sys; sys.path.insert(0, '$EX'); import psycopg, scheduler
c = psycopg.connect('')
print(c.execute(scheduler.LEFT_FITTING).fetchone()[0], c.execute(scheduler.FREE_SLOTS).fetchone()[0])")" \
        "$TASKS 12"
    # the audit locks sched.worker around each call (to freeze the fleet it checks
    # against), which only the tables' owner may: the audited scheduler runs as postgres
    PGDATABASE=$DB "$PY" "$EX/scheduler.py" --audit "$DIR/audit.jsonl" >"$DIR/scheduler.log" 2>&1 &
    local sched_pid=$!; PIDS+=($!)

    local start=$SECONDS victim="" victim_node="" killed_at="" done=0
    deadline=$((SECONDS + TIMEOUT))
    while :; do
        done=$(q "SELECT count(DISTINCT step_id) FROM sched.attempt WHERE status = 'SUCCEEDED'")
        [ "$done" -ge "$TASKS" ] && break
        [ $SECONDS -lt $deadline ] || fail "$name: only $done/$TASKS tasks succeeded after ${TIMEOUT} s; $(q "SELECT count(*) || ' pending, ' || count(*) FILTER (WHERE blocked <> 'none') || ' blocked: ' || coalesce(string_agg(DISTINCT last_reason, '; '), '') FROM sched.pending")"
        kill -0 "$sched_pid" 2>/dev/null || fail "$name: the scheduler exited"
        for i in 1 2 3; do
            [ "$i" = "$victim" ] || kill -0 "${pids[$i]}" 2>/dev/null || fail "$name: worker $i exited"
        done
        if [ "$kill" = 1 ] && [ -z "$victim" ] && [ "$done" -ge $((TASKS / 3)) ]; then
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
        sleep 0.2
    done
    echo "all $TASKS tasks succeeded after $((SECONDS - start)) s"

    # stop the scheduler, then the workers (SIGTERM: they drain and say STOPPED)
    stop_pid "$sched_pid" || fail "$name: the scheduler exited with status $? on SIGTERM"
    for i in 1 2 3; do
        [ "$i" = "$victim" ] && continue
        local rc=0
        stop_pid "${pids[$i]}" || rc=$?
        check_eq "$name: worker $i exit status after SIGTERM" "$rc" 0
    done
    [ "$kill" = 1 ] && [ -z "$victim" ] && fail "$name: no worker was killed"
    check_eq "$name: surviving workers report STOPPED" \
        "$(q "SELECT count(*) FROM sched.worker WHERE runtime_state = 'STOPPED'")" \
        "$([ "$kill" = 1 ] && echo 2 || echo 3)"

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
    if [ "$kill" = 0 ]; then
        check_eq "$name: every attempt SUCCEEDED (no loss, no retry)" \
            "$(q "SELECT count(*) FROM sched.attempt WHERE status <> 'SUCCEEDED'")" 0
    else
        local held
        held=$(paste -sd, "$DIR/held_by_victim" | sed "s/[^,]*/'&'/g")
        check_eq "$name: the killed worker's live attempts ended LOST" \
            "$(q "SELECT count(*) FILTER (WHERE status = 'LOST') || '/' || count(*) FROM sched.attempt WHERE attempt_id IN ($held)")" \
            "$(wc -l <"$DIR/held_by_victim")/$(wc -l <"$DIR/held_by_victim")"
        check_eq "$name: their steps succeeded later on another node" \
            "$(q "SELECT count(*) FROM sched.attempt l JOIN sched.attempt s
                     ON s.step_id = l.step_id AND s.status = 'SUCCEEDED'
                    AND s.attempt_number > l.attempt_number AND s.node_id <> l.node_id
                  WHERE l.attempt_id IN ($held)")" "$(wc -l <"$DIR/held_by_victim")"
        check_eq "$name: every LOST attempt was on the killed worker, and was retried" \
            "$(q "SELECT count(*) FROM sched.attempt l WHERE l.status = 'LOST'
                     AND (l.node_id <> '$victim_node' OR NOT EXISTS (
                          SELECT 1 FROM sched.attempt s WHERE s.step_id = l.step_id
                             AND s.attempt_number = l.attempt_number + 1))")" 0
        echo "attempts placed on $victim_node after the kill: $(q "SELECT count(*) FROM sched.attempt WHERE node_id = '$victim_node' AND dispatched_at > '$killed_at'")"
    fi

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
}

scenario default 0
scenario kill 1
DIR=""
echo
echo "python e2e: $CHECKS checks passed"
