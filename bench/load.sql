-- bench/load.sql — generated fleets and queues for the benchmark databases (bench/run.sh).
--
-- Loaded into each benchmark database after CREATE EXTENSION pg_sched; never installed.
-- Everything here is in schema `bench`.  Nothing is random: every attribute is fixed
-- arithmetic on the row number, so every run loads the same data.
--
-- Large fleets and queues are written with INSERT ... SELECT directly into the sched
-- tables (the rows upsert_node, register_worker and submit would write, without their
-- per-row PL/pgSQL calls: a million submit() calls would take longer than the whole
-- benchmark).  Requests get the sort_key submit() gives them,
-- sched._queue_key(priority, queued_at).
--
-- bench.reset() puts a benchmark database back to "everything pending, nothing
-- reserved" between runs (attempts, commands and timeline truncated, counters zeroed):
-- throughput runs then never run out of free slots or pending requests.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;

CREATE SCHEMA bench;

-- the benchmark runs for minutes: workers loaded "now" must stay fresh throughout, and no
-- request may become "starving" (which would switch dispatch_next to its starving path)
DO $$
BEGIN
    EXECUTE format('ALTER DATABASE %I SET sched.heartbeat_ttl = %L', current_database(), '1d');
    EXECUTE format('ALTER DATABASE %I SET sched.starvation_after = %L', current_database(), '7d');
END
$$;
SET sched.heartbeat_ttl = '1d';
SET sched.starvation_after = '7d';

-- the ids of the requests a pgbench script dispatches one by one (workload 1)
CREATE SEQUENCE bench.rid_seq;

/* Node name and worker id of node number i of fleet `prefix` (also used by the write
 * floor to address a node "chosen in advance" without reading anything). */
CREATE FUNCTION bench.node_name(prefix text, i int)
RETURNS text LANGUAGE sql IMMUTABLE
AS $$ SELECT prefix || '-' || lpad(i::text, 7, '0') $$;

-- (text || int is only stable, which would keep the planner from inlining the function
-- into a prepared statement: each call would then parse and plan it again)
CREATE FUNCTION bench.worker_uuid(prefix text, i int, capability text)
RETURNS uuid LANGUAGE sql IMMUTABLE
AS $$ SELECT md5('bench-worker:' || prefix || ':' || i::text || ':' || capability)::uuid $$;

/*
 * load_fleet: nodes first..last of fleet `prefix`, one worker of `capability` on each.
 *   labels   zone z0..z4 (i % 5), tier fast on every 4th node (else std), rack r0..r49
 *   capacity cpu_millis, memory_mb as given (plus a little variety), 8 GPUs on every 10th
 *   weight   50..150 (i * 37 % 101 + 50)
 *   slots    as given
 * With mixed = true, a few nodes and workers are not admissible, so admission really
 * filters (about 9% of the fleet): every 50th node DRAINING, every 97th DISABLED; every
 * 100th worker STARTING, another 100th CORDONED, another with a heartbeat 30 days old;
 * every 10th worker serves version 0.9 only (requests ask for 1.0).
 */
CREATE FUNCTION bench.load_fleet(prefix text, first int, last int, capability text,
                                 mixed boolean, slots int, cpu_millis int, memory_mb bigint)
RETURNS int
LANGUAGE plpgsql
AS $$
BEGIN
    INSERT INTO sched.node (node_id, management_status, labels, cpu_millis, memory_mb, gpus, weight)
    SELECT bench.node_name(prefix, i),
           CASE WHEN mixed AND i % 50 = 7 THEN 'DRAINING'
                WHEN mixed AND i % 97 = 3 THEN 'DISABLED'
                ELSE 'ACTIVE' END,
           jsonb_build_object('zone', 'z' || (i % 5),
                              'tier', CASE WHEN i % 4 = 0 THEN 'fast' ELSE 'std' END,
                              'rack', 'r' || (i % 50)),
           load_fleet.cpu_millis + (i % 4) * 1000,
           load_fleet.memory_mb + (i % 3) * 1024,
           CASE WHEN i % 10 = 0 THEN 8 ELSE 0 END,
           50 + (i * 37) % 101
      FROM generate_series(first, last) AS i;

    INSERT INTO sched.worker (worker_id, node_id, capability, capability_versions, runtime_state,
                              scheduling_status, slots, live_attempts, last_heartbeat, generation,
                              registered_at)
    SELECT bench.worker_uuid(prefix, i, load_fleet.capability),
           bench.node_name(prefix, i),
           load_fleet.capability,
           CASE WHEN mixed AND i % 10 = 9 THEN ARRAY['0.9'] ELSE ARRAY['0.9', '1.0'] END,
           CASE WHEN mixed AND i % 100 = 11 THEN 'STARTING' ELSE 'READY' END,
           CASE WHEN mixed AND i % 100 = 23 THEN 'CORDONED' ELSE 'ELIGIBLE' END,
           load_fleet.slots,
           0,
           CASE WHEN mixed AND i % 100 = 37 THEN now() - interval '30 days' ELSE now() END,
           1,
           now()
      FROM generate_series(first, last) AS i;
    RETURN last - first + 1;
