--
-- waiting_for_capacity: a request that no node can take only for transient reasons
-- (no_free_slot, *_exhausted) keeps its place in the queue and is placed by the first
-- dispatch after capacity frees, with no time passing; only static reasons back off.
-- A dispatch on a full fleet tries nothing and writes nothing.  Every time is explicit.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pg_sched CASCADE;
CREATE EXTENSION pg_sched;
RESET client_min_messages;
SET TIME ZONE 'UTC';

-- One node, one worker of one slot, heartbeat at 12:00 (fresh until 12:01).
SELECT node_id FROM sched.upsert_node('n1', cpu_millis => 4000, memory_mb => 8192);
SELECT worker_id, generation FROM sched.register_worker('n1', 'render', ARRAY['1.0'], slots => 1,
    worker_id => 'a0000000-0000-4000-8000-000000000001', at => '2026-01-01 12:00:00+00');

-- Ten requests whose queue order is not their submission order: priorities 0..2 and
-- two tenants (fair share alternates between them), queued a second apart.
SELECT count(*) AS submitted FROM (
  SELECT sched.submit(('e0000000-0000-4000-8000-0000000000' || lpad(i::text, 2, '0'))::uuid,
                      ('50000000-0000-4000-8000-0000000000' || lpad(i::text, 2, '0'))::uuid,
                      'render', '1.0',
                      tenant => CASE WHEN i % 2 = 0 THEN 'acme' ELSE 'globex' END,
                      priority => i % 3,
                      payload => jsonb_build_object('task', i),
                      available_at => '2026-01-01 12:00:00+00'::timestamptz + i * interval '1 s')
    FROM generate_series(1, 10) AS i) s;

-- What the queue order says, at 12:00:30, before anything runs (claim, then release).
BEGIN;
SELECT row_number() OVER () AS position, r.request_id, r.tenant, r.priority
  FROM sched.claim_requests(10, at => '2026-01-01 12:00:30+00') c
  JOIN sched.request r USING (request_id);
ROLLBACK;

-- A helper for this test: end the live attempt as the worker would.
CREATE FUNCTION pg_temp.finish_live(at timestamptz) RETURNS text LANGUAGE plpgsql AS $$
DECLARE a sched.attempt;
BEGIN
    SELECT * INTO a FROM sched.attempt WHERE status IN ('DISPATCHED', 'RUNNING');
    PERFORM sched.start_attempt(a.attempt_id, a.lease_version, at);
    RETURN sched.finish_attempt(a.attempt_id, a.lease_version, 'SUCCEEDED', NULL, at);
END $$;
-- The head of the queue now: what claim_requests(1) would hand out (rolled back).
CREATE FUNCTION pg_temp.queue_head(at timestamptz) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE head bigint;
BEGIN
    BEGIN
        SELECT c.request_id INTO head FROM sched.claim_requests(1, at => at) c;
        RAISE EXCEPTION USING ERRCODE = 'P0001', MESSAGE = coalesce(head::text, '');
    EXCEPTION WHEN raise_exception THEN
        GET STACKED DIAGNOSTICS head = MESSAGE_TEXT;
    END;
    RETURN head;
END $$;
-- For each of `steps` turns: end the live attempt, then dispatch_next(100); what it
-- returned, and whether that was the head of the queue just before the call.
CREATE FUNCTION pg_temp.turns(steps int, at timestamptz)
RETURNS TABLE (turn int, rows_returned bigint, outcome text, request_id bigint, was_queue_head boolean)
LANGUAGE plpgsql AS $$
DECLARE head bigint;
BEGIN
    FOR i IN 1 .. steps LOOP
        PERFORM pg_temp.finish_live(at);
        head := pg_temp.queue_head(at);
        RETURN QUERY
            SELECT i, count(*) OVER (), d.outcome, d.request_id, d.request_id = head
              FROM sched.dispatch_next(100, at => at) d;
    END LOOP;
END $$;

