#!/usr/bin/env bash
# test/dump/run.sh — pg_dump and pg_restore of a database in use (issue 13 part 4): a dump
# taken while a client keeps dispatching and finishing restores, in every usual way, to
# exactly the rows the dump's snapshot saw, with derived counters that agree, and work
# continues on the restored database where it stopped.
#
# Uses the running cluster of the environment (PGHOST, PGPORT, PGUSER, a superuser), where
# pg_sched is installed and preloaded (`make test` and `test/harness.sh up` provide one).
# Login roles like a deployment's (cluster-wide, made when missing, kept): sched_dump_admin
# (sched_admin), sched_dump_app (sched_scheduler, and member of sched_dump_team, a NOLOGIN
# tenant owner), sched_dump_worker (sched_worker), sched_dump_busy (sched_scheduler and
# sched_worker: the busy client, a scheduler that is its own worker).  Steps:
#   1. database sched_dump_src: a fleet (5 nodes ACTIVE, DRAINING, DISABLED; 13 workers of
#      7 capabilities, READY, STARTING, DRAINING, STOPPED, CORDONED, one re-registered),
#      tenants with weights and owners, a queue (pending, delayed, claimed, unplaceable,
#      cancelled), live attempts (DISPATCHED, RUNNING), finished ones (SUCCEEDED, FAILED and
#      retried, FAILED ending its execution, LOST by reap_expired and retried), commands
#      delivered and not, CANCEL commands of a cancelled execution, a completed execution,
#      and their timeline; and issue 15's placement kinds: requests with label expressions
#      (in, not_in, exists, gt, version; one that no node meets) and spread keys, their
#      attempts live with the keys on two nodes; a gang placed whole (placed_at, its
#      members DISPATCHED on distinct nodes) and one waiting (2 of its 3 members submitted:
#      gang_incomplete); a RUNNING preemptible attempt PREEMPTED (sched.preemption on in
#      the loading session only, as the superuser: pg_dump without --create carries no
#      database setting), its CANCEL command and its step requeued with max_attempts + 1,
#      and the room held for its preemptor (request.held_*, for an hour) counted in the
#      node's and the worker's counters; the invariants hold;
#   2. the busy client starts (one session as sched_dump_busy, in lock step with this
#      script: every round submits, dispatch_next, finishes what it started the round
#      before, SUCCEEDED or FAILED, polls and starts); once it is running, a session holds a
#      REPEATABLE READ transaction, exports its snapshot (pg_export_snapshot) and computes,
#      in that snapshot, a digest of the rows of every table of the extension (found in
#      the catalog: exactly the tables whose data the dump holds, sched.gang too), the live
#      count per tenant of sched.tenant_live, the maxima of the id columns, and runs
#      test/pgbench/invariants.sql there; after more rounds, pg_dump -Fc and pg_dump -Fp
#      with --snapshot of that transaction, while the client goes on; then the client
#      stops (it must have run without an error), and the source has changed since the
#      snapshot (so the comparison below is with what the dump saw, not with a quiet
#      database);
#   3. restores into fresh databases, each of which must report nothing (no error, no
#      warning) and exit 0:
#        sched_dump_r_plain   pg_restore -d
#        sched_dump_r_single  pg_restore --single-transaction --exit-on-error -d
#        sched_dump_r_jobs    pg_restore -j 2 -d (tables loaded by concurrent sessions)
#        sched_dump_r_sql     psql -1 -v ON_ERROR_STOP=1 -f of the plain-format dump
#        sched_dump_r_data    CREATE EXTENSION, then pg_restore --data-only
#                             --single-transaction --exit-on-error with
#                             session_replication_role = replica (what a logical
#                             replication table copy runs under)
#      and in each: the digest of every table equals the snapshot's, tenant_live sums per
#      tenant equal the snapshot's and the live attempts per tenant, the node and worker
#      counters equal what the live attempts and the holds of preemption imply,
#      rank_candidates counts each spread key's restored live attempts per node (its
#      spread_matches), every sequence of the extension holds
#      the value its dump recorded (read between the export and the end of the dumps), at
#      least the maximum of its column; invariants.sql holds; each backend's fleet mirror
#      agrees with the tables;
#   4. in each restored database, work continues: the workers poll exactly the commands
#      left undelivered for their live attempts; the held request's next dispatch_attempt
#      (as the scheduler) takes the held room (DISPATCHED on the held node and worker, its
#      held_* cleared, no hold left, the counters then the live attempts' alone); the
#      worker's finish_attempt of the restored PREEMPTED attempt is refused (55000); the
#      waiting gang's third member is submitted and one dispatch_attempt places the gang
#      whole (3 attempts at one time, placed_at set); every attempt restored live is finished
#      (DISPATCHED ones started first), renewed or reaped with its restored lease_version,
#      and a stale lease_version is refused (55000); reap_expired at the lease end of a
#      restored attempt (an `at` in the future: as the superuser) reaps exactly the
#      attempts whose lease ends before it and requeues the step; a restored claim
#      dispatches with its claim_id; the fleet grows (a node, a worker of a new
#      capability) and one dispatch_next places new and restored requests, the new worker
#      polls its START commands; no new request, command or milestone takes an id at or
#      below the restored maxima; a worker re-registers (same id, generation + 1, still its
#      role's) and its old generation is refused; the diagnostics views answer;
#      invariants.sql holds again;
#   5. the databases are dropped (on failure they are left for debugging).
# Prints `ok N - what` per check; exits non-zero on the first failure, with a FAIL line;
# ends with "dump: N checks passed".  No check depends on elapsed time: waits (for the busy
# client's rounds) only have a hang timeout (SCHED_DUMP_TIMEOUT, 120 s).
#
#   env: SCHED_DUMP_KEEP=1 keeps the databases and the dumps also on success.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
TEST_SUITE=dump
# shellcheck source=test/lib/common.sh
source "$ROOT/test/lib/common.sh"      # say, pass, fail (as "FAIL (dump): ...")
: "${PGHOST:?PGHOST must point at the test cluster}" "${PGPORT:?PGPORT must be set}"
export PGUSER=${PGUSER:-postgres}
unset PGDATABASE PGOPTIONS
TIMEOUT=${SCHED_DUMP_TIMEOUT:-120}
INVARIANTS="$ROOT/test/pgbench/invariants.sql"
[ -f "$INVARIANTS" ] || { echo "FAIL (dump): $INVARIANTS is missing" >&2; exit 1; }

SRC=sched_dump_src
TARGETS=(sched_dump_r_plain sched_dump_r_single sched_dump_r_sql sched_dump_r_data sched_dump_r_jobs)
WORK=$(mktemp -d /tmp/sched_dump.XXXXXX)
FAILED=1                 # cleared at the end; the EXIT trap reports a failure
BUSY_PID=""
HOLDER_PROC=""
on_exit() {
    local rc=$?
    [ -n "$BUSY_PID" ] && { touch "$WORK/busy.stop"; kill "$BUSY_PID" 2>/dev/null || true; wait "$BUSY_PID" 2>/dev/null || true; }
    [ -n "$HOLDER_PROC" ] && { kill "$HOLDER_PROC" 2>/dev/null || true; wait "$HOLDER_PROC" 2>/dev/null || true; }
    if [ "$FAILED" -ne 0 ]; then
        printf '%s\n' "FAIL (dump): after $CHECKS checks passed (exit $rc); databases $SRC ${TARGETS[*]}" \
            "  (those that were created) are left for debugging, and the files in $WORK" >&2
    elif [ -z "${SCHED_DUMP_KEEP:-}" ]; then
        rm -rf "$WORK"
    fi
}
trap on_exit EXIT

