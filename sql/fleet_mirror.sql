--
-- fleet_mirror: each backend's copy of the fleet (src/fleet_mirror.c) answers exactly as
-- the tables do after every kind of change to nodes and workers: updates of every column
-- placement reads, inserts, deletes, a worker moved to another capability or node, own
-- uncommitted changes, rolled back transactions and savepoints, TRUNCATE, node ids too
-- long for the change log, and the extension dropped and created again.
--
-- Two checks after each change:
--   sched._fleet_mirror_check(capability): the mirror brought up to a fresh snapshot
--     against the tables read with that same snapshot (number of nodes that differ);
--   same_ranking(...): rank_candidates with the mirror against rank_candidates with
--     sched.fleet_mirror = off (rows in either result and not the other).
-- The counters of sched._fleet_mirror_stats() show which path answered: a change to one
-- node re-reads that node, not the fleet.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pg_sched CASCADE;
CREATE EXTENSION pg_sched;
RESET client_min_messages;
SET TIME ZONE 'UTC';

CREATE FUNCTION pg_temp.ranking(cap text, off boolean)
RETURNS TABLE (rank int, node_id text, score bigint)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('sched.fleet_mirror', CASE WHEN off THEN 'off' ELSE 'on' END, true);
    RETURN QUERY SELECT r.rank, r.node_id, r.score
      FROM sched.rank_candidates(cap, '1', required_labels => '{"zone": "a"}',
                                 preferred_labels => '{"tier": "fast"}',
                                 reserve_cpu_millis => 500, reserve_memory_mb => 256,
                                 heartbeat_ttl => '1 hour', at => '2024-01-01 12:00:30+00') r;
    PERFORM set_config('sched.fleet_mirror', 'on', true);
END $$;

CREATE FUNCTION pg_temp.same(cap text DEFAULT 'm')
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    differ int := sched._fleet_mirror_check(cap);
    ranked int;
    missing int;
BEGIN
    TRUNCATE with_mirror, without_mirror;
    INSERT INTO with_mirror SELECT * FROM pg_temp.ranking(cap, false);
    INSERT INTO without_mirror SELECT * FROM pg_temp.ranking(cap, true);
    SELECT count(*) INTO ranked FROM with_mirror;
    SELECT count(*) INTO missing FROM (
        (TABLE with_mirror EXCEPT TABLE without_mirror)
        UNION ALL (TABLE without_mirror EXCEPT TABLE with_mirror)) d;
    RETURN format('%s nodes differ, %s ranked, %s rankings differ', differ, ranked, missing);
END $$;

