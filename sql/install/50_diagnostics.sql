-- sql/install/50_diagnostics.sql — diagnostics for operators: the views and explain (src/diagnostics.c)
-- A piece of pg_sched--0.2.0.sql (the Makefile builds it from sql/install/*.sql in the
-- order of their names) and of the upgrade from 0.1.0, hence CREATE OR REPLACE.
--
-- Everything here only reads and runs as its caller (SECURITY INVOKER): what a role sees
-- is what its table privileges let it see.  So these functions call no internal helper
-- (sched._*, which no role but the owner may call): the formatting and settings helpers
-- they share are public read-only functions, granted with them to sched_observer.

-- ---------------------------------------------------------------------------------
-- Diagnostics for operators (read-only; they answer on a hot standby too)
-- ---------------------------------------------------------------------------------

/* A sched.* duration setting in seconds, as this session sees it (the library is loaded
 * first, defining it): sched.setting_seconds('sched.heartbeat_ttl'). */
CREATE OR REPLACE FUNCTION sched.setting_seconds(name text)
RETURNS double precision
AS 'MODULE_PATHNAME', 'sched_setting_seconds'
LANGUAGE C STABLE STRICT;

/* (request_id, explanation, blocked) for every PENDING or CLAIMED request, computed by
 * the admission routine of dispatch over the current fleet (src/diagnostics.c): what
 * sched.pending shows, for reports that want only this. */
CREATE OR REPLACE FUNCTION sched.pending_explanations(at timestamptz)
RETURNS TABLE (request_id bigint, explanation text, blocked text)
AS 'MODULE_PATHNAME', 'sched_pending_explanations'
LANGUAGE C STABLE;

/* (explanation, blocked) of one request with these admission parameters, as
 * pending_explanations computes it (src/diagnostics.c): the view sched.pending calls it
 * once per row it returns, each distinct shape evaluated once per query, so reading the
 * first rows of the view costs the shapes of those rows, not the whole queue. */
CREATE OR REPLACE FUNCTION sched.pending_explanation(
    capability text, capability_version text, required_labels jsonb DEFAULT '{}',
    min_cpu_millis int DEFAULT 0, min_memory_mb bigint DEFAULT 0, min_gpus int DEFAULT 0,
    reserve_cpu_millis int DEFAULT 0, reserve_memory_mb bigint DEFAULT 0,
    reserve_gpus int DEFAULT 0, node_id text DEFAULT NULL, at timestamptz DEFAULT now(),
    OUT explanation text, OUT blocked text)
RETURNS record
AS 'MODULE_PATHNAME', 'sched_pending_explanation'
LANGUAGE C STABLE;

/* The queue-level limit that holds each open request back now (issue 14, the same rules
 * and words as the check in src/queue_limits.c): its key's concurrency limit, its key's
 * rate limit, or its tenant's quota, the first that is reached; when it clears (a rate
 * limit: a time; the others: when an attempt of the key or tenant ends). */
CREATE OR REPLACE FUNCTION sched.limit_explanations(at timestamptz)
RETURNS TABLE (request_id bigint, limit_kind text, reason text, clears_at timestamptz, clears text)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    IF at IS NULL THEN
        RAISE EXCEPTION 'parameter "at" must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF NOT isfinite(at) OR at < '1900-01-01 00:00:00+00' OR at >= '10000-01-01 00:00:00+00' THEN
        RAISE EXCEPTION 'parameter "at" is out of range: %', at USING ERRCODE = 'datetime_field_overflow',
            DETAIL = 'Times must be finite, from 1900-01-01 to 9999-12-31 UTC.';
    END IF;
    -- no limit set: nothing holds a request back, and the open requests are not read
    -- (sched.pending, queue_stats and explain join this on every call)
    IF NOT EXISTS (SELECT 1 FROM sched.concurrency_limit) AND NOT EXISTS (SELECT 1 FROM sched.rate_limit)
       AND NOT EXISTS (SELECT 1 FROM sched.tenant_quota) THEN
        RETURN;
    END IF;
    RETURN QUERY
WITH open AS (
    SELECT r.request_id, r.concurrency_key, r.tenant, r.reserve_cpu_millis, r.reserve_memory_mb,
           r.reserve_gpus
      FROM sched.request r WHERE r.state IN ('PENDING', 'CLAIMED')
), key_live AS (
    SELECT a.concurrency_key, count(*) AS live
      FROM sched.attempt a
     WHERE a.concurrency_key IS NOT NULL AND a.finished_at IS NULL AND a.status IN ('DISPATCHED', 'RUNNING')
       AND a.concurrency_key IN (SELECT l.concurrency_key FROM sched.concurrency_limit l)
     GROUP BY a.concurrency_key
), key_window AS (
    SELECT l.concurrency_key, count(a.attempt_id) AS recent,
           (array_agg(a.dispatched_at ORDER BY a.dispatched_at DESC))[l.dispatches] + l.per AS eligible
      FROM sched.rate_limit l
      LEFT JOIN sched.attempt a ON a.concurrency_key = l.concurrency_key
                               AND a.dispatched_at > $1 - l.per AND a.dispatched_at < $1 + l.per
     GROUP BY l.concurrency_key, l.dispatches, l.per
), tenant_use AS (
    SELECT a.tenant, count(*) AS live, sum(a.reserve_cpu_millis) AS cpu,
           sum(a.reserve_memory_mb) AS mem, sum(a.reserve_gpus) AS gpus
      FROM sched.attempt a
     WHERE a.finished_at IS NULL AND a.status IN ('DISPATCHED', 'RUNNING')
       AND a.tenant IN (SELECT q.tenant FROM sched.tenant_quota q)
     GROUP BY a.tenant
)
SELECT o.request_id, k.kind, k.reason, k.clears_at, k.clears
  FROM open o
  LEFT JOIN sched.concurrency_limit c ON c.concurrency_key = o.concurrency_key
  LEFT JOIN key_live kl ON kl.concurrency_key = o.concurrency_key
  LEFT JOIN sched.rate_limit rl ON rl.concurrency_key = o.concurrency_key
  LEFT JOIN key_window kw ON kw.concurrency_key = o.concurrency_key
  LEFT JOIN sched.tenant_quota q ON q.tenant = o.tenant
  LEFT JOIN tenant_use tu ON tu.tenant = o.tenant
 CROSS JOIN LATERAL (
    SELECT 'concurrency_limit' AS kind,
           format('concurrency_limit: key "%s" has %s of %s live attempts', o.concurrency_key,
                  coalesce(kl.live, 0), c.max_live) AS reason,
           NULL::timestamptz AS clears_at,
           format('when an attempt of key "%s" ends', o.concurrency_key) AS clears, 1 AS ord
     WHERE c.max_live IS NOT NULL AND coalesce(kl.live, 0) >= c.max_live
    UNION ALL
    SELECT 'rate_limited',
           format('rate_limited: key "%s" has %s dispatches within %s s of now (limit %s per %s s); eligible at %s UTC',
                  o.concurrency_key, kw.recent, date_part('epoch', rl.per), rl.dispatches,
                  date_part('epoch', rl.per), to_char(timezone('UTC', kw.eligible), 'YYYY-MM-DD HH24:MI:SS.US')),
           kw.eligible, format('at %s', kw.eligible), 2
     WHERE rl.dispatches IS NOT NULL AND kw.recent >= rl.dispatches
    UNION ALL
    SELECT 'tenant_quota_exceeded',
           format('tenant_quota_exceeded: tenant "%s" %s: its live attempts hold %s of %s, this request asks %s',
                  o.tenant, d.dim, d.used, d.quota, d.asks),
           NULL, format('when an attempt of tenant "%s" ends', o.tenant), 3
      FROM (SELECT * FROM (VALUES
                (1, 'live attempts', coalesce(tu.live, 0)::bigint, q.max_live::bigint, 1::bigint),
                (2, 'cpu_millis', coalesce(tu.cpu, 0)::bigint, q.max_cpu_millis::bigint, o.reserve_cpu_millis::bigint),
                (3, 'memory_mb', coalesce(tu.mem, 0)::bigint, q.max_memory_mb::bigint, o.reserve_memory_mb::bigint),
                (4, 'gpus', coalesce(tu.gpus, 0)::bigint, q.max_gpus::bigint, o.reserve_gpus::bigint))
                AS v(n, dim, used, quota, asks)
             WHERE v.quota IS NOT NULL AND v.used + v.asks > v.quota
             ORDER BY v.n LIMIT 1) d
    ORDER BY 5 LIMIT 1) k
 ORDER BY o.request_id;
END
$$;

/* Why a request of gang gang_id waits for its gang, as sched.pending says it (members
 * missing, or its last try's reason if that was the gang's), or NULL; the unplaced gangs
 * are read once per query (src/diagnostics.c). */
CREATE OR REPLACE FUNCTION sched.gang_reason(gang_id uuid, last_reason text)
RETURNS text
AS 'MODULE_PATHNAME', 'sched_gang_reason'
LANGUAGE C STABLE;

/* The reason limit_explanations(at) gives for one request, or NULL (src/diagnostics.c):
 * limit_explanations runs once per query, each row of the view sched.pending looks its
 * request up. */
CREATE OR REPLACE FUNCTION sched.limit_reason(request_id bigint, at timestamptz)
RETURNS text
AS 'MODULE_PATHNAME', 'sched_limit_reason'
LANGUAGE C STABLE;

/*
 * Each view below is a thin wrapper over a function of the same name taking `at` (the
 * time the answer is computed for), so tests and reports can pass a fixed time:
 *   SELECT * FROM sched.pending;                 -- now
 *   SELECT * FROM sched.pending('2026-01-01 12:00+00');
 */

CREATE OR REPLACE FUNCTION sched.node_overview(at timestamptz)
RETURNS TABLE (node_id text, status text, workers int, workers_ready int, worker_states text,
               heartbeat_age interval, cpu_millis int, cpu_reserved int, cpu_free int,
               memory_mb bigint, memory_reserved_mb bigint, memory_free_mb bigint,
               gpus int, gpus_reserved int, gpus_free int, slots int, slots_used int,
               slots_free int, live_attempts int, weight int, labels jsonb)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    IF at IS NULL THEN
        RAISE EXCEPTION 'parameter "at" must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF NOT isfinite(at) OR at < '1900-01-01 00:00:00+00' OR at >= '10000-01-01 00:00:00+00' THEN
        RAISE EXCEPTION 'parameter "at" is out of range: %', at USING ERRCODE = 'datetime_field_overflow',
            DETAIL = 'Times must be finite, from 1900-01-01 to 9999-12-31 UTC.';
    END IF;
    RETURN QUERY
SELECT n.node_id,
       n.management_status,
       count(w.worker_id)::int,
       (count(w.worker_id) FILTER (
            WHERE w.runtime_state = 'READY' AND w.scheduling_status = 'ELIGIBLE'
              AND w.last_heartbeat >= $1 - make_interval(secs => sched.setting_seconds('sched.heartbeat_ttl'))))::int,
       string_agg(w.capability || ':' || lower(w.runtime_state)
                  || CASE WHEN w.scheduling_status = 'CORDONED' THEN ',cordoned' ELSE '' END,
                  ' ' ORDER BY w.capability),
       date_trunc('second', $1 - max(w.last_heartbeat)),
       n.cpu_millis, n.reserved_cpu_millis, n.cpu_millis - n.reserved_cpu_millis,
       n.memory_mb, n.reserved_memory_mb, n.memory_mb - n.reserved_memory_mb,
       n.gpus, n.reserved_gpus, n.gpus - n.reserved_gpus,
       coalesce(sum(w.slots), 0)::int,
       coalesce(sum(w.live_attempts), 0)::int,
       coalesce(sum(w.slots - w.live_attempts), 0)::int,
       n.live_attempts, n.weight, n.labels
  FROM sched.node n
  LEFT JOIN sched.worker w ON w.node_id = n.node_id
 GROUP BY n.node_id
 ORDER BY n.node_id;
END
$$;
CREATE OR REPLACE VIEW sched.node_overview AS SELECT * FROM sched.node_overview(now());
COMMENT ON VIEW sched.node_overview IS 'One row per node: status, workers, heartbeat age, capacity / reserved / free, slots.';

/* sched.pending(at): the view sched.pending at another time (the view is this function
 * at now(); the regress test diagnostics compares the two).  A SQL function with its
 * body parsed when it is created (BEGIN ATOMIC: every name in it was resolved then, so
 * no caller's search_path reaches it) and no proconfig (90_privileges.sql), so that the
 * planner inlines it into the query that reads it: `SELECT * FROM sched.pending LIMIT
 * 100` computes 100 rows, and no call writes its rows to a tuplestore first.  The check
 * is a condition on `at` alone: it runs once, before any row (at planning, for a
 * constant). */
CREATE OR REPLACE FUNCTION sched.pending(at timestamptz)
RETURNS TABLE (request_id bigint, tenant text, capability text, priority int,
               effective_priority numeric, waited interval, tries int, next_try_at timestamptz,
               state text, explanation text, blocked text, pinned_to text, last_reason text)
LANGUAGE sql STABLE
BEGIN ATOMIC
SELECT x.request_id,
       x.tenant::text COLLATE pg_catalog."default" AS tenant,
       (x.capability || '@' || x.capability_version) COLLATE pg_catalog."default" AS capability,
       x.priority,
       round(x.priority + greatest(extract(epoch FROM $1 - x.queued_at), 0) / x.aging_s, 2)
           AS effective_priority,
       date_trunc('second', greatest($1 - x.queued_at, interval '0')) AS waited,
       x.tries,
       greatest(x.available_at, CASE WHEN x.state = 'CLAIMED' THEN x.claimed_until END) AS next_try_at,
       x.state COLLATE pg_catalog."default" AS state,
       -- a reached limit first (it holds the request back whatever the fleet), then its
       -- gang (members missing, or what its last try found), then the fleet
       concat_ws('; ', x.limit_reason, x.gang_reason,
                 CASE WHEN x.held_node_id IS NOT NULL THEN
                      format('waits for preemption to complete: the room it preempted on node %s is held for it until %s; it goes at its next dispatch',
                             x.held_node_id, x.held_until) END,
                 (x.v).explanation) COLLATE pg_catalog."default" AS explanation,
       CASE WHEN x.held_node_id IS NOT NULL THEN 'transient'
            WHEN (x.limit_reason IS NOT NULL OR x.gang_reason IS NOT NULL) AND (x.v).blocked <> 'static' THEN 'transient'
            ELSE (x.v).blocked END COLLATE pg_catalog."default" AS blocked,
       x.node_id::text COLLATE pg_catalog."default" AS pinned_to,
       x.last_reason COLLATE pg_catalog."default" AS last_reason
  -- (the explanation is called in the select list of a subquery behind OFFSET 0, once
  -- per row read, in the order read: in FROM each call would be written to a
  -- tuplestore and read back, and a join to limit_explanations may be planned as a call
  -- of it for each request; the subquery is scanned once, not once per request as a
  -- LATERAL one is)
  FROM (SELECT r.request_id, r.tenant, r.capability, r.capability_version, r.priority,
               r.queued_at, r.tries, r.available_at, r.state, r.claimed_until,
               r.held_node_id, r.held_until, r.node_id, r.last_reason, lim.aging_s,
               sched.pending_explanation(r.capability, r.capability_version, r.required_labels,
                                         r.min_cpu_millis, r.min_memory_mb, r.min_gpus,
                                         r.reserve_cpu_millis, r.reserve_memory_mb,
                                         r.reserve_gpus, r.node_id, $1) AS v,
               -- (looked up only when a limit is set, for a request in a gang)
               CASE WHEN lim.any_limit THEN sched.limit_reason(r.request_id, $1) END
                    AS limit_reason,
               -- its gang, if it has one not placed yet: members missing, or what its
               -- last try found
               CASE WHEN r.gang_id IS NOT NULL
                    THEN sched.gang_reason(r.gang_id, r.last_reason) END AS gang_reason
          FROM sched.request r
          -- (once per query, as uncorrelated sub-selects: each call of a function of
          -- pg_sched switches its search_path, and the subquery itself is scanned again
          -- for every row; aging_s is a numeric, as extract(epoch ...) is, so that no row
          -- converts one to a float8 and back through its text)
         CROSS JOIN (SELECT EXISTS (SELECT 1 FROM sched.concurrency_limit)
                            OR EXISTS (SELECT 1 FROM sched.rate_limit)
                            OR EXISTS (SELECT 1 FROM sched.tenant_quota) AS any_limit,
                            (SELECT sched.setting_seconds('sched.aging_interval')::numeric) AS aging_s
                     OFFSET 0) lim
         WHERE r.state IN ('PENDING', 'CLAIMED')
           AND sched.check_time($1, 'at') IS NOT NULL
         ORDER BY r.queued_at, r.request_id
        OFFSET 0) x
 ORDER BY x.queued_at, x.request_id;
END;
/* One row per open request, oldest first, each explained as it is read: the function at
 * now(), inlined into the query that reads the view (see above); the caller's
 * privileges apply to the tables it reads, as in the functions. */
CREATE OR REPLACE VIEW sched.pending WITH (security_invoker = true) AS
SELECT * FROM sched.pending(now());
COMMENT ON VIEW sched.pending IS 'One row per pending or claimed request, with a live explanation of why it waits.';

CREATE OR REPLACE FUNCTION sched.queue_stats(at timestamptz)
RETURNS TABLE (tenant text, capability text, pending int, ready_now int, oldest_wait interval,
               dispatched_5m int, p50_wait interval, p95_wait interval, starving int,
               limited int)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_starving_before timestamptz;
BEGIN
    IF at IS NULL THEN
        RAISE EXCEPTION 'parameter "at" must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF NOT isfinite(at) OR at < '1900-01-01 00:00:00+00' OR at >= '10000-01-01 00:00:00+00' THEN
        RAISE EXCEPTION 'parameter "at" is out of range: %', at USING ERRCODE = 'datetime_field_overflow',
            DETAIL = 'Times must be finite, from 1900-01-01 to 9999-12-31 UTC.';
    END IF;
    -- (computed here, so the query calls no function for each request: it may run in
    -- parallel)
    v_starving_before := at - make_interval(secs => sched.setting_seconds('sched.starvation_after'));
    RETURN QUERY
WITH waiting AS (
    SELECT r.tenant, r.capability,
           count(*) AS pending,
           count(*) FILTER (WHERE r.available_at <= $1
                              AND (r.state = 'PENDING' OR r.claimed_until <= $1)) AS ready_now,
           -- a request queued for later has waited nothing yet (as in sched.pending)
           greatest(date_trunc('second', max($1 - r.queued_at)), interval '0') AS oldest_wait,
           count(*) FILTER (WHERE r.queued_at < v_starving_before) AS starving
      FROM sched.request r
     WHERE r.state IN ('PENDING', 'CLAIMED')
     GROUP BY r.tenant, r.capability
), limited AS (
    -- the requests a limit holds back, reached from limit_explanations (which returns
    -- at once when no limit is set)
    SELECT r.tenant, r.capability, count(*) AS limited
      FROM sched.limit_explanations($1) l
      JOIN sched.request r ON r.request_id = l.request_id
     GROUP BY r.tenant, r.capability
), recent AS (
    SELECT r.tenant, r.capability,
           count(*) AS dispatched_5m,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY a.dispatched_at - r.queued_at) AS p50_wait,
           percentile_cont(0.95) WITHIN GROUP (ORDER BY a.dispatched_at - r.queued_at) AS p95_wait
      FROM sched.attempt a
      JOIN sched.request r ON r.request_id = a.request_id
     WHERE a.dispatched_at > $1 - interval '5 minutes' AND a.dispatched_at <= $1
     GROUP BY r.tenant, r.capability
)
SELECT tenant, capability,
       coalesce(w.pending, 0)::int,
       coalesce(w.ready_now, 0)::int,
       w.oldest_wait,
       coalesce(d.dispatched_5m, 0)::int,
       date_trunc('millisecond', d.p50_wait),
       date_trunc('millisecond', d.p95_wait),
       coalesce(w.starving, 0)::int,
       coalesce(li.limited, 0)::int
  FROM waiting w
  LEFT JOIN limited li USING (tenant, capability)
  FULL JOIN recent d USING (tenant, capability)
 ORDER BY tenant, capability;
