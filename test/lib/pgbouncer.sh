# shellcheck shell=bash
# test/lib/pgbouncer.sh — pgbouncer for the tests, to source (bash, any `set` options).
#
#   pgbouncer_start DIR HOST PG_PORT [POOL_SIZE]
#       Installs Debian's pgbouncer when it is missing (apt-get, with sudo when not
#       root), writes pgbouncer.ini and userlist.txt in DIR (created, made reachable by
#       the OS user postgres, which must also be able to traverse DIR's parents), and
#       starts pgbouncer in front of the server at HOST:PG_PORT: pool_mode = transaction,
#       default_pool_size = POOL_SIZE (default 5, no reserve pool), listening on
#       127.0.0.1 on a free port, auth_type = trust (the test clusters trust
#       127.0.0.1; pgbouncer only needs the user names), as the OS user postgres when
#       running as root.  Waits until its admin console answers, then exports
#       PGBOUNCER_PORT (and sets PGBOUNCER_DIR, PGBOUNCER_PID, PGBOUNCER_LOG).
#       Knobs, read at the call:
#         PGBOUNCER_USERS      user names for userlist.txt (default: $PGUSER or postgres)
#         PGBOUNCER_ADMIN      the admin console's user (default: the first of them)
#         PGBOUNCER_DATABASES  extra lines for [databases], before the catch-all
#                              `* = host=HOST port=PG_PORT` (for example a second name
#                              for one database with its own pool_size:
#                              "one = host=... port=... dbname=mydb pool_size=1")
#         PGBOUNCER_SETTINGS   extra lines for [pgbouncer] (they come last, so they win)
#       On failure it prints `FAIL: ...` on stderr and returns 1 (set -e callers exit).
#   pgbouncer_stop
#       Stops the pgbouncer started by pgbouncer_start (SIGTERM to pgbouncer itself,
#       then SIGKILL after 10 s); harmless when none runs.  Call it from an EXIT trap.
#   pgbouncer_admin "SHOW POOLS"
#       One command on the admin console (database pgbouncer, simple query protocol):
#       rows as a|b|c after a header line of column names.
#   pgbouncer_pool DB USER
#       "clients servers" of the pool (DB, USER) now: clients cl_active + cl_waiting,
#       servers every server connection of the pool (active, idle, used, tested, login).
#   pgbouncer_stat DB COLUMN
#       One column of SHOW STATS for DB (total_xact_count, total_query_count, ...).
#   pgbouncer_log_mark
#       The line number the next line of pgbouncer's log will have (to scan from).
#   pgbouncer_log_problems [FROM_LINE [TO_LINE]]
#       The log lines from FROM_LINE (default 1) to before TO_LINE (default: the end)
#       that report a problem: ERROR, WARNING, FATAL, a protocol problem ("got packet",
#       "unexpected") or a prepared statement; prints nothing when there is none.
#
# Used by test/e2e/python.sh, test/e2e/node.sh and test/pooler/run.sh; sources
# test/lib/common.sh (free_port, as_run_user, apt_install_missing).

# shellcheck source=test/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

PGBOUNCER_DIR="" PGBOUNCER_PID="" PGBOUNCER_LOG="" PGBOUNCER_BIN=""
export PGBOUNCER_PORT=""

_pgbouncer_fail() { echo "FAIL: $*" >&2; return 1; }

pgbouncer_install() {       # Debian's package, only when missing
    PGBOUNCER_BIN=$(command -v pgbouncer || echo /usr/sbin/pgbouncer)
    apt_install_missing "$PGBOUNCER_BIN" pgbouncer
}