-- runs q; returns 'no error' or 'SQLSTATE: message' (as bad_input.sql does)
CREATE FUNCTION pg_temp.err(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

CREATE TEMP TABLE with_mirror (rank int, node_id text, score bigint);
CREATE TEMP TABLE without_mirror (rank int, node_id text, score bigint);

-- What the mirror did since the last call of this function.
CREATE TEMP TABLE last_stats AS SELECT * FROM sched._fleet_mirror_stats();
CREATE FUNCTION pg_temp.did()
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    now_ record;
    was record;
    result text;
BEGIN
    SELECT * INTO now_ FROM sched._fleet_mirror_stats();
    SELECT * INTO was FROM last_stats;
    result := format('full loads +%s, rows re-read +%s, rows patched +%s, bypassed +%s, losses +%s',
                     now_.full_loads - was.full_loads, now_.rows_reread - was.rows_reread,
                     now_.rows_patched - was.rows_patched,
                     now_.bypassed - was.bypassed, now_.losses - was.losses);
    DELETE FROM last_stats;
    INSERT INTO last_stats SELECT * FROM sched._fleet_mirror_stats();
    RETURN result;
END $$;

-- In use: pg_sched is preloaded in the test clusters.
SELECT usable FROM sched._fleet_mirror_stats();

-- ---------------------------------------------------------------------------------
-- A fleet of 40 nodes in two zones, capability 'm' (and 'other' on every fifth node).
-- ---------------------------------------------------------------------------------
SELECT count(*) FROM (
  SELECT sched.upsert_node(format('n%s', lpad(i::text, 2, '0')),
             labels => jsonb_build_object('zone', CASE WHEN i % 2 = 0 THEN 'a' ELSE 'b' END,
                                          'tier', CASE WHEN i % 3 = 0 THEN 'fast' ELSE 'slow' END),
             cpu_millis => 4000 + i * 100, memory_mb => 8192, weight => 50 + i)
    FROM generate_series(1, 40) i) s;
SELECT count(*) FROM (
  SELECT sched.register_worker(node_id, 'm', ARRAY['1'], slots => 4, at => '2024-01-01 12:00:00+00')
    FROM sched.node) s;
SELECT count(*) FROM (
  SELECT sched.register_worker(node_id, 'other', ARRAY['1'], slots => 1, at => '2024-01-01 12:00:00+00')
    FROM sched.node WHERE right(node_id, 1) IN ('0', '5')) s;

-- first use in this backend: the capability is loaded whole
SELECT pg_temp.same();
SELECT pg_temp.same();
SELECT pg_temp.did() IS NOT NULL AS reset_counters;
-- nothing changed: nothing is read again
SELECT pg_temp.same();
SELECT pg_temp.did();

-- ---------------------------------------------------------------------------------
-- Updates of every column placement reads.  Each re-reads one node (its 'm' worker,
-- and its 'other' worker where it has one), never the fleet; an update of counters or
-- of a worker's heartbeat alone is patched in instead (below).
-- ---------------------------------------------------------------------------------
UPDATE sched.node SET weight = 500 WHERE node_id = 'n02';
SELECT pg_temp.same();
SELECT pg_temp.did();
UPDATE sched.node SET labels = '{"zone": "a", "tier": "fast"}' WHERE node_id = 'n04';
SELECT pg_temp.same();
UPDATE sched.node SET labels = '{"zone": "b"}' WHERE node_id = 'n06';
SELECT pg_temp.same();
UPDATE sched.node SET cpu_millis = 100 WHERE node_id = 'n08';
SELECT pg_temp.same();
UPDATE sched.node SET reserved_cpu_millis = 4000, reserved_memory_mb = 100, live_attempts = 3
 WHERE node_id = 'n10';
SELECT pg_temp.same();
SELECT sched.drain_node('n12') IS NOT NULL AS drained;
SELECT pg_temp.same();
UPDATE sched.worker SET runtime_state = 'STARTING' WHERE node_id = 'n14' AND capability = 'm';
SELECT pg_temp.same();
UPDATE sched.worker SET scheduling_status = 'CORDONED' WHERE node_id = 'n16' AND capability = 'm';
SELECT pg_temp.same();
UPDATE sched.worker SET last_heartbeat = '2024-01-01 10:00:00+00' WHERE node_id = 'n18' AND capability = 'm';
SELECT pg_temp.same();
UPDATE sched.worker SET capability_versions = ARRAY['2'] WHERE node_id = 'n20' AND capability = 'm';
SELECT pg_temp.same();
UPDATE sched.worker SET live_attempts = 4 WHERE node_id = 'n22' AND capability = 'm';
SELECT pg_temp.same();
SELECT pg_temp.did();

-- ---------------------------------------------------------------------------------
-- Inserts and deletes; a worker moved to another capability and to another node.
-- ---------------------------------------------------------------------------------
SELECT sched.upsert_node('n99', labels => '{"zone": "a", "tier": "fast"}', cpu_millis => 9000,
                         memory_mb => 9000, weight => 1000) IS NOT NULL AS added;
SELECT pg_temp.same();
SELECT (sched.register_worker('n99', 'm', ARRAY['1'], slots => 2, at => '2024-01-01 12:00:00+00')).generation;
SELECT pg_temp.same();
DELETE FROM sched.worker WHERE node_id = 'n24' AND capability = 'm';
SELECT pg_temp.same();
DELETE FROM sched.worker WHERE node_id = 'n25' AND capability = 'm';
UPDATE sched.worker SET capability = 'm' WHERE node_id = 'n25' AND capability = 'other';
SELECT pg_temp.same();
SELECT pg_temp.same('other');
UPDATE sched.worker SET capability = 'elsewhere' WHERE node_id = 'n26' AND capability = 'm';
SELECT pg_temp.same();
UPDATE sched.worker SET node_id = 'n24' WHERE node_id = 'n28' AND capability = 'm';
SELECT pg_temp.same();
DELETE FROM sched.worker WHERE node_id = 'n30';
DELETE FROM sched.node WHERE node_id = 'n30';
SELECT pg_temp.same();
SELECT pg_temp.same('other');
SELECT pg_temp.did();

-- ---------------------------------------------------------------------------------
-- Transactions: own uncommitted changes are seen, rolled back ones are undone.
-- ---------------------------------------------------------------------------------
BEGIN;
UPDATE sched.node SET weight = 2000 WHERE node_id = 'n32';
SELECT pg_temp.same();
SELECT node_id FROM sched.select_candidate('m', '1', required_labels => '{"zone": "a"}',
    heartbeat_ttl => '1 hour', at => '2024-01-01 12:00:30+00');
ROLLBACK;
SELECT pg_temp.same();
SELECT node_id FROM sched.select_candidate('m', '1', required_labels => '{"zone": "a"}',
    heartbeat_ttl => '1 hour', at => '2024-01-01 12:00:30+00');
BEGIN;
UPDATE sched.node SET weight = 3000 WHERE node_id = 'n34';
SAVEPOINT s;
UPDATE sched.node SET weight = 4000 WHERE node_id = 'n36';
DELETE FROM sched.worker WHERE node_id = 'n38' AND capability = 'm';
SELECT pg_temp.same();
ROLLBACK TO SAVEPOINT s;
SELECT pg_temp.same();
COMMIT;
SELECT pg_temp.same();
SELECT node_id, score FROM sched.select_candidate('m', '1', required_labels => '{"zone": "a"}',
    heartbeat_ttl => '1 hour', at => '2024-01-01 12:00:30+00');
-- a dispatch changes the counters of the node it reserves on
SELECT pg_temp.did() IS NOT NULL AS reset_counters;
SELECT sched.submit('22222222-0000-0000-0000-000000000001', '22222222-0000-0000-0000-0000000000a1',
    'm', '1', required_labels => '{"zone": "a"}', reserve_cpu_millis => 1500,
    available_at => '2024-01-01 12:00:30+00') IS NOT NULL AS submitted;
SELECT outcome, node_id FROM sched.dispatch_next(1, at => '2024-01-01 12:00:30+00');
SELECT pg_temp.same();

-- ---------------------------------------------------------------------------------
-- Updates of the counters alone (a reservation, the end of an attempt) are taken from
-- the row version they wrote, without a statement: rows patched, none re-read.  Own
-- changes are re-read while their transaction runs, and again when none committed.
-- ---------------------------------------------------------------------------------
-- the dispatch above: its node and its worker, patched once it committed
SELECT pg_temp.did();
-- a node's counters: its row in each capability ('m' and 'other')
UPDATE sched.node SET reserved_cpu_millis = 1000, reserved_memory_mb = 10, reserved_gpus = 0,
                      live_attempts = 1 WHERE node_id = 'n40';
SELECT pg_temp.same();
SELECT pg_temp.same('other');
SELECT pg_temp.did();
-- a worker's counter: its row in its capability only
UPDATE sched.worker SET live_attempts = 1 WHERE node_id = 'n40' AND capability = 'other';
SELECT pg_temp.same();
SELECT pg_temp.same('other');
SELECT pg_temp.did();
-- a worker's heartbeat, as often as reservations: patched in too (the row's clock
-- reasons are judged again at every use); a heartbeat taken away (NULL) as well
SELECT h.last_heartbeat
  FROM sched.worker w, sched.heartbeat(w.worker_id, w.generation, at => '2024-01-01 12:00:20+00') h
 WHERE w.node_id = 'n38' AND w.capability = 'm';
