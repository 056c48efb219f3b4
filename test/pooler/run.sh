#!/usr/bin/env bash
# test/pooler/run.sh — pg_sched behind a connection pooler: pgbouncer (Debian's) in
# pool_mode = transaction with 2 server connections per (database, role) and 8 clients
# per role or more, so that transactions of many clients really share each server
# connection.  Against the running cluster of the environment (PGHOST, PGPORT, PGUSER, a
# superuser; pg_sched installed and preloaded: `test/harness.sh up` gives one), database
# sched_pooler (re-created; left for inspection).  Every client connects through
# pgbouncer as a login role granted one pg_sched role (sched_pooler_admin: sched_admin,
# sched_pooler_app: sched_scheduler, sched_pooler_worker: sched_worker), except the
# internal checks, which only the extension's owner may run: as postgres, through
# pgbouncer too.  The observers (pg_stat_activity, LISTEN) connect to the server.  The
# clients are test/pooler/pooler.py (psycopg 3).
#
#   a. mirror (SCHED_POOLER_SECONDS, default 25 s): 8 admin clients interleave fleet
#      changes (upsert_node with other capacity, labels, weight, status; drain_node;
#      cordon/uncordon_worker; register_worker with other versions and slots; heartbeat
#      with every runtime state), some undone by ROLLBACK TO SAVEPOINT and a third of the
#      transactions rolled back, with placement reads, dispatches, starts, finishes and
#      reaps; 3 owner clients run sched._fleet_mirror_check, fleet changes, and placement
#      reads with the fleet locked.  Every placement read is made with the fleet mirror
#      and again without it (sched.fleet_mirror off for the transaction), with the same
#      snapshot, and compared; also inside transactions that changed the fleet (their own
#      uncommitted changes) and after dispatches.  Checks: no difference, no
#      _fleet_mirror_check that finds one, no transaction that starts with the previous
#      transaction's SET LOCAL, no error but the expected refusals; the clients shared at
#      most 2 server backends (pg_stat_activity, SHOW POOLS, pg_backend_pid of every
#      transaction), and the mirror was in use and refreshed incrementally
#      (sched._fleet_mirror_stats of the backends).  Then, deterministically: after
#      RECONNECT, the first transaction on a new server connection changes a node's
#      weight, reads placement (the backend's first use of its mirror) and rolls back;
#      the next client's transaction on that server connection must read the committed
#      weight with the mirror too.
#   b. wait: a worker blocks in wait_commands (long timeout) through pgbouncer; 4 other
#      workers of its role keep calling through the same pool of 2 server connections
#      meanwhile; a dispatch through pgbouncer wakes it and it returns the START; a
#      cancel through pgbouncer (psycopg's conn.cancel) ends the next wait with 57014;
#      the connection works after it.
#   c. prepared: 8 clients with psycopg's prepare_threshold=None call the same
#      statements 40 times each: no error.  Then, as an observation printed (not a
#      check), what psycopg's default prepare_threshold does through pgbouncer 1.18.
#   d. settings: sched.lease_ttl and sched.heartbeat_ttl set with ALTER ROLE ... IN
#      DATABASE for the application's and the workers' roles reach every client through
#      pgbouncer once its server connections are new (RECONNECT): every dispatched lease
#      and every started lease has the role's length, and a worker whose heartbeat is
#      older than the default but not the role's heartbeat_ttl gets work; SET LOCAL
#      sched.notify_workers = on in one client's transaction holds there only: the next
#      transactions, of other clients on the same server connection (a pgbouncer
#      database name with pool_size = 1), see it off, and exactly one NOTIFY is sent.
#   Last: pgbouncer's log reports no problem (outside the observation of c).
#
# Installs python3-psycopg and pgbouncer (Debian) when missing.  pgbouncer runs on a
# free loopback port, as the OS user postgres when this runs as root, with its ini file
# in a work directory under /tmp (removed when every check passed), and is stopped on
# exit, also on failure.  One line per check; exits non-zero on the first failure;
# timeouts only catch hangs.  SCHED_POOLER_SEED fixes the clients' random choices.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source=test/lib/common.sh
source "$ROOT/test/lib/common.sh"      # fail, pass, check_eq, require_python_with_psycopg
# shellcheck source=test/lib/pgbouncer.sh
source "$ROOT/test/lib/pgbouncer.sh"
: "${PGHOST:?PGHOST must point at the test cluster}" "${PGPORT:?PGPORT must be set}"
export PGUSER=${PGUSER:-postgres}
unset PGDATABASE

