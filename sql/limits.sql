--
-- limits: concurrency keys, rate limits and tenant quotas (issue 14, src/queue_limits.c).
-- Each limit: a request it holds back stays PENDING with the reason in last_reason,
-- sched.pending (blocked: transient), sched.explain and sched.queue_stats (limited),
-- and is dispatched again once the limit clears (an attempt ends; a rate limit's window
-- moves on).  Bad input to the three set_* functions and to submit's concurrency_key:
-- the usual SQLSTATEs, nothing written.  Exactness under concurrency: isolation specs
-- limit_*; the pgbench suite checks the history of a concurrent run.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pg_sched CASCADE;
CREATE EXTENSION pg_sched;
RESET client_min_messages;
SET TIME ZONE 'UTC';

CREATE FUNCTION pg_temp.err(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

-- a fleet of two nodes with 16 slots and 8 GPUs each (room for everything below: only
-- the limits hold requests back); every call at a fixed time
SELECT count(*) FROM (SELECT sched.upsert_node('n' || i, cpu_millis => 8000, memory_mb => 8192, gpus => 8)
                        FROM generate_series(1, 2) i) x;
SELECT count(*) FROM (SELECT sched.register_worker('n' || i, 'cap', ARRAY['1'], 16,
                                                   ('aaaaaaaa-0000-4000-8000-00000000000' || i)::uuid,
                                                   '2024-05-01 10:00:00+00')
                        FROM generate_series(1, 2) i) x;
CREATE FUNCTION pg_temp.submit(step int, key text, tenant text DEFAULT 'default', gpus int DEFAULT 0)
RETURNS bigint LANGUAGE sql AS $$
    SELECT sched.submit(('ec000000-0000-4000-8000-' || lpad(step::text, 12, '0'))::uuid,
                        ('5e000000-0000-4000-8000-' || lpad(step::text, 12, '0'))::uuid,
                        'cap', '1', tenant => tenant, reserve_gpus => gpus, min_gpus => gpus,
                        available_at => '2024-05-01 10:00:00+00', concurrency_key => key)
$$;
-- the workers heartbeat at `at`, then one dispatch_next; rows by step
CREATE FUNCTION pg_temp.dispatch(at text) RETURNS TABLE (step int, outcome text, detail text)
LANGUAGE sql AS $$
    SELECT count(sched.heartbeat(w.worker_id, w.generation, at::timestamptz)) FROM sched.worker w;
    SELECT right(r.step_id::text, 12)::int, d.outcome, d.detail
      FROM sched.dispatch_next(10, at => at::timestamptz) d JOIN sched.request r USING (request_id)
     ORDER BY 1
$$;
CREATE FUNCTION pg_temp.req(step int) RETURNS bigint LANGUAGE sql AS $$
    SELECT r.request_id FROM sched.request r
     WHERE r.step_id = ('5e000000-0000-4000-8000-' || lpad(step::text, 12, '0'))::uuid
$$;
CREATE FUNCTION pg_temp.finish(step int, at text) RETURNS text LANGUAGE sql AS $$
    SELECT sched.finish_attempt(a.attempt_id, a.lease_version, 'SUCCEEDED', at => at::timestamptz)
      FROM sched.attempt a
     WHERE a.step_id = ('5e000000-0000-4000-8000-' || lpad(step::text, 12, '0'))::uuid
$$;

-- ---------------------------------------------------------------------------------
-- Bad input: nothing written
-- ---------------------------------------------------------------------------------
SELECT p, pg_temp.err(q) FROM (VALUES
    ('key NULL',            $$SELECT sched.set_concurrency_limit(NULL, 1)$$),
    ('key empty',           $$SELECT sched.set_concurrency_limit('', 1)$$),
    ('key too long',        format('SELECT sched.set_concurrency_limit(%L, 1)', repeat('k', 257))),
    ('max_live 0',          $$SELECT sched.set_concurrency_limit('k', 0)$$),
    ('max_live -1',         $$SELECT sched.set_concurrency_limit('k', -1)$$),
    ('rate key NULL',       $$SELECT sched.set_rate_limit(NULL, 1, '1 s')$$),
    ('rate dispatches NULL', $$SELECT sched.set_rate_limit('k', NULL, '1 s')$$),
    ('rate per NULL',       $$SELECT sched.set_rate_limit('k', 1, NULL)$$),
    ('rate dispatches 0',   $$SELECT sched.set_rate_limit('k', 0, '1 s')$$),
    ('rate per 0',          $$SELECT sched.set_rate_limit('k', 1, '0')$$),
    ('rate per negative',   $$SELECT sched.set_rate_limit('k', 1, '-1 s')$$),
    ('rate per 31 days',    $$SELECT sched.set_rate_limit('k', 1, '31 days')$$),
    ('quota tenant NULL',   $$SELECT sched.set_tenant_quota(NULL, 1, NULL, NULL, NULL)$$),
    ('quota max_live 0',    $$SELECT sched.set_tenant_quota('t', 0, NULL, NULL, NULL)$$),
    ('quota cpu 0',         $$SELECT sched.set_tenant_quota('t', NULL, 0, NULL, NULL)$$),
    ('quota memory -1',     $$SELECT sched.set_tenant_quota('t', NULL, NULL, -1, NULL)$$),
    ('quota gpus 0',        $$SELECT sched.set_tenant_quota('t', NULL, NULL, NULL, 0)$$),
    ('submit key empty',    $$SELECT sched.submit(gen_random_uuid(), gen_random_uuid(), 'cap', '1', concurrency_key => '')$$),
    ('submit key too long', format('SELECT sched.submit(gen_random_uuid(), gen_random_uuid(), %L, %L, concurrency_key => %L)',
                                   'cap', '1', repeat('k', 257)))
) AS t(p, q);
SELECT (SELECT count(*) FROM sched.concurrency_limit) + (SELECT count(*) FROM sched.rate_limit)
     + (SELECT count(*) FROM sched.tenant_quota) + (SELECT count(*) FROM sched.request) AS nothing_written;
-- NULL removes; removing what is not there is no error
SELECT sched.set_concurrency_limit('k', 3), sched.set_concurrency_limit('k', NULL),
       sched.set_rate_limit('k', NULL, NULL), sched.set_tenant_quota('t', NULL, NULL, NULL, NULL);
SELECT count(*) AS no_limits FROM sched.concurrency_limit;

-- ---------------------------------------------------------------------------------
-- 1. A concurrency key: at most 2 live attempts of key "build"
-- ---------------------------------------------------------------------------------
SELECT * FROM sched.set_concurrency_limit('build', 2);
SELECT pg_temp.submit(1, 'build') IS NOT NULL, pg_temp.submit(2, 'build') IS NOT NULL,
       pg_temp.submit(3, 'build') IS NOT NULL, pg_temp.submit(4, NULL) IS NOT NULL;
SELECT * FROM pg_temp.dispatch('2024-05-01 10:00:01+00');
-- it waits: PENDING, no try counted, still ready; the reason everywhere
SELECT state, tries, available_at, last_reason FROM sched.request WHERE request_id = pg_temp.req(3);
SELECT blocked, explanation LIKE 'concurrency_limit: key "build" has 2 of 2 live attempts; %' AS explained
  FROM sched.pending('2024-05-01 10:00:02+00') WHERE request_id = pg_temp.req(3);
SELECT line FROM regexp_split_to_table(sched.explain(pg_temp.req(3), '2024-05-01 10:00:02+00'), E'\n') line
 WHERE line LIKE '%limit%';
SELECT tenant, pending, limited FROM sched.queue_stats('2024-05-01 10:00:02+00');
SELECT limit_kind, reason, clears FROM sched.limit_explanations('2024-05-01 10:00:02+00');
-- the next call writes nothing for it (same reason)
SELECT xmin AS before FROM sched.request WHERE request_id = 3 \gset
SELECT * FROM pg_temp.dispatch('2024-05-01 10:00:03+00');
SELECT xmin = :'before'::xid AS untouched FROM sched.request WHERE request_id = pg_temp.req(3);
-- an attempt of the key ends: the request goes at the next call
SELECT pg_temp.finish(1, '2024-05-01 10:00:04+00');
SELECT * FROM pg_temp.dispatch('2024-05-01 10:00:05+00');
SELECT count(*) AS no_limit_left FROM sched.limit_explanations('2024-05-01 10:00:05+00');
-- raising the limit lets more go at once; the attempts carry their key
SELECT * FROM sched.set_concurrency_limit('build', 5);
SELECT concurrency_key, status, count(*) FROM sched.attempt GROUP BY 1, 2 ORDER BY 1, 2;

-- ---------------------------------------------------------------------------------
-- 2. A rate limit: at most 2 dispatches of key "api" per minute (sliding window)
-- ---------------------------------------------------------------------------------
SELECT * FROM sched.set_rate_limit('api', 2, '1 min');
SELECT pg_temp.submit(11, 'api') IS NOT NULL, pg_temp.submit(12, 'api') IS NOT NULL,
       pg_temp.submit(13, 'api') IS NOT NULL;
SELECT * FROM pg_temp.dispatch('2024-05-01 10:01:00+00');
-- waits until the first dispatch leaves the window: available_at is that time
SELECT state, tries, available_at, last_reason FROM sched.request WHERE request_id = pg_temp.req(13);
SELECT line FROM regexp_split_to_table(sched.explain(pg_temp.req(13), '2024-05-01 10:01:10+00'), E'\n') line
 WHERE line LIKE '%limit%';
-- not tried before (not ready), tried at the time
SELECT * FROM pg_temp.dispatch('2024-05-01 10:01:30+00');
SELECT * FROM pg_temp.dispatch('2024-05-01 10:02:00+00');

-- ---------------------------------------------------------------------------------
-- 3. A tenant quota: tenant "lab" may hold at most 3 GPUs, 2 live attempts
-- ---------------------------------------------------------------------------------
SELECT * FROM sched.set_tenant_quota('lab', 2, NULL, NULL, 3);
SELECT count(*) FROM (VALUES (pg_temp.submit(21, NULL, 'lab', 2)), (pg_temp.submit(22, NULL, 'lab', 2)),
       (pg_temp.submit(23, NULL, 'lab', 1)), (pg_temp.submit(24, NULL, 'lab', 0)),
       (pg_temp.submit(25, NULL, 'other', 2))) v;
SELECT * FROM pg_temp.dispatch('2024-05-01 10:03:00+00');
-- 22 would hold 4 GPUs, 24 a third live attempt; the other tenant is served
SELECT right(step_id::text, 12)::int AS step, last_reason FROM sched.request
 WHERE request_id IN (pg_temp.req(22), pg_temp.req(23), pg_temp.req(24)) ORDER BY 1;
SELECT request_id = pg_temp.req(22) AS step_22, blocked FROM sched.pending('2024-05-01 10:03:01+00')
 WHERE request_id IN (pg_temp.req(22), pg_temp.req(23), pg_temp.req(24)) ORDER BY request_id;
SELECT pg_temp.finish(21, '2024-05-01 10:03:02+00');
SELECT * FROM pg_temp.dispatch('2024-05-01 10:03:03+00');

-- A transaction that dispatched under the quota cannot be prepared (its claim, counted
-- by other dispatchers, would go with the session: src/limit_claims.c); it is rolled back
SELECT tenant, max_live FROM sched.set_tenant_quota('lab2', 5, NULL, NULL, NULL);
SELECT count(*) FROM (VALUES (pg_temp.submit(26, NULL, 'lab2', 0))) v;
BEGIN;
SELECT step, outcome FROM pg_temp.dispatch('2024-05-01 10:03:04+00') WHERE step = 26;
PREPARE TRANSACTION 'pg_sched_limits';
SELECT state FROM sched.request WHERE request_id = pg_temp.req(26);

-- A request the dispatching statement's own snapshot does not see (submitted in the same
-- statement here; in production, submitted or requeued after a dispatch_next began, and
-- fetched from the queue all the same) is held to its tenant's quota: the limits are read
-- with the request the dispatch locked, not with the statement's snapshot
SELECT tenant, max_live FROM sched.set_tenant_quota('lab3', 1, NULL, NULL, NULL);
SELECT count(*) FROM (VALUES (pg_temp.submit(27, NULL, 'lab3', 0))) v;
SELECT outcome FROM sched.dispatch_attempt(pg_temp.req(27), at => '2024-05-01 10:03:05+00');
SELECT d.outcome, d.detail
  FROM (SELECT pg_temp.submit(28, NULL, 'lab3', 0) AS id OFFSET 0) s,
       LATERAL sched.dispatch_attempt(s.id, at => '2024-05-01 10:03:06+00') d;