PSQL=(psql -X -q -v ON_ERROR_STOP=1)
# value DB SQL [USER]: what the query returns (fields separated by a space)
value() { psql -X -q -At -F ' ' -v ON_ERROR_STOP=1 -d "$1" -U "${3:-$PGUSER}" -c "$2"; }
# expect DB WHAT EXPECTED SQL [USER]: the query must return EXPECTED
expect() {
    local got
    got=$(value "$1" "$4" "${5:-}" 2>&1) || fail "$2: the query failed in $1: $got
  query: $4"
    [ "$got" = "$3" ] || fail "$2 (in $1): expected '$3', got '$got'
  query: $4"
    pass "$2"
}
# refused DB WHAT SQLSTATE SQL [USER] [PATTERN]: the statement must fail with SQLSTATE (and
# a message matching the extended regular expression PATTERN)
refused() {
    local got
    got=$(psql -X -q -At -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -d "$1" -U "${5:-$PGUSER}" -c "$4" 2>&1) && fail "$2 (in $1): it succeeded: $got"
    grep -q "ERROR:  $3:" <<<"$got" || fail "$2 (in $1): expected SQLSTATE $3, got: $got"
    [ -z "${6:-}" ] || grep -Eq "ERROR:  $3: .*$6" <<<"$got" || fail "$2 (in $1): expected a message matching '$6', got: $got"
    pass "$2"
}
invariants() { # invariants DB WHEN
    local out
    if out=$("${PSQL[@]}" -d "$1" -f "$INVARIANTS" 2>&1); then
        pass "invariants.sql holds in $1 $2 ($(grep -c 'invariant .*: ok' <<<"$out") invariants)"
    else
        printf '%s\n' "$out" >&2
        fail "invariants.sql is violated in $1 $2 (above)"
    fi
}
fresh_db() { # fresh_db DB
    "${PSQL[@]}" -d postgres -c "SET client_min_messages = warning" \
        -c "DROP DATABASE IF EXISTS $1 WITH (FORCE)" -c "CREATE DATABASE $1"
}
deadline() { echo $((SECONDS + TIMEOUT)); }
# counters_sql HOLDS: the number of workers, and of nodes, whose counters differ from the
# sums over their live attempts (DISPATCHED, RUNNING) plus, when HOLDS is 1, the holds of
# preemption: one slot on held_worker_id and one reservation of the held request's
# reserve_* (and one live attempt) on held_node_id per held request
counters_sql() {
    printf '%s' "SELECT (SELECT count(*) FROM sched.worker w WHERE w.live_attempts <>
                    (SELECT count(*) FROM sched.attempt a WHERE a.worker_id = w.worker_id AND a.status IN ('DISPATCHED', 'RUNNING'))
                    + $1 * (SELECT count(*) FROM sched.request r WHERE r.held_worker_id = w.worker_id)),
                (SELECT count(*) FROM sched.node n CROSS JOIN LATERAL (
                    SELECT count(*)::int AS live, coalesce(sum(a.reserve_cpu_millis), 0)::int AS cpu,
                           coalesce(sum(a.reserve_memory_mb), 0)::bigint AS mem, coalesce(sum(a.reserve_gpus), 0)::int AS gpus
                      FROM sched.attempt a WHERE a.node_id = n.node_id AND a.status IN ('DISPATCHED', 'RUNNING')) s
                  CROSS JOIN LATERAL (
                    SELECT count(*)::int AS live, coalesce(sum(r.reserve_cpu_millis), 0)::int AS cpu,
                           coalesce(sum(r.reserve_memory_mb), 0)::bigint AS mem, coalesce(sum(r.reserve_gpus), 0)::int AS gpus
                      FROM sched.request r WHERE r.held_node_id = n.node_id) h
                  WHERE (n.live_attempts, n.reserved_cpu_millis, n.reserved_memory_mb, n.reserved_gpus)
                        IS DISTINCT FROM (s.live + $1 * h.live, s.cpu + $1 * h.cpu, s.mem + $1 * h.mem, s.gpus + $1 * h.gpus))"
}

# ---- roles -----------------------------------------------------------------------------
say "cluster $PGHOST:$PGPORT; files in $WORK"
"${PSQL[@]}" -d postgres <<'SQL'
DO $$
DECLARE r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['sched_dump_admin', 'sched_dump_app', 'sched_dump_worker', 'sched_dump_busy'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) THEN
            EXECUTE format('CREATE ROLE %I LOGIN', r);
        END IF;
    END LOOP;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'sched_dump_team') THEN
        CREATE ROLE sched_dump_team NOLOGIN;
    END IF;
END
$$;
SQL

# ---- 1. the source database ------------------------------------------------------------
say "1. $SRC: fleet, tenants, queue, live and finished attempts, commands, timeline"
fresh_db "$SRC"
for t in "${TARGETS[@]}"; do
    "${PSQL[@]}" -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $t WITH (FORCE)"
done
"${PSQL[@]}" -d "$SRC" <<SQL
SET client_min_messages = warning;
CREATE EXTENSION pg_sched;
-- the roles of a deployment (the pg_sched roles exist now); cluster-wide, granted once
GRANT sched_admin TO sched_dump_admin;
GRANT sched_scheduler, sched_dump_team TO sched_dump_app;
GRANT sched_worker TO sched_dump_worker;
GRANT sched_scheduler, sched_worker TO sched_dump_busy;
-- every worker registered here stays admitted for the whole test (a database setting:
-- pg_dump without --create does not carry it; each restored database gets it again)
ALTER DATABASE $SRC SET sched.heartbeat_ttl = '1h';
SQL

cat >"$WORK/load.sql" <<'SQL'
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
-- ---- the fleet and the tenants, as the admin ----------------------------------------------
\connect - sched_dump_admin
SELECT count(*) AS nodes FROM (VALUES
    (sched.upsert_node('n1', labels => '{"zone":"a","disk":"ssd","cuda":"12.2","mem_gb":"64"}', cpu_millis => 8000, memory_mb => 16384, gpus => 2, weight => 100)),
    (sched.upsert_node('n2', labels => '{"zone":"b","cuda":"11.8","mem_gb":"32"}', cpu_millis => 4000, memory_mb => 8192, weight => 50)),
    (sched.upsert_node('n3', labels => '{"zone":"a"}', cpu_millis => 4000, memory_mb => 8192, weight => 80)),
    (sched.upsert_node('n4', labels => '{"zone":"c"}', cpu_millis => 2000, memory_mb => 4096, weight => 10)),
    (sched.upsert_node('n5', labels => '{"zone":"s"}', cpu_millis => 4000, memory_mb => 8192, weight => 100))) v(n);
SELECT (sched.set_tenant_weight('acme', 3)).tenant, (sched.set_tenant_owner('acme', 'sched_dump_app')).owner;
SELECT (sched.set_tenant_weight('globex', 1)).tenant, (sched.set_tenant_owner('globex', 'sched_dump_team')).owner;
SELECT (sched.set_tenant_weight('initech', 2)).tenant;
-- ---- the workers register, as their roles -------------------------------------------------
\connect - sched_dump_worker
SELECT worker_id AS w_n1_build, generation AS g_n1_build FROM sched.register_worker('n1', 'build', ARRAY['1.0', '2.0'], 4) \gset
SELECT worker_id AS w_n1_train, generation AS g_n1_train FROM sched.register_worker('n1', 'train', ARRAY['1.0'], 1) \gset
SELECT worker_id AS w_n2_build, generation AS g_n2_build FROM sched.register_worker('n2', 'build', ARRAY['1.0'], 2) \gset
SELECT worker_id AS w_n3_build, generation AS g_n3_build FROM sched.register_worker('n3', 'build', ARRAY['1.0', '2.0'], 2) \gset
SELECT worker_id AS w_n4_build, generation AS g_n4_build FROM sched.register_worker('n4', 'build', ARRAY['1.0'], 1) \gset
SELECT worker_id AS w_n1_render, generation AS g_n1_render FROM sched.register_worker('n1', 'render', ARRAY['3'], 2) \gset
-- registered twice: generation 2
SELECT worker_id AS w_n2_render, generation AS g_n2_render FROM sched.register_worker('n2', 'render', ARRAY['3'], 2) \gset
SELECT worker_id AS w_n2_render, generation AS g_n2_render FROM sched.register_worker('n2', 'render', ARRAY['3', '4'], 2) \gset
\connect - sched_dump_busy
SELECT (sched.register_worker('n5', 'stream', ARRAY['1'], 3)).generation AS stream_generation;
-- ---- the queue, as the application ------------------------------------------------------
\connect - sched_dump_app
SELECT count(sched.submit(
           execution_id => md5('dump-exec-' || (i % 6))::uuid,
           step_id => md5('dump-step-' || i)::uuid,
           capability => CASE WHEN i % 9 = 0 THEN 'train' WHEN i % 5 = 0 THEN 'render' ELSE 'build' END,
           capability_version => CASE WHEN i % 5 = 0 THEN '3' WHEN i % 4 = 1 THEN '2.0' ELSE '1.0' END,
           tenant => (ARRAY['acme', 'globex', 'initech'])[1 + (i % 6) % 3],
           priority => i % 3,
           required_labels => CASE WHEN i % 7 = 0 THEN '{"zone":"a"}'::jsonb ELSE '{}' END,
           preferred_labels => CASE WHEN i % 2 = 0 THEN '{"disk":"ssd"}'::jsonb ELSE '{}' END,
           reserve_cpu_millis => 250 * (1 + i % 4),
           reserve_memory_mb => 256 * (1 + i % 3),
           reserve_gpus => CASE WHEN i % 9 = 0 THEN 1 ELSE 0 END,
           max_attempts => CASE WHEN i = 8 THEN 1 ELSE 3 END,
           payload => jsonb_build_object('task', i, 'args', jsonb_build_array(i, 'x' || i))))
  FROM generate_series(1, 24) i;
-- never placeable: more cpu than any node has, a label no node has
SELECT sched.submit(md5('dump-exec-1')::uuid, md5('dump-step-huge')::uuid, 'build', '1.0',
                    tenant => 'globex', reserve_cpu_millis => 100000);
SELECT sched.submit(md5('dump-exec-2')::uuid, md5('dump-step-nolabel')::uuid, 'build', '1.0',
                    tenant => 'initech', required_labels => '{"zone":"nowhere"}');
