-- bench/baselines.sql — what pg_sched is measured against (bench/run.sh).  Loaded into
-- each benchmark database after bench/load.sql; never installed.  Schema `bench`.
--
-- (a) write floor       bench.write_floor: exactly the rows a dispatch writes, with the
--                       node chosen in advance: the cost of the writes alone;
--                       bench.write_floor_batch: the same rows for a batch of requests
--                       taken from the queue, in one statement (issue 16).
-- (b) plain queue claim bench.plain_claim: the FOR UPDATE SKIP LOCKED claim of the next
--                       jobs, no placement, as the PostgreSQL job queues do it.
-- (c) PL/pgSQL          bench.plpgsql_dispatch / bench.plpgsql_dispatch_next /
--                       bench.sql_select_candidate: the same admission (every rule that
--                       can exclude a pair), scoring and reservation, written plainly in
--                       SQL and PL/pgSQL over the same sched tables: what a user would
--                       write without pg_sched.
-- All of them write the same tables, with the same constraints, indexes and foreign
-- keys, as pg_sched does.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;

-- ---------------------------------------------------------------------------------------
-- (a) write floor
-- ---------------------------------------------------------------------------------------

/*
 * write_floor(request_id, node number): the six writes of a dispatch for the request,
 * on node `node_no` of fleet 'node' (chosen in advance by the caller: no selection, no
 * locks beyond those the writes take, no re-check): worker slot, node reservations,
 * attempt, START command, timeline milestone, request DISPATCHED.  One statement
 * (data-modifying CTEs, plan kept by PL/pgSQL), reading the request row by primary key
 * for the values the attempt carries: the cheapest way to write these rows.
 * p_notify => true also sends the NOTIFY that wakes the worker, as dispatch does.
 */
CREATE FUNCTION bench.write_floor(p_request_id bigint, p_node_no int, p_at timestamptz DEFAULT now(),
                                  p_notify boolean DEFAULT false)
RETURNS uuid
LANGUAGE plpgsql
AS $$
DECLARE
    v_node text := bench.node_name('node', p_node_no);
    v_worker uuid := bench.worker_uuid('node', p_node_no, 'build');
    v_attempt uuid;
BEGIN
    WITH r AS (
        SELECT x.request_id, x.execution_id, x.step_id, x.attempt_number, x.tenant,
               x.reserve_cpu_millis, x.reserve_memory_mb, x.reserve_gpus
          FROM sched.request x
         WHERE x.request_id = p_request_id
    ), w AS (
        UPDATE sched.worker w SET live_attempts = w.live_attempts + 1
         WHERE w.worker_id = v_worker
        RETURNING w.generation
    ), n AS (
        UPDATE sched.node n
           SET reserved_cpu_millis = n.reserved_cpu_millis + r.reserve_cpu_millis,
               reserved_memory_mb = n.reserved_memory_mb + r.reserve_memory_mb,
               reserved_gpus = n.reserved_gpus + r.reserve_gpus,
               live_attempts = n.live_attempts + 1
          FROM r
         WHERE n.node_id = v_node
    ), a AS (
        INSERT INTO sched.attempt (request_id, execution_id, step_id, attempt_number, tenant, node_id,
                                   worker_id, worker_generation, lease_version, status,
                                   reserve_cpu_millis, reserve_memory_mb, reserve_gpus, score,
                                   dispatched_at, lease_expires_at)
        SELECT r.request_id, r.execution_id, r.step_id, r.attempt_number, r.tenant, v_node,
               v_worker, w.generation, 1, 'DISPATCHED', r.reserve_cpu_millis, r.reserve_memory_mb,
               r.reserve_gpus, 100000, p_at, p_at + interval '300 s'
          FROM r, w
        RETURNING attempt_id, request_id, execution_id, step_id, attempt_number, worker_generation
    ), c AS (
        INSERT INTO sched.command (worker_id, worker_generation, kind, attempt_id, lease_version,
                                   request_id, created_at)
        SELECT v_worker, a.worker_generation, 'START', a.attempt_id, 1, a.request_id, p_at FROM a
    ), t AS (
        INSERT INTO sched.timeline (execution_id, milestone_key, stage, step_id, attempt_number,
                                    attempt_id, state, component, title, detail, at)
        SELECT a.execution_id, 'step.worker.selected:' || a.step_id || ':' || a.attempt_number,
               'SCHEDULING', a.step_id, a.attempt_number, a.attempt_id, 'SUCCEEDED', 'Scheduler',
               'Node and worker selected',
               jsonb_build_object('node_id', v_node, 'worker_id', v_worker, 'score', 100000,
                                  'request_id', a.request_id), p_at
          FROM a
        ON CONFLICT ON CONSTRAINT timeline_milestone_once DO NOTHING
    ), u AS (
        UPDATE sched.request x
           SET state = 'DISPATCHED', attempt_id = a.attempt_id, claim_id = NULL, claimed_until = NULL,
               last_reason = NULL, tries = x.tries + 1
          FROM a
         WHERE x.request_id = a.request_id
    )
    SELECT a.attempt_id INTO v_attempt FROM a;
    IF p_notify THEN
        PERFORM pg_notify('sched_worker_' || v_worker, 'START ' || v_attempt);
    END IF;
    RETURN v_attempt;
