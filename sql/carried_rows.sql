--
-- carried_rows: a placement judges only the rows its shape's admission memo carries from
-- its last walk over the fleet (the best ones, and the rows re-read since that rank among
-- them), and walks every row only when none of them ranks first for certain
-- (src/admit_memo.c, place_request in src/reservation.c).  It must choose what a walk
-- over every row would.
--
-- 400 steps, each its own transaction (a procedure that commits), on 300 nodes of varied
-- weight and a clock that moves 1 s a step (sched.heartbeat_ttl 40 s), each step:
--   - a few workers' heartbeats (so some expire and come back), sometimes a node's weight
--     changed (up past the carried rows, or down), an attempt ended (its node's score
--     rises), a node drained or back in service, a node and its worker added, a node
--     deleted (its row moves in the mirror), and now and then the clock set back 30 s;
--   - then the next request, of one of two shapes, is dispatched: the node
--     dispatch_attempt chose must be the one select_candidate (a walk over every row,
--     without memos) chose just before, at the same clock;
--   - after each, sched._fleet_mirror_check: the mirror equals the tables and every
--     memo's carried rows keep their invariant (no row left out ranks before the bound).
-- Then three sequences that need a walk:
--   - 150 placements and nothing else (heartbeats aside): the carried nodes fill up or
--     rank below the bound, and a placement must rank every row;
--   - the best nodes' heartbeats expire, a placement carries the others, and the clock
--     goes back to when the best ones were alive: they must be chosen again;
--   - 60 placements by another transaction before each placement: the carried rows
--     are used up at every call, and the memo carries more of them.
-- And batches: dispatch_next(12), 30 times, between changes of weights and ends, makes
-- the same placements as the same call with sched.fleet_mirror_carry off (rolled back
-- first): a batch's own copy of the memos carries the rows too, and each placement
-- lowers the score of the row it took.
-- The mirror's counters show both paths taken: placements from the carried rows, and
-- walks.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pg_sched CASCADE;
CREATE EXTENSION pg_sched;
RESET client_min_messages;
SET TIME ZONE 'UTC';
SET sched.heartbeat_ttl = 40;
SET sched.preemption = off;
SELECT setseed(0.18);

SELECT count(*) AS nodes FROM (
    SELECT sched.upsert_node(format('c%s', lpad(i::text, 4, '0')),
                             labels => jsonb_build_object('tier', CASE WHEN i % 7 = 0 THEN 'fast' ELSE 'slow' END),
                             cpu_millis => 8000, memory_mb => 16384,
                             weight => 1 + (random() * 99)::int),
           sched.register_worker(format('c%s', lpad(i::text, 4, '0')), 'c', ARRAY['1'], 3,
                                 at => '2026-01-01 00:00:00+00')
      FROM generate_series(1, 300) i) s;

-- n requests of capability c, ready, every fast_every-th preferring tier fast (another
-- shape)
CREATE FUNCTION pg_temp.submit_requests(n int, fast_every int) RETURNS bigint
LANGUAGE sql AS $$
    SELECT count(sched.submit(gen_random_uuid(), gen_random_uuid(), 'c', '1',
                              preferred_labels => CASE WHEN i % fast_every = 0
                                                       THEN '{"tier": "fast"}'::jsonb
                                                       ELSE '{}'::jsonb END,
                              reserve_cpu_millis => 500,
                              available_at => '2025-12-31 23:00:00+00'))
      FROM generate_series(1, n) i
$$;
SELECT pg_temp.submit_requests(600, 2) AS submitted;

CREATE TABLE step_log (step int, action text, expected text, chosen text, outcome text,
                       memos_wrong int);