DB=sched_pooler
DB_ONE=sched_pooler_one         # a second pgbouncer name for $DB, with one server connection
POOL_SIZE=2
CLIENTS=8
MIRROR_SECONDS=${SCHED_POOLER_SECONDS:-25}
SEED=${SCHED_POOLER_SEED:-$((RANDOM % 10000))}
ADMIN=sched_pooler_admin APP=sched_pooler_app WORKER=sched_pooler_worker
# check d: the roles' settings (seconds), and ALTER ROLE's spelling of them
APP_LEASE=420 APP_HEARTBEAT=780 WORKER_LEASE=660

require_python_with_psycopg

WORK=$(mktemp -d /tmp/sched_pooler.XXXXXX)
chmod 755 "$WORK"               # pgbouncer (as postgres) keeps its files in a directory below
START=$SECONDS
on_exit() {
    local rc=$?
    pgbouncer_stop
    if [ $rc -ne 0 ]; then
        echo "pooler: failed; logs in $WORK" >&2
        [ -n "$PGBOUNCER_LOG" ] && [ -e "$PGBOUNCER_LOG" ] && { echo "--- tail of $PGBOUNCER_LOG" >&2; tail -n 15 "$PGBOUNCER_LOG" >&2; }
    else
        rm -rf "$WORK"
    fi
    exit $rc
}
trap on_exit EXIT

q() { psql -X -qAt -v ON_ERROR_STOP=1 -d "$DB" -c "$1"; }

# pooler.py COMMAND ARGS...: its CHECK lines are checks, its INFO lines are printed
py() {
    local name=$1 rc=0 kind what got expected
    shift
    timeout 600 "$PY" "$HERE/pooler.py" "$name" --host "$PGHOST" --pg-port "$PGPORT" \
        --bouncer-port "$PGBOUNCER_PORT" --db "$DB" --db-one "$DB_ONE" --pool-size $POOL_SIZE \
        --seed "$SEED" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" || rc=$?
    while IFS=$'\t' read -r kind what got expected; do
        case $kind in
            CHECK) check_eq "$what" "$got" "$expected" ;;
            INFO) echo "  $what" ;;
            *) echo "  $kind${what:+ $what}" ;;
        esac
    done <"$WORK/$name.out"
    [ $rc -eq 0 ] || fail "pooler.py $name exited with status $rc: $(tail -n 20 "$WORK/$name.err")"
}

echo "pooler: python $PY (psycopg $("$PY" -c 'import psycopg; print(psycopg.__version__)')), seed $SEED, work directory $WORK"

# ---- the database, the roles, the fleet ----------------------------------------------------
psql -X -q -v ON_ERROR_STOP=1 -d postgres <<SQL
SET client_min_messages = warning;
DO \$\$
DECLARE r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['$ADMIN', '$APP', '$WORKER'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) THEN
            EXECUTE format('CREATE ROLE %I LOGIN', r);
        END IF;
    END LOOP;
END
\$\$;
DROP DATABASE IF EXISTS $DB WITH (FORCE);
CREATE DATABASE $DB;
SQL
# the admin's attempts end quickly once nobody renews them (re-registrations orphan some):
# its clients reap them during the run.  Set before any server connection of the role.
psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "ALTER ROLE $ADMIN IN DATABASE $DB SET sched.lease_ttl = '15s'"

psql -X -q -v ON_ERROR_STOP=1 -d "$DB" >/dev/null <<SQL
SET client_min_messages = warning;
CREATE EXTENSION pg_sched;
GRANT sched_admin TO $ADMIN;
GRANT sched_scheduler TO $APP;
GRANT sched_worker TO $WORKER;

-- the tests' helpers (owned by the superuser; no pg_sched privilege changes)
CREATE SCHEMA pooler_test;
GRANT USAGE ON SCHEMA pooler_test TO $ADMIN;

-- one placement read, as text (rows in their order, or by node for the reasons), with
-- the transaction's current settings.  STABLE: it reads with its caller's snapshot.
CREATE FUNCTION pooler_test.placement(fn text, cap text, ver text, req jsonb, pref jsonb,
        min_cpu int, min_mem bigint, min_gpus int, res_cpu int, res_mem bigint, res_gpus int,
        pin text, hb interval)
RETURNS text LANGUAGE plpgsql STABLE AS \$\$
BEGIN
    IF fn = 'select_candidate' THEN
        RETURN (SELECT coalesce(string_agg(format('%s/%s/%s', c.node_id, c.worker_id, c.score), ' '), '-')
                  FROM sched.select_candidate(cap, ver, req, pref, min_cpu, min_mem, min_gpus,
                                              res_cpu, res_mem, res_gpus, pin, hb) c);
    ELSIF fn = 'rank_candidates' THEN
        RETURN (SELECT coalesce(string_agg(format('%s:%s/%s/%s/%s/%s/%s', c.rank, c.node_id, c.worker_id, c.score,
                                                  c.preferred_matches, c.weight, c.running_attempts),
                                           ' ' ORDER BY c.rank), '-')
                  FROM sched.rank_candidates(cap, ver, req, pref, min_cpu, min_mem, min_gpus,
                                             res_cpu, res_mem, res_gpus, pin, hb) c);
    ELSE
        RETURN (SELECT coalesce(string_agg(format('%s/%s/%s/%s/%s', c.node_id, c.worker_id, c.eligible,
                                                  c.reasons, c.score),
                                           ' ' ORDER BY c.node_id, c.worker_id), '-')
                  FROM sched.qualification_reasons(cap, ver, req, pref, min_cpu, min_mem, min_gpus,
                                                   res_cpu, res_mem, res_gpus, pin, hb) c);
    END IF;
