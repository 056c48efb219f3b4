--
-- queue_order: stage 1, the queue order of SPEC section 7 (issue 3, items 1-3), observed
-- through sched.dispatch_next and sched.claim_requests:
--   A. priorities (higher first), then age, then request_id;
--   B. linear aging: a priority-0 request queued exactly 120 s earlier ties with a
--      priority-2 one (aging_interval 60 s); 1 s either side of the crossover decides;
--   C. sched.aging_interval matters, and the key is fixed when the request is submitted;
--   D. tenant fair share with weights (live attempts / weight, ties by tenant name
--      bytewise), re-evaluated after every dispatch, counting earlier live attempts;
--   E. starvation override (sched.starvation_after): starving requests first, oldest
--      first, whatever their tenant or priority; "longer than" is strict;
--   F. available_at in the future is not taken;
--   G. unschedulable backoff (1 s doubling, capped at sched.unschedulable_backoff_max)
--      and head-of-line skipping;
--   H. capability and tenant filters;
--   I. claims: NOT_CLAIMED for stale and foreign claims, expiry returns the request to
--      the queue (by a later claim_requests, or by reap_expired);
--   J. bad input of dispatch_next and claim_requests (SQLSTATE, nothing written).
--
-- Every section but the fleet and J runs in a transaction that is rolled back, so each
-- starts from an empty queue (request ids keep growing: sequences are not rolled back).
-- Requests are named in the temp table req; outputs show names, not ids or uuids.
-- T0 = 2024-03-01 12:00:00 UTC.  sort_key is shown relative to T0, in seconds
-- (epoch(queued_at) - priority * aging_interval, fixed at submit).
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pg_sched CASCADE;
CREATE EXTENSION pg_sched;
RESET client_min_messages;
SET TIME ZONE 'UTC';

-- ---------------------------------------------------------------------------------
-- Fleet: n1 serves 'build', n2 serves 'render', 100 slots each, plenty of capacity.
-- The workers registered at 11:00; a heartbeat TTL of one day keeps them fresh for
-- every "at" used here (heartbeats are not what this file tests).
-- ---------------------------------------------------------------------------------
SET sched.heartbeat_ttl = '1d';
SELECT node_id, cpu_millis, memory_mb FROM sched.upsert_node('n1', cpu_millis => 64000, memory_mb => 65536);
SELECT node_id, cpu_millis, memory_mb FROM sched.upsert_node('n2', cpu_millis => 64000, memory_mb => 65536);
SELECT * FROM sched.register_worker('n1', 'build', ARRAY['1'], slots => 100,
    worker_id => '00000000-0000-0000-0000-0000000000b1', at => '2024-03-01 11:00:00+00');
SELECT * FROM sched.register_worker('n2', 'render', ARRAY['1'], slots => 100,
    worker_id => '00000000-0000-0000-0000-0000000000e2', at => '2024-03-01 11:00:00+00');

-- named requests: each in its own execution, execution and step ids derived from the name
CREATE TEMP TABLE req (name text PRIMARY KEY, request_id bigint UNIQUE);
CREATE FUNCTION pg_temp.sub(name text, queued_at timestamptz, priority int DEFAULT 0,
                            tenant text DEFAULT 'default', capability text DEFAULT 'build',
                            required_labels jsonb DEFAULT '{}')
RETURNS bigint LANGUAGE sql AS $$
    INSERT INTO req
    SELECT name, sched.submit(md5('execution ' || name)::uuid, md5('step ' || name)::uuid,
                              capability, '1', tenant => tenant, priority => priority,
                              required_labels => required_labels, available_at => queued_at)
    RETURNING request_id
$$;
-- the rows of dispatch_next, in the order tried (detail only when not DISPATCHED)
CREATE FUNCTION pg_temp.dispatch(k int, t timestamptz, cap text DEFAULT NULL, ten text DEFAULT NULL)
RETURNS TABLE (n bigint, name text, outcome text, node_id text, detail text) LANGUAGE sql AS $$
    SELECT d.n, q.name, d.outcome, d.node_id, CASE WHEN d.outcome <> 'DISPATCHED' THEN d.detail END
      FROM sched.dispatch_next(k, cap, ten, t)
           WITH ORDINALITY AS d(outcome, request_id, attempt_id, node_id, worker_id,
                                lease_version, score, detail, n)
      LEFT JOIN req q USING (request_id)
     ORDER BY d.n
