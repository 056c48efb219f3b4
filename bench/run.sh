#!/usr/bin/env bash
# bench/run.sh — the pg_sched benchmark suite (issue 5); `make bench` runs it through
# test/harness.sh on a throwaway cluster (fsync on, shared_buffers 1GB, in huge pages when
# the harness could reserve them: see reserve_huge_pages there; RESULTS.md says which).
#
# Uses the running cluster of the environment (PGHOST, PGPORT, PGUSER), creates its own
# databases (sched_bench_*; dropped at the end, also on failure), loads fleets and queues
# with generated data (bench/load.sql: fixed arithmetic, no randomness), loads the
# baselines (bench/baselines.sql: never installed), runs every workload RUNS times with
# pgbench custom scripts (bench/pgbench/), and prints one table of medians, each next to
# the baselines measured in the same run.  Writes bench/RESULTS.md and bench/scaling.png.
#
# Workloads (the numbers of issue 5; issue 16 added to 1 and 2, and added 7, 8, 9):
#   1. a single placement per transaction, dispatch_attempt and dispatch_next(1), 1 / 8 /
#      32 clients, 1,000 nodes, vs the write floor without NOTIFY (workers are woken
#      through wait_commands); with BENCH_W1_EXTRA=1 also, with 8 and 32 clients, the
#      floor + NOTIFY and pg_sched itself with sched.notify_workers on (as 0.1.0 ran by
#      default), and the PL/pgSQL dispatch with 8
#   2. dispatch_next(100), 1 / 2 / 4 / 8 / 32 clients, 1,000 nodes: placements/s; with 8
#      clients vs the batched write floor (the same rows written plainly, 100 per
#      statement, nodes chosen in advance), PL/pgSQL dispatch_next and the plain queue
#      claim; 8 and 32 clients vs the best of 1, 2 and 4 (no collapse), judged on the
#      whole runs and shown beside in the runs' middles too (steady_window: every
#      session past its first call, none closed yet)
#   3. select_candidate p50 latency at 100 .. 100,000 nodes, and with 10x nodes of other
#      capabilities (a second database, measured in turn with the first); vs the same
#      selection in plain SQL
#   4. dispatch_next(100) cost per dispatch with 10k, 100k, 1M pending requests
#      (1 client, runs of 30 committed transactions from a reset queue, so the queue
#      keeps at least 70% of its length) vs the plain queue claim
#   5. 16 dispatchers on a hot fleet of 20 nodes: conflicts per dispatch, deadlocks,
#      invariants afterwards
#   6. backend memory of one dispatch_next(1000) vs dispatch_next(100)
#   7. end to end: tasks per second through their whole life (submit, dispatch_next,
#      the worker's wait_commands(start => true), finish_attempt), 2 scheduler clients
#      and 8 worker clients at once, vs a plain job queue doing the same work without
#      placement (2 clients inserting jobs, 8 claiming one FOR UPDATE SKIP LOCKED and
#      marking it done), in a database of their own (bench/e2e.sql)
#   8. the cost of a feature in use: dispatch_next(100), 8 clients, 1,000 nodes, of a
#      tenant whose requests carry concurrency keys, each key limited, under a tenant
#      quota (limits never reached), vs the same for a tenant without them, same queue
#      length, same database, same run
#   9. flatness: the cost of one dispatch_attempt and one dispatch_next(1), 1 client,
#      with 10x the nodes (10,000) vs 1,000 (the 1-client figures of workload 1)
#
# Environment:
#   BENCH_QUICK=1     small sizes and 1-3 s runs (a smoke test, about 7 minutes; the full
#                     suite takes about 11.5 minutes on 2 cores, make bench with
#                     diagnostics.sh and full_fleet.sh about 13)
#   BENCH_W1_EXTRA=1  workload 1 also runs the NOTIFY and PL/pgSQL columns (about 1 minute)
#   BENCH_W8_SPLIT=1  workload 8 also runs a tenant with the keys only and one with the
#                     quota only (about 40 s)
#   BENCH_RUNS=n      repetitions of every measurement (default 3)
#   BENCH_KEEP=1      keep the databases afterwards
#   BENCH_OUT=dir     where RESULTS.md and scaling.png go (default: bench/)
#   BENCH_ONLY="1 3"  run only these workloads (development)
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
PGB_DIR=$HERE/pgbench
# shellcheck source=test/lib/pgbouncer.sh
source "$HERE/../test/lib/pgbouncer.sh"   # workload 2's pooled runs
OUT=${BENCH_OUT:-$HERE}
mkdir -p "$OUT"
RUNS=${BENCH_RUNS:-3}
QUICK=${BENCH_QUICK:-0}
ONLY=${BENCH_ONLY:-"1 2 3 4 5 6 7 8 9"}
W1_EXTRA=${BENCH_W1_EXTRA:-0}
: "${PGHOST:?PGHOST must point at the benchmark cluster}" "${PGPORT:?PGPORT must be set}"
export PGUSER=${PGUSER:-postgres}
unset PGDATABASE
export PGAPPNAME=pg_sched_bench

if [ "$QUICK" = 1 ]; then
    T1=3; T2=3; T3=2; T3C=1; T5=3; T7=3 # seconds per pgbench run, by workload (8 and 9: T2, T1;
                                       # T3C: workload 3's new-connection runs)
    W4_TX=10                           # workload 4: dispatch_next transactions per run
    FLEET=800                          # nodes of workloads 1, 2, 4, 6, 8 (8 clients x 100 for
                                       # the batched floor's node ranges)
    W4_SIZES="5000 20000 100000"       # pending requests (the last is the queue of 1, 2, 6)
    W3_SIZES="100 1000 5000"           # nodes serving the capability
    HOT_QUEUE=20000
    KEYS_QUEUE=20000                   # workload 8: requests of each of its two tenants
else
    T1=3; T2=3; T3=2; T3C=1; T5=5; T7=5 # (issue 16 shortened them to fit its workloads into
                                       # the 15 minutes of make bench: 5, 8, 3, 3, 8 before)
    W4_TX=30
    FLEET=1000
    W4_SIZES="10000 100000 1000000"
    W3_SIZES="100 1000 10000 100000"
    HOT_QUEUE=100000
    KEYS_QUEUE=100000
fi
W1_CLIENTS="1 8 32"
W1_ORDER="8 32 1"                      # the 1-client runs last, next to workload 9's
W2_CLIENTS="1 2 4 8 32"
FLAT_FLEET=$((10 * FLEET))             # workload 9
BATCH=100
E2E_WORKERS=8                          # workload 7: worker clients (one worker each) ...
E2E_SCHEDULERS=2                       # ... and scheduler (or inserting) clients
E2E_BACKLOG=2000                       # open tasks (jobs) above which nothing is submitted
KEYS=1000                              # workload 8: concurrency keys of the keyed tenant
W8_SPLIT=${BENCH_W8_SPLIT:-0}          # 1: workload 8 also runs a tenant with keys only and one
                                       # with the quota only
DB_DISPATCH=sched_bench_dispatch
DB_FLEET=sched_bench_fleet
DB_FLEET_OTHERS=sched_bench_fleet_others
DB_HOT=sched_bench_hot
DB_E2E=sched_bench_e2e
DB_KEYS=sched_bench_keys
DB_DEPTH=sched_bench_depth             # workload 4: the smallest queue, beside the largest
# the fleet of workloads 1, 2, 4, 8, 9 (bulk template): capacity 1,000 CPUs and 4 TB per
# node, 100,000 slots per worker, so that a run never fills them
DISPATCH_FLEET="SELECT bench.load_fleet('node', @FIRST@, @LAST@, 'build', true, 100000, 1000000, 4000000)"

WORK=$(mktemp -d /tmp/pg_sched_bench.XXXXXX)
CREATED=()
BG_PIDS=()                             # pgbench runs in the background (pgb_bg), until joined
BG_NAMES=()
POOL_DIR=""                            # workload 2's pgbouncer keeps its files there
START=$(date +%s)

cleanup() {
    local db pid
    for pid in "${BG_PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    pgbouncer_stop
    [ -n "$POOL_DIR" ] && rm -rf "$POOL_DIR"
    if [ "${BENCH_KEEP:-0}" != 1 ]; then
        for db in "${CREATED[@]}"; do
            psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
        done
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT

say() { printf '[%s +%4ss] %s\n' "$(date +%H:%M:%S)" "$(( $(date +%s) - START ))" "$*"; }
# phase NAME: the time since the previous phase began goes to that phase (PHASES, printed
# at the end and written to RESULTS.md); phase "" ends the last one
PHASE=""; PHASE_T=$START; PHASES=""
phase() {
    local now
    now=$(date +%s)
    if [ -n "$PHASE" ]; then PHASES="$PHASES${PHASES:+, }$PHASE $((now - PHASE_T)) s"; fi
    PHASE=$1; PHASE_T=$now
}
die() { printf 'bench: ERROR: %s\n' "$*" >&2; exit 1; }
sql() { local db=$1; shift; psql -X -q -At -v ON_ERROR_STOP=1 -d "$db" "$@"; }
wants() { case " $ONLY " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

# results: one line per measurement and run, "key<TAB>value"
RES=$WORK/results.tsv
: >"$RES"
record() { printf '%s\t%s\n' "$1" "$2" >>"$RES"; }
# median KEY: median over the runs (empty when nothing was recorded)
median() {
    awk -F'\t' -v k="$1" '$1 == k { print $2 }' "$RES" | sort -g |
        awk '{ v[NR] = $1 } END { if (NR == 0) exit; if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
values() { awk -F'\t' -v k="$1" '$1 == k { printf "%s%s", sep, $2; sep = ", " }' "$RES"; }
# ratios KEY: the recorded ratios, each as 1.23x, comma-separated
ratios() { values "$1" | awk -F', ' '{ for (i = 1; i <= NF; i++) printf "%s%.2fx", (i > 1 ? ", " : ""), $i }'; }
# arithmetic on decimals
calc() { awk "BEGIN { x = $1; printf \"%.6g\", x }"; }
fmt() { # fmt VALUE DECIMALS -> grouped number, or "n/a"
    if [ -z "${1:-}" ]; then echo "n/a"; return; fi
    LC_ALL=C awk -v x="$1" -v d="${2:-0}" 'BEGIN {
        s = sprintf("%." d "f", x); neg = (s ~ /^-/); if (neg) s = substr(s, 2)
        split(s, p, "."); i = p[1]; o = ""
        while (length(i) > 3) { o = "," substr(i, length(i) - 2) o; i = substr(i, 1, length(i) - 3) }
        o = i o; if (d > 0) o = o "." p[2]; print (neg ? "-" : "") o }'
}
ratio() { # ratio A B -> A/B with 2 decimals, or n/a
    if [ -z "${1:-}" ] || [ -z "${2:-}" ]; then echo "n/a"; return; fi
    awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print "n/a"; else printf "%.2f", a / b }'
}
# ge / le A B: exit 0 when A >= B (A <= B), 1 when not, 2 when A or B is unknown
known() { [ -n "${1:-}" ] && [ -n "${2:-}" ] && [ "$1" != n/a ] && [ "$2" != n/a ]; }
ge() { known "${1:-}" "${2:-}" || return 2; awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }
le() { known "${1:-}" "${2:-}" || return 2; awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b) }'; }
yesno() { local rc=0; "$@" || rc=$?; case $rc in 0) echo "**yes**" ;; 2) echo "n/a" ;; *) echo "**no**" ;; esac; }

# ---- databases ---------------------------------------------------------------------------

create_db() {
    local db=$1
    sql postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
    CREATED+=("$db")
    sql "$db" -c "CREATE EXTENSION pg_sched" -f "$HERE/load.sql" -f "$HERE/baselines.sql" >/dev/null
}

drop_db() {
    [ "${BENCH_KEEP:-0}" = 1 ] && return 0
    sql postgres -c "DROP DATABASE IF EXISTS $1 WITH (FORCE)"
}

