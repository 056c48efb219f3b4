-- load_0.1.0.sql — a fleet, a queue and live attempts, made with the functions of 0.1.0
-- only (their 0.1.0 signatures), in a database where pg_sched is at 0.1.0 (run.sh).
--
--   nodes   node-a (4 cpu, 16 GB, tier=fast), node-b (4 cpu, 8 GB), node-c (4 cpu, 8 GB,
--           1 GPU), node-d DRAINING
--   workers render on a (3 slots), b (2), c (2), d (2, never used: draining);
--           train on c (1 slot)
--   requests, one execution each ("step n" below is md5('upgrade-step-' || n)):
--     1..8   render, 500 mcpu / 512 MB, tenants t1/t2 alternating, priority n % 3
--     9      train, 1 GPU
--     10     render, min 64 cpu: fits nowhere (UNSCHEDULABLE, backoff)
--     11     render, available in 5 minutes
--   then, through dispatch_attempt (never dispatch_next, which the 0.2.0 library may
--   refuse on a 0.1.0 database):
--     1..5, 9 dispatched, their START commands polled (delivered); 6 dispatched after the
--     poll (its command stays undelivered); 10 tried: UNSCHEDULABLE;
--     1..4, 9 started; 1 SUCCEEDED; 2 FAILED, which queues its retry (request 12, step 2
--     attempt 2, due 1 s later).
--   Left: live attempts 3, 4, 9 RUNNING, 5 DISPATCHED (delivered), 6 DISPATCHED
--   (undelivered); PENDING 7, 8, 10, 11, 12.  4 of the 7 render slots are taken.
--
-- public.upgrade_step maps step n to its request and attempt (run.sh reads it).
\set ON_ERROR_STOP 1
SET client_min_messages = warning;

CREATE TABLE public.upgrade_step (
    n           int PRIMARY KEY,
    step_id     uuid NOT NULL,
    request_id  bigint,
    outcome     text
);

-- ---- fleet -------------------------------------------------------------------------------
SELECT count(*) AS nodes FROM (
    SELECT sched.upsert_node('node-a', labels => '{"tier":"fast"}', cpu_millis => 4000, memory_mb => 16384, weight => 100)
    UNION ALL
    SELECT sched.upsert_node('node-b', cpu_millis => 4000, memory_mb => 8192, weight => 50)
    UNION ALL
    SELECT sched.upsert_node('node-c', cpu_millis => 4000, memory_mb => 8192, gpus => 1, weight => 50)
    UNION ALL
    SELECT sched.upsert_node('node-d', cpu_millis => 4000, memory_mb => 8192)) n;
SELECT sched.upsert_node('node-d', management_status => 'DRAINING') IS NOT NULL AS drained;

SELECT count(*) AS workers FROM (VALUES
        ('node-a', 'render', 3), ('node-b', 'render', 2), ('node-c', 'render', 2),
        ('node-d', 'render', 2), ('node-c', 'train', 1)) AS w(node, cap, slots),
    LATERAL sched.register_worker(w.node, w.cap, ARRAY['1.0'], w.slots,
                                  worker_id => md5('upgrade-worker-' || w.node || '-' || w.cap)::uuid) r;

-- ---- queue -------------------------------------------------------------------------------
INSERT INTO public.upgrade_step (n, step_id)
SELECT n, md5('upgrade-step-' || n)::uuid FROM generate_series(1, 11) n;

UPDATE public.upgrade_step s SET request_id = sched.submit(
        execution_id => md5('upgrade-execution-' || s.n)::uuid,
        step_id => s.step_id,
        capability => CASE WHEN s.n = 9 THEN 'train' ELSE 'render' END,
        capability_version => '1.0',
        tenant => 't' || (1 + s.n % 2),
        priority => s.n % 3,
        preferred_labels => CASE WHEN s.n % 4 = 0 THEN '{"tier":"fast"}'::jsonb ELSE '{}' END,
        min_cpu_millis => CASE WHEN s.n = 10 THEN 64000 ELSE 0 END,
        reserve_cpu_millis => CASE WHEN s.n = 9 THEN 1000 ELSE 500 END,
        reserve_memory_mb => 512,
        reserve_gpus => CASE WHEN s.n = 9 THEN 1 ELSE 0 END,
        available_at => CASE WHEN s.n = 11 THEN now() + interval '5 minutes' ELSE now() END);
-- (submit runs in one statement for all steps: request ids follow no particular order)

-- ---- dispatch, poll, start, finish (0.1.0 functions) ------------------------------------
CREATE FUNCTION pg_temp.dispatch(steps int[]) RETURNS void LANGUAGE plpgsql AS $$
DECLARE s record; res sched.dispatch_result;
BEGIN
    FOR s IN SELECT * FROM public.upgrade_step WHERE n = ANY (steps) ORDER BY n LOOP
        res := sched.dispatch_attempt(s.request_id);
        UPDATE public.upgrade_step SET outcome = res.outcome WHERE n = s.n;
    END LOOP;
END $$;

SELECT pg_temp.dispatch(ARRAY[1, 2, 3, 4, 5, 9]);

CREATE TABLE public.upgrade_polled_before AS
SELECT p.command_id, p.kind, p.attempt_id, p.lease_version
  FROM sched.worker w, LATERAL sched.poll_commands(w.worker_id, w.generation) p;

SELECT pg_temp.dispatch(ARRAY[6, 10]);

SELECT count(sched.start_attempt(a.attempt_id, a.lease_version)) AS started
  FROM public.upgrade_step s JOIN sched.attempt a ON a.request_id = s.request_id
 WHERE s.n IN (1, 2, 3, 4, 9);

SELECT sched.finish_attempt(a.attempt_id, a.lease_version, 'SUCCEEDED', '{"exit": 0}')
  FROM public.upgrade_step s JOIN sched.attempt a ON a.request_id = s.request_id WHERE s.n = 1;
SELECT sched.finish_attempt(a.attempt_id, a.lease_version, 'FAILED', '{"exit": 1}')
  FROM public.upgrade_step s JOIN sched.attempt a ON a.request_id = s.request_id WHERE s.n = 2;

-- the retry of step 2
INSERT INTO public.upgrade_step (n, step_id, request_id)
SELECT 12, r.step_id, r.request_id FROM sched.request r
 WHERE r.step_id = md5('upgrade-step-2')::uuid AND r.attempt_number = 2;

-- what the 0.1.0 README asked of a deployment: the role of its schedulers and workers
-- granted the tables and every function (the update revokes all of it: 0.2.0 has roles
-- for jobs, and no role but the owner writes a table)
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'sched_upgrade_app') THEN
        CREATE ROLE sched_upgrade_app NOLOGIN;
    END IF;
END
$$;
GRANT USAGE ON SCHEMA sched TO sched_upgrade_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA sched TO sched_upgrade_app;
GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA sched TO sched_upgrade_app;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA sched TO sched_upgrade_app;