SELECT count(*) AS lab3_live FROM sched.attempt
 WHERE tenant = 'lab3' AND status IN ('DISPATCHED', 'RUNNING');

-- A transaction claims under at most 1,024 keys and tenants (src/limit_claims.c, with
-- pg_sched preloaded): one dispatch_next of 1,030 requests, each with a limited key of
-- its own, places 1,024 of them and passes the other 6 over, for the next call
SELECT sched.upsert_node('wide', cpu_millis => 8000, memory_mb => 8192) IS NOT NULL AS node;
SELECT sched.register_worker('wide', 'widecap', ARRAY['1'], 2000,
                             'bbbbbbbb-0000-4000-8000-000000000001',
                             '2024-05-01 10:05:00+00') IS NOT NULL AS worker;
SELECT count(sched.set_concurrency_limit('wk' || i, 1)) FROM generate_series(1, 1030) i;
SELECT count(sched.submit(gen_random_uuid(), gen_random_uuid(), 'widecap', '1', tenant => 'wide',
                          available_at => '2024-05-01 10:00:00+00', concurrency_key => 'wk' || i))
  FROM generate_series(1, 1030) i;
SELECT outcome, count(*) FROM sched.dispatch_next(2000, tenant => 'wide', at => '2024-05-01 10:05:01+00')
 GROUP BY outcome;
