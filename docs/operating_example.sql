/*
 * docs/operating_example.sql — builds the fleet and queue of the README's section
 * "Operating pg_sched" and runs the queries that section shows: their output is the
 * section's sample.
 *
 * Run it in a fresh database of a cluster that has pg_sched installed (the defaults of
 * the sched.* settings), for example on the development cluster of test/harness.sh:
 *
 *     bash test/harness.sh up && source .tmp/env
 *     createdb ops_demo
 *     psql -X -d ops_demo -f docs/operating_example.sql
 *
 * and, to run the last part on a hot standby of that cluster as well (see the end; the
 * standby must run with pg_sched in shared_preload_libraries, as the primary does, for
 * example a copy made with pg_basebackup -R and started on another port):
 *
 *     psql -X -d ops_demo -f docs/operating_example.sql -v standby="host=127.0.0.1,127.0.0.1 \
 *          port=$PGPORT,$STANDBY_PORT dbname=ops_demo user=alice target_session_attrs=prefer-standby"
 *
 * The fleet (capability render@1.0 unless said otherwise):
 *   node-a   tier=fast,zone=eu-1  w100   4 CPUs   8 GB   render, 4 slots; 2 live attempts
 *   node-b   -                    w150   8 CPUs  16 GB   render, 4 slots
 *   node-c   -                    w100  16 CPUs  32 GB   render, 4 slots; last heartbeat 90 s ago
 *   node-d   DRAINING             w100   8 CPUs  16 GB   render, 4 slots; 1 live attempt
 *   gpu-1    gpu=a100             w100   8 CPUs  64 GB   2 GPUs; render@1.0,2.0 (4 slots) and
 *                                                        train@1 (2 slots); a training run
 *                                                        holds both GPUs
 * (node-a, node-b, node-c are the worked example of sql/worked_example.sql.)
 *
 * The queue: requests 1-6 are the attempts above and the execution
 * e1000000-0000-4000-8000-000000000001 (attempt 1 failed on node-b, the retry succeeded on
 * gpu-1, the application completed it); requests 7-11 wait:
 *    7  acme     render@1.0  prefers tier=fast, min 2 CPUs (the worked example)   eligible
 *    8  globex   render@1.0  priority 5, min 32 CPUs, tried once                  static
 *    9  initech  render@1.0  min 12 CPUs, waiting 20 min                          static
 *   10  acme     train@1     reserves 1 GPU, tried once: both GPUs are held       transient
 *   11  globex   render@3.0  no worker serves 3.0                                 static
 *
 * Only the public functions write to schema sched, each with an explicit `at` (but
 * drain_node, which has none); the script reads sched.worker and sched.request only to
 * find ids.  Every time is relative to the moment the script runs, now(); the fleet is
 * built and queried in one transaction, in which now() does not move, so the README's
 * queries on the views (which answer for now()) all answer for that same moment, and the
 * output is the same at every run except for absolute timestamps and the attempts'
 * random uuids.  The workers heartbeat in rounds, each shortly before the dispatches
 * that need them.
 */

\set ON_ERROR_STOP on
\set superuser :USER
SET client_min_messages = warning;
CREATE EXTENSION pg_sched;
RESET client_min_messages;
SET TIME ZONE 'UTC';
-- the width of the terminal the README's sample assumes (for \x auto below)
\pset columns 120

BEGIN;

-- ---------------------------------------------------------------------------------
-- Nodes and workers (registered 15 minutes ago)
-- ---------------------------------------------------------------------------------
SELECT node_id, management_status, labels, cpu_millis, memory_mb, gpus, weight FROM (
              SELECT (sched.upsert_node('node-a', '{"tier":"fast","zone":"eu-1"}', 4000, 8192, 0, 100)).*
    UNION ALL SELECT (sched.upsert_node('node-b', '{}', 8000, 16384, 0, 150)).*
    UNION ALL SELECT (sched.upsert_node('node-c', '{}', 16000, 32768, 0, 100)).*
    UNION ALL SELECT (sched.upsert_node('node-d', '{}', 8000, 16384, 0, 100)).*
    UNION ALL SELECT (sched.upsert_node('gpu-1', '{"gpu":"a100"}', 8000, 65536, 2, 100)).*
) n ORDER BY node_id;