$$;
-- the rows of claim_requests, in order
CREATE FUNCTION pg_temp.claim(k int, t timestamptz, cap text DEFAULT NULL, ten text DEFAULT NULL)
RETURNS TABLE (n bigint, name text, claimed_until timestamptz) LANGUAGE sql AS $$
    SELECT c.n, q.name, c.claimed_until
      FROM sched.claim_requests(k, '30 s', cap, ten, t)
           WITH ORDINALITY AS c(request_id, claim_id, claimed_until, n)
      LEFT JOIN req q USING (request_id)
     ORDER BY c.n
$$;
-- the queue as stored: key relative to T0
CREATE TEMP VIEW queue AS
SELECT q.name, r.tenant, r.priority, r.queued_at, r.state,
       r.sort_key - extract(epoch FROM timestamptz '2024-03-01 12:00:00+00') AS key_vs_t0
  FROM req q JOIN sched.request r USING (request_id);

-- ---------------------------------------------------------------------------------
-- A. Priorities: higher first; equal effective priority: older first; then the
-- smallest request_id.  Order expected: p5-old, p5-first, p5-second, p1, p0.
-- ---------------------------------------------------------------------------------
BEGIN;
SELECT count(*) FROM (VALUES
    (pg_temp.sub('p0',        '2024-03-01 11:59:00+00', priority => 0)),
    (pg_temp.sub('p5-first',  '2024-03-01 11:59:00+00', priority => 5)),
    (pg_temp.sub('p1',        '2024-03-01 11:59:00+00', priority => 1)),
    (pg_temp.sub('p5-second', '2024-03-01 11:59:00+00', priority => 5)),
    (pg_temp.sub('p5-old',    '2024-03-01 11:58:59+00', priority => 5))) v;
SELECT name, priority, queued_at, key_vs_t0 FROM pg_temp.queue ORDER BY name;
SAVEPOINT a;
SELECT * FROM pg_temp.claim(10, '2024-03-01 12:00:00+00');
ROLLBACK TO a;
-- dispatch_next takes the same order
SELECT * FROM pg_temp.dispatch(10, '2024-03-01 12:00:00+00');
ROLLBACK;

-- ---------------------------------------------------------------------------------
-- B. Aging (sched.aging_interval 60 s).  prio2 (queued T0-100) has key T0-220.  A
-- priority-0 request overtakes it once it has waited 120 s longer: a-119 (waited 119 s
-- longer) stays behind, a-120 ties on effective priority and wins as the older one,
-- a-121 is ahead.  p1 (priority 1, waited 60 s longer) ties too: the tie goes oldest
-- first.  Expected: a-121, a-120, p1, prio2, a-119.
-- ---------------------------------------------------------------------------------
BEGIN;
SELECT count(*) FROM (VALUES
    (pg_temp.sub('prio2', '2024-03-01 11:58:20+00', priority => 2)),
    (pg_temp.sub('a-119', '2024-03-01 11:56:21+00')),
    (pg_temp.sub('a-120', '2024-03-01 11:56:20+00')),
    (pg_temp.sub('a-121', '2024-03-01 11:56:19+00')),
    (pg_temp.sub('p1',    '2024-03-01 11:57:20+00', priority => 1))) v;
SELECT name, priority, queued_at, key_vs_t0 FROM pg_temp.queue ORDER BY key_vs_t0, queued_at;
SELECT * FROM pg_temp.dispatch(10, '2024-03-01 12:00:00+00');
ROLLBACK;

