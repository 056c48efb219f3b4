--
-- worked_example: the worked example of seed 000 (SPEC section 4), with exact scores.
--
--   node-a  tier=fast  weight 100   4 CPUs  2 live attempts  fresh heartbeat  -> 1,080,000, selected
--   node-b  -          weight 150   8 CPUs  0 live attempts  fresh heartbeat  ->   150,000
--   node-c  -          weight 100  16 CPUs  0 live attempts  heartbeat 90 s old -> heartbeat_expired
--
-- Request: preferred {"tier":"fast"}, min 2 CPUs (2000 millis), heartbeat TTL 60 s.
-- Variants: min 32 CPUs leaves no eligible node; TTL 120 s admits node-c.
-- Also: the stored-request form qualification_reasons(request_id, at).
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pg_sched CASCADE;
CREATE EXTENSION pg_sched;
RESET client_min_messages;
SET TIME ZONE 'UTC';

-- ---------------------------------------------------------------------------------
-- Fleet.  "at" of the example is 2024-01-01 12:00:00 UTC.
-- ---------------------------------------------------------------------------------
SELECT node_id, labels, cpu_millis, weight, management_status
  FROM sched.upsert_node('node-a', labels => '{"tier":"fast"}', cpu_millis => 4000,
                         memory_mb => 8192, weight => 100);
SELECT node_id, labels, cpu_millis, weight, management_status
  FROM sched.upsert_node('node-b', labels => '{}', cpu_millis => 8000,
                         memory_mb => 16384, weight => 150);
SELECT node_id, labels, cpu_millis, weight, management_status
  FROM sched.upsert_node('node-c', cpu_millis => 16000, memory_mb => 32768);

-- node-a and node-b heartbeat 10 s before "at"; node-c last heartbeat 90 s before "at"
SELECT * FROM sched.register_worker('node-a', 'render', ARRAY['1.0'], slots => 4,
    worker_id => 'aaaaaaaa-0000-0000-0000-000000000001', at => '2024-01-01 11:59:50+00');
SELECT * FROM sched.register_worker('node-b', 'render', ARRAY['1.0'], slots => 4,
    worker_id => 'bbbbbbbb-0000-0000-0000-000000000001', at => '2024-01-01 11:59:50+00');
SELECT * FROM sched.register_worker('node-c', 'render', ARRAY['1.0'], slots => 4,
    worker_id => 'cccccccc-0000-0000-0000-000000000001', at => '2024-01-01 11:58:30+00');

-- ---------------------------------------------------------------------------------
-- Two live attempts on node-a: two requests pinned to node-a, dispatched.
-- ---------------------------------------------------------------------------------
SELECT sched.submit('e0000000-0000-0000-0000-000000000001', '50000000-0000-0000-0000-000000000001',
                    'render', '1.0', node_id => 'node-a',
                    available_at => '2024-01-01 11:59:55+00') AS pin1 \gset
SELECT sched.submit('e0000000-0000-0000-0000-000000000001', '50000000-0000-0000-0000-000000000002',
                    'render', '1.0', node_id => 'node-a',
                    available_at => '2024-01-01 11:59:55+00') AS pin2 \gset
SELECT outcome, node_id, worker_id, score, attempt_id IS NOT NULL AS has_attempt
  FROM sched.dispatch_attempt(:pin1, at => '2024-01-01 11:59:56+00');
SELECT outcome, node_id, worker_id, score, attempt_id IS NOT NULL AS has_attempt
  FROM sched.dispatch_attempt(:pin2, at => '2024-01-01 11:59:56+00');
SELECT node_id, live_attempts FROM sched.node ORDER BY node_id;

-- ---------------------------------------------------------------------------------
-- The example: node-a wins with 1,080,000 = 1 * 1,000,000 + 100 * 1,000 - 2 * 10,000.
-- ---------------------------------------------------------------------------------
SELECT * FROM sched.select_candidate('render', '1.0',
    preferred_labels => '{"tier":"fast"}', min_cpu_millis => 2000,
    heartbeat_ttl => '60 s', at => '2024-01-01 12:00:00+00');

-- ranking with the score terms: node-b 150,000 = 150 * 1,000; node-c not admitted
SELECT * FROM sched.rank_candidates('render', '1.0',
    preferred_labels => '{"tier":"fast"}', min_cpu_millis => 2000,
    heartbeat_ttl => '60 s', at => '2024-01-01 12:00:00+00');

-- why node-c is not a candidate
SELECT * FROM sched.qualification_reasons('render', '1.0',
    preferred_labels => '{"tier":"fast"}', min_cpu_millis => 2000,
    heartbeat_ttl => '60 s', at => '2024-01-01 12:00:00+00')
 ORDER BY node_id COLLATE "C";

-- ---------------------------------------------------------------------------------
-- Variant: a minimum of 32 CPUs leaves no eligible node.
-- ---------------------------------------------------------------------------------
SELECT * FROM sched.select_candidate('render', '1.0',
    preferred_labels => '{"tier":"fast"}', min_cpu_millis => 32000,
    heartbeat_ttl => '60 s', at => '2024-01-01 12:00:00+00');