pgbouncer_start() {         # pgbouncer_start DIR HOST PG_PORT [POOL_SIZE]
    local dir=$1 host=$2 pg_port=$3 pool_size=${4:-5}
    if [ -z "$dir" ] || [ -z "$host" ] || [ -z "$pg_port" ]; then
        _pgbouncer_fail "usage: pgbouncer_start DIR HOST PG_PORT [POOL_SIZE]"; return 1
    fi
    [ -z "$PGBOUNCER_PID" ] || { _pgbouncer_fail "pgbouncer already runs (pid $PGBOUNCER_PID)"; return 1; }
    pgbouncer_install || return 1
    local users=${PGBOUNCER_USERS:-${PGUSER:-postgres}} u
    local admin=${PGBOUNCER_ADMIN:-${users%% *}}
    mkdir -p "$dir" && chmod 755 "$dir" || return 1
    [ "$(id -u)" -eq 0 ] && chown postgres "$dir"
    as_run_user test -w "$dir" ||
        { _pgbouncer_fail "the OS user postgres cannot write $dir (a parent directory not reachable?)"; return 1; }
    PGBOUNCER_DIR=$(cd "$dir" && pwd)
    PGBOUNCER_PORT=$(free_port) || { _pgbouncer_fail "no free port for pgbouncer"; return 1; }
    PGBOUNCER_LOG=$PGBOUNCER_DIR/pgbouncer.log
    for u in $users; do printf '"%s" ""\n' "$u"; done >"$PGBOUNCER_DIR/userlist.txt"
    {
        echo "[databases]"
        [ -n "${PGBOUNCER_DATABASES:-}" ] && printf '%s\n' "$PGBOUNCER_DATABASES"
        echo "* = host=$host port=$pg_port"
        echo
        echo "[pgbouncer]"
        echo "listen_addr = 127.0.0.1"
        echo "listen_port = $PGBOUNCER_PORT"
        echo "unix_socket_dir ="
        echo "auth_type = trust"
        echo "auth_file = $PGBOUNCER_DIR/userlist.txt"
        echo "admin_users = $admin"
        echo "stats_users = $admin"
        echo "pool_mode = transaction"
        echo "default_pool_size = $pool_size"
        echo "reserve_pool_size = 0"
        echo "max_client_conn = 200"
        echo "logfile = $PGBOUNCER_LOG"
        echo "pidfile = $PGBOUNCER_DIR/pgbouncer.pid"
        [ -n "${PGBOUNCER_SETTINGS:-}" ] && printf '%s\n' "$PGBOUNCER_SETTINGS"
    } >"$PGBOUNCER_DIR/pgbouncer.ini"
    chmod a+r "$PGBOUNCER_DIR"/pgbouncer.ini "$PGBOUNCER_DIR"/userlist.txt
    as_run_user "$PGBOUNCER_BIN" "$PGBOUNCER_DIR/pgbouncer.ini" >"$PGBOUNCER_DIR/stderr.log" 2>&1 &
    PGBOUNCER_PID=$!        # as root: runuser's, which waits for pgbouncer
    PGBOUNCER_ADMIN_USER=$admin
    local deadline=$((SECONDS + 30))
    until pgbouncer_admin "SHOW VERSION" >/dev/null 2>&1; do
        if ! kill -0 "$PGBOUNCER_PID" 2>/dev/null; then
            _pgbouncer_fail "pgbouncer exited: $(cat "$PGBOUNCER_DIR/stderr.log" "$PGBOUNCER_LOG" 2>/dev/null | tail -5)"
            PGBOUNCER_PID=""
            return 1
        fi
        [ $SECONDS -lt $deadline ] || { _pgbouncer_fail "pgbouncer did not answer within 30 s"; return 1; }
        sleep 0.1
    done
    export PGBOUNCER_PORT
    echo "pgbouncer $("$PGBOUNCER_BIN" --version | head -1 | awk '{print $2}') on 127.0.0.1:$PGBOUNCER_PORT (pool_mode = transaction, default_pool_size = $pool_size; $PGBOUNCER_DIR)"
}

pgbouncer_stop() {
    [ -n "$PGBOUNCER_PID" ] || return 0
    local pid _
    # as root $PGBOUNCER_PID is runuser's: signal pgbouncer itself (its pidfile)
    pid=$(cat "$PGBOUNCER_DIR/pgbouncer.pid" 2>/dev/null || echo "$PGBOUNCER_PID")
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do
        kill -0 "$PGBOUNCER_PID" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$pid" "$PGBOUNCER_PID" 2>/dev/null || true
    wait "$PGBOUNCER_PID" 2>/dev/null || true
    PGBOUNCER_PID=""
}

pgbouncer_admin() {         # pgbouncer_admin COMMAND: header line, then rows a|b|c
    psql -X -qA -F'|' -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PGBOUNCER_PORT" \
         -U "${PGBOUNCER_ADMIN_USER:-${PGUSER:-postgres}}" -d pgbouncer -c "$1"
}

pgbouncer_pool() {          # pgbouncer_pool DB USER: "clients servers"
    pgbouncer_admin "SHOW POOLS" | awk -F'|' -v db="$1" -v user="$2" '
        NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
        $col["database"] == db && $col["user"] == user {
            c = $col["cl_active"] + $col["cl_waiting"]
            s = $col["sv_active"] + $col["sv_idle"] + $col["sv_used"] + $col["sv_tested"] + $col["sv_login"]
            print c, s; found = 1 }
        END { if (!found) print 0, 0 }'
}

pgbouncer_stat() {          # pgbouncer_stat DB COLUMN
    pgbouncer_admin "SHOW STATS" | awk -F'|' -v db="$1" -v c="$2" '
        NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
        $col["database"] == db { print $col[c] }'
}

pgbouncer_log_mark() {
    echo $(( $(wc -l <"$PGBOUNCER_LOG" 2>/dev/null || echo 0) + 1 ))
}

pgbouncer_log_problems() {  # pgbouncer_log_problems [FROM_LINE [TO_LINE]]
    local from=${1:-1} to=${2:-}
    awk -v from="$from" -v to="$to" 'NR >= from && (to == "" || NR < to)' "$PGBOUNCER_LOG" 2>/dev/null |
        grep -E 'ERROR|WARNING|FATAL|got packet|unexpected|prepared statement' || true
}
