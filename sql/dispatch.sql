--
-- dispatch: the reservation transaction of SPEC section 6 and its outcomes, in one session.
--   DISPATCHED        the rows written (attempt, START command, timeline milestone
--                     step.worker.selected:<step>:<n>, request DISPATCHED) and the
--                     counters reserved on node and worker
--   EXISTING          a second dispatch of the same request returns the same attempt and
--                     writes nothing; submit is idempotent on (step_id, attempt_number)
--   UNSCHEDULABLE     request stays PENDING, last_reason = summary, tries + 1,
--                     available_at = at + 1 s, 2 s, 4 s, 8 s; queued_at never moves
--   EXECUTION_CLOSED  a request of a cancelled or finished execution (it becomes CANCELLED)
--   CANCELLED         a request cancelled by cancel_execution
--   NOT_CLAIMED       wrong claim, claim of another request, expired claim, no claim while
--                     another scheduler holds an unexpired one, claim on an unclaimed request
-- plus claim_requests (queue order, requests not yet available are skipped, expired claims
-- return to the queue) and fresh admission at every dispatch: a cordoned worker, a drained
-- node, a stale heartbeat, a worker that reports itself not READY, and a re-registered
-- worker (new generation; the old session's heartbeat is refused).
-- attempt_id and claim_id are random: they are captured, compared, never printed.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pg_sched CASCADE;
CREATE EXTENSION pg_sched;
RESET client_min_messages;
SET TIME ZONE 'UTC';

-- requests by label, and every dispatch result by label
CREATE TEMP TABLE reqs (label text PRIMARY KEY, request_id bigint NOT NULL);
CREATE TEMP TABLE results (label text PRIMARY KEY, r sched.dispatch_result NOT NULL);
-- dispatch_attempt, recording the result under a label; prints it without the attempt_id
CREATE FUNCTION pg_temp.dispatch(label text, req text, claim uuid, at timestamptz)
RETURNS TABLE (outcome text, has_attempt boolean, node_id text, worker_id uuid,
               lease_version bigint, score bigint)
LANGUAGE sql AS $$
    INSERT INTO pg_temp.results
    SELECT $1, d FROM pg_temp.reqs q, sched.dispatch_attempt(q.request_id, $3, $4) d
     WHERE q.label = $2
    RETURNING (r).outcome, (r).attempt_id IS NOT NULL, (r).node_id, (r).worker_id,
              (r).lease_version, (r).score
$$;
-- the request rows, by label
CREATE FUNCTION pg_temp.requests(labels text[])
RETURNS TABLE (label text, state text, tries int, queued_at timestamptz,
               available_at timestamptz, claimed boolean, has_attempt boolean, last_reason text)
LANGUAGE sql AS $$
    SELECT q.label, r.state, r.tries, r.queued_at, r.available_at, r.claim_id IS NOT NULL,
           r.attempt_id IS NOT NULL, r.last_reason
      FROM pg_temp.reqs q JOIN sched.request r USING (request_id)
     WHERE q.label = ANY ($1)
     ORDER BY q.label
$$;
-- counts of what dispatch writes
CREATE FUNCTION pg_temp.counts()
RETURNS TABLE (attempts bigint, live_attempts bigint, commands bigint, selected_milestones bigint)
LANGUAGE sql AS $$
    SELECT (SELECT count(*) FROM sched.attempt),
           (SELECT count(*) FROM sched.attempt WHERE status IN ('DISPATCHED', 'RUNNING')),
           (SELECT count(*) FROM sched.command),
           (SELECT count(*) FROM sched.timeline WHERE milestone_key LIKE 'step.worker.selected:%')
$$;

-- ---------------------------------------------------------------------------------
-- Fleet (every node exists from the start, so the summaries count 6 nodes).
--   d1 render  cpu 4000  mem 8192   gpus 2  weight 200  slots 2
--   d2 render  cpu 8000  mem 16384  gpus 0  weight 100  slots 4
--   d3 batch   cpu 2000  mem 2048   gpus 0  weight 100  slots 10
--   g1/g2/g3 probe  cpu 1000  mem 1024  gpus 0  weight 300/200/100  slots 4
-- ---------------------------------------------------------------------------------
SELECT count(*) AS nodes FROM (
  SELECT sched.upsert_node(n, cpu_millis => c, memory_mb => m, gpus => g, weight => w)
    FROM (VALUES ('d1', 4000, 8192, 2, 200), ('d2', 8000, 16384, 0, 100),
                 ('d3', 2000, 2048, 0, 100), ('g1', 1000, 1024, 0, 300),
                 ('g2', 1000, 1024, 0, 200), ('g3', 1000, 1024, 0, 100)) AS v(n, c, m, g, w)) s;
SELECT * FROM sched.register_worker('d1', 'render', ARRAY['1.0'], 2,
    worker_id => 'd1000000-0000-0000-0000-000000000001', at => '2024-01-01 12:00:00+00');
SELECT * FROM sched.register_worker('d2', 'render', ARRAY['1.0'], 4,
    worker_id => 'd2000000-0000-0000-0000-000000000002', at => '2024-01-01 12:00:00+00');
SELECT * FROM sched.register_worker('d3', 'batch', ARRAY['1.0'], 10,
    worker_id => 'd3000000-0000-0000-0000-000000000003', at => '2024-01-01 12:00:00+00');
SELECT * FROM sched.register_worker('g1', 'probe', ARRAY['1.0'], 4,
    worker_id => '91000000-0000-0000-0000-000000000001', at => '2024-01-01 15:00:00+00');
SELECT * FROM sched.register_worker('g2', 'probe', ARRAY['1.0'], 4,
    worker_id => '92000000-0000-0000-0000-000000000002', at => '2024-01-01 15:00:00+00');
SELECT * FROM sched.register_worker('g3', 'probe', ARRAY['1.0'], 4,
    worker_id => '93000000-0000-0000-0000-000000000003', at => '2024-01-01 15:00:00+00');

-- =================================================================================
-- DISPATCHED
-- =================================================================================
INSERT INTO reqs SELECT 'A', sched.submit('e5000000-0000-0000-0000-000000000001',
    '56000000-0000-0000-0000-00000000000a', 'render', '1.0',
    reserve_cpu_millis => 1000, reserve_memory_mb => 2048, reserve_gpus => 1,
    available_at => '2024-01-01 12:00:00+00');
SELECT * FROM pg_temp.requests('{A}');
SELECT status FROM sched.execution WHERE execution_id = 'e5000000-0000-0000-0000-000000000001';
SELECT * FROM pg_temp.counts();

-- d1 wins on weight: 200,000
SELECT * FROM pg_temp.dispatch('A1', 'A', NULL, '2024-01-01 12:00:01+00');

-- the attempt: lease_version 1, lease for sched.lease_ttl (5 min), worker generation 1
SELECT a.attempt_id = (x.r).attempt_id AS is_result, a.request_id = q.request_id AS of_request,
       a.execution_id, a.step_id, a.attempt_number, a.node_id, a.worker_id, a.worker_generation,
       a.lease_version, a.status, a.reserve_cpu_millis, a.reserve_memory_mb, a.reserve_gpus,
       a.score, a.dispatched_at, a.lease_expires_at, a.finished_at
  FROM sched.attempt a, reqs q, results x
 WHERE q.label = 'A' AND x.label = 'A1' AND a.request_id = q.request_id;
-- the START command for the worker's current generation
SELECT c.kind, c.worker_id, c.worker_generation, c.lease_version,
       c.attempt_id = (x.r).attempt_id AS for_attempt, c.request_id = q.request_id AS for_request,
       c.created_at, c.delivered_at
  FROM sched.command c, reqs q, results x
 WHERE q.label = 'A' AND x.label = 'A1' AND c.attempt_id = (x.r).attempt_id;
-- the timeline milestone
SELECT t.milestone_key, t.execution_id, t.step_id, t.attempt_number,
       t.attempt_id = (x.r).attempt_id AS for_attempt, t.at
  FROM sched.timeline t, results x
 WHERE x.label = 'A1' AND t.milestone_key LIKE 'step.worker.selected:%';
-- the request: DISPATCHED, pointing at the attempt, no claim
SELECT label, state, queued_at, available_at, claimed, has_attempt, last_reason FROM pg_temp.requests('{A}');
SELECT r.attempt_id = (x.r).attempt_id AS points_to_attempt
  FROM sched.request r, reqs q, results x
 WHERE q.label = 'A' AND x.label = 'A1' AND r.request_id = q.request_id;
-- reservations: 1000 cpu, 2048 MB, 1 GPU and one slot on d1 / worker d1
SELECT node_id, reserved_cpu_millis, reserved_memory_mb, reserved_gpus, live_attempts
  FROM sched.node ORDER BY node_id;
SELECT node_id, live_attempts FROM sched.worker ORDER BY node_id;
-- the execution is QUEUED until an attempt starts
SELECT status FROM sched.execution WHERE execution_id = 'e5000000-0000-0000-0000-000000000001';
SELECT * FROM pg_temp.counts();

-- =================================================================================
-- EXISTING: the same request again returns the same attempt, writes nothing
-- =================================================================================
SELECT * FROM pg_temp.dispatch('A2', 'A', NULL, '2024-01-01 12:00:05+00');
SELECT (a1.r).attempt_id = (a2.r).attempt_id AS same_attempt
  FROM results a1, results a2 WHERE a1.label = 'A1' AND a2.label = 'A2';
SELECT * FROM pg_temp.counts();
SELECT node_id, reserved_cpu_millis, reserved_memory_mb, reserved_gpus, live_attempts
  FROM sched.node WHERE node_id = 'd1';
-- submit is idempotent on (step_id, attempt_number): the same request_id, even with
-- other parameters, and no second request row
SELECT sched.submit('e5000000-0000-0000-0000-000000000001', '56000000-0000-0000-0000-00000000000a',
                    'render', '1.0', available_at => '2024-01-01 12:00:06+00')
       = (SELECT request_id FROM reqs WHERE label = 'A') AS same_request;
SELECT sched.submit('e5000000-0000-0000-0000-000000000001', '56000000-0000-0000-0000-00000000000a',
                    'render', '2.0', priority => 9, attempt_number => 1,
                    available_at => '2024-01-01 12:00:06+00')
       = (SELECT request_id FROM reqs WHERE label = 'A') AS same_request;
SELECT count(*) AS requests_of_step FROM sched.request
 WHERE step_id = '56000000-0000-0000-0000-00000000000a';
SELECT label, state, queued_at, available_at, claimed, has_attempt FROM pg_temp.requests('{A}');
-- and a third dispatch still returns it
SELECT * FROM pg_temp.dispatch('A3', 'A', NULL, '2024-01-01 12:00:07+00');
-- the request and claim check comes before the existing attempt (SPEC section 6): a
-- claim id that does not hold the request is NOT_CLAIMED even though the attempt exists
SELECT outcome FROM pg_temp.dispatch('A4', 'A', 'ffffffff-0000-0000-0000-0000000000aa',
    '2024-01-01 12:00:08+00');
SELECT * FROM pg_temp.counts();

-- =================================================================================
-- UNSCHEDULABLE for a static reason: 3 GPUs reserved.  d1 has 2 GPUs, d2, d3, g1-g3
-- none (insufficient_gpus everywhere); d3 and g1-g3 serve no render (capability_missing).
-- The fleet as it is cannot run it, so it backs off.
-- =================================================================================
INSERT INTO reqs SELECT 'U', sched.submit('e5000000-0000-0000-0000-000000000001',
    '56000000-0000-0000-0000-00000000000b', 'render', '1.0', reserve_gpus => 3,
    available_at => '2024-01-01 12:00:00+00');
SELECT * FROM pg_temp.dispatch('U1', 'U', NULL, '2024-01-01 12:00:10+00');
SELECT (r).outcome, (r).detail FROM results WHERE label = 'U1';
SELECT * FROM pg_temp.requests('{U}');
-- backoff doubles at every try: 1 s, 2 s, 4 s, 8 s; queued_at stays 12:00:00
SELECT outcome FROM pg_temp.dispatch('U2', 'U', NULL, '2024-01-01 12:00:11+00');
SELECT label, state, tries, queued_at, available_at FROM pg_temp.requests('{U}');
SELECT outcome FROM pg_temp.dispatch('U3', 'U', NULL, '2024-01-01 12:00:13+00');
SELECT label, state, tries, queued_at, available_at FROM pg_temp.requests('{U}');
SELECT outcome FROM pg_temp.dispatch('U4', 'U', NULL, '2024-01-01 12:00:17+00');
SELECT label, state, tries, queued_at, available_at FROM pg_temp.requests('{U}');
-- nothing was written by the four tries
SELECT * FROM pg_temp.counts();
-- the same summary from qualification_reasons
SELECT node_id, worker_id, eligible, reasons
  FROM sched.qualification_reasons((SELECT request_id FROM reqs WHERE label = 'U'),
                                   '2024-01-01 12:00:25+00')
 ORDER BY node_id COLLATE "C";
-- give d2 three GPUs: the next try places it there (100,000: weight 100, no live attempts)
SELECT node_id, gpus FROM sched.upsert_node('d2', gpus => 3);
SELECT * FROM pg_temp.dispatch('U5', 'U', NULL, '2024-01-01 12:00:25+00');
SELECT label, state, has_attempt FROM pg_temp.requests('{U}');
SELECT node_id, reserved_cpu_millis, reserved_memory_mb, reserved_gpus, live_attempts
  FROM sched.node WHERE node_id IN ('d1', 'd2') ORDER BY node_id;

-- a reservation that no longer fits on the pinned node: cpu_exhausted (4000 - 1000 < 3500),
-- a transient reason: the request waits for capacity in its place (no backoff, no try)
INSERT INTO reqs SELECT 'P', sched.submit('e5000000-0000-0000-0000-000000000001',
    '56000000-0000-0000-0000-00000000000c', 'render', '1.0', reserve_cpu_millis => 3500,
    node_id => 'd1', available_at => '2024-01-01 12:00:00+00');
SELECT * FROM pg_temp.dispatch('P1', 'P', NULL, '2024-01-01 12:00:30+00');
SELECT (r).outcome, (r).detail FROM results WHERE label = 'P1';
SELECT label, state, tries, available_at, last_reason FROM pg_temp.requests('{P}');

-- =================================================================================
-- CANCELLED and EXECUTION_CLOSED
-- =================================================================================
SELECT worker_id, generation FROM sched.heartbeat('d1000000-0000-0000-0000-000000000001', 1, '2024-01-01 12:10:00+00');
SELECT worker_id, generation FROM sched.heartbeat('d2000000-0000-0000-0000-000000000002', 1, '2024-01-01 12:10:00+00');
-- execution X2: one live attempt (C0) and one pending request (C1)
INSERT INTO reqs SELECT 'C0', sched.submit('e5000000-0000-0000-0000-000000000002',
    '56000000-0000-0000-0000-0000000000c0', 'render', '1.0', available_at => '2024-01-01 12:10:00+00');
INSERT INTO reqs SELECT 'C1', sched.submit('e5000000-0000-0000-0000-000000000002',
    '56000000-0000-0000-0000-0000000000c1', 'render', '1.0', available_at => '2024-01-01 12:10:00+00');
SELECT outcome, node_id FROM pg_temp.dispatch('C0', 'C0', NULL, '2024-01-01 12:10:01+00');
SELECT * FROM pg_temp.counts();
SELECT sched.cancel_execution('e5000000-0000-0000-0000-000000000002', '2024-01-01 12:10:02+00');
SELECT status, finished_at FROM sched.execution WHERE execution_id = 'e5000000-0000-0000-0000-000000000002';
-- the pending request is cancelled; the live attempt gets a CANCEL command and stays live
SELECT label, state FROM pg_temp.requests('{C0,C1}');
SELECT c.kind, c.worker_id, c.attempt_id = (x.r).attempt_id AS for_attempt, c.created_at
  FROM sched.command c JOIN results x ON x.label = 'C0' AND c.attempt_id = (x.r).attempt_id
 ORDER BY c.command_id;
SELECT a.status FROM sched.attempt a JOIN results x ON x.label = 'C0' AND a.attempt_id = (x.r).attempt_id;
-- CANCELLED: the cancelled request
SELECT * FROM pg_temp.dispatch('C1', 'C1', NULL, '2024-01-01 12:10:03+00');
-- C0 already has its attempt, but SPEC section 6 checks the execution before it looks
-- for an existing attempt ("lock the execution and refuse closed ones; return an existing
-- attempt ..."): EXECUTION_CLOSED, not EXISTING
SELECT outcome FROM pg_temp.dispatch('C0b', 'C0', NULL, '2024-01-01 12:10:03+00');
-- submit into the cancelled execution is refused (55000), and writes nothing
\set VERBOSITY terse
SELECT sched.submit('e5000000-0000-0000-0000-000000000002',
    '56000000-0000-0000-0000-0000000000c2', 'render', '1.0', available_at => '2024-01-01 12:10:04+00');
\set VERBOSITY default
SELECT count(*) FROM sched.request WHERE step_id = '56000000-0000-0000-0000-0000000000c2';
-- a request left open in it (as a cancel leaves one a dispatcher held: it skips it; made
-- here by a direct write): dispatch refuses it and cancels it
INSERT INTO sched.request (execution_id, step_id, attempt_number, tenant, capability,
                           capability_version, state, queued_at, available_at)
VALUES ('e5000000-0000-0000-0000-000000000002', '56000000-0000-0000-0000-0000000000c2', 1,
        'default', 'render', '1.0', 'PENDING', '2024-01-01 12:10:04+00', '2024-01-01 12:10:04+00');
INSERT INTO reqs SELECT 'C2', request_id FROM sched.request
 WHERE step_id = '56000000-0000-0000-0000-0000000000c2';
SELECT label, state FROM pg_temp.requests('{C2}');
SELECT * FROM pg_temp.dispatch('C2', 'C2', NULL, '2024-01-01 12:10:05+00');
SELECT label, state, has_attempt FROM pg_temp.requests('{C2}');
-- again: now the request itself is cancelled
SELECT outcome FROM pg_temp.dispatch('C2b', 'C2', NULL, '2024-01-01 12:10:06+00');
SELECT * FROM pg_temp.counts();
-- requests of closed executions are not claimable (P, of the open execution, is; the
-- claim is rolled back)
BEGIN;
SELECT q.label FROM sched.claim_requests(10, capability => 'render',
    at => '2024-01-01 12:10:07+00') c JOIN reqs q USING (request_id) ORDER BY q.label;
ROLLBACK;

-- execution X3 ends as SUCCEEDED: its one attempt (S0) starts and succeeds (which releases
-- its reservation), then complete_execution closes it
INSERT INTO reqs SELECT 'S0', sched.submit('e5000000-0000-0000-0000-000000000003',
    '56000000-0000-0000-0000-0000000000d0', 'render', '1.0', reserve_cpu_millis => 500,
    available_at => '2024-01-01 12:10:00+00');
-- (d1's two slots are taken: d2, 90,000)
SELECT outcome, node_id, score FROM pg_temp.dispatch('S0', 'S0', NULL, '2024-01-01 12:10:07+00');
SELECT node_id, reserved_cpu_millis, live_attempts FROM sched.node WHERE node_id = 'd2';
SELECT sched.start_attempt((r).attempt_id, 1, '2024-01-01 12:10:07+00') IS NOT NULL AS started
  FROM results WHERE label = 'S0';
SELECT sched.finish_attempt((r).attempt_id, 1, 'SUCCEEDED', NULL, '2024-01-01 12:10:08+00')
  FROM results WHERE label = 'S0';
SELECT node_id, reserved_cpu_millis, live_attempts FROM sched.node WHERE node_id = 'd2';
SELECT sched.complete_execution('e5000000-0000-0000-0000-000000000003', '2024-01-01 12:10:08+00');
SELECT status, finished_at FROM sched.execution WHERE execution_id = 'e5000000-0000-0000-0000-000000000003';
-- submit into the completed execution is refused (55000); a request left open in it
-- (a direct write, as above): EXECUTION_CLOSED, then CANCELLED
\set VERBOSITY terse
SELECT sched.submit('e5000000-0000-0000-0000-000000000003',
    '56000000-0000-0000-0000-0000000000d1', 'render', '1.0', available_at => '2024-01-01 12:10:09+00');
\set VERBOSITY default
INSERT INTO sched.request (execution_id, step_id, attempt_number, tenant, capability,
                           capability_version, state, queued_at, available_at)
VALUES ('e5000000-0000-0000-0000-000000000003', '56000000-0000-0000-0000-0000000000d1', 1,
        'default', 'render', '1.0', 'PENDING', '2024-01-01 12:10:09+00', '2024-01-01 12:10:09+00');
INSERT INTO reqs SELECT 'S1', request_id FROM sched.request
 WHERE step_id = '56000000-0000-0000-0000-0000000000d1';
SELECT label, state FROM pg_temp.requests('{S1}');
SELECT * FROM pg_temp.dispatch('S1', 'S1', NULL, '2024-01-01 12:10:09+00');
SELECT outcome FROM pg_temp.dispatch('S1b', 'S1', NULL, '2024-01-01 12:10:10+00');
SELECT label, state, has_attempt FROM pg_temp.requests('{S0,S1}');
SELECT * FROM pg_temp.counts();
-- complete_execution on SUCCEEDED is harmless; cancel_execution on it is refused
SELECT sched.complete_execution('e5000000-0000-0000-0000-000000000003', '2024-01-01 12:10:12+00');
\set VERBOSITY terse
SELECT sched.cancel_execution('e5000000-0000-0000-0000-000000000003', '2024-01-01 12:10:12+00');
\set VERBOSITY default

-- =================================================================================
-- claim_requests and NOT_CLAIMED (capability batch, on d3)
--   Q4 prio 0 ready 12:59:59; Q1 prio 0 ready 13:00:00; Q2 prio 5 ready 13:00:01;
--   Q3 prio 0 ready 14:00:00 (not yet)
-- =================================================================================
INSERT INTO reqs SELECT 'Q1', sched.submit('e5000000-0000-0000-0000-000000000004',
    '56000000-0000-0000-0000-0000000000e1', 'batch', '1.0', available_at => '2024-01-01 13:00:00+00');
INSERT INTO reqs SELECT 'Q2', sched.submit('e5000000-0000-0000-0000-000000000004',
    '56000000-0000-0000-0000-0000000000e2', 'batch', '1.0', priority => 5,
    available_at => '2024-01-01 13:00:01+00');
INSERT INTO reqs SELECT 'Q3', sched.submit('e5000000-0000-0000-0000-000000000004',
    '56000000-0000-0000-0000-0000000000e3', 'batch', '1.0', available_at => '2024-01-01 14:00:00+00');
INSERT INTO reqs SELECT 'Q4', sched.submit('e5000000-0000-0000-0000-000000000004',
    '56000000-0000-0000-0000-0000000000e4', 'batch', '1.0', available_at => '2024-01-01 12:59:59+00');
SELECT worker_id, generation FROM sched.heartbeat('d3000000-0000-0000-0000-000000000003', 1, '2024-01-01 13:00:00+00');

-- two requests: the highest priority (Q2), then the oldest (Q4); one claim id for both
CREATE TEMP TABLE claims (label text, request_id bigint, claim_id uuid, claimed_until timestamptz);
INSERT INTO claims SELECT 'c1', * FROM sched.claim_requests(max_requests => 2, claim_ttl => '30 s',
    capability => 'batch', at => '2024-01-01 13:00:02+00');
SELECT c.label, q.label AS request, c.claimed_until FROM claims c JOIN reqs q USING (request_id)
 ORDER BY q.label;
SELECT count(DISTINCT claim_id) AS claim_ids FROM claims WHERE label = 'c1';
-- the rest: Q1 only; Q3 is not available yet
INSERT INTO claims SELECT 'c2', * FROM sched.claim_requests(max_requests => 5, claim_ttl => '30 s',
    capability => 'batch', at => '2024-01-01 13:00:02+00');
SELECT c.label, q.label AS request, c.claimed_until FROM claims c JOIN reqs q USING (request_id)
 WHERE c.label = 'c2' ORDER BY q.label;
-- nothing is left to claim
SELECT count(*) AS claimed FROM sched.claim_requests(max_requests => 5, capability => 'batch',
    at => '2024-01-01 13:00:02+00');
SELECT label, state, claimed FROM pg_temp.requests('{Q1,Q2,Q3,Q4}');
SELECT q.label, r.claim_id = c.claim_id AS held_by_claim, r.claimed_until
  FROM reqs q JOIN sched.request r USING (request_id) JOIN claims c USING (request_id)
 ORDER BY q.label;

-- a claim id that holds nothing
SELECT outcome, has_attempt, node_id FROM pg_temp.dispatch('Q2a', 'Q2',
    'ffffffff-0000-0000-0000-00000000000f', '2024-01-01 13:00:03+00');
-- no claim id while another scheduler's claim is unexpired
SELECT outcome, has_attempt, node_id FROM pg_temp.dispatch('Q4a', 'Q4', NULL, '2024-01-01 13:00:03+00');
-- the claim id of another request (Q1's claim c2 does not hold Q4)
SELECT outcome, has_attempt, node_id FROM pg_temp.dispatch('Q4b', 'Q4',
    (SELECT claim_id FROM claims WHERE label = 'c2' LIMIT 1), '2024-01-01 13:00:03+00');
-- a claim id on a request nobody claimed
SELECT outcome, has_attempt, node_id FROM pg_temp.dispatch('Q3a', 'Q3',
    (SELECT claim_id FROM claims WHERE label = 'c2' LIMIT 1), '2024-01-01 13:00:03+00');
-- none of these changed anything
SELECT label, state, claimed FROM pg_temp.requests('{Q1,Q2,Q3,Q4}');
SELECT q.label, r.claim_id = c.claim_id AS held_by_claim
  FROM reqs q JOIN sched.request r USING (request_id) JOIN claims c USING (request_id)
 ORDER BY q.label;
SELECT * FROM pg_temp.counts();
-- the right claim dispatches (d3: 100,000)
SELECT * FROM pg_temp.dispatch('Q2b', 'Q2', (SELECT claim_id FROM claims WHERE label = 'c1' LIMIT 1),
    '2024-01-01 13:00:03+00');
SELECT label, state, claimed, has_attempt FROM pg_temp.requests('{Q2}');
-- c1 expired at 13:00:32: its holder can no longer dispatch Q4
SELECT worker_id, generation FROM sched.heartbeat('d3000000-0000-0000-0000-000000000003', 1, '2024-01-01 13:00:30+00');
SELECT outcome, has_attempt, node_id FROM pg_temp.dispatch('Q4c', 'Q4',
    (SELECT claim_id FROM claims WHERE label = 'c1' LIMIT 1), '2024-01-01 13:00:40+00');
SELECT * FROM pg_temp.counts();
-- expired claims return to the queue: a new claim takes Q4 (older) and Q1
INSERT INTO claims SELECT 'c3', * FROM sched.claim_requests(max_requests => 5, claim_ttl => '30 s',
    capability => 'batch', at => '2024-01-01 13:00:40+00');
SELECT c.label, q.label AS request, c.claimed_until FROM claims c JOIN reqs q USING (request_id)
 WHERE c.label = 'c3' ORDER BY q.label;
-- Q1's old claim c2 no longer holds it; the new one does
SELECT outcome, has_attempt FROM pg_temp.dispatch('Q1a', 'Q1',
    (SELECT claim_id FROM claims WHERE label = 'c2' LIMIT 1), '2024-01-01 13:00:41+00');
SELECT outcome, has_attempt, node_id, score FROM pg_temp.dispatch('Q1b', 'Q1',
    (SELECT claim_id FROM claims WHERE label = 'c3' LIMIT 1), '2024-01-01 13:00:41+00');
-- after c3 expires (13:01:10), a dispatch without claim goes through
SELECT worker_id, generation FROM sched.heartbeat('d3000000-0000-0000-0000-000000000003', 1, '2024-01-01 13:01:15+00');
SELECT outcome, has_attempt, node_id, score FROM pg_temp.dispatch('Q4d', 'Q4', NULL, '2024-01-01 13:01:20+00');
-- Q3 becomes claimable at 14:00:00
SELECT count(*) AS claimed FROM sched.claim_requests(max_requests => 5, capability => 'batch',
    at => '2024-01-01 13:59:59+00');
SELECT q.label AS request FROM sched.claim_requests(max_requests => 5, capability => 'batch',
    at => '2024-01-01 14:00:00+00') c JOIN reqs q USING (request_id);
SELECT label, state, claimed, has_attempt FROM pg_temp.requests('{Q1,Q2,Q3,Q4}');
SELECT node_id, live_attempts FROM sched.worker WHERE node_id = 'd3';

-- =================================================================================
-- Every dispatch re-evaluates admission on the fleet as it is (capability probe:
-- g1 300,000 > g2 200,000 > g3 100,000, all registered at 15:00:00)
-- =================================================================================
SELECT node_id, score FROM sched.select_candidate('probe', '1.0', at => '2024-01-01 15:00:01+00');
-- cordoned worker: not used
SELECT worker_id, scheduling_status FROM sched.cordon_worker('91000000-0000-0000-0000-000000000001');
INSERT INTO reqs SELECT 'G1', sched.submit('e5000000-0000-0000-0000-000000000005',
    '56000000-0000-0000-0000-0000000000f1', 'probe', '1.0', available_at => '2024-01-01 15:00:00+00');
SELECT * FROM pg_temp.dispatch('G1', 'G1', NULL, '2024-01-01 15:00:02+00');
SELECT worker_id, scheduling_status FROM sched.uncordon_worker('91000000-0000-0000-0000-000000000001');
-- drained node: not used (g2 now 190,000 with one live attempt)
SELECT node_id, management_status FROM sched.drain_node('g1');
INSERT INTO reqs SELECT 'G2', sched.submit('e5000000-0000-0000-0000-000000000005',
    '56000000-0000-0000-0000-0000000000f2', 'probe', '1.0', available_at => '2024-01-01 15:00:00+00');
SELECT * FROM pg_temp.dispatch('G2', 'G2', NULL, '2024-01-01 15:00:03+00');
SELECT node_id, management_status FROM sched.upsert_node('g1', management_status => 'ACTIVE');
-- worker that reports itself DRAINING: not used
SELECT worker_id, runtime_state FROM sched.heartbeat('91000000-0000-0000-0000-000000000001', 1,
    '2024-01-01 15:00:04+00', 'DRAINING');
INSERT INTO reqs SELECT 'G3', sched.submit('e5000000-0000-0000-0000-000000000005',
    '56000000-0000-0000-0000-0000000000f3', 'probe', '1.0', available_at => '2024-01-01 15:00:00+00');
SELECT * FROM pg_temp.dispatch('G3', 'G3', NULL, '2024-01-01 15:00:05+00');
SELECT worker_id, runtime_state FROM sched.heartbeat('91000000-0000-0000-0000-000000000001', 1,
    '2024-01-01 15:00:06+00', 'READY');
-- stale heartbeat: g1 last heard at 15:00:06; at 15:01:30 it is expired, g2/g3 are not
SELECT count(*) FROM (
  SELECT sched.heartbeat(w, 1, '2024-01-01 15:01:20+00')
    FROM unnest(ARRAY['92000000-0000-0000-0000-000000000002',
                      '93000000-0000-0000-0000-000000000003']::uuid[]) AS w) s;
INSERT INTO reqs SELECT 'G4', sched.submit('e5000000-0000-0000-0000-000000000005',
    '56000000-0000-0000-0000-0000000000f4', 'probe', '1.0', available_at => '2024-01-01 15:00:00+00');
SELECT * FROM pg_temp.dispatch('G4', 'G4', NULL, '2024-01-01 15:01:30+00');
-- the worker's old session (generation 1) is replaced by a new registration (generation 2):
-- the old session's heartbeat is refused and changes nothing
SELECT * FROM sched.register_worker('g1', 'probe', ARRAY['1.0'], 4, at => '2024-01-01 15:01:40+00');
\set VERBOSITY terse
SELECT sched.heartbeat('91000000-0000-0000-0000-000000000001', 1, '2024-01-01 15:01:45+00');
\set VERBOSITY default
SELECT worker_id, generation, runtime_state, last_heartbeat FROM sched.worker WHERE node_id = 'g1';
-- g1 is admitted again; its attempt and START command carry generation 2
INSERT INTO reqs SELECT 'G5', sched.submit('e5000000-0000-0000-0000-000000000005',
    '56000000-0000-0000-0000-0000000000f5', 'probe', '1.0', available_at => '2024-01-01 15:00:00+00');
SELECT * FROM pg_temp.dispatch('G5', 'G5', NULL, '2024-01-01 15:01:50+00');
SELECT a.node_id, a.worker_generation, c.kind, c.worker_generation AS command_generation
  FROM results x JOIN sched.attempt a ON a.attempt_id = (x.r).attempt_id
  JOIN sched.command c ON c.attempt_id = a.attempt_id
 WHERE x.label = 'G5';
-- nothing admits: all probe workers cordoned
SELECT count(*) FROM (
  SELECT sched.cordon_worker(w)
    FROM unnest(ARRAY['91000000-0000-0000-0000-000000000001', '92000000-0000-0000-0000-000000000002',
                      '93000000-0000-0000-0000-000000000003']::uuid[]) AS w) s;
INSERT INTO reqs SELECT 'G6', sched.submit('e5000000-0000-0000-0000-000000000005',
    '56000000-0000-0000-0000-0000000000f6', 'probe', '1.0', available_at => '2024-01-01 15:00:00+00');
SELECT * FROM pg_temp.dispatch('G6', 'G6', NULL, '2024-01-01 15:01:55+00');
SELECT (r).outcome, (r).detail FROM results WHERE label = 'G6';

-- =================================================================================
-- Final accounting: counters equal the sums over live attempts; one attempt per
-- (step, attempt_number); one START command and one selected milestone per attempt.
-- =================================================================================
SELECT n.node_id, n.reserved_cpu_millis, n.reserved_memory_mb, n.reserved_gpus, n.live_attempts,
       n.reserved_cpu_millis = coalesce(sum(a.reserve_cpu_millis), 0)
       AND n.reserved_memory_mb = coalesce(sum(a.reserve_memory_mb), 0)
       AND n.reserved_gpus = coalesce(sum(a.reserve_gpus), 0)
       AND n.live_attempts = count(a.attempt_id) AS consistent
  FROM sched.node n
  LEFT JOIN sched.attempt a ON a.node_id = n.node_id AND a.status IN ('DISPATCHED', 'RUNNING')
 GROUP BY n.node_id ORDER BY n.node_id;
SELECT w.node_id, w.live_attempts, w.live_attempts = count(a.attempt_id) AS consistent
  FROM sched.worker w
  LEFT JOIN sched.attempt a ON a.worker_id = w.worker_id AND a.status IN ('DISPATCHED', 'RUNNING')
 GROUP BY w.worker_id, w.node_id, w.live_attempts ORDER BY w.node_id;
SELECT count(*) AS attempts, count(DISTINCT (step_id, attempt_number)) AS steps FROM sched.attempt;
SELECT count(*) AS attempts_without_one_start
  FROM sched.attempt a
 WHERE (SELECT count(*) FROM sched.command c WHERE c.attempt_id = a.attempt_id AND c.kind = 'START') <> 1
    OR (SELECT count(*) FROM sched.timeline t
         WHERE t.milestone_key = 'step.worker.selected:' || a.step_id || ':' || a.attempt_number) <> 1;
-- (C0 left out: what EXECUTION_CLOSED does to an already dispatched request is not
-- specified)
SELECT q.label, r.state, r.attempt_id IS NOT NULL AS has_attempt, a.node_id
  FROM reqs q JOIN sched.request r USING (request_id)
  LEFT JOIN sched.attempt a ON a.attempt_id = r.attempt_id
 WHERE q.label <> 'C0'
 ORDER BY q.label;

-- =================================================================================
-- A read-only transaction (and so a hot standby) cannot dispatch or claim: 25006,
-- naming the function, before anything is read
-- =================================================================================
BEGIN READ ONLY;
SELECT * FROM sched.dispatch_next(10, at => '2024-01-01 12:10:00+00');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN READ ONLY;
SELECT * FROM sched.dispatch_attempt((SELECT min(request_id) FROM sched.request), at => '2024-01-01 12:10:00+00');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN READ ONLY;
SELECT * FROM sched.claim_requests(1, at => '2024-01-01 12:10:00+00');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