-- round 1: dispatched, some started, then all LOST by the reaper
SELECT outcome, count(*) FROM sched.dispatch_next(5) GROUP BY 1 ORDER BY 1;
\connect - sched_dump_worker
SELECT count(sched.start_attempt(p.attempt_id, p.lease_version))
  FROM sched.poll_commands(:'w_n1_build', :g_n1_build) p WHERE p.kind = 'START';
\connect - postgres
-- an `at` past every lease: LOST, and requeued (due after that `at`: delayed retries)
SELECT sched.reap_expired(now() + interval '1 hour') AS lost;
-- round 2
\connect - sched_dump_app
SELECT outcome, count(*) FROM sched.dispatch_next(30) GROUP BY 1 ORDER BY 1;
\connect - sched_dump_worker
-- these workers poll (delivered, started); the others do not (undelivered)
CREATE TEMP TABLE polled AS
SELECT p.* FROM sched.poll_commands(:'w_n1_build', :g_n1_build, 100) p
UNION ALL SELECT p.* FROM sched.poll_commands(:'w_n3_build', :g_n3_build, 100) p
UNION ALL SELECT p.* FROM sched.poll_commands(:'w_n1_train', :g_n1_train, 100) p;
SELECT count(sched.start_attempt(attempt_id, lease_version)) AS started FROM polled WHERE kind = 'START';
-- the first two SUCCEEDED, the third FAILED (step 8's, max_attempts 1: its execution fails
-- and its live attempts get a CANCEL)
WITH f AS (SELECT attempt_id, lease_version, row_number() OVER (ORDER BY command_id) n FROM polled WHERE kind = 'START')
SELECT n, sched.finish_attempt(attempt_id, lease_version,
                               CASE WHEN n <= 2 THEN 'SUCCEEDED' ELSE 'FAILED' END,
                               jsonb_build_object('exit', n))
  FROM f WHERE n <= 3 ORDER BY n;
-- a FAILED attempt whose step is retried
SELECT sched.finish_attempt(attempt_id, lease_version, 'FAILED', '{"exit": 9}')
  FROM polled p WHERE kind = 'START'
   AND command_id = (SELECT max(command_id) FROM polled WHERE kind = 'START');
-- ---- an execution run to its end and completed ----------------------------------------------
\connect - sched_dump_app
SELECT sched.submit(md5('dump-exec-done')::uuid, md5('dump-step-done')::uuid, 'build', '2.0',
                    tenant => 'acme', node_id => 'n1', payload => '{"done": true}') AS done_request \gset
SELECT outcome FROM sched.dispatch_attempt(:done_request);
\connect - sched_dump_worker
SELECT p.attempt_id AS done_attempt, p.lease_version AS done_lease
  FROM sched.poll_commands(:'w_n1_build', :g_n1_build) p WHERE p.request_id = :done_request \gset
SELECT sched.start_attempt(:'done_attempt', :done_lease) IS NOT NULL AS started;
SELECT sched.finish_attempt(:'done_attempt', :done_lease, 'SUCCEEDED', '{"exit": 0}');
\connect - sched_dump_app
SELECT sched.complete_execution(md5('dump-exec-done')::uuid);
-- ---- a cancelled execution (CANCEL commands), claims, delayed work ----------------------------
SELECT sched.cancel_execution(md5('dump-exec-4')::uuid);
SELECT count(*) AS claimed FROM sched.claim_requests(2, claim_ttl => '1 hour', capability => 'build');
SELECT count(sched.submit(md5('dump-exec-later')::uuid, md5('dump-step-later-' || i)::uuid, 'build', '1.0',
                          tenant => 'initech', available_at => now() + interval '1 day')) AS later
  FROM generate_series(1, 3) i;
-- ---- fleet states: a drained node, a disabled one; cordoned, starting, draining, stopped ----
\connect - sched_dump_admin
SELECT (sched.drain_node('n3')).management_status;
SELECT (sched.upsert_node('n4', management_status => 'DISABLED')).management_status;
SELECT (sched.cordon_worker(:'w_n2_build')).scheduling_status;
\connect - sched_dump_worker
SELECT (sched.heartbeat(:'w_n2_render', :g_n2_render, runtime_state => 'STARTING')).runtime_state;
SELECT (sched.heartbeat(:'w_n1_render', :g_n1_render, runtime_state => 'DRAINING')).runtime_state;
SELECT (sched.heartbeat(:'w_n4_build', :g_n4_build, runtime_state => 'STOPPED')).runtime_state;
-- ---- issue 15: label expressions, spread keys, gangs, preemption ---------------------------
-- workers of capabilities of their own on n1 and n2 (place, gang) and n1's only prio slot
SELECT worker_id AS w_n1_place, generation AS g_n1_place FROM sched.register_worker('n1', 'place', ARRAY['1'], 6) \gset
SELECT count(*) AS registered FROM (VALUES (sched.register_worker('n2', 'place', ARRAY['1'], 6)),
    (sched.register_worker('n1', 'gang', ARRAY['1'], 4)), (sched.register_worker('n2', 'gang', ARRAY['1'], 4))) v(r);
SELECT worker_id AS w_n1_prio, generation AS g_n1_prio FROM sched.register_worker('n1', 'prio', ARRAY['1'], 1) \gset
\connect - sched_dump_app
-- label expressions (in, not_in, exists, gt, version) that n1 and n2 both meet, and two
-- spread keys: six requests placed by one dispatch_next; one no node meets (gt 1000)
SELECT count(sched.submit(md5('dump-exec-place-' || i % 3)::uuid, md5('dump-step-place-' || i)::uuid, 'place', '1',
           tenant => (ARRAY['acme', 'globex', 'initech'])[1 + i % 3],
           required_labels => (ARRAY['{"zone": {"in": ["a", "b"]}}',
                                     '{"cuda": {"version": ">=11.8,<13"}, "spot": {"exists": false}}',
                                     '{"zone": {"not_in": ["c", "s"]}, "mem_gb": {"gt": 16}}'])[1 + i % 3]::jsonb,
           spread_key => 'svc-' || i % 2, reserve_cpu_millis => 100, reserve_memory_mb => 64))
  FROM generate_series(1, 6) i;
SELECT sched.submit(md5('dump-exec-place-0')::uuid, md5('dump-step-place-big')::uuid, 'place', '1',
                    tenant => 'acme', required_labels => '{"mem_gb": {"gt": 1000}}', spread_key => 'svc-0');
SELECT outcome, count(*) FROM sched.dispatch_next(10, capability => 'place') GROUP BY 1 ORDER BY 1;
-- a gang placed whole (2 members on distinct nodes, by one dispatch_attempt), and one
-- waiting: 2 of its 3 members submitted (the third is submitted after the restore)
SELECT count(sched.submit(md5('dump-exec-gang')::uuid, md5('dump-step-gang-a-' || i)::uuid, 'gang', '1',
                          tenant => 'acme', reserve_cpu_millis => 100, reserve_memory_mb => 64,
                          gang_id => md5('dump-gang-a')::uuid, gang_size => 2, distinct_nodes => true))
  FROM generate_series(1, 2) i;
SELECT outcome, detail FROM sched.dispatch_attempt((SELECT min(request_id) FROM sched.request WHERE gang_id = md5('dump-gang-a')::uuid));
SELECT count(sched.submit(md5('dump-exec-gang')::uuid, md5('dump-step-gang-b-' || i)::uuid, 'gang', '1',
                          tenant => 'acme', reserve_cpu_millis => 100, reserve_memory_mb => 64,
                          gang_id => md5('dump-gang-b')::uuid, gang_size => 3))
  FROM generate_series(1, 2) i;
SELECT outcome, detail FROM sched.dispatch_next(10, capability => 'gang');
-- preemption: a preemptible attempt of priority 0 runs in n1's only prio slot; a request
-- of priority 5 preempts it (as the superuser: sched.preemption is SUSET, and set here
-- only, not for the database) and the room is held for it, for an hour
SELECT sched.submit(md5('dump-exec-prio')::uuid, md5('dump-step-victim')::uuid, 'prio', '1', tenant => 'initech',
                    priority => 0, preemptible => true, reserve_cpu_millis => 200, reserve_memory_mb => 128,
                    max_attempts => 2) AS victim_request \gset
SELECT outcome FROM sched.dispatch_attempt(:victim_request);
SELECT sched.submit(md5('dump-exec-prio')::uuid, md5('dump-step-preemptor')::uuid, 'prio', '1', tenant => 'initech',
                    priority => 5, reserve_cpu_millis => 300, reserve_memory_mb => 256, reserve_gpus => 1) AS preemptor_request \gset
\connect - sched_dump_worker
-- n1's place and prio workers poll and start theirs (n2's are left undelivered)
SELECT count(sched.start_attempt(p.attempt_id, p.lease_version)) AS started
  FROM (SELECT * FROM sched.poll_commands(:'w_n1_place', :g_n1_place, 100)
        UNION ALL SELECT * FROM sched.poll_commands(:'w_n1_prio', :g_n1_prio, 100)) p WHERE p.kind = 'START';