END
$$;

/*
 * write_floor_batch(n, node_base, nodes): the batched write floor (issue 16, workload 2):
 * the six writes of write_floor for the next n ready requests of tenant 'default', in one
 * statement.  The requests are taken as plain_claim takes them (queue order, FOR UPDATE
 * SKIP LOCKED); the k-th of them (k = 0 .. n-1, in request_id order) goes to node
 * ((node_base + k) mod nodes) + 1 of fleet 'node', chosen in advance.  A pgbench client
 * passes node_base = client_id * n, so with nodes >= clients * n no two clients ever
 * write the same worker or node row (pg_sched's concurrent dispatchers meet on nodes
 * more often than that, never less), and the n nodes of one batch are distinct (one
 * counter update per row).  No selection, no re-check, no lock beyond what the writes
 * and the queue read take.  Returns the number of placements written.
 */
CREATE FUNCTION bench.write_floor_batch(p_n int, p_node_base int, p_nodes int,
                                        p_at timestamptz DEFAULT now())
RETURNS int
LANGUAGE plpgsql
AS $$
DECLARE
    v_placed int;
BEGIN
    IF p_n > p_nodes THEN
        RAISE EXCEPTION 'write_floor_batch: a batch of % needs at least % nodes, not %', p_n, p_n, p_nodes;
    END IF;
    WITH next AS (
        SELECT x.request_id, x.execution_id, x.step_id, x.attempt_number, x.tenant,
               x.reserve_cpu_millis, x.reserve_memory_mb, x.reserve_gpus
          FROM sched.request x
         WHERE x.tenant = 'default' AND x.state = 'PENDING' AND x.available_at <= p_at
         ORDER BY x.sort_key, x.queued_at, x.request_id
         LIMIT p_n
           FOR UPDATE SKIP LOCKED
    ), r AS (
        SELECT o.*, bench.node_name('node', o.node_no) AS node_id,
               bench.worker_uuid('node', o.node_no, 'build') AS worker_id
          FROM (SELECT next.*,
                       ((p_node_base + row_number() OVER (ORDER BY next.request_id) - 1) % p_nodes)::int + 1 AS node_no
                  FROM next) o
    ), w AS (
        UPDATE sched.worker w SET live_attempts = w.live_attempts + 1
          FROM r
         WHERE w.worker_id = r.worker_id
        RETURNING w.worker_id, w.generation
    ), n AS (
        UPDATE sched.node n
           SET reserved_cpu_millis = n.reserved_cpu_millis + r.reserve_cpu_millis,
               reserved_memory_mb = n.reserved_memory_mb + r.reserve_memory_mb,
               reserved_gpus = n.reserved_gpus + r.reserve_gpus,
               live_attempts = n.live_attempts + 1
          FROM r
         WHERE n.node_id = r.node_id
    ), a AS (
        INSERT INTO sched.attempt (request_id, execution_id, step_id, attempt_number, tenant, node_id,
                                   worker_id, worker_generation, lease_version, status,
                                   reserve_cpu_millis, reserve_memory_mb, reserve_gpus, score,
                                   dispatched_at, lease_expires_at)
        SELECT r.request_id, r.execution_id, r.step_id, r.attempt_number, r.tenant, r.node_id,
               r.worker_id, w.generation, 1, 'DISPATCHED', r.reserve_cpu_millis, r.reserve_memory_mb,
               r.reserve_gpus, 100000, p_at, p_at + interval '300 s'
          FROM r JOIN w ON w.worker_id = r.worker_id
        RETURNING attempt_id, request_id, execution_id, step_id, attempt_number, node_id, worker_id,
                  worker_generation
    ), c AS (
        INSERT INTO sched.command (worker_id, worker_generation, kind, attempt_id, lease_version,
                                   request_id, created_at)
        SELECT a.worker_id, a.worker_generation, 'START', a.attempt_id, 1, a.request_id, p_at FROM a
    ), t AS (
        INSERT INTO sched.timeline (execution_id, milestone_key, stage, step_id, attempt_number,
                                    attempt_id, state, component, title, detail, at)
        SELECT a.execution_id, 'step.worker.selected:' || a.step_id || ':' || a.attempt_number,
               'SCHEDULING', a.step_id, a.attempt_number, a.attempt_id, 'SUCCEEDED', 'Scheduler',
               'Node and worker selected',
               jsonb_build_object('node_id', a.node_id, 'worker_id', a.worker_id, 'score', 100000,
                                  'request_id', a.request_id), p_at
          FROM a
        ON CONFLICT ON CONSTRAINT timeline_milestone_once DO NOTHING
    ), u AS (
        UPDATE sched.request x
           SET state = 'DISPATCHED', attempt_id = a.attempt_id, claim_id = NULL, claimed_until = NULL,
               last_reason = NULL, tries = x.tries + 1
          FROM a
         WHERE x.request_id = a.request_id
    )
    SELECT count(*) INTO v_placed FROM a;
    RETURN v_placed;