-- The first call places the head of the queue and does not try the other nine: once
-- the slot is taken, every request of that shape waits for capacity.
SELECT outcome, request_id, node_id FROM sched.dispatch_next(100, at => '2026-01-01 12:00:30+00');
-- the worker learns everything from its command, the application's payload included
SELECT kind, request_id, execution_id, step_id, attempt_number, capability, capability_version, payload
  FROM sched.poll_commands('a0000000-0000-4000-8000-000000000001', 1, at => '2026-01-01 12:00:30+00');

-- They are waiting, not failing: no try counted, no backoff, nothing written.
SELECT count(*) FILTER (WHERE tries = 0) AS untried,
       count(*) FILTER (WHERE available_at = queued_at) AS not_backed_off,
       count(*) FILTER (WHERE last_reason IS NULL) AS unwritten
  FROM sched.request WHERE state = 'PENDING';
-- and the operator's views say why
SELECT request_id, blocked, explanation FROM sched.pending('2026-01-01 12:00:30+00') ORDER BY request_id;

-- A call on the full fleet tries nothing and neither locks nor writes a request row.
BEGIN;
SELECT count(*) AS rows_returned FROM sched.dispatch_next(100, at => '2026-01-01 12:00:30+00');
SELECT count(*) AS request_rows_locked_or_written FROM sched.request
 WHERE xmin = pg_current_xact_id()::xid OR xmax = pg_current_xact_id()::xid;
COMMIT;

-- Finish the live attempt; the next call places the next request in queue order at
-- once, with no time passing (12:00:30 throughout), for every request in turn.
-- (fair share: with no live attempt left, tenant acme goes first at every turn)
SELECT * FROM pg_temp.turns(9, '2026-01-01 12:00:30+00');
SELECT pg_temp.finish_live('2026-01-01 12:00:30+00');
-- nothing ever backed off or counted a try but its dispatch
SELECT count(*) AS requests, max(tries) AS max_tries, bool_and(available_at = queued_at) AS none_backed_off
  FROM sched.request;

-- ---------------------------------------------------------------------------------
-- Static reasons still back off; a waiting shape does not block a shape that fits.
-- ---------------------------------------------------------------------------------
-- a request no node can ever take (32 CPUs), one that needs the free slot's node to
-- have more memory free than it has (memory_exhausted once the big job runs), one that
-- fits: in queue order static, waiting, fitting.
SELECT sched.submit('e1000000-0000-4000-8000-000000000001', '51000000-0000-4000-8000-000000000001',
                    'render', '1.0', min_cpu_millis => 32000,
                    available_at => '2026-01-01 12:01:00+00') AS r_static \gset
SELECT worker_id, generation FROM sched.register_worker('n1', 'render', ARRAY['1.0'], slots => 3,
    worker_id => 'a0000000-0000-4000-8000-000000000001', at => '2026-01-01 12:01:00+00');
SELECT sched.submit('e1000000-0000-4000-8000-000000000002', '51000000-0000-4000-8000-000000000002',
                    'render', '1.0', reserve_memory_mb => 6000,
                    available_at => '2026-01-01 12:01:01+00') AS r_big1 \gset
SELECT sched.submit('e1000000-0000-4000-8000-000000000003', '51000000-0000-4000-8000-000000000003',
                    'render', '1.0', reserve_memory_mb => 6000,
                    available_at => '2026-01-01 12:01:02+00') AS r_big2 \gset
SELECT sched.submit('e1000000-0000-4000-8000-000000000004', '51000000-0000-4000-8000-000000000004',
                    'render', '1.0', reserve_memory_mb => 1000,
                    available_at => '2026-01-01 12:01:03+00') AS r_small \gset

-- static first: UNSCHEDULABLE with a backoff; big1 placed; big2 waits for memory, untried
-- (the call judged its shape after placing big1); small still fits and is placed.
SELECT outcome, request_id, detail FROM sched.dispatch_next(100, at => '2026-01-01 12:01:10+00');
SELECT request_id, state, tries, available_at, last_reason
  FROM sched.request WHERE request_id IN (:r_static, :r_big2) ORDER BY request_id;