\connect - postgres
SET sched.preemption = on;
SET sched.preemption_hold = '1h';
SELECT outcome, detail FROM sched.dispatch_attempt(:preemptor_request);
\connect - sched_dump_worker
-- the victim's worker polls, as a worker does
SELECT count(*) AS polled_after_preemption FROM sched.poll_commands(:'w_n1_prio', :g_n1_prio, 100);
SQL
"${PSQL[@]}" -d "$SRC" -f "$WORK/load.sql" >"$WORK/load.out" 2>&1 \
    || { cat "$WORK/load.out" >&2; fail "loading $SRC failed (above)"; }

# what the load made: each kind of state is there (counted from the tables)
expect "$SRC" "the source has attempts DISPATCHED, RUNNING, SUCCEEDED, FAILED and LOST" "t t t t t" \
    "SELECT bool_or(status = 'DISPATCHED'), bool_or(status = 'RUNNING'), bool_or(status = 'SUCCEEDED'),
            bool_or(status = 'FAILED'), bool_or(status = 'LOST') FROM sched.attempt"
expect "$SRC" "... requests PENDING (ready, delayed, unplaceable), CLAIMED, DISPATCHED, CANCELLED" "t t t t t t" \
    "SELECT bool_or(state = 'PENDING' AND available_at <= now()), bool_or(state = 'PENDING' AND available_at > now()),
            bool_or(state = 'PENDING' AND tries > 0), bool_or(state = 'CLAIMED'), bool_or(state = 'DISPATCHED'),
            bool_or(state = 'CANCELLED') FROM sched.request"
expect "$SRC" "... retries of FAILED and LOST attempts" "t t" \
    "SELECT bool_or(a.status = 'FAILED'), bool_or(a.status = 'LOST') FROM sched.attempt a
       JOIN sched.request r ON r.step_id = a.step_id AND r.attempt_number = a.attempt_number + 1"
expect "$SRC" "... START and CANCEL commands, delivered and not" "t t t t" \
    "SELECT bool_or(kind = 'START' AND delivered_at IS NOT NULL), bool_or(kind = 'START' AND delivered_at IS NULL),
            bool_or(kind = 'CANCEL'), bool_or(kind = 'CANCEL' AND delivered_at IS NULL) FROM sched.command"
expect "$SRC" "... executions QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED" "t t t t t" \
    "SELECT bool_or(status = 'QUEUED'), bool_or(status = 'RUNNING'), bool_or(status = 'SUCCEEDED'),
            bool_or(status = 'FAILED'), bool_or(status = 'CANCELLED') FROM sched.execution"
expect "$SRC" "... nodes ACTIVE, DRAINING, DISABLED; workers READY, STARTING, DRAINING, STOPPED, CORDONED, re-registered" \
    "t t t t t t t t t" \
    "SELECT (SELECT bool_or(management_status = 'ACTIVE') FROM sched.node), (SELECT bool_or(management_status = 'DRAINING') FROM sched.node),
            (SELECT bool_or(management_status = 'DISABLED') FROM sched.node),
            bool_or(runtime_state = 'READY'), bool_or(runtime_state = 'STARTING'), bool_or(runtime_state = 'DRAINING'),
            bool_or(runtime_state = 'STOPPED'), bool_or(scheduling_status = 'CORDONED'), bool_or(generation > 1)
       FROM sched.worker"
expect "$SRC" "... tenants with weights and owners, live attempts of each on several nodes" "3 2 3 4" \
    "SELECT (SELECT count(*) FROM sched.tenant WHERE weight > 1 OR owner IS NOT NULL),
            (SELECT count(*) FROM sched.tenant WHERE owner IS NOT NULL),
            count(DISTINCT tenant), count(DISTINCT node_id) FROM sched.attempt WHERE status IN ('DISPATCHED', 'RUNNING')"
expect "$SRC" "... label expressions in required_labels (exists, gt, in, not_in, version), one request no node meets for one" \
    "exists,gt,in,not_in,version t" \
    "SELECT (SELECT string_agg(DISTINCT op, ',' ORDER BY op) FROM sched.request r, jsonb_each(r.required_labels) e,
                   jsonb_object_keys(CASE WHEN jsonb_typeof(e.value) = 'object' THEN e.value END) op),
            bool_or(state = 'PENDING' AND tries > 0 AND last_reason LIKE '%required_labels_mismatch%'
                    AND required_labels ->> 'mem_gb' LIKE '{%') FROM sched.request"
expect "$SRC" "... attempts DISPATCHED and RUNNING with spread keys, each key's on two nodes, as their requests'" "2 t t 2 0" \
    "SELECT count(DISTINCT a.spread_key), bool_or(a.status = 'DISPATCHED'), bool_or(a.status = 'RUNNING'),
            min(k.nodes), count(*) FILTER (WHERE a.spread_key IS DISTINCT FROM r.spread_key)
       FROM sched.attempt a JOIN sched.request r USING (request_id)
       JOIN (SELECT spread_key, count(DISTINCT node_id) AS nodes FROM sched.attempt
              WHERE status IN ('DISPATCHED', 'RUNNING') GROUP BY 1) k ON k.spread_key = a.spread_key
      WHERE a.status IN ('DISPATCHED', 'RUNNING')"
expect "$SRC" "... a gang placed whole (placed_at, 2 members DISPATCHED on 2 nodes), one waiting (2 of 3 submitted, gang_incomplete)" \
    "2 t 2 2 2 f, 3 f 2 0 0 t" \
    "SELECT string_agg(format('%s %s %s %s %s %s', g.gang_size, g.placed_at IS NOT NULL, m.members, m.dispatched, m.nodes,
                              m.incomplete), ', ' ORDER BY g.gang_size)
       FROM sched.gang g CROSS JOIN LATERAL (
            SELECT count(*) AS members, count(*) FILTER (WHERE r.state = 'DISPATCHED' AND a.status = 'DISPATCHED') AS dispatched,
                   count(DISTINCT a.node_id) AS nodes,
                   coalesce(bool_and(r.state = 'PENDING' AND r.last_reason LIKE 'gang_incomplete: gang % has 2 of 3 members submitted'), false) AS incomplete
              FROM sched.request r LEFT JOIN sched.attempt a ON a.attempt_id = r.attempt_id WHERE r.gang_id = g.gang_id) m"
expect "$SRC" "... a PREEMPTED attempt (it was RUNNING), its CANCEL command, its step requeued PENDING with max_attempts + 1" \
    "1 t 1 PENDING t" \
    "SELECT count(*), bool_and(a.started_at IS NOT NULL),
            (SELECT count(*) FROM sched.command c WHERE c.attempt_id = a.attempt_id AND c.kind = 'CANCEL'),
            n.state, n.max_attempts = r.max_attempts + 1
       FROM sched.attempt a JOIN sched.request r USING (request_id)
       JOIN sched.request n ON n.step_id = r.step_id AND n.attempt_number = r.attempt_number + 1
      WHERE a.status = 'PREEMPTED' GROUP BY a.attempt_id, n.state, n.max_attempts, r.max_attempts"
expect "$SRC" "... a request holding the room its preemption freed on n1 (PENDING, for an hour from the preemption), in its node's and worker's counters" \
    "1 n1 PENDING t t t" \
    "SELECT count(*), min(r.held_node_id), min(r.state),
            bool_and(r.held_until = (SELECT a.finished_at FROM sched.attempt a WHERE a.status = 'PREEMPTED') + interval '1 hour'),
            bool_and((n.live_attempts, n.reserved_cpu_millis, n.reserved_memory_mb, n.reserved_gpus) =
                     (s.live + 1, s.cpu + r.reserve_cpu_millis, s.mem + r.reserve_memory_mb, s.gpus + r.reserve_gpus)
                     AND r.reserve_cpu_millis > 0 AND r.reserve_memory_mb > 0 AND r.reserve_gpus > 0),
            bool_and(w.live_attempts = w.slots AND w.node_id = r.held_node_id AND
                     w.live_attempts = 1 + (SELECT count(*) FROM sched.attempt a WHERE a.worker_id = w.worker_id
                                                                               AND a.status IN ('DISPATCHED', 'RUNNING')))
       FROM sched.request r JOIN sched.node n ON n.node_id = r.held_node_id JOIN sched.worker w ON w.worker_id = r.held_worker_id
      CROSS JOIN LATERAL (SELECT count(*)::int AS live, coalesce(sum(a.reserve_cpu_millis), 0)::int AS cpu,
                                 coalesce(sum(a.reserve_memory_mb), 0)::bigint AS mem, coalesce(sum(a.reserve_gpus), 0)::int AS gpus
                            FROM sched.attempt a WHERE a.node_id = n.node_id AND a.status IN ('DISPATCHED', 'RUNNING')) s"
expect "$SRC" "... worker live_attempts and node reservations = sums over the live attempts and the holds" "0 0" "$(counters_sql 1)"
invariants "$SRC" "after the load"

