-- limits_setup.sql — fleet, limits and queue for the pgbench check of the limits
-- (limits.sh, issue 14).  Run by the superuser in a fresh database; psql variables:
-- :requests (requests to queue), :admin (a login role granted sched_admin: sets the
-- limits, the nodes), :app (a login role granted sched_scheduler and sched_worker: it
-- registers the workers, submits, and is the role the pgbench clients run as).
--
-- The fleet is large enough that the limits, not capacity, decide most refusals:
--   * node-01 .. node-12, 4000 mcpu, 8192 MB, 2 GPUs on every other node; one "build"
--     worker with 4 slots on each (48 slots).
-- The limits (every key and tenant combination occurs: 8 and 5 are coprime):
--   keys, by i % 8:  0 k-conc2   concurrency 2
--                    1 k-conc4   concurrency 4
--                    2 k-rate3   rate 3 per 2 s
--                    3 k-rate6   rate 6 per 5 s
--                    4 k-both    concurrency 3 and rate 5 per 3 s
--                    5 k-free    a key without a limit
--                    6, 7        no key
--   tenants, by i % 5: 0 tq-live  max_live 5
--                      1 tq-cpu   max_cpu_millis 3000, max_gpus 2
--                      2 tq-mem   max_live 8, max_memory_mb 6144
--                      3 tq-gpu   max_gpus 1
--                      4 t-free   no quota
-- Reservations: 250..1000 mcpu, 512..1536 MB, a GPU for every 6th request.  Nothing
-- here is random: the same input every run.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;

CREATE EXTENSION pg_sched;
-- the login roles (limits.sh makes them) get their pg_sched roles, which exist now
GRANT sched_admin TO :"admin";
GRANT sched_scheduler, sched_worker TO :"app";

-- workers registered now stay admitted, and dispatched attempts keep their lease, for
-- the whole run (nothing reaps here: an attempt ends only by finish_attempt)
SELECT set_config('sched.heartbeat_ttl', '10min', false), set_config('sched.lease_ttl', '10min', false);
DO $$ BEGIN
    EXECUTE format('ALTER DATABASE %I SET sched.heartbeat_ttl = %L', current_database(), '10min');
    EXECUTE format('ALTER DATABASE %I SET sched.lease_ttl = %L', current_database(), '10min');
END $$;

-- what each dispatch call answered (written by the pgbench scripts): stamped_at is set
-- by the client's next statement, after the dispatch committed (limits.sh reads it as
-- the latest time the dispatch can have become visible)
CREATE UNLOGGED TABLE public.limits_outcome (
    id          bigserial PRIMARY KEY,
    client      int NOT NULL,
    script      text NOT NULL,
    outcome     text NOT NULL,
    detail      text,
    request_id  bigint,
    attempt_id  uuid,
    stamped_at  timestamptz
);
CREATE INDEX limits_outcome_unstamped ON public.limits_outcome (client) WHERE stamped_at IS NULL;
GRANT SELECT, INSERT, UPDATE ON public.limits_outcome TO :"app";
GRANT USAGE ON SEQUENCE public.limits_outcome_id_seq TO :"app";

SET ROLE :"admin";
SELECT count(sched.upsert_node(
           node_id => format('node-%s', lpad(i::text, 2, '0')),
           labels => '{}'::jsonb, cpu_millis => 4000, memory_mb => 8192,
           gpus => CASE WHEN i % 2 = 0 THEN 2 ELSE 0 END, weight => 100)) AS nodes
  FROM generate_series(1, 12) AS i;

SELECT count(*) AS concurrency_limits FROM (VALUES
    (sched.set_concurrency_limit('k-conc2', 2)),
    (sched.set_concurrency_limit('k-conc4', 4)),
    (sched.set_concurrency_limit('k-both', 3))) AS l(x);
SELECT count(*) AS rate_limits FROM (VALUES
    (sched.set_rate_limit('k-rate3', 3, '2 s')),
    (sched.set_rate_limit('k-rate6', 6, '5 s')),
    (sched.set_rate_limit('k-both', 5, '3 s'))) AS l(x);
SELECT count(*) AS tenant_quotas FROM (VALUES
    (sched.set_tenant_quota('tq-live', 5, NULL, NULL, NULL)),
    (sched.set_tenant_quota('tq-cpu', NULL, 3000, NULL, 2)),
    (sched.set_tenant_quota('tq-mem', 8, NULL, 6144, NULL)),
    (sched.set_tenant_quota('tq-gpu', NULL, NULL, NULL, 1))) AS q(x);

SET ROLE :"app";
SELECT count(sched.register_worker(
           node_id => format('node-%s', lpad(i::text, 2, '0')),
           capability => 'build', capability_versions => ARRAY['1.0'], slots => 4)) AS workers
  FROM generate_series(1, 12) AS i;

SELECT count(sched.submit(
           execution_id => md5('limits-execution-' || (i / 10) || '-' || (i % 5))::uuid,
           step_id => md5('limits-step-' || i)::uuid,
           capability => 'build', capability_version => '1.0',
           tenant => (ARRAY['tq-live', 'tq-cpu', 'tq-mem', 'tq-gpu', 't-free'])[1 + i % 5],
           priority => i % 3,
           reserve_cpu_millis => 250 * (1 + i % 4),
           reserve_memory_mb => 512 * (1 + i % 3),
           reserve_gpus => CASE WHEN i % 6 = 0 THEN 1 ELSE 0 END,
           available_at => now() - interval '1 minute',
           concurrency_key => (ARRAY['k-conc2', 'k-conc4', 'k-rate3', 'k-rate6', 'k-both', 'k-free'])[1 + i % 8]))
       AS requests
  FROM generate_series(1, :requests) AS i;
RESET ROLE;

ANALYZE;