-- ---------------------------------------------------------------------------------
-- C. The aging interval matters, and the key is computed at submit.  c-p0 waited 69 s
-- longer than c-p2 (priority 2).  Submitted with aging_interval 30 s, c-p0 is ahead
-- (key T0-70 < T0-61); the same pair submitted with 60 s (d-p0, d-p2) has the priority-2
-- request ahead (T0-121 < T0-70).  Dispatching with 60 s in effect keeps the keys of
-- submit time: d-p2, c-p0, d-p0 (same key and age as c-p0: request_id), c-p2.
-- ---------------------------------------------------------------------------------
BEGIN;
SET LOCAL sched.aging_interval = '30s';
SELECT count(*) FROM (VALUES
    (pg_temp.sub('c-p0', '2024-03-01 11:58:50+00')),
    (pg_temp.sub('c-p2', '2024-03-01 11:59:59+00', priority => 2))) v;
SET LOCAL sched.aging_interval = '60s';
SELECT count(*) FROM (VALUES
    (pg_temp.sub('d-p0', '2024-03-01 11:58:50+00')),
    (pg_temp.sub('d-p2', '2024-03-01 11:59:59+00', priority => 2))) v;
SELECT name, priority, queued_at, key_vs_t0 FROM pg_temp.queue ORDER BY name;
SELECT * FROM pg_temp.dispatch(10, '2024-03-01 12:00:00+00');
ROLLBACK;

-- ---------------------------------------------------------------------------------
-- D. Tenant fair share.  'Zenith' has weight 2, 'acme' the default 1.  Bytewise,
-- 'Zenith' < 'acme' (upper case first), so ties go to Zenith.  Four requests each, all
-- priority 0, z1/a1 oldest.  The tenant is chosen again after every dispatch, by live
-- attempts / weight:
--   from an idle fleet: z1 (0=0, name), a1 (0<1/2), z2 (1/2<1), z3 (1=1, name),
--   a2 (1<3/2), z4 (3/2<2), a3, a4 (Zenith has nothing left);
--   with one acme attempt already live: z1 (0<1), z2 (1/2<1), z3 (1=1, name),
--   a2 (1<3/2), z4 (3/2<2), a3, a4.
-- ---------------------------------------------------------------------------------
BEGIN;
SELECT tenant, weight FROM sched.set_tenant_weight('Zenith', 2);
SELECT count(*) FROM (VALUES
    (pg_temp.sub('a1', '2024-03-01 11:59:00+00', tenant => 'acme')),
    (pg_temp.sub('a2', '2024-03-01 11:59:10+00', tenant => 'acme')),
    (pg_temp.sub('a3', '2024-03-01 11:59:20+00', tenant => 'acme')),
    (pg_temp.sub('a4', '2024-03-01 11:59:30+00', tenant => 'acme')),
    (pg_temp.sub('z1', '2024-03-01 11:59:00+00', tenant => 'Zenith')),
    (pg_temp.sub('z2', '2024-03-01 11:59:10+00', tenant => 'Zenith')),
    (pg_temp.sub('z3', '2024-03-01 11:59:20+00', tenant => 'Zenith')),
    (pg_temp.sub('z4', '2024-03-01 11:59:30+00', tenant => 'Zenith'))) v;
SAVEPOINT d;
SELECT * FROM pg_temp.dispatch(8, '2024-03-01 12:00:00+00');
ROLLBACK TO d;
-- an earlier dispatch (tenant filter) leaves one acme attempt live; it counts
SELECT * FROM pg_temp.dispatch(1, '2024-03-01 12:00:00+00', ten => 'acme');
SELECT tenant, count(*) AS live FROM sched.attempt
 WHERE status IN ('DISPATCHED', 'RUNNING') GROUP BY tenant ORDER BY tenant;
SELECT * FROM pg_temp.dispatch(7, '2024-03-01 12:00:01+00');
SELECT tenant, count(*) AS live FROM sched.attempt
 WHERE status IN ('DISPATCHED', 'RUNNING') GROUP BY tenant ORDER BY tenant;
ROLLBACK;