SELECT w.* FROM (VALUES
    ('node-a', 'render', ARRAY['1.0'], 4, 'aaaaaaaa-0000-4000-8000-000000000001'::uuid),
    ('node-b', 'render', ARRAY['1.0'], 4, 'bbbbbbbb-0000-4000-8000-000000000001'),
    ('node-c', 'render', ARRAY['1.0'], 4, 'cccccccc-0000-4000-8000-000000000001'),
    ('node-d', 'render', ARRAY['1.0'], 4, 'dddddddd-0000-4000-8000-000000000001'),
    ('gpu-1', 'render', ARRAY['1.0', '2.0'], 4, '99999999-0000-4000-8000-000000000001'),
    ('gpu-1', 'train', ARRAY['1'], 2, '99999999-0000-4000-8000-000000000002')
) v(node_id, capability, versions, slots, worker_id),
LATERAL sched.register_worker(v.node_id, v.capability, v.versions, v.slots, v.worker_id,
                              now() - interval '15 min') w
ORDER BY w.worker_id;

-- one heartbeat round: every worker but those excluded, at `at`
PREPARE heartbeat_round(timestamptz, uuid[]) AS
SELECT count(*) AS heartbeats
  FROM sched.worker w0,
       LATERAL sched.heartbeat(w0.worker_id, w0.generation, $1) h
 WHERE w0.worker_id <> ALL ($2);

-- ---------------------------------------------------------------------------------
-- Execution e1000000-...-0001 (tenant acme): queued 9 min 50 s ago, dispatched to node-b
-- (the best weight), fails there after 19 s; the retry, requeued with a backoff of 1 s,
-- avoids node-b and lands on gpu-1 (ties at 100,000 go to the smallest node_id),
-- succeeds after 48 s; the application completes the execution.
-- ---------------------------------------------------------------------------------
EXECUTE heartbeat_round(now() - interval '9 min 45 s', '{}');
SELECT sched.submit('e1000000-0000-4000-8000-000000000001', '51000000-0000-4000-8000-000000000001',
                    'render', '1.0', tenant => 'acme', payload => '{"frame": 1}',
                    available_at => now() - interval '9 min 50 s') AS r1 \gset
SELECT outcome, request_id, node_id, score
  FROM sched.dispatch_attempt(:r1, at => now() - interval '9 min 40 s');
SELECT kind, attempt_id AS a1, lease_version AS v1
  FROM sched.poll_commands('bbbbbbbb-0000-4000-8000-000000000001', 1, at => now() - interval '9 min 39 s') \gset
SELECT sched.start_attempt(:'a1', :v1, now() - interval '9 min 39 s') IS NOT NULL AS started;
SELECT sched.finish_attempt(:'a1', :v1, 'FAILED', '{"exit_code": 137}', now() - interval '9 min 20 s');

EXECUTE heartbeat_round(now() - interval '9 min 25 s', '{}');
SELECT request_id AS r2 FROM sched.request
 WHERE step_id = '51000000-0000-4000-8000-000000000001' AND attempt_number = 2 \gset
SELECT outcome, request_id, node_id, score
  FROM sched.dispatch_attempt(:r2, at => now() - interval '9 min 19 s');
SELECT kind, attempt_id AS a2, lease_version AS v2
  FROM sched.poll_commands('99999999-0000-4000-8000-000000000001', 1, at => now() - interval '9 min 18 s') \gset
SELECT sched.start_attempt(:'a2', :v2, now() - interval '9 min 18 s') IS NOT NULL AS started;
SELECT sched.finish_attempt(:'a2', :v2, 'SUCCEEDED', '{"output": "frame-1.png"}', now() - interval '8 min 30 s');
SELECT sched.complete_execution('e1000000-0000-4000-8000-000000000001', now() - interval '8 min 29 s');

-- ---------------------------------------------------------------------------------
-- The training run (globex): both of gpu-1's GPUs, queued 4 min ago, dispatched 3 min
-- ago, started 2 s later.
-- ---------------------------------------------------------------------------------
EXECUTE heartbeat_round(now() - interval '3 min 5 s', '{}');
SELECT sched.submit('e2000000-0000-4000-8000-000000000001', '52000000-0000-4000-8000-000000000001',
                    'train', '1', tenant => 'globex', min_gpus => 2,
                    reserve_cpu_millis => 4000, reserve_memory_mb => 32768, reserve_gpus => 2,
                    available_at => now() - interval '4 min') AS r3 \gset
SELECT outcome, request_id, node_id, score
  FROM sched.dispatch_attempt(:r3, at => now() - interval '3 min');
SELECT kind, attempt_id AS a3, lease_version AS v3
  FROM sched.poll_commands('99999999-0000-4000-8000-000000000002', 1, at => now() - interval '2 min 58 s') \gset
SELECT sched.start_attempt(:'a3', :v3, now() - interval '2 min 58 s') IS NOT NULL AS started;