END
$$;

/*
 * load_requests: requests first..last (request_id = i), all PENDING and ready, for
 * capability `capability` version 1.0, tenant 'default', 4 steps per execution.
 *   priority     0..2 ((i * 7) % 3)
 *   queued_at    t0 - 3 hours + i * 5 ms: requests arrive in id order, 200 a second
 *                (1,000,000 span 83 minutes), so the table is in arrival order as a real
 *                queue's is, and a batch loaded later queues behind the earlier ones;
 *                with the priorities, queue order is arrival order shifted by up to
 *                2 * sched.aging_interval
 *   preferences  every 4th prefers tier=fast, every 8th (offset 2) also rack=r7
 *   requirement  every 10th (offset 3) requires one zone (a fifth of the fleet)
 *   minimum      every 16th (offset 5) needs 4 CPUs
 *   reservation  100..400 mcpu, 256 or 512 MB, no GPU
 */
CREATE FUNCTION bench.load_requests(first bigint, last bigint, capability text, t0 timestamptz)
RETURNS bigint
LANGUAGE plpgsql
AS $$
BEGIN
    INSERT INTO sched.execution (execution_id, tenant, status, created_at, updated_at)
    SELECT md5('bench-execution:' || e)::uuid, 'default', 'QUEUED', t0, t0
      FROM generate_series(first / 4, last / 4) AS e
    ON CONFLICT DO NOTHING;

    INSERT INTO sched.request (
        request_id, execution_id, step_id, attempt_number, tenant, priority, capability,
        capability_version, required_labels, preferred_labels, min_cpu_millis, min_memory_mb,
        min_gpus, reserve_cpu_millis, reserve_memory_mb, reserve_gpus, node_id, max_attempts,
        state, queued_at, available_at, sort_key, submitted_at)
    SELECT i, md5('bench-execution:' || (i / 4))::uuid, md5('bench-step:' || i)::uuid, 1,
           'default', x.priority, load_requests.capability, '1.0',
           CASE WHEN i % 10 = 3 THEN jsonb_build_object('zone', 'z' || (i % 5)) ELSE '{}' END,
           CASE WHEN i % 8 = 2 THEN '{"tier": "fast", "rack": "r7"}'::jsonb
                WHEN i % 4 = 1 THEN '{"tier": "fast"}'::jsonb
                ELSE '{}' END,
           CASE WHEN i % 16 = 5 THEN 4000 ELSE 0 END, 0, 0,
           100 + (i % 4) * 100, 256 * (1 + i % 2), 0, NULL, 3,
           'PENDING', x.queued_at, x.queued_at, sched._queue_key(x.priority, x.queued_at), t0
      FROM generate_series(first, last) AS i,
           LATERAL (SELECT ((i * 7) % 3)::int AS priority,
                           t0 - interval '3 hours' + i * interval '5 ms' AS queued_at) x;
    PERFORM setval('sched.request_id_seq', greatest(last, (SELECT last_value FROM sched.request_id_seq)));
    RETURN last - first + 1;
END
$$;

/*
 * load_tenant_requests: requests first..last as load_requests makes them (the same
 * priorities, arrival times, preferences, requirements and reservations for the same i),
 * for tenant `tenant` (executions of their own: 'bench-execution:<tenant>:<i / 4>'),
 * and, when n_keys > 0, each with the concurrency key 'key-<i mod n_keys>' (issue 16,
 * workload 8: the queue of a tenant whose requests carry keys, beside one without).
 */
CREATE FUNCTION bench.load_tenant_requests(first bigint, last bigint, capability text, t0 timestamptz,
                                           tenant text, n_keys int)
RETURNS bigint
LANGUAGE plpgsql
AS $$
BEGIN
    INSERT INTO sched.execution (execution_id, tenant, status, created_at, updated_at)
    SELECT md5('bench-execution:' || load_tenant_requests.tenant || ':' || e)::uuid,
           load_tenant_requests.tenant, 'QUEUED', t0, t0
      FROM generate_series(first / 4, last / 4) AS e
    ON CONFLICT DO NOTHING;

    INSERT INTO sched.request (
        request_id, execution_id, step_id, attempt_number, tenant, priority, capability,
        capability_version, required_labels, preferred_labels, min_cpu_millis, min_memory_mb,
        min_gpus, reserve_cpu_millis, reserve_memory_mb, reserve_gpus, node_id, max_attempts,
        state, queued_at, available_at, sort_key, submitted_at, concurrency_key)
    SELECT i, md5('bench-execution:' || load_tenant_requests.tenant || ':' || (i / 4))::uuid,
           md5('bench-step:' || load_tenant_requests.tenant || ':' || i)::uuid, 1,
           load_tenant_requests.tenant, x.priority, load_tenant_requests.capability, '1.0',
           CASE WHEN i % 10 = 3 THEN jsonb_build_object('zone', 'z' || (i % 5)) ELSE '{}' END,
           CASE WHEN i % 8 = 2 THEN '{"tier": "fast", "rack": "r7"}'::jsonb
                WHEN i % 4 = 1 THEN '{"tier": "fast"}'::jsonb
                ELSE '{}' END,
           CASE WHEN i % 16 = 5 THEN 4000 ELSE 0 END, 0, 0,
           100 + (i % 4) * 100, 256 * (1 + i % 2), 0, NULL, 3,
           'PENDING', x.queued_at, x.queued_at, sched._queue_key(x.priority, x.queued_at), t0,
           CASE WHEN n_keys > 0 THEN 'key-' || (i % n_keys) END
      FROM generate_series(first, last) AS i,
           LATERAL (SELECT ((i * 7) % 3)::int AS priority,
                           t0 - interval '3 hours' + i * interval '5 ms' AS queued_at) x;
    PERFORM setval('sched.request_id_seq', greatest(last, (SELECT last_value FROM sched.request_id_seq)));
    RETURN last - first + 1;