-- ---------------------------------------------------------------------------------
-- E. Starvation override.  At T0: s1 (acme, waited 400 s), s2 (Zenith, 301 s),
-- s3 (Zenith, exactly 300 s), s4 (Zenith, priority 10, 10 s), s5 (acme, priority 20, 5 s).
-- Default starvation_after (10 min): nobody starves; fair share and priority give
-- s4 (tie, name), s5 (0<1), s2 (1=1, name), s1 (1<2), s3.
-- starvation_after 5 min: s1 and s2 waited longer (s3 did not: "longer than" is strict)
-- and go first, oldest first; then s4 (1=1, name), s5 (1<2), s3.
-- ---------------------------------------------------------------------------------
BEGIN;
SELECT count(*) FROM (VALUES
    (pg_temp.sub('s1', '2024-03-01 11:53:20+00', tenant => 'acme')),
    (pg_temp.sub('s2', '2024-03-01 11:54:59+00', tenant => 'Zenith')),
    (pg_temp.sub('s3', '2024-03-01 11:55:00+00', tenant => 'Zenith')),
    (pg_temp.sub('s4', '2024-03-01 11:59:50+00', tenant => 'Zenith', priority => 10)),
    (pg_temp.sub('s5', '2024-03-01 11:59:55+00', tenant => 'acme', priority => 20))) v;
SHOW sched.starvation_after;
SAVEPOINT e;
SELECT * FROM pg_temp.dispatch(10, '2024-03-01 12:00:00+00');
ROLLBACK TO e;
SET LOCAL sched.starvation_after = '5min';
SELECT * FROM pg_temp.dispatch(10, '2024-03-01 12:00:00+00');
ROLLBACK TO e;
-- claim_requests honours starvation too
SET LOCAL sched.starvation_after = '5min';
SELECT * FROM pg_temp.claim(2, '2024-03-01 12:00:00+00');
ROLLBACK;

-- ---------------------------------------------------------------------------------
-- F. A request whose available_at is in the future is not taken, even with the
-- highest priority; it is taken from available_at on (available_at <= at).
-- ---------------------------------------------------------------------------------
BEGIN;
SELECT count(*) FROM (VALUES
    (pg_temp.sub('later', '2024-03-01 12:00:01+00', priority => 9)),
    (pg_temp.sub('now',   '2024-03-01 12:00:00+00'))) v;
SAVEPOINT f;
SELECT * FROM pg_temp.claim(5, '2024-03-01 12:00:00+00');
ROLLBACK TO f;
SELECT * FROM pg_temp.dispatch(5, '2024-03-01 12:00:00+00');
SELECT * FROM pg_temp.claim(5, '2024-03-01 12:00:00.999+00');
SELECT * FROM pg_temp.dispatch(5, '2024-03-01 12:00:00.999+00');
SELECT * FROM pg_temp.dispatch(5, '2024-03-01 12:00:01+00');
ROLLBACK;

-- ---------------------------------------------------------------------------------
-- G. Backoff and head-of-line skipping.  u (priority 9) requires a label no node has;
-- it heads the queue, is tried first, gets UNSCHEDULABLE with its reason, and the same
-- call goes on to dispatch g1 behind it.  Its available_at moves to at + 1 s, then
-- 2 s, 4 s, 8 s, capped here at sched.unschedulable_backoff_max = 10 s; queued_at
-- never moves.
-- ---------------------------------------------------------------------------------
BEGIN;
SET LOCAL sched.unschedulable_backoff_max = '10s';
SELECT count(*) FROM (VALUES
    (pg_temp.sub('u',  '2024-03-01 12:00:00+00', priority => 9, required_labels => '{"gpu":"a100"}')),
    (pg_temp.sub('g1', '2024-03-01 12:00:00+00')),
    (pg_temp.sub('g2', '2024-03-01 12:00:00+00'))) v;
SELECT * FROM pg_temp.dispatch(1, '2024-03-01 12:00:00+00');
SELECT q.name, r.state, r.tries, r.last_reason, r.queued_at, r.available_at
  FROM req q JOIN sched.request r USING (request_id) ORDER BY q.name;
-- u is not ready before 12:00:01: only g2 is tried
SELECT * FROM pg_temp.dispatch(5, '2024-03-01 12:00:00.5+00');
-- every try exactly at u's available_at: the backoff doubles up to the cap
CREATE TEMP TABLE backoff_log (try int, at timestamptz, outcome text, tries int,
                               available_at timestamptz, backoff interval) ON COMMIT DROP;
DO $$
DECLARE
    t timestamptz;
    o text;
