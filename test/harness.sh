#!/usr/bin/env bash
# test/harness.sh — what `make deps`, `make test`, `make demo` and `make bench` run.
#
#   harness.sh deps                 install the Debian packages that are missing
#   harness.sh test [SUITE...]      deps, build, install, throwaway cluster, suites
#                                   (unit sanitize fuzz regress pgtap pgbench upgrade hostile
#                                   dump metrics pooler e2e soak tap; default all)
#   harness.sh demo                 deps, build, install, throwaway cluster, demo/demo.sql
#   harness.sh bench                deps, build, install, throwaway cluster (its shared
#                                   memory in huge pages: reserve_huge_pages), bench/run.sh
#   harness.sh soak | fuzz | valgrind | sqlsmith
#                                   the long runs (each starts what it needs): the soak
#                                   (16 clients x 120 s), the libFuzzer targets (14
#                                   million executions), pg_regress under valgrind,
#                                   sqlsmith for 10 minutes
#   harness.sh up | down [NAME]     create (wiping $SCHED_TMP/NAME, default dev) / stop a
#                                   cluster and leave it (for development); `up` writes
#                                   $SCHED_TMP/env to source (PGHOST, PGPORT, PGUSER)
#   harness.sh start [NAME]         start the existing cluster $SCHED_TMP/NAME again (for
#                                   example `start demo` after `demo`), keeping its data, on
#                                   a free port; rewrites $SCHED_TMP/env; stop it with `down`
#
# PostgreSQL refuses to run as root: as root the server runs as the OS user `postgres`
# (created by Debian's server package).  The cluster lives in $SCHED_TMP (default
# .tmp/ under the repo, or, when `postgres` cannot reach the repo, /tmp/pg_sched-<hash
# of the repo's path>: the same directory for every command, so `down` finds what `up`
# started), listens on 127.0.0.1 only, on a free port, and is stopped on exit, also on
# failure.  The checkout itself may be unreadable to `postgres`: nothing the server or
# the TAP tests read is taken from it.  `test` and `bench` remove their clusters' data
# when they end, also on failure (the server logs stay in $SCHED_TMP); `demo` keeps its
# cluster for `start demo`, `up` keeps its cluster until `down`.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
PGBIN=/usr/lib/postgresql/15/bin
PGXS_DIR=/usr/lib/postgresql/15/lib/pgxs
# SUDO ("sudo" when not root), RUN_USER (postgres when root), as_run_user, free_port
# shellcheck source=test/lib/common.sh
source "$ROOT/test/lib/common.sh"

log() { printf '\n=== %s\n' "$*"; }

