--
-- diagnostics: the operator views and functions of issue 4 on a fixed fleet and queue,
-- every answer computed for an explicit time (the views are wrappers over these
-- functions with now()):
--   sched.node_overview(at), sched.pending(at), sched.queue_stats(at),
--   sched.attempt_overview(at), sched.explain(request_id, at),
--   sched.execution_timeline(execution_id).
--
-- "at" is 2024-01-01 12:00:00 UTC; sched.heartbeat_ttl 60 s, sched.lease_ttl 5 min,
-- sched.aging_interval 60 s, sched.starvation_after 10 min (the defaults).
--
-- Fleet at 12:00 (capability render@1.0 on every node unless said otherwise):
--   node-a  tier=fast  w100   4 CPUs  2 live attempts  heartbeat 10 s   (worked example)
--   node-b  -          w150   8 CPUs  idle             heartbeat 10 s   (worked example)
--   node-c  -          w100  16 CPUs  idle             heartbeat 90 s   (worked example)
--   node-d  DRAINING   w100   8 CPUs  1 live attempt, lease expired 11:58:01, not reaped
--   node-e  cordoned   w100   8 CPUs  1 live attempt of the worker's previous generation
--   node-f  stale      w100   4 CPUs  heartbeat 1 h old
--   node-g  gpu=a100   w100   8 CPUs  2 GPUs, both reserved; workers render@1.0,2.0 and train@1
--   node-h  full       w100   2 CPUs  1 slot, taken (2 CPUs reserved)
--
-- Queue at 12:00 (request ids in submit order, see below):
--   R1  acme     render@1.0  worked example (prefers tier=fast, min 2 CPUs)  eligible
--   R2  globex   render@1.0  min 32 CPUs, priority 5, tried once              static
--   R3  initech  render@1.0  min 12 CPUs, waiting 20 min (starving)           static (node-c heartbeat)
--   R4  acme     train@1     reserves 1 GPU, tried twice, backing off         transient
--   R5  globex   render@3.0  no worker serves 3.0                             static
--   R6  initech  train@1     claimed until 12:00:20                           eligible
--   R7  acme     render@1.0  priority 10                                      eligible
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pg_sched CASCADE;
CREATE EXTENSION pg_sched;
RESET client_min_messages;
SET TIME ZONE 'UTC';
-- what operators see in psql by default (pg_regress would otherwise print intervals
-- as "@ 1 min"; explain() embeds intervals in its text)
SET DateStyle = 'ISO, YMD';
SET IntervalStyle = 'postgres';

-- ---------------------------------------------------------------------------------
-- Fleet
-- ---------------------------------------------------------------------------------
SELECT node_id, management_status, labels, cpu_millis, memory_mb, gpus, weight FROM (
    SELECT (sched.upsert_node('node-a', '{"tier":"fast"}', 4000, 8192, 0, 100)).*
    UNION ALL SELECT (sched.upsert_node('node-b', '{}', 8000, 16384, 0, 150)).*
    UNION ALL SELECT (sched.upsert_node('node-c', '{}', 16000, 32768, 0, 100)).*
    UNION ALL SELECT (sched.upsert_node('node-d', '{}', 8000, 16384, 0, 100)).*
    UNION ALL SELECT (sched.upsert_node('node-e', '{}', 8000, 16384, 0, 100)).*
    UNION ALL SELECT (sched.upsert_node('node-f', '{}', 4000, 8192, 0, 100)).*
    UNION ALL SELECT (sched.upsert_node('node-g', '{"gpu":"a100"}', 8000, 65536, 2, 100)).*
    UNION ALL SELECT (sched.upsert_node('node-h', '{}', 2000, 4096, 0, 100)).*
) n ORDER BY node_id;

-- node-f's worker registered an hour ago and never heartbeat since
SELECT * FROM sched.register_worker('node-f', 'render', ARRAY['1.0'], 4,
    'ffffffff-0000-0000-0000-000000000001', '2024-01-01 11:00:00+00');