END
$$;
CREATE OR REPLACE VIEW sched.queue_stats AS SELECT * FROM sched.queue_stats(now());
COMMENT ON VIEW sched.queue_stats IS 'Per tenant and capability: queue depth, oldest wait, recent dispatch waits, starving requests.';

CREATE OR REPLACE FUNCTION sched.attempt_overview(at timestamptz)
RETURNS TABLE (attempt_id uuid, execution_id uuid, step_id uuid, attempt_number int,
               tenant text, node_id text, worker_id uuid, status text, lease_state text,
               lease_remaining interval, lease_version bigint, dispatched_at timestamptz,
               started_at timestamptz, finished_at timestamptz, duration interval,
               reserve_cpu_millis int, reserve_memory_mb bigint, reserve_gpus int, score bigint)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    IF at IS NULL THEN
        RAISE EXCEPTION 'parameter "at" must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF NOT isfinite(at) OR at < '1900-01-01 00:00:00+00' OR at >= '10000-01-01 00:00:00+00' THEN
        RAISE EXCEPTION 'parameter "at" is out of range: %', at USING ERRCODE = 'datetime_field_overflow',
            DETAIL = 'Times must be finite, from 1900-01-01 to 9999-12-31 UTC.';
    END IF;
    RETURN QUERY
SELECT a.attempt_id, a.execution_id, a.step_id, a.attempt_number, a.tenant, a.node_id,
       a.worker_id, a.status,
       CASE
           WHEN a.status NOT IN ('DISPATCHED', 'RUNNING') THEN 'released'
           WHEN a.lease_expires_at < $1 THEN 'expired'
           -- re-registered since the dispatch: orphaned when an earlier session than the
           -- current one received the START (a CASE: only such attempts look it up)
           WHEN w.generation > a.worker_generation THEN
               CASE WHEN w.generation > (SELECT coalesce(max(c.delivered_generation), w.generation)
                                           FROM sched.command c
                                          WHERE c.attempt_id = a.attempt_id AND c.kind = 'START')
                    THEN 'orphaned' ELSE 'held' END
           ELSE 'held'
       END,
       CASE WHEN a.status IN ('DISPATCHED', 'RUNNING')
            THEN date_trunc('second', a.lease_expires_at - $1) END,
       a.lease_version, a.dispatched_at, a.started_at, a.finished_at,
       date_trunc('second', coalesce(a.finished_at, $1) - coalesce(a.started_at, a.dispatched_at)),
       a.reserve_cpu_millis, a.reserve_memory_mb, a.reserve_gpus, a.score
  FROM sched.attempt a
  JOIN sched.worker w ON w.worker_id = a.worker_id
 ORDER BY (a.status IN ('DISPATCHED', 'RUNNING')) DESC, a.dispatched_at DESC, a.attempt_id;
