--
-- collation_icu: ties in score go to the smallest node_id compared bytewise (COLLATE "C"),
-- whatever the database collation (SPEC sections 2 and 4).  Runs in a database created
-- with the ICU en-US collation, where the default text order differs from byte order:
-- 'B-node' < 'a-node' bytewise but 'a-node' < 'B-node' in en-US; 'node-x' < 'node_x'
-- bytewise but 'node_x' < 'node-x' in en-US.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pg_sched CASCADE;
CREATE EXTENSION pg_sched;
RESET client_min_messages;

SET client_min_messages = warning;
DROP DATABASE IF EXISTS sched_icu;
RESET client_min_messages;
CREATE DATABASE sched_icu TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8';
\c sched_icu
SET TIME ZONE 'UTC';
CREATE EXTENSION pg_sched;

-- the database really is ICU en-US
SELECT datlocprovider, daticulocale FROM pg_database WHERE datname = current_database();

-- ---------------------------------------------------------------------------------
-- Eight nodes with equal scores (weight 100, no labels preferred, no live attempts).
-- Group label g: 1 = {a-node, B-node}, 2 = {node_x, node-x}, 3 = {Zeta, alpha},
-- 4 = {node-9, node-10}.
-- ---------------------------------------------------------------------------------
SELECT count(*) AS nodes FROM (
  SELECT sched.upsert_node(n, labels => jsonb_build_object('g', g), cpu_millis => 1000)
    FROM (VALUES ('a-node', '1'), ('B-node', '1'), ('node_x', '2'), ('node-x', '2'),
                 ('Zeta', '3'), ('alpha', '3'), ('node-9', '4'), ('node-10', '4')) AS v(n, g)) s;
SELECT count(*) AS workers FROM (
  SELECT sched.register_worker(n, 'render', ARRAY['1.0'], slots => 2,
             at => '2024-01-01 12:00:00+00')
    FROM unnest(ARRAY['a-node', 'B-node', 'node_x', 'node-x', 'Zeta', 'alpha', 'node-9',
                      'node-10']) AS n) s;

-- the database's default collation orders these ids differently from bytes ...
SELECT node_id COLLATE "default" AS default_order
  FROM sched.node ORDER BY node_id COLLATE "default";
-- ... than the bytewise order that ranking must use
SELECT node_id COLLATE "C" AS bytewise_order
  FROM sched.node ORDER BY node_id COLLATE "C";

-- ---------------------------------------------------------------------------------
-- Ranking: all scores equal, so the order is bytewise node_id.
-- ---------------------------------------------------------------------------------
SELECT rank, node_id, score FROM sched.rank_candidates('render', '1.0',
    heartbeat_ttl => '60 s', at => '2024-01-01 12:00:10+00');
SELECT node_id, score FROM sched.select_candidate('render', '1.0',
    heartbeat_ttl => '60 s', at => '2024-01-01 12:00:10+00');

-- per pair: the bytewise-smallest wins; in groups 1-3 the en-US-smallest is the other
-- node (group 4 agrees in both orders: en-US here compares digits as text, not numbers)
SELECT g, (SELECT node_id FROM sched.select_candidate('render', '1.0',
                required_labels => jsonb_build_object('g', g),
                heartbeat_ttl => '60 s', at => '2024-01-01 12:00:10+00')) AS selected,
       (SELECT min(node_id COLLATE "default") FROM sched.node
         WHERE labels ->> 'g' = g) AS smallest_in_default_collation,
       (SELECT min(node_id COLLATE "C") FROM sched.node
         WHERE labels ->> 'g' = g) AS smallest_bytewise
  FROM unnest(ARRAY['1', '2', '3', '4']) AS g;

-- ---------------------------------------------------------------------------------
-- Dispatch takes the same bytewise-first node; with it busy (one live attempt, score
-- 90,000) the tie among the others again goes bytewise.
-- ---------------------------------------------------------------------------------
SELECT sched.submit('e2000000-0000-0000-0000-000000000001', '53000000-0000-0000-0000-000000000001',
                    'render', '1.0', required_labels => '{"g":"2"}',
                    available_at => '2024-01-01 12:00:10+00') AS r1 \gset
SELECT outcome, node_id, score FROM sched.dispatch_attempt(:r1, at => '2024-01-01 12:00:10+00');
SELECT sched.submit('e2000000-0000-0000-0000-000000000001', '53000000-0000-0000-0000-000000000002',
                    'render', '1.0', required_labels => '{"g":"1"}',
                    available_at => '2024-01-01 12:00:10+00') AS r2 \gset
SELECT outcome, node_id, score FROM sched.dispatch_attempt(:r2, at => '2024-01-01 12:00:10+00');
SELECT rank, node_id, score, running_attempts FROM sched.rank_candidates('render', '1.0',
    heartbeat_ttl => '60 s', at => '2024-01-01 12:00:10+00');

-- ---------------------------------------------------------------------------------
-- Clean up.
-- ---------------------------------------------------------------------------------
\c contrib_regression
DROP DATABASE sched_icu;