END
$$;

-- ---------------------------------------------------------------------------------------
-- (b) plain queue claim
-- ---------------------------------------------------------------------------------------

/*
 * plain_claim(n): takes the next n ready requests of tenant 'default' in queue order,
 * FOR UPDATE SKIP LOCKED, the way job queues (que, good_job, river, pg-boss...) take
 * jobs: one UPDATE that moves the rows out of the ready set (here: state DISPATCHED with
 * no attempt, "locked" until claimed_until, as a job queue marks a job running), no
 * placement and nothing else written.  Returns how many it took.  PL/pgSQL, so the plan
 * is kept between calls (a LANGUAGE sql function would be planned at every call).
 */
CREATE FUNCTION bench.plain_claim(n int, p_at timestamptz DEFAULT now())
RETURNS int
LANGUAGE plpgsql
AS $$
DECLARE
    taken int;
BEGIN
    WITH next AS (
        SELECT r.request_id
          FROM sched.request r
         WHERE r.tenant = 'default' AND r.state = 'PENDING' AND r.available_at <= p_at
         ORDER BY r.sort_key, r.queued_at, r.request_id
         LIMIT n
           FOR UPDATE SKIP LOCKED
    )
    UPDATE sched.request r
       SET state = 'DISPATCHED', claimed_until = p_at + interval '30 s'
      FROM next
     WHERE r.request_id = next.request_id;
    GET DIAGNOSTICS taken = ROW_COUNT;
    RETURN taken;
