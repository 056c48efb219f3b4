#!/usr/bin/env bash
# test/valgrind/run.sh — the pg_regress suite (and the isolation specs) against a
# throwaway PostgreSQL 15 cluster whose postmaster, and so every backend and background
# worker it forks, runs under Valgrind's memcheck; then the Valgrind logs are scanned and
# the run fails if any error has a stack frame in pg_sched.so.
#
#   bash test/valgrind/run.sh
#
# Uses the installed extension (make install first; nothing here builds or installs).
# As root the server runs as the OS user postgres (PostgreSQL refuses root), from a
# temporary directory (mktemp -d: the data, the suppression file, the logs), listening
# on 127.0.0.1 on a free port only; it is stopped at exit, also on failure.  Nothing the
# server reads comes from the checkout, which may be unreadable to postgres.  pg_regress
# and pg_isolation_regress write their results under the temporary directory
# (--outputdir), not into the checkout's results/ or output_iso/.
#
# Environment:
#   VALGRIND_ISOLATION=0     skip the isolation specs (they run by default)
#   VALGRIND_KEEP=1          keep the temporary directory (kept anyway on failure)
#   VALGRIND_EXTRA_OPTS      more valgrind options
#   VALGRIND_START_TIMEOUT   seconds to wait for the server (default 300)
#
# Valgrind options: those PostgreSQL's own Valgrind runs use (--trace-children=yes
# --track-origins=yes --read-var-info=no --leak-check=no --gen-suppressions=all
# --error-markers, a log file per process, PostgreSQL's suppression file, stored as
# test/valgrind/postgresql.supp since Debian does not ship it).  Debian's server is not
# built with USE_VALGRIND, so memcheck does not see palloc chunk boundaries: reads past
# a palloc'd chunk within its memory-context block, or of pfree'd chunks, go unseen, and
# uninitialised bytes are seen only in memory fresh from malloc (not in reused chunks);
# invalid accesses to malloc'd memory, uses of uninitialised values and syscalls given
# uninitialised bytes are seen.  The logs are scanned by test/valgrind/scan_logs.py
# (run it again on kept logs: python3 test/valgrind/scan_logs.py DIR/valgrind).
# Time on 2 cores: 22 min (pg_regress 8.4, isolation specs 13.9); 30 min when busy.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
PGBIN=/usr/lib/postgresql/15/bin
PG_CONFIG=$PGBIN/pg_config
# shellcheck source=test/lib/common.sh
source test/lib/common.sh      # RUN_USER (postgres when root), as_run_user, free_port, apt_install_missing

log() { printf '\n=== %s\n' "$*"; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }'; }

apt_install_missing valgrind
PKGLIB=$($PG_CONFIG --pkglibdir)
SO="$PKGLIB/pg_sched.so"
[ -f "$SO" ] || { echo "run.sh: $SO is not installed (make install first)" >&2; exit 1; }

T_ALL=$(now)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/pg_sched-valgrind.XXXXXX")
chmod 755 "$WORK"
DATA="$WORK/data"
VGLOG="$WORK/valgrind"
mkdir -p "$VGLOG"
cp test/valgrind/postgresql.supp "$WORK/postgresql.supp"
[ "$(id -u)" -eq 0 ] && chown -R "$RUN_USER" "$WORK"
status=1