# ---- 2. the busy client, the snapshot, the dumps --------------------------------------------
say "2. busy client, exported snapshot, pg_dump -Fc and -Fp with --snapshot"
read -r STREAM_W STREAM_G < <(value "$SRC" "SELECT worker_id, generation FROM sched.worker WHERE node_id = 'n5' AND capability = 'stream'")
[ -n "$STREAM_W" ] || fail "no stream worker in $SRC"

# busy_client: one session as sched_dump_busy, in lock step: every round is written, then
# its end is awaited; rounds go on until $WORK/busy.stop exists.  $WORK/busy.rounds holds
# the number of rounds done.
busy_client() {
    trap - EXIT
    local round=0 line
    coproc BUSYSQL { exec psql -X -q -At -v ON_ERROR_STOP=1 -U sched_dump_busy -d "$SRC" 2>&1; }
    local to=${BUSYSQL[1]} from=${BUSYSQL[0]}
    printf '%s\n' "SET client_min_messages = warning;" \
        "CREATE TEMP TABLE busy_started (attempt_id uuid, lease_version bigint);" >&"$to"
    while [ ! -e "$WORK/busy.stop" ]; do
        round=$((round + 1))
        cat >&"$to" <<SQL
SELECT sched.submit(gen_random_uuid(), gen_random_uuid(), 'stream', '1',
                    tenant => (ARRAY['default', 'initech'])[1 + $round % 2], priority => $round % 3,
                    reserve_cpu_millis => 500, reserve_memory_mb => 256, payload => '{"round": $round}') IS NOT NULL;
SELECT count(*) FROM sched.dispatch_next(2, capability => 'stream');
SELECT count(sched.finish_attempt(attempt_id, lease_version,
                                  CASE WHEN $round % 4 = 0 THEN 'FAILED' ELSE 'SUCCEEDED' END))
  FROM busy_started;
TRUNCATE busy_started;
INSERT INTO busy_started SELECT attempt_id, lease_version
  FROM sched.poll_commands('$STREAM_W', $STREAM_G, 10) WHERE kind = 'START';
SELECT count(sched.start_attempt(attempt_id, lease_version)) FROM busy_started;
\\echo busy-round-$round
SQL
        line=""
        while IFS= read -r -t "$TIMEOUT" line <&"$from"; do
            [ "$line" = "busy-round-$round" ] && break
            printf '%s\n' "$line" >>"$WORK/busy.out"
        done
        [ "$line" = "busy-round-$round" ] || { echo "round $round did not end: ${line:-no answer}" >>"$WORK/busy.out"; exit 1; }
        echo "$round" >"$WORK/busy.rounds.tmp" && mv "$WORK/busy.rounds.tmp" "$WORK/busy.rounds"
    done
    exec {to}>&-           # psql ends at the end of its input
    exit 0
}
busy_rounds() { cat "$WORK/busy.rounds" 2>/dev/null || echo 0; }
wait_busy() { # wait_busy N: until the busy client has done N rounds
    local until; until=$(deadline)
    while [ "$(busy_rounds)" -lt "$1" ]; do
        kill -0 "$BUSY_PID" 2>/dev/null || { cat "$WORK/busy.out" >&2 2>/dev/null; fail "the busy client stopped (above)"; }
        [ "$SECONDS" -lt "$until" ] || fail "the busy client did not reach $1 rounds in ${TIMEOUT}s (hang?)"
        sleep 0.05
    done
}
: >"$WORK/busy.out"
busy_client &
BUSY_PID=$!
wait_busy 5

# the holder: a REPEATABLE READ transaction whose snapshot the dumps use
coproc HOLDER { exec psql -X -q -At -F '|' -v ON_ERROR_STOP=1 -d "$SRC" 2>&1; }
HOLDER_PROC=$HOLDER_PID HOLDER_TO=${HOLDER[1]} HOLDER_FROM=${HOLDER[0]}
holder() { # holder SQL: runs SQL in the holder's session; its output on stdout
    local line=""
    kill -0 "$HOLDER_PROC" 2>/dev/null || fail "the holder session has ended"
    printf '%s\n\\echo holder-done\n' "$1" >&"$HOLDER_TO"
    while IFS= read -r -t "$TIMEOUT" line <&"$HOLDER_FROM"; do
        [ "$line" = "holder-done" ] && return 0
        printf '%s\n' "$line"
    done
    fail "the holder session did not answer (it failed or hung); last: ${line:-nothing}"
}

# the digests: every table of the extension but tenant_live row by row; tenant_live as
# its live count per tenant (its rows are per backend slot: the restore's slots differ);
# the maximum of every column a sequence of the extension is owned by
cat >"$WORK/digest.sql" <<'SQL'
SELECT format($f$SELECT 'table %1$s', count(*), coalesce(md5(string_agg(t::text, E'\n' ORDER BY t::text)), '-') FROM %1$s t$f$, c.oid::regclass)
  FROM pg_class c JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid
 WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'pg_sched')
   AND c.relkind = 'r' AND c.oid <> 'sched.tenant_live'::regclass
 ORDER BY c.oid::regclass::text \gexec
SELECT 'tenant_live', coalesce(string_agg(tenant || '=' || live, ' ' ORDER BY tenant), '-')
  FROM (SELECT tenant, sum(live) AS live FROM sched.tenant_live GROUP BY tenant HAVING sum(live) <> 0) s;
SELECT format($f$SELECT 'max %1$s.%2$s', coalesce(max(%2$I), 0) FROM %1$s$f$, a.attrelid::regclass, a.attname)
  FROM pg_class s JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = s.oid AND d.deptype = 'a'
  JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
 WHERE s.relkind = 'S' AND s.relnamespace = 'sched'::regnamespace
 ORDER BY 1 \gexec
SQL
# the sequences of the extension: name, last_value, is_called (not transactional: read now)
cat >"$WORK/seq.sql" <<'SQL'
SELECT format($f$SELECT 'seq %1$s', last_value, is_called FROM %1$s$f$, c.oid::regclass)
  FROM pg_class c JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid
 WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'pg_sched') AND c.relkind = 'S'
 ORDER BY 1 \gexec
SQL

SNAPSHOT=$(holder "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT pg_export_snapshot();")
[[ "$SNAPSHOT" =~ ^[0-9A-F-]+$ ]] || fail "pg_export_snapshot() answered '$SNAPSHOT'"
ROUNDS_AT_EXPORT=$(busy_rounds)
holder "\\i $WORK/seq.sql" >"$WORK/seq_before.txt"
holder "\\i $WORK/digest.sql" >"$WORK/digest_src.txt"
grep -q '^table sched.attempt|' "$WORK/digest_src.txt" || { cat "$WORK/digest_src.txt" >&2; fail "the source digest is incomplete (above)"; }
say "snapshot $SNAPSHOT after $ROUNDS_AT_EXPORT busy rounds: $(grep -c '^table' "$WORK/digest_src.txt") tables, $(grep '^table sched.attempt|' "$WORK/digest_src.txt" | cut -d'|' -f2) attempts; $(grep '^tenant_live' "$WORK/digest_src.txt" | cut -d'|' -f2)"
out=$(holder "\\i $INVARIANTS" 2>&1) || true
grep -q 'invariants violated' <<<"$out" && { printf '%s\n' "$out" >&2; fail "invariants.sql is violated in the dump's snapshot (above)"; }
pass "invariants.sql holds in the dump's snapshot ($(grep -c 'invariant .*: ok' <<<"$out") invariants)"
wait_busy $((ROUNDS_AT_EXPORT + 5))      # the source moves on after the snapshot

pg_dump -Fc --snapshot="$SNAPSHOT" -d "$SRC" -f "$WORK/src.dump" >"$WORK/dump_c.out" 2>&1 \
    || { cat "$WORK/dump_c.out" >&2; fail "pg_dump -Fc failed (above)"; }
[ ! -s "$WORK/dump_c.out" ] || { cat "$WORK/dump_c.out" >&2; fail "pg_dump -Fc reported something (above)"; }
pg_dump -Fp --snapshot="$SNAPSHOT" -d "$SRC" -f "$WORK/src.sql" >"$WORK/dump_p.out" 2>&1 \
    || { cat "$WORK/dump_p.out" >&2; fail "pg_dump -Fp failed (above)"; }
[ ! -s "$WORK/dump_p.out" ] || { cat "$WORK/dump_p.out" >&2; fail "pg_dump -Fp reported something (above)"; }
ROUNDS_AFTER_DUMP=$(busy_rounds)
holder "\\i $WORK/seq.sql" >"$WORK/seq_after.txt"
holder "COMMIT;" >/dev/null
exec {HOLDER_TO}>&-     # psql ends at the end of its input
HOLDER_PROC=""
pass "pg_dump -Fc and -Fp with the exported snapshot, busy rounds $ROUNDS_AT_EXPORT..$ROUNDS_AFTER_DUMP meanwhile"

