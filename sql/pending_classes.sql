--
-- pending_classes: sched.pending explains a shape over classes of nodes alike for
-- admission (src/fleet.c, sched_fleet_classify) and reads the fleet as every node once
-- plus each capability's workers (sched_fleet_merge; a worker of no node left out).
-- Every explanation must be the one node-by-node admission gives: here it is rebuilt,
-- for every open request, from sched.qualification_reasons(request_id, at), which admits
-- node by node, and compared.
--
-- The fleet (320 nodes, fixed arithmetic) varies every field admission reads: status,
-- labels (keys, values, numbers, versions, none), CPUs, memory, GPUs and what is
-- reserved of them, workers of two capabilities or none, their state, cordons, versions
-- served, slots and live attempts, heartbeats on both sides of the 60 s cutoff (and
-- none); and it has nodes alike in all of them but one, for each.  The queue (400 requests) varies every parameter of a shape: capability and
-- version, label expressions of every operator, minimums, reservations, pins.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pg_sched CASCADE;
CREATE EXTENSION pg_sched;
RESET client_min_messages;
SET TIME ZONE 'UTC';

-- 40 kinds of node, each in 8 variants: 0 and 7 alike, and 1-6 each unlike 0 in one
-- field only, so that a class key that left out that field would explain one by the other
CREATE TEMP TABLE spec AS
SELECT 'n' || lpad(k::text, 2, '0') || '-' || v AS node_id, k, v,
       (ARRAY['ACTIVE', 'ACTIVE', 'ACTIVE', 'DRAINING', 'DISABLED'])[1 + k % 5] AS status,
       CASE WHEN v = 1 THEN jsonb_build_object('zone', 'z9', 'tier', 'slow', 'mem_gb', '8', 'driver', '1.0')
            ELSE (ARRAY['{}', '{"zone": "z1"}', '{"zone": "z0", "tier": "fast"}', '{"zone": "z2", "mem_gb": "32"}',
                        '{"driver": "2.10"}', '{"tier": "slow", "zone": "z1", "mem_gb": "64"}'])[1 + k % 6]::jsonb
       END AS labels,
       (1 + k % 4) * 2000 AS cpu, (1 + k % 3) * 4096 AS mem, CASE WHEN k % 4 = 3 THEN 2 ELSE 0 END AS gpus,
       CASE WHEN v = 2 THEN (1 + k % 4) * 2000 ELSE (k % 2) * 1000 END AS res_cpu,
       CASE WHEN v = 2 THEN (1 + k % 3) * 4096 ELSE 0 END AS res_mem,
       CASE WHEN v = 2 AND k % 4 = 3 THEN 2 ELSE 0 END AS res_gpus,
       k % 9 <> 8 AS has_render,
       CASE WHEN v = 3 THEN 1 + k % 3 ELSE 0 END AS live,
       1 + k % 3 AS slots,
       (ARRAY['READY', 'READY', 'READY', 'STARTING'])[1 + k % 4] AS runtime,
       CASE WHEN k % 7 = 6 THEN 'CORDONED' ELSE 'ELIGIBLE' END AS cordon,
       CASE WHEN v = 4 THEN interval '2 min' WHEN k % 10 = 9 THEN NULL ELSE (k % 4) * interval '15 s' END AS heartbeat_age,
       CASE WHEN v = 5 THEN ARRAY['3.0'] WHEN k % 3 = 0 THEN ARRAY['1.0'] WHEN k % 3 = 1 THEN ARRAY['1.0', '2.0']
            ELSE ARRAY['2.0', NULL] END AS versions,
       v = 6 AS extra_train
  FROM generate_series(0, 39) k, generate_series(0, 7) v;
INSERT INTO sched.node (node_id, management_status, labels, cpu_millis, memory_mb, gpus,
                        reserved_cpu_millis, reserved_memory_mb, reserved_gpus, weight)
SELECT node_id, status, labels, cpu, mem, gpus, res_cpu, res_mem, res_gpus, 100 FROM spec;
INSERT INTO sched.worker (worker_id, node_id, capability, capability_versions, slots, live_attempts,
                          runtime_state, scheduling_status, last_heartbeat, generation)
SELECT md5('render' || node_id)::uuid, node_id, 'render', versions, slots, live, runtime, cordon,
       '2024-01-01 12:00:00+00'::timestamptz - heartbeat_age, 1
  FROM spec WHERE has_render;
