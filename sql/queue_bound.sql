--
-- queue_bound: where dispatch_next's queue fetch starts (queue_bound.c).  A request
-- placed leaves a dead entry at the head of its tenant's range of request_queue_idx
-- until the next vacuum; the fetch starts at the tenant's bound, the first entry not
-- known dead, instead of the head.  Observed through the order dispatch_next takes and
-- sched._queue_fetch_stats() (this backend's scans that moved a bound, fetches that
-- started at one):
--   A. the bound moves past the committed placements, one scan per call;
--   B. a request submitted with a key before the bound (a higher priority) is taken
--      first: its insert lowered the bound;
--   C. a REPEATABLE READ transaction neither moves nor uses the bound;
--   D. a transaction that has written does not move the bound: its own placements,
--      rolled back, are taken again;
--   E. a request whose claim expired is taken again.
-- Requires pg_sched in shared_preload_libraries.  The requests are tenant queue_bound's,
-- whose slot no other test uses.  T0 = 2024-03-01 12:00:00 UTC.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pg_sched CASCADE;
CREATE EXTENSION pg_sched;
RESET client_min_messages;
SET TIME ZONE 'UTC';
SET sched.heartbeat_ttl = '1d';
SELECT node_id FROM sched.upsert_node('n1', cpu_millis => 64000, memory_mb => 65536);
SELECT worker_id FROM sched.register_worker('n1', 'build', ARRAY['1'], slots => 100,
    worker_id => '00000000-0000-0000-0000-0000000000b1', at => '2024-03-01 11:00:00+00');

CREATE TEMP TABLE req (name text PRIMARY KEY, request_id bigint UNIQUE);
CREATE FUNCTION pg_temp.sub(name text, queued_at timestamptz, priority int DEFAULT 0)
RETURNS bigint LANGUAGE sql AS $$
    INSERT INTO req
    SELECT name, sched.submit(md5('execution ' || name)::uuid, md5('step ' || name)::uuid,
                              'build', '1', tenant => 'queue_bound', priority => priority,
                              available_at => queued_at)
    RETURNING request_id
$$;
CREATE FUNCTION pg_temp.dispatch(k int)
RETURNS TABLE (n bigint, name text, outcome text) LANGUAGE sql AS $$
    SELECT d.n, q.name, d.outcome
      FROM sched.dispatch_next(k, at => '2024-03-01 12:01:00+00')
           WITH ORDINALITY AS d(outcome, request_id, attempt_id, node_id, worker_id,
                                lease_version, score, detail, n)
      LEFT JOIN req q USING (request_id)
     ORDER BY d.n
$$;
-- the scans and bounded fetches since the last call of this function
CREATE TEMP TABLE seen (found bigint, used bigint);
INSERT INTO seen SELECT bounds_found, bounds_used FROM sched._queue_fetch_stats();
CREATE FUNCTION pg_temp.bounds(OUT found bigint, OUT used bigint) LANGUAGE sql AS $$
    WITH now AS (SELECT bounds_found, bounds_used FROM sched._queue_fetch_stats()),
         old AS (DELETE FROM seen RETURNING *),
         new AS (INSERT INTO seen SELECT * FROM now)
    SELECT now.bounds_found - old.found, now.bounds_used - old.used FROM now, old
$$;

-- the queue: a1 .. a6, a second apart, each submitted in its own transaction
SELECT pg_temp.sub('a' || i, '2024-03-01 11:59:00+00'::timestamptz + i * interval '1 s') IS NOT NULL
  FROM generate_series(1, 6) i;

-- ---------------------------------------------------------------------------------
-- A. Each call moves the bound past what the calls before it placed: one scan that
-- stores a bound, one fetch that starts at it.
-- ---------------------------------------------------------------------------------
SELECT * FROM pg_temp.dispatch(2);
-- (whether this first scan stores a bound depends on what an earlier run left in the
-- tenant's slot: at most a bound at a1, which the inserts lowered it to)
SELECT used FROM pg_temp.bounds();
SELECT * FROM pg_temp.dispatch(2);
SELECT * FROM pg_temp.bounds();

-- ---------------------------------------------------------------------------------
-- B. urgent (priority 5) has a key before the bound, which is now at a5: it is taken
-- first, then a5.
-- ---------------------------------------------------------------------------------
SELECT pg_temp.sub('urgent', '2024-03-01 11:59:30+00', priority => 5) IS NOT NULL;
SELECT * FROM pg_temp.dispatch(2);
SELECT * FROM pg_temp.bounds();

-- ---------------------------------------------------------------------------------
-- C. REPEATABLE READ: the fetch starts at the head (its snapshot may be older than the
-- bound); it takes a6 all the same.
-- ---------------------------------------------------------------------------------
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT * FROM pg_temp.dispatch(1);
ROLLBACK;
SELECT * FROM pg_temp.bounds();

-- ---------------------------------------------------------------------------------
-- D. A transaction places a6, then calls again: its second call has written (a dirty
-- snapshot would not return a6, which it deleted from the queue), so it starts at the
-- bound without moving it.  Rolled back, a6 is taken again.
-- ---------------------------------------------------------------------------------
SELECT pg_temp.sub('a7', '2024-03-01 11:59:07+00') IS NOT NULL;
BEGIN;
SELECT * FROM pg_temp.dispatch(1);
SELECT * FROM pg_temp.dispatch(1);
ROLLBACK;
SELECT * FROM pg_temp.bounds();
SELECT * FROM pg_temp.dispatch(1);

-- ---------------------------------------------------------------------------------
-- E. A claim that expired returns a7 to the queue (the claim wrote a new version at
-- the same key): claimed at 12:00:00 for 30 s, taken at 12:01:00.
-- ---------------------------------------------------------------------------------
SELECT count(*) FROM sched.claim_requests(1, '30 s', at => '2024-03-01 12:00:00+00');
SELECT * FROM pg_temp.dispatch(1);
SELECT * FROM pg_temp.bounds();
SELECT count(*) AS left_in_queue FROM sched.request WHERE state IN ('PENDING', 'CLAIMED');