touch "$WORK/busy.stop"
rc=0; wait "$BUSY_PID" || rc=$?
BUSY_PID=""
[ "$rc" -eq 0 ] || { cat "$WORK/busy.out" >&2; fail "the busy client failed (exit $rc, above)"; }
! grep -q 'ERROR' "$WORK/busy.out" || { cat "$WORK/busy.out" >&2; fail "the busy client got errors (above)"; }
pass "the busy client ran $(busy_rounds) rounds without an error (submit, dispatch_next, finish, poll, start)"

"${PSQL[@]}" -At -F '|' -d "$SRC" -f "$WORK/digest.sql" >"$WORK/digest_src_now.txt"
changed=$(diff "$WORK/digest_src.txt" "$WORK/digest_src_now.txt" | grep -c '^>' || true)
[ "$changed" -gt 0 ] || fail "the source did not change after the snapshot: the test would not see a dump that ignores its snapshot"
pass "the source changed after the snapshot ($changed digest lines differ now: $(diff "$WORK/digest_src.txt" "$WORK/digest_src_now.txt" | sed -n 's/^> \([^|]*\)|.*/\1/p' | paste -sd, -))"

# what each dump recorded for the sequences: "seq NAME|VALUE|t/f" lines
dumped_seqs() { # dumped_seqs SQLFILE
    sed -nE "s/^SELECT pg_catalog\.setval\('([^']+)', ([0-9]+), (true|false)\);$/seq \1|\2|\3/p" "$1" \
        | sed -e 's/|true$/|t/' -e 's/|false$/|f/' | sort
}
pg_restore -f "$WORK/src_c.sql" "$WORK/src.dump"
dumped_seqs "$WORK/src_c.sql" >"$WORK/seq_dump_c.txt"
dumped_seqs "$WORK/src.sql" >"$WORK/seq_dump_p.txt"
for f in seq_dump_c seq_dump_p; do
    [ "$(cut -d'|' -f1 "$WORK/$f.txt")" = "$(cut -d'|' -f1 "$WORK/seq_before.txt" | sort)" ] \
        || fail "$f: the dump's sequences ($(cut -d'|' -f1 "$WORK/$f.txt" | paste -sd,)) are not the extension's ($(cut -d'|' -f1 "$WORK/seq_before.txt" | paste -sd,))"
    while IFS='|' read -r name v _; do
        lo=$(grep "^$name|" "$WORK/seq_before.txt" | cut -d'|' -f2)
        hi=$(grep "^$name|" "$WORK/seq_after.txt" | cut -d'|' -f2)
        [ "$lo" -le "$v" ] && [ "$v" -le "$hi" ] \
            || fail "$f: ${name#seq } is $v in the dump, outside what it was from the export ($lo) to the end of the dumps ($hi)"
    done <"$WORK/$f.txt"
done
pass "both dumps hold every sequence of the extension, each between its values at the export and after the dumps"
grep -q 'tenant_live' <(pg_restore -l "$WORK/src.dump" | grep 'TABLE DATA') \
    && fail "the dump holds the rows of sched.tenant_live (derived: its triggers rebuild it on restore)"
pass "the dump has the data of $(pg_restore -l "$WORK/src.dump" | grep -c 'TABLE DATA sched') tables, not sched.tenant_live's"
# the digest (every table of the extension but tenant_live, found from the catalog) covers
# exactly the tables whose data the dump holds, sched.gang (issue 15) and its 2 gangs too
dumped=$(pg_restore -l "$WORK/src.dump" | sed -nE 's/^[0-9]+; [0-9]+ [0-9]+ TABLE DATA sched ([^ ]+) .*/sched.\1/p' | sort | paste -sd' ')
digested=$(sed -n 's/^table \([^|]*\)|.*/\1/p' "$WORK/digest_src.txt" | sort | paste -sd' ')
[ "$dumped" = "$digested" ] || fail "the dump has the data of ($dumped), the digest covers ($digested): both must be every table of the extension but tenant_live"
grep -q '^table sched\.gang|2|' "$WORK/digest_src.txt" \
    || fail "the digest of the snapshot does not hold sched.gang's 2 rows: $(grep '^table sched.gang' "$WORK/digest_src.txt" || echo 'no sched.gang line')"
pass "the digest covers exactly the tables whose data the dump holds, sched.gang's 2 gangs included"

# ---- 3. restores -----------------------------------------------------------------------
say "3. restores: pg_restore, --single-transaction --exit-on-error, -j 2, psql -f, --data-only as replica"
restore() { # restore DB WHAT COMMAND...: must exit 0 and say nothing on stdout or stderr
    local db=$1 what=$2; shift 2
    local rc=0
    "$@" >"$WORK/restore_$db.out" 2>&1 || rc=$?
    [ "$rc" -eq 0 ] || { cat "$WORK/restore_$db.out" >&2; fail "$what into $db exited with $rc (above)"; }
    [ ! -s "$WORK/restore_$db.out" ] || { cat "$WORK/restore_$db.out" >&2; fail "$what into $db reported something (above)"; }
    pass "$what into $db: exit 0, no output"
}
for db in "${TARGETS[@]}"; do
    fresh_db "$db"
    case $db in
        sched_dump_r_plain)
            restore "$db" "pg_restore -d" pg_restore -d "$db" "$WORK/src.dump" ;;
        sched_dump_r_single)
            restore "$db" "pg_restore --single-transaction --exit-on-error" \
                pg_restore --single-transaction --exit-on-error -d "$db" "$WORK/src.dump" ;;
        sched_dump_r_jobs)
            restore "$db" "pg_restore -j 2" pg_restore -j 2 -d "$db" "$WORK/src.dump" ;;
        sched_dump_r_sql)
            restore "$db" "psql -1 -f (plain format)" \
                psql -X -q -o /dev/null -1 -v ON_ERROR_STOP=1 -d "$db" -f "$WORK/src.sql" ;;
        sched_dump_r_data)
            "${PSQL[@]}" -d "$db" -c "CREATE EXTENSION pg_sched"
            restore "$db" "pg_restore --data-only --single-transaction --exit-on-error (session_replication_role replica)" \
                env PGOPTIONS='-c session_replication_role=replica' \
                pg_restore --data-only --single-transaction --exit-on-error -d "$db" "$WORK/src.dump" ;;
        *) fail "no restore for $db" ;;
    esac
done

check_restored() { # check_restored DB SEQFILE: the restored database against the snapshot
    local db=$1 seqs=$2 d expected
    "${PSQL[@]}" -At -F '|' -d "$db" -f "$WORK/digest.sql" >"$WORK/digest_$db.txt"
    d=$(diff "$WORK/digest_src.txt" "$WORK/digest_$db.txt") \
        || fail "$db differs from the dump's snapshot (< snapshot, > restored):
$d"
    pass "$db: every table's rows, tenant_live per tenant and the id maxima are the snapshot's ($(grep -c '^table' "$WORK/digest_$db.txt") tables)"
    expect "$db" "$db: tenant_live sums per tenant = the live attempts per tenant" "" \
        "SELECT string_agg(format('%s: %s/%s', coalesce(c.tenant, a.tenant), c.live, a.live), ', ')
           FROM (SELECT tenant, sum(live) AS live FROM sched.tenant_live GROUP BY tenant) c
           FULL JOIN (SELECT tenant, count(*) AS live FROM sched.attempt WHERE status IN ('DISPATCHED', 'RUNNING') GROUP BY tenant) a
             ON a.tenant = c.tenant
          WHERE coalesce(c.live, 0) <> coalesce(a.live, 0)"
    expect "$db" "$db: worker live_attempts and node reservations = sums over the live attempts and the holds" "0 0" \
        "$(counters_sql 1)"
    # spread (issue 15): the restored live attempts of each key count on their nodes, as
    # placement reads them (rank_candidates' spread_matches; its heartbeat_ttl, as the
    # restored database has the default until step 4)
    expected=$(value "$db" "SELECT string_agg(format('%s %s %s', k.k, w.node_id,
                                  (SELECT count(*) FROM sched.attempt a WHERE a.spread_key = k.k AND a.node_id = w.node_id
                                                                         AND a.status IN ('DISPATCHED', 'RUNNING'))), ', ' ORDER BY k.k, w.node_id)
                              FROM (SELECT DISTINCT spread_key FROM sched.request WHERE spread_key IS NOT NULL) k(k)
                              CROSS JOIN sched.worker w WHERE w.capability = 'place'")
    [[ "$expected" =~ [1-9]$ ]] || fail "$db: no live attempt of a spread key on a place worker's node: '$expected'"
    expect "$db" "$db: rank_candidates counts each spread key's restored live attempts on each node ($expected)" "$expected" \
        "SELECT string_agg(format('%s %s %s', k.k, c.node_id, c.spread_matches), ', ' ORDER BY k.k, c.node_id)
           FROM (SELECT DISTINCT spread_key FROM sched.request WHERE spread_key IS NOT NULL) k(k),
                LATERAL sched.rank_candidates('place', '1', heartbeat_ttl => '1 day', spread_key => k.k) c"
    "${PSQL[@]}" -At -F '|' -d "$db" -f "$WORK/seq.sql" | sort >"$WORK/seq_$db.txt"
    d=$(diff "$seqs" "$WORK/seq_$db.txt") || fail "$db: the sequences are not what the dump recorded (< dump, > restored):
