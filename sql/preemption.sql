--
-- preemption: submit(..., preemptible) and sched.preemption (issue 15, preemption.c).
-- Off by default.  On, a request that waits for capacity ends preemptible attempts of
-- lower priority (fewest victims, then the lowest priorities, the youngest first among
-- equals): they end PREEMPTED with a CANCEL to their worker and are requeued at once
-- without using up an attempt; the room is held for the preemptor (counted in the
-- counters, request.held_*), which its next dispatch takes; no other request takes it.
-- A hold that is not used is released by reap_expired after sched.preemption_hold.
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

-- n1 and n2, one worker of 2 slots each, 4 CPUs
SELECT count(*) FROM (SELECT sched.upsert_node('n' || i, cpu_millis => 4000, memory_mb => 4096)
                        FROM generate_series(1, 2) i) x;
SELECT count(*) FROM (SELECT sched.register_worker('n' || i, 'cap', ARRAY['1'], 2,
                                                   ('aaaaaaaa-0000-4000-8000-00000000000' || i)::uuid,
                                                   '2024-05-01 10:00:00+00')
                        FROM generate_series(1, 2) i) x;

CREATE FUNCTION pg_temp.req(n int, prio int, preemptible boolean, pin text DEFAULT NULL,
                            cpu int DEFAULT 1000) RETURNS bigint LANGUAGE sql AS $$
SELECT sched.submit(('bbbbbbbb-0000-4000-8000-' || lpad(n::text, 12, '0'))::uuid,
                    ('cccccccc-0000-4000-8000-' || lpad(n::text, 12, '0'))::uuid,
                    'cap', '1', priority => prio, preemptible => preemptible, node_id => pin,
                    reserve_cpu_millis => cpu, available_at => '2024-05-01 10:00:00+00')
$$;
CREATE FUNCTION pg_temp.dispatch(r bigint, at text) RETURNS TABLE (outcome text, node_id text, detail text)
LANGUAGE sql AS $$
SELECT d.outcome, d.node_id, d.detail FROM sched.dispatch_attempt(r, NULL, at::timestamptz) d
$$;
CREATE FUNCTION pg_temp.fleet() RETURNS text LANGUAGE sql AS $$
SELECT string_agg(format('%s:%s live/%s cpu', n.node_id, n.live_attempts, n.reserved_cpu_millis), ' ' ORDER BY n.node_id)
  FROM sched.node n
$$;

-- n1: two preemptible attempts of priority 0 (r1 older, r2 younger); n2: one preemptible
-- of priority 1 (r3) and one that is not preemptible (r4)
SELECT pg_temp.req(1, 0, true, 'n1') AS r1, pg_temp.req(2, 0, true, 'n1') AS r2,
       pg_temp.req(3, 1, true, 'n2') AS r3, pg_temp.req(4, 0, false, 'n2') AS r4 \gset
SELECT outcome, node_id FROM pg_temp.dispatch(:r1, '2024-05-01 10:00:01+00');
SELECT outcome, node_id FROM pg_temp.dispatch(:r2, '2024-05-01 10:00:02+00');
SELECT outcome, node_id FROM pg_temp.dispatch(:r3, '2024-05-01 10:00:03+00');
SELECT outcome, node_id FROM pg_temp.dispatch(:r4, '2024-05-01 10:00:04+00');
SELECT pg_temp.fleet() AS fleet;

-- p (priority 5) waits for capacity; with sched.preemption off (the default) nothing happens
SELECT current_setting('sched.preemption') AS preemption, current_setting('sched.preemption_hold') AS hold;
SELECT pg_temp.req(5, 5, false) AS p \gset
SELECT * FROM pg_temp.dispatch(:p, '2024-05-01 10:00:05+00');
SELECT count(*) FILTER (WHERE status = 'PREEMPTED') AS preempted FROM sched.attempt;

-- on: one victim on either node; n1's is of priority 0, n2's of 1: n1, and of r1 and r2
-- the younger, r2
SET sched.preemption = on;
SELECT * FROM pg_temp.dispatch(:p, '2024-05-01 10:00:06+00');
SELECT r.request_id, a.status, a.node_id, a.finished_at, a.detail
  FROM sched.attempt a JOIN sched.request r ON r.request_id = a.request_id ORDER BY r.request_id;
-- the victim's worker gets a CANCEL; its step is requeued at once, with one more attempt
SELECT kind, attempt_id = (SELECT attempt_id FROM sched.attempt WHERE request_id = :r2) AS of_r2, worker_id
  FROM sched.command WHERE kind = 'CANCEL';
SELECT request_id, attempt_number, max_attempts, state, available_at, avoid_node_id, preemptible
  FROM sched.request WHERE step_id = 'cccccccc-0000-4000-8000-000000000002' ORDER BY attempt_number;
