#!/usr/bin/env bash
# test/soak/run.sh — the soak test (issue 12): N concurrent clients for T seconds on a
# throwaway cluster of its own, then checks that nothing deadlocked, nothing failed that
# should not, the invariants hold, every step ended exactly once, and every dead
# worker's attempts were reaped in time.  The clients are test/soak/soak.py (its header
# says what they do and what is checked).
#
#   bash test/soak/run.sh               the long form: 16 clients x 120 s (make soak)
#   SOAK_SECONDS=30 bash test/soak/run.sh   the short form (make test)
#   bash test/soak/run.sh --self-test   a short run with every check broken on purpose
#                                       (SOAK_BREAK=all): passes only if each check fails
#
# The cluster: initdb in a mktemp -d directory, run as the OS user postgres when run as
# root (PostgreSQL refuses root), on a free port on 127.0.0.1, with
# shared_preload_libraries = 'pg_sched', sched.databases = the soak database and
# sched.maintenance_interval = 1; the superuser-only settings (sched.lease_ttl,
# sched.heartbeat_ttl, the backoffs) are set with ALTER DATABASE.  The server is
# restarted once after the database exists, so that the maintenance worker starts for
# it.  Reaping is left to that background worker: no client calls reap_expired.  The
# cluster is stopped and its data removed at exit, also on failure; the server log and
# the client log stay in the work directory when the run fails, and are removed
# otherwise.  SOAK_KEEP=1 keeps everything, the stopped cluster too (the command that
# starts it again is printed).
#
# Uses the installed pg_sched (run `make install` first; this script builds nothing).
#   env: SOAK_CLIENTS (16), SOAK_SECONDS (120), SOAK_DRAIN (10: no new work in the last
#        SOAK_DRAIN seconds), SOAK_SEED (12), SOAK_REPORT (markdown report file; default
#        none), SOAK_LEASE_TTL (3), SOAK_HEARTBEAT_TTL (3), SOAK_REAP_SLACK (0: seconds
#        allowed beyond lease_ttl + maintenance_interval), SOAK_KEEP=1, SOAK_BREAK (see
#        soak.py), SOAK_VERBOSE=1 (the client log's tail also on success), PYTHON (a
#        python3 that can import psycopg 3).  Takes SOAK_SECONDS + about 20 s.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
DB=sched_soak
SELFTEST=""
if [ "${1:-}" = "--self-test" ]; then
    SELFTEST=1
    export SOAK_BREAK=all
    export SOAK_CLIENTS=${SOAK_CLIENTS:-8} SOAK_SECONDS=${SOAK_SECONDS:-20} SOAK_DRAIN=${SOAK_DRAIN:-8}