-- train on every third kind, and on variant 6 (unlike 0 in having a train worker)
INSERT INTO sched.worker (worker_id, node_id, capability, capability_versions, slots, live_attempts,
                          runtime_state, scheduling_status, last_heartbeat, generation)
SELECT md5('train' || node_id)::uuid, node_id, 'train', ARRAY['1'], 2, k % 3,
       'READY', 'ELIGIBLE', '2024-01-01 12:00:00+00'::timestamptz - (k % 5) * interval '20 s', 1
  FROM spec WHERE k % 3 = 0 OR extra_train;
-- render workers of nodes that sched.node does not hold (no foreign key: register_worker
-- checks the node, and a restore may load the workers first): every read of the fleet
-- leaves them out, and so does the merge of the nodes with a capability's workers (one
-- sorts before every node, one between two, one after every node)
INSERT INTO sched.worker (worker_id, node_id, capability, capability_versions, slots,
                          runtime_state, scheduling_status, last_heartbeat, generation)
SELECT md5('gone' || g)::uuid, g, 'render', ARRAY['1.0'], 4, 'READY', 'ELIGIBLE',
       '2024-01-01 12:00:00+00', 1
  FROM unnest(ARRAY['a-gone', 'n05-9', 'zz-gone']) g;
INSERT INTO sched.execution (execution_id, tenant, status, created_at, updated_at)
VALUES ('e0000000-0000-4000-8000-000000000001', 'acme', 'QUEUED', '2024-01-01', '2024-01-01');
INSERT INTO sched.request (execution_id, step_id, attempt_number, tenant, capability,
                           capability_version, required_labels, min_cpu_millis, min_memory_mb,
                           min_gpus, reserve_cpu_millis, reserve_memory_mb, reserve_gpus, node_id,
                           state, queued_at, available_at, sort_key)
SELECT 'e0000000-0000-4000-8000-000000000001', md5('s' || g)::uuid, 1, 'acme',
       CASE WHEN g % 5 = 0 THEN 'train' ELSE 'render' END,
       CASE WHEN g % 5 = 0 THEN '1' ELSE (ARRAY['1.0', '2.0', '3.0'])[1 + g % 3] END,
       (ARRAY['{}', '{"zone": "z1"}', '{"zone": {"in": ["z0", "z2"]}}', '{"zone": {"not_in": ["z0"]}}',
              '{"tier": {"exists": true}}', '{"tier": {"exists": false}}', '{"mem_gb": {"gt": 20}}',
              '{"mem_gb": {"lt": 40}}', '{"driver": {"version": ">=2.0"}}',
              '{"zone": "z0", "tier": "fast"}'])[1 + g % 10]::jsonb,
       (g % 4) * 1500, (g % 3) * 3000, g % 7 / 5, (g % 6) * 700, (g % 5) * 2000, g % 9 / 7,
       CASE WHEN g % 37 = 0 THEN 'n' || lpad((g % 40)::text, 2, '0') || '-' || g % 8 END,
       'PENDING', '2024-01-01 11:00:00+00'::timestamptz + g * interval '1 s',
       '2024-01-01 11:00:00+00'::timestamptz + g * interval '1 s',
       sched._queue_key(0, '2024-01-01 11:00:00+00'::timestamptz + g * interval '1 s')
  FROM generate_series(1, 400) g;

-- and two requests of one shape whose label expression is stored compressed (the key of
-- a shape is read from its detoasted copy)
INSERT INTO sched.request (execution_id, step_id, attempt_number, tenant, capability,
                           capability_version, required_labels, state, queued_at, available_at,
                           sort_key)
SELECT 'e0000000-0000-4000-8000-000000000001', md5('big' || g)::uuid, 1, 'acme', 'render', '1.0',
       (SELECT jsonb_object_agg('key' || k, jsonb_build_object('not_in', jsonb_build_array(repeat('v', 60) || k)))
          FROM generate_series(1, 60) k),
       'PENDING', '2024-01-01 11:30:00+00', '2024-01-01 11:30:00+00',
       sched._queue_key(0, '2024-01-01 11:30:00+00')
  FROM generate_series(1, 2) g;
SELECT count(*) AS big, bool_and(pg_column_size(required_labels) < octet_length(required_labels::text)) AS compressed
  FROM sched.request WHERE step_id IN (md5('big1')::uuid, md5('big2')::uuid);