SELECT count(*) AS left_pending FROM sched.request WHERE tenant = 'wide' AND state = 'PENDING';
SELECT outcome, count(*) FROM sched.dispatch_next(2000, tenant => 'wide', at => '2024-05-01 10:05:02+00')
 GROUP BY outcome;

-- A key's count.  Its index entries bound it from above (queue_limits.c,
-- key_live_bound), and a bound that reaches the limit is followed by the exact count.
-- Here an attempt of key "stale" ends in the transaction that dispatched it, so nothing
-- can mark its entry dead: with 1 live attempt of 2 allowed and 2 entries, one more
-- request goes, and the next is held back with the exact count in its reason
SELECT * FROM sched.set_concurrency_limit('stale', 2);
BEGIN;
SELECT count(*) FROM (VALUES (pg_temp.submit(41, 'stale', 'st')), (pg_temp.submit(42, 'stale', 'st'))) v;
SELECT count(sched.heartbeat(w.worker_id, w.generation, '2024-05-01 10:06:00+00')) FROM sched.worker w;
SELECT right(r.step_id::text, 12)::int AS step, d.outcome
  FROM sched.dispatch_next(10, tenant => 'st', at => '2024-05-01 10:06:00+00') d JOIN sched.request r USING (request_id)
 ORDER BY 1;