-- the next pending request placed at `at`: what select_candidate chose, then what
-- dispatch_attempt did (one transaction: the caller's)
CREATE FUNCTION pg_temp.place(at timestamptz, OUT expected text, OUT chosen text,
                              OUT outcome text)
LANGUAGE plpgsql AS $$
DECLARE
    req sched.request;
    res sched.dispatch_result;
BEGIN
    SELECT * INTO req FROM sched.request
     WHERE state = 'PENDING' ORDER BY request_id LIMIT 1;
    SELECT c.node_id INTO expected
      FROM sched.select_candidate('c', '1', preferred_labels => req.preferred_labels,
                                  reserve_cpu_millis => 500, at => at) c;
    res := sched.dispatch_attempt(req.request_id, at => at);
    chosen := res.node_id;
    outcome := res.outcome;
END $$;

CREATE PROCEDURE pg_temp.run_steps(steps int)
LANGUAGE plpgsql AS $$
DECLARE
    at timestamptz := '2026-01-01 00:00:20+00';
    s int;
    r record;
    act text;
    added int := 0;
    wrong int;
BEGIN
    FOR s IN 1 .. steps LOOP
        at := at + interval '1 second';
        act := '';
        -- heartbeats of a few workers
        PERFORM sched.heartbeat(w.worker_id, w.generation, at)
           FROM sched.worker w WHERE random() < 0.08;
        IF random() < 0.25 THEN             -- a node's weight, up or down
            PERFORM sched.upsert_node(n.node_id, weight => 1 + (random() * 199)::int)
               FROM (SELECT node_id FROM sched.node ORDER BY random() LIMIT 1) n;
            act := act || 'weight ';
        END IF;
        IF random() < 0.3 THEN              -- an attempt ends: its node ranks higher
            SELECT a.attempt_id, a.lease_version INTO r
              FROM sched.attempt a WHERE a.finished_at IS NULL ORDER BY random() LIMIT 1;
            IF FOUND THEN
                PERFORM sched.start_attempt(r.attempt_id, r.lease_version, at);
                PERFORM sched.finish_attempt(r.attempt_id, r.lease_version, 'SUCCEEDED', at => at);
                act := act || 'finish ';
            END IF;
        END IF;
        IF random() < 0.05 THEN             -- drained, or back in service
            SELECT node_id, management_status INTO r
              FROM sched.node ORDER BY random() LIMIT 1;
            IF r.management_status = 'ACTIVE' THEN
                PERFORM sched.drain_node(r.node_id);
            ELSE
                PERFORM sched.upsert_node(r.node_id, management_status => 'ACTIVE');
            END IF;
            act := act || 'drain ';
        END IF;
        IF random() < 0.03 THEN             -- a node added
            added := added + 1;
            PERFORM sched.upsert_node(format('d%s', lpad(added::text, 4, '0')),
                                      labels => '{"tier": "fast"}', cpu_millis => 8000,
                                      memory_mb => 16384, weight => 1 + (random() * 199)::int);
            PERFORM sched.register_worker(format('d%s', lpad(added::text, 4, '0')), 'c',
                                          ARRAY['1'], 3, at => at);
            act := act || 'add ';
        END IF;
        IF random() < 0.03 THEN             -- a node without attempts deleted
            WITH gone AS (
                SELECT n.node_id FROM sched.node n
                 WHERE NOT EXISTS (SELECT FROM sched.attempt a WHERE a.node_id = n.node_id)
                 ORDER BY random() LIMIT 1),
            w AS (DELETE FROM sched.worker WHERE node_id IN (SELECT node_id FROM gone))
            DELETE FROM sched.node WHERE node_id IN (SELECT node_id FROM gone);
            act := act || 'delete ';
        END IF;
        IF random() < 0.04 THEN             -- the clock set back
            at := at - interval '30 seconds';
            act := act || 'clock-back ';
        END IF;
        COMMIT;

        SELECT * INTO r FROM pg_temp.place(at);
        wrong := sched._fleet_mirror_check('c');
        INSERT INTO step_log VALUES (s, act, r.expected, r.chosen, r.outcome, wrong);
        COMMIT;
    END LOOP;
END $$;

-- placements only, the clock 0.2 s a step from `at` (no heartbeat expires); with
-- `others`, each after that many placements by another transaction of this session
-- (dispatch_next with the mirror off: as another session's, what this session's mirror
-- catches up with at its next read)
CREATE PROCEDURE pg_temp.placements_only(first int, steps int, at timestamptz,
                                         others int DEFAULT 0)
LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    FOR s IN first .. first + steps - 1 LOOP
        at := at + interval '0.2 second';
        IF others > 0 THEN
            PERFORM set_config('sched.fleet_mirror', 'off', true);
            PERFORM count(*) FROM sched.dispatch_next(others, at => at);
            COMMIT;
        END IF;
        SELECT * INTO r FROM pg_temp.place(at);
        INSERT INTO step_log VALUES (s, CASE WHEN others > 0 THEN 'others' ELSE 'placement' END,
                                     r.expected, r.chosen, r.outcome,
                                     CASE WHEN s % 25 = 0 OR others > 0 AND s % 5 = 0
                                          THEN sched._fleet_mirror_check('c') END);
        COMMIT;
    END LOOP;
END $$;

-- the setting takes a boolean, named in the error (22023)
\set VERBOSITY sqlstate
SET sched.fleet_mirror_carry = 'maybe';
\set VERBOSITY terse
SET sched.fleet_mirror_carry = 'maybe';
\set VERBOSITY default
SHOW sched.fleet_mirror_carry;

SELECT admissions_walked AS walked0, admissions_carried AS carried0
  FROM sched._fleet_mirror_stats() \gset
CALL pg_temp.run_steps(400);
SELECT admissions_walked AS walked1 FROM sched._fleet_mirror_stats() \gset
SELECT count(*) > 0 AS heartbeats FROM (
    SELECT sched.heartbeat(w.worker_id, w.generation, '2026-01-01 01:00:00+00')
      FROM sched.worker w) h;
CALL pg_temp.placements_only(1001, 150, '2026-01-01 01:00:00+00');
SELECT admissions_walked - :walked1 > 0 AS placements_only_walked
  FROM sched._fleet_mirror_stats();

-- every heartbeat at 02:00, then only the nodes of weight below 50 at 02:00:55: at 02:01
-- (cutoff 02:00:20) the others have expired; at 02:00:30 (cutoff 01:59:50) none has
SELECT count(*) > 0 AS heartbeats FROM (
    SELECT sched.heartbeat(w.worker_id, w.generation, '2026-01-01 02:00:00+00')
      FROM sched.worker w) h;
SELECT count(*) > 0 AS some_kept_alive FROM (
    SELECT sched.heartbeat(w.worker_id, w.generation, '2026-01-01 02:00:55+00')
      FROM sched.worker w JOIN sched.node n USING (node_id) WHERE n.weight < 50) h;
INSERT INTO step_log
SELECT 2001, 'expired', * FROM pg_temp.place('2026-01-01 02:01:00+00');
INSERT INTO step_log
SELECT 2002, 'expired', * FROM pg_temp.place('2026-01-01 02:01:00+00');
INSERT INTO step_log
SELECT 2003, 'clock-back', * FROM pg_temp.place('2026-01-01 02:00:30+00');
SELECT step, action, n.weight >= 50 AS chose_a_heavy_node
  FROM step_log JOIN sched.node n ON n.node_id = step_log.chosen
 WHERE step > 2000 ORDER BY step;

-- a batch, then the same batch without carried rows (rolled back): the placements that
-- differ, and how many were made
CREATE FUNCTION pg_temp.batch_differs(n int, at timestamptz, OUT differ int, OUT placed int,
                                      OUT walks_off bigint)
LANGUAGE plpgsql AS $$
DECLARE
    walked jsonb;
    carried jsonb;
BEGIN
    BEGIN
        PERFORM set_config('sched.fleet_mirror_carry', 'off', true);
        walks_off := - (SELECT admissions_walked FROM sched._fleet_mirror_stats());
        SELECT jsonb_object_agg(d.request_id::text, d.node_id) INTO walked
          FROM sched.dispatch_next(n, at => at) d WHERE d.outcome = 'DISPATCHED';
        walks_off := walks_off + (SELECT admissions_walked FROM sched._fleet_mirror_stats());
        RAISE EXCEPTION USING ERRCODE = 'P0001', MESSAGE = 'undo';
    EXCEPTION WHEN raise_exception THEN
        NULL;
    END;
    PERFORM set_config('sched.fleet_mirror_carry', 'on', true);
    SELECT jsonb_object_agg(d.request_id::text, d.node_id) INTO carried
      FROM sched.dispatch_next(n, at => at) d WHERE d.outcome = 'DISPATCHED';
    SELECT count(*) INTO differ FROM (
        SELECT key, value FROM jsonb_each_text(walked)
        EXCEPT SELECT key, value FROM jsonb_each_text(carried)
        UNION ALL
        (SELECT key, value FROM jsonb_each_text(carried)
         EXCEPT SELECT key, value FROM jsonb_each_text(walked))) d;
    SELECT count(*) INTO placed FROM jsonb_object_keys(carried);
END $$;

CREATE PROCEDURE pg_temp.batches(rounds int, at timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    FOR s IN 1 .. rounds LOOP
        at := at + interval '0.5 second';
        PERFORM sched.upsert_node(n.node_id, weight => 1 + (random() * 199)::int)
           FROM (SELECT node_id FROM sched.node ORDER BY random() LIMIT 3) n;
        FOR r IN SELECT a.attempt_id, a.lease_version FROM sched.attempt a
                  WHERE a.finished_at IS NULL ORDER BY random() LIMIT 4 LOOP
            PERFORM sched.start_attempt(r.attempt_id, r.lease_version, at);
            PERFORM sched.finish_attempt(r.attempt_id, r.lease_version, 'SUCCEEDED', at => at);
        END LOOP;
        COMMIT;
        SELECT * INTO r FROM pg_temp.batch_differs(12, at);
        INSERT INTO batch_log VALUES (s, r.differ, r.placed, r.walks_off);
        COMMIT;
    END LOOP;
END $$;

CREATE TABLE batch_log (round int, differ int, placed int, walks_off bigint);
SELECT count(*) > 0 AS heartbeats FROM (
    SELECT sched.heartbeat(w.worker_id, w.generation, '2026-01-01 03:00:00+00')
      FROM sched.worker w) h;
SELECT pg_temp.submit_requests(400, 3) AS submitted;
CALL pg_temp.batches(30, '2026-01-01 03:00:00+00');
SELECT count(*) AS rounds, sum(placed) AS placed, sum(differ) AS placements_differ
  FROM batch_log;
-- (off, the first placement of each call walked the mirror's fleet: the GUC works)
SELECT bool_and(walks_off >= 1) AS without_carried_rows_walked FROM batch_log;

-- Other sessions' placements between this session's calls (here: transactions of its
-- own with the mirror off, 60 placements each): they take the carried rows and lower
-- their scores, so that 64 carried rows last a call or two and nearly every placement
-- would walk; a memo whose carried rows did not last SCHED_ADMIT_WALK_SOON calls
-- carries twice as many from its next walk (up to 256).  Each placement still chooses
-- what a walk chooses (the summary below), and the memos keep their invariant.
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT a.attempt_id, a.lease_version FROM sched.attempt a
              WHERE a.finished_at IS NULL LOOP
        PERFORM sched.start_attempt(r.attempt_id, r.lease_version, '2026-01-01 04:00:00+00');
        PERFORM sched.finish_attempt(r.attempt_id, r.lease_version, 'SUCCEEDED',
                                     at => '2026-01-01 04:00:00+00');
    END LOOP;
END $$;
SELECT count(*) > 0 AS heartbeats FROM (
    SELECT sched.heartbeat(w.worker_id, w.generation, '2026-01-01 04:00:00+00')
      FROM sched.worker w) h;
SELECT pg_temp.submit_requests(700, 2) AS submitted;
SELECT admissions_walked AS walked2, admissions_carried AS carried2
  FROM sched._fleet_mirror_stats() \gset
CALL pg_temp.placements_only(3001, 10, '2026-01-01 04:00:00+00', others => 60);
-- (10 placements: with 64 rows carried at every walk, 7 of them walk)
SELECT admissions_walked - :walked2 <= 5 AS carry_widened,
       admissions_carried - :carried2 > 0 AS some_carried
  FROM sched._fleet_mirror_stats();
SELECT count(*) AS placements, count(*) FILTER (WHERE outcome = 'DISPATCHED') AS dispatched
  FROM step_log WHERE step > 3000;

-- every placement chose what a walk over every row chose
SELECT count(*) AS steps,
       count(*) FILTER (WHERE outcome = 'DISPATCHED') AS dispatched,
       count(*) FILTER (WHERE expected IS DISTINCT FROM chosen) AS chose_otherwise,
       count(*) FILTER (WHERE memos_wrong IS NOT NULL) AS memo_checks,
       coalesce(sum(memos_wrong), 0) AS memo_rows_wrong
  FROM step_log;
SELECT step, action, expected, chosen, outcome FROM step_log
 WHERE expected IS DISTINCT FROM chosen ORDER BY step LIMIT 10;
-- the changes happened (each kind at least once)
SELECT a AS action, count(*) > 0 AS happened
  FROM step_log, unnest(string_to_array(trim(action), ' ')) a
 WHERE a <> '' GROUP BY a ORDER BY a;
-- both paths: most placements from the carried rows, some walks
SELECT admissions_carried - :carried0 > 300 AS mostly_carried,
       admissions_walked - :walked0 > 10 AS some_walks
  FROM sched._fleet_mirror_stats();