END
$$;

-- ---------------------------------------------------------------------------------------
-- (c) PL/pgSQL: admission, scoring, reservation written plainly
-- ---------------------------------------------------------------------------------------

/*
 * sql_candidates: the admitted (node, worker) pairs for a request, best first.  Every
 * rule of SPEC section 3 that can exclude a pair is a condition of the WHERE clause
 * (pinned_to_other_node, node_not_active, capability_missing = the join, worker_not_ready,
 * worker_not_eligible, heartbeat_expired, capability_version_missing,
 * required_labels_mismatch, insufficient_cpu/memory/gpus, no_free_slot,
 * cpu/memory/gpus_exhausted); the score of section 4; ties by node_id bytewise; a node
 * to avoid (a retry) goes last.  A plain SQL function, inlined by the planner.
 */
CREATE FUNCTION bench.sql_candidates(
    p_capability text, p_version text, p_required jsonb, p_preferred jsonb,
    p_min_cpu int, p_min_memory bigint, p_min_gpus int,
    p_reserve_cpu int, p_reserve_memory bigint, p_reserve_gpus int,
    p_pin text, p_avoid text, p_at timestamptz, p_ttl interval)
RETURNS TABLE (node_id text, worker_id uuid, generation bigint, score bigint)
LANGUAGE sql STABLE
AS $$
SELECT n.node_id, w.worker_id, w.generation,
       (SELECT count(*) FROM jsonb_each_text(p_preferred) p WHERE n.labels ->> p.key = p.value) * 1000000
       + (CASE WHEN n.weight <= 0 THEN 100 ELSE n.weight END)::bigint * 1000
       - n.live_attempts::bigint * 10000 AS score
  FROM sched.worker w
  JOIN sched.node n ON n.node_id = w.node_id
 WHERE w.capability = p_capability
   AND (p_pin IS NULL OR n.node_id = p_pin)
   AND n.management_status = 'ACTIVE'
   AND w.runtime_state = 'READY'
   AND w.scheduling_status = 'ELIGIBLE'
   AND w.last_heartbeat >= p_at - p_ttl
   AND p_version = ANY (w.capability_versions)
   AND n.labels @> p_required
   AND n.cpu_millis >= greatest(p_min_cpu, p_reserve_cpu)
   AND n.memory_mb >= greatest(p_min_memory, p_reserve_memory)
   AND n.gpus >= greatest(p_min_gpus, p_reserve_gpus)
   AND w.live_attempts < w.slots
   AND n.cpu_millis - n.reserved_cpu_millis >= p_reserve_cpu
   AND n.memory_mb - n.reserved_memory_mb >= p_reserve_memory
   AND n.gpus - n.reserved_gpus >= p_reserve_gpus
 ORDER BY n.node_id IS NOT DISTINCT FROM p_avoid, score DESC, n.node_id COLLATE "C"
$$;

/* select_candidate, plainly (workload 3): the first row of sql_candidates. */
CREATE FUNCTION bench.sql_select_candidate(
    p_capability text, p_version text, p_required jsonb DEFAULT '{}', p_preferred jsonb DEFAULT '{}',
    p_min_cpu int DEFAULT 0, p_min_memory bigint DEFAULT 0, p_min_gpus int DEFAULT 0,
    p_reserve_cpu int DEFAULT 0, p_reserve_memory bigint DEFAULT 0, p_reserve_gpus int DEFAULT 0,
    p_pin text DEFAULT NULL, p_ttl interval DEFAULT NULL, p_at timestamptz DEFAULT now())
RETURNS TABLE (node_id text, worker_id uuid, score bigint)
LANGUAGE sql STABLE
AS $$
SELECT c.node_id, c.worker_id, c.score
  FROM bench.sql_candidates(p_capability, p_version, p_required, p_preferred, p_min_cpu,
                            p_min_memory, p_min_gpus, p_reserve_cpu, p_reserve_memory,
                            p_reserve_gpus, p_pin, NULL, p_at,
                            coalesce(p_ttl, current_setting('sched.heartbeat_ttl')::interval)) c
 LIMIT 1