SELECT pg_temp.same();
SELECT pg_temp.did();
UPDATE sched.worker SET last_heartbeat = NULL WHERE node_id = 'n38' AND capability = 'm';
SELECT pg_temp.same();
SELECT node_id FROM sched.rank_candidates('m', '1', heartbeat_ttl => '1 hour',
    at => '2024-01-01 12:00:30+00') WHERE node_id = 'n38';
SELECT pg_temp.did();
SELECT h.last_heartbeat
  FROM sched.worker w, sched.heartbeat(w.worker_id, w.generation, at => '2024-01-01 12:00:00+00') h
 WHERE w.node_id = 'n38' AND w.capability = 'm';
SELECT pg_temp.same();
SELECT node_id FROM sched.rank_candidates('m', '1', heartbeat_ttl => '1 hour',
    at => '2024-01-01 12:00:30+00') WHERE node_id = 'n38';
SELECT pg_temp.did();
-- two updates of one node in one transaction, and one by another statement since:
-- the last version
BEGIN;
UPDATE sched.node SET live_attempts = 2 WHERE node_id = 'n02';
UPDATE sched.node SET live_attempts = 3, reserved_cpu_millis = 2000 WHERE node_id = 'n02';
COMMIT;
UPDATE sched.node SET reserved_memory_mb = 64 WHERE node_id = 'n02';
SELECT pg_temp.same();
SELECT pg_temp.did();
-- a counter changed with another column: re-read
UPDATE sched.node SET live_attempts = 0, weight = 77 WHERE node_id = 'n02';
SELECT pg_temp.same();
SELECT pg_temp.did();
-- own uncommitted counters are seen (re-read at each of the 2 reads of same()), and
-- undone when rolled back (re-read once more)
BEGIN;
UPDATE sched.node SET reserved_cpu_millis = 3000 WHERE node_id = 'n04';
UPDATE sched.worker SET live_attempts = 2 WHERE node_id = 'n04' AND capability = 'm';
SELECT pg_temp.same();
ROLLBACK;
SELECT pg_temp.same();
SELECT pg_temp.did();
-- a savepoint rolled back after a committed update of the same row: the version the
-- committed one wrote
BEGIN;
UPDATE sched.node SET reserved_cpu_millis = 1000 WHERE node_id = 'n04';
SAVEPOINT s;
UPDATE sched.node SET reserved_cpu_millis = 3500 WHERE node_id = 'n04';
SELECT pg_temp.same();
ROLLBACK TO SAVEPOINT s;
UPDATE sched.worker SET live_attempts = 1 WHERE node_id = 'n04' AND capability = 'm';
SAVEPOINT t;
UPDATE sched.worker SET live_attempts = 3 WHERE node_id = 'n04' AND capability = 'm';
RELEASE SAVEPOINT t;
COMMIT;
SELECT pg_temp.same();
SELECT reserved_cpu_millis, (SELECT live_attempts FROM sched.worker
                              WHERE node_id = 'n04' AND capability = 'm') AS worker_live
  FROM sched.node WHERE node_id = 'n04';
