--
-- tenant_filter: dispatch_next(tenant => ...) judges the shapes of the tenant's ready
-- requests before its scan (src/queue.c, ready_shapes).  The shapes' index has no
-- tenant, so a shape's requests are looked through only so far (64): past that, the
-- shape is judged whether or not the tenant has one, never left out.
--   A. tenant b's requests of shape S come after 70 of tenant a's: b's calls place
--      them, although b's only other shape, W, waits for capacity (no node has GPUs).
--      Were S left out, every shape b is known to have would wait and the call would
--      end at once, placing nothing.
--   B. a tenant with nothing queued gets no row (tenant c); with only 10 of a's S
--      requests ahead, b's S requests are found within the look and placed.
--   C. tenant a's calls place a's requests, oldest first; with no tenant, both
--      tenants' (fair share between them).
-- Each section runs in a transaction that is rolled back.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pg_sched CASCADE;
CREATE EXTENSION pg_sched;
RESET client_min_messages;
SET TIME ZONE 'UTC';

SELECT node_id FROM sched.upsert_node('n1', cpu_millis => 64000, memory_mb => 65536);
SELECT worker_id IS NOT NULL AS registered
  FROM sched.register_worker('n1', 'build', ARRAY['1'], slots => 200, at => '2024-03-01 12:04:59+00');

-- tenant a: 70 requests of shape S (no GPU), queued first, one a second
SELECT count(sched.submit(gen_random_uuid(), gen_random_uuid(), 'build', '1', tenant => 'a',
                          available_at => '2024-03-01 12:00:00+00'::timestamptz + i * interval '1 s'))
  FROM generate_series(1, 70) i;
-- tenant b: one request of shape W (8 GPUs: no node has them), then two of shape S
SELECT count(sched.submit(gen_random_uuid(), gen_random_uuid(), 'build', '1', tenant => 'b',
                          min_gpus => 8, reserve_gpus => 8,
                          available_at => '2024-03-01 12:02:00+00'));
SELECT count(sched.submit(gen_random_uuid(), gen_random_uuid(), 'build', '1', tenant => 'b',
                          available_at => '2024-03-01 12:02:00+00'::timestamptz + i * interval '1 s'))
  FROM generate_series(1, 2) i;
SELECT tenant, count(*), count(DISTINCT shape) AS shapes FROM sched.request GROUP BY tenant ORDER BY tenant;

-- A
BEGIN;
SELECT d.outcome, r.tenant, r.reserve_gpus, count(*)
  FROM sched.dispatch_next(10, tenant => 'b', at => '2024-03-01 12:05:00+00') d
  JOIN sched.request r USING (request_id)
 GROUP BY 1, 2, 3 ORDER BY 1, 2, 3;
SELECT tenant, state, count(*) FROM sched.request GROUP BY 1, 2 ORDER BY 1, 2;
ROLLBACK;

-- B: tenant c has nothing queued; tenant b again, with a's S requests fewer than 64
BEGIN;
SELECT count(*) AS rows_for_c FROM sched.dispatch_next(10, tenant => 'c', at => '2024-03-01 12:05:00+00');
UPDATE sched.request SET state = 'CANCELLED'
 WHERE tenant = 'a' AND request_id > (SELECT min(request_id) + 9 FROM sched.request);
SELECT d.outcome, r.tenant, r.reserve_gpus, count(*)
  FROM sched.dispatch_next(10, tenant => 'b', at => '2024-03-01 12:05:00+00') d
  JOIN sched.request r USING (request_id)
 GROUP BY 1, 2, 3 ORDER BY 1, 2, 3;
ROLLBACK;

-- C
BEGIN;
SELECT d.outcome, r.tenant, count(*), min(r.available_at), max(r.available_at)
  FROM sched.dispatch_next(5, tenant => 'a', at => '2024-03-01 12:05:00+00') d
  JOIN sched.request r USING (request_id)
 GROUP BY 1, 2 ORDER BY 1, 2;
ROLLBACK;
BEGIN;
SELECT d.outcome, r.tenant, count(*), min(r.available_at), max(r.available_at)
  FROM sched.dispatch_next(5, at => '2024-03-01 12:05:00+00') d
  JOIN sched.request r USING (request_id)
 GROUP BY 1, 2 ORDER BY 1, 2;
ROLLBACK;
