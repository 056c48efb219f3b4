--
-- direct_writes: a placement writes its rows without statements (src/row_write.c,
-- src/reservation_rows.c) while its tables are as pg_sched made them, and with its
-- statements otherwise (or with sched.direct_writes off).  Both must write the same
-- rows.
--
-- The same placements (dispatch_next(1), a batch dispatch_next(12), dispatch_attempt,
-- on a fixed clock) are made once with the statements and, after a rollback, once
-- directly: every column of what they wrote (attempts, START commands, milestones,
-- requests, worker and node counters, the tenants' sums) must be the same, ids and
-- random uuids aside (compared through the request they belong to).  Which path ran is
-- seen in pg_stat_xact_user_functions (track_functions = all): the statements call the
-- tables' CHECK functions and triggers through the executor, the direct writes call
-- them from C.  Then the direct writes are committed and the worker protocol runs on
-- them (the counters, the sums and the mirror stay true), and a table changed by the
-- user (a trigger, a CHECK constraint, a column with a default) is written by the
-- statements, which honour the change.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pg_sched CASCADE;
CREATE EXTENSION pg_sched;
RESET client_min_messages;
SET TIME ZONE 'UTC';
SET sched.preemption = off;
SET sched.heartbeat_ttl = 600;
SET track_functions = 'all';
SELECT setseed(0.19);

SELECT count(*) AS nodes FROM (
    SELECT sched.upsert_node(format('w%s', i),
                             labels => jsonb_build_object('zone', CASE WHEN i % 2 = 0 THEN 'a' ELSE 'b' END),
                             cpu_millis => 8000, memory_mb => 16384, gpus => 2, weight => 10 * i),
           sched.register_worker(format('w%s', i), 'c', ARRAY['1'], 6,
                                 at => '2026-01-01 00:00:00+00')
      FROM generate_series(1, 8) i) s;

-- 40 requests of two tenants: reservations, preferred zones, concurrency and spread keys
SELECT count(sched.submit(gen_random_uuid(), gen_random_uuid(), 'c', '1',
                          tenant => CASE WHEN i % 3 = 0 THEN 'blue' ELSE 'green' END,
                          priority => i % 4,
                          preferred_labels => CASE WHEN i % 2 = 0 THEN '{"zone": "a"}'::jsonb ELSE '{}'::jsonb END,
                          reserve_cpu_millis => 100 * (i % 5), reserve_memory_mb => 64 * (i % 3),
                          reserve_gpus => CASE WHEN i % 10 = 0 THEN 1 ELSE 0 END,
                          concurrency_key => CASE WHEN i % 4 = 0 THEN 'k' || (i % 8) END,
                          spread_key => CASE WHEN i % 5 = 0 THEN 's' END,
                          available_at => '2025-12-31 23:00:00+00')) AS submitted
  FROM generate_series(1, 40) i;

-- Everything the placements and ends wrote, in one text: per request (by step and
-- attempt number: a retry's request id comes from a sequence, which a rollback does not
-- give back) its state, attempt, START command and the attempt's milestones (the
-- selection's detail compared without its request id, the rest whole); the
-- execution's own milestones; per worker and node its counters; per tenant its sums.
CREATE FUNCTION pg_temp.written() RETURNS text
LANGUAGE sql AS $$
    SELECT concat_ws(E'\n',
      (SELECT string_agg(concat_ws(' ', r.step_id, r.attempt_number, r.state, r.tries, r.claim_id,
                                   r.claimed_until, r.last_reason, r.shape, r.available_at,
                                   r.attempt_id IS NOT DISTINCT FROM a.attempt_id,
                                   a.request_id = r.request_id, a.execution_id = r.execution_id,
                                   a.step_id = r.step_id, a.attempt_number, a.tenant, a.node_id,
                                   a.worker_id, a.worker_generation, a.lease_version, a.status,
                                   a.reserve_cpu_millis, a.reserve_memory_mb, a.reserve_gpus, a.score,
                                   a.dispatched_at, a.started_at, a.lease_expires_at, a.finished_at,
                                   a.detail, a.concurrency_key, a.spread_key,
                                   c.worker_id, c.worker_generation, c.kind, c.lease_version,
                                   c.request_id = r.request_id, c.created_at, c.delivered_at,
                                   c.delivered_generation,
                                   (SELECT string_agg(concat_ws(' ', t.execution_id = r.execution_id,
                                                                t.milestone_key, t.stage,
                                                                t.step_id = r.step_id, t.attempt_number,
                                                                t.state, t.component, t.title,
                                                                t.detail - 'request_id', t.at), '; '
                                                      ORDER BY t.milestone_key)
                                      FROM sched.timeline t WHERE t.attempt_id = a.attempt_id)),
                         E'\n' ORDER BY r.step_id, r.attempt_number)
         FROM sched.request r
         LEFT JOIN sched.attempt a ON a.request_id = r.request_id
         LEFT JOIN sched.command c ON c.attempt_id = a.attempt_id AND c.kind = 'START'),
      (SELECT string_agg(concat_ws(' ', t.execution_id, t.milestone_key, t.state, t.title, t.at), '; '
                         ORDER BY t.execution_id, t.milestone_key)
         FROM sched.timeline t WHERE t.attempt_id IS NULL),
      (SELECT string_agg(concat_ws(' ', w.node_id, w.live_attempts), ' ' ORDER BY w.node_id)
         FROM sched.worker w),
      (SELECT string_agg(concat_ws(' ', n.node_id, n.reserved_cpu_millis, n.reserved_memory_mb,
                                   n.reserved_gpus, n.live_attempts), ' ' ORDER BY n.node_id)
         FROM sched.node n),
      (SELECT string_agg(concat_ws(' ', l.tenant, l.live, l.cpu, l.memory, l.gpus), ' ' ORDER BY l.tenant)
         FROM (SELECT tenant, sum(live) AS live, sum(cpu_millis) AS cpu, sum(memory_mb) AS memory,
                      sum(gpus) AS gpus
                 FROM sched.tenant_live GROUP BY tenant) l))
$$;

-- The calls of the tables' CHECK functions and triggers through the executor (the
-- statements' path) not yet flushed to the statistics: compared within a transaction
-- block, where nothing is flushed.
CREATE FUNCTION pg_temp.executor_calls() RETURNS bigint
LANGUAGE sql AS $$
    SELECT coalesce(sum(calls), 0) FROM pg_stat_xact_user_functions
     WHERE schemaname = 'sched'
       AND funcname IN ('_attempt_live_changed', '_attempt_valid', '_command_valid',
                        '_request_valid', '_node_valid', '_worker_valid', '_fleet_changed')
$$;

-- The same, of the command's, attempt's, worker's and node's checks and triggers only
-- (a delivery, a start and an end write those directly; a retry's new request is a
-- statement).
CREATE FUNCTION pg_temp.end_calls() RETURNS bigint
LANGUAGE sql AS $$
    SELECT coalesce(sum(calls), 0) FROM pg_stat_xact_user_functions
     WHERE schemaname = 'sched'
       AND funcname IN ('_command_valid', '_attempt_live_changed', '_attempt_valid', '_node_valid',
                        '_worker_valid', '_fleet_changed')
$$;

-- The placements: one, a batch of 12, one of a given request, a batch of 5 of a tenant.
CREATE FUNCTION pg_temp.place() RETURNS text
LANGUAGE sql AS $$
    SELECT concat_ws(' ',
      (SELECT string_agg(outcome, ',') FROM sched.dispatch_next(1, at => '2026-01-01 00:00:10+00')),
      (SELECT count(*) FILTER (WHERE outcome = 'DISPATCHED')
         FROM sched.dispatch_next(12, at => '2026-01-01 00:00:10+00')),
      (SELECT outcome FROM sched.dispatch_attempt(
                             (SELECT max(request_id) FROM sched.request WHERE state = 'PENDING'),
                             at => '2026-01-01 00:00:10+00')),
      (SELECT count(*) FILTER (WHERE outcome = 'DISPATCHED')
         FROM sched.dispatch_next(5, tenant => 'blue', at => '2026-01-01 00:00:10+00')))
$$;

BEGIN;
SET LOCAL sched.direct_writes = off;
SELECT pg_temp.executor_calls() AS calls_before \gset
SELECT pg_temp.place() AS placed_by_statements;
SELECT pg_temp.written() AS by_statements \gset
SELECT pg_temp.executor_calls() - :calls_before > 0 AS statements_ran_the_checks_and_triggers;
ROLLBACK;

BEGIN;
SELECT pg_temp.executor_calls() AS calls_before \gset
SELECT pg_temp.place() AS placed_directly;
SELECT pg_temp.written() AS directly \gset
SELECT pg_temp.executor_calls() - :calls_before AS executor_calls_of_direct_writes;
SELECT sched._fleet_mirror_check('c') AS mirror_differences;
SELECT :'by_statements' = :'directly' AS same_rows,
       (SELECT count(*) FROM sched.attempt) AS attempts,
       (SELECT count(*) FROM sched.command) AS commands,
       (SELECT count(*) FROM sched.timeline WHERE milestone_key LIKE 'step.worker.selected:%') AS milestones;
COMMIT;

-- Committed: the counters, the sums and the mirror agree with the attempts, and the
-- workers take, start and finish them.
CREATE FUNCTION pg_temp.invariants() RETURNS text
LANGUAGE sql AS $$
    SELECT concat_ws(' ',
      (SELECT count(*) FROM sched.worker w
        WHERE w.live_attempts <> (SELECT count(*) FROM sched.attempt a
                                   WHERE a.worker_id = w.worker_id AND a.finished_at IS NULL)),
      (SELECT count(*) FROM sched.node n
        WHERE ROW(n.live_attempts, n.reserved_cpu_millis, n.reserved_memory_mb, n.reserved_gpus)::text
              IS DISTINCT FROM
              (SELECT ROW(count(*), coalesce(sum(a.reserve_cpu_millis), 0),
                          coalesce(sum(a.reserve_memory_mb), 0), coalesce(sum(a.reserve_gpus), 0))::text
                 FROM sched.attempt a WHERE a.node_id = n.node_id AND a.finished_at IS NULL)),
      (SELECT count(*) FROM (SELECT tenant, sum(live) AS live FROM sched.tenant_live GROUP BY tenant) l
         FULL JOIN (SELECT tenant, count(*) AS live FROM sched.attempt WHERE finished_at IS NULL
                     GROUP BY tenant) a USING (tenant)
        WHERE coalesce(l.live, 0) <> coalesce(a.live, 0)),
      sched._fleet_mirror_check('c'))
$$;
SELECT pg_temp.invariants() AS wrong_workers_nodes_tenants_mirror;

-- the workers take (the commands delivered) and start their attempts: with the
-- statements, then (after a rollback) directly, the same rows
CREATE FUNCTION pg_temp.start() RETURNS bigint
LANGUAGE sql AS $$
    SELECT count(*)
      FROM sched.worker w,
           LATERAL sched.poll_commands(w.worker_id, w.generation, at => '2026-01-01 00:00:15+00') c,
           LATERAL sched.start_attempt(c.attempt_id, c.lease_version, at => '2026-01-01 00:00:15+00') s
$$;
BEGIN;
SET LOCAL sched.direct_writes = off;
SELECT pg_temp.start() AS started_by_statements;
SELECT pg_temp.written() AS by_statements \gset
ROLLBACK;
BEGIN;
SELECT pg_temp.end_calls() AS end_calls_before \gset
SELECT pg_temp.start() AS started;
SELECT pg_temp.written() AS directly \gset
SELECT :'by_statements' = :'directly' AS same_rows,
       (SELECT count(*) FROM sched.timeline WHERE milestone_key LIKE 'step.attempt.started:%') AS started_milestones;
SELECT pg_temp.end_calls() - :end_calls_before AS executor_calls_of_the_starts;
COMMIT;
-- the ends of attempts release the counters and the sums: with the statements, then
-- (after a rollback) directly, the same rows
CREATE FUNCTION pg_temp.finish() RETURNS bigint
LANGUAGE sql AS $$
    SELECT count(*)
      FROM sched.attempt a,
           LATERAL sched.finish_attempt(a.attempt_id, a.lease_version,
                                        CASE WHEN a.request_id % 4 = 0 THEN 'FAILED' ELSE 'SUCCEEDED' END,
                                        at => '2026-01-01 00:00:16+00') f
     WHERE a.status = 'RUNNING' AND a.request_id % 2 = 0
$$;
BEGIN;
SET LOCAL sched.direct_writes = off;
SELECT pg_temp.finish() AS finished_by_statements;
SELECT pg_temp.written() AS by_statements \gset
ROLLBACK;
BEGIN;
SELECT pg_temp.end_calls() AS end_calls_before \gset
SELECT pg_temp.finish() AS finished;
SELECT pg_temp.written() AS directly \gset
SELECT :'by_statements' = :'directly' AS same_rows,
       (SELECT count(*) FROM sched.timeline WHERE milestone_key LIKE 'step.attempt.%') AS ended_milestones,
       (SELECT count(*) FROM sched.request WHERE attempt_number = 2) AS retries;
SELECT pg_temp.end_calls() - :end_calls_before AS executor_calls_of_the_ends;
COMMIT;
SELECT pg_temp.invariants() AS wrong_after_the_workers;

-- More placements, directly, on counters the workers released.
BEGIN;
SELECT pg_temp.executor_calls() AS calls_before \gset
SELECT count(*) FILTER (WHERE outcome = 'DISPATCHED') AS placed
  FROM sched.dispatch_next(10, at => '2026-01-01 00:00:20+00');
SELECT pg_temp.executor_calls() - :calls_before AS executor_calls_of_direct_writes;
COMMIT;
SELECT pg_temp.invariants() AS wrong_after_more;

-- One poll of many commands (a worker of 40 slots, 20 STARTs): the same rows in the same
-- order, with the statements and directly.
SELECT count(*) AS big_node FROM (
    SELECT sched.upsert_node('big', cpu_millis => 64000, memory_mb => 65536),
           sched.register_worker('big', 'c', ARRAY['1'], 40, at => '2026-01-01 00:00:00+00')) s;
SELECT count(sched.submit(gen_random_uuid(), gen_random_uuid(), 'c', '1', node_id => 'big',
                          available_at => '2025-12-31 23:00:00+00')) AS pinned
  FROM generate_series(1, 20);
SELECT count(*) FILTER (WHERE outcome = 'DISPATCHED' AND node_id = 'big') AS placed_on_big
  FROM sched.dispatch_next(30, at => '2026-01-01 00:00:25+00');
CREATE FUNCTION pg_temp.poll_big() RETURNS text
LANGUAGE sql AS $$
    SELECT string_agg(concat_ws(' ', c.kind, r.step_id, c.lease_version, c.attempt_number,
                                c.capability, c.payload), ', ' ORDER BY c.ordinality)
      FROM sched.worker w,
           LATERAL sched.poll_commands(w.worker_id, w.generation, 100, at => '2026-01-01 00:00:26+00')
               WITH ORDINALITY c
      JOIN sched.request r USING (request_id)
     WHERE w.node_id = 'big'
$$;
BEGIN;
SET LOCAL sched.direct_writes = off;
SELECT pg_temp.poll_big() AS by_statements \gset
ROLLBACK;
BEGIN;
SELECT pg_temp.poll_big() AS directly \gset
SELECT :'by_statements' = :'directly' AS same_commands,
       (SELECT count(*) FROM sched.command c JOIN sched.worker w USING (worker_id)
         WHERE w.node_id = 'big' AND c.delivered_at = '2026-01-01 00:00:26+00') AS delivered;
ROLLBACK;

-- A trigger of the user's on sched.attempt: the statements write, and it fires.
CREATE TABLE public.seen_attempts (request_id bigint);
CREATE FUNCTION public.attempt_seen() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.seen_attempts VALUES (NEW.request_id);
    RETURN NULL;
END $$;
CREATE TRIGGER user_seen AFTER INSERT ON sched.attempt
    FOR EACH ROW EXECUTE FUNCTION public.attempt_seen();
BEGIN;
SELECT pg_temp.executor_calls() AS calls_before \gset
SELECT count(*) FILTER (WHERE outcome = 'DISPATCHED') AS placed
  FROM sched.dispatch_next(3, at => '2026-01-01 00:00:30+00');
SELECT count(*) AS seen_by_the_users_trigger FROM public.seen_attempts;
SELECT pg_temp.executor_calls() - :calls_before > 0 AS statements_ran;
ROLLBACK;
DROP TRIGGER user_seen ON sched.attempt;

-- A CHECK constraint of the user's on sched.command: the statements enforce it.
ALTER TABLE sched.command ADD CONSTRAINT no_more_starts CHECK (kind <> 'START') NOT VALID;
\set VERBOSITY sqlstate
SELECT outcome FROM sched.dispatch_next(1, at => '2026-01-01 00:00:30+00');
\set VERBOSITY terse
SELECT outcome FROM sched.dispatch_next(1, at => '2026-01-01 00:00:30+00');
\set VERBOSITY default
ALTER TABLE sched.command DROP CONSTRAINT no_more_starts;

-- A column of the user's with a default on sched.timeline: the statements fill it.
ALTER TABLE sched.timeline ADD COLUMN noted text DEFAULT 'by default';
BEGIN;
SELECT count(*) FILTER (WHERE outcome = 'DISPATCHED') AS placed
  FROM sched.dispatch_next(2, at => '2026-01-01 00:00:30+00');
SELECT count(*) AS new_milestones,
       count(*) FILTER (WHERE noted IS DISTINCT FROM 'by default') AS without_the_default
  FROM sched.timeline WHERE at = '2026-01-01 00:00:30+00' AND milestone_key LIKE 'step.worker.selected:%';
ROLLBACK;
-- dropped again, the column is no reason for the statements
ALTER TABLE sched.timeline DROP COLUMN noted;
BEGIN;
SELECT pg_temp.executor_calls() AS calls_before \gset
SELECT count(*) FILTER (WHERE outcome = 'DISPATCHED') AS placed
  FROM sched.dispatch_next(2, at => '2026-01-01 00:00:30+00');
SELECT pg_temp.executor_calls() - :calls_before AS executor_calls_of_direct_writes;
COMMIT;
SELECT pg_temp.invariants() AS wrong_at_the_end;

-- the setting: a boolean, any session's own
SET sched.direct_writes = 'sometimes';
RESET sched.direct_writes;
SHOW sched.direct_writes;

-- the attempts' ids (and the claims'): random, version 4 and RFC 4122's variant, as
-- gen_random_uuid makes them, each drawn once
SELECT count(*) >= 20 AS enough, count(DISTINCT attempt_id) = count(*) AS all_distinct,
       bool_and(attempt_id::text ~ '^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$') AS version_4
  FROM sched.attempt;
BEGIN;
SELECT count(DISTINCT claim_id) = 2 AS claims_distinct,
       bool_and(claim_id::text ~ '^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$') AS version_4
  FROM (SELECT claim_id FROM sched.claim_requests(1, interval '1 minute', at => now())
        UNION ALL
        SELECT claim_id FROM sched.claim_requests(1, interval '1 minute', at => now())) c;
ROLLBACK;