SELECT pg_temp.finish(41, '2024-05-01 10:06:01+00');
SELECT count(*) FROM (VALUES (pg_temp.submit(43, 'stale', 'st')), (pg_temp.submit(44, 'stale', 'st'))) v;
SELECT right(r.step_id::text, 12)::int AS step, d.outcome, d.detail
  FROM sched.dispatch_next(10, tenant => 'st', at => '2024-05-01 10:06:02+00') d JOIN sched.request r USING (request_id)
 ORDER BY 1;
COMMIT;
SELECT status, count(*) FROM sched.attempt WHERE concurrency_key = 'stale' GROUP BY 1 ORDER BY 1;

-- ---------------------------------------------------------------------------------
-- The counters and the dump
-- ---------------------------------------------------------------------------------
SELECT outcome, reason, calls > 0 AS counted FROM sched.dispatch_stats
 WHERE reason IN ('concurrency_limit', 'rate_limited', 'tenant_quota_exceeded') ORDER BY reason;
SELECT c.relname FROM pg_extension e, unnest(e.extconfig) t(oid) JOIN pg_class c ON c.oid = t.oid
 WHERE e.extname = 'pg_sched' AND c.relname IN ('concurrency_limit', 'rate_limit', 'tenant_quota')
 ORDER BY 1;

DROP EXTENSION pg_sched CASCADE;