$d"
    # each at least the maximum of its column: the next id is a new one
    while IFS='|' read -r name v _; do
        local col max
        col=$(value "$db" "SELECT a.attrelid::regclass || '.' || a.attname FROM pg_depend d
                             JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
                            WHERE d.classid = 'pg_class'::regclass AND d.objid = '${name#seq }'::regclass AND d.deptype = 'a'")
        [ -n "$col" ] || continue
        max=$(grep "^max $col|" "$WORK/digest_$db.txt" | cut -d'|' -f2)
        [ "$v" -ge "${max:-0}" ] || fail "$db: ${name#seq } is $v, below max($col) $max: the next id would be a duplicate"
    done <"$WORK/seq_$db.txt"
    pass "$db: every sequence holds the dump's value ($(sed 's/^seq sched\.//' "$WORK/seq_$db.txt" | cut -d'|' -f1,2 | tr '|' '=' | paste -sd' ')), at least its column's maximum"
    invariants "$db" "after the restore"
    expect "$db" "$db: a fresh session's fleet mirror of each capability agrees with the tables" "0" \
        "SELECT sum(sched._fleet_mirror_check(c)) FROM (SELECT DISTINCT capability FROM sched.worker) w(c)"
    expect "$db" "$db: the triggers on attempt, node and worker are still ENABLE ALWAYS" "A" \
        "SELECT string_agg(DISTINCT tgenabled::text, ',') FROM pg_trigger
          WHERE tgrelid IN ('sched.attempt'::regclass, 'sched.node'::regclass, 'sched.worker'::regclass) AND NOT tgisinternal"
}
for db in "${TARGETS[@]}"; do
    case $db in sched_dump_r_sql) check_restored "$db" "$WORK/seq_dump_p.txt" ;;
                *)                check_restored "$db" "$WORK/seq_dump_c.txt" ;; esac
done