-- every other worker registers at 11:50
SELECT w.* FROM (VALUES
    ('node-a', 'render', ARRAY['1.0'], 4, 'aaaaaaaa-0000-0000-0000-000000000001'::uuid),
    ('node-b', 'render', ARRAY['1.0'], 4, 'bbbbbbbb-0000-0000-0000-000000000001'),
    ('node-c', 'render', ARRAY['1.0'], 4, 'cccccccc-0000-0000-0000-000000000001'),
    ('node-d', 'render', ARRAY['1.0'], 4, 'dddddddd-0000-0000-0000-000000000001'),
    ('node-e', 'render', ARRAY['1.0'], 4, 'eeeeeeee-0000-0000-0000-000000000001'),
    ('node-g', 'render', ARRAY['1.0', '2.0'], 4, '99999999-0000-0000-0000-000000000001'),
    ('node-g', 'train', ARRAY['1'], 2, '99999999-0000-0000-0000-000000000002'),
    ('node-h', 'render', ARRAY['1.0'], 1, '88888888-0000-0000-0000-000000000001')
) v(node_id, capability, versions, slots, worker_id),
LATERAL sched.register_worker(v.node_id, v.capability, v.versions, v.slots, v.worker_id,
                              '2024-01-01 11:50:00+00') w
ORDER BY w.worker_id;

-- ---------------------------------------------------------------------------------
-- One execution through its whole life, for execution_timeline: dispatched to node-b
-- (the best weight), fails there, is retried as attempt 2, which avoids node-b and
-- lands on node-a (ties at 100,000 go to the smallest node_id), succeeds, completes.
-- ---------------------------------------------------------------------------------
SELECT sched.submit('e1000000-0000-0000-0000-000000000001', '51000000-0000-0000-0000-000000000001',
                    'render', '1.0', tenant => 'acme',
                    available_at => '2024-01-01 11:50:10+00') AS t1 \gset
SELECT outcome, request_id, node_id, worker_id, lease_version, score
  FROM sched.dispatch_attempt(:t1, at => '2024-01-01 11:50:20+00');
SELECT attempt_id AS t1_attempt FROM sched.attempt WHERE request_id = :t1 \gset
SELECT sched.start_attempt(:'t1_attempt', 1, '2024-01-01 11:50:21+00');
SELECT sched.finish_attempt(:'t1_attempt', 1, 'FAILED', '{"exit_code": 1}', '2024-01-01 11:50:40+00');
SELECT request_id AS t2 FROM sched.request
 WHERE step_id = '51000000-0000-0000-0000-000000000001' AND attempt_number = 2 \gset
SELECT outcome, request_id, node_id, worker_id, lease_version, score
  FROM sched.dispatch_attempt(:t2, at => '2024-01-01 11:50:41+00');
SELECT attempt_id AS t2_attempt FROM sched.attempt WHERE request_id = :t2 \gset
SELECT sched.start_attempt(:'t2_attempt', 1, '2024-01-01 11:50:42+00');
SELECT sched.finish_attempt(:'t2_attempt', 1, 'SUCCEEDED', NULL, '2024-01-01 11:51:30+00');
SELECT sched.complete_execution('e1000000-0000-0000-0000-000000000001', '2024-01-01 11:51:31+00');

-- ---------------------------------------------------------------------------------
-- Live attempts, in time order (each node heartbeats just before its dispatch)
-- ---------------------------------------------------------------------------------
-- node-d: running since 11:53:01, lease (5 min) expired at 11:58:01, not reaped yet;
-- then the node is drained
SELECT last_heartbeat FROM sched.heartbeat('dddddddd-0000-0000-0000-000000000001', 1, '2024-01-01 11:53:00+00');
SELECT sched.submit('e2000000-0000-0000-0000-000000000001', '52000000-0000-0000-0000-000000000001',
                    'render', '1.0', tenant => 'globex', node_id => 'node-d',
                    reserve_cpu_millis => 2000, reserve_memory_mb => 4096,
                    available_at => '2024-01-01 11:53:00+00') AS d1 \gset
SELECT outcome, node_id, score FROM sched.dispatch_attempt(:d1, at => '2024-01-01 11:53:00+00');
SELECT attempt_id AS d1_attempt FROM sched.attempt WHERE request_id = :d1 \gset
SELECT sched.start_attempt(:'d1_attempt', 1, '2024-01-01 11:53:01+00');
SELECT node_id, management_status FROM sched.drain_node('node-d');