END
$$;
CREATE OR REPLACE VIEW sched.attempt_overview AS SELECT * FROM sched.attempt_overview(now());
COMMENT ON VIEW sched.attempt_overview IS 'Attempts with their lease state: held, expired (to be reaped), orphaned (worker re-registered after receiving it), released.';

/* Dispatch calls by outcome since the server started (UNSCHEDULABLE by why the request
 * waits: waits_for_capacity, fits_nowhere, contention), with the conflicts they met and
 * the better candidates they passed over while concurrent dispatches reserved them.
 * Cluster-wide, counted when a call returns (committed or not); no rows without pg_sched
 * in shared_preload_libraries (src/counters.c). */
CREATE OR REPLACE FUNCTION sched.dispatch_stats()
RETURNS TABLE (outcome text, reason text, calls bigint, conflicts bigint, held_passed bigint)
AS 'MODULE_PATHNAME', 'sched_dispatch_stats'
LANGUAGE C STABLE
SET search_path = pg_catalog, pg_temp;
CREATE OR REPLACE VIEW sched.dispatch_stats AS SELECT * FROM sched.dispatch_stats();
COMMENT ON VIEW sched.dispatch_stats IS 'Dispatch calls by outcome (UNSCHEDULABLE by reason) since the server started, with their conflicts; for monitoring.';