SELECT request_id, blocked, explanation FROM sched.pending('2026-01-01 12:01:10+00') ORDER BY request_id;

-- within its backoff the static request is not tried; after it, it is, and backs off 2 s
SELECT outcome, request_id FROM sched.dispatch_next(100, at => '2026-01-01 12:01:10.5+00');
SELECT outcome, request_id FROM sched.dispatch_next(100, at => '2026-01-01 12:01:11+00');
SELECT tries, available_at FROM sched.request WHERE request_id = :r_static;

-- dispatch_attempt on the waiting request answers why, records it, and moves nothing
SELECT outcome, detail FROM sched.dispatch_attempt(:r_big2, at => '2026-01-01 12:01:12+00');
SELECT state, tries, available_at = queued_at AS in_place, last_reason
  FROM sched.request WHERE request_id = :r_big2;

-- capacity released by a node change (more memory): the next call places big2 at once
SELECT node_id, memory_mb FROM sched.upsert_node('n1', memory_mb => 16384);
SELECT outcome, request_id FROM sched.dispatch_next(100, at => '2026-01-01 12:01:12+00');

-- capacity released by an attempt ending, for the memory shape: free the big job
SELECT sched.submit('e1000000-0000-4000-8000-000000000005', '51000000-0000-4000-8000-000000000005',
                    'render', '1.0', reserve_memory_mb => 6000, max_attempts => 2,
                    payload => '{"frames": [1, 2, 3]}',
                    available_at => '2026-01-01 12:01:13+00') AS r_big3 \gset
SELECT outcome, request_id FROM sched.dispatch_next(100, at => '2026-01-01 12:01:14+00');
SELECT sched.finish_attempt(a.attempt_id, a.lease_version, 'SUCCEEDED', NULL, '2026-01-01 12:01:15+00')
  FROM sched.attempt a WHERE a.request_id = :r_big1;
SELECT outcome, request_id FROM sched.dispatch_next(100, at => '2026-01-01 12:01:15+00');

-- a retry carries the payload: big3 fails, its attempt 2 is dispatched after the retry
-- backoff (1 s), and the START command of the retry has the same payload
SELECT sched.finish_attempt(a.attempt_id, a.lease_version, 'FAILED', '{"exit_code": 1}', '2026-01-01 12:01:16+00')
  FROM sched.attempt a WHERE a.request_id = :r_big3;
SELECT outcome, request_id FROM sched.dispatch_next(100, at => '2026-01-01 12:01:17+00');
SELECT kind, attempt_number, capability, capability_version, execution_id, payload
  FROM sched.poll_commands('a0000000-0000-4000-8000-000000000001', 2, 100, at => '2026-01-01 12:01:18+00')
 WHERE step_id = '51000000-0000-4000-8000-000000000005' ORDER BY command_id;

-- ---------------------------------------------------------------------------------
-- A call for a few placements judges the shapes as it meets them, until one waits:
-- the same outcomes (capability paint: a node and a worker of two slots of its own).
-- ---------------------------------------------------------------------------------
SELECT node_id FROM sched.upsert_node('n2', cpu_millis => 4000, memory_mb => 8192);
SELECT worker_id FROM sched.register_worker('n2', 'paint', ARRAY['1.0'], slots => 2,
    worker_id => 'a0000000-0000-4000-8000-000000000002', at => '2026-01-01 12:02:00+00');
SELECT sched.submit('e2000000-0000-4000-8000-000000000001', '52000000-0000-4000-8000-000000000001',
                    'paint', '1.0', reserve_memory_mb => 6000,
                    available_at => '2026-01-01 12:02:01+00') AS p_big1 \gset