# bulk DB FIRST LAST TEMPLATE: runs TEMPLATE (an SQL call with @FIRST@ and @LAST@) with
# triggers off (no per-row foreign key checks: the generated data is consistent), in two
# concurrent halves when the range is large.
bulk() {
    local db=$1 first=$2 last=$3 tmpl=$4 mid p1 p2 q
    if (( last - first + 1 < 50000 )); then
        q=${tmpl//@FIRST@/$first}; q=${q//@LAST@/$last}
        sql "$db" -c "SET session_replication_role = replica" -c "$q" >/dev/null
        return
    fi
    mid=$(( (first + last) / 2 ))
    q=${tmpl//@FIRST@/$first}; q=${q//@LAST@/$mid}
    sql "$db" -c "SET session_replication_role = replica" -c "$q" >/dev/null & p1=$!
    q=${tmpl//@FIRST@/$((mid + 1))}; q=${q//@LAST@/$last}
    sql "$db" -c "SET session_replication_role = replica" -c "$q" >/dev/null & p2=$!
    wait "$p1" || die "bulk load failed: $tmpl"
    wait "$p2" || die "bulk load failed: $tmpl"
}

load_requests() { # DB FIRST LAST
    bulk "$1" "$2" "$3" "SELECT bench.load_requests(@FIRST@, @LAST@, 'build', '$T0')"
    sql "$1" -c "SELECT setval('sched.request_id_seq', (SELECT max(request_id) FROM sched.request))" >/dev/null
}

# settle DB [reset] [nocheckpoint] [noanalyze]: (reset,) vacuum (and analyze, and checkpoint), so every run starts
# alike.  Without the checkpoint, a run repeating the previous one touches pages already
# logged in full since the last checkpoint (workload 4: steady state, not the burst of
# full-page images right after a checkpoint, whose size would grow with the table).
settle() {
    local db=$1 arg ckpt=1 analyze="(ANALYZE)"
    shift
    for arg in "$@"; do
        case $arg in
            reset) sql "$db" -c "SELECT bench.reset()" >/dev/null ;;
            nocheckpoint) ckpt=0 ;;
            # after a reset the data are those the last ANALYZE saw: only the vacuum
            noanalyze) analyze="" ;;
        esac
    done
    sql "$db" -c "VACUUM $analyze sched.request, sched.node, sched.worker, sched.execution, sched.attempt" >/dev/null
    if [ "$ckpt" = 1 ]; then
        sql "$db" -c "CHECKPOINT" >/dev/null
    fi
}

pending() { sql "$1" -c "SELECT count(*) FROM sched.request WHERE state = 'PENDING'"; }

# ---- pgbench -----------------------------------------------------------------------------

# pgb NAME DB CLIENTS SECONDS [pgbench options...]: runs pgbench for SECONDS (-T), or for
# N transactions per client when SECONDS is "xN" (-t); sets PGB_TPS, PGB_N, PGB_FAILED,
# PGB_RC, PGB_SECONDS (the measured time, N / tps).  Dies when pgbench fails, unless
# PGB_ALLOW_FAIL=1.  With PGB_LOG set, pgbench also logs every transaction to files named
# $PGB_LOG.* (-l; the earlier ones of that name removed first), for steady_window.
pgb() {
    local name=$1 db=$2 c=$3 t=$4 j=1 mode=-T
    shift 4
    (( c > 1 )) && j=2
    if [ "${t#x}" != "$t" ]; then mode=-t; t=${t#x}; fi
    if [ -n "${PGB_LOG:-}" ]; then rm -f "$PGB_LOG".*; set -- "$@" -l --log-prefix="$PGB_LOG"; fi
    PGB_RC=0
    pgbench -n -M prepared -c "$c" -j "$j" "$mode" "$t" --random-seed=5 "$@" "$db" \
        >"$WORK/$name.out" 2>"$WORK/$name.err" || PGB_RC=$?
    if [ "$PGB_RC" -ne 0 ] && grep -qE 'terminating connection due to administrator|server closed the connection|could not connect|Connection refused|shutting down|starting up' "$WORK/$name.err"; then
        # the server restarted under us (e.g. the extension was reinstalled): once more
        say "pgbench $name lost its connections; retrying once when the server is back"
        sleep 3
        for _ in $(seq 1 60); do pg_isready -q && break; sleep 1; done
        sleep 2
        PGB_RC=0
        [ -n "${PGB_LOG:-}" ] && rm -f "$PGB_LOG".*
        pgbench -n -M prepared -c "$c" -j "$j" "$mode" "$t" --random-seed=5 "$@" "$db" \
            >"$WORK/$name.out" 2>"$WORK/$name.err" || PGB_RC=$?
    fi
    PGB_TPS=$(sed -nE '/^tps = /{s/^tps = ([0-9.]+).*/\1/p;q}' "$WORK/$name.out")
    PGB_N=$(sed -nE 's/^number of transactions actually processed: ([0-9]+).*/\1/p' "$WORK/$name.out")
    PGB_FAILED=$(sed -nE 's/^number of failed transactions: ([0-9]+).*/\1/p' "$WORK/$name.out")
    PGB_FAILED=${PGB_FAILED:-0}
    if [ "$PGB_RC" -ne 0 ] && [ "${PGB_ALLOW_FAIL:-0}" != 1 ]; then
        cat "$WORK/$name.out" "$WORK/$name.err" >&2
        die "pgbench $name exited with $PGB_RC"
    fi
    if [ -z "$PGB_TPS" ] || [ -z "$PGB_N" ] || [ "$PGB_N" -eq 0 ]; then
        cat "$WORK/$name.out" "$WORK/$name.err" >&2
        die "pgbench $name processed nothing"
    fi
    PGB_SECONDS=$(calc "$PGB_N / $PGB_TPS")
}

count_attempts() { sql "$1" -c "SELECT count(*) FROM sched.attempt"; }

# steady_window PREFIX: from pgbench's per-transaction logs PREFIX.* (pgb with PGB_LOG),
# the part of a run where every session is past its first transaction and none has
# closed yet: from the moment the last session ended its first transaction to the moment
# the first session ended its last (pgbench closes a session's connection right after
# its last transaction).  Prints "transactions_in_window window_seconds before_seconds
# after_seconds": the transactions that ended inside it, its length, and the time from
# the run's first transaction's start to the window, and from the window to the run's
# last transaction's end.  Prints nothing when there is no such window.
steady_window() {
    cat "$1".* 2>/dev/null | awk '
        # client_id transaction_no latency_us script_no epoch_s epoch_us [lag]
        NF >= 6 { end = $5 + $6 / 1e6; start = end - $3 / 1e6; e[NR] = end
                  if (!(($1) in first) || end < first[$1]) first[$1] = end
                  if (!(($1) in last) || end > last[$1]) last[$1] = end
                  if (t0 == "" || start < t0) t0 = start
                  if (t1 == "" || end > t1) t1 = end }
        END { if (t0 == "") exit
              w0 = ""; for (c in first) if (w0 == "" || first[c] > w0) w0 = first[c]
              w1 = ""; for (c in last) if (w1 == "" || last[c] < w1) w1 = last[c]
              if (w1 <= w0) exit
              n = 0; for (i in e) if (e[i] > w0 && e[i] <= w1) n++
              if (n == 0) exit
              printf "%d %.6f %.6f %.6f\n", n, w1 - w0, w0 - t0, t1 - w1 }'
}

# pgb_bg NAME DB CLIENTS SECONDS [pgbench options...]: starts pgbench -T SECONDS in the
# background (under `timeout`, so that it ends even if a client hangs); pgb_join waits for
# all of them.
pgb_bg() {
    local name=$1 db=$2 c=$3 t=$4 j=1
    shift 4
    (( c > 1 )) && j=2
    timeout -s INT $((t + 60)) pgbench -n -M prepared -c "$c" -j "$j" -T "$t" --random-seed=5 "$@" "$db" \
        >"$WORK/$name.out" 2>"$WORK/$name.err" &
    BG_PIDS+=("$!")
    BG_NAMES+=("$name")
}

# pgb_join: waits for every pgbench pgb_bg started; dies when one failed (exit status,
# an aborted client, nothing processed), after all have ended.  Sets BG_FAILED: the sum of
# their failed transactions.
pgb_join() {
    local i rc name bad=0 n f
    BG_FAILED=0
    for i in "${!BG_PIDS[@]}"; do
        rc=0
        wait "${BG_PIDS[$i]}" || rc=$?
        name=${BG_NAMES[$i]}
        n=$(sed -nE 's/^number of transactions actually processed: ([0-9]+).*/\1/p' "$WORK/$name.out")
        f=$(sed -nE 's/^number of failed transactions: ([0-9]+).*/\1/p' "$WORK/$name.out" | head -1)
        BG_FAILED=$(( BG_FAILED + ${f:-0} ))
        if [ "$rc" -ne 0 ] || [ -z "$n" ] || [ "$n" -eq 0 ] || grep -q 'aborted' "$WORK/$name.err"; then
            say "pgbench $name failed (exit status $rc; 124 = killed by timeout):"
            cat "$WORK/$name.out" "$WORK/$name.err" >&2
            bad=1
        fi
    done
    BG_PIDS=()
    BG_NAMES=()
    [ "$bad" = 0 ] || die "a concurrent pgbench run failed (above)"
}

# ---- what we run on -------------------------------------------------------------------------

say "pg_sched benchmark on $PGHOST:$PGPORT ($( [ "$QUICK" = 1 ] && echo QUICK sizes || echo full sizes ), $RUNS runs each)"
PG_VERSION=$(sql postgres -c "SELECT version()")
SETTINGS=$(sql postgres -F ' = ' -c "SELECT name, current_setting(name) FROM pg_settings
    WHERE name IN ('shared_buffers', 'huge_pages', 'fsync', 'synchronous_commit', 'wal_level', 'max_connections',
                   'work_mem', 'max_wal_size', 'checkpoint_timeout', 'jit', 'shared_preload_libraries',
                   'sched.dispatch_concurrency', 'sched.dispatch_wait_max')
    ORDER BY name")
EXT_VERSION=$(sql postgres -c "SELECT default_version FROM pg_available_extensions WHERE name = 'pg_sched'")
CPU_MODEL=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo)
NPROC=$(nproc)
MEM=$(awk '/^MemTotal:/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)
LOADAVG=$(cut -d' ' -f1-3 /proc/loadavg)
T0=$(sql postgres -c "SELECT date_trunc('second', now())")
say "machine: $NPROC x $CPU_MODEL, $MEM; load average $LOADAVG"
say "$PG_VERSION"

# =============================================================================================
# Workloads 4, 2, 6, 1, 9: fleet of $FLEET nodes, one queue grown to the largest size
# =============================================================================================
if wants 1 || wants 2 || wants 4 || wants 6 || wants 9; then
    phase "loads of the dispatch database, workload 4"
    say "database $DB_DISPATCH: fleet of $FLEET nodes (mixed: ~9% not admissible), slots and capacity never run out"
    create_db "$DB_DISPATCH"
    bulk "$DB_DISPATCH" 1 "$FLEET" "$DISPATCH_FLEET"

    loaded=0
    for size in $W4_SIZES; do
        say "queue: loading requests $((loaded + 1))..$size (INSERT ... SELECT, sort_key = sched._queue_key)"
        t_load=$(date +%s.%N)
        load_requests "$DB_DISPATCH" $((loaded + 1)) "$size"
        t_load=$(calc "$(date +%s.%N) - $t_load")
        record "w4.load_s.$size" "$t_load"
        loaded=$size
        settle "$DB_DISPATCH" reset
        say "queue: $(pending "$DB_DISPATCH") pending requests (load took $(fmt "$t_load" 1) s)"
        if wants 4; then
            # committed runs of W4_TX transactions from a reset queue: the queue keeps at
            # least 70% of its length during a run, and no run sees the garbage of another;
            # one unrecorded warm-up of each first (caches, full-page images after the load)
            for script in w4_dispatch_next w4_plain_claim; do
                settle "$DB_DISPATCH" reset nocheckpoint
                pgb "w4_warmup_${script}_$size" "$DB_DISPATCH" 1 "x$W4_TX" -D batch=$BATCH -f "$PGB_DIR/$script.pgbench"
            done
            for r in $(seq 1 "$RUNS"); do
                settle "$DB_DISPATCH" reset nocheckpoint
                pgb "w4_pg_${size}_$r" "$DB_DISPATCH" 1 "x$W4_TX" -D batch=$BATCH -f "$PGB_DIR/w4_dispatch_next.pgbench"
                made=$(count_attempts "$DB_DISPATCH")
                (( made > 0 )) || die "dispatch_next($BATCH) placed nothing with $size pending"
                pg_rate=$(calc "$made / $PGB_SECONDS")
                record "w4.pg.us.$size" "$(calc "1000000 / $pg_rate")"
                record "w4.pg.rate.$size" "$pg_rate"
                settle "$DB_DISPATCH" reset nocheckpoint
                pgb "w4_claim_${size}_$r" "$DB_DISPATCH" 1 "x$W4_TX" -D batch=$BATCH -f "$PGB_DIR/w4_plain_claim.pgbench"
                made=$(sql "$DB_DISPATCH" -c "SELECT count(*) FROM sched.request WHERE state = 'DISPATCHED'")
                claim_rate=$(calc "$made / $PGB_SECONDS")
                record "w4.claim.us.$size" "$(calc "1000000 / $claim_rate")"
                record "w4.claim.rate.$size" "$claim_rate"
                say "W4 $size pending, run $r/$RUNS: dispatch_next $(fmt "$pg_rate") placements/s ($(fmt "$(calc "1000000 / $pg_rate")" 1) us each), plain claim $(fmt "$claim_rate") claims/s"
            done
        fi
    done
    QUEUE=$loaded
    if wants 4; then
        # The target's ratio, side by side: the sizes above are measured a minute or more
        # apart, on a machine whose speed drifts by a fifth in that time.  A second database
        # with the same fleet holds the smallest queue, and each round measures it and the
        # largest one right after the other; the verdict is the median of the rounds' ratios.
        small_q=${W4_SIZES%% *}
        create_db "$DB_DEPTH"
        bulk "$DB_DEPTH" 1 "$FLEET" "$DISPATCH_FLEET"
        load_requests "$DB_DEPTH" 1 "$small_q"
        settle "$DB_DEPTH" reset
        pgb "w4_warmup_depth" "$DB_DEPTH" 1 "x$W4_TX" -D batch=$BATCH -f "$PGB_DIR/w4_dispatch_next.pgbench"
        for r in $(seq 1 "$RUNS"); do
            line=""
            for db in "$DB_DEPTH" "$DB_DISPATCH"; do
                settle "$db" reset nocheckpoint
                pgb "w4_pair_${db}_$r" "$db" 1 "x$W4_TX" -D batch=$BATCH -f "$PGB_DIR/w4_dispatch_next.pgbench"
                made=$(count_attempts "$db")
                (( made > 0 )) || die "dispatch_next($BATCH) placed nothing in $db"
                us=$(calc "1000000 * $PGB_SECONDS / $made")
                if [ "$db" = "$DB_DEPTH" ]; then
                    record "w4.pair.us.small" "$us"; us_small=$us
                else
                    record "w4.pair.us.large" "$us"; record "w4.pair_ratio" "$(calc "$us / $us_small")"
                fi
                line="$line $(fmt "$us" 1) us"
            done
            say "W4 side by side, run $r/$RUNS: $(fmt "$small_q") then $(fmt "$loaded") pending:$line"
        done
        drop_db "$DB_DEPTH"
    fi
fi

# ---- workload 2 -----------------------------------------------------------------------------
# Every run of every implementation starts from a reset queue.  With 8 clients: pg_sched,
# the batched write floor, PL/pgSQL and the plain claim; then pg_sched with 1, 2, 4 and 32
# clients (no collapse: 8 and 32 against the best of 1, 2 and 4).  Side by side, 8 and 32
# clients through pgbouncer in transaction mode with as many server connections as the
# server has CPUs (pooled; pgbouncer 1.18 keeps no prepared statements, so -M extended),
# and the plain claim with 32 clients, to set against its figure with 8: what a plain job
# queue does with 32 sessions on the same machine.
if wants 2; then
    phase "workload 2"
    POOL_SIZE=$(nproc)
    POOL_DIR=$(mktemp -d /tmp/pg_sched_bench_pool.XXXXXX)
    chmod 755 "$POOL_DIR"               # pgbouncer runs as the OS user postgres when root
    pgbouncer_start "$POOL_DIR/pgbouncer" "$PGHOST" "$PGPORT" "$POOL_SIZE" >"$WORK/pgbouncer.out" ||
        die "pgbouncer did not start for workload 2's pooled runs"
    say "W2: dispatch_next($BATCH) with $W2_CLIENTS clients; with 8 vs the batched write floor, PL/pgSQL, plain claim (also with 32); 8 and 32 also through pgbouncer ($POOL_SIZE server connections); $FLEET nodes, $QUEUE queued, ${T2} s runs"
    for r in $(seq 1 "$RUNS"); do
        line=""
        for run in pg:8 floor_batch:8 plpgsql:8 claim:8 $(for c in $W2_CLIENTS; do [ "$c" != 8 ] && echo "pg:$c"; done) \
                   pg_nogate:8 pg_nogate:32 pooled:8 pooled:32 claim:32; do
            impl=${run%%:*}
            c=${run#*:}
            settle "$DB_DISPATCH" reset noanalyze
            opts=""
            via=()
            case $impl in
                pg) script=w2_dispatch_next.pgbench ;;
                # the same clients through pgbouncer: $POOL_SIZE backends do the work
                pooled) script=w2_dispatch_next.pgbench; via=(-M extended -h 127.0.0.1 -p "$PGBOUNCER_PORT") ;;
                # the same without the dispatch gate (src/dispatch_gate.c), side by side
                pg_nogate) script=w2_dispatch_next.pgbench; opts="-c sched.dispatch_concurrency=0" ;;
                floor_batch) script=w2_write_floor_batch.pgbench ;;
                plpgsql) script=w2_plpgsql.pgbench ;;
                claim) script=w2_plain_claim.pgbench ;;
            esac
            gate0=$(sql "$DB_DISPATCH" -F ' ' -c "SELECT entered, waited, timed_out, handed FROM sched._dispatch_gate()")
            # pg_sched's direct runs log every transaction, for the rate in their middle
            log=""; [ "$impl" = pg ] && log="$WORK/w2_${impl}_c${c}_$r.log"
            PGB_LOG="$log" PGOPTIONS="$opts" pgb "w2_${impl}_c${c}_$r" "$DB_DISPATCH" "$c" "$T2" "${via[@]}" -D batch=$BATCH -D nodes="$FLEET" -f "$PGB_DIR/$script"
            if [ "$impl" = pg ]; then
                # the dispatch gate (src/dispatch_gate.c): the share of turns that waited,
                # that saw no turn given back for sched.dispatch_wait_max, and the turns
                # handed to a waiter (sched.dispatch_handoff_after)
                read -r e0 w0 t0 h0 <<<"$gate0"
                read -r e1 w1 t1 h1 < <(sql "$DB_DISPATCH" -F ' ' -c "SELECT entered, waited, timed_out, handed FROM sched._dispatch_gate()")
                if [ -n "$e0" ] && [ $((e1 - e0)) -gt 0 ]; then
                    record "w2.gate_waited.c$c" "$(calc "($w1 - $w0) / ($e1 - $e0)")"
                    record "w2.gate_timed_out.c$c" "$(calc "($t1 - $t0) / ($e1 - $e0)")"
                    record "w2.gate_handed.c$c" "$(calc "($h1 - $h0) / ($e1 - $e0)")"
                fi
            fi
            if [ "$impl" = claim ]; then
                made=$(sql "$DB_DISPATCH" -c "SELECT count(*) FROM sched.request WHERE state = 'DISPATCHED'")
            else
                made=$(count_attempts "$DB_DISPATCH")
            fi
            rate=$(calc "$made / $PGB_SECONDS")
            record "w2.$impl.c$c" "$rate"
            line="$line $impl/$c $(fmt "$rate")/s"
            if [ -n "$log" ] && read -r wn ws wb wa < <(steady_window "$log"); then
                # every session past its first call, none closed yet: placements per
                # transaction as in the whole run
                record "w2.mid.c$c" "$(calc "$wn * $made / $PGB_N / $ws")"
                record "w2.before.c$c" "$wb"; record "w2.after.c$c" "$wa"
                line="$line (mid $(fmt "$(calc "$wn * $made / $PGB_N / $ws")")/s)"
            fi
            left=$(pending "$DB_DISPATCH")
            [ "$left" -gt 0 ] || say "WARNING: the queue ran dry during workload 2 ($impl, $c clients): the figure is a lower bound"
        done
        say "W2 run $r/$RUNS (placements/s; implementation/clients):$line"
    done
    pgbouncer_stop