-- node-c's worker heartbeats for the last time, 90 s ago
EXECUTE heartbeat_round(now() - interval '90 s', '{}');

-- ---------------------------------------------------------------------------------
-- node-d (initech): a step pinned to it, queued 75 s ago, dispatched 60 s ago, started
-- 2 s later; then the node is drained (it finishes what it runs, takes nothing new).
-- ---------------------------------------------------------------------------------
SELECT sched.submit('e3000000-0000-4000-8000-000000000001', '53000000-0000-4000-8000-000000000001',
                    'render', '1.0', tenant => 'initech', node_id => 'node-d',
                    reserve_cpu_millis => 2000, reserve_memory_mb => 4096,
                    available_at => now() - interval '75 s') AS r4 \gset
SELECT outcome, request_id, node_id, score
  FROM sched.dispatch_attempt(:r4, at => now() - interval '60 s');
SELECT kind, attempt_id AS a4, lease_version AS v4
  FROM sched.poll_commands('dddddddd-0000-4000-8000-000000000001', 1, at => now() - interval '58 s') \gset
SELECT sched.start_attempt(:'a4', :v4, now() - interval '58 s') IS NOT NULL AS started;
SELECT node_id, management_status FROM sched.drain_node('node-d');

-- ---------------------------------------------------------------------------------
-- node-a (acme): two steps that prefer tier=fast, dispatched 50 s and 45 s ago after
-- waiting 30 s and 10 s; its worker has not picked them up yet.
-- ---------------------------------------------------------------------------------
SELECT sched.submit('e4000000-0000-4000-8000-000000000001', '54000000-0000-4000-8000-000000000001',
                    'render', '1.0', tenant => 'acme', preferred_labels => '{"tier":"fast"}',
                    reserve_cpu_millis => 1000, reserve_memory_mb => 1024,
                    available_at => now() - interval '80 s') AS r5 \gset
SELECT outcome, request_id, node_id, score
  FROM sched.dispatch_attempt(:r5, at => now() - interval '50 s');
SELECT sched.submit('e4000000-0000-4000-8000-000000000001', '54000000-0000-4000-8000-000000000002',
                    'render', '1.0', tenant => 'acme', preferred_labels => '{"tier":"fast"}',
                    reserve_cpu_millis => 1000, reserve_memory_mb => 1024,
                    available_at => now() - interval '55 s') AS r6 \gset
SELECT outcome, request_id, node_id, score
  FROM sched.dispatch_attempt(:r6, at => now() - interval '45 s');

EXECUTE heartbeat_round(now() - interval '30 s', '{cccccccc-0000-4000-8000-000000000001}');

-- ---------------------------------------------------------------------------------
-- The requests that wait (7-11)
-- ---------------------------------------------------------------------------------
-- 7: the worked example's request
SELECT sched.submit('e7000000-0000-4000-8000-000000000001', '57000000-0000-4000-8000-000000000001',
                    'render', '1.0', tenant => 'acme', preferred_labels => '{"tier":"fast"}',
                    min_cpu_millis => 2000, available_at => now() - interval '1 min') AS r7;
-- 8: 32 CPUs, more than any node has
SELECT sched.submit('e7000000-0000-4000-8000-000000000002', '57000000-0000-4000-8000-000000000002',
                    'render', '1.0', tenant => 'globex', priority => 5,
                    min_cpu_millis => 32000, available_at => now() - interval '8 min') AS r8 \gset
-- 9: 12 CPUs: only node-c is that big, and its worker's heartbeat is 90 s old
SELECT sched.submit('e7000000-0000-4000-8000-000000000003', '57000000-0000-4000-8000-000000000003',
                    'render', '1.0', tenant => 'initech',
                    min_cpu_millis => 12000, available_at => now() - interval '20 min') AS r9;
-- 10: one GPU; gpu-1 has two, both held by the training run
SELECT sched.submit('e7000000-0000-4000-8000-000000000004', '57000000-0000-4000-8000-000000000004',
                    'train', '1', tenant => 'acme', reserve_gpus => 1,
                    available_at => now() - interval '2 min') AS r10 \gset
-- 11: a version no worker serves
SELECT sched.submit('e7000000-0000-4000-8000-000000000005', '57000000-0000-4000-8000-000000000005',
                    'render', '3.0', tenant => 'globex',
                    available_at => now() - interval '30 s') AS r11;

-- a scheduler tries 8 (static: it backs off 1 s, one try counted) and 10 (transient:
-- it waits for capacity, keeps its place, no try counted)
SELECT outcome, request_id, detail FROM sched.dispatch_attempt(:r8, at => now() - interval '20 s');
SELECT outcome, request_id, detail FROM sched.dispatch_attempt(:r10, at => now() - interval '15 s');