deps() {
    [ -n "${SCHED_NO_BUILD:-}" ] && [ $# -eq 0 ] && return 0
    local pkgs=(make gcc clang libclang-rt-dev postgresql-15 postgresql-server-dev-15
                postgresql-15-pgtap libtap-parser-sourcehandler-pgtap-perl libipc-run-perl
                python3-psycopg pgbouncer prometheus-postgres-exporter "$@")
    local missing=() p
    for p in "${pkgs[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        log "installing Debian packages: ${missing[*]}"
        $SUDO apt-get update -qq
        $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
    fi
}

build_install() {
    # SCHED_NO_BUILD=1: use what is installed (parallel work in one tree must not race make)
    [ -n "${SCHED_NO_BUILD:-}" ] && return 0
    log "build and install"
    make -s PG_CONFIG=$PGBIN/pg_config
    $SUDO make -s install PG_CONFIG=$PGBIN/pg_config
}

choose_tmp() {
    if [ -z "${SCHED_TMP:-}" ]; then
        SCHED_TMP="$ROOT/.tmp"
        mkdir -p "$SCHED_TMP"
        if [ "$(id -u)" -eq 0 ]; then
            chown "$RUN_USER" "$SCHED_TMP"
            if ! runuser -u "$RUN_USER" -- test -w "$SCHED_TMP"; then
                rmdir "$SCHED_TMP" 2>/dev/null || true
                SCHED_TMP=/tmp/pg_sched-$(printf '%s' "$ROOT" | md5sum | cut -c1-12)
            fi
        fi
    fi
    mkdir -p "$SCHED_TMP"
    [ "$(id -u)" -eq 0 ] && chown "$RUN_USER" "$SCHED_TMP"
    export SCHED_TMP
}

# Huge pages for the benchmark cluster's shared memory (CLUSTER_HUGE_PAGES=reserve; the
# bench sets it unless BENCH_HUGE_PAGES=off), as the PostgreSQL manual advises for a large
# shared_buffers.  With 4 kB pages each backend takes a page fault the first time it
# touches each page of shared memory; on a virtual machine whose page tables the host
# shadows (these CI machines) that costs several microseconds a page, more than the work
# the benchmark measures (bench/NOTES.md, twenty-fourth sitting).  The pages the server
# asks for (postgres -C shared_memory_size_in_huge_pages) are reserved in
# vm.nr_hugepages when the host has fewer free, as root or through sudo without a
# password; release_huge_pages puts vm.nr_hugepages back when the cluster has stopped.
# Returns 1, reserving nothing, when that cannot be done: the cluster then runs with
# huge_pages = off, and the bench reports which it had.
HUGE_PAGES_BEFORE=""
huge_pages_free() { awk '/^HugePages_Free:/ { print $2 }' /proc/meminfo; }
reserve_huge_pages() {
    local data=$1 need free before want
    need=$(as_run_user "$PGBIN/postgres" -D "$data" -C shared_memory_size_in_huge_pages 2>/dev/null) || return 1
    [[ "$need" =~ ^[0-9]+$ ]] && (( need > 0 )) || return 1
    [ -r /proc/sys/vm/nr_hugepages ] || return 1
    free=$(huge_pages_free)
    if (( ${free:-0} >= need )); then
        log "huge pages: $need of the $free the host has free go to the cluster"
        return 0
    fi
    before=$(cat /proc/sys/vm/nr_hugepages)
    want=$(( before + need - ${free:-0} ))
    if ! ${SUDO:+$SUDO -n} sh -c "echo $want > /proc/sys/vm/nr_hugepages" 2>/dev/null; then
        echo "huge pages: could not set vm.nr_hugepages (not root, no sudo without a password):" \
             "the cluster runs with huge_pages = off" >&2
        return 1
    fi
    HUGE_PAGES_BEFORE=$before
    free=$(huge_pages_free)
    if (( ${free:-0} < need )); then
        echo "huge pages: the kernel found $free of the $need asked for: the cluster runs with huge_pages = off" >&2
        release_huge_pages
        return 1
    fi
    log "huge pages: $need of $(awk '/^Hugepagesize:/ { print $2 }' /proc/meminfo) kB reserved for the cluster (vm.nr_hugepages $before -> $want, put back at the end)"
}
release_huge_pages() {
    [ -n "$HUGE_PAGES_BEFORE" ] || return 0
    ${SUDO:+$SUDO -n} sh -c "echo $HUGE_PAGES_BEFORE > /proc/sys/vm/nr_hugepages" 2>/dev/null \
        || echo "huge pages: could not put vm.nr_hugepages back to $HUGE_PAGES_BEFORE" >&2
    HUGE_PAGES_BEFORE=""
}

CLUSTER_DATA=""
start_cluster() {
    # start_cluster NAME [extra postgresql.conf lines]
    local name=$1; shift
    choose_tmp
    CLUSTER_DATA="$SCHED_TMP/$name"
    rm -rf "$CLUSTER_DATA"
    PGPORT=$(free_port)
    as_run_user "$PGBIN/initdb" -D "$CLUSTER_DATA" -U postgres --auth=trust --encoding=UTF8 \
        --locale=C.UTF-8 >"$SCHED_TMP/$name.initdb.log"
    {
        echo "port = $PGPORT"
        echo "listen_addresses = '127.0.0.1'"
        echo "unix_socket_directories = ''"
        echo "shared_preload_libraries = 'pg_sched'"
        echo "max_connections = 60"
        echo "log_min_messages = warning"
        for line in "$@"; do echo "$line"; done
    } | as_run_user tee -a "$CLUSTER_DATA/postgresql.conf" >/dev/null
    # CLUSTER_HUGE_PAGES: reserve (huge pages if reserve_huge_pages can have them, else
    # 4 kB pages), off (4 kB pages, whatever the host has free), unset (the server's
    # default, try)
    local hp=""
    case ${CLUSTER_HUGE_PAGES:-} in
        reserve) hp=off; reserve_huge_pages "$CLUSTER_DATA" && hp=on ;;
        off) hp=off ;;
    esac
    [ -z "$hp" ] || echo "huge_pages = $hp" | as_run_user tee -a "$CLUSTER_DATA/postgresql.conf" >/dev/null
    as_run_user "$PGBIN/pg_ctl" -D "$CLUSTER_DATA" -l "$SCHED_TMP/$name.log" -w -t 60 start >/dev/null
    export PGHOST=127.0.0.1 PGPORT PGUSER=postgres PGDATABASE=postgres
    printf 'export PGHOST=%s PGPORT=%s PGUSER=%s PGDATABASE=postgres\n' "$PGHOST" "$PGPORT" "$PGUSER" >"$SCHED_TMP/env"
    log "cluster $name on 127.0.0.1:$PGPORT (data $CLUSTER_DATA)"
}