BEGIN
    FOR i IN 1..6 LOOP
        SELECT r.available_at INTO t FROM sched.request r JOIN req q USING (request_id) WHERE q.name = 'u';
        SELECT string_agg(d.outcome, ',') INTO o FROM sched.dispatch_next(5, at => t) d;
        INSERT INTO backoff_log
        SELECT i, t, o, r.tries, r.available_at, r.available_at - t
          FROM sched.request r JOIN req q USING (request_id) WHERE q.name = 'u';
    END LOOP;
END $$;
SELECT * FROM backoff_log ORDER BY try;
SELECT q.name, r.state, r.tries, r.last_reason, r.queued_at
  FROM req q JOIN sched.request r USING (request_id) WHERE q.name = 'u';
-- once a node has the label, u is dispatched at its next try, not before
SELECT node_id, labels FROM sched.upsert_node('n1', labels => '{"gpu":"a100"}');
SELECT * FROM pg_temp.dispatch(5, '2024-03-01 12:00:44+00');
SELECT * FROM pg_temp.dispatch(5, '2024-03-01 12:00:45+00');
SELECT q.name, r.state, r.last_reason, r.queued_at
  FROM req q JOIN sched.request r USING (request_id) WHERE q.name = 'u';
ROLLBACK;

-- ---------------------------------------------------------------------------------
-- H. Capability and tenant filters of claim_requests and dispatch_next.
-- ---------------------------------------------------------------------------------
BEGIN;
SELECT count(*) FROM (VALUES
    (pg_temp.sub('build-acme',    '2024-03-01 11:59:50+00', tenant => 'acme')),
    (pg_temp.sub('render-acme',   '2024-03-01 11:59:51+00', tenant => 'acme', capability => 'render')),
    (pg_temp.sub('build-Zenith',  '2024-03-01 11:59:52+00', tenant => 'Zenith')),
    (pg_temp.sub('render-Zenith', '2024-03-01 11:59:53+00', tenant => 'Zenith', capability => 'render'))) v;
SAVEPOINT h;
SELECT * FROM pg_temp.claim(10, '2024-03-01 12:00:00+00', cap => 'render');
ROLLBACK TO h;
SELECT * FROM pg_temp.claim(10, '2024-03-01 12:00:00+00', ten => 'acme');
ROLLBACK TO h;
SELECT * FROM pg_temp.claim(10, '2024-03-01 12:00:00+00', cap => 'build', ten => 'Zenith');
ROLLBACK TO h;
SELECT * FROM pg_temp.claim(10, '2024-03-01 12:00:00+00', cap => 'nothing');
SELECT * FROM pg_temp.claim(10, '2024-03-01 12:00:00+00', ten => 'nobody');
SELECT * FROM pg_temp.dispatch(10, '2024-03-01 12:00:00+00', cap => 'nothing');
SELECT * FROM pg_temp.dispatch(10, '2024-03-01 12:00:00+00', cap => 'render');
SELECT * FROM pg_temp.dispatch(10, '2024-03-01 12:00:00+00', ten => 'acme');
SELECT * FROM pg_temp.dispatch(10, '2024-03-01 12:00:00+00', cap => 'render');
SELECT * FROM pg_temp.dispatch(10, '2024-03-01 12:00:00+00');
ROLLBACK;