-- the last heartbeats, 10 s ago (node-c's worker stays silent)
EXECUTE heartbeat_round(now() - interval '10 s', '{cccccccc-0000-4000-8000-000000000001}');
DEALLOCATE heartbeat_round;

-- ---------------------------------------------------------------------------------
-- The README's queries, as a user types them (the views answer for now(), the moment
-- this transaction started)
-- ---------------------------------------------------------------------------------
\echo
\echo '==================== the README section "Operating pg_sched" ===================='
\set ECHO all

\x auto

SELECT node_id, status, workers_ready || '/' || workers AS ready, heartbeat_age AS heartbeat,
       cpu_free, memory_free_mb AS mem_free, gpus_free, slots_free, live_attempts AS live
  FROM sched.node_overview;

SELECT * FROM sched.node_overview WHERE node_id = 'node-a';

SELECT request_id AS id, tenant, capability, priority AS prio, effective_priority AS eff,
       waited, tries, state, blocked
  FROM sched.pending;

SELECT request_id AS id, explanation FROM sched.pending;

SELECT * FROM sched.pending WHERE blocked = 'transient';

\a \t
SELECT sched.explain(7);
SELECT sched.explain(8);
SELECT sched.explain(9);
SELECT sched.explain(10);
\a \t

SELECT node_id, eligible, reasons, score FROM sched.qualification_reasons(9);

SELECT node_id, eligible, reasons, score
  FROM sched.qualification_reasons('render', '1.0', min_cpu_millis => 12000, heartbeat_ttl => '120 s');

SELECT * FROM sched.queue_stats;

SELECT node_id, tenant, attempt_number AS n, status, lease_state, lease_remaining, duration
  FROM sched.attempt_overview;

SELECT * FROM sched.attempt_overview WHERE node_id = 'gpu-1' AND lease_state = 'held';

SELECT to_char(at, 'HH24:MI:SS') AS at, stage, state, component, title,
       attempt_number AS n, detail->>'node_id' AS node_id
  FROM sched.execution_timeline('e1000000-0000-4000-8000-000000000001');

SELECT detail FROM sched.execution_timeline('e1000000-0000-4000-8000-000000000001')
 WHERE title = 'Attempt failed';

COMMIT;
\set ECHO none
SELECT pg_current_wal_lsn() AS primary_lsn \gset

-- ---------------------------------------------------------------------------------
-- Read-only access: an operator's login role with sched_observer (roles belong to the
-- cluster: alice is created once)
-- ---------------------------------------------------------------------------------
\unset ON_ERROR_STOP
SET client_min_messages = warning;
SELECT 'CREATE ROLE alice LOGIN' WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'alice') \gexec
GRANT sched_observer TO alice;
RESET client_min_messages;
\connect - alice
\set ECHO all

SELECT current_user, pg_has_role('sched_observer', 'USAGE') AS is_observer;

SELECT count(*) AS pending, count(*) FILTER (WHERE blocked = 'static') AS blocked_static
  FROM sched.pending;

SELECT * FROM sched.dispatch_next();
UPDATE sched.node SET weight = 1000 WHERE node_id = 'node-c';

-- ---------------------------------------------------------------------------------
-- On a hot standby, with -v standby='<conninfo>', for example
--   'host=127.0.0.1,127.0.0.1 port=<primary>,<standby> dbname=ops_demo user=alice
--    target_session_attrs=prefer-standby'
-- the observer's queries again, answered for the standby's now() once it has replayed
-- the commit above; then the superuser tries to dispatch there.
-- ---------------------------------------------------------------------------------
\set ECHO none
\if :{?standby}
\connect :standby
-- wait (at most 10 s) until the standby has replayed the primary's WAL up to the commit
SELECT count(*) AS replay_waits FROM generate_series(1, 100)
 WHERE CASE WHEN pg_last_wal_replay_lsn() < :'primary_lsn' THEN pg_sleep(0.1) IS NOT NULL END \gset
\set ECHO all

SELECT pg_is_in_recovery() AS on_standby, current_user;

SELECT node_id, status, workers_ready || '/' || workers AS ready, heartbeat_age AS heartbeat,
       cpu_free, gpus_free, slots_free, live_attempts AS live
  FROM sched.node_overview;

SELECT request_id AS id, tenant, blocked, waited FROM sched.pending;

\set ECHO none
\connect - :superuser
\set ECHO all
SELECT pg_is_in_recovery() AS on_standby, current_user;
SELECT * FROM sched.dispatch_next();
\set ECHO none
\endif