start_existing_cluster() {
    # start_existing_cluster NAME: start $SCHED_TMP/NAME as it is (no initdb, nothing
    # removed) on a free port, given on the command line so postgresql.conf is unchanged.
    # A cluster that is already running is left as it is and its port reported.
    local name=$1 pid_port
    choose_tmp
    CLUSTER_DATA="$SCHED_TMP/$name"
    if [ ! -f "$CLUSTER_DATA/PG_VERSION" ]; then
        echo "no cluster in $CLUSTER_DATA: create one with \`test/harness.sh up $name\`" \
             "(or \`demo\` for the demo's), with the same SCHED_TMP" >&2
        exit 1
    fi
    if as_run_user "$PGBIN/pg_ctl" -D "$CLUSTER_DATA" status >/dev/null 2>&1; then
        pid_port=$(sed -n 4p "$CLUSTER_DATA/postmaster.pid")
        PGPORT=$pid_port
        log "cluster $name is already running on 127.0.0.1:$PGPORT (data $CLUSTER_DATA)"
    else
        PGPORT=$(free_port)
        as_run_user "$PGBIN/pg_ctl" -D "$CLUSTER_DATA" -l "$SCHED_TMP/$name.log" -o "-p $PGPORT" \
            -w -t 60 start >/dev/null
        log "cluster $name started again on 127.0.0.1:$PGPORT (data $CLUSTER_DATA)"
    fi
    export PGHOST=127.0.0.1 PGPORT PGUSER=postgres PGDATABASE=postgres
    printf 'export PGHOST=%s PGPORT=%s PGUSER=%s PGDATABASE=postgres\n' "$PGHOST" "$PGPORT" "$PGUSER" >"$SCHED_TMP/env"
}

stop_cluster() {
    if [ -n "$CLUSTER_DATA" ] && [ -f "$CLUSTER_DATA/postmaster.pid" ]; then
        as_run_user "$PGBIN/pg_ctl" -D "$CLUSTER_DATA" -m fast -w stop >/dev/null 2>&1 || true
    fi
}

# On exit of a throwaway run (test, bench): stop the cluster and remove what the run
# made but its logs: the cluster's data, the TAP tests' clusters.
remove_cluster() {
    stop_cluster
    release_huge_pages
    [ -n "$CLUSTER_DATA" ] && rm -rf "$CLUSTER_DATA"
    rm -rf "$SCHED_TMP/tap/t" "$SCHED_TMP"/tap/tmp_check/t_*_data
}

