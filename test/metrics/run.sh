#!/usr/bin/env bash
# test/metrics/run.sh — the Prometheus metrics of monitoring/postgres_exporter/queries.yaml,
# served by the real postgres_exporter (Debian's prometheus-postgres-exporter), against
# the running cluster of the environment (PGHOST, PGPORT, PGUSER; `test/harness.sh up`
# gives one, with pg_sched installed and preloaded).
#
# In database sched_metrics (re-created; left for inspection), with a login role per
# job (sched_admin, sched_scheduler, sched_worker, sched_observer): a fleet of 7 nodes
# (ACTIVE, DRAINING, DISABLED; workers READY, STARTING, cordoned, one whose heartbeat
# expired), two tenants and four capabilities, requests that run, that wait for capacity,
# that fit nowhere, one claimed, one not ready for an hour, a cancelled one; dispatches
# with every outcome but EXECUTION_CLOSED (UNSCHEDULABLE for each of its three reasons:
# contention from a second session holding the only free slot); attempts DISPATCHED,
# RUNNING, SUCCEEDED, FAILED, CANCELLED and LOST (a lease that ran out, reaped), and a
# live one whose lease ran out and is not reaped yet.
#
# Then the exporter runs on a free loopback port as a login role granted sched_observer
# only, with the default metrics disabled, and /metrics is scraped.  Checks: the role
# the exporter connected as is not a superuser and is a member of sched_observer and of
# no other pg_sched role; the queries file loaded, the exporter is up and reports no
# scrape error and logs none; the metric families named pg_sched_* are exactly those
# listed below, each with HELP text, its type and its label names; every series (label
# values) and value of each family equals what SQL computes from the tables and views
# here (written independently of queries.yaml: other tables or views, other joins),
# read just before and just after the scrape (ages must lie between the two readings;
# the rest must be equal in both, or the reading is retried); sched.dispatch_stats moved
# by exactly the outcomes the fixture's dispatch calls returned.  Self-tests: the
# comparison reports a wrong value, a missing and an extra series in every family; a
# second exporter whose queries file has one query that sched_observer may not run
# reports last_scrape_error 1 and logs the permission error.  No check depends on
# elapsed time; timeouts (SCHED_METRICS_TIMEOUT, 60 s) only catch hangs.
# SCHED_METRICS_QUERIES=FILE checks another queries file (a changed copy, to see a check
# fail).
#
# Installs prometheus-postgres-exporter (Debian) when missing.  Logs are in a directory
# under /tmp, printed at the start and removed when every check passed.  Every process
# started here is stopped at the end, also on failure.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
QUERIES=${SCHED_METRICS_QUERIES:-$ROOT/monitoring/postgres_exporter/queries.yaml}
EXPORTER=/usr/bin/prometheus-postgres-exporter
TIMEOUT=${SCHED_METRICS_TIMEOUT:-60}
DB=sched_metrics
: "${PGHOST:?PGHOST must point at the test cluster}" "${PGPORT:?PGPORT must be set}"
export PGUSER=${PGUSER:-postgres}
SUPERUSER=$PGUSER
# shellcheck source=test/lib/common.sh
source "$ROOT/test/lib/common.sh"      # fail, pass, check_eq, stop_pid, free_port, ...

# ---- the exporter, python ------------------------------------------------------------------
apt_install_missing "$EXPORTER" prometheus-postgres-exporter || exit 1
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3) || fail "no python3"
[ -r "$QUERIES" ] || fail "no $QUERIES"

WORK=$(mktemp -d /tmp/pg_sched_metrics.XXXXXX)
chmod 755 "$WORK"
echo "$("$EXPORTER" --version 2>&1 | head -n 1); logs in $WORK"
# the exporter runs as `postgres` when this runs as root (the checkout may be unreadable
# to it): it reads its queries file from here
cp "$QUERIES" "$WORK/queries.yaml"
chmod 644 "$WORK/queries.yaml"