-- node-e: dispatched at 11:56 after 30 s in the queue, its START received by the worker
-- (generation 1) but never started; at 11:59:40 the worker restarts (generation 2), so
-- the attempt is orphaned; then it is cordoned
SELECT last_heartbeat FROM sched.heartbeat('eeeeeeee-0000-0000-0000-000000000001', 1, '2024-01-01 11:56:00+00');
SELECT sched.submit('e3000000-0000-0000-0000-000000000001', '53000000-0000-0000-0000-000000000001',
                    'render', '1.0', tenant => 'globex', node_id => 'node-e',
                    reserve_cpu_millis => 1000, reserve_memory_mb => 1024,
                    available_at => '2024-01-01 11:55:30+00') AS e1 \gset
SELECT outcome, node_id, score FROM sched.dispatch_attempt(:e1, at => '2024-01-01 11:56:00+00');
SELECT kind FROM sched.poll_commands('eeeeeeee-0000-0000-0000-000000000001', 1, at => '2024-01-01 11:56:01+00');

-- node-g: a training run holds both GPUs, dispatched at 11:57 after 60 s in the queue
SELECT last_heartbeat FROM sched.heartbeat('99999999-0000-0000-0000-000000000002', 1, '2024-01-01 11:57:00+00');
SELECT sched.submit('e4000000-0000-0000-0000-000000000001', '54000000-0000-0000-0000-000000000001',
                    'train', '1', tenant => 'globex', min_gpus => 2,
                    reserve_cpu_millis => 4000, reserve_memory_mb => 32768, reserve_gpus => 2,
                    available_at => '2024-01-01 11:56:00+00') AS g1 \gset
SELECT outcome, node_id, score FROM sched.dispatch_attempt(:g1, at => '2024-01-01 11:57:00+00');
SELECT attempt_id AS g1_attempt FROM sched.attempt WHERE request_id = :g1 \gset
SELECT sched.start_attempt(:'g1_attempt', 1, '2024-01-01 11:57:05+00');

-- node-h: its only slot and all its CPUs, dispatched at 11:58 after 60 s in the queue
SELECT last_heartbeat FROM sched.heartbeat('88888888-0000-0000-0000-000000000001', 1, '2024-01-01 11:58:00+00');
SELECT sched.submit('e5000000-0000-0000-0000-000000000001', '55000000-0000-0000-0000-000000000001',
                    'render', '1.0', tenant => 'initech', node_id => 'node-h',
                    reserve_cpu_millis => 2000, reserve_memory_mb => 2048,
                    available_at => '2024-01-01 11:57:00+00') AS h1 \gset
SELECT outcome, node_id, score FROM sched.dispatch_attempt(:h1, at => '2024-01-01 11:58:00+00');
SELECT attempt_id AS h1_attempt FROM sched.attempt WHERE request_id = :h1 \gset
SELECT sched.start_attempt(:'h1_attempt', 1, '2024-01-01 11:58:02+00');

-- node-c's last heartbeat: 11:58:30, 90 s before "at"
SELECT last_heartbeat FROM sched.heartbeat('cccccccc-0000-0000-0000-000000000001', 1, '2024-01-01 11:58:30+00');

-- node-a: the worked example's two live attempts, each waited 30 s and 10 s
SELECT last_heartbeat FROM sched.heartbeat('aaaaaaaa-0000-0000-0000-000000000001', 1, '2024-01-01 11:59:00+00');
SELECT sched.submit('e6000000-0000-0000-0000-000000000001', '56000000-0000-0000-0000-000000000001',
                    'render', '1.0', tenant => 'acme', node_id => 'node-a',
                    reserve_cpu_millis => 1000, reserve_memory_mb => 1024,
                    available_at => '2024-01-01 11:58:30+00') AS a1 \gset
SELECT sched.submit('e6000000-0000-0000-0000-000000000001', '56000000-0000-0000-0000-000000000002',
                    'render', '1.0', tenant => 'acme', node_id => 'node-a',
                    reserve_cpu_millis => 1000, reserve_memory_mb => 1024,
                    available_at => '2024-01-01 11:58:51+00') AS a2 \gset
SELECT outcome, node_id, score FROM sched.dispatch_attempt(:a1, at => '2024-01-01 11:59:00+00');
SELECT outcome, node_id, score FROM sched.dispatch_attempt(:a2, at => '2024-01-01 11:59:01+00');

-- node-e's worker restarts (generation 2) and is cordoned
SELECT * FROM sched.register_worker('node-e', 'render', ARRAY['1.0'], 4,
    at => '2024-01-01 11:59:40+00');
SELECT node_id, scheduling_status FROM sched.cordon_worker('eeeeeeee-0000-0000-0000-000000000001');