$$;

/*
 * plpgsql_dispatch(request_id, at, from_queue): dispatch_attempt written plainly.
 * The transaction of SPEC section 6: advisory lock on (step, attempt number); the
 * request FOR UPDATE (SKIP LOCKED when it comes from the queue: NULL then means "taken
 * by someone else"); the execution FOR SHARE; an existing attempt is returned; then the
 * candidates in rank order, each locked FOR UPDATE SKIP LOCKED (worker and node) and
 * re-checked under the lock with the same rules and the generation seen; the first that
 * holds is reserved with the rows a dispatch writes and a NOTIFY.  Nothing eligible:
 * the request backs off (1 s doubling, at most 60 s); eligible but all taken: it stays
 * ready.
 */
CREATE FUNCTION bench.plpgsql_dispatch(p_request_id bigint, p_at timestamptz DEFAULT now(),
                                       p_from_queue boolean DEFAULT false)
RETURNS sched.dispatch_result
LANGUAGE plpgsql
AS $$
DECLARE
    r sched.request;
    res sched.dispatch_result;
    v_status text;
    v_attempt sched.attempt;
    c record;
    v_generation bigint;
    v_ttl interval := current_setting('sched.heartbeat_ttl')::interval;
    v_attempt_id uuid;
    v_eligible int := 0;
    v_conflicts int := 0;