stop_server() {
    [ -f "$DATA/postmaster.pid" ] || return 0
    local pid
    pid=$(head -n 1 "$DATA/postmaster.pid" 2>/dev/null || true)
    as_run_user "$PGBIN/pg_ctl" -D "$DATA" -m fast -w -t 600 stop >/dev/null 2>&1 || true
    # the postmaster removes its pid file before valgrind, in the same process, has
    # written its last words: wait for the process itself
    for _ in $(seq 1 120); do
        [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || break
        sleep 1
    done
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        echo "server did not stop: killing postmaster $pid"
        kill -QUIT "$pid" 2>/dev/null || true
        sleep 5
        kill -KILL "$pid" 2>/dev/null || true
    fi
}
cleanup() {
    stop_server
    rm -rf "$DATA"
    if [ $status -eq 0 ] && [ -z "${VALGRIND_KEEP:-}" ]; then
        rm -rf "$WORK"
    else
        echo "valgrind logs, pg_regress output and server log kept in $WORK"
    fi
}
trap cleanup EXIT

PGPORT=$(free_port)
log "initdb (not under valgrind) in $DATA"
as_run_user "$PGBIN/initdb" -D "$DATA" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 \
    >"$WORK/initdb.log"
{
    echo "port = $PGPORT"
    echo "listen_addresses = '127.0.0.1'"
    echo "unix_socket_directories = ''"
    echo "shared_preload_libraries = 'pg_sched'"
    echo "max_connections = 60"
    echo "log_min_messages = warning"
    echo "fsync = off"
    echo "log_line_prefix = '%m [%p] '"
} | as_run_user tee -a "$DATA/postgresql.conf" >/dev/null

VG_OPTS=(--tool=memcheck --trace-children=yes --track-origins=yes --read-var-info=no
         --leak-check=no --gen-suppressions=all --error-limit=no --num-callers=40
         --time-stamp=yes --error-markers=VALGRINDERROR-BEGIN,VALGRINDERROR-END
         --suppressions="$WORK/postgresql.supp" --log-file="$VGLOG/%p.log")
# shellcheck disable=SC2206
[ -n "${VALGRIND_EXTRA_OPTS:-}" ] && VG_OPTS+=(${VALGRIND_EXTRA_OPTS})

log "postmaster under valgrind on 127.0.0.1:$PGPORT"
T0=$(now)
as_run_user valgrind "${VG_OPTS[@]}" "$PGBIN/postgres" -D "$DATA" >"$WORK/server.log" 2>&1 &
deadline=$(( $(date +%s) + ${VALGRIND_START_TIMEOUT:-300} ))
until "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$PGPORT" -U postgres -d postgres; do
    if [ "$(date +%s)" -gt "$deadline" ] || ! jobs %1 >/dev/null 2>&1; then
        echo "server did not start; its log:"; tail -n 40 "$WORK/server.log"; exit 1
    fi
    sleep 1
done
echo "server up after $(elapsed "$T0") s"
export PGHOST=127.0.0.1 PGPORT PGUSER=postgres PGDATABASE=postgres

suites_failed=()
run_suite() {
    local name=$1; shift
    local t rc=0
    t=$(now)
    log "suite $name under valgrind"
    make -s installcheck PG_CONFIG="$PG_CONFIG" "$@" || rc=$?
    echo "suite $name: exit $rc after $(elapsed "$t") s"
    if [ $rc -ne 0 ]; then
        suites_failed+=("$name")
        for f in "$WORK/$name/regression.diffs"; do [ -f "$f" ] && { echo "--- $f"; head -n 200 "$f"; }; done
    fi
    return 0
}
run_suite regress ISOLATION= EXTRA_REGRESS_OPTS="--outputdir=$WORK/regress"
if [ "${VALGRIND_ISOLATION:-1}" != 0 ]; then
    run_suite isolation REGRESS= EXTRA_REGRESS_OPTS="--outputdir=$WORK/isolation"
else
    echo "isolation specs skipped (VALGRIND_ISOLATION=0)"
fi

log "stopping the server (every process writes its valgrind summary as it exits)"
T0=$(now)
stop_server
echo "stopped after $(elapsed "$T0") s"

log "scanning $(find "$VGLOG" -name '*.log' | wc -l) valgrind logs (test/valgrind/scan_logs.py)"
scan_rc=0
python3 test/valgrind/scan_logs.py "$VGLOG" --so "$SO" --src "$ROOT" --out "$WORK" || scan_rc=$?

echo
echo "server log: $(grep -c 'terminated by signal' "$WORK/server.log" || true) backends terminated by a signal" \
     "(a valgrind-detected fatal error would show here)"
echo "total time: $(elapsed "$T_ALL") s"
if [ $scan_rc -ne 0 ] || [ ${#suites_failed[@]} -gt 0 ] || grep -q 'terminated by signal' "$WORK/server.log"; then
    [ ${#suites_failed[@]} -gt 0 ] && echo "failed suites under valgrind: ${suites_failed[*]} (diffs in $WORK)"
    [ $scan_rc -eq 3 ] && echo "valgrind found errors with a stack frame in pg_sched.so"
    [ $scan_rc -ne 0 ] && [ $scan_rc -ne 3 ] && echo "the log scan itself failed (exit $scan_rc)"
    echo "scan the logs again: python3 test/valgrind/scan_logs.py $VGLOG"
    exit 1
fi
status=0
echo "run.sh: no valgrind error in pg_sched, suites passed"
