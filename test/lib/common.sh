# shellcheck shell=bash
# test/lib/common.sh — helpers the test scripts share, to source (bash, any `set` options;
# sourcing it twice is harmless).
#
#   RUN_USER, SUDO
#       The OS user servers run as (postgres when running as root: PostgreSQL refuses
#       root; else the current user), and "sudo" when not root (else empty).
#   as_run_user CMD...
#       CMD as $RUN_USER: through runuser when running as root, else as it is.
#   free_port
#       A free port on 127.0.0.1, on stdout: random in 20000-49999, one nobody answers
#       on; returns 1 with `FAIL: ...` on stderr after 200 tries.
#   apt_install [--with-recommends] PKG...
#       Installs the Debian packages PKG (apt-get update, then install, quietly; with
#       sudo when not root; --no-install-recommends unless --with-recommends).
#   apt_install_missing [--with-recommends] PROGRAM PKG...
#       When PROGRAM (a command name, or a path to an executable) is missing, installs
#       PKG... (default: a package named PROGRAM) and checks PROGRAM is there then;
#       returns 1 with `FAIL: ...` on stderr when it is not.
#   find_python_with_psycopg
#       Sets PY to the first of $PYTHON, python3, /usr/bin/python3 that imports psycopg;
#       returns 1 when none does.
#   require_python_with_psycopg
#       The same, installing python3-psycopg when none does; returns 1 with `FAIL: ...`
#       when still none does.
#   stop_pid PID [SECONDS]
#       SIGTERM to PID (a child of this shell), up to SECONDS (default 10) for it to
#       exit, then SIGKILL; returns its exit status.
#   Checks: fail WHAT (`FAIL: WHAT` on stderr, `FAIL (SUITE): WHAT` when TEST_SUITE is
#   set; exit 1); pass WHAT (counts CHECKS, prints `ok N - WHAT`); check_eq WHAT ACTUAL
#   EXPECTED (pass when equal, else fail saying what differed); say WHAT (a progress
#   line, `--- SUITE [Ns]: WHAT`).  Each is defined only when no function of that name
#   is yet: a script with its own form of one keeps it, whenever it sources this.
#
# The library's own helpers never exit: they print `FAIL: ...` and return 1 (set -e
# callers exit).

[ -n "${_SCHED_COMMON_SH:-}" ] && return 0
_SCHED_COMMON_SH=1

RUN_USER=$(id -un)
[ "$(id -u)" -eq 0 ] && RUN_USER=postgres
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo

as_run_user() {
    if [ "$(id -u)" -eq 0 ]; then runuser -u "$RUN_USER" -- "$@"; else "$@"; fi
}

free_port() {
    # below the kernel's ephemeral range: a port there may be the local end of some
    # outgoing connection, which a connect test does not see but bind() refuses
    local p _ low
    low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
    (( low > 11024 )) || low=32768
    for _ in $(seq 1 200); do
        p=$(( 10000 + RANDOM % (low - 10000) ))
        if ! (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null; then echo "$p"; return 0; fi
    done
    echo "FAIL: no free port found" >&2
    return 1
}

apt_install() {             # apt_install [--with-recommends] PKG...
    local recommends=--no-install-recommends
    [ "${1:-}" = --with-recommends ] && { recommends=""; shift; }
    echo "installing $*"
    $SUDO apt-get update -qq || return 1
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $recommends "$@" >/dev/null
}

_common_have() {            # _common_have PROGRAM: a command, or an executable path
    case $1 in
        */*) [ -x "$1" ] ;;
        *) command -v "$1" >/dev/null ;;
    esac
}

apt_install_missing() {     # apt_install_missing [--with-recommends] PROGRAM [PKG...]
    local opt=()
    [ "${1:-}" = --with-recommends ] && { opt=(--with-recommends); shift; }
    local program=$1
    shift
    _common_have "$program" && return 0
    [ $# -gt 0 ] || set -- "$program"
    apt_install "${opt[@]}" "$@" || return 1
    _common_have "$program" ||
        { echo "FAIL: no $program after installing the Debian package(s) $*" >&2; return 1; }
}

# shellcheck disable=SC2034   # PY is the caller's
find_python_with_psycopg() {
    local p
    for p in ${PYTHON:-} python3 /usr/bin/python3; do
        if command -v "$p" >/dev/null && "$p" -c 'import psycopg' 2>/dev/null; then
            PY=$(command -v "$p"); return 0
        fi
    done
    return 1
}

require_python_with_psycopg() {
    find_python_with_psycopg && return 0
    apt_install python3-psycopg || return 1
    find_python_with_psycopg ||
        { echo "FAIL: no python3 can import psycopg after installing python3-psycopg" >&2; return 1; }
}

stop_pid() {                # stop_pid PID [SECONDS]: its exit status
    local pid=$1 _ rc=0
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 $(( ${2:-10} * 10 ))); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || rc=$?
    return $rc
}

check_pgbench_run() {       # check_pgbench_run RC OUT ERR: fails unless pgbench ran clean
    # Sets PGB_PROCESSED, PGB_FAILED and PGB_TPS from pgbench's summary in OUT.
    if [ "$1" -ne 0 ] || grep -qiE 'aborted|error' "$3"; then
        cat "$3" >&2
        fail "pgbench exited with $1 or reported errors (above)"
    fi
    PGB_PROCESSED=$(sed -nE 's/^number of transactions actually processed: ([0-9]+).*/\1/p' "$2")
    PGB_FAILED=$(sed -nE 's/^number of failed transactions: ([0-9]+).*/\1/p' "$2")
    PGB_TPS=$(sed -nE 's/^tps = ([0-9.]+).*/\1/p' "$2")
    [ -n "$PGB_PROCESSED" ] && [ -n "$PGB_FAILED" ] && [ -n "$PGB_TPS" ] ||
        { cat "$2"; fail "cannot read pgbench's summary"; }
    [ "$PGB_FAILED" -eq 0 ] ||
        { cat "$2"; fail "$PGB_FAILED pgbench transactions failed (deadlock or serialization failures)"; }
    [ "$PGB_PROCESSED" -gt 0 ] || fail "pgbench processed no transaction"
}

CHECKS=0
declare -F fail >/dev/null || fail() { echo "FAIL${TEST_SUITE:+ ($TEST_SUITE)}: $*" >&2; exit 1; }
declare -F pass >/dev/null || pass() { CHECKS=$((CHECKS + 1)); echo "ok $CHECKS - $*"; }
declare -F check_eq >/dev/null || check_eq() {     # check_eq WHAT ACTUAL EXPECTED
    [ "$2" = "$3" ] || fail "$1: got '$2', expected '$3'"
    pass "$1 ($2)"
}
declare -F say >/dev/null || say() { printf '%s\n' "--- ${TEST_SUITE:-test} [${SECONDS}s]: $*"; }