SELECT pg_temp.did();
-- every change rolled back: nothing to read again (the mirror never saw it)
SELECT pg_temp.did() IS NOT NULL AS reset_counters;
BEGIN;
SET LOCAL sched.fleet_mirror = off;
UPDATE sched.node SET reserved_cpu_millis = 3000 WHERE node_id = 'n06';
ROLLBACK;
SELECT pg_temp.same();
SELECT pg_temp.did();
-- back to what the counters were, for the tests below
UPDATE sched.node SET reserved_cpu_millis = 0, reserved_memory_mb = 0, live_attempts = 0
 WHERE node_id IN ('n02', 'n04', 'n40');
UPDATE sched.worker SET live_attempts = 0 WHERE node_id IN ('n04', 'n40');
SELECT pg_temp.same();

-- ---------------------------------------------------------------------------------
-- Admission memos: across calls, the mirror remembers what a shape's static rules say
-- of each row (src/admit_memo.c).  The clock still moves the heartbeat cutoff, shapes
-- give way to others (16 are kept), and a dispatch's own changes are judged again.
-- ---------------------------------------------------------------------------------
CREATE FUNCTION pg_temp.memo_ranking(at timestamptz, min_cpu int, off boolean)
RETURNS TABLE (node_id text, score bigint)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('sched.fleet_mirror', CASE WHEN off THEN 'off' ELSE 'on' END, true);
    RETURN QUERY SELECT r.node_id, r.score
      FROM sched.rank_candidates('m', '1', preferred_labels => '{"tier": "fast"}',
                                 min_cpu_millis => min_cpu, heartbeat_ttl => '1 hour', at => at) r;
    PERFORM set_config('sched.fleet_mirror', 'on', true);
END $$;
-- rows in one ranking and not the other, and how many were ranked
CREATE FUNCTION pg_temp.memo_same(at timestamptz, min_cpu int DEFAULT 0)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    missing int;
    ranked int;
