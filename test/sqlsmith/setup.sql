-- test/sqlsmith/setup.sql — the fleet and queue sqlsmith runs against (test/sqlsmith/run.sh),
-- written through pg_sched's functions only, as superuser, in a fresh database:
--   * 40 nodes node-01 .. node-40: zones z0..z3, tiers fast/std, 2000..8000 mcpu,
--     4..32 GB, GPUs on every 4th node, weights 0..175 (0 scores as 100); node-07 is
--     draining, node-13 disabled;
--   * a "render" worker (1.0, 2.0; 1.0 only on every 5th node) with 1..4 slots on every
--     node, a "train" worker (1 slot) on the GPU nodes; one cordoned, one STARTING, one
--     with 0 slots, one whose heartbeat is older than the TTL;
--   * tenants a, b, c, d (weights 1..4), tenant d fenced (owner sched_scheduler);
--   * 400 requests: labels required and preferred, minimums and reservations, pins,
--     some impossible, payloads; dispatched in part, the attempts then started, finished
--     (SUCCEEDED, FAILED), one execution cancelled and one completed;
--   * a login role sqlsmith_admin, member of sched_admin (every public function);
--   * schema smith: one-value wrappers of pg_sched's set-returning functions (sqlsmith
--     calls no set-returning function itself).
-- The heartbeat TTL and the lease TTL are a day in this database, so the fleet stays as
-- it is while sqlsmith runs; the maintenance worker reaps in it (sched.databases).
\set ON_ERROR_STOP 1
SET client_min_messages = warning;

CREATE EXTENSION pg_sched;
DO $$
BEGIN
    EXECUTE format('ALTER DATABASE %I SET sched.heartbeat_ttl = %L', current_database(), '1d');
    EXECUTE format('ALTER DATABASE %I SET sched.lease_ttl = %L', current_database(), '1d');
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'sqlsmith_admin') THEN
        CREATE ROLE sqlsmith_admin LOGIN IN ROLE sched_admin;
    END IF;
END $$;
SET sched.heartbeat_ttl = '1d';
SET sched.lease_ttl = '1d';

SELECT count(sched.upsert_node(
           node_id => format('node-%s', lpad(i::text, 2, '0')),
           labels => jsonb_build_object('zone', 'z' || (i % 4),
                                        'tier', CASE WHEN i % 3 = 0 THEN 'fast' ELSE 'std' END)
                     || CASE WHEN i % 4 = 0 THEN '{"gpu":"a100"}'::jsonb ELSE '{}' END,
           cpu_millis => 2000 * (1 + i % 4),
           memory_mb => 4096 * (1 + i % 8),
           gpus => CASE WHEN i % 8 = 0 THEN 2 WHEN i % 4 = 0 THEN 1 ELSE 0 END,
           weight => (i % 8) * 25)) AS nodes
  FROM generate_series(1, 40) AS i;
SELECT sched.upsert_node('node-07', management_status => 'DRAINING') IS NOT NULL AS drained;
SELECT sched.upsert_node('node-13', management_status => 'DISABLED') IS NOT NULL AS disabled;

SELECT count(sched.register_worker(
           node_id => format('node-%s', lpad(i::text, 2, '0')),
           capability => 'render',
           capability_versions => CASE WHEN i % 5 = 0 THEN ARRAY['1.0'] ELSE ARRAY['1.0', '2.0'] END,
           slots => CASE WHEN i = 11 THEN 0 ELSE 1 + i % 4 END,
           at => CASE WHEN i = 17 THEN now() - interval '2 days' ELSE now() END)) AS render_workers
  FROM generate_series(1, 40) AS i;
SELECT count(sched.register_worker(
           node_id => format('node-%s', lpad(i::text, 2, '0')),
           capability => 'train',
           capability_versions => ARRAY['1.0'],
           slots => 1)) AS train_workers
  FROM generate_series(4, 40, 4) AS i;
SELECT sched.cordon_worker(worker_id) IS NOT NULL AS cordoned
  FROM sched.worker WHERE node_id = 'node-09' AND capability = 'render';
SELECT (sched.heartbeat(worker_id, generation, runtime_state => 'STARTING')).worker_id IS NOT NULL AS starting
  FROM sched.worker WHERE node_id = 'node-21' AND capability = 'render';