END
\$\$;

-- the read with the fleet mirror, then with sched.fleet_mirror off for the rest of the
-- transaction (set_config(..., true) is SET LOCAL), then on again: one statement, so
-- both read with the same snapshot however many clients commit meanwhile
CREATE FUNCTION pooler_test.compare(fn text, cap text, ver text, req jsonb, pref jsonb,
        min_cpu int, min_mem bigint, min_gpus int, res_cpu int, res_mem bigint, res_gpus int,
        pin text, hb interval, OUT mirrored text, OUT direct text)
LANGUAGE plpgsql STABLE AS \$\$
BEGIN
    mirrored := pooler_test.placement(fn, cap, ver, req, pref, min_cpu, min_mem, min_gpus,
                                      res_cpu, res_mem, res_gpus, pin, hb);
    PERFORM set_config('sched.fleet_mirror', 'off', true);
    direct := pooler_test.placement(fn, cap, ver, req, pref, min_cpu, min_mem, min_gpus,
                                    res_cpu, res_mem, res_gpus, pin, hb);
    PERFORM set_config('sched.fleet_mirror', 'on', true);
END
\$\$;

-- the owner's internal checks, for the admin's clients: they report on the backend that
-- runs them, whoever calls
CREATE FUNCTION pooler_test.mirror_check(cap text) RETURNS int
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS \$\$ SELECT sched._fleet_mirror_check(cap) \$\$;
CREATE FUNCTION pooler_test.mirror_stats(OUT pid int, OUT usable boolean, OUT refreshes bigint,
        OUT full_loads bigint, OUT rows_reread bigint, OUT bypassed bigint, OUT losses bigint,
        OUT pending int)
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS \$\$ SELECT pg_backend_pid(), s.usable, s.refreshes, s.full_loads, s.rows_reread, s.bypassed,
               s.losses, s.pending FROM sched._fleet_mirror_stats() s \$\$;
REVOKE ALL ON FUNCTION pooler_test.mirror_check(text), pooler_test.mirror_stats() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pooler_test.mirror_check(text), pooler_test.mirror_stats() TO $ADMIN;

-- a: 12 nodes (GPUs on every third), a build worker on each, train on the GPU nodes,
-- render on the even ones; registered by the admin's role
SELECT count(sched.upsert_node(format('node-%s', lpad(i::text, 2, '0')),
           labels => jsonb_build_object('zone', 'z' || (i % 3), 'tier', CASE WHEN i % 4 = 0 THEN 'fast' ELSE 'std' END),
           cpu_millis => 2000 + (i % 3) * 2000, memory_mb => 4096 * (1 + i % 2),
           gpus => CASE WHEN i % 3 = 0 THEN 1 ELSE 0 END))
  FROM generate_series(1, 12) i;
SET ROLE $ADMIN;
SELECT count(sched.register_worker(format('node-%s', lpad(i::text, 2, '0')), 'build',
           CASE WHEN i % 5 = 0 THEN ARRAY['1.0'] ELSE ARRAY['1.0', '2.0'] END, 2 + i % 2))
  FROM generate_series(1, 12) i;
SELECT count(sched.register_worker(format('node-%s', lpad(i::text, 2, '0')), 'train', ARRAY['1.0'], 1))
  FROM generate_series(3, 12, 3) i;
SELECT count(sched.register_worker(format('node-%s', lpad(i::text, 2, '0')), 'render', ARRAY['2.0'], 2))
  FROM generate_series(2, 12, 2) i;
RESET ROLE;

-- b: the waiting worker's node and the 4 busy workers'; c: one node per client
SELECT count(sched.upsert_node('wnode-' || i, cpu_millis => 1000)) FROM generate_series(1, 5) i;
SELECT count(sched.upsert_node('pnode-' || i, cpu_millis => 1000)) FROM generate_series(0, $CLIENTS - 1) i;
-- d: the lease worker last heartbeat 5 minutes ago (expired for the default 60 s, not
-- for the application's role's heartbeat_ttl), the notify worker; of the workers' role
SELECT count(sched.upsert_node(n, cpu_millis => 1000)) FROM unnest(ARRAY['lnode', 'nnode']) n;
SET ROLE $WORKER;
SELECT count(sched.register_worker('lnode', 'lease', ARRAY['1.0'], 64, at => now() - interval '5 minutes'));
SELECT count(sched.register_worker('nnode', 'notify', ARRAY['1.0'], 64));
RESET ROLE;
SQL