# ---- suites ---------------------------------------------------------------------------
# Each suite returns non-zero on failure; run_suites counts them.

suite_unit() {
    make -s unit
}

suite_regress() {
    # pg_regress and isolation specs, through PGXS installcheck
    local rc=0
    make -s installcheck PG_CONFIG=$PGBIN/pg_config || rc=$?
    if [ $rc -ne 0 ]; then
        for f in regression.diffs output_iso/regression.diffs; do
            [ -f "$f" ] && { echo "--- $f"; cat "$f"; }
        done
    fi
    return $rc
}

suite_pgtap() {
    local files=(test/pgtap/*.sql)
    [ -e "${files[0]}" ] || { echo "no pgTAP files"; return 1; }
    pg_prove -h "$PGHOST" -p "$PGPORT" -U postgres -d postgres --failures "${files[@]}"
}

suite_pgbench() {
    local s rc=0
    for s in test/pgbench/*.sh; do
        [ -e "$s" ] || continue
        bash "$s" || rc=1
    done
    return $rc
}

suite_upgrade() {
    # 0.1.0 with live data, ALTER EXTENSION UPDATE, compared with a fresh install
    bash test/upgrade/run.sh
}

suite_e2e() {
    # the examples' workers and scheduler end to end, directly and through pgbouncer
    # (test/e2e/python.sh), and the Node worker (test/e2e/node.sh)
    local rc=0
    bash test/e2e/python.sh || rc=1
    if [ -f test/e2e/node.sh ]; then bash test/e2e/node.sh || rc=1; fi
    return $rc
}

suite_dump() {
    # pg_dump of a busy database, restored five ways, exact and working (test/dump)
    bash test/dump/run.sh
}

suite_pooler() {
    # every pg_sched call through pgbouncer in transaction mode, 8 clients on 2 server
    # connections: the fleet mirror, wait_commands, prepared statements, settings
    bash test/pooler/run.sh
}

suite_metrics() {
    # the postgres_exporter queries file, scraped by the real exporter (test/metrics)
    bash test/metrics/run.sh
}

suite_sanitize() {
    # the placement core's unit tests and fuzz harness under ASan and UBSan
    bash test/unit/sanitize.sh
}

suite_fuzz() {
    # the libFuzzer targets of the placement core, short form (make fuzz: the long one)
    bash test/unit/fuzz.sh short
}

suite_soak() {
    # the soak mix on its own cluster, short form (make soak: 16 clients x 120 s)
    SOAK_SECONDS=${SOAK_SECONDS:-30} bash test/soak/run.sh
}

suite_hostile() {
    # every public function called with generated hostile input (test/hostile)
    bash test/hostile/run.sh
}

suite_tap() {
    local files=(test/t/*.pl)
    [ -e "${files[0]}" ] || { echo "no Perl TAP files"; return 1; }
    local tapdir="$SCHED_TMP/tap"
    rm -rf "$tapdir/tmp_check" "$tapdir/t"     # what an earlier run left
    mkdir -p "$tapdir/t"
    # TAP tests start their own clusters (PostgreSQL::Test::Cluster), so they run as the
    # unprivileged user, with their scratch files in $tapdir, and from a copy of the test
    # files there: the checkout may be a directory that user cannot read.
    cp "${files[@]}" "$tapdir/t/"
    cp test/pgbench/invariants.sql "$tapdir/t/"     # the one invariant checker (006, 007)
    [ "$(id -u)" -eq 0 ] && chown -R "$RUN_USER" "$tapdir"
    (cd "$tapdir" && as_run_user env PATH="$PGBIN:$PATH" PERL5LIB="$PGXS_DIR/src/test/perl" \
        PG_REGRESS="$PGXS_DIR/src/test/regress/pg_regress" TESTDIR="$tapdir" \
        SCHED_INVARIANTS="$tapdir/t/invariants.sql" \
        PGHOST= PGPORT= PGUSER= PGDATABASE= \
        prove --timer t/*.pl)
}

run_suites() {
    local suites=("$@") passed=0 failed=0 failed_names=() s
    for s in "${suites[@]}"; do
        log "suite: $s"
        if "suite_$s"; then passed=$((passed + 1)); else failed=$((failed + 1)); failed_names+=("$s"); fi
    done
    log "suites: ${passed} passed, ${failed} failed ${failed_names[*]:+(${failed_names[*]})}"
    echo "${passed} passed, ${failed} failed"
    [ "$failed" -eq 0 ]
}

cmd=${1:-test}
shift || true
case "$cmd" in
    deps)
        deps
        ;;
    test)
        deps
        build_install
        trap remove_cluster EXIT
        start_cluster test "fsync = off"
        if [ $# -eq 0 ]; then
            set -- unit sanitize fuzz regress pgtap pgbench upgrade hostile dump metrics pooler e2e soak tap
        fi
        run_suites "$@"
        ;;
    demo)
        deps
        build_install
        trap stop_cluster EXIT
        start_cluster demo
        psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "CREATE DATABASE sched_demo" >/dev/null
        psql -X -v ON_ERROR_STOP=1 -d sched_demo -f demo/demo.sql
        ;;
    soak)
        # the long soak: 16 clients x 120 s on its own cluster, report in test/RESULTS.md's form
        deps
        build_install
        SOAK_SECONDS=${SOAK_SECONDS:-120} bash test/soak/run.sh
        ;;
    fuzz)
        deps
        bash test/unit/fuzz.sh long
        ;;
    valgrind)
        deps valgrind
        build_install
        bash test/valgrind/run.sh
        ;;
    sqlsmith)
        deps sqlsmith
        build_install
        bash test/sqlsmith/run.sh
        ;;
    bench)
        case ${BENCH_HUGE_PAGES:-on} in
            on) CLUSTER_HUGE_PAGES=reserve ;;
            off) CLUSTER_HUGE_PAGES=off ;;
            *) echo "BENCH_HUGE_PAGES must be on or off, not \"$BENCH_HUGE_PAGES\"" >&2; exit 2 ;;
        esac
        deps gnuplot-nox
        build_install
        trap remove_cluster EXIT
        start_cluster bench "shared_buffers = '1GB'" "max_connections = 100"
        bash bench/run.sh
        bash bench/diagnostics.sh
        BENCH_APPEND=1 bash bench/full_fleet.sh
        cat bench/ANALYSIS.md >>bench/RESULTS.md   # what limits the targets not met
        cat bench/NOTES.md >>bench/RESULTS.md      # what was measured by hand, kept
        ;;
    up)
        deps
        build_install
        start_cluster "${1:-dev}" "fsync = off"
        echo "source $SCHED_TMP/env   # then psql; stop with: test/harness.sh down ${1:-dev}"
        ;;
    start)
        start_existing_cluster "${1:-dev}"
        echo "databases: $(psql -X -At -d postgres -c \
            "SELECT string_agg(datname, ' ' ORDER BY datname) FROM pg_database WHERE NOT datistemplate")"
        if [ "${1:-dev}" = demo ]; then
            echo "source $SCHED_TMP/env && psql -d sched_demo   # stop with: SCHED_TMP=$SCHED_TMP bash test/harness.sh down demo"
        else
            echo "source $SCHED_TMP/env   # then psql; stop with: SCHED_TMP=$SCHED_TMP bash test/harness.sh down ${1:-dev}"
        fi
        ;;
    down)
        choose_tmp
        CLUSTER_DATA="$SCHED_TMP/${1:-dev}"
        stop_cluster
        ;;
    *)
        echo "usage: $0 deps|test [suite...]|demo|bench|soak|fuzz|valgrind|sqlsmith|up [name]|start [name]|down [name]" >&2
        exit 2
        ;;
esac