-- ---------------------------------------------------------------------------------
-- I. Claims.  k1..k3 queued in that order.  A claim holds its requests until
-- claimed_until; other claimers and dispatch_next pass them over;
-- dispatch_attempt with another claim (foreign, or the request's former claim: stale)
-- answers NOT_CLAIMED and changes nothing.  An expired claim returns the request to the
-- queue: the next claim_requests takes it, or reap_expired puts it back to PENDING.
-- ---------------------------------------------------------------------------------
BEGIN;
SELECT count(*) FROM (VALUES
    (pg_temp.sub('k1', '2024-03-01 11:59:57+00')),
    (pg_temp.sub('k2', '2024-03-01 11:59:58+00')),
    (pg_temp.sub('k3', '2024-03-01 11:59:59+00'))) v;
CREATE TEMP TABLE claims (claim text, name text, claim_id uuid, claimed_until timestamptz) ON COMMIT DROP;
-- claim c1 at T0: k1, k2 until T0+30
INSERT INTO claims SELECT 'c1', q.name, c.claim_id, c.claimed_until
  FROM sched.claim_requests(2, '30 s', at => '2024-03-01 12:00:00+00') WITH ORDINALITY c
  JOIN req q USING (request_id) ORDER BY c.ordinality;
-- claim c2 at T0+10: only k3 is left; dispatch_next finds nothing ready
INSERT INTO claims SELECT 'c2', q.name, c.claim_id, c.claimed_until
  FROM sched.claim_requests(5, '30 s', at => '2024-03-01 12:00:10+00') WITH ORDINALITY c
  JOIN req q USING (request_id) ORDER BY c.ordinality;
SELECT claim, name, claimed_until FROM claims ORDER BY claim, name;
SELECT q.name, r.state, r.claimed_until, r.claim_id = c.claim_id AS held_by_its_claim
  FROM req q JOIN sched.request r USING (request_id) LEFT JOIN claims c ON c.name = q.name
 ORDER BY q.name;
SELECT * FROM pg_temp.dispatch(5, '2024-03-01 12:00:10+00');
-- foreign claim, another live claim, no claim at all: NOT_CLAIMED
SELECT outcome FROM sched.dispatch_attempt((SELECT request_id FROM req WHERE name = 'k1'),
    '00000000-0000-0000-0000-00000000dead', '2024-03-01 12:00:10+00');
SELECT outcome FROM sched.dispatch_attempt((SELECT request_id FROM req WHERE name = 'k1'),
    (SELECT claim_id FROM claims WHERE claim = 'c2'), '2024-03-01 12:00:10+00');
SELECT outcome FROM sched.dispatch_attempt((SELECT request_id FROM req WHERE name = 'k1'),
    NULL, '2024-03-01 12:00:10+00');
SELECT q.name, r.state, r.tries, r.last_reason FROM req q JOIN sched.request r USING (request_id)
 WHERE q.name = 'k1';
-- the holder dispatches
SELECT outcome, node_id FROM sched.dispatch_attempt((SELECT request_id FROM req WHERE name = 'k1'),
    (SELECT claim_id FROM claims WHERE name = 'k1'), '2024-03-01 12:00:10+00');
-- T0+31: c1 has expired (at T0+30); a new claim c3 takes k2 back; k3 (c2, until T0+40)
-- is still held
INSERT INTO claims SELECT 'c3', q.name, c.claim_id, c.claimed_until
  FROM sched.claim_requests(5, '30 s', at => '2024-03-01 12:00:31+00') WITH ORDINALITY c
  JOIN req q USING (request_id) ORDER BY c.ordinality;
SELECT claim, name, claimed_until FROM claims WHERE claim = 'c3';
-- stale claim c1 on k2: NOT_CLAIMED; its new holder c3 dispatches
SELECT outcome FROM sched.dispatch_attempt((SELECT request_id FROM req WHERE name = 'k2'),
    (SELECT claim_id FROM claims WHERE claim = 'c1' AND name = 'k2'), '2024-03-01 12:00:32+00');
SELECT outcome, node_id FROM sched.dispatch_attempt((SELECT request_id FROM req WHERE name = 'k2'),
    (SELECT claim_id FROM claims WHERE claim = 'c3'), '2024-03-01 12:00:32+00');
-- T0+41: c2 has expired; its holder is too late: NOT_CLAIMED, the request is untouched
SELECT outcome FROM sched.dispatch_attempt((SELECT request_id FROM req WHERE name = 'k3'),
    (SELECT claim_id FROM claims WHERE claim = 'c2'), '2024-03-01 12:00:41+00');
SELECT q.name, r.state, r.claimed_until FROM req q JOIN sched.request r USING (request_id)
 WHERE q.name = 'k3';
-- reap_expired returns expired claims to PENDING (it reaps no attempt here: 0);
-- not yet at T0+39, at T0+41 it does
SELECT sched.reap_expired('2024-03-01 12:00:39+00') AS lost;
SELECT q.name, r.state, r.claim_id IS NULL AS no_claim, r.claimed_until
  FROM req q JOIN sched.request r USING (request_id) WHERE q.name = 'k3';
SELECT sched.reap_expired('2024-03-01 12:00:41+00') AS lost;
SELECT q.name, r.state, r.claim_id IS NULL AS no_claim, r.claimed_until
  FROM req q JOIN sched.request r USING (request_id) WHERE q.name = 'k3';
SELECT outcome FROM sched.dispatch_attempt((SELECT request_id FROM req WHERE name = 'k3'),
    (SELECT claim_id FROM claims WHERE claim = 'c2'), '2024-03-01 12:00:42+00');
SELECT * FROM pg_temp.dispatch(5, '2024-03-01 12:00:42+00');
SELECT q.name, r.state FROM req q JOIN sched.request r USING (request_id) ORDER BY q.name;
ROLLBACK;

-- ---------------------------------------------------------------------------------
-- J. Bad input: an ERROR with SQLSTATE and a message naming the parameter; nothing
-- written (snapshot of every table before and after).
-- ---------------------------------------------------------------------------------
CREATE FUNCTION pg_temp.err(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
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
-- one ready request, so that a call that wrongly went ahead would change something
SELECT pg_temp.sub('ready', '2024-03-01 12:00:00+00') > 0 AS submitted;
CREATE TEMP TABLE before AS SELECT pg_temp.snapshot() AS digest;
SELECT call, result
  FROM (VALUES
  ('dispatch_next max 0',          $q$SELECT * FROM sched.dispatch_next(0, at => '2024-03-01 12:00:00+00')$q$),
  ('dispatch_next max -1',         $q$SELECT * FROM sched.dispatch_next(-1, at => '2024-03-01 12:00:00+00')$q$),
  ('dispatch_next max NULL',       $q$SELECT * FROM sched.dispatch_next(NULL, at => '2024-03-01 12:00:00+00')$q$),
  ('dispatch_next capability ''''', $q$SELECT * FROM sched.dispatch_next(1, capability => '', at => '2024-03-01 12:00:00+00')$q$),
  ('dispatch_next tenant ''''',    $q$SELECT * FROM sched.dispatch_next(1, tenant => '', at => '2024-03-01 12:00:00+00')$q$),
  ('dispatch_next at NULL',        $q$SELECT * FROM sched.dispatch_next(1, at => NULL)$q$),
  ('claim_requests max 0',         $q$SELECT * FROM sched.claim_requests(0, at => '2024-03-01 12:00:00+00')$q$),
  ('claim_requests max -5',        $q$SELECT * FROM sched.claim_requests(-5, at => '2024-03-01 12:00:00+00')$q$),
  ('claim_requests max NULL',      $q$SELECT * FROM sched.claim_requests(NULL, at => '2024-03-01 12:00:00+00')$q$),
  ('claim_requests ttl 0',         $q$SELECT * FROM sched.claim_requests(1, '0 s', at => '2024-03-01 12:00:00+00')$q$),
  ('claim_requests ttl -1 s',      $q$SELECT * FROM sched.claim_requests(1, '-1 s', at => '2024-03-01 12:00:00+00')$q$),
  ('claim_requests ttl NULL',      $q$SELECT * FROM sched.claim_requests(1, NULL, at => '2024-03-01 12:00:00+00')$q$),
  ('claim_requests capability ''''', $q$SELECT * FROM sched.claim_requests(1, capability => '', at => '2024-03-01 12:00:00+00')$q$),
  ('claim_requests tenant ''''',   $q$SELECT * FROM sched.claim_requests(1, tenant => '', at => '2024-03-01 12:00:00+00')$q$),
  ('claim_requests at NULL',       $q$SELECT * FROM sched.claim_requests(1, at => NULL)$q$),
  ('dispatch_attempt unknown id',  $q$SELECT * FROM sched.dispatch_attempt(999999, at => '2024-03-01 12:00:00+00')$q$)
) AS t(call, q), LATERAL pg_temp.err(q) AS result;
SELECT digest = pg_temp.snapshot() AS unchanged FROM before;
-- the request is still there for a valid call
SELECT * FROM pg_temp.claim(5, '2024-03-01 12:00:00+00');