-- the last heartbeats: 11:59:50, 10 s before "at"
SELECT worker_id, generation, last_heartbeat FROM (
    SELECT (sched.heartbeat('aaaaaaaa-0000-0000-0000-000000000001', 1, '2024-01-01 11:59:50+00')).*
    UNION ALL SELECT (sched.heartbeat('bbbbbbbb-0000-0000-0000-000000000001', 1, '2024-01-01 11:59:50+00')).*
    UNION ALL SELECT (sched.heartbeat('dddddddd-0000-0000-0000-000000000001', 1, '2024-01-01 11:59:50+00')).*
    UNION ALL SELECT (sched.heartbeat('eeeeeeee-0000-0000-0000-000000000001', 2, '2024-01-01 11:59:50+00')).*
    UNION ALL SELECT (sched.heartbeat('99999999-0000-0000-0000-000000000001', 1, '2024-01-01 11:59:50+00')).*
    UNION ALL SELECT (sched.heartbeat('99999999-0000-0000-0000-000000000002', 1, '2024-01-01 11:59:50+00')).*
    UNION ALL SELECT (sched.heartbeat('88888888-0000-0000-0000-000000000001', 1, '2024-01-01 11:59:50+00')).*
) h ORDER BY worker_id;

-- ---------------------------------------------------------------------------------
-- The queue
-- ---------------------------------------------------------------------------------
-- R1: the worked example request
SELECT sched.submit('e7000000-0000-0000-0000-000000000001', '57000000-0000-0000-0000-000000000001',
                    'render', '1.0', tenant => 'acme', preferred_labels => '{"tier":"fast"}',
                    min_cpu_millis => 2000, available_at => '2024-01-01 11:59:00+00') AS r1 \gset
-- R2: 32 CPUs, tried once at 11:59:55
SELECT sched.submit('e7000000-0000-0000-0000-000000000002', '57000000-0000-0000-0000-000000000002',
                    'render', '1.0', tenant => 'globex', priority => 5,
                    min_cpu_millis => 32000, available_at => '2024-01-01 11:52:00+00') AS r2 \gset
-- R3: 12 CPUs: only node-c is that big, and its heartbeat is 90 s old
SELECT sched.submit('e7000000-0000-0000-0000-000000000003', '57000000-0000-0000-0000-000000000003',
                    'render', '1.0', tenant => 'initech',
                    min_cpu_millis => 12000, available_at => '2024-01-01 11:40:00+00') AS r3 \gset
-- R4: one GPU, both of node-g's are reserved; tried at 11:59:58 and 11:59:59
SELECT sched.submit('e7000000-0000-0000-0000-000000000004', '57000000-0000-0000-0000-000000000004',
                    'train', '1', tenant => 'acme', reserve_gpus => 1,
                    available_at => '2024-01-01 11:58:00+00') AS r4 \gset
-- R5: a version nobody serves
SELECT sched.submit('e7000000-0000-0000-0000-000000000005', '57000000-0000-0000-0000-000000000005',
                    'render', '3.0', tenant => 'globex',
                    available_at => '2024-01-01 11:59:30+00') AS r5 \gset
-- R6: claimed by a scheduler at 11:59:50 for 30 s
SELECT sched.submit('e7000000-0000-0000-0000-000000000006', '57000000-0000-0000-0000-000000000006',
                    'train', '1', tenant => 'initech',
                    available_at => '2024-01-01 11:59:45+00') AS r6 \gset
-- R7: high priority
SELECT sched.submit('e7000000-0000-0000-0000-000000000007', '57000000-0000-0000-0000-000000000007',
                    'render', '1.0', tenant => 'acme', priority => 10,
                    available_at => '2024-01-01 11:59:30+00') AS r7 \gset
SELECT :r1 AS r1, :r2 AS r2, :r3 AS r3, :r4 AS r4, :r5 AS r5, :r6 AS r6, :r7 AS r7;

SELECT request_id, claimed_until FROM sched.claim_requests(1, '30 s', capability => 'train',
    tenant => 'initech', at => '2024-01-01 11:59:50+00');
SELECT outcome, request_id, detail FROM sched.dispatch_attempt(:r2, at => '2024-01-01 11:59:55+00');
SELECT outcome, request_id, detail FROM sched.dispatch_attempt(:r4, at => '2024-01-01 11:59:58+00');
SELECT outcome, request_id, detail FROM sched.dispatch_attempt(:r4, at => '2024-01-01 11:59:59+00');

