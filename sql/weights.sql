--
-- weights: the score formula of SPEC section 4,
--     score = preferred_matches * 1,000,000 + weight * 1,000 - running_attempts * 10,000
-- with a weight <= 0 scoring as 100 (0, negative, INT_MIN), large weights (up to
-- INT_MAX, no overflow), the running-attempts penalty counted over the whole node
-- (all capabilities), scores below zero, preferred-label matches, and ties broken by
-- node_id bytewise.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pg_sched CASCADE;
CREATE EXTENSION pg_sched;
RESET client_min_messages;
SET TIME ZONE 'UTC';

-- ---------------------------------------------------------------------------------
-- Weights.  Capability 'w'; every node has 8 slots and 8000 cpu millis.
-- ---------------------------------------------------------------------------------
SELECT node_id, weight FROM sched.upsert_node('w-zero', cpu_millis => 8000, weight => 0);
SELECT node_id, weight FROM sched.upsert_node('w-neg', cpu_millis => 8000, weight => -5);
SELECT node_id, weight FROM sched.upsert_node('w-min', cpu_millis => 8000, weight => -2147483648);
SELECT node_id, weight FROM sched.upsert_node('w-hundred', cpu_millis => 8000, weight => 100);
SELECT node_id, weight FROM sched.upsert_node('w-one', cpu_millis => 8000, weight => 1);
SELECT node_id, weight FROM sched.upsert_node('w-big', cpu_millis => 8000, weight => 1000000);
SELECT node_id, weight FROM sched.upsert_node('w-max', cpu_millis => 8000, weight => 2147483647);
-- a node created without a weight gets the default 100
SELECT node_id, weight FROM sched.upsert_node('w-default', cpu_millis => 8000);

SELECT count(*) AS workers FROM (
  SELECT sched.register_worker(node_id, 'w', ARRAY['1'], slots => 8,
             at => '2024-01-01 12:00:00+00')
    FROM sched.node) s;

-- w-zero, w-neg, w-min, w-default and w-hundred all score 100,000 and tie (bytewise
-- order); w-one scores 1,000; w-big 1,000,000,000; w-max 2,147,483,647,000.
-- The weight column is the weight used in the score.
SELECT rank, node_id, score, preferred_matches, weight, running_attempts
  FROM sched.rank_candidates('w', '1', heartbeat_ttl => '60 s', at => '2024-01-01 12:00:10+00');
SELECT node_id, score
  FROM sched.select_candidate('w', '1', heartbeat_ttl => '60 s', at => '2024-01-01 12:00:10+00');
-- qualification_reasons reports the same scores
SELECT node_id, eligible, score
  FROM sched.qualification_reasons('w', '1', heartbeat_ttl => '60 s', at => '2024-01-01 12:00:10+00')
 ORDER BY node_id COLLATE "C";
-- the stored weights are kept as given
SELECT node_id, weight FROM sched.node ORDER BY node_id;

-- ---------------------------------------------------------------------------------
-- Running attempts: -10,000 per live attempt on the node, whatever its capability.
-- ---------------------------------------------------------------------------------
-- three live 'w' attempts on w-hundred
SELECT count(*) FILTER (WHERE d.outcome = 'DISPATCHED') AS dispatched
  FROM generate_series(1, 3) AS i,
       LATERAL sched.submit('e3000000-0000-0000-0000-000000000001',
                            ('54000000-0000-0000-0000-00000000000' || i)::uuid, 'w', '1',
                            node_id => 'w-hundred',
                            available_at => '2024-01-01 12:00:05+00') AS r(request_id),
       LATERAL sched.dispatch_attempt(r.request_id, at => '2024-01-01 12:00:05+00') AS d;
-- two live attempts of another capability on w-zero
SELECT * FROM sched.register_worker('w-zero', 'other', ARRAY['1'], slots => 2,
    worker_id => '0e000000-0000-0000-0000-000000000001', at => '2024-01-01 12:00:00+00');
SELECT count(*) FILTER (WHERE d.outcome = 'DISPATCHED') AS dispatched
  FROM generate_series(4, 5) AS i,
       LATERAL sched.submit('e3000000-0000-0000-0000-000000000001',
                            ('54000000-0000-0000-0000-00000000000' || i)::uuid, 'other', '1',
                            node_id => 'w-zero',
                            available_at => '2024-01-01 12:00:05+00') AS r(request_id),
       LATERAL sched.dispatch_attempt(r.request_id, at => '2024-01-01 12:00:05+00') AS d;