-- what the queue and fleet hold: shapes, and nodes alike for admission (per capability)
SELECT count(*) AS requests,
       count(DISTINCT (capability, capability_version, required_labels, min_cpu_millis,
                       min_memory_mb, min_gpus, reserve_cpu_millis, reserve_memory_mb,
                       reserve_gpus, node_id)) AS shapes,
       count(*) FILTER (WHERE node_id IS NOT NULL) AS pinned
  FROM sched.request;

-- each request's explanation, rebuilt node by node from qualification_reasons
CREATE TEMP TABLE node_by_node AS
SELECT r.request_id,
       format('%s/%s nodes eligible', q.eligible, q.nodes)
       || coalesce(': ' || (SELECT string_agg(c.n || ' ' || c.reason, ', ' ORDER BY c.reason COLLATE "C")
                              FROM (SELECT reason, count(*) AS n
                                      FROM sched.qualification_reasons(r.request_id, '2024-01-01 12:00:00+00') x,
                                           unnest(x.reasons) reason
                                     GROUP BY reason) c), '') AS explanation
  FROM sched.request r,
       LATERAL (SELECT count(*) FILTER (WHERE x.eligible) AS eligible, count(*) AS nodes
                  FROM sched.qualification_reasons(r.request_id, '2024-01-01 12:00:00+00') x) q;

-- every explanation of the view's query, and of pending_explanations, is the node-by-node one
SELECT count(*) AS explained,
       count(*) FILTER (WHERE p.explanation = n.explanation) AS as_node_by_node,
       count(DISTINCT p.explanation) AS distinct_explanations
  FROM sched.pending('2024-01-01 12:00:00+00') p JOIN node_by_node n USING (request_id);
SELECT count(*) AS explained, count(*) FILTER (WHERE e.explanation = n.explanation) AS as_node_by_node
  FROM sched.pending_explanations('2024-01-01 12:00:00+00') e JOIN node_by_node n USING (request_id);
-- (any that differ, to read in the diff)
SELECT p.request_id, p.explanation, n.explanation AS node_by_node
  FROM sched.pending('2024-01-01 12:00:00+00') p JOIN node_by_node n USING (request_id)
 WHERE p.explanation IS DISTINCT FROM n.explanation
 ORDER BY 1 LIMIT 5;
-- and blocked agrees with the rebuilt explanation: none when some node is eligible
SELECT p.blocked, count(*) AS requests, bool_and((n.explanation NOT LIKE '0/%') = (p.blocked = 'none')) AS agrees
  FROM sched.pending('2024-01-01 12:00:00+00') p JOIN node_by_node n USING (request_id)
 GROUP BY p.blocked ORDER BY p.blocked;
-- a few explanations, as operators read them
SELECT request_id - (SELECT min(request_id) FROM sched.request) + 1 AS g, explanation, blocked
  FROM sched.pending('2024-01-01 12:00:00+00')
 WHERE request_id - (SELECT min(request_id) FROM sched.request) + 1 IN (1, 2, 5, 9, 37, 74)
 ORDER BY 1;

-- a heartbeat crossing the cutoff between two times: the class key reads it at the cutoff
SELECT (sched.pending_explanation('train', '1', at => '2024-01-01 12:00:00+00')).explanation AS at_noon,
       (sched.pending_explanation('train', '1', at => '2024-01-01 12:00:30+00')).explanation AS thirty_s_later;

-- the search_path: pending_explanation has no proconfig (one row of sched.pending each
-- call); it pins the path itself while it runs SQL, and gives the caller's back
SET search_path = public, pg_catalog;
SELECT (sched.pending_explanation('render', '1.0', '{}', 0, 0, 0, 0, 0, 0, NULL, '2024-01-01 12:00:00+00')).blocked,
       current_setting('search_path') AS caller_path;
BEGIN;
SAVEPOINT s;
SELECT (sched.pending_explanation('render', '1.0', '{"zone": {"gt": "x"}}', 0, 0, 0, 0, 0, 0, NULL, '2024-01-01 12:00:00+00')).blocked;
ROLLBACK TO SAVEPOINT s;
SELECT current_setting('search_path') AS after_an_error;
COMMIT;
RESET search_path;

-- a NULL parameter is refused even after a 0 in its place was explained in the same query
SELECT x, (sched.pending_explanation('render', '1.0', '{}', x, 0, 0, 0, 0, 0, NULL, '2024-01-01 12:00:00+00')).blocked
  FROM (VALUES (1, 0), (2, NULL::int)) v(k, x) ORDER BY k;

DROP EXTENSION pg_sched CASCADE;