BEGIN
    SELECT count(*) INTO ranked FROM pg_temp.memo_ranking(at, min_cpu, false);
    SELECT count(*) INTO missing FROM (
        (SELECT * FROM pg_temp.memo_ranking(at, min_cpu, false)
         EXCEPT SELECT * FROM pg_temp.memo_ranking(at, min_cpu, true))
        UNION ALL
        (SELECT * FROM pg_temp.memo_ranking(at, min_cpu, true)
         EXCEPT SELECT * FROM pg_temp.memo_ranking(at, min_cpu, false))) d;
    RETURN format('%s ranked, %s differ', ranked, missing);
END $$;
UPDATE sched.worker SET last_heartbeat = '2024-01-01 12:40:00+00'
 WHERE node_id IN ('n32', 'n34') AND capability = 'm';
-- every heartbeat fresh at 12:00:30; at 13:30 only the two of 12:40 are (the same shape)
SELECT pg_temp.memo_same('2024-01-01 12:00:30+00');
SELECT pg_temp.memo_same('2024-01-01 13:30:00+00');
SELECT pg_temp.memo_same('2024-01-01 12:00:30+00');
-- twenty shapes in turn, twice: each gives way and comes back
SELECT j AS round, i AS shape, pg_temp.memo_same('2024-01-01 12:00:30+00', i * 250)
  FROM (SELECT i, j FROM generate_series(1, 2) j, generate_series(1, 20) i
         ORDER BY j, i OFFSET 0) turns;
-- a dispatch reserves on a node: its row is judged again, by every memo
SELECT sched.submit('22222222-0000-0000-0000-000000000002', '22222222-0000-0000-0000-0000000000a2',
    'm', '1', preferred_labels => '{"tier": "fast"}', reserve_cpu_millis => 3000,
    available_at => '2024-01-01 12:00:30+00') IS NOT NULL AS submitted;
SELECT outcome FROM sched.dispatch_attempt(
    (SELECT request_id FROM sched.request WHERE step_id = '22222222-0000-0000-0000-0000000000a2'),
    at => '2024-01-01 12:00:30+00');
SELECT pg_temp.memo_same('2024-01-01 12:00:30+00', 1500);
SELECT sched._fleet_mirror_check('m') AS differ_memos_included;

-- ---------------------------------------------------------------------------------
-- A reservation written without statements (sched.direct_writes) logs the versions it
-- wrote: another transaction's mirror patches them in without reading them, also once
-- VACUUM has removed the versions the reservation updated (a mirror that looked for
-- the successor of the version updated would have to re-read both rows).
-- ---------------------------------------------------------------------------------
SELECT pg_temp.same();
SELECT sched.submit('22222222-0000-0000-0000-000000000003', '22222222-0000-0000-0000-0000000000a3',
    'm', '1', reserve_cpu_millis => 100, available_at => '2024-01-01 12:00:30+00') IS NOT NULL AS submitted;
SELECT pg_temp.did() IS NOT NULL AS reset_counters;
SELECT outcome FROM sched.dispatch_next(1, at => '2024-01-01 12:00:30+00');
VACUUM sched.node, sched.worker;
SELECT pg_temp.same();
SELECT pg_temp.did();

-- ---------------------------------------------------------------------------------
-- Entries that cannot name a node: the mirror starts over, and is right.
-- ---------------------------------------------------------------------------------
SELECT pg_temp.did() IS NOT NULL AS reset_counters;
SELECT sched.upsert_node(repeat('x', 100), labels => '{"zone": "a"}', cpu_millis => 9000,
                         memory_mb => 9000, weight => 7000) IS NOT NULL AS long_id;
SELECT (sched.register_worker(repeat('x', 100), 'm', ARRAY['1'], slots => 2,
                              at => '2024-01-01 12:00:00+00')).generation;
SELECT pg_temp.same();
SELECT pg_temp.did() ~ 'losses \+[1-9]' AS started_over;
SELECT pg_temp.same();
TRUNCATE sched.node, sched.worker CASCADE;
SELECT pg_temp.same();
SELECT sched.upsert_node('t1', labels => '{"zone": "a"}', cpu_millis => 9000, memory_mb => 9000) IS NOT NULL;
SELECT (sched.register_worker('t1', 'm', ARRAY['1'], slots => 2, at => '2024-01-01 12:00:00+00')).generation;
SELECT pg_temp.same();
SELECT pg_temp.did() ~ 'losses \+[1-9]' AS started_over;