-- ---------------------------------------------------------------------------------
-- node_overview(at): one row per node
-- ---------------------------------------------------------------------------------
SELECT node_id, status, workers, workers_ready, worker_states, heartbeat_age,
       cpu_millis, cpu_reserved, cpu_free, memory_mb, memory_reserved_mb, memory_free_mb
  FROM sched.node_overview('2024-01-01 12:00:00+00');
SELECT node_id, gpus, gpus_reserved, gpus_free, slots, slots_used, slots_free,
       live_attempts, weight, labels
  FROM sched.node_overview('2024-01-01 12:00:00+00');
-- a worker is counted ready only with a fresh heartbeat: one minute later none is
SELECT node_id, workers_ready, heartbeat_age
  FROM sched.node_overview('2024-01-01 12:01:00+00');

-- ---------------------------------------------------------------------------------
-- pending(at): one row per pending or claimed request, oldest first, with the live
-- explanation and whether it is blocked by static or transient reasons
-- ---------------------------------------------------------------------------------
SELECT request_id, tenant, capability, priority, effective_priority, waited, tries,
       next_try_at, state, pinned_to
  FROM sched.pending('2024-01-01 12:00:00+00');
SELECT request_id, blocked, explanation
  FROM sched.pending('2024-01-01 12:00:00+00');
SELECT request_id, last_reason
  FROM sched.pending('2024-01-01 12:00:00+00') WHERE last_reason IS NOT NULL;
-- the explanation is the dispatch summary: R2's last try (11:59:55) saw the same fleet
SELECT p.explanation = r.last_reason AS same_as_dispatch
  FROM sched.pending('2024-01-01 12:00:00+00') p JOIN sched.request r USING (request_id)
 WHERE p.request_id = :r2;
-- and it follows the fleet: with node-g's training run finished, R4 fits (blocked none)
BEGIN;
SELECT sched.finish_attempt(:'g1_attempt', 1, 'SUCCEEDED', NULL, '2024-01-01 11:59:59+00');
SELECT request_id, blocked, explanation
  FROM sched.pending('2024-01-01 12:00:00+00') WHERE request_id = :r4;
ROLLBACK;
-- smoke check of the view (now() is a day or more after "at": every heartbeat is stale)
SELECT count(*) AS pending, count(*) FILTER (WHERE blocked = 'none') AS not_blocked
  FROM sched.pending;