END
$$;

/*
 * reset: every request PENDING and ready again, no attempt, command or timeline row, no
 * reservation, every execution QUEUED; bench.rid_seq restarts at the first request.
 * (run.sh follows it with VACUUM and CHECKPOINT, so every run starts alike.)
 */
CREATE FUNCTION bench.reset()
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    UPDATE sched.request r
       SET state = 'PENDING', attempt_id = NULL, claim_id = NULL, claimed_until = NULL,
           tries = 0, last_reason = NULL, available_at = r.queued_at
     WHERE r.state <> 'PENDING' OR r.tries <> 0 OR r.last_reason IS NOT NULL
        OR r.available_at <> r.queued_at;
    TRUNCATE sched.command, sched.timeline, sched.attempt;
    UPDATE sched.node
       SET reserved_cpu_millis = 0, reserved_memory_mb = 0, reserved_gpus = 0, live_attempts = 0
     WHERE live_attempts <> 0 OR reserved_cpu_millis <> 0 OR reserved_memory_mb <> 0 OR reserved_gpus <> 0;
    UPDATE sched.worker SET live_attempts = 0 WHERE live_attempts <> 0;
    UPDATE sched.execution SET status = 'QUEUED', finished_at = NULL WHERE status <> 'QUEUED';
    PERFORM setval('bench.rid_seq', (SELECT coalesce(min(request_id), 1) FROM sched.request), false);
END
$$;

/*
 * check_invariants: the reservation invariant after a run (SPEC section 2) and the
 * counters against the attempts they count.  Returns one row per violated rule (none
 * when everything holds).
 */
CREATE FUNCTION bench.check_invariants()
RETURNS TABLE (rule text, violations bigint)
LANGUAGE sql
AS $$
WITH live AS (
    SELECT a.node_id, a.worker_id, count(*) AS n, sum(a.reserve_cpu_millis) AS cpu,
           sum(a.reserve_memory_mb) AS mem, sum(a.reserve_gpus) AS gpus
      FROM sched.attempt a WHERE a.finished_at IS NULL AND a.status IN ('DISPATCHED', 'RUNNING')
     GROUP BY a.node_id, a.worker_id
), checks AS (
    SELECT 'worker live attempts above slots' AS rule,
           (SELECT count(*) FROM sched.worker w WHERE w.live_attempts > w.slots) AS violations
    UNION ALL
    SELECT 'node reservations above capacity',
           (SELECT count(*) FROM sched.node n
             WHERE n.reserved_cpu_millis > n.cpu_millis OR n.reserved_memory_mb > n.memory_mb
                OR n.reserved_gpus > n.gpus)
    UNION ALL
    SELECT 'worker counter differs from its live attempts',
           (SELECT count(*) FROM sched.worker w
             WHERE w.live_attempts <> coalesce((SELECT sum(l.n) FROM live l WHERE l.worker_id = w.worker_id), 0))
    UNION ALL
    SELECT 'node counters differ from their live attempts',
           (SELECT count(*) FROM sched.node n
             LEFT JOIN (SELECT node_id, sum(n) AS n, sum(cpu) AS cpu, sum(mem) AS mem, sum(gpus) AS gpus
                          FROM live GROUP BY node_id) l ON l.node_id = n.node_id
             WHERE n.live_attempts <> coalesce(l.n, 0) OR n.reserved_cpu_millis <> coalesce(l.cpu, 0)
                OR n.reserved_memory_mb <> coalesce(l.mem, 0) OR n.reserved_gpus <> coalesce(l.gpus, 0))
    UNION ALL
    SELECT 'DISPATCHED request without exactly one attempt',
           (SELECT count(*) FROM sched.request r
              LEFT JOIN (SELECT a.request_id, count(*) AS n FROM sched.attempt a GROUP BY 1) x
                ON x.request_id = r.request_id
             WHERE r.state = 'DISPATCHED' AND coalesce(x.n, 0) <> 1)
    UNION ALL
    SELECT 'attempt on a node whose worker serves another node',
           (SELECT count(*) FROM sched.attempt a JOIN sched.worker w ON w.worker_id = a.worker_id
             WHERE w.node_id <> a.node_id)
)
SELECT rule, violations FROM checks WHERE violations > 0
$$;