# ---- 4. work goes on ----------------------------------------------------------------------
say "4. work goes on in each restored database"
continue_work() { # continue_work DB
    local db=$1 max_rid max_cid max_tid n_req n_cmd n_tl expected got x x_lease n_reap role w g
    "${PSQL[@]}" -d postgres -c "ALTER DATABASE $db SET sched.heartbeat_ttl = '1h'"
    read -r max_rid max_cid max_tid n_req n_cmd n_tl < <(value "$db" "SELECT
        (SELECT max(request_id) FROM sched.request), (SELECT max(command_id) FROM sched.command),
        (SELECT max(timeline_id) FROM sched.timeline), (SELECT count(*) FROM sched.request),
        (SELECT count(*) FROM sched.command), (SELECT count(*) FROM sched.timeline)")
    "${PSQL[@]}" -d "$db" -c "CREATE TABLE public.dump_restored_live AS
        SELECT a.attempt_id, a.lease_version, a.status, a.worker_id, a.execution_id, a.lease_expires_at, w.registered_by::text AS role
          FROM sched.attempt a JOIN sched.worker w USING (worker_id) WHERE a.status IN ('DISPATCHED', 'RUNNING')"

    # the workers poll what was left undelivered for their live attempts, and nothing else
    expected=$(value "$db" "SELECT coalesce(string_agg(c.command_id::text, ' ' ORDER BY c.command_id), '-')
        FROM sched.command c JOIN sched.worker w ON w.worker_id = c.worker_id AND c.worker_generation <= w.generation
        JOIN sched.attempt a ON a.attempt_id = c.attempt_id
       WHERE c.delivered_at IS NULL AND a.status IN ('DISPATCHED', 'RUNNING') AND w.registered_by = 'sched_dump_worker'::regrole")
    [ "$expected" != "-" ] || fail "$db: no undelivered command for a live attempt was restored: nothing to check delivery with"
    "${PSQL[@]}" -d "$db" -c "CREATE TABLE public.dump_workers AS SELECT worker_id, generation FROM sched.worker
                                WHERE registered_by = 'sched_dump_worker'::regrole;
                              GRANT SELECT ON public.dump_workers TO sched_dump_worker;
                              GRANT SELECT ON public.dump_restored_live TO sched_dump_worker, sched_dump_busy"
    got=$(value "$db" "SELECT coalesce(string_agg(p.command_id::text, ' ' ORDER BY p.command_id), '-')
                         FROM public.dump_workers w, LATERAL sched.poll_commands(w.worker_id, w.generation, 100) p" sched_dump_worker)
    [ "$got" = "$expected" ] || fail "$db: the workers polled commands '$got', expected the undelivered ones '$expected'"
    pass "$db: the workers poll exactly the restored undelivered commands of their live attempts ($(wc -w <<<"$expected"))"

    # issue 15: the restored hold is taken by its request's next dispatch, and then the
    # counters are the live attempts' alone
    local held h_node h_worker p p_lease gang_b third
    read -r held h_node h_worker p p_lease gang_b < <(value "$db" "SELECT r.request_id, r.held_node_id, r.held_worker_id,
            (SELECT attempt_id FROM sched.attempt WHERE status = 'PREEMPTED'), (SELECT lease_version FROM sched.attempt WHERE status = 'PREEMPTED'),
            (SELECT gang_id FROM sched.gang WHERE placed_at IS NULL)
       FROM sched.request r WHERE r.held_node_id IS NOT NULL")
    [ -n "$held" ] && [ -n "$p" ] && [ -n "$gang_b" ] \
        || fail "$db: expected a restored request holding room ('$held'), a PREEMPTED attempt ('$p') and a waiting gang ('$gang_b')"
    expect "$db" "$db: the held request's next dispatch (as the scheduler) takes the held room: DISPATCHED on $h_node, the held worker" \
        "DISPATCHED $h_node $h_worker" \
        "SELECT outcome, node_id, worker_id FROM sched.dispatch_attempt($held)" sched_dump_app
    expect "$db" "$db: ... its held_* are cleared, and no request holds room" "DISPATCHED 0" \
        "SELECT state, (SELECT count(*) FROM sched.request
                         WHERE held_node_id IS NOT NULL OR held_worker_id IS NOT NULL OR held_until IS NOT NULL)
           FROM sched.request WHERE request_id = $held"
    expect "$db" "$db: ... worker live_attempts and node reservations = sums over the live attempts alone" "0 0" "$(counters_sql 0)"
    # a restored PREEMPTED attempt stays ended: its worker's finish is refused
    refused "$db" "$db: finish_attempt of a restored PREEMPTED attempt, by its worker with its lease_version, is refused (55000: it is PREEMPTED)" 55000 \
        "SELECT sched.finish_attempt('$p', $p_lease, 'SUCCEEDED')" sched_dump_worker "it is PREEMPTED"
    expect "$db" "$db: ... it stays PREEMPTED" "PREEMPTED" "SELECT status FROM sched.attempt WHERE attempt_id = '$p'"
    # the waiting gang: its third member, and one dispatch places the gang whole
    third=$(value "$db" "SELECT sched.submit(md5('dump-exec-gang')::uuid, md5('dump-step-gang-b-3')::uuid, 'gang', '1',
                             tenant => 'acme', reserve_cpu_millis => 100, reserve_memory_mb => 64,
                             gang_id => '$gang_b', gang_size => 3)" sched_dump_app 2>&1) \
        || fail "$db: submitting the waiting gang's third member failed: $third"
    expect "$db" "$db: the waiting gang's third member is submitted; one dispatch_attempt places the gang whole" \
        "DISPATCHED gang $gang_b placed whole: 3 members" \
        "SELECT outcome, detail FROM sched.dispatch_attempt($third)" sched_dump_app
    expect "$db" "$db: ... 3 members DISPATCHED with 3 attempts, dispatched at one time, placed_at set" "3 3 1 t" \
        "SELECT count(*) FILTER (WHERE r.state = 'DISPATCHED'), count(a.attempt_id) FILTER (WHERE a.status = 'DISPATCHED'),
                count(DISTINCT a.dispatched_at), bool_and(g.placed_at IS NOT NULL)
           FROM sched.gang g JOIN sched.request r ON r.gang_id = g.gang_id LEFT JOIN sched.attempt a ON a.attempt_id = r.attempt_id
          WHERE g.gang_id = '$gang_b'"

    # a stale lease_version is refused; the restored one is valid
    read -r x x_lease < <(value "$db" "SELECT attempt_id, lease_version FROM public.dump_restored_live
                                         WHERE role = 'sched_dump_worker' ORDER BY attempt_id LIMIT 1")
    refused "$db" "$db: finish_attempt with a stale lease_version is refused (55000)" 55000 \
        "SELECT sched.finish_attempt('$x', $x_lease + 1, 'SUCCEEDED')" sched_dump_worker
    # the reap target: the restored live attempt (of an open execution, with attempts left)
    # whose lease ends first; a renew target: another one; every other one is finished
    read -r x x_lease < <(value "$db" "SELECT l.attempt_id, l.lease_expires_at FROM public.dump_restored_live l
        JOIN sched.execution e USING (execution_id) JOIN sched.attempt a USING (attempt_id)
        JOIN sched.request r ON r.request_id = a.request_id
       WHERE e.status IN ('QUEUED', 'RUNNING') AND a.attempt_number < r.max_attempts
       ORDER BY l.lease_expires_at, l.attempt_id LIMIT 1")
    [ -n "$x" ] || fail "$db: no restored live attempt to reap"
    "${PSQL[@]}" -d "$db" -c "ALTER TABLE public.dump_restored_live ADD COLUMN part text;
        UPDATE public.dump_restored_live SET part = 'reap' WHERE attempt_id = '$x';
        UPDATE public.dump_restored_live SET part = 'renew' WHERE attempt_id =
            (SELECT attempt_id FROM public.dump_restored_live WHERE part IS NULL AND role = 'sched_dump_worker'
              ORDER BY lease_expires_at DESC, attempt_id LIMIT 1);
        UPDATE public.dump_restored_live SET part = 'finish' WHERE part IS NULL"
    # as each attempt's worker's role: the DISPATCHED ones start, then all finish (one in
    # four FAILED, which requeues the step or, with no attempt left, fails the execution)
    for role in sched_dump_worker sched_dump_busy; do
        got=$(value "$db" "SELECT count(sched.start_attempt(l.attempt_id, l.lease_version)) FROM public.dump_restored_live l
                            WHERE l.part = 'finish' AND l.role = '$role' AND l.status = 'DISPATCHED'" "$role" 2>&1) \
            || fail "$db: starting the restored DISPATCHED attempts as $role failed: $got"
        got=$(value "$db" "SELECT count(*), string_agg(DISTINCT o, ',' ORDER BY o) FROM (
                SELECT sched.finish_attempt(l.attempt_id, l.lease_version,
                           CASE WHEN row_number() OVER (ORDER BY l.attempt_id) % 4 = 0 THEN 'FAILED' ELSE 'SUCCEEDED' END,
                           '{\"after\": \"restore\"}') AS o
                  FROM public.dump_restored_live l WHERE l.part = 'finish' AND l.role = '$role') f" "$role" 2>&1) \
            || fail "$db: finishing the restored live attempts as $role failed: $got"
        pass "$db: $role started and finished its ${got%% *} restored live attempts with their restored lease_version (${got#* })"
    done
    expect "$db" "$db: the finished ones are no longer live and have finished_at" "0" \
        "SELECT count(*) FROM public.dump_restored_live l JOIN sched.attempt a USING (attempt_id)
          WHERE l.part = 'finish' AND (a.status IN ('DISPATCHED', 'RUNNING') OR a.finished_at IS NULL)"
    expect "$db" "$db: renew_lease accepts a restored attempt's lease_version (its lease never shrinks)" "t" \
        "SELECT sched.renew_lease(l.attempt_id, l.lease_version) >= l.lease_expires_at
           FROM public.dump_restored_live l WHERE l.part = 'renew'" sched_dump_worker
    # reap as the superuser, at the end of x's lease (a time in the future)
    n_reap=$(value "$db" "SELECT count(*) FROM sched.attempt WHERE status IN ('DISPATCHED', 'RUNNING')
                            AND lease_expires_at < '$x_lease'::timestamptz + interval '1 microsecond'")
    expect "$db" "$db: reap_expired at the end of a restored lease reaps the $n_reap attempt(s) whose lease ends before it" \
        "$n_reap" "SELECT sched.reap_expired('$x_lease'::timestamptz + interval '1 microsecond')"
    expect "$db" "$db: the reaped attempt is LOST and its step requeued with a new request_id" "LOST PENDING t" \
        "SELECT a.status, r.state, r.request_id > $max_rid FROM sched.attempt a
           JOIN sched.request r ON r.step_id = a.step_id AND r.attempt_number = a.attempt_number + 1
          WHERE a.attempt_id = '$x'"

    # a restored claim dispatches with its claim_id
    expect "$db" "$db: a restored claim is dispatched with its claim_id" "DISPATCHED" \
        "SELECT (sched.dispatch_attempt(r.request_id, r.claim_id)).outcome FROM sched.request r
          WHERE r.state = 'CLAIMED' ORDER BY r.request_id LIMIT 1" sched_dump_app
    # the fleet grows (a node, and a worker of a capability of its own), new work is
    # submitted for it, and one dispatch_next places it together with restored requests
    value "$db" "SELECT (sched.upsert_node('n6', labels => '{\"zone\":\"n\"}', cpu_millis => 4000, memory_mb => 8192)).node_id" \
        sched_dump_admin >/dev/null
    read -r w g < <(value "$db" "SELECT worker_id, generation FROM sched.register_worker('n6', 'after', ARRAY['1'], 4)" sched_dump_worker)
    value "$db" "SELECT count(sched.submit(md5('$db-exec-' || (i % 3))::uuid, md5('$db-step-' || i)::uuid, 'after', '1',
            tenant => (ARRAY['acme', 'globex', 'initech'])[1 + i % 3], reserve_cpu_millis => 250))
        FROM generate_series(1, 6) i" sched_dump_app >/dev/null
    got=$(value "$db" "SELECT count(*) FILTER (WHERE request_id > $max_rid), count(*) FILTER (WHERE request_id <= $max_rid)
                         FROM sched.dispatch_next(50) WHERE outcome = 'DISPATCHED'" sched_dump_app)
    [ "${got%% *}" -gt 0 ] && [ "${got#* }" -gt 0 ] \
        || fail "$db: dispatch_next placed $got new/restored requests: expected some of each"
    pass "$db: dispatch_next places new and restored requests (${got%% *} new, ${got#* } restored)"
    expect "$db" "$db: the new worker polls a START command for each new attempt of its own" \
        "$(value "$db" "SELECT count(*) FROM sched.attempt WHERE worker_id = '$w'")" \
        "SELECT count(*) FILTER (WHERE kind = 'START') FROM sched.poll_commands('$w', $g, 100)" sched_dump_worker
    expect "$db" "$db: a fresh session's fleet mirror of each capability agrees with the tables after the fleet changed" "0" \
        "SELECT sum(sched._fleet_mirror_check(c)) FROM (SELECT DISTINCT capability FROM sched.worker) w(c)"

    # a worker registers again: the same id, generation + 1, still its role's
    read -r w g < <(value "$db" "SELECT worker_id, generation FROM sched.worker WHERE node_id = 'n1' AND capability = 'train'")
    expect "$db" "$db: register_worker again: the same worker, generation $((g + 1))" "$w $((g + 1))" \
        "SELECT worker_id, generation FROM sched.register_worker('n1', 'train', ARRAY['1.0', '1.1'], 2)" sched_dump_worker
    expect "$db" "$db: ... still registered by its role" "sched_dump_worker" \
        "SELECT registered_by FROM sched.worker WHERE worker_id = '$w'"
    refused "$db" "$db: ... its old generation $g is refused (55000)" 55000 \
        "SELECT * FROM sched.poll_commands('$w', $g)" sched_dump_worker
    expect "$db" "$db: ... its new generation heartbeats" "READY" \
        "SELECT runtime_state FROM sched.heartbeat('$w', $((g + 1)))" sched_dump_worker

    expect "$db" "$db: no new row took an id at or below the restored maxima; new ones were made" "$n_req $n_cmd $n_tl t t t" \
        "SELECT (SELECT count(*) FROM sched.request WHERE request_id <= $max_rid),
                (SELECT count(*) FROM sched.command WHERE command_id <= $max_cid),
                (SELECT count(*) FROM sched.timeline WHERE timeline_id <= $max_tid),
                (SELECT count(*) FROM sched.request) > $n_req, (SELECT count(*) FROM sched.command) > $n_cmd,
                (SELECT count(*) FROM sched.timeline) > $n_tl"
    expect "$db" "$db: the diagnostics answer (pending, node_overview, queue_stats, attempt_overview)" "t" \
        "SELECT (SELECT count(*) FROM sched.pending) > 0 AND (SELECT count(*) FROM sched.node_overview) = (SELECT count(*) FROM sched.node)
            AND (SELECT count(*) FROM sched.queue_stats) > 0
            AND (SELECT count(*) FROM sched.attempt_overview) = (SELECT count(*) FROM sched.attempt)"
    invariants "$db" "after work continued"
}
for db in "${TARGETS[@]}"; do continue_work "$db"; done

if [ -z "${SCHED_DUMP_KEEP:-}" ]; then
    for db in "$SRC" "${TARGETS[@]}"; do
        "${PSQL[@]}" -d postgres -c "DROP DATABASE $db WITH (FORCE)"
    done
    say "databases dropped"
else
    say "SCHED_DUMP_KEEP: databases $SRC ${TARGETS[*]} and $WORK kept"
fi
FAILED=0
echo "dump: $CHECKS checks passed"