SELECT count(sched.set_tenant_weight(t, w)) AS tenants
  FROM (VALUES ('a', 1), ('b', 2), ('c', 3), ('d', 4)) AS v(t, w);
SELECT sched.set_tenant_owner('d', 'sched_scheduler') IS NOT NULL AS fenced;

SELECT count(sched.submit(
           execution_id => md5('smith-execution-' || (i / 8))::uuid,
           step_id => md5('smith-step-' || i)::uuid,
           capability => CASE WHEN i % 9 = 0 THEN 'train' ELSE 'render' END,
           capability_version => CASE WHEN i % 6 = 5 THEN '2.0' WHEN i % 97 = 0 THEN '9.9' ELSE '1.0' END,
           tenant => chr(ascii('a') + (i / 8) % 4),   -- one tenant per execution
           priority => i % 5,
           required_labels => CASE WHEN i % 7 = 0 THEN jsonb_build_object('zone', 'z' || (i % 4))
                                   WHEN i % 31 = 0 THEN '{"tier":"none"}'::jsonb ELSE '{}' END,
           preferred_labels => CASE WHEN i % 3 = 0 THEN '{"tier":"fast"}'::jsonb
                                    WHEN i % 3 = 1 THEN '{"zone":"z1","tier":"std"}'::jsonb ELSE '{}' END,
           min_cpu_millis => CASE WHEN i % 11 = 0 THEN 6000 WHEN i % 89 = 0 THEN 100000 ELSE 0 END,
           min_memory_mb => CASE WHEN i % 13 = 0 THEN 16384 ELSE 0 END,
           reserve_cpu_millis => 250 * (1 + i % 8),
           reserve_memory_mb => 256 * (1 + i % 6),
           reserve_gpus => CASE WHEN i % 9 = 0 THEN 1 ELSE 0 END,
           node_id => CASE WHEN i % 41 = 0 THEN format('node-%s', lpad((1 + i % 40)::text, 2, '0')) END,
           max_attempts => 1 + i % 3,
           available_at => now() - interval '1 minute',
           payload => jsonb_build_object('n', i, 'frames', jsonb_build_array(i, i + 1)))) AS requests
  FROM generate_series(1, 400) AS i;

SELECT count(*) AS dispatched FROM sched.dispatch_next(180);

-- the workers take their START commands; most attempts start, some finish
CREATE TEMP TABLE polled AS
SELECT c.*, w.worker_id AS w_id
  FROM sched.worker w
 CROSS JOIN LATERAL sched.poll_commands(w.worker_id, w.generation, 100) c
 WHERE c.kind = 'START';
SELECT count(sched.start_attempt(attempt_id, lease_version)) AS started
  FROM polled WHERE request_id % 4 <> 0;
SELECT count(sched.finish_attempt(attempt_id, lease_version,
                                  CASE WHEN request_id % 3 = 0 THEN 'FAILED' ELSE 'SUCCEEDED' END,
                                  jsonb_build_object('exit', request_id % 3)))
       AS finished
  FROM polled WHERE request_id % 4 = 1;

SELECT sched.cancel_execution(md5('smith-execution-3')::uuid) AS cancelled;
-- complete the first execution that has nothing left to run (the others refuse)
DO $$
DECLARE
    e uuid;
BEGIN
    FOR e IN SELECT execution_id FROM sched.execution ORDER BY execution_id LOOP
        BEGIN
            PERFORM sched.complete_execution(e);
            EXIT;
        EXCEPTION WHEN object_not_in_prerequisite_state OR invalid_parameter_value THEN
            NULL;
        END;
    END LOOP;
END $$;
SELECT count(*) AS claimed FROM sched.claim_requests(5);
SELECT count(*) AS dispatched_more FROM sched.dispatch_next(20);

-- sqlsmith calls only functions that return one value (not sets): these wrappers give
-- it pg_sched's set-returning functions, each taking every argument of the function it
-- wraps, so that sqlsmith passes random values to them too.  SECURITY INVOKER: the
-- caller's privileges apply as for a direct call.
CREATE SCHEMA smith;
GRANT USAGE ON SCHEMA smith TO PUBLIC;
CREATE FUNCTION smith.rank_candidates(capability text, capability_version text, required_labels jsonb,
    preferred_labels jsonb, min_cpu_millis int, min_memory_mb bigint, min_gpus int, reserve_cpu_millis int,
    reserve_memory_mb bigint, reserve_gpus int, node_id text, heartbeat_ttl interval, at timestamptz)