# ---- processes -------------------------------------------------------------------------------
PIDS=()
on_exit() {
    local rc=$? pid f
    exec 3>&- 2>/dev/null || true
    for pid in "${PIDS[@]}"; do
        kill -0 "$pid" 2>/dev/null && { stop_pid "$pid" || true; }
    done
    if [ $rc -ne 0 ]; then
        for f in "$WORK"/*.log; do
            [ -e "$f" ] || continue
            echo "--- tail of $f" >&2
            tail -n 20 "$f" >&2
        done
    else
        rm -rf "$WORK"
    fi
    exit $rc
}
trap on_exit EXIT

# start_exporter NAME QUERIES_FILE: starts the exporter as the observer's login role,
# sets EXPORTER_PORT, and returns once it answers HTTP
start_exporter() {
    local name=$1 file=$2 i
    EXPORTER_PORT=$(free_port)
    local cmd=(env DATA_SOURCE_NAME="host=$PGHOST port=$PGPORT user=sched_metrics_exporter dbname=$DB sslmode=disable application_name=pg_sched_metrics_$name"
               "$EXPORTER" --web.listen-address="127.0.0.1:$EXPORTER_PORT"
               --extend.query-path="$file"
               --disable-default-metrics --disable-settings-metrics
               --no-collector.database --no-collector.bgwriter --log.level=info)
    if [ "$(id -u)" -eq 0 ]; then
        setpriv --reuid=postgres --regid=postgres --init-groups "${cmd[@]}" >"$WORK/$name.log" 2>&1 &
    else
        "${cmd[@]}" >"$WORK/$name.log" 2>&1 &
    fi
    PIDS+=($!)
    for i in $(seq 1 $((TIMEOUT * 10))); do
        kill -0 "${PIDS[-1]}" 2>/dev/null || fail "exporter $name exited: $(tail -n 5 "$WORK/$name.log")"
        if "$PY" -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$EXPORTER_PORT/', timeout=5)" 2>/dev/null; then
            return 0
        fi
        sleep 0.1
    done
    fail "exporter $name did not answer on 127.0.0.1:$EXPORTER_PORT within ${TIMEOUT}s"
}

# as_role ROLE ARGS...: psql in the test database as a login role
as_role() {
    local role=$1; shift
    PGUSER=$role psql -X -qAt -v ON_ERROR_STOP=1 -d "$DB" "$@"
}
q() { psql -X -qAt -v ON_ERROR_STOP=1 -d "$DB" -c "$1"; }

# ---- roles, database, settings -----------------------------------------------------------------
# a login role per job, each granted one pg_sched role and nothing else (cluster-wide:
# made once, kept for the next run)
psql -X -q -v ON_ERROR_STOP=1 -d postgres <<'SQL'
DO $$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['sched_metrics_admin', 'sched_metrics_app', 'sched_metrics_worker',
                             'sched_metrics_exporter'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) THEN
            EXECUTE format('CREATE ROLE %I LOGIN', r);
        END IF;
    END LOOP;
END
$$;
-- as monitoring/postgres_exporter/README.md sets up the exporter's role
ALTER ROLE sched_metrics_exporter SET search_path = pg_catalog;
ALTER ROLE sched_metrics_exporter SET statement_timeout = '10s';
SQL
psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" \
     -c "CREATE DATABASE $DB"
# a heartbeat TTL of an hour: whether a heartbeat is fresh does not change while this
# runs (the stale worker below is two hours old); starvation after 3 s: requests starve
# while this runs, so the starving counts are not all 0
psql -X -q -v ON_ERROR_STOP=1 -d postgres \
     -c "ALTER DATABASE $DB SET sched.heartbeat_ttl = '1h'" \
     -c "ALTER DATABASE $DB SET sched.starvation_after = '3s'"
q "SET client_min_messages = warning; CREATE EXTENSION pg_sched;
   GRANT sched_admin TO sched_metrics_admin; GRANT sched_scheduler TO sched_metrics_app;
   GRANT sched_worker TO sched_metrics_worker; GRANT sched_observer TO sched_metrics_exporter"

# sched.dispatch_stats counts for the whole cluster since it started: what it holds now
q "SELECT count(*) FROM sched.dispatch_stats" | grep -qx '[1-9][0-9]*' ||
    fail "sched.dispatch_stats has no rows: is pg_sched in shared_preload_libraries?"
q "SELECT json_object_agg(outcome || '/' || coalesce(reason, ''), json_build_array(calls, conflicts, held_passed))
     FROM sched.dispatch_stats" >"$WORK/dispatch_before.json"

# ---- the fleet ---------------------------------------------------------------------------------
W_A_RENDER=aaaaaaaa-0000-4000-8000-000000000001
W_A_ENCODE=aaaaaaaa-0000-4000-8000-000000000002
W_B_RENDER=bbbbbbbb-0000-4000-8000-000000000001
W_B_ENCODE=bbbbbbbb-0000-4000-8000-000000000002
W_C_RENDER=cccccccc-0000-4000-8000-000000000001
W_E_RENDER=eeeeeeee-0000-4000-8000-000000000001
W_E_ENCODE=eeeeeeee-0000-4000-8000-000000000002
W_F_BATCH=ffffffff-0000-4000-8000-000000000001
W_G_TRAIN=99999999-0000-4000-8000-000000000001

as_role sched_metrics_admin >/dev/null <<'SQL'
SELECT sched.upsert_node('node-a', labels => '{"zone": "z1"}', cpu_millis => 4000, memory_mb => 8192);
SELECT sched.upsert_node('node-b', cpu_millis => 8000, memory_mb => 16384);
SELECT sched.upsert_node('node-c', cpu_millis => 8000, memory_mb => 16384);
SELECT sched.upsert_node('node-d', cpu_millis => 2000, memory_mb => 4096, management_status => 'DISABLED');
SELECT sched.upsert_node('node-e', cpu_millis => 4000, memory_mb => 8192);
SELECT sched.upsert_node('node-f', cpu_millis => 2000, memory_mb => 2048);
SELECT sched.upsert_node('gpu-1', cpu_millis => 16000, memory_mb => 65536, gpus => 2);
SELECT sched.set_tenant_weight('acme', 2);
SQL
as_role sched_metrics_worker >/dev/null <<SQL
SELECT sched.register_worker('node-a', 'render', ARRAY['1.0'], 2, '$W_A_RENDER');
SELECT sched.register_worker('node-a', 'encode', ARRAY['1'], 1, '$W_A_ENCODE');
SELECT sched.register_worker('node-b', 'render', ARRAY['1.0', '2.0'], 1, '$W_B_RENDER');
SELECT sched.register_worker('node-b', 'encode', ARRAY['1'], 2, '$W_B_ENCODE');
SELECT sched.heartbeat('$W_B_ENCODE', 1, runtime_state => 'STARTING');
SELECT sched.register_worker('node-c', 'render', ARRAY['1.0'], 2, '$W_C_RENDER');
SELECT sched.register_worker('node-e', 'render', ARRAY['1.0'], 3, '$W_E_RENDER', now() - interval '2 hours');
SELECT sched.register_worker('node-e', 'encode', ARRAY['1'], 1, '$W_E_ENCODE');
SELECT sched.register_worker('node-f', 'batch', ARRAY['1'], 2, '$W_F_BATCH');
SELECT sched.register_worker('gpu-1', 'train', ARRAY['1'], 2, '$W_G_TRAIN');
SQL
as_role sched_metrics_admin >/dev/null <<SQL
SELECT sched.drain_node('node-c');
SELECT sched.cordon_worker('$W_E_ENCODE');
SQL
check_eq "fleet: nodes by status" \
    "$(q "SELECT string_agg(management_status || '=' || n, ' ' ORDER BY management_status)
            FROM (SELECT management_status, count(*) n FROM sched.node GROUP BY 1) x")" \
    "ACTIVE=5 DISABLED=1 DRAINING=1"

# ---- dispatching: every call's result rows go to the ledger, with the reason of each
# UNSCHEDULABLE as the system explains it right after (sched.pending's blocked, or the
# detail's note of concurrent dispatches)
LEDGER=$WORK/ledger.txt
: >"$LEDGER"
classify_sql="
SELECT d.outcome,
       CASE WHEN d.outcome <> 'UNSCHEDULABLE' THEN ''
            WHEN d.detail LIKE '%held or taken by concurrent dispatches' THEN 'contention'
            ELSE coalesce((SELECT CASE p.blocked WHEN 'transient' THEN 'waits_for_capacity'
                                                 WHEN 'static' THEN 'fits_nowhere' END
                             FROM sched.pending p WHERE p.request_id = d.request_id), 'unknown') END,
       CASE WHEN d.detail LIKE '%held or taken by concurrent dispatches'
            THEN substring(d.detail FROM '; ([0-9]+) candidates? held or taken') ELSE '0' END
  FROM d"
dispatch() {     # dispatch CALL: as the app, appends its result rows to the ledger
    as_role sched_metrics_app -F ' ' >>"$LEDGER" <<SQL
CREATE TEMP TABLE d AS SELECT * FROM $1;
$classify_sql;
SQL
}
rid() { q "$1"; }   # a request id, read as the superuser

# a lease that ran out: dispatched "10 minutes ago" (lease_ttl 5 min), reaped: LOST
as_role sched_metrics_app >/dev/null -c "SELECT sched.submit('e0000000-0000-4000-8000-000000000001', gen_random_uuid(), 'encode', '1', tenant => 'acme')"
LOST_REQ=$(rid "SELECT max(request_id) FROM sched.request")
dispatch "sched.dispatch_attempt($LOST_REQ, at => now() - interval '10 minutes')"
check_eq "reap_expired marks the attempt whose lease ran out LOST" \
    "$(as_role sched_metrics_app -c "SELECT sched.reap_expired()")" "1"

as_role sched_metrics_app >/dev/null <<'SQL'
-- render 1.0: 4 for acme, 2 for globex, for 3 ready slots (node-a 2, node-b 1)
SELECT sched.submit(gen_random_uuid(), gen_random_uuid(), 'render', '1.0', tenant => t,
                    reserve_cpu_millis => 1000, reserve_memory_mb => 1024)
  FROM unnest(ARRAY['acme', 'acme', 'acme', 'acme', 'globex', 'globex']) t;
-- render 3.0: no worker serves it
SELECT sched.submit(gen_random_uuid(), gen_random_uuid(), 'render', '3.0', tenant => 'globex');
-- train: both GPUs of gpu-1 each; and one not ready for an hour
SELECT sched.submit(gen_random_uuid(), gen_random_uuid(), 'train', '1', tenant => 'acme',
                    reserve_gpus => 2, reserve_cpu_millis => 4000)
  FROM generate_series(1, 2);
SELECT sched.submit(gen_random_uuid(), gen_random_uuid(), 'train', '1', tenant => 'globex',
                    available_at => now() + interval '1 hour');
-- encode: more CPU than any node has (first in the queue: the claim below takes it), two that fit
SELECT sched.submit(gen_random_uuid(), gen_random_uuid(), 'encode', '1', tenant => 'globex',
                    min_cpu_millis => 100000);
SELECT sched.submit(gen_random_uuid(), gen_random_uuid(), 'encode', '1', tenant => 'globex')
  FROM generate_series(1, 2);
-- batch: node-f's two slots
SELECT sched.submit(gen_random_uuid(), gen_random_uuid(), 'batch', '1', tenant => t)
  FROM unnest(ARRAY['acme', 'globex', 'globex']) t;
-- an execution cancelled while queued
SELECT sched.submit('e0000000-0000-4000-8000-000000000002', gen_random_uuid(), 'render', '1.0', tenant => 'globex');
SELECT sched.cancel_execution('e0000000-0000-4000-8000-000000000002');
SQL
CANCELLED_REQ=$(rid "SELECT request_id FROM sched.request WHERE execution_id = 'e0000000-0000-4000-8000-000000000002'")
BATCH=($(rid "SELECT request_id FROM sched.request WHERE capability = 'batch' ORDER BY request_id"))

# a live attempt whose lease ran out, not reaped (nothing reaps after this)
dispatch "sched.dispatch_attempt(${BATCH[0]}, at => now() - interval '10 minutes')"

CLAIMED_REQ=$(as_role sched_metrics_app -c "SELECT request_id FROM sched.claim_requests(1, '30 min', capability => 'encode', tenant => 'globex')")
[ -n "$CLAIMED_REQ" ] || fail "claim_requests claimed nothing"
dispatch "sched.dispatch_next(100, capability => 'render')"
dispatch "sched.dispatch_next(100, capability => 'train')"
dispatch "sched.dispatch_next(100, capability => 'encode')"
WAITING_REQ=$(rid "SELECT min(request_id) FROM sched.request WHERE state = 'PENDING' AND capability = 'render' AND capability_version = '1.0'")
PLACED_REQ=$(rid "SELECT min(request_id) FROM sched.request WHERE state = 'DISPATCHED' AND capability = 'render'")
dispatch "sched.dispatch_attempt($WAITING_REQ)"
dispatch "sched.dispatch_attempt($PLACED_REQ)"
dispatch "sched.dispatch_attempt($CLAIMED_REQ)"
dispatch "sched.dispatch_attempt($CANCELLED_REQ)"

# the workers: node-a's render worker starts one of its two attempts; node-b's succeeds;
# gpu-1's fails (its retry waits for the GPUs); then the execution of node-a's other
# attempt is cancelled, and the worker ends the attempt at the CANCEL command
as_role sched_metrics_worker >/dev/null <<SQL
SELECT sched.start_attempt(c.attempt_id, c.lease_version)
  FROM (SELECT * FROM sched.poll_commands('$W_A_RENDER', 1) ORDER BY command_id) c LIMIT 1;
DO \$\$
DECLARE
    c record;
BEGIN
    FOR c IN SELECT * FROM sched.poll_commands('$W_B_RENDER', 1) LOOP
        PERFORM sched.start_attempt(c.attempt_id, c.lease_version);
        PERFORM sched.finish_attempt(c.attempt_id, c.lease_version, 'SUCCEEDED');
    END LOOP;
    FOR c IN SELECT * FROM sched.poll_commands('$W_G_TRAIN', 1) LOOP
        PERFORM sched.start_attempt(c.attempt_id, c.lease_version);
        PERFORM sched.finish_attempt(c.attempt_id, c.lease_version, 'FAILED', '{"exit_code": 1}');
    END LOOP;
END
\$\$;
SQL
as_role sched_metrics_app >/dev/null -c "SELECT sched.cancel_execution(execution_id)
    FROM sched.attempt_overview WHERE worker_id = '$W_A_RENDER' AND status = 'DISPATCHED'"
as_role sched_metrics_worker >/dev/null -c "SELECT sched.finish_attempt(attempt_id, lease_version, 'CANCELLED')
    FROM sched.poll_commands('$W_A_RENDER', 1) WHERE kind = 'CANCEL'"
dispatch "sched.dispatch_next(100, capability => 'render')"
dispatch "sched.dispatch_next(100, capability => 'train')"
as_role sched_metrics_worker >/dev/null -c "SELECT sched.start_attempt(attempt_id, lease_version) FROM sched.poll_commands('$W_G_TRAIN', 1)"

# contention: a second session holds node-f's last free slot in an open transaction
# while dispatch_next tries the other batch request there; then it rolls back (its
# DISPATCHED is counted all the same: counted when the call returns)
mkfifo "$WORK/holder.fifo"
PGUSER=sched_metrics_app PGAPPNAME=pg_sched_metrics_holder psql -X -qAt -F ' ' -v ON_ERROR_STOP=1 -d "$DB" \
    <"$WORK/holder.fifo" >"$WORK/holder.out" 2>"$WORK/holder.log" &
HOLDER=$!
PIDS+=($HOLDER)
exec 3>"$WORK/holder.fifo"
printf '%s\n' "BEGIN;" "CREATE TEMP TABLE d AS SELECT * FROM sched.dispatch_attempt(${BATCH[1]});" \
    "$classify_sql;" >&3
for i in $(seq 1 $((TIMEOUT * 10))); do
    [ "$(q "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pg_sched_metrics_holder'
              AND state = 'idle in transaction'")" = 1 ] && [ -s "$WORK/holder.out" ] && break
    kill -0 $HOLDER 2>/dev/null || fail "the holding session ended: $(cat "$WORK/holder.log")"
    [ "$i" -lt $((TIMEOUT * 10)) ] || fail "the holding session did not dispatch within ${TIMEOUT}s"
    sleep 0.1
done
dispatch "sched.dispatch_next(10, capability => 'batch')"
echo "ROLLBACK;" >&3
exec 3>&-
wait $HOLDER || fail "the holding session failed: $(cat "$WORK/holder.log")"
cat "$WORK/holder.out" >>"$LEDGER"

pass "fixture: $(wc -l <"$LEDGER") dispatch results: $(cut -d' ' -f1,2 "$LEDGER" | sort | uniq -c | awk '{printf "%s%s %s%s", sep, $1, $2, ($3 == "" ? "" : "/" $3); sep=", "}')"
grep -q 'unknown' "$LEDGER" && fail "an UNSCHEDULABLE result the pending view does not explain: $(grep unknown "$LEDGER")"
for k in "DISPATCHED " "EXISTING " "CANCELLED " "NOT_CLAIMED " "UNSCHEDULABLE waits_for_capacity" \
         "UNSCHEDULABLE fits_nowhere" "UNSCHEDULABLE contention"; do
    grep -q "^$k" "$LEDGER" || fail "the fixture produced no $k result"
done
pass "fixture: every outcome but EXECUTION_CLOSED, and UNSCHEDULABLE for each reason"
check_eq "fixture: attempts by status" \
    "$(q "SELECT string_agg(DISTINCT status, ' ' ORDER BY status) FROM sched.attempt")" \
    "CANCELLED DISPATCHED FAILED LOST RUNNING SUCCEEDED"
check_eq "fixture: a live attempt whose lease ran out" \
    "$(q "SELECT count(*) FROM sched.attempt_overview WHERE lease_state = 'expired'")" "1"
check_eq "fixture: open requests by what holds them back" \
    "$(q "SELECT string_agg(DISTINCT blocked, ' ' ORDER BY blocked) FROM sched.pending")" "none static transient"

# ---- the exporter --------------------------------------------------------------------------------
start_exporter main "$WORK/queries.yaml"
MAIN_PORT=$EXPORTER_PORT
pass "exporter answers on 127.0.0.1:$MAIN_PORT"

# the checks of the scrape (python, standard library only)
"$PY" - "$MAIN_PORT" "$WORK" "$CHECKS" "$DB" "$SUPERUSER" <<'PY' || exit 1
import json, math, os, re, subprocess, sys, time, urllib.request

port, work, checks, db, superuser = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]

def ok(what):
    global checks
    checks += 1
    print(f"ok {checks} - {what}", flush=True)

def fail(what):
    print(f"FAIL: {what}", file=sys.stderr, flush=True)
    with open(os.path.join(work, "checks"), "w") as f:
        f.write(str(checks))
    sys.exit(1)

def sql(query):
    out = subprocess.run(["psql", "-X", "-qAt", "-v", "ON_ERROR_STOP=1", "-d", db, "-c", query],
                         env=dict(os.environ, PGUSER=superuser), capture_output=True, text=True)
    if out.returncode != 0:
        fail(f"psql: {out.stderr.strip()}")
    return out.stdout.strip()

# ---- the text exposition format
LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$')
LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?')

def unescape(v):
    return re.sub(r'\\(.)', lambda m: {'n': '\n'}.get(m.group(1), m.group(1)), v)

def scrape():
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as r:
        text = r.read().decode()
    fams = {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name, _, help_ = line[7:].partition(" ")
            fams.setdefault(name, {"samples": []})["help"] = help_
        elif line.startswith("# TYPE "):
            name, _, type_ = line[7:].partition(" ")
            fams.setdefault(name, {"samples": []})["type"] = type_
        elif line and not line.startswith("#"):
            m = LINE.match(line)
            if not m:
                fail(f"unparsable line in /metrics: {line!r}")
            labels, rest = {}, m.group(2) or ""
            pos = 0
            while pos < len(rest):
                lm = LABEL.match(rest, pos)
                if not lm:
                    fail(f"unparsable labels in /metrics: {line!r}")
                labels[lm.group(1)] = unescape(lm.group(2))
                pos = lm.end()
            fams.setdefault(m.group(1), {"samples": []})["samples"].append((labels, float(m.group(3))))
    return text, fams

# ---- what is shipped: name -> (type, label names besides datname and server)
SPEC = {
    "pg_sched_info": ("gauge", ["version"]),
    "pg_sched_queue_requests": ("gauge", ["tenant", "capability"]),
    "pg_sched_queue_claimed_requests": ("gauge", ["tenant", "capability"]),
    "pg_sched_queue_ready_requests": ("gauge", ["tenant", "capability"]),
    "pg_sched_queue_starving_requests": ("gauge", ["tenant", "capability"]),
    "pg_sched_queue_oldest_wait_seconds": ("gauge", ["tenant", "capability"]),
    "pg_sched_queue_dispatches_5m": ("gauge", ["tenant", "capability"]),
    "pg_sched_queue_dispatch_wait_p50_seconds": ("gauge", ["tenant", "capability"]),
    "pg_sched_queue_dispatch_wait_p95_seconds": ("gauge", ["tenant", "capability"]),
    "pg_sched_queue_blocked_requests": ("gauge", ["tenant", "capability", "blocked"]),
    "pg_sched_dispatch_results_total": ("counter", ["outcome", "reason"]),
    "pg_sched_dispatch_conflicts_total": ("counter", ["outcome", "reason"]),
    "pg_sched_dispatch_held_passed_total": ("counter", ["outcome", "reason"]),
    "pg_sched_live_attempts": ("gauge", ["tenant", "capability", "status"]),
    "pg_sched_live_lease_expired_attempts": ("gauge", ["tenant", "capability", "status"]),
    "pg_sched_attempts_ended_total": ("counter", ["tenant", "capability", "status"]),
    "pg_sched_node_cpu_millis": ("gauge", ["node", "status"]),
    "pg_sched_node_cpu_reserved_millis": ("gauge", ["node", "status"]),
    "pg_sched_node_memory_mb": ("gauge", ["node", "status"]),
    "pg_sched_node_memory_reserved_mb": ("gauge", ["node", "status"]),
    "pg_sched_node_gpus": ("gauge", ["node", "status"]),
    "pg_sched_node_gpus_reserved": ("gauge", ["node", "status"]),
    "pg_sched_node_slots": ("gauge", ["node", "status"]),
    "pg_sched_node_slots_free": ("gauge", ["node", "status"]),
    "pg_sched_node_live_attempts": ("gauge", ["node", "status"]),
    "pg_sched_node_workers": ("gauge", ["node", "status"]),
    "pg_sched_node_workers_ready": ("gauge", ["node", "status"]),
    "pg_sched_node_heartbeat_age_seconds": ("gauge", ["node", "status"]),
    "pg_sched_fleet_nodes": ("gauge", ["status"]),
    "pg_sched_capability_workers": ("gauge", ["capability", "state", "scheduling", "heartbeat", "node_status"]),
    "pg_sched_capability_slots": ("gauge", ["capability", "state", "scheduling", "heartbeat", "node_status"]),
    "pg_sched_capability_slots_free": ("gauge", ["capability", "state", "scheduling", "heartbeat", "node_status"]),
}
# ages: the scraped value must lie between the readings before and after the scrape
AGES = {"pg_sched_queue_oldest_wait_seconds", "pg_sched_node_heartbeat_age_seconds"}

# ---- what the scrape must show, computed from the tables and views (not from
# queries.yaml): rows (family, labels, value), value NULL for NaN, in one statement
# (one snapshot, one now())
EXPECTED_SQL = r"""
WITH
s AS (SELECT current_setting('sched.heartbeat_ttl')::interval AS hb_ttl,
             current_setting('sched.starvation_after')::interval AS starve),
open AS (SELECT * FROM sched.request WHERE state IN ('PENDING', 'CLAIMED')),
recent AS (SELECT r.tenant, r.capability, a.dispatched_at - r.queued_at AS wait
             FROM sched.attempt a JOIN sched.request r ON r.request_id = a.request_id
            WHERE a.dispatched_at > now() - interval '5 minutes' AND a.dispatched_at <= now()),
pairs AS (SELECT tenant, capability FROM open UNION SELECT tenant, capability FROM recent),
queue AS (
    SELECT p.tenant, p.capability,
           count(o.request_id) AS requests,
           count(o.request_id) FILTER (WHERE o.state = 'CLAIMED') AS claimed,
           count(o.request_id) FILTER (WHERE o.available_at <= now()
                                         AND (o.state = 'PENDING' OR o.claimed_until <= now())) AS ready,
           count(o.request_id) FILTER (WHERE o.queued_at < now() - s.starve) AS starving,
           coalesce(greatest(floor(extract(epoch FROM now() - min(o.queued_at))), 0), 0) AS oldest
      FROM pairs p CROSS JOIN s
      LEFT JOIN open o ON o.tenant = p.tenant AND o.capability = p.capability
     GROUP BY p.tenant, p.capability, s.starve),
waits AS (
    SELECT p.tenant, p.capability, count(r.wait) AS n,
           extract(epoch FROM date_trunc('millisecond', percentile_cont(0.5) WITHIN GROUP (ORDER BY r.wait))) AS p50,
           extract(epoch FROM date_trunc('millisecond', percentile_cont(0.95) WITHIN GROUP (ORDER BY r.wait))) AS p95
      FROM pairs p LEFT JOIN recent r ON r.tenant = p.tenant AND r.capability = p.capability
     GROUP BY p.tenant, p.capability),
blk AS (SELECT r.tenant, r.capability, p.blocked FROM sched.pending p JOIN sched.request r ON r.request_id = p.request_id),
live AS (SELECT * FROM sched.attempt WHERE status IN ('DISPATCHED', 'RUNNING')),
att AS (SELECT o.*, r.capability FROM sched.attempt_overview o
          JOIN sched.request r ON r.step_id = o.step_id AND r.attempt_number = o.attempt_number),
ended AS (SELECT tenant, capability, status, count(*) AS n FROM att WHERE lease_state = 'released'
           GROUP BY 1, 2, 3),
nodes AS (
    SELECT n.node_id, n.management_status, n.cpu_millis, n.memory_mb, n.gpus,
           (SELECT coalesce(sum(l.reserve_cpu_millis), 0) FROM live l WHERE l.node_id = n.node_id) AS cpu_res,
           (SELECT coalesce(sum(l.reserve_memory_mb), 0) FROM live l WHERE l.node_id = n.node_id) AS mem_res,
           (SELECT coalesce(sum(l.reserve_gpus), 0) FROM live l WHERE l.node_id = n.node_id) AS gpu_res,
           (SELECT coalesce(sum(w.slots), 0) FROM sched.worker w WHERE w.node_id = n.node_id) AS slots,
           (SELECT count(*) FROM live l WHERE l.node_id = n.node_id) AS live,
           (SELECT count(*) FROM sched.worker w WHERE w.node_id = n.node_id) AS workers,
           (SELECT count(*) FROM sched.worker w WHERE w.node_id = n.node_id AND w.runtime_state = 'READY'
               AND w.scheduling_status = 'ELIGIBLE' AND w.last_heartbeat >= now() - s.hb_ttl) AS ready,
           (SELECT floor(extract(epoch FROM now() - max(w.last_heartbeat))) FROM sched.worker w
             WHERE w.node_id = n.node_id) AS hb_age
      FROM sched.node n CROSS JOIN s),
caps AS (
    SELECT w.capability, w.runtime_state, w.scheduling_status,
           CASE WHEN w.last_heartbeat >= now() - s.hb_ttl THEN 'fresh' ELSE 'expired' END AS heartbeat,
           n.management_status, count(*) AS workers, sum(w.slots) AS slots,
           sum(w.slots - (SELECT count(*) FROM live l WHERE l.worker_id = w.worker_id)) AS free
      FROM sched.worker w JOIN sched.node n ON n.node_id = w.node_id CROSS JOIN s
     GROUP BY 1, 2, 3, 4, 5)
SELECT coalesce(json_agg(json_build_array(family, labels, value)), '[]') FROM (
    SELECT 'pg_sched_info' AS family, jsonb_build_object('version', extversion) AS labels, 1::float8 AS value
      FROM pg_extension WHERE extname = 'pg_sched'
    UNION ALL
    SELECT 'pg_sched_queue_' || m.k, jsonb_build_object('tenant', q.tenant, 'capability', q.capability), m.v
      FROM queue q JOIN waits w USING (tenant, capability)
     CROSS JOIN LATERAL (VALUES ('requests', q.requests::float8), ('claimed_requests', q.claimed),
                                ('ready_requests', q.ready), ('starving_requests', q.starving),
                                ('oldest_wait_seconds', q.oldest), ('dispatches_5m', w.n),
                                ('dispatch_wait_p50_seconds', w.p50), ('dispatch_wait_p95_seconds', w.p95)) m (k, v)
    UNION ALL
    SELECT 'pg_sched_queue_blocked_requests', jsonb_build_object('tenant', p.tenant, 'capability', p.capability, 'blocked', b),
           (SELECT count(*) FROM blk x WHERE x.tenant = p.tenant AND x.capability = p.capability AND x.blocked = b)
      FROM (SELECT DISTINCT tenant, capability FROM blk) p, unnest(ARRAY['none', 'transient', 'static']) b
    UNION ALL
    SELECT 'pg_sched_dispatch_' || m.k, jsonb_build_object('outcome', d.outcome, 'reason', coalesce(d.reason, '')), m.v
      FROM sched.dispatch_stats d
     CROSS JOIN LATERAL (VALUES ('results_total', d.calls::float8), ('conflicts_total', d.conflicts),
                                ('held_passed_total', d.held_passed)) m (k, v)
    UNION ALL
    SELECT 'pg_sched_live_' || m.k, jsonb_build_object('tenant', tenant, 'capability', capability, 'status', status), m.v
      FROM (SELECT tenant, capability, status, count(*) AS n,
                   count(*) FILTER (WHERE lease_state = 'expired') AS expired
              FROM att WHERE status IN ('DISPATCHED', 'RUNNING') GROUP BY 1, 2, 3) a
     CROSS JOIN LATERAL (VALUES ('attempts', a.n::float8), ('lease_expired_attempts', a.expired)) m (k, v)
    UNION ALL
    SELECT 'pg_sched_attempts_ended_total', jsonb_build_object('tenant', p.tenant, 'capability', p.capability, 'status', st),
           coalesce((SELECT e.n FROM ended e WHERE e.tenant = p.tenant AND e.capability = p.capability AND e.status = st), 0)
      FROM (SELECT DISTINCT tenant, capability FROM ended) p,
           unnest(ARRAY['SUCCEEDED', 'FAILED', 'CANCELLED', 'LOST', 'PREEMPTED']) st
    UNION ALL
    SELECT 'pg_sched_node_' || m.k, jsonb_build_object('node', n.node_id, 'status', n.management_status), m.v
      FROM nodes n
     CROSS JOIN LATERAL (VALUES ('cpu_millis', n.cpu_millis::float8), ('cpu_reserved_millis', n.cpu_res),
                                ('memory_mb', n.memory_mb), ('memory_reserved_mb', n.mem_res),
                                ('gpus', n.gpus), ('gpus_reserved', n.gpu_res), ('slots', n.slots),
                                ('slots_free', n.slots - n.live), ('live_attempts', n.live),
                                ('workers', n.workers), ('workers_ready', n.ready),
                                ('heartbeat_age_seconds', n.hb_age)) m (k, v)
    UNION ALL
    SELECT 'pg_sched_fleet_nodes', jsonb_build_object('status', st),
           (SELECT count(*) FROM sched.node n WHERE n.management_status = st)
      FROM unnest(ARRAY['ACTIVE', 'DRAINING', 'DISABLED']) st
    UNION ALL
    SELECT 'pg_sched_capability_' || m.k,
           jsonb_build_object('capability', c.capability, 'state', c.runtime_state, 'scheduling', c.scheduling_status,
                              'heartbeat', c.heartbeat, 'node_status', c.management_status), m.v
      FROM caps c
     CROSS JOIN LATERAL (VALUES ('workers', c.workers::float8), ('slots', c.slots), ('slots_free', c.free)) m (k, v)
) x
"""

def expected():
    fams = {}
    for family, labels, value in json.loads(sql(EXPECTED_SQL)):
        key = tuple(sorted(labels.items()))
        if key in fams.setdefault(family, {}):
            fail(f"the expected values have two series {family}{dict(key)}")
        fams[family][key] = math.nan if value is None else float(value)
    return fams

def same(a, b):
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))

def compare(family, got, before, after):
    """got, before, after: {label tuple: value}.  Returns what differs, or None."""
    missing = sorted(set(before) - set(got))
    extra = sorted(set(got) - set(before))
    if missing:
        return f"missing series {[dict(k) for k in missing]}"
    if extra:
        return f"unexpected series {[dict(k) for k in extra]}"
    for k, v in sorted(got.items()):
        b, a = before[k], after.get(k, math.nan)
        if family in AGES and not (math.isnan(b) and math.isnan(a)):
            if math.isnan(v) or not (b <= v <= a):
                return f"{dict(k)}: {v}, expected between {b} and {a}"
        elif not same(v, b):
            return f"{dict(k)}: {v}, expected {b}"
    return None

def stable(before, after):
    if set(before) != set(after):
        return False
    for f in before:
        if set(before[f]) != set(after[f]):
            return False
        if f not in AGES and any(not same(before[f][k], after[f][k]) for k in before[f]):
            return False
    return True

# ---- scrape, between two readings of the expected values
for attempt in range(1, 21):
    before = expected()
    text, fams = scrape()
    after = expected()
    if stable(before, after):
        break
    time.sleep(1)
else:
    fail("the expected values changed between every two readings (20 tries)")
with open(os.path.join(work, "metrics.txt"), "w") as f:
    f.write(text)
ok(f"scraped /metrics ({len(text)} bytes) between two equal readings of the expected values (try {attempt})")

# ---- the role the exporter connected as
row = sql("""SELECT a.usename, r.rolsuper, pg_has_role(a.usename, 'sched_observer', 'MEMBER'),
                    pg_has_role(a.usename, 'sched_scheduler', 'MEMBER') OR pg_has_role(a.usename, 'sched_worker', 'MEMBER')
                    OR pg_has_role(a.usename, 'sched_admin', 'MEMBER')
               FROM pg_stat_activity a JOIN pg_roles r ON r.rolname = a.usename
              WHERE a.application_name = 'pg_sched_metrics_main'""")
if row.split("\n")[0] != "sched_metrics_exporter|f|t|f":
    fail(f"the exporter's session (user, superuser, observer, other pg_sched role): {row!r}, expected sched_metrics_exporter|f|t|f")
ok("the exporter is connected as sched_metrics_exporter: no superuser, a member of sched_observer and of no other pg_sched role")

def value_of(name, **labels):
    for l, v in fams.get(name, {"samples": []})["samples"]:
        if all(l.get(k) == x for k, x in labels.items()):
            return v
    fail(f"no {name}{labels} in /metrics")

if value_of("pg_up") != 1:
    fail("pg_up is not 1")
ok("pg_up 1")
if value_of("pg_exporter_user_queries_load_error", filename=os.path.join(work, "queries.yaml")) != 0:
    fail("pg_exporter_user_queries_load_error is not 0: the queries file did not load")
ok("pg_exporter_user_queries_load_error 0: the queries file loaded")
if value_of("pg_exporter_last_scrape_error") != 0:
    fail("pg_exporter_last_scrape_error is not 0: a query failed")
ok("pg_exporter_last_scrape_error 0: every query ran")

ours = {n for n in fams if n.startswith("pg_sched_")}
if ours != set(SPEC):
    fail(f"metric families: missing {sorted(set(SPEC) - ours)}, unexpected {sorted(ours - set(SPEC))}")
ok(f"the {len(SPEC)} metric families pg_sched_* are exactly the shipped ones")
for name, (type_, labels) in SPEC.items():
    f = fams[name]
    if f.get("type") != type_:
        fail(f"{name}: TYPE {f.get('type')}, expected {type_}")
    if not f.get("help"):
        fail(f"{name}: no HELP text")
    got = {}
    for l, v in f["samples"]:
        if sorted(l) != sorted(labels + ["datname", "server"]):
            fail(f"{name}: labels {sorted(l)}, expected {sorted(labels + ['datname', 'server'])}")
        if l["datname"] != db or l["server"] != f"{os.environ['PGHOST']}:{os.environ['PGPORT']}":
            fail(f"{name}: datname {l['datname']!r} server {l['server']!r}")
        key = tuple(sorted((k, x) for k, x in l.items() if k not in ("datname", "server")))
        if key in got:
            fail(f"{name}: series {dict(key)} twice")
        got[key] = v
    diff = compare(name, got, before.get(name, {}), after.get(name, {}))
    if diff:
        fail(f"{name}: {diff}")
    ok(f"{name}: {type_}, labels {','.join(labels)}, {len(got)} series equal to SQL"
       + (" (between the readings)" if name in AGES else ""))

# ---- self-test: the comparison catches a wrong value, a missing and an extra series
for name in SPEC:
    got = {tuple(sorted((k, x) for k, x in l.items() if k not in ("datname", "server"))): v
           for l, v in fams[name]["samples"]}
    exp = dict(before[name])
    k0 = sorted(exp)[0]
    wrong = dict(exp)
    wrong[k0] = (0.0 if math.isnan(exp[k0]) else exp[k0] + 1000)
    wrong_after = dict(after[name])
    wrong_after[k0] = (0.0 if math.isnan(exp[k0]) else wrong_after[k0] + 1000)
    extra = dict(exp)
    extra[k0 + (("zz_bogus", "x"),)] = 1.0
    less = dict(exp)
    del less[k0]
    if (compare(name, got, wrong, wrong_after) is None or compare(name, got, extra, extra) is None
            or compare(name, got, less, less) is None):
        fail(f"self-test: the comparison of {name} misses a wrong value, a missing or an extra series")
ok(f"self-test: for each of the {len(SPEC)} families, a wrong value, a missing series and an extra series are reported")

# ---- sched.dispatch_stats moved by what the fixture's dispatch calls returned
with open(os.path.join(work, "dispatch_before.json")) as f:
    base = json.load(f)
ledger = {}
for line in open(os.path.join(work, "ledger.txt")):
    parts = line.rstrip("\n").split(" ")
    outcome, reason, conflicts = parts[0], (parts[1] if len(parts) > 1 else ""), (parts[2] if len(parts) > 2 else "0")
    c = ledger.setdefault(f"{outcome}/{reason}", [0, 0])
    c[0] += 1
    c[1] += int(conflicts or 0)
for key, (calls, conflicts) in sorted(ledger.items()):
    outcome, reason = key.split("/")
    now_ = before["pg_sched_dispatch_results_total"].get((("outcome", outcome), ("reason", reason)))
    if now_ is None:
        fail(f"no pg_sched_dispatch_results_total for {key}")
    if now_ - base[key][0] != calls:
        fail(f"dispatch_stats {key}: moved by {now_ - base[key][0]}, the fixture's calls returned {calls}")
    if reason == "contention":
        moved = before["pg_sched_dispatch_conflicts_total"][(("outcome", outcome), ("reason", reason))] - base[key][1]
        if moved != conflicts:
            fail(f"dispatch_stats {key} conflicts: moved by {moved}, the details name {conflicts}")
for key in base:
    if key not in ledger:
        outcome, reason = key.split("/")
        now_ = before["pg_sched_dispatch_results_total"][(("outcome", outcome), ("reason", reason))]
        if now_ != base[key][0]:
            fail(f"dispatch_stats {key}: moved by {now_ - base[key][0]}, the fixture returned none")
ok(f"sched.dispatch_stats moved by exactly the fixture's {sum(c for c, _ in ledger.values())} dispatch results, by outcome and reason (and the conflicts of contention)")

with open(os.path.join(work, "checks"), "w") as f:
    f.write(str(checks))
PY
CHECKS=$(cat "$WORK/checks")

# the exporter logged no error (non-fatal query errors are only logged)
if grep -E 'level=(error|warn)|err=' "$WORK/main.log" >&2; then
    fail "the exporter logged errors (above)"
fi
pass "the exporter logged no error or warning"

# ---- self-test: a query sched_observer may not run is reported as a scrape error
cat >"$WORK/denied.yaml" <<'YAML'
pg_sched_selftest:
  query: "SELECT 1 AS ok"
  metrics:
    - ok:
        usage: "GAUGE"
        description: "1"
pg_sched_selftest_denied:
  query: "SELECT calls FROM sched._dispatch_counters()"
  metrics:
    - calls:
        usage: "COUNTER"
        description: "an internal function: the owner's only"
YAML
chmod 644 "$WORK/denied.yaml"
start_exporter denied "$WORK/denied.yaml"
"$PY" - "$EXPORTER_PORT" >"$WORK/denied.metrics" <<'PY'
import sys, urllib.request
print(urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=60).read().decode())
PY
check_eq "self-test: a query sched_observer may not run: pg_exporter_last_scrape_error" \
    "$(sed -n 's/^pg_exporter_last_scrape_error //p' "$WORK/denied.metrics")" "1"
check_eq "self-test: the other queries of that file still answer" \
    "$(grep -c '^pg_sched_selftest_ok{' "$WORK/denied.metrics")" "1"
grep -q 'permission denied for function _dispatch_counters' "$WORK/denied.log" ||
    fail "the exporter did not log the permission error: $(tail -n 5 "$WORK/denied.log")"
pass "self-test: the exporter logged 'permission denied for function _dispatch_counters'"

echo "all $CHECKS checks passed"