fi

# ---- workload 6 -----------------------------------------------------------------------------
# One fresh backend per measurement: warm-up dispatch_next(1) (plans prepared, caches
# loaded), then the peak RSS is reset (/proc/self/clear_refs) and one dispatch_next(N)
# runs, rolled back; VmHWM afterwards is the peak during the call.  A sampler reads
# RssAnon of the backend every millisecond: the backend's private memory, without the
# shared buffers it touches.
mem_probe() { # N RUN -> sets MEM_HWM_KB MEM_ANON_KB (growth during the call)
    local n=$1 r=$2
    local pidfile=$WORK/mem_pid_${n}_$r statusfile=$WORK/mem_status_${n}_$r
    local peak=0 base pid k v u psql_pid
    rm -f "$pidfile"
    psql -X -q -At -v ON_ERROR_STOP=1 -d "$DB_DISPATCH" >"$statusfile" 2>"$statusfile.err" <<SQL &
\o $pidfile
SELECT pg_backend_pid();
\o
BEGIN;
SELECT count(*) FROM sched.dispatch_next(1);
ROLLBACK;
SELECT pg_sleep(0.5);
DO \$\$ BEGIN EXECUTE 'COPY (SELECT 5) TO ''/proc/self/clear_refs'''; EXCEPTION WHEN OTHERS THEN NULL; END \$\$;
SELECT 'before', (regexp_match(pg_read_file('/proc/self/status'), 'VmRSS:\s+(\d+)'))[1],
       (regexp_match(pg_read_file('/proc/self/status'), 'RssAnon:\s+(\d+)'))[1];
BEGIN;
SELECT 'placed', count(*) FILTER (WHERE outcome = 'DISPATCHED') FROM sched.dispatch_next($n);
ROLLBACK;
SELECT 'after', (regexp_match(pg_read_file('/proc/self/status'), 'VmHWM:\s+(\d+)'))[1],
       (regexp_match(pg_read_file('/proc/self/status'), 'RssAnon:\s+(\d+)'))[1];
SQL
    psql_pid=$!
    for _ in $(seq 1 500); do [ -s "$pidfile" ] && break; read -r -t 0.01 -u 9 _ || true; done
    pid=$(tr -dc '0-9' <"$pidfile" || true)
    # the server must run on this machine: the pid must be a postgres process here
    local cmdline=""
    [ -n "$pid" ] && cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null || true)
    if [ -r "/proc/$pid/status" ] && [[ $cmdline == *postgres* ]]; then
        while kill -0 "$psql_pid" 2>/dev/null; do
            while read -r k v u; do
                [ "$k" = "RssAnon:" ] && { (( v > peak )) && peak=$v; break; }
            done 2>/dev/null <"/proc/$pid/status" || break
            read -r -t 0.001 -u 9 _ || true
        done
    fi
    wait "$psql_pid" || { cat "$statusfile.err" >&2; die "memory probe failed"; }
    base=$(awk -F'|' '$1 == "before" { print $2 }' "$statusfile")
    MEM_ANON_BEFORE=$(awk -F'|' '$1 == "before" { print $3 }' "$statusfile")
    MEM_HWM_KB=$(( $(awk -F'|' '$1 == "after" { print $2 }' "$statusfile") - base ))
    MEM_PLACED=$(awk -F'|' '$1 == "placed" { print $2 }' "$statusfile")
    if (( peak > 0 )); then MEM_ANON_KB=$(( peak - MEM_ANON_BEFORE )); else MEM_ANON_KB=""; fi
}

if wants 6; then
    phase "workload 6"
    say "W6: backend memory of one dispatch_next(1000) vs dispatch_next(100), fresh backend each"
    settle "$DB_DISPATCH" reset
    mkfifo "$WORK/mem_tick"
    exec 9<>"$WORK/mem_tick"
    for r in $(seq 1 "$RUNS"); do
        for n in 100 1000; do
            mem_probe "$n" "$r"
            record "w6.hwm.$n" "$MEM_HWM_KB"
            [ -n "$MEM_ANON_KB" ] && record "w6.anon.$n" "$MEM_ANON_KB"
            record "w6.placed.$n" "$MEM_PLACED"
            say "W6 run $r/$RUNS: dispatch_next($n) placed $MEM_PLACED; peak RSS +$MEM_HWM_KB kB, private (RssAnon) +${MEM_ANON_KB:-?} kB"
        done
    done
    exec 9>&-