# ---- pgbouncer ------------------------------------------------------------------------------
PGBOUNCER_USERS="postgres $ADMIN $APP $WORKER" \
PGBOUNCER_DATABASES="$DB_ONE = host=$PGHOST port=$PGPORT dbname=$DB pool_size=1" \
    pgbouncer_start "$WORK/pgbouncer" "$PGHOST" "$PGPORT" $POOL_SIZE
LOG_FROM=$(pgbouncer_log_mark)

# ---- a. the fleet mirror under pooling --------------------------------------------------------
echo "=== a. fleet mirror: $CLIENTS + 3 clients on $POOL_SIZE server connections per role, ${MIRROR_SECONDS} s"
py mirror --seconds "$MIRROR_SECONDS" --admin-clients $CLIENTS --owner-clients 3
check_eq "a: the fleet's invariants hold after the run (node and worker counters = live attempts)" \
    "$(q "SELECT (SELECT count(*) FROM sched.node n WHERE n.live_attempts <> (SELECT count(*) FROM sched.attempt a
                    WHERE a.node_id = n.node_id AND a.status IN ('DISPATCHED', 'RUNNING')))
              + (SELECT count(*) FROM sched.worker w WHERE w.live_attempts <> (SELECT count(*) FROM sched.attempt a
                    WHERE a.worker_id = w.worker_id AND a.status IN ('DISPATCHED', 'RUNNING')))")" 0
echo "  pgbouncer SHOW STATS for $DB: $(pgbouncer_stat $DB total_xact_count) transactions, $(pgbouncer_stat $DB total_query_count) queries"
py mirror-fresh

# ---- b. wait_commands ---------------------------------------------------------------------------
echo "=== b. wait_commands through pgbouncer"
py wait

# ---- c. prepared statements ----------------------------------------------------------------------
echo "=== c. psycopg through pgbouncer"
py prepared --clients $CLIENTS --iterations 40
DEMO_FROM=$(pgbouncer_log_mark)
py prepared-demo --clients $CLIENTS --iterations 20
DEMO_TO=$(pgbouncer_log_mark)
echo "  pgbouncer's log meanwhile: $(pgbouncer_log_problems "$DEMO_FROM" "$DEMO_TO" | grep -c . || true) lines of problems"
# the server connections still hold the demo's prepared statements: new ones for the rest
pgbouncer_admin "RECONNECT $DB" >/dev/null
pgbouncer_admin "WAIT_CLOSE $DB" >/dev/null

# ---- d. settings per role, SET LOCAL only ------------------------------------------------------------
echo "=== d. settings through pgbouncer"
check_eq "d: before ALTER ROLE, the roles' sessions through pgbouncer see the default lease_ttl" \
    "$(PGPORT=$PGBOUNCER_PORT PGUSER=$APP psql -X -qAt -d $DB -c "SHOW sched.lease_ttl") $(PGPORT=$PGBOUNCER_PORT PGUSER=$WORKER psql -X -qAt -d $DB -c "SHOW sched.lease_ttl")" \
    "$(q "SELECT current_setting('sched.lease_ttl') || ' ' || current_setting('sched.lease_ttl')")"
psql -X -q -v ON_ERROR_STOP=1 -d postgres \
     -c "ALTER ROLE $APP IN DATABASE $DB SET sched.lease_ttl = '${APP_LEASE}s'" \
     -c "ALTER ROLE $APP IN DATABASE $DB SET sched.heartbeat_ttl = '${APP_HEARTBEAT}s'" \
     -c "ALTER ROLE $WORKER IN DATABASE $DB SET sched.lease_ttl = '${WORKER_LEASE}s'"
py settings --clients $CLIENTS --rounds 3 --app-lease $APP_LEASE --app-heartbeat $APP_HEARTBEAT --worker-lease $WORKER_LEASE

# ---- pgbouncer's log ---------------------------------------------------------------------------------
problems=$(pgbouncer_log_problems "$LOG_FROM" "$DEMO_FROM"; pgbouncer_log_problems "$DEMO_TO")
[ -z "$problems" ] || echo "$problems" | head -5 >&2
check_eq "pgbouncer's log reports no problem (outside the prepared statements observation)" \
    "$(printf '%s' "$problems" | grep -c . || true)" 0

echo "pooler: $CHECKS checks passed in $((SECONDS - START)) s"