-- the extension dropped and created again: new tables, a new mirror
SET client_min_messages = warning;
DROP EXTENSION pg_sched CASCADE;
CREATE EXTENSION pg_sched;
RESET client_min_messages;
SELECT sched.upsert_node('r1', labels => '{"zone": "a"}', cpu_millis => 9000, memory_mb => 9000) IS NOT NULL;
SELECT (sched.register_worker('r1', 'm', ARRAY['1'], slots => 2, at => '2024-01-01 12:00:00+00')).generation;
SELECT pg_temp.same();

-- ---------------------------------------------------------------------------------
-- Where the mirror does not answer, the tables do.
-- ---------------------------------------------------------------------------------
SET sched.fleet_mirror = off;
SELECT usable FROM sched._fleet_mirror_stats();
SELECT pg_temp.err($$SELECT sched._fleet_mirror_check('m')$$);
RESET sched.fleet_mirror;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT usable FROM sched._fleet_mirror_stats();
SELECT node_id FROM sched.select_candidate('m', '1', heartbeat_ttl => '1 hour',
    at => '2024-01-01 12:00:30+00');
COMMIT;
SELECT pg_temp.err($$SELECT sched._fleet_mirror_check(NULL)$$);
-- the trigger function is only a trigger
SELECT pg_temp.err($$SELECT sched._fleet_changed()$$);