fi
# ---- workload 1 (and 9) ---------------------------------------------------------------------
# single IMPL CLIENTS KEY NAME: one pgbench run of an implementation placing one request per
# transaction; records KEY (placements/s: new attempt rows over the run's time) and
# KEY.placed_fraction; sets SINGLE_RATE.  A checkpoint follows, so every run starts alike.
single() {
    local impl=$1 c=$2 key=$3 name=$4 opts="" script before made
    case $impl in
        pg) script=w1_dispatch_attempt.pgbench ;;
        next1) script=w1_dispatch_next1.pgbench ;;
        # what 0.1.0 did by default: a NOTIFY per dispatch (issue 13)
        pg_notify) script=w1_dispatch_attempt.pgbench; opts="-c sched.notify_workers=on" ;;
        # the same without the dispatch gate (src/dispatch_gate.c), side by side
        pg_nogate) script=w1_dispatch_attempt.pgbench; opts="-c sched.dispatch_concurrency=0" ;;
        next1_nogate) script=w1_dispatch_next1.pgbench; opts="-c sched.dispatch_concurrency=0" ;;
        floor) script=w1_write_floor.pgbench ;;
        floor_notify) script=w1_write_floor_notify.pgbench ;;
        plpgsql) script=w1_plpgsql.pgbench ;;
    esac
    before=$(count_attempts "$DB_DISPATCH")
    PGOPTIONS="$opts" pgb "$name" "$DB_DISPATCH" "$c" "$T1" -D nodes="$FLEET" -f "$PGB_DIR/$script"
    made=$(( $(count_attempts "$DB_DISPATCH") - before ))
    SINGLE_RATE=$(calc "$made / $PGB_SECONDS")
    record "$key" "$SINGLE_RATE"
    record "$key.placed_fraction" "$(calc "$made / $PGB_N")"
    sql "$DB_DISPATCH" -c "CHECKPOINT" >/dev/null
}

# w1_reset: everything pending again; bench.rid_seq (the requests dispatch_attempt and the
# floors take, in id order) then starts in the middle of the queue, far from its head,
# where dispatch_next(1) takes its requests (queue order): the two never take the same
# request, so every call of each places one.
w1_reset() {
    settle "$DB_DISPATCH" reset noanalyze
    sql "$DB_DISPATCH" -c "SELECT setval('bench.rid_seq', (SELECT (min(request_id) + max(request_id)) / 2 FROM sched.request), false)" >/dev/null
}

if wants 1; then
    phase "workload 1"
    for c in $W1_ORDER; do
        impls="pg next1 floor"
        [ "$c" != 1 ] && impls="$impls pg_nogate next1_nogate"
        if [ "$W1_EXTRA" = 1 ]; then
            [ "$c" != 1 ] && impls="$impls pg_notify floor_notify"
            [ "$c" = 8 ] && impls="$impls plpgsql"
        fi
        say "W1: $(echo "$impls" | sed 's/ / vs /g') (pg = dispatch_attempt, next1 = dispatch_next(1)), $c clients, $FLEET nodes, ${T1} s runs"
        w1_reset
        for r in $(seq 1 "$RUNS"); do
            line=""
            for impl in $impls; do
                single "$impl" "$c" "w1.$impl.c$c" "w1_${impl}_c${c}_$r"
                line="$line $impl $(fmt "$SINGLE_RATE")/s"
            done
            say "W1 $c clients, run $r/$RUNS:$line"
        done
        left=$(pending "$DB_DISPATCH")
        [ "$left" -gt 0 ] || say "WARNING: the queue ran dry during workload 1 ($c clients)"
    done
fi

# ---- workload 9 -----------------------------------------------------------------------------
# The fleet grows from $FLEET to $FLAT_FLEET nodes (the same generator: nodes FLEET+1 ..
# FLAT_FLEET of fleet 'node'); one dispatch_attempt and one dispatch_next(1) per
# transaction, 1 client, against the 1-client figures of workload 1 (measured just before,
# on the same queue; measured here when workload 1 is not run).  Each run's session loads
# its fleet mirror at its first call (included, at both sizes).
# w9_runs NODES KEY_OF_IMPL: RUNS runs of dispatch_attempt and dispatch_next(1), 1 client,
# each recorded under the key KEY_OF_IMPL with @ replaced by the implementation
w9_runs() {
    local nodes=$1 key=$2 r impl line
    w1_reset
    for r in $(seq 1 "$RUNS"); do
        line=""
        for impl in pg next1; do
            single "$impl" 1 "${key//@/$impl}" "w9_${impl}_${nodes}_$r"
            line="$line $impl $(fmt "$SINGLE_RATE")/s"
        done
        say "W9 $nodes nodes, run $r/$RUNS:$line"
    done
}
if wants 9; then
    phase "workload 9"
    if ! wants 1; then
        say "W9: dispatch_attempt and dispatch_next(1), 1 client, $FLEET nodes (what workload 1 would measure)"
        w9_runs "$FLEET" "w1.@.c1"
    fi
    say "W9: the fleet grows to $FLAT_FLEET nodes"
    bulk "$DB_DISPATCH" $((FLEET + 1)) "$FLAT_FLEET" "$DISPATCH_FLEET"
    sql "$DB_DISPATCH" -c "ANALYZE sched.node, sched.worker" >/dev/null
    w9_runs "$FLAT_FLEET" "w9.@"
fi
if wants 1 || wants 2 || wants 4 || wants 6 || wants 9; then
    drop_db "$DB_DISPATCH"
fi

# =============================================================================================
# Workload 3: select_candidate latency vs fleet size
# =============================================================================================
# w3_measure NODES: RUNS rounds, each the fleet alone ($DB_FLEET: pg_sched), the fleet
# beside 10x nodes of another capability ($DB_FLEET_OTHERS: pg_sched), the SQL baseline on
# the fleet alone, then its cold first call; the two fleets one right after the other,
# so that their ratio is measured side by side, not a minute apart on a machine whose
# speed drifts, and the ratio judged is the median of the rounds' ratios (the pairs), not
# the ratio of two medians that may come from different rounds
w3_measure() {
    local nodes=$1 r f p50 t run label impl db alone
    settle "$DB_FLEET"
    settle "$DB_FLEET_OTHERS"
    for r in $(seq 1 "$RUNS"); do
        for run in plain:pg others:pg plain:sql; do
            label=${run%%:*}; impl=${run#*:}
            db=$DB_FLEET; [ "$label" = others ] && db=$DB_FLEET_OTHERS
            f=w3_select_candidate.pgbench
            [ "$impl" = sql ] && f=w3_sql_select.pgbench
            rm -f "$WORK/w3log".*
            # (the session's first call loads the capability into its mirror: up to 2 s at
            # 100,000 nodes among 1,000,000 others, the whole of a run of T3 seconds; it is
            # left out of the p50, which is the warm call's, and the large runs are longer)
            t=$T3; (( nodes >= 100000 )) && t=$((T3 + 3))
            pgb "w3_${label}_${impl}_${nodes}_${r}" "$db" 1 "$t" -l --log-prefix="$WORK/w3log" -f "$PGB_DIR/$f"
            p50=$(cat "$WORK/w3log".* | awk 'NR > 1 { print $3 }' | sort -n |
                  awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2] / 1000; else print (v[NR / 2] + v[NR / 2 + 1]) / 2000 }')
            record "w3.$label.$impl.$nodes" "$p50"
            case $run in
                plain:pg) alone=$p50 ;;
                others:pg) record "w3.others_ratio.$nodes" "$(calc "$p50 / $alone")" ;;
            esac
            say "W3 $label $nodes nodes, run $r/$RUNS: $impl p50 $(fmt "$p50" 3) ms ($PGB_N calls)"
        done
        # the first call of a session loads the capability into the session's fleet
        # mirror: one new connection per call (pgbench -C) measures that cold call;
        # pgbench's latency then includes the connection, so it is reported apart
        pgb "w3_cold_${nodes}_$r" "$DB_FLEET" 1 "$T3C" -C -f "$PGB_DIR/w3_select_candidate.pgbench"
        record "w3.cold.pg.$nodes" "$(sed -nE 's/^latency average = ([0-9.]+) ms.*/\1/p' "$WORK/w3_cold_${nodes}_$r.out")"
        pgb "w3_connect_${nodes}_$r" "$DB_FLEET" 1 "$T3C" -C -f "$PGB_DIR/w3_connect_only.pgbench"
        record "w3.connect.$nodes" "$(sed -nE 's/^latency average = ([0-9.]+) ms.*/\1/p' "$WORK/w3_connect_${nodes}_$r.out")"
        say "W3 $nodes nodes, run $r/$RUNS: new connection + first select_candidate $(fmt "$(median "w3.cold.pg.$nodes")" 3) ms (connection + SELECT 1: $(fmt "$(median "w3.connect.$nodes")" 3) ms)"
    done
}

if wants 3; then
    phase "workload 3"
    say "databases $DB_FLEET (workers of capability 'target' only) and $DB_FLEET_OTHERS (the same, beside 10x nodes serving 'other'): select_candidate"
    create_db "$DB_FLEET"
    create_db "$DB_FLEET_OTHERS"
    have=0
    for n in $W3_SIZES; do
        say "W3: fleet of $n nodes serving 'target', alone and beside $((10 * n)) nodes serving 'other'"
        bulk "$DB_FLEET" $((have + 1)) "$n" "SELECT bench.load_fleet('t', @FIRST@, @LAST@, 'target', true, 8, 16000, 65536)"
        bulk "$DB_FLEET_OTHERS" $((have + 1)) "$n" "SELECT bench.load_fleet('t', @FIRST@, @LAST@, 'target', true, 8, 16000, 65536)"
        bulk "$DB_FLEET_OTHERS" $((10 * have + 1)) $((10 * n)) "SELECT bench.load_fleet('o', @FIRST@, @LAST@, 'other', true, 8, 16000, 65536)"
        have=$n
        w3_measure "$n"
    done
    drop_db "$DB_FLEET"
    drop_db "$DB_FLEET_OTHERS"
fi

# =============================================================================================
# Workload 5: 16 dispatchers on a hot fleet of 20 nodes
# =============================================================================================
# Conflicts are counted by pg_sched itself in shared memory (sched._dispatch_counters()):
# every candidate a dispatch skipped because another transaction held it, or refused on
# the re-check under lock, whether the request was then placed elsewhere or left queued.
# Refusals are also visible in the result rows: a request for which every eligible pair
# was held or taken comes back UNSCHEDULABLE with "N candidates held or taken by
# concurrent dispatches" in detail.
counters() {
    sql "$DB_HOT" -F ' ' -c "SELECT placements, conflicts, held_passed FROM sched._dispatch_counters()"
}