BEGIN
    res.request_id := p_request_id;
    SELECT x.step_id, x.attempt_number INTO r.step_id, r.attempt_number
      FROM sched.request x WHERE x.request_id = p_request_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'request % does not exist', p_request_id USING ERRCODE = 'undefined_object';
    END IF;

    -- 1. the step's advisory lock, 2. the request
    IF p_from_queue THEN
        IF NOT pg_try_advisory_xact_lock(hashtextextended(r.step_id::text || ':' || r.attempt_number, 0)) THEN
            RETURN NULL;
        END IF;
        SELECT * INTO r FROM sched.request x WHERE x.request_id = p_request_id FOR UPDATE SKIP LOCKED;
        IF NOT FOUND OR r.state NOT IN ('PENDING', 'CLAIMED') OR r.available_at > p_at
           OR (r.state = 'CLAIMED' AND r.claimed_until > p_at) THEN
            RETURN NULL;
        END IF;
    ELSE
        PERFORM pg_advisory_xact_lock(hashtextextended(r.step_id::text || ':' || r.attempt_number, 0));
        SELECT * INTO r FROM sched.request x WHERE x.request_id = p_request_id FOR UPDATE;
    END IF;

    IF r.state = 'CANCELLED' THEN
        res.outcome := 'CANCELLED';
        RETURN res;
    END IF;
    IF r.state = 'CLAIMED' AND r.claimed_until > p_at THEN
        res.outcome := 'NOT_CLAIMED';
        RETURN res;
    END IF;

    -- 4. the execution, shared; closed ones cancel the request
    SELECT e.status INTO v_status FROM sched.execution e WHERE e.execution_id = r.execution_id FOR SHARE;
    IF v_status NOT IN ('CREATED', 'QUEUED', 'RUNNING') THEN
        UPDATE sched.request x SET state = 'CANCELLED', claim_id = NULL, claimed_until = NULL
         WHERE x.request_id = p_request_id;
        res.outcome := 'EXECUTION_CLOSED';
        RETURN res;
    END IF;

    -- an attempt for this step and number exists: return it
    SELECT * INTO v_attempt FROM sched.attempt a
     WHERE a.step_id = r.step_id AND a.attempt_number = r.attempt_number;
    IF FOUND THEN
        IF r.state <> 'DISPATCHED' THEN
            UPDATE sched.request x SET state = 'DISPATCHED', attempt_id = v_attempt.attempt_id,
                   claim_id = NULL, claimed_until = NULL
             WHERE x.request_id = p_request_id;
        END IF;
        res := ROW('EXISTING', p_request_id, v_attempt.attempt_id, v_attempt.node_id,
                   v_attempt.worker_id, v_attempt.lease_version, v_attempt.score, NULL);
        RETURN res;
    END IF;

    -- 2 and 3: candidates in rank order; 5: lock, re-check, reserve
    FOR c IN
        SELECT * FROM bench.sql_candidates(r.capability, r.capability_version, r.required_labels,
                     r.preferred_labels, r.min_cpu_millis, r.min_memory_mb, r.min_gpus,
                     r.reserve_cpu_millis, r.reserve_memory_mb, r.reserve_gpus, r.node_id,
                     r.avoid_node_id, p_at, v_ttl)
    LOOP
        v_eligible := v_eligible + 1;
        SELECT w.generation INTO v_generation
          FROM sched.worker w
          JOIN sched.node n ON n.node_id = w.node_id
         WHERE w.worker_id = c.worker_id
           AND (r.node_id IS NULL OR n.node_id = r.node_id)
           AND n.management_status = 'ACTIVE'
           AND w.runtime_state = 'READY'
           AND w.scheduling_status = 'ELIGIBLE'
           AND w.last_heartbeat >= p_at - v_ttl
           AND r.capability_version = ANY (w.capability_versions)
           AND n.labels @> r.required_labels
           AND n.cpu_millis >= greatest(r.min_cpu_millis, r.reserve_cpu_millis)
           AND n.memory_mb >= greatest(r.min_memory_mb, r.reserve_memory_mb)
           AND n.gpus >= greatest(r.min_gpus, r.reserve_gpus)
           AND w.live_attempts < w.slots
           AND n.cpu_millis - n.reserved_cpu_millis >= r.reserve_cpu_millis
           AND n.memory_mb - n.reserved_memory_mb >= r.reserve_memory_mb
           AND n.gpus - n.reserved_gpus >= r.reserve_gpus
           FOR UPDATE OF w, n SKIP LOCKED;
        IF FOUND AND v_generation = c.generation THEN
            UPDATE sched.worker w SET live_attempts = w.live_attempts + 1 WHERE w.worker_id = c.worker_id;
            UPDATE sched.node n
               SET reserved_cpu_millis = n.reserved_cpu_millis + r.reserve_cpu_millis,
                   reserved_memory_mb = n.reserved_memory_mb + r.reserve_memory_mb,
                   reserved_gpus = n.reserved_gpus + r.reserve_gpus,
                   live_attempts = n.live_attempts + 1
             WHERE n.node_id = c.node_id;
            INSERT INTO sched.attempt (request_id, execution_id, step_id, attempt_number, tenant,
                                       node_id, worker_id, worker_generation, lease_version, status,
                                       reserve_cpu_millis, reserve_memory_mb, reserve_gpus, score,
                                       dispatched_at, lease_expires_at)
            VALUES (p_request_id, r.execution_id, r.step_id, r.attempt_number, r.tenant, c.node_id,
                    c.worker_id, c.generation, 1, 'DISPATCHED', r.reserve_cpu_millis,
                    r.reserve_memory_mb, r.reserve_gpus, c.score, p_at,
                    p_at + make_interval(secs => 300))
            RETURNING attempt_id INTO v_attempt_id;
            INSERT INTO sched.command (worker_id, worker_generation, kind, attempt_id, lease_version,
                                       request_id, created_at)
            VALUES (c.worker_id, c.generation, 'START', v_attempt_id, 1, p_request_id, p_at);
            INSERT INTO sched.timeline (execution_id, milestone_key, stage, step_id, attempt_number,
                                        attempt_id, state, component, title, detail, at)
            VALUES (r.execution_id, 'step.worker.selected:' || r.step_id || ':' || r.attempt_number,
                    'SCHEDULING', r.step_id, r.attempt_number, v_attempt_id, 'SUCCEEDED', 'Scheduler',
                    'Node and worker selected',
                    jsonb_build_object('node_id', c.node_id, 'worker_id', c.worker_id,
                                       'score', c.score, 'request_id', p_request_id), p_at)
            ON CONFLICT ON CONSTRAINT timeline_milestone_once DO NOTHING;
            UPDATE sched.request x
               SET state = 'DISPATCHED', attempt_id = v_attempt_id, claim_id = NULL,
                   claimed_until = NULL, last_reason = NULL, tries = x.tries + 1
             WHERE x.request_id = p_request_id;
            PERFORM pg_notify('sched_worker_' || c.worker_id, 'START ' || v_attempt_id);
            res := ROW('DISPATCHED', p_request_id, v_attempt_id, c.node_id, c.worker_id, 1::bigint,
                       c.score, 'placed on node ' || c.node_id);
            RETURN res;
        END IF;
        v_conflicts := v_conflicts + 1;
    END LOOP;

    -- nothing could be reserved: leave the request queued
    UPDATE sched.request x
       SET state = 'PENDING', claim_id = NULL, claimed_until = NULL,
           tries = x.tries + CASE WHEN v_eligible = 0 THEN 1 ELSE 0 END,
           last_reason = format('%s eligible, %s held or taken by concurrent dispatches', v_eligible, v_conflicts),
           available_at = CASE WHEN v_eligible = 0
                               THEN p_at + make_interval(secs => least(power(2, least(x.tries, 30)), 60))
                               ELSE p_at END
     WHERE x.request_id = p_request_id;
    res.outcome := 'UNSCHEDULABLE';
    res.detail := format('%s eligible, %s held or taken by concurrent dispatches', v_eligible, v_conflicts);
    RETURN res;