-- ---------------------------------------------------------------------------------
-- A transaction that changed the fleet before the mirror lost entries (here: the
-- session's first use of the mirror, as every new server connection behind a pooler)
-- and then rolled back: its rows were read by the reload, so reloading goes on until a
-- later transaction (found by test/pooler; the mirror kept the rolled-back weight).
-- ---------------------------------------------------------------------------------
\c
SET TIME ZONE 'UTC';
BEGIN;
SELECT weight FROM sched.upsert_node('r1', weight => 777);
SELECT sched._fleet_mirror_check('m') AS differ_in_transaction;
ROLLBACK;
SELECT sched._fleet_mirror_check('m') AS differ_after_rollback;
SELECT node_id, weight FROM sched.rank_candidates('m', '1', heartbeat_ttl => '50 years') WHERE node_id = 'r1';
-- the same with a savepoint rolled back in a transaction that commits
\c
SET TIME ZONE 'UTC';
BEGIN;
SAVEPOINT s;
SELECT weight FROM sched.upsert_node('r1', weight => 555);
SELECT sched._fleet_mirror_check('m') AS differ_in_savepoint;
ROLLBACK TO SAVEPOINT s;
COMMIT;
SELECT sched._fleet_mirror_check('m') AS differ_after_savepoint_rollback;
SELECT node_id, weight FROM sched.rank_candidates('m', '1', heartbeat_ttl => '50 years') WHERE node_id = 'r1';

-- ---------------------------------------------------------------------------------
-- Labels as the mirror decodes them off the jsonb (src/fleet.c, decode_strings_packed):
-- more keys than it keeps on its stack, none at all, and keys whose jsonb order (by
-- length) is not their bytewise order.
-- ---------------------------------------------------------------------------------
\c
SET TIME ZONE 'UTC';
SELECT sched.upsert_node('lab-many', cpu_millis => 1000, memory_mb => 1024,
    labels => (SELECT jsonb_object_agg('k' || repeat('x', i % 5) || i, 'v' || i)
                 FROM generate_series(1, 40) i)) IS NOT NULL AS added;
SELECT sched.upsert_node('lab-none', cpu_millis => 1000, memory_mb => 1024, labels => '{}')
    IS NOT NULL AS added;
SELECT count(sched.register_worker(n, 'lab', ARRAY['1'], 1, at => '2024-01-01 12:00:00+00'))
  FROM unnest(ARRAY['lab-many', 'lab-none']) n;
\c
SET TIME ZONE 'UTC';
SELECT node_id FROM sched.select_candidate('lab', '1', required_labels => '{"kxxx3": "v3", "k40": "v40"}',
    heartbeat_ttl => '1 hour', at => '2024-01-01 12:00:30+00');
SELECT node_id FROM sched.select_candidate('lab', '1', required_labels => '{"k5": "v5"}',
    heartbeat_ttl => '1 hour', at => '2024-01-01 12:00:30+00');
SELECT count(*) AS wrong_value_matches
  FROM sched.select_candidate('lab', '1', required_labels => '{"kxxxx4": "v5"}',
    heartbeat_ttl => '1 hour', at => '2024-01-01 12:00:30+00');
SELECT full_loads > 0 AS loaded, sched._fleet_mirror_check('lab') AS differ
  FROM sched._fleet_mirror_stats();

-- ---------------------------------------------------------------------------------
-- A refresh that takes thousands of other transactions' entries, as a session does
-- when many others dispatch: its copies of their node ids fill more than one of its
-- scratch blocks (src/fleet_mirror.c: 64 kB each; 2,400 counters entries of 80-byte
-- ids here, and re-read nodes among them), and the same again at the next refresh.
-- ---------------------------------------------------------------------------------
\c
SET TIME ZONE 'UTC';
SELECT count(*) FROM (
  SELECT sched.upsert_node(format('%s-%s', repeat('x', 75), lpad(i::text, 4, '0')),
             labels => '{"zone": "a"}', cpu_millis => 8000, memory_mb => 8192)
    FROM generate_series(1, 1200) i) s;
SELECT count(*) FROM (
  SELECT sched.register_worker(node_id, 'big', ARRAY['1'], slots => 4, at => '2024-01-01 12:00:00+00')
    FROM sched.node WHERE node_id LIKE 'xxx%') s;
SELECT sched._fleet_mirror_check('big') AS differ_loaded;
SELECT full_loads AS l0, rows_reread AS r0, rows_patched AS p0 FROM sched._fleet_mirror_stats() \gset
UPDATE sched.node SET live_attempts = 1, reserved_cpu_millis = 100 WHERE node_id LIKE 'xxx%';
UPDATE sched.worker SET live_attempts = 1 WHERE capability = 'big';
UPDATE sched.node SET weight = 7 WHERE node_id LIKE 'xxx%' AND right(node_id, 2) = '00';
SELECT sched._fleet_mirror_check('big') AS differ_after_many;
-- caught up from the entries, not reloaded (which rows are patched and which re-read
-- depends on whether the versions they updated were pruned since)
SELECT full_loads - :l0 AS full_loads,
       rows_reread - :r0 + rows_patched - :p0 >= 1200 AS caught_up FROM sched._fleet_mirror_stats();
SELECT full_loads AS l0, rows_reread AS r0, rows_patched AS p0 FROM sched._fleet_mirror_stats() \gset
UPDATE sched.node SET live_attempts = 2, reserved_cpu_millis = 200 WHERE node_id LIKE 'xxx%';
UPDATE sched.node SET weight = 8 WHERE node_id LIKE 'xxx%' AND right(node_id, 2) = '50';
SELECT sched._fleet_mirror_check('big') AS differ_after_many_again;
-- caught up from the entries, not reloaded (which rows are patched and which re-read
-- depends on whether the versions they updated were pruned since)
SELECT full_loads - :l0 AS full_loads,
       rows_reread - :r0 + rows_patched - :p0 >= 1200 AS caught_up FROM sched._fleet_mirror_stats();
-- the refresh's scratch space is kept for the next one ...
SELECT sum(total_bytes) > 256 * 1024 AS scratch_kept
  FROM pg_backend_memory_contexts WHERE name = 'pg_sched mirror refresh';
-- ... unless it grew past 2 MB: 9,600 entries
UPDATE sched.node SET live_attempts = 3 WHERE node_id LIKE 'xxx%';
UPDATE sched.node SET live_attempts = 4 WHERE node_id LIKE 'xxx%';
UPDATE sched.node SET live_attempts = 5 WHERE node_id LIKE 'xxx%';
UPDATE sched.node SET live_attempts = 6 WHERE node_id LIKE 'xxx%';
UPDATE sched.worker SET live_attempts = 2 WHERE capability = 'big';
UPDATE sched.worker SET live_attempts = 3 WHERE capability = 'big';
UPDATE sched.worker SET live_attempts = 0 WHERE capability = 'big';
UPDATE sched.worker SET live_attempts = 1 WHERE capability = 'big';
SELECT sched._fleet_mirror_check('big') AS differ_after_more;
SELECT sum(total_bytes) < 64 * 1024 AS scratch_given_back
  FROM pg_backend_memory_contexts WHERE name = 'pg_sched mirror refresh';
SELECT count(*) FILTER (WHERE score IS NOT NULL) AS ranked
  FROM sched.rank_candidates('big', '1', heartbeat_ttl => '50 years');