SELECT * FROM sched.rank_candidates('render', '1.0',
    preferred_labels => '{"tier":"fast"}', min_cpu_millis => 32000,
    heartbeat_ttl => '60 s', at => '2024-01-01 12:00:00+00');
SELECT * FROM sched.qualification_reasons('render', '1.0',
    preferred_labels => '{"tier":"fast"}', min_cpu_millis => 32000,
    heartbeat_ttl => '60 s', at => '2024-01-01 12:00:00+00')
 ORDER BY node_id COLLATE "C";

-- ---------------------------------------------------------------------------------
-- Variant: a TTL of 120 s admits node-c (100,000 = 100 * 1,000).
-- ---------------------------------------------------------------------------------
SELECT * FROM sched.select_candidate('render', '1.0',
    preferred_labels => '{"tier":"fast"}', min_cpu_millis => 2000,
    heartbeat_ttl => '120 s', at => '2024-01-01 12:00:00+00');
SELECT * FROM sched.rank_candidates('render', '1.0',
    preferred_labels => '{"tier":"fast"}', min_cpu_millis => 2000,
    heartbeat_ttl => '120 s', at => '2024-01-01 12:00:00+00');
SELECT * FROM sched.qualification_reasons('render', '1.0',
    preferred_labels => '{"tier":"fast"}', min_cpu_millis => 2000,
    heartbeat_ttl => '120 s', at => '2024-01-01 12:00:00+00')
 ORDER BY node_id COLLATE "C";

-- boundary: expired means strictly older than at - ttl; a 90 s old heartbeat with a
-- 90 s TTL is still fresh, with 89 s it is expired
SELECT node_id, eligible, reasons FROM sched.qualification_reasons('render', '1.0',
    heartbeat_ttl => '90 s', at => '2024-01-01 12:00:00+00') WHERE node_id = 'node-c'
 ORDER BY node_id COLLATE "C";
SELECT node_id, eligible, reasons FROM sched.qualification_reasons('render', '1.0',
    heartbeat_ttl => '89 s', at => '2024-01-01 12:00:00+00') WHERE node_id = 'node-c'
 ORDER BY node_id COLLATE "C";

-- without a preference, node-b's weight beats node-a's
SELECT * FROM sched.rank_candidates('render', '1.0',
    min_cpu_millis => 2000, heartbeat_ttl => '60 s', at => '2024-01-01 12:00:00+00');

-- heartbeat_ttl => NULL (the default) uses the setting sched.heartbeat_ttl
SHOW sched.heartbeat_ttl;
SELECT * FROM sched.select_candidate('render', '1.0',
    preferred_labels => '{"tier":"fast"}', min_cpu_millis => 2000,
    at => '2024-01-01 12:00:00+00');
SELECT node_id, eligible, reasons FROM sched.qualification_reasons('render', '1.0',
    at => '2024-01-01 12:00:00+00') WHERE node_id = 'node-c'
 ORDER BY node_id COLLATE "C";

-- ---------------------------------------------------------------------------------
-- The stored-request form: qualification_reasons(request_id, at) reads the request's
-- own parameters (TTL from sched.heartbeat_ttl).
-- ---------------------------------------------------------------------------------
SELECT sched.submit('e0000000-0000-0000-0000-000000000002', '50000000-0000-0000-0000-000000000003',
                    'render', '1.0', preferred_labels => '{"tier":"fast"}',
                    min_cpu_millis => 2000,
                    available_at => '2024-01-01 12:00:00+00') AS example \gset
SELECT * FROM sched.qualification_reasons(:example, '2024-01-01 12:00:00+00')
 ORDER BY node_id COLLATE "C";
-- named notation
SELECT * FROM sched.qualification_reasons(request_id => :example, at => '2024-01-01 12:00:00+00')
 ORDER BY node_id COLLATE "C";

-- the 32-CPU variant as a stored request
SELECT sched.submit('e0000000-0000-0000-0000-000000000002', '50000000-0000-0000-0000-000000000004',
                    'render', '1.0', preferred_labels => '{"tier":"fast"}',
                    min_cpu_millis => 32000,
                    available_at => '2024-01-01 12:00:00+00') AS big \gset
SELECT * FROM sched.qualification_reasons(:big, '2024-01-01 12:00:00+00')
 ORDER BY node_id COLLATE "C";

-- with the setting raised to 120 s, node-c qualifies for the stored request too
SET sched.heartbeat_ttl = '120s';
SELECT * FROM sched.qualification_reasons(:example, '2024-01-01 12:00:00+00')
 ORDER BY node_id COLLATE "C";
RESET sched.heartbeat_ttl;

-- dispatching the stored example request places it on node-a with the same score
SELECT outcome, node_id, worker_id, score, lease_version
  FROM sched.dispatch_attempt(:example, at => '2024-01-01 12:00:00+00');
SELECT a.node_id, a.worker_id, a.score, a.status
  FROM sched.attempt a JOIN sched.request r ON r.attempt_id = a.attempt_id
 WHERE r.request_id = :example;
-- and the 32-CPU request waits with the summary of every node's reasons
SELECT outcome, node_id, score, detail
  FROM sched.dispatch_attempt(:big, at => '2024-01-01 12:00:00+00');