/* The milestones of one execution, in order. */
CREATE OR REPLACE FUNCTION sched.execution_timeline(execution_id uuid)
RETURNS TABLE (at timestamptz, stage text, milestone text, state text, component text,
               title text, step_id uuid, attempt_number int, detail jsonb)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF execution_id IS NULL THEN
        RAISE EXCEPTION 'parameter "execution_id" must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM sched.execution e WHERE e.execution_id = execution_timeline.execution_id) THEN
        RAISE EXCEPTION 'execution "%" does not exist (parameter "execution_id")', execution_id
            USING ERRCODE = 'undefined_object';
    END IF;
    RETURN QUERY
    SELECT t.at, t.stage, t.milestone_key, t.state, t.component, t.title, t.step_id,
           t.attempt_number, t.detail
      FROM sched.timeline t
     WHERE t.execution_id = execution_timeline.execution_id
     ORDER BY t.at, t.timeline_id;
END
$$;

/* A CPU amount for people: 16000 -> '16', 1500 -> '1.5'. */
CREATE OR REPLACE FUNCTION sched.format_cpus(millis bigint)
RETURNS text
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT trim_scale(round(millis / 1000.0, 3))::text $$;

/* An amount with its unit, singular or plural: (1, 'GPU') -> '1 GPU', ('1.5', 'CPU') -> '1.5 CPUs'. */
CREATE OR REPLACE FUNCTION sched.format_amount(amount text, unit text)
RETURNS text
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT amount || ' ' || unit || CASE WHEN amount = '1' THEN '' ELSE 's' END $$;