elif [ $# -gt 0 ]; then
    echo "usage: $0 [--self-test]" >&2
    exit 2
fi
export SOAK_CLIENTS=${SOAK_CLIENTS:-16} SOAK_SECONDS=${SOAK_SECONDS:-120}
export SOAK_LEASE_TTL=${SOAK_LEASE_TTL:-3} SOAK_HEARTBEAT_TTL=${SOAK_HEARTBEAT_TTL:-3}
export SOAK_MAINTENANCE_INTERVAL=1

TEST_SUITE=soak
# shellcheck source=test/lib/common.sh
source "$ROOT/test/lib/common.sh"      # say, fail, RUN_USER, as_run_user, free_port, ...

# ---- python with psycopg 3 ------------------------------------------------------------
find_python_with_psycopg || fail "no python3 can import psycopg (Debian: apt-get install python3-psycopg)"
[ -x "$PGBIN/initdb" ] || fail "no PostgreSQL 15 server in $PGBIN"

# ---- the throwaway cluster (as RUN_USER: postgres when root) -----------------------------
WORK=$(mktemp -d /tmp/pg_sched_soak.XXXXXX)
[ "$(id -u)" -eq 0 ] && chown "$RUN_USER" "$WORK"
DATA=$WORK/data
LOG=$WORK/server.log
STARTED=""
RESULT=1
on_exit() {
    if [ -n "$STARTED" ]; then
        as_run_user "$PGBIN/pg_ctl" -D "$DATA" -m fast -w -t 30 stop >/dev/null 2>&1 \
            || as_run_user "$PGBIN/pg_ctl" -D "$DATA" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    if [ -n "${SOAK_KEEP:-}" ]; then
        echo "soak: kept $WORK (server.log, client.log; the stopped cluster in $DATA:" \
             "$( [ "$(id -u)" -eq 0 ] && echo "runuser -u $RUN_USER -- ")$PGBIN/pg_ctl -D $DATA -l $LOG start)" >&2
        return
    fi
    rm -rf "$DATA"
    if [ "$RESULT" -ne 0 ]; then
        echo "soak: server log and client log kept in $WORK" >&2
    else
        rm -rf "$WORK"
    fi
}
trap on_exit EXIT

PORT=$(free_port)
as_run_user "$PGBIN/initdb" -D "$DATA" -U postgres --auth=trust --encoding=UTF8 \
    --locale=C.UTF-8 >"$WORK/initdb.log" 2>&1 || { cat "$WORK/initdb.log" >&2; fail "initdb failed"; }
{
    echo "port = $PORT"
    echo "listen_addresses = '127.0.0.1'"
    echo "unix_socket_directories = ''"
    echo "shared_preload_libraries = 'pg_sched'"
    echo "max_connections = $(( SOAK_CLIENTS + 40 ))"
    echo "fsync = off"
    echo "synchronous_commit = off"
    echo "sched.maintenance_interval = $SOAK_MAINTENANCE_INTERVAL"
    # every error with its SQLSTATE, backend type and client (soak.py reads this log)
    echo "log_line_prefix = '%m [%p] <%b> {%a} %e '"
    echo "log_min_messages = warning"
    echo "log_min_error_statement = error"
    echo "log_lock_waits = on"
} | as_run_user tee -a "$DATA/postgresql.conf" >/dev/null
start() { as_run_user "$PGBIN/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 start >/dev/null; STARTED=1; }
start
export PGHOST=127.0.0.1 PGPORT=$PORT PGUSER=postgres PGDATABASE=$DB
PSQL=(psql -X -q -v ON_ERROR_STOP=1)
"${PSQL[@]}" -d postgres -c "CREATE DATABASE $DB"
"${PSQL[@]}" -d "$DB" <<SQL
SET client_min_messages = warning;
CREATE EXTENSION pg_sched;
ALTER DATABASE $DB SET sched.lease_ttl = '${SOAK_LEASE_TTL}s';
ALTER DATABASE $DB SET sched.heartbeat_ttl = '${SOAK_HEARTBEAT_TTL}s';
ALTER DATABASE $DB SET sched.retry_backoff_max = '4s';
ALTER DATABASE $DB SET sched.unschedulable_backoff_max = '4s';
-- the soak's workers multiplex sessions on one connection and LISTEN (sched.notify_workers
-- is off by default in 0.2.0; wait_commands, one worker per connection, is e2e's)
ALTER DATABASE $DB SET sched.notify_workers = on;
SQL
# sched.databases is read at server start: now that the database exists, restart
echo "sched.databases = '$DB'" | as_run_user tee -a "$DATA/postgresql.conf" >/dev/null
as_run_user "$PGBIN/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 restart -m fast >/dev/null
say "cluster on 127.0.0.1:$PORT (data $DATA), database $DB; $("$PY" -c 'import psycopg; print("psycopg", psycopg.__version__)')"
for _ in $(seq 1 50); do
    [ "$(psql -X -At -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pg_sched maintenance'")" -ge 1 ] && break
    sleep 0.2
done
[ "$(psql -X -At -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pg_sched maintenance'")" -ge 1 ] \
    || { tail -20 "$LOG" >&2; fail "the pg_sched maintenance worker did not start for $DB"; }

# ---- the soak ----------------------------------------------------------------------------
export SOAK_SERVER_LOG=$LOG SOAK_INVARIANTS=$ROOT/test/pgbench/invariants.sql
export SOAK_WORK=$WORK
rc=0
"$PY" -u "$HERE/soak.py" 2>"$WORK/client.log" || rc=$?
if [ -s "$WORK/client.log" ] && { [ "$rc" -ne 0 ] || [ -n "${SOAK_VERBOSE:-}" ]; }; then
    echo "--- client log (last 40 lines of $WORK/client.log):" >&2
    tail -40 "$WORK/client.log" >&2
fi

if [ -n "$SELFTEST" ]; then
    # soak.py must have failed, naming every check (it prints "FAILED CHECKS: a, b, ...")
    [ "$rc" -ne 0 ] || fail "self-test: the soak passed although every check was broken on purpose"
    [ -f "$WORK/failed_checks" ] || fail "self-test: soak.py wrote no list of failed checks (exit $rc)"
    missing=""
    for check in $("$PY" "$HERE/soak.py" --list-checks); do
        if grep -qx "$check" "$WORK/failed_checks"; then
            printf '  self-test %-32s fails as it must\n' "$check"
        else
            printf '  self-test %-32s DID NOT FAIL when broken on purpose\n' "$check" >&2
            missing="$missing $check"
        fi
    done
    [ -z "$missing" ] || fail "self-test: these checks could not fail:$missing"
    RESULT=0
    say "self-test passed: every check fails when broken"
    exit 0
fi
[ "$rc" -eq 0 ] || fail "soak.py exited with $rc (report above; logs in $WORK)"
RESULT=0
say "passed"