-- ---------------------------------------------------------------------------------
-- queue_stats(at): per tenant and capability
-- ---------------------------------------------------------------------------------
SELECT * FROM sched.queue_stats('2024-01-01 12:00:00+00');
-- ten minutes later nothing was dispatched in the last 5 minutes, and R2 starves too
SELECT * FROM sched.queue_stats('2024-01-01 12:10:00+00');
-- asked for a time before every request of the queue was queued: nothing has waited
-- yet (oldest_wait 0, not negative, as sched.pending's waited)
SELECT tenant, capability, pending, ready_now, oldest_wait FROM sched.queue_stats('2023-12-31 00:00:00+00');

-- ---------------------------------------------------------------------------------
-- attempt_overview(at): live attempts first, newest first (attempt_id is random: omitted)
-- ---------------------------------------------------------------------------------
SELECT step_id, attempt_number, tenant, node_id, status, lease_state, lease_remaining,
       lease_version
  FROM sched.attempt_overview('2024-01-01 12:00:00+00');
SELECT step_id, dispatched_at, started_at, finished_at, duration
  FROM sched.attempt_overview('2024-01-01 12:00:00+00');
SELECT step_id, execution_id, worker_id, reserve_cpu_millis AS cpu, reserve_memory_mb AS mem,
       reserve_gpus AS gpus, score
  FROM sched.attempt_overview('2024-01-01 12:00:00+00');
-- after the reaper ran at 12:00, node-d's attempt is LOST and released, and its step is
-- requeued as attempt 2 (which pending() shows, waiting for its retry backoff)
BEGIN;
SELECT sched.reap_expired('2024-01-01 12:00:00+00') AS lost;
SELECT step_id, attempt_number, node_id, status, lease_state, lease_remaining, finished_at
  FROM sched.attempt_overview('2024-01-01 12:00:00+00') WHERE node_id = 'node-d';
-- (the retry is pinned to node-d like the original, and node-d is draining: static)
SELECT request_id, tenant, capability, tries, next_try_at, pinned_to, blocked, explanation
  FROM sched.pending('2024-01-01 12:00:00+00') WHERE request_id > :r7;
ROLLBACK;

-- smoke checks of the views (now()): they answer, with every row
SELECT (SELECT count(*) FROM sched.node_overview) AS nodes,
       (SELECT count(*) FROM sched.pending) AS pending,
       (SELECT count(*) FROM sched.attempt_overview) AS attempts,
       (SELECT sum(pending) FROM sched.queue_stats) AS queued;

-- ---------------------------------------------------------------------------------
-- explain(request_id, at)
-- ---------------------------------------------------------------------------------
\pset format unaligned
\pset tuples_only on
-- R1, eligible: the ranking with its score terms (node-a 1,080,000 as in the example)
SELECT sched.explain(:r1, '2024-01-01 12:00:00+00');
-- R2: no node has 32 CPUs
SELECT sched.explain(:r2, '2024-01-01 12:00:00+00');
-- R3: node-c would qualify with a 90 s heartbeat TTL
SELECT sched.explain(:r3, '2024-01-01 12:00:00+00');
-- R4: blocked only by the GPUs in use on node-g (transient)
SELECT sched.explain(:r4, '2024-01-01 12:00:00+00');
-- R5: no worker serves the version
SELECT sched.explain(:r5, '2024-01-01 12:00:00+00');
-- R3 with the setting at 90 s: node-c is eligible and ranked
SET sched.heartbeat_ttl = '90s';
SELECT sched.explain(:r3, '2024-01-01 12:00:00+00');
RESET sched.heartbeat_ttl;
\pset format aligned
\pset tuples_only off

-- ---------------------------------------------------------------------------------
-- execution_timeline(execution_id): submit, dispatch, start, failure, retry, success
-- ---------------------------------------------------------------------------------
SELECT at, stage, milestone, state, component, title, attempt_number
  FROM sched.execution_timeline('e1000000-0000-0000-0000-000000000001');
SELECT milestone, detail
  FROM sched.execution_timeline('e1000000-0000-0000-0000-000000000001');

-- ---------------------------------------------------------------------------------
-- The view sched.pending is sched.pending(now()) row for row (the view is the function,
-- inlined); in one transaction now() is one time.  Each of its rows explained by
-- pending_explanation as pending_explanations explains it; the first rows read alone
-- are the first rows of the whole.
-- ---------------------------------------------------------------------------------
BEGIN;
SELECT count(*) AS view_rows,
       (SELECT count(*) FROM sched.pending(now())) AS function_rows,
       (SELECT count(*) FROM (SELECT * FROM sched.pending EXCEPT ALL SELECT * FROM sched.pending(now())) d) AS only_in_view,
       (SELECT count(*) FROM (SELECT * FROM sched.pending(now()) EXCEPT ALL SELECT * FROM sched.pending) d) AS only_in_function
  FROM sched.pending;
SELECT (SELECT array_agg(request_id ORDER BY queued_at, request_id) FROM sched.request
         WHERE state IN ('PENDING', 'CLAIMED'))
       = (SELECT array_agg(request_id) FROM sched.pending) AS oldest_first;
SELECT (SELECT array_agg(request_id) FROM (SELECT request_id FROM sched.pending LIMIT 2) f)
       = (SELECT (array_agg(request_id))[1:2] FROM sched.pending) AS first_rows_alone;
SELECT (SELECT array_agg(request_id) FROM (SELECT request_id FROM sched.pending(now()) LIMIT 2) f)
       = (SELECT (array_agg(request_id))[1:2] FROM sched.pending(now())) AS function_first_rows_alone;
SELECT count(*) AS rows, count(*) FILTER (WHERE x.explanation = e.explanation AND x.blocked = e.blocked) AS same
  FROM sched.request r
  JOIN sched.pending_explanations(now()) e USING (request_id)
  CROSS JOIN LATERAL sched.pending_explanation(r.capability, r.capability_version, r.required_labels,
       r.min_cpu_millis, r.min_memory_mb, r.min_gpus, r.reserve_cpu_millis, r.reserve_memory_mb,
       r.reserve_gpus, r.node_id, now()) x;
COMMIT;
-- a shape no request has: its explanation all the same
SELECT * FROM sched.pending_explanation('render', '9.9', '{}', 0, 0, 0, 0, 0, 0, NULL, '2024-01-01 12:00:00+00');
SELECT * FROM sched.pending_explanation('render', '1.0', '{"zone": {"in": ["nowhere"]}}', 0, 0, 0, 0, 0, 0, NULL, '2024-01-01 12:00:00+00');

-- sched.pending(at) is inlined into the query that reads it (no function scan, which
-- would compute every row before the LIMIT)
CREATE FUNCTION pg_temp.plan_of(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE p text;
BEGIN
    EXECUTE 'EXPLAIN (FORMAT JSON, COSTS OFF) ' || q INTO p;
    RETURN p;
END $$;
SELECT pg_temp.plan_of($$SELECT * FROM sched.pending('2024-01-01 12:00:00+00') LIMIT 2$$)
       NOT LIKE '%Function Scan%' AS pending_at_inlined,
       pg_temp.plan_of($$SELECT * FROM sched.pending LIMIT 2$$) NOT LIKE '%Function Scan%' AS view_streams;

-- ---------------------------------------------------------------------------------
-- Bad input: NULL is 22004, an unknown id 42704
-- ---------------------------------------------------------------------------------
\set VERBOSITY sqlstate
SELECT sched.explain(NULL, '2024-01-01 12:00:00+00');
SELECT sched.explain(999999, '2024-01-01 12:00:00+00');
SELECT sched.explain(:r1, NULL);
SELECT * FROM sched.execution_timeline(NULL);
SELECT * FROM sched.execution_timeline('e9999999-0000-0000-0000-000000000001');
SELECT * FROM sched.pending(NULL);
SELECT * FROM sched.pending('infinity');
SELECT sched.check_time(NULL, 'at');
SELECT sched.check_time('infinity', 'at');
SELECT sched.check_time(now(), repeat('p', 300));
-- (checked once, before any row: also when the time is not known until the call runs)
PREPARE pending_at(timestamptz) AS SELECT count(*) FROM sched.pending($1);
SET plan_cache_mode = force_generic_plan;
EXECUTE pending_at(NULL);
EXECUTE pending_at('1800-01-01 00:00:00+00');
EXECUTE pending_at('2024-01-01 12:00:00+00');
RESET plan_cache_mode;
DEALLOCATE pending_at;
SELECT * FROM sched.node_overview(NULL);
SELECT * FROM sched.queue_stats(NULL);
SELECT * FROM sched.attempt_overview(NULL);
SELECT * FROM sched.pending_explanation(NULL, '1.0', '{}', 0, 0, 0, 0, 0, 0, NULL, now());
SELECT * FROM sched.pending_explanation('build', '1.0', '{}', 0, 0, 0, 0, 0, 0, NULL, NULL);
SELECT * FROM sched.pending_explanation('build', '1.0', '[1]', 0, 0, 0, 0, 0, 0, NULL, now());
SELECT * FROM sched.pending_explanation('build', '1.0', '{}', 0, 0, 0, 0, 0, 0, NULL, 'infinity');
-- the messages name the parameter / the id
\set VERBOSITY terse
SELECT * FROM sched.pending_explanation('build', '1.0', '{}', NULL, 0, 0, 0, 0, 0, NULL, now());
SELECT * FROM sched.pending_explanation('build', '1.0', '{"a": {"gt": "x"}}', 0, 0, 0, 0, 0, 0, NULL, now());
SELECT * FROM sched.node_overview(NULL);
SELECT sched.explain(NULL, '2024-01-01 12:00:00+00');
SELECT sched.explain(999999, '2024-01-01 12:00:00+00');
SELECT * FROM sched.execution_timeline('e9999999-0000-0000-0000-000000000001');
-- check_time, which pending(at) checks its at with: the time itself, or the error of
-- every function for it, naming the parameter
SELECT sched.check_time('2024-01-01 12:00:00+00', 'at') AS checked, sched.check_time('1900-01-01 00:00:00+00') AS lowest;
SELECT sched.check_time(NULL, 'at');
SELECT sched.check_time(NULL);
SELECT sched.check_time('infinity', 'at');
SELECT sched.check_time('10000-01-01 00:00:00+00', NULL);
SELECT sched.check_time(now(), repeat('p', 300));
\set VERBOSITY default

-- nothing above wrote: the diagnostics are read-only
SELECT count(*) AS pending FROM sched.pending('2024-01-01 12:00:00+00');
SELECT request_id, tries, available_at FROM sched.request WHERE request_id IN (:r2, :r4) ORDER BY 1;