/*
 * Whether node labels meet required labels, plain or expressions (README, "Label
 * expressions"): the reference semantics, written apart from the C core that placement
 * uses (placement.c), so that test/pgbench/invariants.sql and the regress test
 * label_expressions can check one against the other.  Its inputs are checked as the C
 * functions check them (a label map of strings; the limits of README "Limits"); an
 * expression it cannot evaluate is 22023 naming the key.
 */
CREATE OR REPLACE FUNCTION sched.labels_match(labels jsonb, required_labels jsonb)
RETURNS boolean
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k text;
    e jsonb;
    op text;
    v text;
    have double precision;
    want double precision;
    bound text;
    m text[];
    vkey int[];
    bkey int[];
    nbounds int;
    ok boolean;
    version_re constant text := '[0-9]{1,9}(\.[0-9]{1,9}){0,7}';
    result boolean := true;
BEGIN
    IF labels IS NULL OR required_labels IS NULL THEN
        RAISE EXCEPTION 'parameter "%" must not be NULL', CASE WHEN labels IS NULL THEN 'labels' ELSE 'required_labels' END
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF jsonb_typeof(labels) <> 'object' OR EXISTS (SELECT 1 FROM jsonb_each(labels) x WHERE jsonb_typeof(x.value) <> 'string') THEN
        RAISE EXCEPTION 'parameter "labels" must be a JSON object of strings'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF jsonb_typeof(required_labels) <> 'object' THEN
        RAISE EXCEPTION 'parameter "required_labels" must be a JSON object of strings or expressions'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- the limits of README "Limits", as the C functions check them
    FOR k, e IN SELECT 'labels', labels UNION ALL SELECT 'required_labels', required_labels LOOP
        IF (SELECT count(*) FROM jsonb_object_keys(e)) > 64 THEN
            RAISE EXCEPTION 'parameter "%" has too many labels: %', k, (SELECT count(*) FROM jsonb_object_keys(e))
                USING ERRCODE = 'program_limit_exceeded', DETAIL = 'The limit is 64 labels.';
        END IF;
        IF EXISTS (SELECT 1 FROM jsonb_object_keys(e) x WHERE octet_length(x) > 256) THEN
            RAISE EXCEPTION 'parameter "%" has a label key of % bytes', k,
                (SELECT max(octet_length(x)) FROM jsonb_object_keys(e) x)
                USING ERRCODE = 'program_limit_exceeded', DETAIL = 'The limit is 256 bytes.';
        END IF;
        IF EXISTS (SELECT 1 FROM jsonb_each(e) x
                    WHERE octet_length(x.value #>> '{}') > 1024 AND jsonb_typeof(x.value) = 'string') THEN
            RAISE EXCEPTION 'parameter "%" has a value of more than 1024 bytes', k
                USING ERRCODE = 'program_limit_exceeded', DETAIL = 'The limit is 1024 bytes.';
        END IF;
    END LOOP;
    FOR k, e IN SELECT x.key, x.value FROM jsonb_each(required_labels) x LOOP
        v := CASE WHEN jsonb_typeof(labels -> k) = 'string' THEN labels ->> k END;
        IF jsonb_typeof(e) = 'string' THEN
            IF v IS DISTINCT FROM e #>> '{}' THEN
                result := false;
            END IF;
            CONTINUE;
        END IF;
        op := CASE WHEN jsonb_typeof(e) = 'object' AND (SELECT count(*) FROM jsonb_object_keys(e)) = 1
                   THEN (SELECT x FROM jsonb_object_keys(e) x) END;
        e := e -> op;
        -- the limits of README "Limits" (54000), as the C functions check them
        IF (op IN ('in', 'not_in') AND jsonb_typeof(e) = 'array'
            AND (jsonb_array_length(e) > 64
                 OR EXISTS (SELECT 1 FROM jsonb_array_elements_text(e) x WHERE octet_length(x) > 1024)))
           OR (op = 'version' AND jsonb_typeof(e) = 'string' AND octet_length(e #>> '{}') > 1024) THEN
            RAISE EXCEPTION 'parameter "required_labels" has an expression beyond the limits for label "%"', k
                USING ERRCODE = 'program_limit_exceeded',
                      DETAIL = 'The limits are 64 values of at most 1024 bytes, and 1024 bytes for a version expression.';
        END IF;
        IF op IN ('in', 'not_in') AND jsonb_typeof(e) = 'array' AND jsonb_array_length(e) > 0
           AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(e) x WHERE jsonb_typeof(x) <> 'string') THEN
            ok := v IS NOT NULL AND EXISTS (SELECT 1 FROM jsonb_array_elements_text(e) x WHERE x = v);
            IF ok <> (op = 'in') THEN
                result := false;
            END IF;
        ELSIF op = 'exists' AND jsonb_typeof(e) = 'boolean' THEN
            IF (v IS NOT NULL) <> (e #>> '{}')::boolean THEN
                result := false;
            END IF;
        ELSIF op IN ('gt', 'lt') AND jsonb_typeof(e) = 'number' THEN
            BEGIN
                want := (e #>> '{}')::double precision;
            EXCEPTION WHEN numeric_value_out_of_range THEN
                op := NULL;
            END;
            IF op IS NOT NULL THEN
                have := NULL;
                IF v ~ '^-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?$' THEN
                    BEGIN
                        have := v::double precision;
                    EXCEPTION WHEN numeric_value_out_of_range THEN
                        have := NULL;
                    END;
                END IF;
                IF have IS NULL OR NOT (CASE op WHEN 'gt' THEN have > want ELSE have < want END) THEN
                    result := false;
                END IF;
            END IF;
        ELSIF op = 'version' AND jsonb_typeof(e) = 'string' THEN
            ok := v IS NOT NULL AND v ~ ('^' || version_re || '$');
            nbounds := 0;
            FOREACH bound IN ARRAY string_to_array(e #>> '{}', ',') LOOP
                nbounds := nbounds + 1;
                m := regexp_match(bound, '^ *(!=|>=|<=|>|<|=)? *(' || version_re || ') *$');
                IF m IS NULL OR nbounds > 8 THEN
                    op := NULL;
                    EXIT;
                END IF;
                IF ok THEN
                    -- as 8 integers, missing parts 0: int[] compare as versions do
                    SELECT array_agg(coalesce((string_to_array(v, '.'))[i]::int, 0) ORDER BY i),
                           array_agg(coalesce((string_to_array(m[2], '.'))[i]::int, 0) ORDER BY i)
                      INTO vkey, bkey FROM generate_series(1, 8) i;
                    ok := CASE coalesce(m[1], '=')
                          WHEN '=' THEN vkey = bkey WHEN '!=' THEN vkey <> bkey
                          WHEN '>' THEN vkey > bkey WHEN '>=' THEN vkey >= bkey
                          WHEN '<' THEN vkey < bkey ELSE vkey <= bkey END;
                END IF;
            END LOOP;
            IF op IS NOT NULL AND nbounds > 0 AND NOT ok THEN
                result := false;
            END IF;
            IF nbounds = 0 THEN
                op := NULL;
            END IF;
        ELSE
            op := NULL;
        END IF;
        IF op IS NULL THEN
            RAISE EXCEPTION 'parameter "required_labels" has an invalid expression for label "%"', k
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Pass a string, or an object of one operator (in, not_in, exists, gt, lt, version).';
        END IF;
    END LOOP;
    -- every key was read (and checked) before the answer
    RETURN result;
END
$$;

/* One required label in words: zone = "a", zone in ("a", "b"), zone >= 2, ... */
CREATE OR REPLACE FUNCTION sched.format_label_expression(key text, expression jsonb)
RETURNS text
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT key || CASE
    WHEN jsonb_typeof(expression) = 'string' THEN ' = ' || expression::text
    WHEN expression ? 'in' THEN ' in (' || (SELECT string_agg(x::text, ', ') FROM jsonb_array_elements(expression -> 'in') x) || ')'
    WHEN expression ? 'not_in' THEN ' not in (' || (SELECT string_agg(x::text, ', ') FROM jsonb_array_elements(expression -> 'not_in') x) || ')'
    WHEN expression ? 'exists' THEN CASE WHEN expression -> 'exists' = 'true' THEN ' exists' ELSE ' does not exist' END
    WHEN expression ? 'gt' THEN ' > ' || (expression -> 'gt')::text
    WHEN expression ? 'lt' THEN ' < ' || (expression -> 'lt')::text
    WHEN expression ? 'version' THEN ' version ' || (expression ->> 'version')
    ELSE ' ' || expression::text END
$$;

/* A duration for people, whatever the session's IntervalStyle: '90 s', '2 min 5 s', '3 h 0 min'. */
CREATE OR REPLACE FUNCTION sched.format_duration(d interval)
RETURNS text
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT CASE WHEN secs < 60 THEN secs || ' s'
            WHEN secs < 3600 THEN (secs / 60) || ' min ' || (secs % 60) || ' s'
            ELSE (secs / 3600) || ' h ' || (secs % 3600 / 60) || ' min' END
  FROM (SELECT greatest(ceil(extract(epoch FROM d)), 0)::bigint AS secs) x
$$;

/*
 * explain(request_id, at): a report for one request: its constraints, every node with
 * eligible or its reasons, the ranking with score terms, and the closest misses (what
 * single change would admit a node).  Read-only; built on qualification_reasons and
 * rank_candidates, so it explains with the routine dispatch decides with.
 */
CREATE OR REPLACE FUNCTION sched.explain(request_id bigint, at timestamptz DEFAULT now())
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r sched.request;
    out text[] := '{}';
    q record;
    total int;
    eligible int;
    ttl double precision := sched.setting_seconds('sched.heartbeat_ttl');
    need bigint;
    biggest bigint;
    misses int := 0;
    lines text[];
BEGIN
    IF request_id IS NULL THEN
        RAISE EXCEPTION 'parameter "request_id" must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF at IS NULL THEN
        RAISE EXCEPTION 'parameter "at" must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF NOT isfinite(at) OR at < '1900-01-01 00:00:00+00' OR at >= '10000-01-01 00:00:00+00' THEN
        RAISE EXCEPTION 'parameter "at" is out of range: %', at USING ERRCODE = 'datetime_field_overflow',
            DETAIL = 'Times must be finite, from 1900-01-01 to 9999-12-31 UTC.';
    END IF;
    SELECT * INTO r FROM sched.request x WHERE x.request_id = explain.request_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'request "%" does not exist (parameter "request_id")', request_id
            USING ERRCODE = 'undefined_object';
    END IF;

    out := out || format('request %s: %s@%s for tenant %s, priority %s, attempt %s of %s',
                         r.request_id, r.capability, r.capability_version, r.tenant, r.priority,
                         r.attempt_number, r.max_attempts);
    out := out || format('  state %s, waited %s, tries: %s, next try %s',
                         r.state, sched.format_duration(at - r.queued_at), r.tries,
                         CASE WHEN r.available_at <= at THEN 'now'
                              ELSE 'in ' || sched.format_duration(r.available_at - at) END);
    out := out || format('  requires: %s; prefers: %s%s', r.required_labels, r.preferred_labels,
                         CASE WHEN r.spread_key IS NOT NULL THEN format('; spread key %s', r.spread_key) ELSE '' END);
    IF r.held_node_id IS NOT NULL THEN
        out := out || format('  waits for preemption to complete: room on node %s (worker %s) held for it until %s',
                             r.held_node_id, r.held_worker_id, r.held_until);
    END IF;
    IF r.preemptible THEN
        out := out || '  preemptible: a request of higher priority may end its attempts'::text;
    END IF;
    IF r.gang_id IS NOT NULL THEN
        out := out || (SELECT format('  gang %s: %s of %s members submitted%s, placed together or not at all%s',
                                     g.gang_id, (SELECT count(*) FROM sched.request m WHERE m.gang_id = g.gang_id),
                                     g.gang_size, CASE WHEN g.distinct_nodes THEN ', each on its own node' ELSE '' END,
                                     CASE WHEN g.placed_at IS NOT NULL THEN format('; placed at %s', g.placed_at) ELSE '' END)
                         FROM sched.gang g WHERE g.gang_id = r.gang_id);
    END IF;
    out := out || format('  minimum: cpu %s, memory %s MB, gpus %s; reserves: cpu %s, memory %s MB, gpus %s',
                         sched.format_cpus(r.min_cpu_millis), r.min_memory_mb, r.min_gpus,
                         sched.format_cpus(r.reserve_cpu_millis), r.reserve_memory_mb, r.reserve_gpus);
    out := out || format('  heartbeat TTL %s s%s', ttl,
                         CASE WHEN r.node_id IS NOT NULL THEN format('; pinned to node %s', r.node_id) ELSE '' END);
    IF r.last_reason IS NOT NULL THEN
        out := out || format('  last dispatch: %s', r.last_reason);
    END IF;
    FOR q IN SELECT * FROM sched.limit_explanations(at) l WHERE l.request_id = explain.request_id LOOP
        out := out || format('  held back by a limit: %s; clears %s', q.reason, q.clears);
    END LOOP;

    SELECT count(*), count(*) FILTER (WHERE qr.eligible) INTO total, eligible
      FROM sched.qualification_reasons(explain.request_id, at) qr;
    out := out || ''::text || format('nodes (%s of %s eligible):', eligible, total);
    -- one line per node, built in one query (appending to an array in a loop copies it
    -- at every line: quadratic in the fleet)
    out := out || ARRAY(
        SELECT format('  %-20s %s', x.node_id,
                      CASE WHEN x.eligible THEN 'eligible, score ' || x.score
                           ELSE array_to_string(x.reasons, ', ') END)
          FROM sched.qualification_reasons(explain.request_id, at) x ORDER BY x.node_id);

    IF eligible > 0 THEN
        out := out || ''::text || CASE WHEN r.spread_key IS NULL
            THEN 'ranking (score = preferred x 1,000,000 + weight x 1,000 - running x 10,000):'
            ELSE format('ranking (score = preferred x 1,000,000 - spread x 100,000 + weight x 1,000 - running x 10,000; spread: live attempts of spread key %s):', r.spread_key) END;
        out := out || ARRAY(
            SELECT format('  %s. %-20s %s = %s x 1,000,000%s + %s x 1,000 - %s x 10,000%s',
                          x.rank, x.node_id, x.score, x.preferred_matches,
                          CASE WHEN r.spread_key IS NULL THEN '' ELSE format(' - %s x 100,000', x.spread_matches) END,
                          x.weight, x.running_attempts,
                          CASE WHEN x.node_id = r.avoid_node_id THEN ' (avoided: the previous attempt failed there)' ELSE '' END)
              FROM sched.rank_candidates(r.capability, r.capability_version,
                       r.required_labels, r.preferred_labels, r.min_cpu_millis, r.min_memory_mb,
                       r.min_gpus, r.reserve_cpu_millis, r.reserve_memory_mb, r.reserve_gpus,
                       r.node_id, NULL, at, r.spread_key) x
             ORDER BY x.rank);
        RETURN array_to_string(out, E'\n');
    END IF;

    out := out || ''::text || 'closest misses:'::text;
    -- nodes held back by exactly one reason: the one change that would admit them (one
    -- query: appending to an array in a loop copies it at every line)
    lines := ARRAY(
        SELECT '  ' || CASE m.reason
            WHEN 'heartbeat_expired' THEN format('%s would qualify with a heartbeat TTL of %s s',
                 m.node_id, ceil(extract(epoch FROM at - m.last_heartbeat)))
            WHEN 'pinned_to_other_node' THEN format('%s would qualify if the request were not pinned to %s',
                 m.node_id, r.node_id)
            WHEN 'node_not_active' THEN format('%s would qualify if it were ACTIVE (it is %s)',
                 m.node_id, m.management_status)
            WHEN 'capability_missing' THEN format('%s would qualify with a worker for %s',
                 m.node_id, r.capability)
            WHEN 'worker_not_ready' THEN format('%s would qualify once its worker reports READY (it is %s)',
                 m.node_id, m.runtime_state)
            WHEN 'worker_not_eligible' THEN format('%s would qualify once its worker is uncordoned',
                 m.node_id)
            WHEN 'capability_version_missing' THEN format('%s would qualify if its worker served version %s (it serves %s)',
                 m.node_id, r.capability_version, array_to_string(m.capability_versions, ', '))
            WHEN 'required_labels_mismatch' THEN (
                 SELECT format('%s would qualify if its labels met %s (%s)%s', m.node_id,
                               sched.format_label_expression(f.key, f.value),
                               CASE WHEN jsonb_typeof(m.labels -> f.key) = 'string'
                                    THEN format('its %s is %s', f.key, m.labels -> f.key)
                                    ELSE format('it has no label %s', f.key) END,
                               CASE WHEN count(*) OVER () = 2 THEN ' and 1 other label expression'
                                    WHEN count(*) OVER () > 2
                                    THEN format(' and %s other label expressions', count(*) OVER () - 1)
                                    ELSE '' END)
                   FROM jsonb_each(r.required_labels) f
                  WHERE NOT sched.labels_match(m.labels, jsonb_build_object(f.key, f.value))
                  ORDER BY f.key COLLATE "C"
                  LIMIT 1)
            WHEN 'insufficient_cpu' THEN format('%s would qualify with %s (it has %s)',
                 m.node_id, sched.format_amount(sched.format_cpus(greatest(r.min_cpu_millis, r.reserve_cpu_millis)), 'CPU'),
                 sched.format_cpus(m.cpu_millis))
            WHEN 'insufficient_memory' THEN format('%s would qualify with %s MB of memory (it has %s MB)',
                 m.node_id, greatest(r.min_memory_mb, r.reserve_memory_mb), m.memory_mb)
            WHEN 'insufficient_gpus' THEN format('%s would qualify with %s (it has %s)',
                 m.node_id, sched.format_amount(greatest(r.min_gpus, r.reserve_gpus)::text, 'GPU'), m.gpus)
            WHEN 'no_free_slot' THEN format('%s would qualify when one of its %s ends',
                 m.node_id, sched.format_amount(m.worker_live::text, 'live attempt'))
            WHEN 'cpu_exhausted' THEN format('%s would qualify when its free CPUs reach %s (now %s)',
                 m.node_id, sched.format_cpus(r.reserve_cpu_millis), sched.format_cpus(m.cpu_millis - m.reserved_cpu_millis))
            WHEN 'memory_exhausted' THEN format('%s would qualify when its free memory reaches %s MB (now %s MB)',
                 m.node_id, r.reserve_memory_mb, m.memory_mb - m.reserved_memory_mb)
            WHEN 'gpus_exhausted' THEN format('%s would qualify when its free GPUs reach %s (now %s)',
                 m.node_id, r.reserve_gpus, m.gpus - m.reserved_gpus)
            ELSE format('%s: %s', m.node_id, m.reason) END
          FROM (SELECT qr.node_id, qr.reasons[1] AS reason, n.management_status, n.labels,
                       n.cpu_millis, n.memory_mb, n.gpus, n.reserved_cpu_millis, n.reserved_memory_mb,
                       n.reserved_gpus, w.runtime_state, w.scheduling_status,
                               w.last_heartbeat, w.capability_versions, w.slots, w.live_attempts AS worker_live
                          FROM sched.qualification_reasons(explain.request_id, at) qr
                          JOIN sched.node n ON n.node_id = qr.node_id
                          LEFT JOIN sched.worker w ON w.worker_id = qr.worker_id
                         WHERE cardinality(qr.reasons) = 1
                         ORDER BY qr.node_id) m
         ORDER BY m.node_id);
    misses := misses + cardinality(lines);
    out := out || lines;

    -- requirements no node of the fleet meets at all
    need := greatest(r.min_cpu_millis, r.reserve_cpu_millis);
    SELECT max(n.cpu_millis) INTO biggest FROM sched.node n;
    IF need > 0 AND biggest < need THEN
        misses := misses + 1;
        out := out || format('  no node has %s; the largest has %s', sched.format_amount(sched.format_cpus(need), 'CPU'), sched.format_cpus(biggest));
    END IF;
    need := greatest(r.min_memory_mb, r.reserve_memory_mb);
    SELECT max(n.memory_mb) INTO biggest FROM sched.node n;
    IF need > 0 AND biggest < need THEN
        misses := misses + 1;
        out := out || format('  no node has %s MB of memory; the largest has %s MB', need, biggest);
    END IF;
    need := greatest(r.min_gpus, r.reserve_gpus);
    SELECT max(n.gpus) INTO biggest FROM sched.node n;
    IF need > 0 AND biggest < need THEN
        misses := misses + 1;
        out := out || format('  no node has %s; the largest has %s', sched.format_amount(need::text, 'GPU'), biggest);
    END IF;
    IF NOT EXISTS (SELECT 1 FROM sched.worker w WHERE w.capability = r.capability) THEN
        misses := misses + 1;
        out := out || format('  no worker serves capability %s', r.capability);
    ELSIF NOT EXISTS (SELECT 1 FROM sched.worker w WHERE w.capability = r.capability
                         AND r.capability_version = ANY (w.capability_versions)) THEN
        misses := misses + 1;
        out := out || format('  no worker serves %s version %s', r.capability, r.capability_version);
    END IF;
    IF misses = 0 THEN
        out := out || '  every node fails on two or more reasons'::text;
    END IF;
    RETURN array_to_string(out, E'\n');
END
$$;