if wants 5; then
    phase "workload 5"
    say "database $DB_HOT: hot fleet of 20 nodes (all admissible, unlimited slots), $HOT_QUEUE queued"
    create_db "$DB_HOT"
    bulk "$DB_HOT" 1 20 "SELECT bench.load_fleet('node', @FIRST@, @LAST@, 'build', false, 1000000, 1000000, 4000000)"
    load_requests "$DB_HOT" 1 "$HOT_QUEUE"
    # requests no node admits (zone 'nowhere'), kept out of the queue (available next year)
    sql "$DB_HOT" -c "SET session_replication_role = replica" -c "SELECT bench.load_requests($((HOT_QUEUE + 1)), $((HOT_QUEUE + 200)), 'build', '$T0')" \
        -c "UPDATE sched.request SET required_labels = '{\"zone\": \"nowhere\"}', available_at = now() + interval '1 year'
             WHERE request_id > $HOT_QUEUE" \
        -c "CREATE UNLOGGED TABLE bench.hot_outcome (outcome text NOT NULL, detail text)" >/dev/null
    sql "$DB_HOT" -c "SELECT setval('sched.request_id_seq', (SELECT max(request_id) FROM sched.request))" >/dev/null
    settle "$DB_HOT"

    # the requests nothing admits are not used here: kept out of the queue of the runs
    sql "$DB_HOT" -c "DELETE FROM sched.request WHERE request_id > $HOT_QUEUE" >/dev/null

    for r in $(seq 1 "$RUNS"); do
        settle "$DB_HOT" reset
        sql "$DB_HOT" -c "TRUNCATE bench.hot_outcome" >/dev/null
        read -r p0 c0 h0 < <(counters)
        PGB_ALLOW_FAIL=1 pgb "w5_$r" "$DB_HOT" 16 "$T5" --failures-detailed -f "$PGB_DIR/w5_hot.pgbench"
        read -r p1 c1 h1 < <(counters)
        read -r d u_conf n_conf u_other < <(sql "$DB_HOT" -F ' ' -c "
            SELECT count(*) FILTER (WHERE outcome = 'DISPATCHED'),
                   count(*) FILTER (WHERE outcome = 'UNSCHEDULABLE' AND detail LIKE '%held or taken by concurrent%'),
                   coalesce(sum((regexp_match(detail, '(\d+) candidates? held or taken'))[1]::int), 0),
                   count(*) FILTER (WHERE outcome <> 'DISPATCHED' AND coalesce(detail, '') NOT LIKE '%held or taken by concurrent%')
              FROM bench.hot_outcome")
        violations=$(sql "$DB_HOT" -c "SELECT coalesce(sum(violations), 0) FROM bench.check_invariants()")
        aborted=0
        grep -qiE 'aborted|error' "$WORK/w5_$r.err" && aborted=1
        (( d > 0 )) || die "workload 5 dispatched nothing"
        (( p1 - p0 == d )) || say "WARNING: the counters saw $((p1 - p0)) placements, the result rows $d"
        conflicts=$((c1 - c0))
        skipped=$((conflicts - n_conf))
        record "w5.rate" "$(calc "$d / $PGB_SECONDS")"
        record "w5.conflicts" "$(calc "$conflicts / $d")"
        record "w5.held_passed" "$(calc "($h1 - $h0) / $d")"
        record "w5.refused" "$(calc "$n_conf / $d")"
        record "w5.refused_requests" "$(calc "$u_conf / $d")"
        record "w5.failed" "$PGB_FAILED"
        record "w5.aborted" "$aborted"
        record "w5.violations" "$violations"
        say "W5 run $r/$RUNS: $(fmt "$(calc "$d / $PGB_SECONDS")")/s dispatched ($d), $conflicts conflicts: $u_conf requests refused for conflicts ($n_conf candidates), $skipped candidates skipped before a success; $((h1 - h0)) better candidates passed over unprobed, being reserved by concurrent dispatches; $PGB_FAILED failed transactions (deadlocks), client errors: $aborted, invariant violations: $violations"
        [ "$aborted" = 0 ] || { cat "$WORK/w5_$r.err" >&2; say "WARNING: pgbench clients reported errors in workload 5 (above)"; }
    done
    drop_db "$DB_HOT"
fi

# =============================================================================================
# Workload 8: dispatch_next(100) with concurrency keys and a tenant quota in use
# =============================================================================================
# Two tenants of the same queue length and the same request shapes (bench.load_tenant_requests):
# 'plain' (no key, no quota) and 'keyed' (every request with one of $KEYS concurrency keys,
# each limited to 1,000,000 live attempts, and a quota on the tenant's live attempts, cpu,
# memory and gpus, far above what a run reserves).  Each run dispatches one tenant's queue
# (dispatch_next(100, tenant => ...)), 8 clients, from a reset queue.
if wants 8; then
    phase "workload 8"
    say "database $DB_KEYS: fleet of $FLEET nodes; tenants 'plain' and 'keyed' with $KEYS_QUEUE requests each ('keyed': $KEYS limited concurrency keys and a tenant quota, never reached)"
    create_db "$DB_KEYS"
    bulk "$DB_KEYS" 1 "$FLEET" "$DISPATCH_FLEET"
    bulk "$DB_KEYS" 1 "$KEYS_QUEUE" "SELECT bench.load_tenant_requests(@FIRST@, @LAST@, 'build', '$T0', 'plain', 0)"
    bulk "$DB_KEYS" $((KEYS_QUEUE + 1)) $((2 * KEYS_QUEUE)) "SELECT bench.load_tenant_requests(@FIRST@, @LAST@, 'build', '$T0', 'keyed', $KEYS)"
    w8_tenants="plain keyed"
    if [ "$W8_SPLIT" = 1 ]; then
        w8_tenants="plain keyed keys quota"
        bulk "$DB_KEYS" $((2 * KEYS_QUEUE + 1)) $((3 * KEYS_QUEUE)) "SELECT bench.load_tenant_requests(@FIRST@, @LAST@, 'build', '$T0', 'keys', $KEYS)"
        bulk "$DB_KEYS" $((3 * KEYS_QUEUE + 1)) $((4 * KEYS_QUEUE)) "SELECT bench.load_tenant_requests(@FIRST@, @LAST@, 'build', '$T0', 'quota', 0)"
        sql "$DB_KEYS" -c "SELECT sched.set_tenant_quota('quota', 1000000, 2000000000, 1000000000000, 1000000)" >/dev/null
    fi
    sql "$DB_KEYS" -c "SELECT setval('sched.request_id_seq', (SELECT max(request_id) FROM sched.request))" \
        -c "SELECT count(sched.set_concurrency_limit('key-' || k, 1000000)) FROM generate_series(0, $KEYS - 1) k" \
        -c "SELECT sched.set_tenant_quota('keyed', 1000000, 2000000000, 1000000000000, 1000000)" >/dev/null
    settle "$DB_KEYS"
    for r in $(seq 1 "$RUNS"); do
        line=""
        for tenant in $w8_tenants; do
            settle "$DB_KEYS" reset noanalyze
            pgb "w8_${tenant}_$r" "$DB_KEYS" 8 "$T2" -D batch=$BATCH -D tenant=$tenant -f "$PGB_DIR/w8_dispatch_next_tenant.pgbench"
            read -r made keyed other < <(sql "$DB_KEYS" -F ' ' -c "SELECT count(*), count(concurrency_key), count(*) FILTER (WHERE tenant <> '$tenant') FROM sched.attempt")
            (( made > 0 )) || die "workload 8 ($tenant) placed nothing"
            [ "$other" = 0 ] || die "workload 8: dispatch_next of tenant $tenant placed $other requests of another tenant"
            rate=$(calc "$made / $PGB_SECONDS")
            record "w8.$tenant" "$rate"
            if [ "$tenant" = keyed ] || [ "$tenant" = keys ]; then
                [ "$keyed" = "$made" ] || die "workload 8: $((made - keyed)) of tenant $tenant's attempts have no concurrency key"
            fi
            if [ "$tenant" != plain ]; then
                # the limits must not have been reached (else the run measures something else)
                held=$(sql "$DB_KEYS" -c "SELECT count(*) FROM sched.request WHERE last_reason ~ '^(concurrency_limit|tenant_quota_exceeded)'")
                peak=$(sql "$DB_KEYS" -c "SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM sched.attempt WHERE status IN ('DISPATCHED', 'RUNNING') GROUP BY concurrency_key) k")
                record "w8.held_by_limits" "$held"
                [ "$tenant" = keyed ] && record "w8.peak_live_per_key" "$peak"
                [ "$held" = 0 ] || say "WARNING: workload 8: $held requests were held back by a limit: the limits were reached"
            fi
            line="$line $tenant $(fmt "$rate")/s"
            left=$(sql "$DB_KEYS" -c "SELECT count(*) FROM sched.request WHERE state = 'PENDING' AND tenant = '$tenant'")
            [ "$left" -gt 0 ] || say "WARNING: the queue of tenant $tenant ran dry during workload 8: the figure is a lower bound"
        done
        say "W8 run $r/$RUNS (placements/s, 8 clients):$line"
    done
    drop_db "$DB_KEYS"
fi

# =============================================================================================
# Workload 7: end to end, vs a plain job queue
# =============================================================================================
# pg_sched: $E2E_SCHEDULERS clients run w7_scheduler.pgbench (submit a batch of 100 tasks
# while fewer than $E2E_BACKLOG are open, then dispatch_next(100)) while $E2E_WORKERS
# clients run w7_worker.pgbench, each the worker of one node (wait_commands of its own
# worker with start => true, which starts the attempt it delivers, then finish_attempt:
# one transaction each).  The plain job queue:
# $E2E_SCHEDULERS clients insert batches of 100 jobs while fewer than $E2E_BACKLOG are ready,
# $E2E_WORKERS claim one FOR UPDATE SKIP LOCKED (marking it running) and then mark it done.  Both for
# $T7 s, side by side in each run.  Tasks per second: the tasks (jobs) finished during the
# run, over the time from the first finish to the last (finished_at: the `at` of
# finish_attempt, now() of the marking transaction).  Open tasks are left between runs.
if wants 7; then
    phase "workload 7"
    say "database $DB_E2E: $E2E_WORKERS nodes, one worker each, registered through the protocol (bench/e2e.sql), and the plain job queue's table"
    create_db "$DB_E2E"
    sql "$DB_E2E" -f "$HERE/e2e.sql" >/dev/null
    E2E_GEN=$(sql "$DB_E2E" -c "SELECT string_agg(DISTINCT generation::text, ',') FROM bench.e2e_fleet($E2E_WORKERS, 1000000)")
    [[ $E2E_GEN =~ ^[0-9]+$ ]] || die "the workers of workload 7 registered with generations '$E2E_GEN', not one"
    # run 0 warms up, uncounted: each side's first run builds its backlog from nothing
    # (the runs after it start from the open tasks the one before left), and read
    # 0.67x (pg_sched) and 0.89x (plain) of the runs after it in two runs of make bench
    for r in $(seq 0 "$RUNS"); do
        line=""
        for impl in pg plain; do
            sql "$DB_E2E" -c "VACUUM (ANALYZE)" -c "CHECKPOINT" >/dev/null
            t0=$(sql "$DB_E2E" -c "SELECT clock_timestamp()")
            if [ "$impl" = pg ]; then
                pgb_bg "w7_pg_workers_$r" "$DB_E2E" "$E2E_WORKERS" "$T7" -D gen="$E2E_GEN" -f "$PGB_DIR/w7_worker.pgbench"
                pgb_bg "w7_pg_schedulers_$r" "$DB_E2E" "$E2E_SCHEDULERS" "$T7" -D batch=$BATCH -D backlog=$E2E_BACKLOG -f "$PGB_DIR/w7_scheduler.pgbench"
                pgb_join
                q="SELECT count(*), coalesce(extract(epoch FROM max(finished_at) - min(finished_at)), 0),
                          (SELECT count(*) FROM sched.attempt WHERE finished_at >= '$t0' AND status <> 'SUCCEEDED')
                     FROM sched.attempt WHERE status = 'SUCCEEDED' AND finished_at >= '$t0'"
            else
                pgb_bg "w7_plain_workers_$r" "$DB_E2E" "$E2E_WORKERS" "$T7" -f "$PGB_DIR/w7_job_worker.pgbench"
                pgb_bg "w7_plain_inserters_$r" "$DB_E2E" "$E2E_SCHEDULERS" "$T7" -D batch=$BATCH -D backlog=$E2E_BACKLOG -f "$PGB_DIR/w7_job_insert.pgbench"
                pgb_join
                q="SELECT count(*), coalesce(extract(epoch FROM max(finished_at) - min(finished_at)), 0), 0
                     FROM bench.job WHERE state = 'done' AND finished_at >= '$t0'"
            fi
            read -r n span bad < <(sql "$DB_E2E" -F ' ' -c "$q")
            (( n > 1 )) || die "workload 7 ($impl): $n tasks finished"
            [ "$bad" = 0 ] || say "WARNING: workload 7: $bad attempts ended otherwise than SUCCEEDED"
            rate=$(calc "($n - 1) / $span")
            if [ "$r" -gt 0 ]; then
                record "w7.$impl" "$rate"
                record "w7.$impl.failed_transactions" "$BG_FAILED"
            fi
            line="$line $impl $(fmt "$rate") tasks/s ($n in $(fmt "$span" 1) s)"
        done
        if [ "$r" -gt 0 ]; then
            say "W7 run $r/$RUNS:$line"
        else
            say "W7 warm-up run (not counted):$line"
        fi
    done
    viol=$(sql "$DB_E2E" -c "SELECT coalesce(sum(violations), 0) FROM bench.check_invariants()")
    record "w7.violations" "$viol"
    [ "$viol" = 0 ] || say "WARNING: workload 7: $viol invariant violations after the runs"
    drop_db "$DB_E2E"
fi

# =============================================================================================
# Summary: one table of medians, RESULTS.md, scaling.png
# =============================================================================================
phase ""
say "writing the summary"
TABLE=$WORK/table.md
NOTES=$WORK/notes.md
: >"$TABLE"
: >"$NOTES"
row() { printf '| %s |\n' "$(IFS='|'; echo "$*" | sed 's/|/ | /g')" >>"$TABLE"; }
note() { printf -- '- %s\n' "$*" >>"$NOTES"; }

row "#" "workload" "metric" "pg_sched" "baselines (same run)" "ratio" "target" "met"
row "---" "---" "---" "---:" "---" "---:" "---" "---"

sizes=($W4_SIZES)
w3sizes=($W3_SIZES)
small=${sizes[0]}
large=${sizes[${#sizes[@]}-1]}

if wants 1; then
    for c in $W1_CLIENTS; do
        cs="$c clients"; [ "$c" = 1 ] && cs="1 client"
        pg=$(median "w1.pg.c$c"); nx=$(median "w1.next1.c$c"); fl=$(median "w1.floor.c$c"); pl=$(median "w1.plpgsql.c$c")
        fn=$(median "w1.floor_notify.c$c"); pn=$(median "w1.pg_notify.c$c")
        base="write floor (no NOTIFY) $(fmt "$fl")/s"
        [ -n "$fn" ] && base="$base; floor + NOTIFY $(fmt "$fn")/s"
        [ -n "$pn" ] && base="$base; pg_sched with NOTIFY (notify_workers on) $(fmt "$pn")/s"
        [ -n "$pl" ] && base="$base; PL/pgSQL $(fmt "$pl")/s"
        rt=$(ratio "$pg" "$fl"); rn=$(ratio "$nx" "$fl")
        row 1 "dispatch_attempt, $cs, $FLEET nodes" "dispatches/s" "$(fmt "$pg")" "$base" "${rt}x floor" ">= 0.8x floor" "$(yesno ge "$rt" 0.8)"
        row 1 "dispatch_next(1), $cs, $FLEET nodes" "placements/s" "$(fmt "$nx")" "write floor (no NOTIFY) $(fmt "$fl")/s" "${rn}x floor" ">= 0.8x floor" "$(yesno ge "$rn" 0.8)"
        note "Workload 1, $cs: dispatch_attempt $(fmt "$pg")/s is ${rt}x the write floor without NOTIFY ($(fmt "$fl")/s), dispatch_next(1) $(fmt "$nx")/s is ${rn}x$( [ -n "$fn" ] && echo "; dispatch_attempt is $(ratio "$pg" "$fn")x the floor with NOTIFY ($(fmt "$fn")/s)")$( [ -n "$pn" ] && echo ", $(ratio "$pg" "$pn")x itself with sched.notify_workers on ($(fmt "$pn")/s)")$( [ -n "$pl" ] && echo " and $(ratio "$pg" "$pl")x PL/pgSQL ($(fmt "$pl")/s)"); target >= 0.8x the floor: dispatch_attempt $(yesno ge "$rt" 0.8), dispatch_next(1) $(yesno ge "$rn" 0.8). Fraction of calls that placed: dispatch_attempt $(fmt "$(median "w1.pg.c$c.placed_fraction")" 3), dispatch_next(1) $(fmt "$(median "w1.next1.c$c.placed_fraction")" 3), floor $(fmt "$(median "w1.floor.c$c.placed_fraction")" 3)."
        png=$(median "w1.pg_nogate.c$c"); nxg=$(median "w1.next1_nogate.c$c")
        [ -n "$png" ] && note "Workload 1, $cs, without the dispatch gate (sched.dispatch_concurrency = 0), side by side: dispatch_attempt $(fmt "$png")/s ($(ratio "$png" "$fl")x the floor; the gate's figure is $(ratio "$pg" "$png")x it), dispatch_next(1) $(fmt "$nxg")/s ($(ratio "$nxg" "$fl")x the floor; the gate's figure is $(ratio "$nx" "$nxg")x it)."
    done
fi
if wants 9; then
    for impl in pg next1; do
        name=dispatch_attempt; [ "$impl" = next1 ] && name="dispatch_next(1)"
        small1=$(median "w1.$impl.c1"); big=$(median "w9.$impl")
        ms_small=$( [ -n "$small1" ] && calc "1000 / $small1" || true); ms_big=$( [ -n "$big" ] && calc "1000 / $big" || true)
        rt=$(ratio "$ms_big" "$ms_small")
        row 9 "$name, 1 client, $(fmt "$FLAT_FLEET") nodes" "ms per call" "$(fmt "$ms_big" 3)" "$(fmt "$FLEET") nodes: $(fmt "$ms_small" 3) ms" "${rt}x" "<= 1.2x the $(fmt "$FLEET")-node cost" "$(yesno le "$rt" 1.2)"
        note "Workload 9, $name: one call costs $(fmt "$ms_big" 3) ms with $(fmt "$FLAT_FLEET") nodes and $(fmt "$ms_small" 3) ms with $(fmt "$FLEET") ($(fmt "$big")/s vs $(fmt "$small1")/s, 1 client, the same queue): ${rt}x; target <= 1.2x: $(yesno le "$rt" 1.2)."
    done
fi
if wants 2; then
    pg=$(median w2.pg.c8); pl=$(median w2.plpgsql.c8); cl=$(median w2.claim.c8); fb=$(median w2.floor_batch.c8)
    rt=$(ratio "$pg" "$pl"); rf=$(ratio "$pg" "$fb")
    met() { ge "$pg" 10000 && ge "$rf" 0.6 && ge "$rt" 5; }
    row 2 "dispatch_next($BATCH), 8 clients, $FLEET nodes, $QUEUE queued" "placements/s" "$(fmt "$pg")" "batched write floor $(fmt "$fb")/s; PL/pgSQL $(fmt "$pl")/s; plain claim $(fmt "$cl") claims/s" "${rf}x batched floor; ${rt}x PL/pgSQL; $(ratio "$pg" "$cl")x claim" ">= 10,000/s, >= 0.6x batched floor and >= 5x PL/pgSQL" "$(yesno met)"
    note "Workload 2: pg_sched $(fmt "$pg") placements/s with 8 clients ($(ratio "$pg" 10000)x the 10,000/s target: $(yesno ge "$pg" 10000)), ${rf}x the batched write floor ($(fmt "$fb")/s; target 0.6x: $(yesno ge "$rf" 0.6)), ${rt}x PL/pgSQL ($(fmt "$pl")/s; target 5x: $(yesno ge "$rt" 5)); the plain queue claim, which places nothing, takes $(fmt "$cl") requests/s ($(ratio "$pg" "$cl")x)."
    # no collapse: 8 and 32 clients against the best of 1, 2, 4
    best=""; bestc=""
    for c in 1 2 4; do
        v=$(median "w2.pg.c$c")
        if [ -n "$v" ] && { [ -z "$best" ] || ge "$v" "$best"; }; then best=$v; bestc=$c; fi
    done
    # the same, in the runs' middles (steady_window): every session past its first call,
    # none closed yet
    bestmid=""; bestmidc=""
    for c in 1 2 4; do
        v=$(median "w2.mid.c$c")
        if [ -n "$v" ] && { [ -z "$bestmid" ] || ge "$v" "$bestmid"; }; then bestmid=$v; bestmidc=$c; fi
    done
    for c in $W2_CLIENTS; do
        v=$(median "w2.pg.c$c")
        case $c in
            8|32) row 2 "dispatch_next($BATCH), $c clients: no collapse" "placements/s" "$(fmt "$v")" "best of 1, 2, 4 clients: $(fmt "$best")/s ($bestc); in the runs' middles (every session past its first call, none closed): $c clients $(fmt "$(median "w2.mid.c$c")")/s, best of 1, 2, 4 $(fmt "$bestmid")/s ($bestmidc), $(ratio "$(median "w2.mid.c$c")" "$bestmid")x" "$(ratio "$v" "$best")x best" ">= 0.9x the best of 1, 2, 4" "$(yesno ge "$(ratio "$v" "$best")" 0.9)" ;;
            *) row 2 "dispatch_next($BATCH), $c client$( [ "$c" != 1 ] && echo s), $FLEET nodes" "placements/s" "$(fmt "$v")" "-" "$(ratio "$v" "$best")x best of 1, 2, 4" "-" "-" ;;
        esac
    done
    for c in 8 32; do
        v=$(median "w2.pooled.c$c")
        row 2 "dispatch_next($BATCH), $c clients through pgbouncer (transaction mode, $POOL_SIZE server connections)" "placements/s" "$(fmt "$v")" "best of 1, 2, 4 clients: $(fmt "$best")/s ($bestc); $c clients directly: $(fmt "$(median "w2.pg.c$c")")/s" "$(ratio "$v" "$best")x best" "- (beside target 2)" "-"
    done
    # the plain job queue's claim with 32 clients, against its own figure with 8
    v=$(median w2.claim.c32)
    row 2 "plain queue claim (FOR UPDATE SKIP LOCKED, no placement), 32 clients" "claims/s" "$(fmt "$v")" "the same with 8 clients: $(fmt "$cl")/s; pg_sched with 32 clients against 8: $(ratio "$(median w2.pg.c32)" "$pg")x" "$(ratio "$v" "$cl")x its 8-client figure" "- (beside target 2)" "-"
    r8=$(ratio "$pg" "$best"); r32=$(ratio "$(median w2.pg.c32)" "$best")
    note "Workload 2, clients: $(for c in $W2_CLIENTS; do printf '%s: %s/s, ' "$c" "$(fmt "$(median "w2.pg.c$c")")"; done | sed 's/, $//'); the best of 1, 2 and 4 is $(fmt "$best")/s ($bestc clients); 8 clients get ${r8}x of it, 32 get ${r32}x (target >= 0.9x each: $(yesno ge "$r8" 0.9), $(yesno ge "$r32" 0.9))."
    note "Workload 2, the runs' middles (from pgbench's log of every transaction: from the moment the last session ended its first call to the moment the first session ended its last, after which pgbench closes it), side by side with the whole runs above: $(for c in $W2_CLIENTS; do printf '%s client%s %s/s (whole run %s/s; %s s before the middle, %s s after it), ' "$c" "$( [ "$c" != 1 ] && echo s)" "$(fmt "$(median "w2.mid.c$c")")" "$(fmt "$(median "w2.pg.c$c")")" "$(fmt "$(median "w2.before.c$c")" 2)" "$(fmt "$(median "w2.after.c$c")" 2)"; done | sed 's/, $//'); so measured, 8 clients get $(ratio "$(median w2.mid.c8)" "$bestmid")x and 32 get $(ratio "$(median w2.mid.c32)" "$bestmid")x the best of 1, 2 and 4 ($(fmt "$bestmid")/s, $bestmidc clients). The target is judged on the whole runs."
    note "Workload 2 through pgbouncer in transaction mode with $POOL_SIZE server connections (as many as the server's CPUs; -M extended), side by side: 8 clients $(fmt "$(median w2.pooled.c8)")/s ($(ratio "$(median w2.pooled.c8)" "$best")x the best of 1, 2 and 4 direct; directly ${r8}x), 32 clients $(fmt "$(median w2.pooled.c32)")/s ($(ratio "$(median w2.pooled.c32)" "$best")x; directly ${r32}x)."
    note "Workload 2, from 8 to 32 clients, side by side in the same rounds: pg_sched keeps $(ratio "$(median w2.pg.c32)" "$pg")x its placements per second ($(fmt "$pg") -> $(fmt "$(median w2.pg.c32)")/s), the plain queue claim $(ratio "$(median w2.claim.c32)" "$cl")x its claims per second ($(fmt "$cl") -> $(fmt "$(median w2.claim.c32)")/s: 32 claims at once, each passing over the rows the others hold)."
    note "Workload 2, without the dispatch gate (sched.dispatch_concurrency = 0), side by side: 8 clients $(fmt "$(median w2.pg_nogate.c8)")/s (the gate's figure is $(ratio "$(median w2.pg.c8)" "$(median w2.pg_nogate.c8)")x it), 32 clients $(fmt "$(median w2.pg_nogate.c32)")/s ($(ratio "$(median w2.pg.c32)" "$(median w2.pg_nogate.c32)")x)."
    note "Workload 2, the dispatch gate (sched.dispatch_concurrency: at most that many placement calls at once, the others wait their turn): share of calls that waited for a turn $(for c in $W2_CLIENTS; do printf '%s clients %s, ' "$c" "$(fmt "$(median "w2.gate_waited.c$c")" 2)"; done | sed 's/, $//'); that saw no turn given back for sched.dispatch_wait_max and ran over the limit $(for c in $W2_CLIENTS; do printf '%s clients %s, ' "$c" "$(fmt "$(median "w2.gate_timed_out.c$c")" 3)"; done | sed 's/, $//'); turns handed to a waiter that had waited sched.dispatch_handoff_after $(for c in $W2_CLIENTS; do printf '%s clients %s, ' "$c" "$(fmt "$(median "w2.gate_handed.c$c")" 2)"; done | sed 's/, $//')."
fi
if wants 8; then
    kp=$(median w8.plain); kk=$(median w8.keyed); rt=$(ratio "$kk" "$kp")
    held=$(awk -F'\t' '$1 == "w8.held_by_limits" { s += $2 } END { print s + 0 }' "$RES")
    row 8 "dispatch_next($BATCH), 8 clients, $FLEET nodes: requests with concurrency keys ($KEYS keys, each limited) and a tenant quota, never reached" "placements/s" "$(fmt "$kk")" "the same without keys or quota $(fmt "$kp")/s (same database, same queue length $(fmt "$KEYS_QUEUE"))$( [ -n "$(median w2.pg.c8)" ] && echo "; workload 2: $(fmt "$(median w2.pg.c8)")/s")" "${rt}x" ">= 0.8x without them" "$(yesno ge "$rt" 0.8)"
    split=""
    if [ -n "$(median w8.keys)" ]; then
        split=" Apart: with the keys only $(fmt "$(median w8.keys)")/s ($(ratio "$(median w8.keys)" "$kp")x), with the tenant quota only $(fmt "$(median w8.quota)")/s ($(ratio "$(median w8.quota)" "$kp")x)."
        row 8 "  the same, concurrency keys only" "placements/s" "$(fmt "$(median w8.keys)")" "without $(fmt "$kp")/s" "$(ratio "$(median w8.keys)" "$kp")x" "-" "-"
        row 8 "  the same, tenant quota only" "placements/s" "$(fmt "$(median w8.quota)")" "without $(fmt "$kp")/s" "$(ratio "$(median w8.quota)" "$kp")x" "-" "-"
    fi
    note "Workload 8: with concurrency keys ($KEYS keys, each limited) and a tenant quota in use, dispatch_next($BATCH) at 8 clients places $(fmt "$kk")/s, ${rt}x the $(fmt "$kp")/s of the same queue without them (target >= 0.8x: $(yesno ge "$rt" 0.8)); requests held back by a limit during the runs: $held (0: the limits were never reached); most live attempts of one key at the end of a run: $(fmt "$(median w8.peak_live_per_key)").$split"
fi
if wants 7; then
    ep=$(median w7.pg); ej=$(median w7.plain); rt=$(ratio "$ep" "$ej")
    viol=$(median w7.violations)
    row 7 "end to end: submit, dispatch_next, wait_commands, start, finish; $E2E_SCHEDULERS scheduler + $E2E_WORKERS worker clients" "tasks/s" "$(fmt "$ep")" "plain job queue (insert; claim FOR UPDATE SKIP LOCKED; mark done) $(fmt "$ej") jobs/s" "${rt}x plain queue" ">= 0.5x plain queue" "$(yesno ge "$rt" 0.5)"
    note "Workload 7: $(fmt "$ep") tasks/s through their whole life (submitted 100 per transaction while fewer than $(fmt "$E2E_BACKLOG") are open, placed by dispatch_next(100), each taken and started by its worker with wait_commands(start => true), then finished, each call its own transaction), ${rt}x the plain job queue's $(fmt "$ej") jobs/s (target >= 0.5x: $(yesno ge "$rt" 0.5)); failed transactions: pg_sched $(awk -F'\t' '$1 == "w7.pg.failed_transactions" { s += $2 } END { print s + 0 }' "$RES"), plain $(awk -F'\t' '$1 == "w7.plain.failed_transactions" { s += $2 } END { print s + 0 }' "$RES"); invariant violations afterwards: ${viol:-n/a}."
fi
if wants 3; then
    for n in $W3_SIZES; do
        pg=$(median "w3.plain.pg.$n"); sq=$(median "w3.plain.sql.$n")
        tgt="-"; mt="-"
        if [ "$n" = 10000 ]; then tgt="p50 <= 2 ms"; mt=$(yesno le "$pg" 2); fi
        row 3 "select_candidate, $(fmt "$n") nodes" "p50 ms" "$(fmt "$pg" 3)" "SQL $(fmt "$sq" 3) ms" "$(ratio "$pg" "$sq")x SQL" "$tgt" "$mt"
    done
    for n in $W3_SIZES; do
        co=$(median "w3.cold.pg.$n"); cn=$(median "w3.connect.$n")
        row 3 "select_candidate, $(fmt "$n") nodes, first call of a new connection (mirror loaded)" "mean ms incl. connection" "$(fmt "$co" 3)" "new connection + SELECT 1: $(fmt "$cn" 3) ms" "+$(fmt "$(calc "$co - $cn")" 3) ms" "-" "-"
    done
    for n in $W3_SIZES; do
        pg=$(median "w3.plain.pg.$n"); po=$(median "w3.others.pg.$n")
        rt=$(ratio "$(median "w3.others_ratio.$n")" 1)
        row 3 "select_candidate, $(fmt "$n") nodes + $(fmt $((10 * n))) of other capabilities" "p50 ms" "$(fmt "$po" 3)" "pg_sched without the others $(fmt "$pg" 3) ms; each round's ratio: $(ratios "w3.others_ratio.$n")" "${rt}x (median of the rounds')" "<= 1.2x" "$(yesno le "$rt" 1.2)"
    done
    note "Workload 3: p50 at 10,000 nodes $(fmt "$(median w3.plain.pg.10000)" 3) ms (target <= 2 ms: $(yesno le "$(median w3.plain.pg.10000)" 2)); with 10x nodes of other capabilities the p50 is $(for n in $W3_SIZES; do printf '%sx at %s, ' "$(ratio "$(median "w3.others_ratio.$n")" 1)" "$(fmt "$n")"; done | sed 's/, $//') (the median of the rounds' ratios, each round measuring the two one after the other; the ratio of the two medians: $(for n in $W3_SIZES; do printf '%sx, ' "$(ratio "$(median "w3.others.pg.$n")" "$(median "w3.plain.pg.$n")")"; done | sed 's/, $//'); target <= 1.2x)."
    note "Workload 3 growth: from $(fmt "${w3sizes[0]}") to $(fmt "${w3sizes[${#w3sizes[@]}-1]}") nodes the pg_sched p50 grows $(ratio "$(median "w3.plain.pg.${w3sizes[${#w3sizes[@]}-1]}")" "$(median "w3.plain.pg.${w3sizes[0]}")")x (SQL baseline: $(ratio "$(median "w3.plain.sql.${w3sizes[${#w3sizes[@]}-1]}")" "$(median "w3.plain.sql.${w3sizes[0]}")")x)."
fi
if wants 4; then
    for s in $W4_SIZES; do
        pg=$(median "w4.pg.us.$s"); cl=$(median "w4.claim.us.$s")
        tgt="-"; mt="-"; rt="-"
        row 4 "dispatch_next($BATCH), 1 client, $(fmt "$s") pending" "us per dispatch" "$(fmt "$pg" 1)" "plain claim $(fmt "$cl" 1) us per claim" "$( [ "$s" = "$large" ] && echo "$(ratio "$pg" "$(median "w4.pg.us.$small")")x the $(fmt "$small") figure above" || echo -)" "-" "-"
    done
    rp=$(ratio "$(median w4.pair_ratio)" 1)
    row 4 "dispatch_next($BATCH), 1 client, $(fmt "$large") pending, side by side with $(fmt "$small") (a second database, the same fleet, measured in turn)" "us per dispatch" "$(fmt "$(median w4.pair.us.large)" 1)" "$(fmt "$small") pending: $(fmt "$(median w4.pair.us.small)" 1) us; each round's ratio: $(ratios w4.pair_ratio)" "${rp}x (median of the rounds')" "<= 1.3x the $(fmt "$small") figure" "$(yesno le "$rp" 1.3)"
    note "Workload 4: measured side by side, a dispatch costs $(fmt "$(median w4.pair.us.small)" 1) us with $(fmt "$small") pending and $(fmt "$(median w4.pair.us.large)" 1) us with $(fmt "$large") (${rp}x, the median of the rounds' ratios; target <= 1.3x: $(yesno le "$rp" 1.3)); measured each at its size as the queue grew, $(fmt "$(median "w4.pg.us.$small")" 1) and $(fmt "$(median "w4.pg.us.$large")" 1) us ($(ratio "$(median "w4.pg.us.$large")" "$(median "w4.pg.us.$small")")x); the plain claim: $(ratio "$(median "w4.claim.us.$large")" "$(median "w4.claim.us.$small")")x. Loading $(fmt "$large") requests took $(fmt "$(median "w4.load_s.$large")" 1) s."
fi
if wants 5; then
    cf=$(median w5.conflicts)
    fails=$(awk -F'\t' '$1 == "w5.failed" { s += $2 } END { print s + 0 }' "$RES")
    aborted=$(awk -F'\t' '$1 == "w5.aborted" { s += $2 } END { print s + 0 }' "$RES")
    viol=$(awk -F'\t' '$1 == "w5.violations" { s += $2 } END { print s + 0 }' "$RES")
    met() { le "$cf" 0.2 && [ "$fails" = 0 ] && [ "$aborted" = 0 ] && [ "$viol" = 0 ]; }
    hp=$(median w5.held_passed)
    row 5 "16 dispatchers, hot fleet of 20 nodes, dispatch_next(1)" "conflicts per dispatch" "$(fmt "$cf" 3)" "refused (visible) $(fmt "$(median w5.refused)" 3); better candidates passed over unprobed (being reserved concurrently) $(fmt "$hp" 3); $(fmt "$(median w5.rate)")/s dispatched; deadlocks $fails; errors $aborted; invariant violations $viol" "conflicts + passed over $(fmt "$(calc "$cf + $hp")" 3)" "<= 0.2, no deadlock, no overcommit" "$(yesno met)$(le "$(calc "$cf + $hp")" 0.2 || echo "; counting the passed-over: **no**")"
    note "Workload 5: $(fmt "$cf" 3) candidates skipped or refused per successful dispatch (target <= 0.2: $(yesno le "$cf" 0.2)); of these, $(fmt "$(median w5.refused)" 3) are visible as UNSCHEDULABLE rows (\"held or taken by concurrent dispatches\": $(fmt "$(median w5.refused_requests)" 3) refused requests per dispatch), the rest were skipped on the way to a successful dispatch (all counted by pg_sched in shared memory, sched._dispatch_counters()). Not counted in that figure: $(fmt "$hp" 3) better candidates per dispatch that were passed over without a probe because other running dispatches were reserving on them (the shared table of reservations in flight, src/inflight.c); counting those as conflicts too gives $(fmt "$(calc "$cf + $hp")" 3). Deadlocks / failed transactions: $fails; client errors: $aborted; invariant violations after the runs (slots, capacity, counters = live attempts): $viol."
fi
if wants 6; then
    h1=$(median w6.hwm.100); h2=$(median w6.hwm.1000); a1=$(median w6.anon.100); a2=$(median w6.anon.1000)
    slope=$( [ -n "$a1" ] && [ -n "$a2" ] && calc "($a2 - $a1) * 1024 / 900" || true)
    row 6 "one dispatch_next(1000) vs dispatch_next(100)" "private memory growth kB (RssAnon)" "$(fmt "$a2") vs $(fmt "$a1")" "peak RSS incl. shared buffers touched: +$(fmt "$h2") vs +$(fmt "$h1") kB" "$(fmt "$slope") bytes per extra dispatch" "flat beyond a fixed overhead (<= 1 kB per dispatch)" "$(yesno le "$slope" 1024)"
    note "Workload 6: private memory (RssAnon peak, sampled every ms) grows $(fmt "$a2") kB during one dispatch_next(1000) and $(fmt "$a1") kB during one dispatch_next(100): $(fmt "$slope") bytes per extra dispatch (the rows of the result are part of it). Peak RSS (VmHWM after clear_refs) grows $(fmt "$h2") vs $(fmt "$h1") kB; that figure includes the pages of shared buffers and WAL buffers the call touches for the first time, which grow with the work done, not with leaked memory."
fi

# ---- plot ---------------------------------------------------------------------------------
PLOT_NOTE=""
if wants 3 || wants 4; then
    for n in $W3_SIZES; do
        printf '%s %s %s %s\n' "$n" "$(median "w3.plain.pg.$n" || true)" "$(median "w3.others.pg.$n" || true)" "$(median "w3.plain.sql.$n" || true)"
    done | awk '{ for (i = 2; i <= 4; i++) if ($i == "") $i = "NaN"; print }' >"$WORK/w3.dat"
    for s in $W4_SIZES; do
        printf '%s %s %s\n' "$s" "$(median "w4.pg.rate.$s" || true)" "$(median "w4.claim.rate.$s" || true)"
    done | awk '{ for (i = 2; i <= 3; i++) if ($i == "") $i = "NaN"; print }' >"$WORK/w4.dat"
    # empty columns would shift fields: rewrite with explicit NaN
    awk 'NF < 4 { while (NF < 4) $(NF + 1) = "NaN" } { print }' "$WORK/w3.dat" >"$WORK/w3.tmp" && mv "$WORK/w3.tmp" "$WORK/w3.dat"
    awk 'NF < 3 { while (NF < 3) $(NF + 1) = "NaN" } { print }' "$WORK/w4.dat" >"$WORK/w4.tmp" && mv "$WORK/w4.tmp" "$WORK/w4.dat"
    if command -v gnuplot >/dev/null 2>&1; then
        term=pngcairo
        terminals=$(gnuplot -e 'set terminal' 2>&1 || true)
        [[ $terminals == *pngcairo* ]] || term=png
        has3=0; has4=0
        awk '$2 != "NaN" { f = 1 } END { exit !f }' "$WORK/w3.dat" && has3=1
        awk '$2 != "NaN" { f = 1 } END { exit !f }' "$WORK/w4.dat" && has4=1
        if gnuplot -e "w3='$WORK/w3.dat'; w4='$WORK/w4.dat'; has3=$has3; has4=$has4; out='$OUT/scaling.png'; term='$term'" "$HERE/scaling.gp" 2>"$WORK/gnuplot.err"; then
            say "plot: $OUT/scaling.png"
        else
            cat "$WORK/gnuplot.err" >&2
            PLOT_NOTE="(gnuplot failed: no plot)"
        fi
    else
        PLOT_NOTE="(gnuplot not installed: no plot)"
        say "WARNING: gnuplot not found, no plot"
    fi
fi

# ---- RESULTS.md ---------------------------------------------------------------------------
{
    echo "# pg_sched benchmark results"
    echo
    echo "Written by \`bench/run.sh\` (\`make bench\`) on $(date -u '+%Y-%m-%d %H:%M UTC')$( [ "$QUICK" = 1 ] && echo ' — **QUICK run (BENCH_QUICK=1): small sizes, short runs; not the figures of issue 5**')."
    echo "Medians of $RUNS runs; every baseline was measured in the same run, on the same data."
    echo
    echo "## Machine and server"
    echo
    echo "- CPU: $NPROC x $CPU_MODEL; memory $MEM; load average at start $LOADAVG"
    echo "- $PG_VERSION"
    echo "- pg_sched $EXT_VERSION"
    echo "- settings: $(echo "$SETTINGS" | paste -sd ';' | sed 's/;/; /g')"
    echo "- bench/run.sh ran $(( ($(date +%s) - START + 30) / 60 )) minutes (without the build and install of \`make bench\`): $PHASES"
    echo "- pgbench: \`-n -M prepared\`, -T per run: workloads 1 and 9 ${T1} s, 2 and 8 ${T2} s, 3 ${T3} s (its new-connection rows ${T3C} s), 5 ${T5} s, 7 ${T7} s; workload 4: $W4_TX transactions per run; -j 2 with more than one client$( [ -n "${POOL_SIZE:-}" ] && echo "; workload 2's pooled runs \`-M extended\` through pgbouncer $("$PGBOUNCER_BIN" --version | head -1 | awk '{print $2}') (pool_mode = transaction, default_pool_size = $POOL_SIZE)")"
    echo
    echo "## Results (medians)"
    echo
    cat "$TABLE"
    echo
    echo "## Targets"
    echo
    cat "$NOTES"
    echo
    echo "## Plot"
    echo
    echo "![scaling](scaling.png) $PLOT_NOTE"
    echo
    echo "Left: select_candidate p50 latency against the number of nodes serving the requested"
    echo "capability, alone and with 10x nodes of other capabilities, and the SQL baseline."
    echo "Right: dispatch_next(100) placements per second (1 client) against the number of"
    echo "pending requests, and the plain queue claim."
    echo
    echo "## How it was measured"
    echo
    echo "- Data (bench/load.sql): generated by fixed arithmetic, no randomness. Fleet of workloads 1, 2, 4, 6, 8: $FLEET nodes with"
    echo "  zone/tier/rack labels, weights 50..150, about 9% of them not admissible (draining or disabled nodes, starting,"
    echo "  cordoned or silent workers, workers without version 1.0), capacities and slots that never run out during a run."
    echo "  Requests: capability build 1.0, priorities 0..2, arriving in id order 5 ms apart (the table is in arrival"
    echo "  order, as a real queue's is; a larger queue has the same head and a longer tail), a quarter prefer tier=fast, a tenth"
    echo "  require a zone, 100..400 mcpu and 256/512 MB reserved, 4 steps per execution. Large fleets and queues are"
    echo "  written with INSERT ... SELECT (sort_key = sched._queue_key(priority, queued_at))."
    echo "  Workload 9 grows the same fleet to $FLAT_FLEET nodes with the same generator. Workload 8: two tenants of $KEYS_QUEUE"
    echo "  such requests each, one with a concurrency key on every request ($KEYS keys, each limited to 1,000,000 live"
    echo "  attempts) and a tenant quota (1,000,000 live, 2,000,000 CPUs, 10^12 MB, 10^6 GPUs), the other with neither."
    echo "  Workload 7: $E2E_WORKERS nodes with one worker each, registered through upsert_node and register_worker; tasks"
    echo "  submitted during the run with sched.submit (4 steps per execution, a small payload)."
    echo "- Baselines (bench/baselines.sql, loaded into the benchmark database only): write floor = the six writes of a"
    echo "  dispatch (worker slot, node reservations, attempt, START command, timeline milestone, request DISPATCHED) on a"
    echo "  node chosen in advance, in one statement; floor + NOTIFY = the same and the NOTIFY a dispatch sends (PostgreSQL"
    echo "  serializes the commits of notifying transactions); plain queue claim = UPDATE of the next N requests selected FOR UPDATE SKIP LOCKED in"
    echo "  queue-index order; PL/pgSQL = the same admission rules as one WHERE clause, the same score and tie-break, the"
    echo "  same locks (advisory, request, execution FOR SHARE, worker+node FOR UPDATE SKIP LOCKED with re-check) and writes"
    echo "  and NOTIFY, and dispatch_next's queue order, written plainly; batched write floor = the six writes for the next"
    echo "  $BATCH requests taken as the plain claim takes them, in one statement, request k of the batch on node"
    echo "  ((client number x $BATCH + k) mod $FLEET) + 1: every client writes its own nodes; plain job queue (workload 7) ="
    echo "  a table of jobs (bench/e2e.sql), inserted $BATCH per transaction, claimed one at a time (the oldest ready,"
    echo "  FOR UPDATE SKIP LOCKED, marked running) and marked done in a second transaction."
    echo "- Workload 1 counts placements (new attempt rows) per second; runs of the implementations alternate, from a queue"
    echo "  reset for each number of clients; dispatch_attempt and the floor take requests by id from the middle of the"
    echo "  queue, dispatch_next(1) from its head, so none finds its request taken. Workload 9 measures the same at 1 client"
    echo "  after the fleet grew, right after workload 1's 1-client runs; cost per call = 1 / placements per second."
    echo "  Workloads 2 and 8 reset the database (everything pending, nothing reserved) before every run."
    echo "- The dispatch gate (src/dispatch_gate.c) is on, as by default: at most sched.dispatch_concurrency placement calls"
    echo "  (-1: the server's CPUs) run at once. With 8 and 32 clients, workloads 1 and 2 also run pg_sched with"
    echo "  sched.dispatch_concurrency = 0 (no gate) in the same rounds, for the figures side by side. Workload 2 also runs"
    echo "  the plain claim with 32 clients, beside its figure with 8."
    echo "- Workload 7: both systems in each run, one after the other, each for ${T7} s: $E2E_SCHEDULERS submitting clients and"
    echo "  $E2E_WORKERS worker clients at once (two pgbench processes); a submitting client submits (inserts) $BATCH while"
    echo "  fewer than $E2E_BACKLOG tasks are open (pending or live; jobs: ready), so the run stays in a steady state;"
    echo "  pg_sched's also runs dispatch_next($BATCH) every time. A worker client takes one command per wait_commands"
    echo "  (max 1, timeout 200 ms), a job worker one job per claim (2 ms sleep when none is ready)."
    echo "  Tasks per second = (tasks finished - 1) / (last finish - first finish) of the run. A warm-up run of"
    echo "  both comes first and is not counted: it builds the backlog from nothing, the counted runs start from the"
    echo "  open tasks the run before left."
    echo "- Workload 3: p50 of the per-transaction latencies pgbench logs (\`--log\`), 1 client, on the client side"
    echo "  (includes the round trip), the session's first call left out. One session runs all calls, so after its first call"
    echo "  the session's fleet mirror re-reads only changed nodes (none here); runs at 100,000 nodes last 3 s longer (the first"
    echo "  call loads the capability: up to 2 s among 1,000,000 others); the cold rows open a new connection for every call (\`pgbench -C\`),"
    echo "  whose first select_candidate loads the capability whole, and show the mean next to a new connection running SELECT 1."
    echo "  The fleet beside 10x nodes of another capability is a second database, loaded alongside the first; each round"
    echo "  measures the two one right after the other (alone, beside the others, then the SQL baseline); the ratio judged is"
    echo "  the median of the rounds' ratios."
    echo "- Workload 4: 1 client, runs of $W4_TX committed transactions ($((W4_TX * BATCH)) placements) from a reset queue, so the"
    echo "  queue keeps at least 70% of its length; cost per dispatch = run time / placements (commits included). Each size is"
    echo "  measured as the queue grows; the target's ratio is measured side by side: a second database with the same fleet"
    echo "  holds the smallest queue, each round runs it and the largest one right after the other, and the ratio judged is the"
    echo "  median of the rounds' ratios."
    echo "- Workload 5: conflicts (candidates skipped because another transaction held them, or refused on the re-check"
    echo "  under lock) are counted by pg_sched in shared memory (sched._dispatch_counters(), read before and after each"
    echo "  run); refused candidates are also read from the UNSCHEDULABLE rows; pgbench failed transactions count"
    echo "  deadlocks; bench.check_invariants() checks slots, capacity and counters after every run."
    echo "- Workload 6: fresh backend, warm-up dispatch_next(1), peak RSS reset through /proc/self/clear_refs, then one call;"
    echo "  RssAnon sampled every millisecond from /proc/<backend pid>/status."
    echo
    echo "## Every run"
    echo
    echo "| measurement | runs |"
    echo "| --- | --- |"
    awk -F'\t' '!seen[$1]++ { print $1 }' "$RES" | while read -r k; do
        echo "| $k | $(values "$k") |"
    done
} >"$OUT/RESULTS.md"

echo
echo "pg_sched benchmark — medians of $RUNS runs$( [ "$QUICK" = 1 ] && echo ' (QUICK sizes)')"
echo
cat "$TABLE"
echo
cat "$NOTES"
echo
say "time by workload: $PHASES"
say "done: $OUT/RESULTS.md$( [ -f "$OUT/scaling.png" ] && echo ", $OUT/scaling.png")"
