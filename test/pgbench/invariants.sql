-- invariants.sql — the state pg_sched must leave behind, whatever ran (CONTRACT sections
-- 3, 8, 9, 10 and 11): capacity and counters, exactly once per (step, attempt number),
-- every request, attempt, step and execution in exactly one consistent state, and no
-- orphan rows.  Each check is a named query returning one text line per violating row;
-- all are run, each prints its count, and the DO block raises (psql -v ON_ERROR_STOP=1
-- then exits non-zero) naming every check that found a violation.  No transaction
-- control here: concurrency.sh's self-test runs this file inside BEGIN ... ROLLBACK
-- after corrupting the state on purpose, once per check.
--
-- Any suite may run it on its database, at any moment:
--     psql -v ON_ERROR_STOP=1 -f test/pgbench/invariants.sql
-- Each check is one statement, so it sees one snapshot; under load, run the file with
-- PGOPTIONS='-c default_transaction_isolation=repeatable\ read' to have all the checks
-- see the same one (test/soak does).  It reads only columns that 0.1.0 has too
-- (test/upgrade runs it at 0.1.0), but for the checks of the limits (issue 14: sched.
-- concurrency_limit, rate_limit, tenant_quota and attempt.concurrency_key, new in
-- 0.2.0), which have nothing to check where their table does not exist.
--
-- The limits keep no history (their tables have no timestamp), so their checks compare
-- the attempts with the limits as they are now: no key with more live attempts than its
-- concurrency limit, no tenant whose live attempts hold more than its quota (each
-- dimension), and no window [t, t + per) (t: any of the key's dispatched_at) holding
-- more than `dispatches` dispatches of a rate-limited key, over the whole history of the
-- attempts.  Lowering a limit with set_* is allowed below what is in use (the limit then
-- holds back new dispatches only), so a test that lowers a concurrency limit or quota
-- below the live attempts' use must not run this file before those attempts end, and
-- one that sets or lowers a rate limit on a key that has dispatches (within `per` of
-- each other, beyond the new limit) must not run it on that database at all.
DO $invariants$
DECLARE
    c record;
    n bigint;
    sample text[];
    failed text[] := '{}';
    v0_2 boolean := EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('sched.request')
                             AND attname = 'held_worker_id' AND NOT attisdropped);