END
$$;

/*
 * plpgsql_dispatch_next(max_dispatches, at): dispatch_next written plainly: requests in
 * the queue order of SPEC section 7 (starving requests oldest first; then the tenant with
 * the lowest live attempts / weight, re-evaluated after each dispatch; within a tenant
 * sort_key, queued_at, request_id), each taken FOR UPDATE SKIP LOCKED and dispatched by
 * plpgsql_dispatch; at most 4 * max_dispatches + 64 requests tried.  Each tenant is read
 * with a keyset position, so the call does not re-read what it already passed.
 */
CREATE FUNCTION bench.plpgsql_dispatch_next(p_max int DEFAULT 1, p_at timestamptz DEFAULT now())
RETURNS SETOF sched.dispatch_result
LANGUAGE plpgsql
AS $$
DECLARE
    v_cutoff timestamptz := p_at - current_setting('sched.starvation_after')::interval;
    v_tenants text[];
    v_weights bigint[];
    v_live bigint[];
    v_done boolean[];
    v_keys double precision[];
    v_queued timestamptz[];
    v_ids bigint[];
    v_best int;
    v_starving_done boolean := false;
    v_s_queued timestamptz := '-infinity';
    v_s_id bigint := 0;
    v_rid bigint;
    v_tenant text;
    v_key double precision;
    v_q timestamptz;
    res sched.dispatch_result;
    v_dispatched int := 0;
    v_tried int := 0;
    i int;