-- the room is held for p: counted on n1, recorded on p
SELECT state, held_node_id, held_worker_id, held_until, last_reason FROM sched.request WHERE request_id = :p;
SELECT pg_temp.fleet() AS fleet;
-- the timeline: who preempted whom
SELECT milestone_key ~ '^step\.(attempt\.preempted|cancel\.sent|preempting):' AS preemption_milestone,
       regexp_replace(milestone_key, ':.*', '') AS kind, state, component, title,
       detail - 'victim_attempt_ids' - 'worker_id' - 'node_id' AS detail
  FROM sched.timeline WHERE milestone_key ~ 'preempt|cancel' ORDER BY timeline_id;
-- the diagnostics
SELECT blocked, explanation FROM sched.pending('2024-05-01 10:00:07+00') WHERE request_id = :p;
SELECT line FROM regexp_split_to_table(sched.explain(:p, '2024-05-01 10:00:07+00'), E'\n') line
 WHERE line ~ '(preempt|last dispatch)';
SELECT outcome, reason FROM sched.dispatch_stats WHERE reason = 'preempting';

-- the victim's worker receives the CANCEL (its attempt ended before it stopped it)
SELECT kind, attempt_id = (SELECT attempt_id FROM sched.attempt WHERE request_id = :r2) AS of_r2
  FROM sched.poll_commands('aaaaaaaa-0000-4000-8000-000000000001',
                           (SELECT generation FROM sched.worker WHERE worker_id = 'aaaaaaaa-0000-4000-8000-000000000001'),
                           10, '2024-05-01 10:00:07+00')
 WHERE kind = 'CANCEL';
-- the victim's worker reports after the fact: its attempt is no longer live (55000)
SELECT regexp_replace(pg_temp.err(format($$SELECT sched.finish_attempt(%L, 1, 'SUCCEEDED', NULL, '2024-05-01 10:00:07+00')$$,
                                         (SELECT attempt_id FROM sched.attempt WHERE request_id = :r2))),
                      '[0-9a-f-]{36}', '<attempt of r2>') AS victim_finish;

-- another request that could use the room (priority 0: it cannot preempt) does not get it
SELECT pg_temp.req(6, 0, false) AS q \gset
SELECT * FROM pg_temp.dispatch(:q, '2024-05-01 10:00:08+00');
-- p's next dispatch takes the room: on n1, the hold released
SELECT outcome, node_id FROM pg_temp.dispatch(:p, '2024-05-01 10:00:09+00');
SELECT state, held_node_id, held_until FROM sched.request WHERE request_id = :p;
SELECT pg_temp.fleet() AS fleet;

-- nothing to preempt: victims must be preemptible and of lower priority, not gang
-- members; a request that fits nowhere (a static reason) preempts nothing
SELECT pg_temp.req(7, 1, false, 'n2') AS s \gset
SELECT outcome, detail FROM pg_temp.dispatch(:s, '2024-05-01 10:00:10+00');
SELECT pg_temp.req(8, 9, false, NULL, 9000) AS big \gset
SELECT outcome, detail FROM pg_temp.dispatch(:big, '2024-05-01 10:00:11+00');
SELECT count(*) FILTER (WHERE status = 'PREEMPTED') AS preempted FROM sched.attempt;

-- a hold nobody takes: released by reap_expired once sched.preemption_hold (30 s) passed
SELECT pg_temp.req(9, 5, false, 'n2') AS h \gset
SELECT outcome, left(detail, 60) AS detail FROM pg_temp.dispatch(:h, '2024-05-01 10:00:12+00');
SELECT held_node_id, held_until FROM sched.request WHERE request_id = :h;
SELECT pg_temp.fleet() AS fleet;
SELECT sched.reap_expired('2024-05-01 10:00:30+00') AS reaped_early;
SELECT held_node_id IS NOT NULL AS still_held FROM sched.request WHERE request_id = :h;
SELECT sched.reap_expired('2024-05-01 10:00:43+00') >= 0 AS reaped;
SELECT held_node_id IS NOT NULL AS still_held FROM sched.request WHERE request_id = :h;
SELECT pg_temp.fleet() AS fleet;

-- a hold is taken by dispatch_next too, also once preemption is off again (its own hold
-- makes its node look full: the scan must try it anyway)
SET sched.preemption = on;
SELECT pg_temp.req(10, 9, false, 'n1') AS x \gset
SELECT outcome, left(detail, 60) AS detail FROM pg_temp.dispatch(:x, '2024-05-01 10:00:44+00');
SET sched.preemption = off;
SELECT outcome, node_id FROM sched.dispatch_next(10, at => '2024-05-01 10:00:45+00') WHERE request_id = :x;
SELECT state, held_node_id FROM sched.request WHERE request_id = :x;

-- bad input
SELECT pg_temp.err($$SELECT sched.submit(gen_random_uuid(), gen_random_uuid(), 'cap', '1', preemptible => NULL)$$) AS preemptible_null;
SELECT pg_temp.err($$SET sched.preemption_hold = 0$$) AS hold_zero;
RESET sched.preemption;
