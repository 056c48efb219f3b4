--
-- lifecycle: the attempt lifecycle of issue 3 (items 4-6 and 8; SPEC section 5):
--   1. the worker protocol: dispatch (NOTIFY sched_worker_<worker_id>, sent at commit
--      only), poll_commands (each command once, oldest first, current generation only),
--      start_attempt (RUNNING, execution RUNNING, lease = at + sched.lease_ttl),
--      renew_lease (a late renewal is a timeline milestone), finish_attempt SUCCEEDED and
--      CANCELLED (idempotent; stale lease_version, another outcome, or any call after
--      the end: 55000), slots and reservations released at once, complete_execution
--      (refused while work is live or pending);
--   2. finish_attempt FAILED: requeued as attempt 2 after 1 s, on another node;
--   3. generations: after re-registration, commands of the old session are never
--      delivered; cancel_execution (pending requests cancelled, CANCEL commands and
--      NOTIFY for live attempts, dispatch afterwards EXECUTION_CLOSED / CANCELLED);
--   4. reap_expired: lease expiry to LOST, reservations released, retry with backoff
--      1 s, 2 s avoiding the node that lost it (unless it is the only eligible one),
--      zombie calls refused, max_attempts reached: execution FAILED, its pending
--      requests cancelled and its live attempts sent CANCEL;
--   5. a pinned request whose node's worker is offline waits in place;
--   6. the timeline of one execution;
--   7. bad input of each function: SQLSTATE, nothing written.
--
-- T0 = 2024-05-01 10:00:00 UTC.  Fleet: n1 (weight 200, so preferred) with worker W1,
-- n2 (weight 100) with worker W2; 'build' version '1', 2 slots each, 8000 cpu millis,
-- 16384 MB.  sched.lease_ttl is 300 s (default).  Heartbeats are not the subject until
-- section 5: the heartbeat TTL is one day until then.
--
-- NOTIFY: psql prints a received notification with the sender's PID, and its payload
-- if it has one (pg_sched's is empty: listeners learn nothing but "poll now").  Around
-- the COMMIT that delivers it, output goes through sed (\o |), which replaces the PID and
-- the attempt id (known beforehand, put in the environment with \setenv) by fixed text;
-- a payload naming the attempt would show.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pg_sched CASCADE;
CREATE EXTENSION pg_sched;
RESET client_min_messages;
SET TIME ZONE 'UTC';
SET sched.heartbeat_ttl = '1d';
SHOW sched.lease_ttl;

SELECT node_id, weight FROM sched.upsert_node('n1', cpu_millis => 8000, memory_mb => 16384, weight => 200);
SELECT node_id, weight FROM sched.upsert_node('n2', cpu_millis => 8000, memory_mb => 16384, weight => 100);
SELECT * FROM sched.register_worker('n1', 'build', ARRAY['1'], slots => 2,
    worker_id => '00000000-0000-0000-0000-0000000000a1', at => '2024-05-01 09:59:00+00');
SELECT * FROM sched.register_worker('n2', 'build', ARRAY['1'], slots => 2,
    worker_id => '00000000-0000-0000-0000-0000000000a2', at => '2024-05-01 09:59:00+00');

-- steps by name; helpers to refer to requests and (random) attempt ids by step and number
CREATE TEMP TABLE steps (name text PRIMARY KEY, step_id uuid UNIQUE);
INSERT INTO steps VALUES
    ('S1',  '5e000000-0000-0000-0000-000000000010'), ('S1b', '5e000000-0000-0000-0000-000000000011'),
    ('S2',  '5e000000-0000-0000-0000-000000000020'),
    ('S3a', '5e000000-0000-0000-0000-000000000030'), ('S3b', '5e000000-0000-0000-0000-000000000031'),
    ('S3c', '5e000000-0000-0000-0000-000000000032'), ('S3d', '5e000000-0000-0000-0000-000000000033'),
    ('S4',  '5e000000-0000-0000-0000-000000000040'), ('S4b', '5e000000-0000-0000-0000-000000000041'),
    ('S4c', '5e000000-0000-0000-0000-000000000042'),
    ('S5',  '5e000000-0000-0000-0000-000000000050');
CREATE FUNCTION pg_temp.att(step text, n int DEFAULT 1) RETURNS uuid LANGUAGE sql AS $$
    SELECT a.attempt_id FROM sched.attempt a JOIN steps s USING (step_id)
     WHERE s.name = step AND a.attempt_number = n $$;
CREATE FUNCTION pg_temp.req(step text, n int DEFAULT 1) RETURNS bigint LANGUAGE sql AS $$
    SELECT r.request_id FROM sched.request r JOIN steps s USING (step_id)
     WHERE s.name = step AND r.attempt_number = n $$;
CREATE TEMP VIEW attempts AS
SELECT s.name AS step, a.attempt_number AS n, a.status, a.node_id, a.worker_generation AS gen,
       a.lease_version AS lv, a.dispatched_at, a.started_at, a.lease_expires_at, a.finished_at
  FROM sched.attempt a JOIN steps s USING (step_id);
CREATE TEMP VIEW requests AS
SELECT s.name AS step, r.attempt_number AS n, r.state, r.node_id AS pinned_to, r.queued_at,
       r.available_at, r.tries, r.last_reason
  FROM sched.request r JOIN steps s USING (step_id);
CREATE TEMP VIEW fleet AS
SELECT n.node_id, n.reserved_cpu_millis AS cpu, n.reserved_memory_mb AS mem,
       n.live_attempts AS node_live, w.live_attempts AS worker_live, w.generation,
       w.scheduling_status
  FROM sched.node n JOIN sched.worker w USING (node_id);
CREATE TEMP VIEW commands AS
SELECT c.command_id, c.kind, s.name AS step, a.attempt_number AS n, c.worker_id = a.worker_id AS to_its_worker,
       c.worker_generation AS gen, c.lease_version AS lv, c.created_at, c.delivered_at
  FROM sched.command c JOIN sched.attempt a USING (attempt_id) JOIN steps s USING (step_id);
-- poll_commands' rows in the order returned; facts_ok: the command's execution, step,
-- attempt number, capability and version are its attempt's
CREATE FUNCTION pg_temp.poll(worker uuid, generation bigint, t timestamptz, k int DEFAULT 10)
RETURNS TABLE (pos bigint, command_id bigint, kind text, step text, n int, lease_version bigint,
               request_ok boolean, facts_ok boolean)
LANGUAGE sql AS $$
    SELECT p.ordinality, p.command_id, p.kind, s.name, a.attempt_number, p.lease_version,
           p.request_id = a.request_id,
           (p.execution_id, p.step_id, p.attempt_number, p.capability, p.capability_version)
             = (a.execution_id, a.step_id, a.attempt_number, r.capability, r.capability_version)
      FROM sched.poll_commands(worker, generation, k, t) WITH ORDINALITY AS p
      LEFT JOIN sched.attempt a ON a.attempt_id = p.attempt_id
      LEFT JOIN sched.request r ON r.request_id = a.request_id
      LEFT JOIN steps s ON s.step_id = a.step_id
     ORDER BY p.ordinality $$;
-- attempt ids in a text replaced by <attempt STEP#n>
CREATE FUNCTION pg_temp.named(msg text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    a record;
BEGIN
    FOR a IN SELECT x.attempt_id, s.name, x.attempt_number FROM sched.attempt x JOIN steps s USING (step_id) LOOP
        msg := replace(msg, a.attempt_id::text, format('<attempt %s#%s>', a.name, a.attempt_number));
    END LOOP;
    RETURN msg;
END $$;
-- runs q; returns 'ok: <result>' or 'SQLSTATE: message'
CREATE FUNCTION pg_temp.err(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    r text;
BEGIN
    EXECUTE q INTO r;
    RETURN 'ok: ' || coalesce(r, 'NULL');
EXCEPTION WHEN OTHERS THEN
    RETURN pg_temp.named(SQLSTATE || ': ' || SQLERRM);
END $$;

-- =================================================================================
-- 1. The worker protocol, E1 = ec..01: steps S1 and S1b, each reserving 1000 cpu
-- millis and 2048 MB.
-- =================================================================================
SELECT sched.submit('ec000000-0000-0000-0000-000000000001', '5e000000-0000-0000-0000-000000000010',
                    'build', '1', reserve_cpu_millis => 1000, reserve_memory_mb => 2048,
                    available_at => '2024-05-01 10:00:00+00') AS r_s1 \gset
SELECT sched.submit('ec000000-0000-0000-0000-000000000001', '5e000000-0000-0000-0000-000000000011',
                    'build', '1', reserve_cpu_millis => 1000, reserve_memory_mb => 2048,
                    available_at => '2024-05-01 10:00:00+00') AS r_s1b \gset
SELECT status FROM sched.execution WHERE execution_id = 'ec000000-0000-0000-0000-000000000001';

-- dispatch S1 at 10:00:01: n1 (score 200 * 1000); W1 is notified at commit (with
-- sched.notify_workers on, for LISTEN users: off by default since 0.2.0)
SET sched.notify_workers = on;
LISTEN "sched_worker_00000000-0000-0000-0000-0000000000a1";
BEGIN;
SELECT outcome, node_id, worker_id, lease_version, score
  FROM sched.dispatch_attempt(:r_s1, at => '2024-05-01 10:00:01+00');
SELECT pg_temp.att('S1') AS a_s1 \gset
\setenv ATTEMPT :a_s1
\o | sed -e "s/$ATTEMPT/<attempt S1#1>/g" -e 's/PID [0-9]*/PID <pid>/'
COMMIT;
\o
-- a dispatch that rolls back notifies nobody
BEGIN;
SELECT outcome, node_id FROM sched.dispatch_attempt(:r_s1b, at => '2024-05-01 10:00:02+00');
\o | sed -e 's/PID [0-9]*/PID <pid>/'
ROLLBACK;
\o
-- S1b again, committed: n1 still ranks first (200000 - 1 live * 10000)
BEGIN;
SELECT outcome, node_id, worker_id, lease_version, score
  FROM sched.dispatch_attempt(:r_s1b, at => '2024-05-01 10:00:02+00');
SELECT pg_temp.att('S1b') AS a_s1b \gset
\setenv ATTEMPT :a_s1b
\o | sed -e "s/$ATTEMPT/<attempt S1b#1>/g" -e 's/PID [0-9]*/PID <pid>/'
COMMIT;
\o
UNLISTEN *;

-- both attempts DISPATCHED on n1, lease = dispatch + 300 s; the slots and reservations
SELECT * FROM pg_temp.attempts ORDER BY step, n;
SELECT * FROM pg_temp.fleet ORDER BY node_id;

-- poll_commands: oldest first, each delivered once (max: see section 7)
SELECT * FROM pg_temp.poll('00000000-0000-0000-0000-0000000000a1', 1, '2024-05-01 10:00:03+00');
SELECT * FROM pg_temp.poll('00000000-0000-0000-0000-0000000000a1', 1, '2024-05-01 10:00:04+00');
SELECT * FROM pg_temp.commands ORDER BY command_id;
-- a generation that is not the worker's current one: 55000
SELECT pg_temp.err($$SELECT count(*) FROM sched.poll_commands('00000000-0000-0000-0000-0000000000a1', 2, at => '2024-05-01 10:00:04+00')$$);
SELECT pg_temp.err($$SELECT count(*) FROM sched.poll_commands('00000000-0000-0000-0000-0000000000a1', 0, at => '2024-05-01 10:00:04+00')$$);

-- start_attempt: RUNNING, lease = at + 300 s, the execution RUNNING
SELECT sched.start_attempt(pg_temp.att('S1'), 1, '2024-05-01 10:00:05+00') AS lease_expires_at;
SELECT sched.start_attempt(pg_temp.att('S1b'), 1, '2024-05-01 10:00:06+00') AS lease_expires_at;
SELECT * FROM pg_temp.attempts ORDER BY step, n;
SELECT status FROM sched.execution WHERE execution_id = 'ec000000-0000-0000-0000-000000000001';
SELECT pg_temp.err($$SELECT sched.start_attempt(pg_temp.att('S1'), 2, '2024-05-01 10:00:07+00')$$) AS stale_start;

-- renew_lease: lease = at + 300 s; a renewal after the lease expired (10:06:00) but
-- before any reaper ran is accepted and recorded as a milestone
SELECT sched.renew_lease(pg_temp.att('S1'), 1, '2024-05-01 10:01:00+00') AS lease_expires_at;
SELECT sched.renew_lease(pg_temp.att('S1b'), 1, '2024-05-01 10:04:00+00') AS lease_expires_at;
SELECT count(*) AS late_renewals FROM sched.timeline WHERE milestone_key LIKE 'step.lease.renewed_late:%';
SELECT sched.renew_lease(pg_temp.att('S1'), 1, '2024-05-01 10:06:30+00') AS lease_expires_at;
SELECT replace(milestone_key, '5e000000-0000-0000-0000-000000000010', 'S1') AS milestone_key,
       state, component, title, at, detail
  FROM sched.timeline WHERE milestone_key LIKE 'step.lease.renewed_late:%';
SELECT pg_temp.err($$SELECT sched.renew_lease(pg_temp.att('S1'), 2, '2024-05-01 10:06:31+00')$$) AS stale_renew;

-- complete_execution is refused while attempts are live
SELECT pg_temp.err($$SELECT sched.complete_execution('ec000000-0000-0000-0000-000000000001', '2024-05-01 10:07:00+00')$$);

-- finish S1 SUCCEEDED: its slot and reservation are released at once.  The attempt
-- keeps the worker's detail as given; the milestone has it without its null values (at
-- any depth), beside where the attempt ran, as the start's milestone has that
SELECT sched.finish_attempt(pg_temp.att('S1'), 1, 'SUCCEEDED',
                            '{"exit_code": 0, "signal": null, "usage": {"cpu_s": 1.50, "peak_mb": null, "note": "a \"quoted\" word"}}',
                            '2024-05-01 10:08:00+00');
SELECT * FROM pg_temp.fleet ORDER BY node_id;
SELECT step, n, status, finished_at FROM pg_temp.attempts WHERE step = 'S1';
SELECT detail FROM sched.attempt WHERE attempt_id = pg_temp.att('S1');
SELECT state, detail - 'worker_id' AS detail,
       detail ->> 'worker_id' = '00000000-0000-0000-0000-0000000000a1' AS worker_id_of_w1
  FROM sched.timeline WHERE attempt_id = pg_temp.att('S1') ORDER BY timeline_id;
-- the same report again is harmless: same answer, nothing written
SELECT count(*) AS timeline_rows FROM sched.timeline;
SELECT sched.finish_attempt(pg_temp.att('S1'), 1, 'SUCCEEDED', '{"exit_code": 0}', '2024-05-01 10:08:05+00');
SELECT count(*) AS timeline_rows FROM sched.timeline;
SELECT step, n, status, finished_at FROM pg_temp.attempts WHERE step = 'S1';
SELECT * FROM pg_temp.fleet ORDER BY node_id;
-- another outcome after the end, a stale lease_version, any other call: 55000
SELECT call, pg_temp.err(q) AS result FROM (VALUES
    ('finish FAILED',        $$SELECT sched.finish_attempt(pg_temp.att('S1'), 1, 'FAILED', at => '2024-05-01 10:08:10+00')$$),
    ('finish CANCELLED',     $$SELECT sched.finish_attempt(pg_temp.att('S1'), 1, 'CANCELLED', at => '2024-05-01 10:08:10+00')$$),
    ('finish stale version', $$SELECT sched.finish_attempt(pg_temp.att('S1'), 2, 'SUCCEEDED', at => '2024-05-01 10:08:10+00')$$),
    ('renew after end',      $$SELECT sched.renew_lease(pg_temp.att('S1'), 1, '2024-05-01 10:08:10+00')$$),
    ('start after end',      $$SELECT sched.start_attempt(pg_temp.att('S1'), 1, '2024-05-01 10:08:10+00')$$)
) AS t(call, q);
SELECT step, n, status, finished_at FROM pg_temp.attempts WHERE step = 'S1';
-- finish S1b CANCELLED (the worker gave up): released, not retried
SELECT sched.finish_attempt(pg_temp.att('S1b'), 1, 'CANCELLED', at => '2024-05-01 10:08:30+00');
SELECT sched.finish_attempt(pg_temp.att('S1b'), 1, 'CANCELLED', at => '2024-05-01 10:08:31+00');
SELECT * FROM pg_temp.fleet ORDER BY node_id;
SELECT step, n, state FROM pg_temp.requests WHERE step IN ('S1', 'S1b') ORDER BY step, n;
-- nothing pending or live: complete_execution succeeds, idempotently
SELECT sched.complete_execution('ec000000-0000-0000-0000-000000000001', '2024-05-01 10:09:00+00');
SELECT sched.complete_execution('ec000000-0000-0000-0000-000000000001', '2024-05-01 10:09:01+00');
SELECT status, finished_at FROM sched.execution WHERE execution_id = 'ec000000-0000-0000-0000-000000000001';
SELECT pg_temp.err($$SELECT sched.cancel_execution('ec000000-0000-0000-0000-000000000001', '2024-05-01 10:09:02+00')$$);

-- =================================================================================
-- 2. finish_attempt FAILED requeues: E2, S2 (max_attempts 3).  Attempt 1 fails on n1
-- at 10:20:10; attempt 2 is ready 1 s later and avoids n1 although n1 scores higher.
-- =================================================================================
SELECT sched.submit('ec000000-0000-0000-0000-000000000002', '5e000000-0000-0000-0000-000000000020',
                    'build', '1', priority => 3, available_at => '2024-05-01 10:20:00+00') AS r_s2 \gset
SELECT outcome, node_id, score FROM sched.dispatch_attempt(:r_s2, at => '2024-05-01 10:20:00+00');
SELECT * FROM pg_temp.poll('00000000-0000-0000-0000-0000000000a1', 1, '2024-05-01 10:20:00.5+00');
SELECT sched.start_attempt(pg_temp.att('S2'), 1, '2024-05-01 10:20:01+00') AS lease_expires_at;
SELECT sched.finish_attempt(pg_temp.att('S2'), 1, 'FAILED', '{"exit_code": 1}', '2024-05-01 10:20:10+00');
SELECT sched.finish_attempt(pg_temp.att('S2'), 1, 'FAILED', '{"exit_code": 1}', '2024-05-01 10:20:11+00');
SELECT * FROM pg_temp.requests WHERE step = 'S2' ORDER BY n;
SELECT r.priority, r.max_attempts, r.execution_id FROM sched.request r WHERE r.request_id = pg_temp.req('S2', 2);
SELECT * FROM pg_temp.fleet ORDER BY node_id;
SELECT outcome, request_id = pg_temp.req('S2', 2) AS is_retry, node_id
  FROM sched.dispatch_next(5, at => '2024-05-01 10:20:10.9+00');
SELECT outcome, request_id = pg_temp.req('S2', 2) AS is_retry, node_id, score
  FROM sched.dispatch_next(5, at => '2024-05-01 10:20:11+00');
SELECT * FROM pg_temp.attempts WHERE step = 'S2' ORDER BY n;
SELECT * FROM pg_temp.poll('00000000-0000-0000-0000-0000000000a2', 1, '2024-05-01 10:20:12+00');
SELECT sched.start_attempt(pg_temp.att('S2', 2), 1, '2024-05-01 10:20:13+00') AS lease_expires_at;
SELECT status FROM sched.execution WHERE execution_id = 'ec000000-0000-0000-0000-000000000002';
SELECT sched.finish_attempt(pg_temp.att('S2', 2), 1, 'SUCCEEDED', at => '2024-05-01 10:20:20+00');
SELECT sched.complete_execution('ec000000-0000-0000-0000-000000000002', '2024-05-01 10:20:30+00');

-- =================================================================================
-- 3. Generations and cancel_execution: E3, steps pinned to n2 (worker W2).
-- S3a is dispatched to W2's generation 1; W2 re-registers (generation 2) before
-- polling: the old session never received S3a's START, so the new one does (and the
-- old one is refused).  S3b is dispatched to generation 2; S3c waits (ready only
-- tomorrow).  cancel_execution at 10:31 cancels S3c, sends CANCEL for S3a (made for
-- generation 1, delivered to generation 2) and S3b.
-- =================================================================================
SELECT sched.submit('ec000000-0000-0000-0000-000000000003', '5e000000-0000-0000-0000-000000000030',
                    'build', '1', node_id => 'n2', available_at => '2024-05-01 10:30:00+00') AS r_s3a \gset
SELECT outcome, node_id FROM sched.dispatch_attempt(:r_s3a, at => '2024-05-01 10:30:00+00');
SELECT * FROM sched.register_worker('n2', 'build', ARRAY['1'], slots => 2, at => '2024-05-01 10:30:05+00');
SELECT pg_temp.err($$SELECT count(*) FROM sched.poll_commands('00000000-0000-0000-0000-0000000000a2', 1, at => '2024-05-01 10:30:06+00')$$) AS old_session;
SELECT * FROM pg_temp.poll('00000000-0000-0000-0000-0000000000a2', 2, '2024-05-01 10:30:06+00');
-- the new session received it: the attempt is held, not orphaned
SELECT lease_state FROM sched.attempt_overview('2024-05-01 10:30:06+00') WHERE attempt_id = pg_temp.att('S3a');
SELECT sched.submit('ec000000-0000-0000-0000-000000000003', '5e000000-0000-0000-0000-000000000031',
                    'build', '1', node_id => 'n2', available_at => '2024-05-01 10:30:07+00') AS r_s3b \gset
SELECT sched.submit('ec000000-0000-0000-0000-000000000003', '5e000000-0000-0000-0000-000000000032',
                    'build', '1', available_at => '2024-05-02 00:00:00+00') AS r_s3c \gset
SELECT outcome, node_id FROM sched.dispatch_attempt(:r_s3b, at => '2024-05-01 10:30:07+00');
SELECT * FROM pg_temp.poll('00000000-0000-0000-0000-0000000000a2', 2, '2024-05-01 10:30:08+00');
SELECT sched.start_attempt(pg_temp.att('S3b'), 1, '2024-05-01 10:30:09+00') AS lease_expires_at;
SELECT * FROM pg_temp.commands WHERE step LIKE 'S3%' ORDER BY command_id;

-- cancel: two CANCEL notifications on W2's channel, in dispatch order
SELECT pg_temp.att('S3a') AS a_s3a, pg_temp.att('S3b') AS a_s3b \gset
\setenv ATTEMPT_A :a_s3a
\setenv ATTEMPT_B :a_s3b
LISTEN "sched_worker_00000000-0000-0000-0000-0000000000a2";
BEGIN;
SELECT sched.cancel_execution('ec000000-0000-0000-0000-000000000003', '2024-05-01 10:31:00+00');
\o | sed -e "s/$ATTEMPT_A/<attempt S3a#1>/g" -e "s/$ATTEMPT_B/<attempt S3b#1>/g" -e 's/PID [0-9]*/PID <pid>/'
COMMIT;
\o
UNLISTEN *;
SELECT status, finished_at FROM sched.execution WHERE execution_id = 'ec000000-0000-0000-0000-000000000003';
SELECT step, n, state FROM pg_temp.requests WHERE step LIKE 'S3%' ORDER BY step, n;
-- the attempts stay live until their worker reports or their lease expires
SELECT step, n, status, gen FROM pg_temp.attempts WHERE step LIKE 'S3%' ORDER BY step, n;
SELECT * FROM pg_temp.commands WHERE step LIKE 'S3%' ORDER BY command_id;
-- generation 2 receives both CANCELs, S3a's made for generation 1 too
SELECT * FROM pg_temp.poll('00000000-0000-0000-0000-0000000000a2', 2, '2024-05-01 10:31:01+00');
SELECT sched.finish_attempt(pg_temp.att('S3b'), 1, 'CANCELLED', at => '2024-05-01 10:31:02+00');
-- idempotent cancel; complete refused on a cancelled execution
SELECT sched.cancel_execution('ec000000-0000-0000-0000-000000000003', '2024-05-01 10:31:03+00');
SELECT pg_temp.err($$SELECT sched.complete_execution('ec000000-0000-0000-0000-000000000003', '2024-05-01 10:31:03+00')$$);
-- a closed execution dispatches nothing: the cancelled request answers CANCELLED; a
-- submit after the cancel is refused (55000); a request left open in it (as a cancel
-- leaves one a dispatcher held; made here by a direct write) answers EXECUTION_CLOSED
-- and is cancelled
SELECT outcome, node_id FROM sched.dispatch_attempt(:r_s3c, at => '2024-05-02 00:00:00+00');
SELECT pg_temp.err($$SELECT sched.submit('ec000000-0000-0000-0000-000000000003', '5e000000-0000-0000-0000-000000000033',
                    'build', '1', available_at => '2024-05-01 10:32:00+00')$$);
INSERT INTO sched.request (execution_id, step_id, attempt_number, tenant, capability,
                           capability_version, state, queued_at, available_at)
VALUES ('ec000000-0000-0000-0000-000000000003', '5e000000-0000-0000-0000-000000000033', 1,
        'default', 'build', '1', 'PENDING', '2024-05-01 10:32:00+00', '2024-05-01 10:32:00+00')
RETURNING request_id AS r_s3d \gset
SELECT outcome, node_id, detail FROM sched.dispatch_attempt(:r_s3d, at => '2024-05-01 10:32:00+00');
SELECT outcome, node_id FROM sched.dispatch_attempt(:r_s3d, at => '2024-05-01 10:32:01+00');
SELECT step, n, state FROM pg_temp.requests WHERE step = 'S3d';
SELECT count(*) AS s3_attempts FROM pg_temp.attempts WHERE step LIKE 'S3%';
-- S3a (generation 1, received by generation 2, never started) loses its lease at 10:35:00; reaped LOST at
-- 10:35:01, its reservation released, and not retried: the execution is closed
SELECT * FROM pg_temp.fleet ORDER BY node_id;
SELECT sched.reap_expired('2024-05-01 10:35:01+00') AS lost;
SELECT step, n, status, finished_at FROM pg_temp.attempts WHERE step LIKE 'S3%' ORDER BY step, n;
SELECT step, n, state FROM pg_temp.requests WHERE step LIKE 'S3%' ORDER BY step, n;
SELECT * FROM pg_temp.fleet ORDER BY node_id;

-- =================================================================================
-- 4. Lease expiry and retries: E4, S4 (max_attempts 3, 1000 cpu millis, 2048 MB);
-- S4b waits (ready at 11:30); S4c runs on n1 when S4 runs out of attempts.
-- =================================================================================
SELECT sched.submit('ec000000-0000-0000-0000-000000000004', '5e000000-0000-0000-0000-000000000040',
                    'build', '1', reserve_cpu_millis => 1000, reserve_memory_mb => 2048,
                    available_at => '2024-05-01 11:00:00+00') AS r_s4 \gset
SELECT sched.submit('ec000000-0000-0000-0000-000000000004', '5e000000-0000-0000-0000-000000000041',
                    'build', '1', available_at => '2024-05-01 11:30:00+00') AS r_s4b \gset
-- attempt 1 on n1 at 11:00:00; W1 receives it and is never heard of again: lease
-- until 11:05:00
SELECT outcome, node_id, score FROM sched.dispatch_attempt(:r_s4, at => '2024-05-01 11:00:00+00');
SELECT * FROM pg_temp.poll('00000000-0000-0000-0000-0000000000a1', 1, '2024-05-01 11:00:01+00');
SELECT * FROM pg_temp.fleet ORDER BY node_id;
SELECT sched.reap_expired('2024-05-01 11:04:59+00') AS lost;
SELECT sched.reap_expired('2024-05-01 11:05:01+00') AS lost;
SELECT sched.reap_expired('2024-05-01 11:05:01+00') AS lost_again;
SELECT * FROM pg_temp.attempts WHERE step = 'S4' ORDER BY n;
SELECT * FROM pg_temp.fleet ORDER BY node_id;
-- requeued as attempt 2, ready after 1 s
SELECT * FROM pg_temp.requests WHERE step = 'S4' ORDER BY n;
-- the zombie worker of attempt 1 is refused, and changes nothing
SELECT call, pg_temp.err(q) AS result FROM (VALUES
    ('finish SUCCEEDED', $$SELECT sched.finish_attempt(pg_temp.att('S4'), 1, 'SUCCEEDED', at => '2024-05-01 11:05:01.5+00')$$),
    ('finish FAILED',    $$SELECT sched.finish_attempt(pg_temp.att('S4'), 1, 'FAILED', at => '2024-05-01 11:05:01.5+00')$$),
    ('start',            $$SELECT sched.start_attempt(pg_temp.att('S4'), 1, '2024-05-01 11:05:01.5+00')$$),
    ('renew',            $$SELECT sched.renew_lease(pg_temp.att('S4'), 1, '2024-05-01 11:05:01.5+00')$$)
) AS t(call, q);
SELECT step, n, status, finished_at FROM pg_temp.attempts WHERE step = 'S4' ORDER BY n;
SELECT step, n, state FROM pg_temp.requests WHERE step = 'S4' ORDER BY n;
-- attempt 2: not before 11:05:02; then on n2, avoiding n1 (which ranks first)
SELECT outcome FROM sched.dispatch_next(5, at => '2024-05-01 11:05:01.9+00');
SELECT rank, node_id, score FROM sched.rank_candidates('build', '1', reserve_cpu_millis => 1000,
    reserve_memory_mb => 2048, at => '2024-05-01 11:05:02+00');
SELECT outcome, request_id = pg_temp.req('S4', 2) AS is_s4_2, node_id, score
  FROM sched.dispatch_next(5, at => '2024-05-01 11:05:02+00');
SELECT * FROM pg_temp.poll('00000000-0000-0000-0000-0000000000a2', 2, '2024-05-01 11:05:03+00');
SELECT sched.start_attempt(pg_temp.att('S4', 2), 1, '2024-05-01 11:05:03+00') AS lease_expires_at;
-- lost at 11:10:04; attempt 3 ready 2 s later
SELECT sched.reap_expired('2024-05-01 11:10:04+00') AS lost;
SELECT * FROM pg_temp.requests WHERE step = 'S4' ORDER BY n;
SELECT * FROM pg_temp.fleet ORDER BY node_id;
-- attempt 3 avoids n2, but W1 is cordoned: n2 is the only eligible node, so it is used
SELECT worker_id, scheduling_status FROM sched.cordon_worker('00000000-0000-0000-0000-0000000000a1');
SELECT outcome FROM sched.dispatch_next(5, at => '2024-05-01 11:10:05+00');
SELECT outcome, request_id = pg_temp.req('S4', 3) AS is_s4_3, node_id, score
  FROM sched.dispatch_next(5, at => '2024-05-01 11:10:06+00');
SELECT * FROM pg_temp.poll('00000000-0000-0000-0000-0000000000a2', 2, '2024-05-01 11:10:06.5+00');
SELECT worker_id, scheduling_status FROM sched.uncordon_worker('00000000-0000-0000-0000-0000000000a1');
-- S4c, another step of E4, runs on n1 meanwhile
SELECT sched.submit('ec000000-0000-0000-0000-000000000004', '5e000000-0000-0000-0000-000000000042',
                    'build', '1', reserve_cpu_millis => 500, available_at => '2024-05-01 11:10:07+00') AS r_s4c \gset
SELECT outcome, node_id FROM sched.dispatch_attempt(:r_s4c, at => '2024-05-01 11:10:07+00');
SELECT * FROM pg_temp.poll('00000000-0000-0000-0000-0000000000a1', 1, '2024-05-01 11:10:08+00');
SELECT sched.start_attempt(pg_temp.att('S4c'), 1, '2024-05-01 11:10:08+00') AS lease_expires_at;
SELECT * FROM pg_temp.attempts WHERE step LIKE 'S4%' ORDER BY step, n;
SELECT * FROM pg_temp.fleet ORDER BY node_id;
-- attempt 3 expires (lease 11:15:06; S4c's runs to 11:15:08): no attempt left, the
-- execution FAILS, S4b is cancelled, S4c is sent CANCEL
SELECT sched.reap_expired('2024-05-01 11:15:07+00') AS lost;
SELECT status, finished_at FROM sched.execution WHERE execution_id = 'ec000000-0000-0000-0000-000000000004';
SELECT step, n, state, available_at FROM pg_temp.requests WHERE step LIKE 'S4%' ORDER BY step, n;
SELECT step, n, status, node_id, finished_at FROM pg_temp.attempts WHERE step LIKE 'S4%' ORDER BY step, n;
SELECT * FROM pg_temp.poll('00000000-0000-0000-0000-0000000000a1', 1, '2024-05-01 11:15:09+00');
SELECT sched.finish_attempt(pg_temp.att('S4c'), 1, 'CANCELLED', at => '2024-05-01 11:15:10+00');
SELECT * FROM pg_temp.fleet ORDER BY node_id;
SELECT outcome FROM sched.dispatch_attempt(:r_s4b, at => '2024-05-01 11:30:00+00');
SELECT pg_temp.err($$SELECT sched.complete_execution('ec000000-0000-0000-0000-000000000004', '2024-05-01 11:30:00+00')$$);

-- =================================================================================
-- 5. A pinned request waits in place: E5, S5 pinned to n1, heartbeat TTL 60 s.
-- W1 stops heartbeating after 13:00:00; its attempt is lost at 13:05:02; the retry
-- stays pinned to n1 (n2 is alive, and is not used), with heartbeat_expired as its
-- reason, until W1 registers again.
-- =================================================================================
SET sched.heartbeat_ttl = '60s';
SELECT worker_id, generation, last_heartbeat
  FROM sched.heartbeat('00000000-0000-0000-0000-0000000000a1', 1, '2024-05-01 13:00:00+00');
SELECT worker_id, generation, last_heartbeat
  FROM sched.heartbeat('00000000-0000-0000-0000-0000000000a2', 2, '2024-05-01 13:00:00+00');
SELECT sched.submit('ec000000-0000-0000-0000-000000000005', '5e000000-0000-0000-0000-000000000050',
                    'build', '1', node_id => 'n1', available_at => '2024-05-01 13:00:00+00') AS r_s5 \gset
SELECT outcome, node_id FROM sched.dispatch_attempt(:r_s5, at => '2024-05-01 13:00:00+00');
SELECT * FROM pg_temp.poll('00000000-0000-0000-0000-0000000000a1', 1, '2024-05-01 13:00:00.5+00');
SELECT sched.start_attempt(pg_temp.att('S5'), 1, '2024-05-01 13:00:01+00') AS lease_expires_at;
SELECT worker_id, last_heartbeat
  FROM sched.heartbeat('00000000-0000-0000-0000-0000000000a2', 2, '2024-05-01 13:05:00+00');
SELECT sched.reap_expired('2024-05-01 13:05:02+00') AS lost;
SELECT outcome, request_id = pg_temp.req('S5', 2) AS is_s5_2, node_id, detail
  FROM sched.dispatch_next(5, at => '2024-05-01 13:05:03+00');
SELECT * FROM pg_temp.requests WHERE step = 'S5' ORDER BY n;
SELECT node_id, worker_id, eligible, reasons, score
  FROM sched.qualification_reasons(pg_temp.req('S5', 2), '2024-05-01 13:05:03+00') ORDER BY node_id;
SELECT outcome, node_id, detail FROM sched.dispatch_next(5, at => '2024-05-01 13:05:04+00');
SELECT step, n, state, pinned_to, available_at, tries FROM pg_temp.requests WHERE step = 'S5' ORDER BY n;
SELECT count(*) AS s5_attempts FROM pg_temp.attempts WHERE step = 'S5';
-- W1 registers again (generation 2); the retry is taken at its next try, on n1
SELECT * FROM sched.register_worker('n1', 'build', ARRAY['1'], slots => 2, at => '2024-05-01 13:05:05+00');
SELECT outcome FROM sched.dispatch_next(5, at => '2024-05-01 13:05:05+00');
SELECT outcome, request_id = pg_temp.req('S5', 2) AS is_s5_2, node_id
  FROM sched.dispatch_next(5, at => '2024-05-01 13:05:06+00');
SELECT * FROM pg_temp.attempts WHERE step = 'S5' ORDER BY n;
SELECT * FROM pg_temp.poll('00000000-0000-0000-0000-0000000000a1', 2, '2024-05-01 13:05:07+00');
SELECT sched.start_attempt(pg_temp.att('S5', 2), 1, '2024-05-01 13:05:08+00') AS lease_expires_at;
SELECT sched.finish_attempt(pg_temp.att('S5', 2), 1, 'SUCCEEDED', at => '2024-05-01 13:06:00+00');
SELECT sched.complete_execution('ec000000-0000-0000-0000-000000000005', '2024-05-01 13:06:01+00');
SELECT * FROM pg_temp.fleet ORDER BY node_id;
SET sched.heartbeat_ttl = '1d';

-- =================================================================================
-- 6. The timeline of E4, in order (step ids replaced by step names)
-- =================================================================================
SELECT t.at, regexp_replace(t.milestone_key, ':[0-9a-f-]{36}', ':' || coalesce(s.name, '?')) AS milestone_key,
       t.state, t.component, t.title, s.name AS step, t.attempt_number AS n,
       t.attempt_id = pg_temp.att(s.name, t.attempt_number) AS attempt_ok
  FROM sched.timeline t LEFT JOIN steps s USING (step_id)
 WHERE t.execution_id = 'ec000000-0000-0000-0000-000000000004'
 ORDER BY t.at, t.timeline_id;
-- milestones are written once: their keys are unique per execution
SELECT count(*) = count(DISTINCT (execution_id, milestone_key)) AS once_each FROM sched.timeline;

-- =================================================================================
-- 7. Bad input: SQLSTATE and message, nothing written.  Live attempts (S7 and S7b on
-- n1) and their undelivered START commands exist, so a call that went ahead would
-- change them.
-- =================================================================================
INSERT INTO steps VALUES ('S7', '5e000000-0000-0000-0000-000000000070'),
                         ('S7b', '5e000000-0000-0000-0000-000000000071');
SELECT sched.submit('ec000000-0000-0000-0000-000000000007', '5e000000-0000-0000-0000-000000000070',
                    'build', '1', available_at => '2024-05-01 14:00:00+00') AS r_s7 \gset
SELECT sched.submit('ec000000-0000-0000-0000-000000000007', '5e000000-0000-0000-0000-000000000071',
                    'build', '1', available_at => '2024-05-01 14:00:00+00') AS r_s7b \gset
SELECT outcome, node_id FROM sched.dispatch_attempt(:r_s7, at => '2024-05-01 14:00:00+00');
SELECT outcome, node_id FROM sched.dispatch_attempt(:r_s7b, at => '2024-05-01 14:00:00+00');
CREATE FUNCTION pg_temp.snapshot() RETURNS text LANGUAGE sql AS $$
    SELECT md5(concat_ws('|',
        (SELECT string_agg(t::text, ',' ORDER BY t::text) FROM sched.request t),
        (SELECT string_agg(t::text, ',' ORDER BY t::text) FROM sched.attempt t),
        (SELECT string_agg(t::text, ',' ORDER BY t::text) FROM sched.command t),
        (SELECT string_agg(t::text, ',' ORDER BY t::text) FROM sched.timeline t),
        (SELECT string_agg(t::text, ',' ORDER BY t::text) FROM sched.execution t),
        (SELECT string_agg(t::text, ',' ORDER BY t::text) FROM sched.worker t),
        (SELECT string_agg(t::text, ',' ORDER BY t::text) FROM sched.node t)))
$$;
CREATE TEMP TABLE before AS SELECT pg_temp.snapshot() AS digest;
SELECT call, pg_temp.err(q) AS result FROM (VALUES
  ('poll worker_id NULL',     $$SELECT count(*) FROM sched.poll_commands(NULL, 2, at => '2024-05-01 14:00:01+00')$$),
  ('poll worker_id unknown',  $$SELECT count(*) FROM sched.poll_commands('00000000-0000-0000-0000-0000000000ff', 1, at => '2024-05-01 14:00:01+00')$$),
  ('poll generation NULL',    $$SELECT count(*) FROM sched.poll_commands('00000000-0000-0000-0000-0000000000a1', NULL, at => '2024-05-01 14:00:01+00')$$),
  ('poll generation stale',   $$SELECT count(*) FROM sched.poll_commands('00000000-0000-0000-0000-0000000000a1', 1, at => '2024-05-01 14:00:01+00')$$),
  ('poll max 0',              $$SELECT count(*) FROM sched.poll_commands('00000000-0000-0000-0000-0000000000a1', 2, 0, '2024-05-01 14:00:01+00')$$),
  ('poll max NULL',           $$SELECT count(*) FROM sched.poll_commands('00000000-0000-0000-0000-0000000000a1', 2, NULL, '2024-05-01 14:00:01+00')$$),
  ('poll at NULL',            $$SELECT count(*) FROM sched.poll_commands('00000000-0000-0000-0000-0000000000a1', 2, 10, NULL)$$),
  ('start attempt_id NULL',   $$SELECT sched.start_attempt(NULL, 1, '2024-05-01 14:00:01+00')$$),
  ('start attempt unknown',   $$SELECT sched.start_attempt('00000000-0000-0000-0000-0000000000ff', 1, '2024-05-01 14:00:01+00')$$),
  ('start lease_version NULL', $$SELECT sched.start_attempt(pg_temp.att('S7'), NULL, '2024-05-01 14:00:01+00')$$),
  ('start lease_version 0',   $$SELECT sched.start_attempt(pg_temp.att('S7'), 0, '2024-05-01 14:00:01+00')$$),
  ('start at NULL',           $$SELECT sched.start_attempt(pg_temp.att('S7'), 1, NULL)$$),
  ('renew attempt_id NULL',   $$SELECT sched.renew_lease(NULL, 1, '2024-05-01 14:00:01+00')$$),
  ('renew attempt unknown',   $$SELECT sched.renew_lease('00000000-0000-0000-0000-0000000000ff', 1, '2024-05-01 14:00:01+00')$$),
  ('renew lease_version NULL', $$SELECT sched.renew_lease(pg_temp.att('S7'), NULL, '2024-05-01 14:00:01+00')$$),
  ('renew lease_version 2',   $$SELECT sched.renew_lease(pg_temp.att('S7'), 2, '2024-05-01 14:00:01+00')$$),
  ('renew at NULL',           $$SELECT sched.renew_lease(pg_temp.att('S7'), 1, NULL)$$),
  ('finish attempt_id NULL',  $$SELECT sched.finish_attempt(NULL, 1, 'SUCCEEDED', at => '2024-05-01 14:00:01+00')$$),
  ('finish attempt unknown',  $$SELECT sched.finish_attempt('00000000-0000-0000-0000-0000000000ff', 1, 'SUCCEEDED', at => '2024-05-01 14:00:01+00')$$),
  ('finish lease_version NULL', $$SELECT sched.finish_attempt(pg_temp.att('S7'), NULL, 'SUCCEEDED', at => '2024-05-01 14:00:01+00')$$),
  ('finish lease_version 2',  $$SELECT sched.finish_attempt(pg_temp.att('S7'), 2, 'SUCCEEDED', at => '2024-05-01 14:00:01+00')$$),
  ('finish outcome NULL',     $$SELECT sched.finish_attempt(pg_temp.att('S7'), 1, NULL, at => '2024-05-01 14:00:01+00')$$),
  ('finish outcome empty',    $$SELECT sched.finish_attempt(pg_temp.att('S7'), 1, '', at => '2024-05-01 14:00:01+00')$$),
  ('finish outcome DONE',     $$SELECT sched.finish_attempt(pg_temp.att('S7'), 1, 'DONE', at => '2024-05-01 14:00:01+00')$$),
  ('finish outcome LOST',     $$SELECT sched.finish_attempt(pg_temp.att('S7'), 1, 'LOST', at => '2024-05-01 14:00:01+00')$$),
  ('finish outcome RUNNING',  $$SELECT sched.finish_attempt(pg_temp.att('S7'), 1, 'RUNNING', at => '2024-05-01 14:00:01+00')$$),
  ('finish outcome lower',    $$SELECT sched.finish_attempt(pg_temp.att('S7'), 1, 'succeeded', at => '2024-05-01 14:00:01+00')$$),
  ('finish at NULL',          $$SELECT sched.finish_attempt(pg_temp.att('S7'), 1, 'SUCCEEDED', at => NULL)$$),
  ('reap at NULL',            $$SELECT sched.reap_expired(NULL)$$),
  ('cancel execution NULL',   $$SELECT sched.cancel_execution(NULL, '2024-05-01 14:00:01+00')$$),
  ('cancel execution unknown', $$SELECT sched.cancel_execution('ec000000-0000-0000-0000-0000000000ff', '2024-05-01 14:00:01+00')$$),
  ('cancel at NULL',          $$SELECT sched.cancel_execution('ec000000-0000-0000-0000-000000000007', NULL)$$),
  ('complete execution NULL', $$SELECT sched.complete_execution(NULL, '2024-05-01 14:00:01+00')$$),
  ('complete execution unknown', $$SELECT sched.complete_execution('ec000000-0000-0000-0000-0000000000ff', '2024-05-01 14:00:01+00')$$),
  ('complete at NULL',        $$SELECT sched.complete_execution('ec000000-0000-0000-0000-000000000007', NULL)$$),
  ('complete while live',     $$SELECT sched.complete_execution('ec000000-0000-0000-0000-000000000007', '2024-05-01 14:00:01+00')$$)
) AS t(call, q);
SELECT digest = pg_temp.snapshot() AS unchanged FROM before;
-- and the attempts still work; poll_commands returns at most max commands, oldest first
SELECT step, n, status, lease_expires_at FROM pg_temp.attempts WHERE step LIKE 'S7%' ORDER BY step;
SELECT * FROM pg_temp.poll('00000000-0000-0000-0000-0000000000a1', 2, '2024-05-01 14:00:02+00', 1);
SELECT * FROM pg_temp.poll('00000000-0000-0000-0000-0000000000a1', 2, '2024-05-01 14:00:02+00', 1);
SELECT * FROM pg_temp.poll('00000000-0000-0000-0000-0000000000a1', 2, '2024-05-01 14:00:02+00', 1);
SELECT sched.start_attempt(pg_temp.att('S7'), 1, '2024-05-01 14:00:03+00') AS lease_expires_at;
SELECT sched.finish_attempt(pg_temp.att('S7'), 1, 'SUCCEEDED', at => '2024-05-01 14:00:04+00');
SELECT sched.finish_attempt(pg_temp.att('S7b'), 1, 'SUCCEEDED', at => '2024-05-01 14:00:04+00');
SELECT sched.complete_execution('ec000000-0000-0000-0000-000000000007', '2024-05-01 14:00:05+00');
SELECT * FROM pg_temp.fleet ORDER BY node_id;

-- ---------------------------------------------------------------------------------
-- The fair-share counters (sched.tenant_live) followed every dispatch, start, finish,
-- loss and cancellation above: per tenant they sum to the live attempts.  reap_expired
-- drops the rows back at zero; a direct DELETE of an attempt and a TRUNCATE keep them
-- right too.
-- ---------------------------------------------------------------------------------
CREATE FUNCTION pg_temp.live_counters_right()
RETURNS boolean LANGUAGE sql AS $$
    SELECT NOT EXISTS (
        SELECT FROM (SELECT tenant, sum(live) AS live, sum(cpu_millis) AS cpu, sum(memory_mb) AS mem,
                            sum(gpus) AS gpus FROM sched.tenant_live GROUP BY tenant) c
          FULL JOIN (SELECT tenant, count(*) AS live, sum(reserve_cpu_millis) AS cpu,
                            sum(reserve_memory_mb) AS mem, sum(reserve_gpus) AS gpus
                       FROM sched.attempt
                      WHERE status IN ('DISPATCHED', 'RUNNING') GROUP BY tenant) a USING (tenant)
         WHERE (coalesce(c.live, 0), coalesce(c.cpu, 0), coalesce(c.mem, 0), coalesce(c.gpus, 0))
               IS DISTINCT FROM (coalesce(a.live, 0), coalesce(a.cpu, 0), coalesce(a.mem, 0), coalesce(a.gpus, 0)))
$$;
SELECT pg_temp.live_counters_right() AS counters_right;
-- three new attempts, two tenants
SELECT count(*) FROM (
  SELECT sched.register_worker(n, 'build', ARRAY['1'], slots => 2, at => '2024-05-01 15:00:00+00')
    FROM unnest(ARRAY['n1', 'n2']) n) s;
SELECT count(sched.submit(format('ec000000-0000-0000-0000-00000000010%s', i)::uuid,
                          format('5e000000-0000-0000-0000-00000000010%s', i)::uuid,
                          'build', '1', tenant => CASE WHEN i = 1 THEN 'ta' ELSE 'tb' END,
                          available_at => '2024-05-01 15:00:00+00'))
  FROM generate_series(1, 3) i;
SELECT count(*) AS dispatched FROM sched.dispatch_next(3, at => '2024-05-01 15:00:01+00')
 WHERE outcome = 'DISPATCHED';
SELECT tenant, sum(live) AS live FROM sched.tenant_live GROUP BY tenant ORDER BY tenant;
SELECT pg_temp.live_counters_right() AS counters_right;
-- a start changes no sums: it writes no row of sched.tenant_live
BEGIN;
SELECT n_tup_ins + n_tup_upd + n_tup_del AS written FROM pg_stat_xact_user_tables
 WHERE schemaname = 'sched' AND relname = 'tenant_live' \gset
SELECT sched.start_attempt(a.attempt_id, a.lease_version, '2024-05-01 15:00:01.5+00') IS NOT NULL AS started
  FROM sched.attempt a WHERE a.tenant = 'ta' AND a.status = 'DISPATCHED';
SELECT n_tup_ins + n_tup_upd + n_tup_del - :written AS tenant_live_rows_written
  FROM pg_stat_xact_user_tables WHERE schemaname = 'sched' AND relname = 'tenant_live';
COMMIT;
SELECT pg_temp.live_counters_right() AS counters_right;
SELECT sched.finish_attempt(a.attempt_id, a.lease_version, 'SUCCEEDED', at => '2024-05-01 15:00:02+00')
  FROM sched.attempt a WHERE a.tenant = 'ta' AND a.status = 'RUNNING';
SELECT tenant, sum(live) AS live FROM sched.tenant_live GROUP BY tenant ORDER BY tenant;
SELECT pg_temp.live_counters_right() AS counters_right;
DELETE FROM sched.attempt
 WHERE attempt_id = (SELECT attempt_id FROM sched.attempt WHERE tenant = 'tb' ORDER BY attempt_id LIMIT 1);
SELECT tenant, sum(live) AS live FROM sched.tenant_live GROUP BY tenant ORDER BY tenant;
SELECT pg_temp.live_counters_right() AS counters_right;
-- an update that leaves an attempt live but changes what it reserves moves the sums
-- alone (the live count does not change)
UPDATE sched.attempt SET reserve_cpu_millis = 250 WHERE tenant = 'tb' AND status = 'DISPATCHED';
SELECT tenant, sum(live) AS live, sum(cpu_millis) AS cpu_millis FROM sched.tenant_live
 WHERE tenant = 'tb' GROUP BY tenant;
SELECT pg_temp.live_counters_right() AS counters_right;
UPDATE sched.attempt SET reserve_cpu_millis = 0 WHERE tenant = 'tb' AND status = 'DISPATCHED';
SELECT pg_temp.live_counters_right() AS counters_right;
-- the last one's lease expires: LOST; the counters at zero are dropped
SELECT sched.reap_expired('2024-05-01 16:00:00+00') AS lost;
SELECT pg_temp.live_counters_right() AS counters_right,
       (SELECT count(*) FROM sched.tenant_live) AS rows_left;
SELECT count(*) AS dispatched FROM sched.dispatch_next(1, at => '2024-05-01 16:00:01+00')
 WHERE outcome = 'DISPATCHED';
TRUNCATE sched.attempt;
SELECT pg_temp.live_counters_right() AS counters_right, (SELECT count(*) FROM sched.tenant_live) AS rows_left;
-- the trigger function is only a statement trigger.  The stored shapes (written by
-- sched._request_shape) are the hash of the text the column's first, SQL form hashed:
-- the function's body must never change, and this holds it to that text
SELECT pg_temp.err($$SELECT sched._attempt_live_changed()$$);
SELECT bool_and(r.shape = hashtextextended(
           length(r.capability)::text || ':' || r.capability
           || length(r.capability_version)::text || ':' || r.capability_version
           || length(r.required_labels::text)::text || ':' || r.required_labels::text
           || r.min_cpu_millis::text || ',' || r.min_memory_mb::text || ','
           || r.min_gpus::text || ',' || r.reserve_cpu_millis::text || ','
           || r.reserve_memory_mb::text || ',' || r.reserve_gpus::text || ','
           || coalesce(length(r.node_id)::text || ':' || r.node_id, '-'), 0)) AS shapes_as_first_defined,
       count(*) FILTER (WHERE r.node_id IS NOT NULL) > 0 AS some_pinned
  FROM sched.request r;
-- the same for labels and names of more than one byte a character
SELECT sched._request_shape('bü', 'v1', '{"zone": "ä"}', 1, 2, 3, 4, 5, 6, 'nödé')
       = hashtextextended(length('bü')::text || ':bü' || '2:v1'
                          || length('{"zone": "ä"}'::jsonb::text)::text || ':'
                          || '{"zone": "ä"}'::jsonb::text || '1,2,3,4,5,6,'
                          || length('nödé')::text || ':nödé', 0)
       AS multibyte_as_first_defined;
SELECT sched._request_shape(NULL, '1', '{}', 0, 0, 0, 0, 0, 0, NULL) IS NULL AS null_capability_null_shape;