BEGIN
    SELECT array_agg(t.tenant ORDER BY t.tenant), array_agg(coalesce(tw.weight, 1) ORDER BY t.tenant),
           array_agg((SELECT count(*) FROM sched.attempt a
                       WHERE a.tenant = t.tenant AND a.finished_at IS NULL
                         AND a.status IN ('DISPATCHED', 'RUNNING')) ORDER BY t.tenant)
      INTO v_tenants, v_weights, v_live
      FROM (WITH RECURSIVE q(tenant) AS (      -- distinct tenants: a loose index scan
                (SELECT x.tenant FROM sched.request x WHERE x.state IN ('PENDING', 'CLAIMED')
                  ORDER BY x.tenant LIMIT 1)
                UNION ALL
                SELECT (SELECT x.tenant FROM sched.request x
                         WHERE x.state IN ('PENDING', 'CLAIMED') AND x.tenant > q.tenant
                         ORDER BY x.tenant LIMIT 1)
                  FROM q WHERE q.tenant IS NOT NULL)
            SELECT q.tenant FROM q WHERE q.tenant IS NOT NULL) t
      LEFT JOIN sched.tenant tw ON tw.tenant = t.tenant;
    IF v_tenants IS NULL THEN
        RETURN;
    END IF;
    v_done := array_fill(false, ARRAY[cardinality(v_tenants)]);
    v_keys := array_fill('-infinity'::double precision, ARRAY[cardinality(v_tenants)]);
    v_queued := array_fill('-infinity'::timestamptz, ARRAY[cardinality(v_tenants)]);
    v_ids := array_fill(0::bigint, ARRAY[cardinality(v_tenants)]);

    WHILE v_dispatched < p_max AND v_tried < 4 * p_max + 64 LOOP
        v_rid := NULL;
        -- starving requests first, oldest first
        IF NOT v_starving_done THEN
            SELECT x.request_id, x.tenant, x.queued_at INTO v_rid, v_tenant, v_q
              FROM sched.request x
             WHERE x.state IN ('PENDING', 'CLAIMED') AND x.available_at <= p_at
               AND (x.state = 'PENDING' OR x.claimed_until <= p_at)
               AND x.queued_at < v_cutoff AND (x.queued_at, x.request_id) > (v_s_queued, v_s_id)
             ORDER BY x.queued_at, x.request_id
             LIMIT 1;
            IF v_rid IS NULL THEN
                v_starving_done := true;
            ELSE
                v_s_queued := v_q;
                v_s_id := v_rid;
            END IF;
        END IF;
        -- then the tenant with the lowest live / weight, then its next request
        WHILE v_rid IS NULL LOOP
            v_best := NULL;
            FOR i IN 1 .. cardinality(v_tenants) LOOP
                IF NOT v_done[i] AND (v_best IS NULL OR v_live[i] * v_weights[v_best] < v_live[v_best] * v_weights[i]) THEN
                    v_best := i;
                END IF;
            END LOOP;
            EXIT WHEN v_best IS NULL;
            SELECT x.request_id, x.sort_key, x.queued_at INTO v_rid, v_key, v_q
              FROM sched.request x
             WHERE x.tenant = v_tenants[v_best]
               AND x.state IN ('PENDING', 'CLAIMED') AND x.available_at <= p_at
               AND (x.state = 'PENDING' OR x.claimed_until <= p_at)
               AND x.queued_at >= v_cutoff
               AND (x.sort_key, x.queued_at, x.request_id) > (v_keys[v_best], v_queued[v_best], v_ids[v_best])
             ORDER BY x.sort_key, x.queued_at, x.request_id
             LIMIT 1;
            IF v_rid IS NULL THEN
                v_done[v_best] := true;
            ELSE
                v_keys[v_best] := v_key;
                v_queued[v_best] := v_q;
                v_ids[v_best] := v_rid;
                v_tenant := v_tenants[v_best];
            END IF;
        END LOOP;
        EXIT WHEN v_rid IS NULL;

        v_tried := v_tried + 1;
        res := bench.plpgsql_dispatch(v_rid, p_at, true);
        CONTINUE WHEN res IS NULL;      -- taken by another dispatcher meanwhile
        RETURN NEXT res;
        IF res.outcome = 'DISPATCHED' THEN
            v_dispatched := v_dispatched + 1;
            i := array_position(v_tenants, v_tenant);
            IF i IS NOT NULL THEN
                v_live[i] := v_live[i] + 1;
            END IF;
        END IF;
    END LOOP;
END
$$;