-- two live attempts on w-one: 1,000 - 20,000 = -19,000, still admitted, ranked last
SELECT count(*) FILTER (WHERE d.outcome = 'DISPATCHED') AS dispatched
  FROM generate_series(6, 7) AS i,
       LATERAL sched.submit('e3000000-0000-0000-0000-000000000001',
                            ('54000000-0000-0000-0000-00000000000' || i)::uuid, 'w', '1',
                            node_id => 'w-one',
                            available_at => '2024-01-01 12:00:05+00') AS r(request_id),
       LATERAL sched.dispatch_attempt(r.request_id, at => '2024-01-01 12:00:05+00') AS d;
SELECT node_id, live_attempts FROM sched.node WHERE live_attempts > 0 ORDER BY node_id;

-- w-hundred 70,000; w-zero 80,000 (its 'other' attempts count); w-one -19,000
SELECT rank, node_id, score, preferred_matches, weight, running_attempts
  FROM sched.rank_candidates('w', '1', heartbeat_ttl => '60 s', at => '2024-01-01 12:00:10+00');
SELECT node_id, eligible, score
  FROM sched.qualification_reasons('w', '1', heartbeat_ttl => '60 s', at => '2024-01-01 12:00:10+00')
 WHERE node_id IN ('w-hundred', 'w-zero', 'w-one')
 ORDER BY node_id COLLATE "C";

-- the dispatch records the score it chose: pinned to w-hundred, with 3 live attempts
SELECT sched.submit('e3000000-0000-0000-0000-000000000001', '54000000-0000-0000-0000-000000000008',
                    'w', '1', node_id => 'w-hundred',
                    available_at => '2024-01-01 12:00:10+00') AS pinned \gset
SELECT outcome, node_id, score FROM sched.dispatch_attempt(:pinned, at => '2024-01-01 12:00:10+00');
SELECT a.node_id, a.score FROM sched.attempt a JOIN sched.request r USING (attempt_id)
 WHERE r.request_id = :pinned;

-- changing a weight takes effect at once: w-max to 0 now scores as 100
SELECT node_id, weight FROM sched.upsert_node('w-max', weight => 0);
SELECT node_id, score, weight
  FROM sched.rank_candidates('w', '1', heartbeat_ttl => '60 s', at => '2024-01-01 12:00:10+00')
 WHERE node_id IN ('w-max', 'w-big');

-- ---------------------------------------------------------------------------------
-- Preferred labels: 1,000,000 per preferred label the node has with an equal value.
-- Capability 'p'; preferred {"tier":"fast","disk":"ssd"}.
-- ---------------------------------------------------------------------------------
SELECT node_id, labels, weight
  FROM sched.upsert_node('p-both', labels => '{"tier":"fast","disk":"ssd","zone":"eu"}',
                         cpu_millis => 1000, weight => 100);
SELECT node_id, labels, weight
  FROM sched.upsert_node('p-wrongval', labels => '{"tier":"slow","disk":"ssd"}',
                         cpu_millis => 1000, weight => 100);
SELECT node_id, labels, weight
  FROM sched.upsert_node('p-fast-light', labels => '{"tier":"fast"}', cpu_millis => 1000, weight => 1);
SELECT node_id, labels, weight
  FROM sched.upsert_node('p-heavy', labels => '{}', cpu_millis => 1000, weight => 1001);
SELECT node_id, labels, weight
  FROM sched.upsert_node('p-casediff', labels => '{"Tier":"fast","disk":"SSD"}', cpu_millis => 1000,
                         weight => 100);
SELECT count(*) AS workers FROM (
  SELECT sched.register_worker(node_id, 'p', ARRAY['1'], slots => 1,
             at => '2024-01-01 12:00:00+00')
    FROM sched.node WHERE node_id LIKE 'p-%') s;

-- p-both 2,100,000; p-wrongval 1,100,000 (disk only); p-fast-light 1,001,000 ties with
-- p-heavy 1,001,000 (bytewise: p-fast-light first); p-casediff 100,000 (keys and
-- values compare exactly)
SELECT rank, node_id, score, preferred_matches, weight, running_attempts
  FROM sched.rank_candidates('p', '1', preferred_labels => '{"tier":"fast","disk":"ssd"}',
                             heartbeat_ttl => '60 s', at => '2024-01-01 12:00:10+00');
-- without preferences only the weights count
SELECT rank, node_id, score, preferred_matches, weight
  FROM sched.rank_candidates('p', '1', heartbeat_ttl => '60 s', at => '2024-01-01 12:00:10+00');
-- a preference no node satisfies changes nothing
SELECT rank, node_id, score, preferred_matches
  FROM sched.rank_candidates('p', '1', preferred_labels => '{"gpu":"a100"}',
                             heartbeat_ttl => '60 s', at => '2024-01-01 12:00:10+00');