SELECT sched.submit('e2000000-0000-4000-8000-000000000002', '52000000-0000-4000-8000-000000000002',
                    'paint', '1.0', reserve_memory_mb => 6000,
                    available_at => '2026-01-01 12:02:02+00') AS p_big2 \gset
SELECT sched.submit('e2000000-0000-4000-8000-000000000003', '52000000-0000-4000-8000-000000000003',
                    'paint', '1.0', reserve_memory_mb => 1000,
                    available_at => '2026-01-01 12:02:03+00') AS p_small \gset
-- the head of the queue first
SELECT outcome, request_id = :p_big1 AS is_big1
  FROM sched.dispatch_next(1, 'paint', at => '2026-01-01 12:02:10+00');
-- big2 waits for memory: passed over untried, unwritten and unlocked (its shape is
-- judged on the version read, before the row is locked), and small, behind it, placed
BEGIN;
SELECT outcome, request_id = :p_small AS is_small
  FROM sched.dispatch_next(1, 'paint', at => '2026-01-01 12:02:10+00');
SELECT xmax = pg_current_xact_id()::xid AS big2_locked FROM sched.request WHERE request_id = :p_big2;
COMMIT;
SELECT state, tries, available_at = queued_at AS in_place, last_reason
  FROM sched.request WHERE request_id = :p_big2;
-- both slots taken: the call tries nothing and neither locks nor writes a request row
BEGIN;
SELECT count(*) AS rows_returned FROM sched.dispatch_next(1, 'paint', at => '2026-01-01 12:02:10+00');
SELECT count(*) AS request_rows_locked_or_written FROM sched.request
 WHERE xmin = pg_current_xact_id()::xid OR xmax = pg_current_xact_id()::xid;
COMMIT;
-- with a slot and the memory free again, big2 is placed
SELECT sched.finish_attempt(a.attempt_id, a.lease_version, 'SUCCEEDED', NULL, '2026-01-01 12:02:11+00')
  FROM sched.attempt a WHERE a.request_id = :p_big1;
SELECT outcome, request_id = :p_big2 AS is_big2
  FROM sched.dispatch_next(1, 'paint', at => '2026-01-01 12:02:12+00');

-- Requests not yet available do not count: with a slot free and 2,192 MB, a ready
-- request that needs 6,000 MB waits, and requests of other shapes that would fit but are
-- available only in an hour (their shapes higher than its, by the shapes' index) leave
-- the call with nothing to try: nothing locked or written.
SELECT sched.finish_attempt(a.attempt_id, a.lease_version, 'SUCCEEDED', NULL, '2026-01-01 12:02:13+00')
  FROM sched.attempt a WHERE a.request_id = :p_small;
SELECT sched.submit('e2000000-0000-4000-8000-000000000004', '52000000-0000-4000-8000-000000000004',
                    'paint', '1.0', reserve_memory_mb => 6000,
                    available_at => '2026-01-01 12:02:14+00') AS p_big3 \gset
SELECT count(sched.submit(('e2000000-0000-4000-8000-0000000001' || lpad(i::text, 2, '0'))::uuid,
                          ('52000000-0000-4000-8000-0000000001' || lpad(i::text, 2, '0'))::uuid,
                          'paint', '1.0', reserve_memory_mb => 100 * i,
                          available_at => '2026-01-01 13:00:00+00')) AS later
  FROM generate_series(1, 8) i;
SELECT count(*) > 0 AS a_later_shape_is_higher
  FROM sched.request l, sched.request b
 WHERE b.request_id = :p_big3 AND l.available_at = '2026-01-01 13:00:00+00' AND l.shape > b.shape;
BEGIN;
SELECT count(*) AS rows_returned FROM sched.dispatch_next(1, 'paint', at => '2026-01-01 12:02:15+00');
SELECT count(*) AS request_rows_locked_or_written FROM sched.request
 WHERE xmin = pg_current_xact_id()::xid OR xmax = pg_current_xact_id()::xid;
COMMIT;