RETURNS jsonb LANGUAGE sql VOLATILE
AS $$ SELECT jsonb_agg(to_jsonb(c)) FROM sched.rank_candidates($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) c $$;
CREATE FUNCTION smith.select_candidate(capability text, capability_version text, required_labels jsonb,
    preferred_labels jsonb, min_cpu_millis int, min_memory_mb bigint, min_gpus int, reserve_cpu_millis int,
    reserve_memory_mb bigint, reserve_gpus int, node_id text, heartbeat_ttl interval, at timestamptz)
RETURNS jsonb LANGUAGE sql VOLATILE
AS $$ SELECT jsonb_agg(to_jsonb(c)) FROM sched.select_candidate($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) c $$;
CREATE FUNCTION smith.qualification_reasons(capability text, capability_version text, required_labels jsonb,
    preferred_labels jsonb, min_cpu_millis int, min_memory_mb bigint, min_gpus int, reserve_cpu_millis int,
    reserve_memory_mb bigint, reserve_gpus int, node_id text, heartbeat_ttl interval, at timestamptz)
RETURNS jsonb LANGUAGE sql VOLATILE
AS $$ SELECT jsonb_agg(to_jsonb(c)) FROM sched.qualification_reasons($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) c $$;
CREATE FUNCTION smith.qualification_reasons(request_id bigint, at timestamptz)
RETURNS jsonb LANGUAGE sql VOLATILE
AS $$ SELECT jsonb_agg(to_jsonb(c)) FROM sched.qualification_reasons($1, $2) c $$;
CREATE FUNCTION smith.claim_requests(max_requests int, claim_ttl interval, capability text, tenant text, at timestamptz)
RETURNS jsonb LANGUAGE sql VOLATILE
AS $$ SELECT jsonb_agg(to_jsonb(c)) FROM sched.claim_requests($1, $2, $3, $4, $5) c $$;
CREATE FUNCTION smith.dispatch_next(max_dispatches int, capability text, tenant text, at timestamptz)
RETURNS jsonb LANGUAGE sql VOLATILE
AS $$ SELECT jsonb_agg(to_jsonb(c)) FROM sched.dispatch_next($1, $2, $3, $4) c $$;
CREATE FUNCTION smith.poll_commands(worker_id uuid, generation bigint, max int, at timestamptz)
RETURNS jsonb LANGUAGE sql VOLATILE
AS $$ SELECT jsonb_agg(to_jsonb(c)) FROM sched.poll_commands($1, $2, $3, $4) c $$;
CREATE FUNCTION smith.pending_explanations(at timestamptz)
RETURNS jsonb LANGUAGE sql VOLATILE
AS $$ SELECT jsonb_agg(to_jsonb(c)) FROM sched.pending_explanations($1) c $$;
CREATE FUNCTION smith.node_overview(at timestamptz)
RETURNS jsonb LANGUAGE sql VOLATILE
AS $$ SELECT jsonb_agg(to_jsonb(c)) FROM sched.node_overview($1) c $$;
CREATE FUNCTION smith.pending(at timestamptz)
RETURNS jsonb LANGUAGE sql VOLATILE
AS $$ SELECT jsonb_agg(to_jsonb(c)) FROM sched.pending($1) c $$;
CREATE FUNCTION smith.queue_stats(at timestamptz)
RETURNS jsonb LANGUAGE sql VOLATILE
AS $$ SELECT jsonb_agg(to_jsonb(c)) FROM sched.queue_stats($1) c $$;
CREATE FUNCTION smith.attempt_overview(at timestamptz)
RETURNS jsonb LANGUAGE sql VOLATILE
AS $$ SELECT jsonb_agg(to_jsonb(c)) FROM sched.attempt_overview($1) c $$;
CREATE FUNCTION smith.execution_timeline(execution_id uuid)
RETURNS jsonb LANGUAGE sql VOLATILE
AS $$ SELECT jsonb_agg(to_jsonb(c)) FROM sched.execution_timeline($1) c $$;

-- what sqlsmith starts from
SELECT status, count(*) FROM sched.attempt GROUP BY status ORDER BY status;
SELECT state, count(*) FROM sched.request GROUP BY state ORDER BY state;
ANALYZE;