BEGIN
    FOR c IN SELECT * FROM (VALUES
        -- SPEC 2: live attempts (and holds, issue 15) <= slots, for every worker (counted
        -- from the attempts)
        ('worker_live_attempts_within_slots', $q$
            SELECT format('worker %s: %s live attempts, %s holds, %s slots', w.worker_id,
                          count(a.attempt_id), :worker_holds, w.slots)
              FROM sched.worker w
              LEFT JOIN sched.attempt a ON a.worker_id = w.worker_id AND a.status IN ('DISPATCHED', 'RUNNING')
             GROUP BY w.worker_id, w.slots HAVING count(a.attempt_id) + :worker_holds > w.slots $q$),
        -- SPEC 2: reserved <= capacity, for every node (summed from the attempts and holds)
        ('node_reservations_within_capacity', $q$
            SELECT format('node %s: live reservations %s mcpu/%s MB/%s GPU, capacity %s/%s/%s',
                          n.node_id, coalesce(sum(a.reserve_cpu_millis), 0) + h.cpu,
                          coalesce(sum(a.reserve_memory_mb), 0) + h.mem,
                          coalesce(sum(a.reserve_gpus), 0) + h.gpus, n.cpu_millis, n.memory_mb, n.gpus)
              FROM sched.node n
             CROSS JOIN LATERAL :node_holds h
              LEFT JOIN sched.attempt a ON a.node_id = n.node_id AND a.status IN ('DISPATCHED', 'RUNNING')
             GROUP BY n.node_id, h.cpu, h.mem, h.gpus
            HAVING coalesce(sum(a.reserve_cpu_millis), 0) + h.cpu > n.cpu_millis
                OR coalesce(sum(a.reserve_memory_mb), 0) + h.mem > n.memory_mb
                OR coalesce(sum(a.reserve_gpus), 0) + h.gpus > n.gpus $q$),
        -- the worker counter is exactly the number of its live attempts (and of the
        -- preemption holds on it, issue 15)
        ('worker_counter_matches_attempts', $q$
            SELECT format('worker %s: live_attempts %s, live attempts counted %s, holds %s',
                          w.worker_id, w.live_attempts, count(a.attempt_id), :worker_holds)
              FROM sched.worker w
              LEFT JOIN sched.attempt a ON a.worker_id = w.worker_id AND a.status IN ('DISPATCHED', 'RUNNING')
             GROUP BY w.worker_id HAVING w.live_attempts <> count(a.attempt_id) + :worker_holds $q$),
        -- the node counters are exactly the sums over its live attempts (and holds)
        ('node_counters_match_attempts', $q$
            SELECT format('node %s: counters %s/%s/%s/%s, sums %s/%s/%s/%s', n.node_id,
                          n.reserved_cpu_millis, n.reserved_memory_mb, n.reserved_gpus, n.live_attempts,
                          s.cpu, s.mem, s.gpus, s.live)
              FROM sched.node n
              CROSS JOIN LATERAL (
                  SELECT coalesce(sum(a.reserve_cpu_millis), 0) AS cpu,
                         coalesce(sum(a.reserve_memory_mb), 0) AS mem,
                         coalesce(sum(a.reserve_gpus), 0) AS gpus, count(*) AS live
                    FROM sched.attempt a
                   WHERE a.node_id = n.node_id AND a.status IN ('DISPATCHED', 'RUNNING')) s
             CROSS JOIN LATERAL :node_holds h
             WHERE (n.reserved_cpu_millis, n.reserved_memory_mb, n.reserved_gpus, n.live_attempts)
                   IS DISTINCT FROM ((s.cpu + h.cpu)::int, (s.mem + h.mem)::bigint, (s.gpus + h.gpus)::int,
                                     (s.live + h.live)::int) $q$),
        -- the fair-share counters: per tenant, the sum over backend slots = live attempts
        ('tenant_live_matches_attempts', $q$
            SELECT format('tenant %s: counters say %s live, attempts %s', coalesce(c.tenant, a.tenant),
                          coalesce(c.live, 0), coalesce(a.live, 0))
              FROM (SELECT tenant, sum(live) AS live FROM sched.tenant_live GROUP BY tenant) c
              FULL JOIN (SELECT tenant, count(*) AS live FROM sched.attempt
                          WHERE status IN ('DISPATCHED', 'RUNNING') GROUP BY tenant) a
                ON a.tenant = c.tenant
             WHERE coalesce(c.live, 0) <> coalesce(a.live, 0) $q$),
        -- exactly once: one attempt, and one request, per (step, attempt number)
        ('one_attempt_per_step_attempt', $q$
            SELECT format('step %s attempt %s: %s attempts', step_id, attempt_number, count(*))
              FROM sched.attempt GROUP BY step_id, attempt_number HAVING count(*) > 1 $q$),
        ('one_request_per_step_attempt', $q$
            SELECT format('step %s attempt %s: %s requests', step_id, attempt_number, count(*))
              FROM sched.request GROUP BY step_id, attempt_number HAVING count(*) > 1 $q$),
        -- every request is in exactly one of the states, claimed exactly when CLAIMED
        ('request_in_exactly_one_state', $q$
            SELECT format('request %s: state %s, claim %s', request_id, coalesce(state, 'NULL'), claim_id)
              FROM sched.request
             WHERE state IS NULL OR state NOT IN ('PENDING', 'CLAIMED', 'DISPATCHED', 'CANCELLED')
                OR (state = 'CLAIMED') <> (claim_id IS NOT NULL) $q$),
        ('attempt_in_exactly_one_state', $q$
            SELECT format('attempt %s: status %s, finished_at %s', attempt_id, coalesce(status, 'NULL'), finished_at)
              FROM sched.attempt
             WHERE status IS NULL
                OR status NOT IN ('DISPATCHED', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED', 'LOST', 'PREEMPTED')
                OR (status IN ('DISPATCHED', 'RUNNING')) <> (finished_at IS NULL) $q$),
        -- every submitted step is in exactly one of: pending (one PENDING or CLAIMED
        -- request), live (one DISPATCHED or RUNNING attempt) or terminal (neither: its
        -- latest request was cancelled, or dispatched and its attempt ended); what is
        -- pending or live is the step's latest attempt number; a step is of one execution
        ('step_in_exactly_one_state', $q$
            SELECT format('step %s: %s open requests, %s live attempts, latest attempt number %s, open %s, live %s, %s executions',
                          s.step_id, s.open, coalesce(l.live, 0), s.latest, s.open_n, l.live_n, s.executions)
              FROM (SELECT r.step_id, count(*) FILTER (WHERE r.state IN ('PENDING', 'CLAIMED')) AS open,
                           max(r.attempt_number) AS latest,
                           max(r.attempt_number) FILTER (WHERE r.state IN ('PENDING', 'CLAIMED')) AS open_n,
                           count(DISTINCT r.execution_id) AS executions
                      FROM sched.request r GROUP BY r.step_id) s
              LEFT JOIN (SELECT a.step_id, count(*) AS live, max(a.attempt_number) AS live_n
                           FROM sched.attempt a WHERE a.status IN ('DISPATCHED', 'RUNNING')
                          GROUP BY a.step_id) l ON l.step_id = s.step_id
             WHERE s.open + coalesce(l.live, 0) > 1
                OR s.open_n <> s.latest OR l.live_n <> s.latest
                OR s.executions <> 1 $q$),
        -- the step's state agrees with its execution's: a live attempt's execution is
        -- not SUCCEEDED (complete_execution refuses), and if closed (CANCELLED, FAILED)
        -- it sent the attempt a CANCEL; a step cancelled before dispatch is of a closed
        -- execution; a step whose latest attempt FAILED or was LOST and that was not
        -- requeued is of a FAILED or CANCELLED execution (an open one requeues it).
        -- (A pending step may be of a closed execution: cancel_execution passes over a
        -- request a dispatcher holds, and a dispatch cancels it later, EXECUTION_CLOSED.)
        ('step_state_matches_execution', $q$
            SELECT format('step %s attempt %s (request %s %s, attempt %s %s): execution %s is %s',
                          st.step_id, st.attempt_number, st.request_id, st.state, a.attempt_id,
                          coalesce(a.status, '-'), st.execution_id, coalesce(e.status, 'missing'))
              FROM (SELECT DISTINCT ON (r.step_id) r.step_id, r.attempt_number, r.request_id,
                           r.state, r.execution_id
                      FROM sched.request r ORDER BY r.step_id, r.attempt_number DESC) st
              LEFT JOIN sched.attempt a ON a.request_id = st.request_id
              LEFT JOIN sched.execution e ON e.execution_id = st.execution_id
             WHERE e.execution_id IS NULL
                OR (a.status IN ('DISPATCHED', 'RUNNING')
                    AND (e.status = 'SUCCEEDED'
                         OR (e.status IN ('CANCELLED', 'FAILED')
                             AND NOT EXISTS (SELECT 1 FROM sched.command c
                                              WHERE c.attempt_id = a.attempt_id AND c.kind = 'CANCEL'))))
                OR (st.state = 'CANCELLED' AND e.status NOT IN ('SUCCEEDED', 'FAILED', 'CANCELLED'))
                OR (st.state = 'DISPATCHED' AND a.status IN ('FAILED', 'LOST', 'PREEMPTED')
                    AND e.status NOT IN ('FAILED', 'CANCELLED')) $q$),
        -- an execution is closed exactly when it has finished_at; QUEUED (or CREATED)
        -- until an attempt of it starts, RUNNING only once one has; it has a step
        ('execution_state_consistent', $q$
            SELECT format('execution %s: status %s, finished_at %s, started attempts %s, requests %s',
                          e.execution_id, coalesce(e.status, 'NULL'), e.finished_at, x.started, x.requests)
              FROM sched.execution e
              CROSS JOIN LATERAL (
                  SELECT (SELECT count(*) FROM sched.attempt a
                           WHERE a.execution_id = e.execution_id AND a.started_at IS NOT NULL) AS started,
                         (SELECT count(*) FROM sched.request r WHERE r.execution_id = e.execution_id) AS requests) x
             WHERE e.status IS NULL
                OR e.status NOT IN ('CREATED', 'QUEUED', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED')
                OR (e.status IN ('SUCCEEDED', 'FAILED', 'CANCELLED')) <> (e.finished_at IS NOT NULL)
                OR (e.status IN ('CREATED', 'QUEUED') AND x.started > 0)
                OR (e.status = 'RUNNING' AND x.started = 0)
                OR x.requests = 0 $q$),
        -- a DISPATCHED request has exactly one attempt, the one it names
        ('dispatched_request_has_one_attempt', $q$
            SELECT format('request %s (DISPATCHED): %s attempts, attempt_id %s',
                          r.request_id, count(a.attempt_id), r.attempt_id)
              FROM sched.request r
              LEFT JOIN sched.attempt a ON a.request_id = r.request_id
             WHERE r.state = 'DISPATCHED'
             GROUP BY r.request_id, r.attempt_id
            HAVING count(a.attempt_id) <> 1 OR r.attempt_id IS DISTINCT FROM min(a.attempt_id::text)::uuid $q$),
        -- a request that is not DISPATCHED has no attempt
        ('undispatched_request_has_no_attempt', $q$
            SELECT format('request %s (%s) has attempt %s', r.request_id, r.state, a.attempt_id)
              FROM sched.request r JOIN sched.attempt a ON a.request_id = r.request_id
             WHERE r.state IS DISTINCT FROM 'DISPATCHED' $q$),
        -- every attempt belongs to a DISPATCHED request of the same step and number
        ('attempt_has_dispatched_request', $q$
            SELECT format('attempt %s: request %s is %s', a.attempt_id, a.request_id, coalesce(r.state, 'missing'))
              FROM sched.attempt a LEFT JOIN sched.request r ON r.request_id = a.request_id
             WHERE r.state IS DISTINCT FROM 'DISPATCHED'
                OR (r.step_id, r.attempt_number, r.execution_id)
                   IS DISTINCT FROM (a.step_id, a.attempt_number, a.execution_id) $q$),
        -- the rows a reservation ties together exist (the tables need not have foreign
        -- keys): an attempt's execution, worker and node
        ('attempt_references_exist', $q$
            SELECT format('attempt %s: execution %s, worker %s, node %s', a.attempt_id,
                          a.execution_id, a.worker_id, a.node_id)
              FROM sched.attempt a
             WHERE NOT EXISTS (SELECT 1 FROM sched.execution e WHERE e.execution_id = a.execution_id)
                OR NOT EXISTS (SELECT 1 FROM sched.worker w WHERE w.worker_id = a.worker_id)
                OR NOT EXISTS (SELECT 1 FROM sched.node n WHERE n.node_id = a.node_id) $q$),
        -- every worker's node and every request's execution exist (no foreign keys:
        -- pg_restore -j loads tables in any order)
        ('fleet_and_queue_references_exist', $q$
            SELECT format('worker %s: node %s missing', w.worker_id, w.node_id)
              FROM sched.worker w
             WHERE NOT EXISTS (SELECT 1 FROM sched.node n WHERE n.node_id = w.node_id)
            UNION ALL
            SELECT format('request %s: execution %s missing', r.request_id, r.execution_id)
              FROM sched.request r
             WHERE NOT EXISTS (SELECT 1 FROM sched.execution e WHERE e.execution_id = r.execution_id) $q$),
        -- no orphan command: its attempt and its worker exist
        ('no_orphan_command', $q$
            SELECT format('command %s (%s): attempt %s %s, worker %s %s', c.command_id, c.kind,
                          c.attempt_id, CASE WHEN a.attempt_id IS NULL THEN 'missing' ELSE 'exists' END,
                          c.worker_id, CASE WHEN w.worker_id IS NULL THEN 'missing' ELSE 'exists' END)
              FROM sched.command c
              LEFT JOIN sched.attempt a ON a.attempt_id = c.attempt_id
              LEFT JOIN sched.worker w ON w.worker_id = c.worker_id
             WHERE a.attempt_id IS NULL OR w.worker_id IS NULL $q$),
        -- a command is for its attempt's worker session (worker, generation, lease,
        -- request); a CANCEL is sent once per attempt, and only by closing its execution
        -- or by preempting the attempt (issue 15)
        ('command_matches_its_attempt', $q$
            SELECT format('command %s (%s) of attempt %s: worker %s gen %s lease %s request %s; attempt: worker %s gen %s lease %s request %s, execution %s',
                          c.command_id, c.kind, a.attempt_id, c.worker_id, c.worker_generation,
                          c.lease_version, c.request_id, a.worker_id, a.worker_generation,
                          a.lease_version, a.request_id, e.status)
              FROM sched.command c
              JOIN sched.attempt a ON a.attempt_id = c.attempt_id
              LEFT JOIN sched.execution e ON e.execution_id = a.execution_id
             WHERE (c.worker_id, c.worker_generation, c.lease_version, c.request_id)
                   IS DISTINCT FROM (a.worker_id, a.worker_generation, a.lease_version, a.request_id)
                OR (c.kind = 'CANCEL' AND a.status IS DISTINCT FROM 'PREEMPTED'
                    AND e.status IS DISTINCT FROM 'CANCELLED' AND e.status IS DISTINCT FROM 'FAILED')
                OR (c.kind = 'CANCEL' AND EXISTS (SELECT 1 FROM sched.command c2
                                                   WHERE c2.attempt_id = c.attempt_id AND c2.kind = 'CANCEL'
                                                     AND c2.command_id <> c.command_id)) $q$),
        -- no orphan milestone: its execution exists, and its attempt_id (when set) is an
        -- attempt of that execution, step and attempt number
        ('no_orphan_milestone', $q$
            SELECT format('milestone %s (%s) of execution %s (%s): attempt %s %s', t.timeline_id,
                          t.milestone_key, t.execution_id,
                          CASE WHEN e.execution_id IS NULL THEN 'missing' ELSE 'exists' END, t.attempt_id,
                          CASE WHEN a.attempt_id IS NULL THEN 'missing'
                               ELSE format('of execution %s step %s attempt %s', a.execution_id, a.step_id, a.attempt_number) END)
              FROM sched.timeline t
              LEFT JOIN sched.execution e ON e.execution_id = t.execution_id
              LEFT JOIN sched.attempt a ON a.attempt_id = t.attempt_id
             WHERE e.execution_id IS NULL
                OR (t.attempt_id IS NOT NULL
                    AND (a.attempt_id IS NULL
                         OR (a.execution_id, a.step_id, a.attempt_number)
                            IS DISTINCT FROM (t.execution_id, t.step_id, t.attempt_number))) $q$),
        -- SPEC 6: the attempt, its START command and its timeline milestone are written
        -- together
        ('attempt_has_one_start_command', $q$
            SELECT format('attempt %s: %s START commands', a.attempt_id, count(c.command_id))
              FROM sched.attempt a
              LEFT JOIN sched.command c ON c.attempt_id = a.attempt_id AND c.kind = 'START'
                                       AND c.worker_id = a.worker_id
             GROUP BY a.attempt_id HAVING count(c.command_id) <> 1 $q$),
        ('attempt_has_selected_milestone', $q$
            SELECT format('attempt %s: %s step.worker.selected milestones', a.attempt_id, count(t.*))
              FROM sched.attempt a
              LEFT JOIN sched.timeline t
                ON t.execution_id = a.execution_id
               AND t.milestone_key = format('step.worker.selected:%s:%s', a.step_id, a.attempt_number)
             GROUP BY a.attempt_id HAVING count(t.*) <> 1 $q$),
        -- SPEC 3: every attempt went where admission allows it, reserving what its
        -- request asked (static rules only: transient ones are covered above).  The
        -- worker's versions are checked only while its session is the one the attempt
        -- was placed on: a registration may change them afterwards.
        ('attempt_placement_admissible', $q$
            SELECT format('attempt %s on %s/%s for request %s', a.attempt_id, a.node_id, a.worker_id, r.request_id)
              FROM sched.attempt a
              JOIN sched.request r ON r.request_id = a.request_id
              JOIN sched.worker w ON w.worker_id = a.worker_id
              JOIN sched.node n ON n.node_id = a.node_id
             WHERE w.node_id <> a.node_id
                OR w.capability <> r.capability
                OR (w.generation = a.worker_generation AND NOT (r.capability_version = ANY (w.capability_versions)))
                OR NOT (:labels_match(n.labels, r.required_labels))
                OR (r.node_id IS NOT NULL AND r.node_id <> a.node_id)
                OR n.cpu_millis < greatest(r.min_cpu_millis, r.reserve_cpu_millis)
                OR n.memory_mb < greatest(r.min_memory_mb, r.reserve_memory_mb)
                OR n.gpus < greatest(r.min_gpus, r.reserve_gpus)
                OR (a.reserve_cpu_millis, a.reserve_memory_mb, a.reserve_gpus)
                   IS DISTINCT FROM (r.reserve_cpu_millis, r.reserve_memory_mb, r.reserve_gpus) $q$)
      ) AS checks(name, query)
    UNION ALL
    -- the limits (issue 14, docs/design/limits.md), against the limits as they are now
    -- (see above); each needs its table, which 0.1.0 does not have: there, no rows
    SELECT l.name, CASE WHEN to_regclass(l.needs) IS NULL THEN 'SELECT NULL::text WHERE false' ELSE l.query END
      FROM (VALUES
        -- an attempt carries its request's keys (the limits and the spread term count
        -- attempts by them)
        ('attempt_keys_match_request', $q$
            SELECT format('attempt %s: keys %s/%s, its request %s has %s/%s', a.attempt_id,
                          a.concurrency_key, a.spread_key, r.request_id, r.concurrency_key, r.spread_key)
              FROM sched.attempt a JOIN sched.request r ON r.request_id = a.request_id
             WHERE (a.concurrency_key, a.spread_key) IS DISTINCT FROM (r.concurrency_key, r.spread_key) $q$,
         'sched.concurrency_limit'),
        -- a gang is placed whole or not at all, in one transaction (its members' attempts
        -- share one dispatched_at), and marked placed exactly then; on distinct nodes
        -- when asked (issue 15)
        ('gang_placed_whole', $q$
            SELECT format('gang %s of %s: %s members dispatched, %s attempts at %s times on %s nodes, placed_at %s',
                          g.gang_id, g.gang_size, count(*) FILTER (WHERE r.state = 'DISPATCHED'),
                          count(a.attempt_id), count(DISTINCT a.dispatched_at), count(DISTINCT a.node_id), g.placed_at)
              FROM sched.gang g
              LEFT JOIN sched.request r ON r.gang_id = g.gang_id
              LEFT JOIN sched.attempt a ON a.attempt_id = r.attempt_id
             GROUP BY g.gang_id, g.gang_size, g.placed_at, g.distinct_nodes
            HAVING count(*) FILTER (WHERE r.state = 'DISPATCHED') NOT IN (0, g.gang_size)
                OR (count(*) FILTER (WHERE r.state = 'DISPATCHED') = g.gang_size) <> (g.placed_at IS NOT NULL)
                OR count(a.attempt_id) NOT IN (0, g.gang_size)
                OR count(DISTINCT a.dispatched_at) > 1
                OR (g.distinct_nodes AND count(DISTINCT a.node_id) <> count(a.attempt_id)) $q$,
         'sched.gang'),
        -- preemption (issue 15): a PREEMPTED attempt was of a preemptible request, ended by
        -- a preemptor of higher priority whose milestone names it, and its step was
        -- requeued with one more attempt allowed (or its execution is closed); a hold is
        -- only on a request that has not been dispatched
        ('preemption_consistent', $q$
            SELECT format('attempt %s (request %s, priority %s, preemptible %s): preemptor %s of priority %s, retry %s',
                          a.attempt_id, r.request_id, r.priority, r.preemptible, p.request_id, p.priority, n.request_id)
              FROM sched.attempt a
              JOIN sched.request r ON r.request_id = a.request_id
              LEFT JOIN sched.request p ON p.request_id = (a.detail ->> 'preempted_by_request_id')::bigint
              LEFT JOIN sched.request n ON n.step_id = r.step_id AND n.attempt_number = r.attempt_number + 1
              LEFT JOIN sched.execution e ON e.execution_id = r.execution_id
             WHERE a.status = 'PREEMPTED'
               AND (NOT r.preemptible OR p.request_id IS NULL OR p.priority <= r.priority
                    OR NOT EXISTS (SELECT 1 FROM sched.timeline t
                                    WHERE t.milestone_key LIKE 'step.preempting:' || p.step_id || ':%'
                                      AND t.detail -> 'victim_attempt_ids' ? a.attempt_id::text)
                    OR (n.request_id IS NULL AND e.status NOT IN ('FAILED', 'CANCELLED', 'SUCCEEDED'))
                    OR n.max_attempts <> r.max_attempts + 1)
            UNION ALL
            SELECT format('request %s is %s and holds room on %s', r.request_id, r.state, r.held_node_id)
              FROM sched.request r
             WHERE r.held_node_id IS NOT NULL AND r.state = 'DISPATCHED'
            UNION ALL
            -- one end per attempt: never both preempted and succeeded (or any two ends)
            SELECT format('attempt %s ended twice: %s', t.attempt_id,
                          string_agg(split_part(t.milestone_key, ':', 1), ', ' ORDER BY t.timeline_id))
              FROM sched.timeline t
             WHERE t.milestone_key ~ '^step\.attempt\.(succeeded|failed|cancelled|lost|preempted):'
             GROUP BY t.attempt_id HAVING count(*) > 1 $q$,
         'sched.gang'),
        -- the sums of sched.tenant_live (0.2.0) = what the live attempts reserve (the
        -- tenant quota reads these sums)
        ('tenant_live_sums_match_attempts', $q$
            SELECT format('tenant %s: counters say %s, attempts reserve %s', coalesce(c.tenant, a.tenant),
                          row(c.cpu, c.mem, c.gpus), row(a.cpu, a.mem, a.gpus))
              FROM (SELECT tenant, sum(cpu_millis) AS cpu, sum(memory_mb) AS mem, sum(gpus) AS gpus
                      FROM sched.tenant_live GROUP BY tenant) c
              FULL JOIN (SELECT tenant, sum(reserve_cpu_millis) AS cpu, sum(reserve_memory_mb) AS mem,
                                sum(reserve_gpus) AS gpus
                           FROM sched.attempt WHERE status IN ('DISPATCHED', 'RUNNING') GROUP BY tenant) a
                ON a.tenant = c.tenant
             WHERE (coalesce(c.cpu, 0), coalesce(c.mem, 0), coalesce(c.gpus, 0))
                   IS DISTINCT FROM (coalesce(a.cpu, 0), coalesce(a.mem, 0), coalesce(a.gpus, 0)) $q$,
         'sched.tenant_quota'),
        -- live attempts (DISPATCHED, RUNNING) of a key <= its concurrency limit
        ('key_live_within_concurrency_limit', $q$
            SELECT format('key %s: %s live attempts, concurrency limit %s', l.concurrency_key, count(*), l.max_live)
              FROM sched.attempt a JOIN sched.concurrency_limit l ON l.concurrency_key = a.concurrency_key
             WHERE a.status IN ('DISPATCHED', 'RUNNING')
             GROUP BY l.concurrency_key, l.max_live HAVING count(*) > l.max_live $q$, 'sched.concurrency_limit'),
        -- what a tenant's live attempts hold <= its quota, on each dimension it limits
        ('tenant_live_within_quota', $q$
            SELECT format('tenant %s: live attempts hold %s live/%s mcpu/%s MB/%s GPUs, quota %s/%s/%s/%s',
                          q.tenant, count(*), sum(a.reserve_cpu_millis), sum(a.reserve_memory_mb),
                          sum(a.reserve_gpus), coalesce(q.max_live::text, '-'),
                          coalesce(q.max_cpu_millis::text, '-'), coalesce(q.max_memory_mb::text, '-'),
                          coalesce(q.max_gpus::text, '-'))
              FROM sched.attempt a JOIN sched.tenant_quota q ON q.tenant = a.tenant
             WHERE a.status IN ('DISPATCHED', 'RUNNING')
             GROUP BY q.tenant, q.max_live, q.max_cpu_millis, q.max_memory_mb, q.max_gpus
            HAVING count(*) > q.max_live OR sum(a.reserve_cpu_millis) > q.max_cpu_millis
                OR sum(a.reserve_memory_mb) > q.max_memory_mb OR sum(a.reserve_gpus) > q.max_gpus $q$,
         'sched.tenant_quota'),
        -- any window of length per holds <= dispatches dispatches of a rate-limited key
        -- (the fullest window [t, t + per) starts at a dispatch: one line per such t)
        ('key_dispatches_within_rate_limit', $q$
            SELECT format('key %s: %s dispatches in [%s, %s + %s), rate limit %s per %s', l.concurrency_key,
                          w.n, a.dispatched_at, a.dispatched_at, l.per, l.dispatches, l.per)
              FROM sched.rate_limit l
              JOIN sched.attempt a ON a.concurrency_key = l.concurrency_key
             CROSS JOIN LATERAL (
                  SELECT count(*) AS n FROM sched.attempt b
                   WHERE b.concurrency_key = l.concurrency_key
                     AND b.dispatched_at >= a.dispatched_at AND b.dispatched_at < a.dispatched_at + l.per) w
             WHERE w.n > l.dispatches $q$, 'sched.rate_limit')
      ) AS l(name, query, needs)
    LOOP
        -- required labels as placement reads them: expressions (0.2.0, issue 15) by the
        -- reference sched.labels_match, written apart from the C core; 0.1.0 has only
        -- plain labels, which are containment
        -- the holds of preemption (0.2.0, issue 15) count in the worker and node counters
        EXECUTE format('SELECT count(*), (array_agg(v.line))[1:3] FROM (%s) AS v(line)',
                       replace(replace(regexp_replace(c.query, ':labels_match\(([^,]+), ([^)]+)\)',
                                      CASE WHEN to_regprocedure('sched.labels_match(jsonb,jsonb)') IS NULL
                                           THEN '\1 @> \2' ELSE 'sched.labels_match(\1, \2)' END, 'g'),
                               ':worker_holds',
                               CASE WHEN v0_2 THEN '(SELECT count(*) FROM sched.request x WHERE x.held_until IS NOT NULL AND x.held_worker_id = w.worker_id)'
                                    ELSE '0' END),
                               ':node_holds',
                               CASE WHEN v0_2 THEN '(SELECT coalesce(sum(x.reserve_cpu_millis), 0) AS cpu, coalesce(sum(x.reserve_memory_mb), 0) AS mem, '
                                                   'coalesce(sum(x.reserve_gpus), 0) AS gpus, count(*) AS live FROM sched.request x WHERE x.held_until IS NOT NULL AND x.held_node_id = n.node_id)'
                                    ELSE '(SELECT 0 AS cpu, 0 AS mem, 0 AS gpus, 0 AS live)' END))
           INTO n, sample;
        RAISE NOTICE 'invariant %: %', rpad(c.name, 40), CASE WHEN n = 0 THEN 'ok' ELSE n || ' violation(s)' END;
        IF n > 0 THEN
            failed := failed || c.name::text;
            RAISE WARNING 'invariant % violated, e.g.: %', c.name, array_to_string(sample, ' | ');
        END IF;
    END LOOP;
    IF cardinality(failed) > 0 THEN
        RAISE EXCEPTION 'invariants violated: %', array_to_string(failed, ', ');
    END IF;
END
$invariants$;
