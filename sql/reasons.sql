--
-- reasons: every one of the 15 reason codes of SPEC section 3, in a fleet where each node
-- is built to show specific reasons; the listing order; the suppression rules
-- (capability_missing hides worker reasons, *_exhausted only where the matching
-- insufficient_* is not listed); a node with many reasons at once; the aggregated
-- summary of an unschedulable dispatch; both forms of qualification_reasons.
--
-- Request "Q" used throughout: capability build, version 2.0, required {"zone":"eu"},
-- reserve 1000 cpu millis, 1000 MB, 1 GPU, heartbeat TTL 60 s, at 2024-01-01 12:00:00 UTC
-- (so a heartbeat before 11:59:00 is expired).
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pg_sched CASCADE;
CREATE EXTENSION pg_sched;
RESET client_min_messages;
SET TIME ZONE 'UTC';

-- ---------------------------------------------------------------------------------
-- Fleet.  Unless stated: labels zone=eu, 4000 cpu millis, 4096 MB, 2 GPUs, ACTIVE,
-- one 'build' worker serving {2.0} with 4 slots, heartbeat at 11:59:50.
-- ---------------------------------------------------------------------------------
SELECT count(*) AS nodes FROM (
  SELECT sched.upsert_node(n, labels => '{"zone":"eu","disk":"ssd"}', cpu_millis => 4000,
                           memory_mb => 4096, gpus => 2)
    FROM unnest(ARRAY['n01-ok', 'n02-draining', 'n03-disabled', 'n04-nocap', 'n05-starting',
                      'n06-wdraining', 'n07-cordoned', 'n08-stale', 'n09-version',
                      'n10-zone-us', 'n11-nozone', 'n12-small', 'n13-full', 'n14-slots0',
                      'n15-busy', 'n16-all', 'n17-other']) AS n) s;

-- n16-all: the node that collects every reason it can.  Registered early, takes one
-- attempt reserving 3500 MB and 2 GPUs (0 cpu), then degrades step by step.
SELECT * FROM sched.register_worker('n16-all', 'build', ARRAY['2.0'], slots => 1,
    worker_id => '00000000-0000-0000-0000-000000000016', at => '2024-01-01 11:58:00+00');
SELECT sched.submit('e1000000-0000-0000-0000-000000000001', '51000000-0000-0000-0000-000000000016',
                    'build', '2.0', node_id => 'n16-all', reserve_memory_mb => 3500,
                    reserve_gpus => 2, available_at => '2024-01-01 11:58:00+00') AS r16 \gset
SELECT outcome, node_id, score FROM sched.dispatch_attempt(:r16, at => '2024-01-01 11:58:05+00');
-- new session serving only 1.0 (generation 2), then it reports STOPPED at 11:58:15
SELECT * FROM sched.register_worker('n16-all', 'build', ARRAY['1.0'], slots => 1,
    at => '2024-01-01 11:58:10+00');
SELECT worker_id, runtime_state, generation, last_heartbeat
  FROM sched.heartbeat('00000000-0000-0000-0000-000000000016', 2,
                       at => '2024-01-01 11:58:15+00', runtime_state => 'STOPPED');
SELECT worker_id, scheduling_status FROM sched.cordon_worker('00000000-0000-0000-0000-000000000016');
SELECT node_id, management_status, labels, cpu_millis
  FROM sched.upsert_node('n16-all', labels => '{"zone":"us"}', cpu_millis => 500,
                         management_status => 'DRAINING');

-- n08-stale: last heartbeat 11:58:00, two minutes before "at"
SELECT * FROM sched.register_worker('n08-stale', 'build', ARRAY['2.0'], slots => 4,
    worker_id => '00000000-0000-0000-0000-000000000008', at => '2024-01-01 11:58:00+00');

-- the other build workers register at 11:59:50 (n04-nocap and n17-other have none)
SELECT count(*) AS workers FROM (
  SELECT sched.register_worker(n, 'build',
             CASE n WHEN 'n09-version' THEN ARRAY['1.0', '2.0.1', '2'] ELSE ARRAY['2.0'] END,
             slots => CASE n WHEN 'n13-full' THEN 1 WHEN 'n14-slots0' THEN 0 ELSE 4 END,
             worker_id => ('00000000-0000-0000-0000-0000000000' || substr(n, 2, 2))::uuid,
             at => '2024-01-01 11:59:50+00')
    FROM unnest(ARRAY['n01-ok', 'n02-draining', 'n03-disabled', 'n05-starting',
                      'n06-wdraining', 'n07-cordoned', 'n09-version', 'n10-zone-us',
                      'n11-nozone', 'n12-small', 'n13-full', 'n14-slots0', 'n15-busy']) AS n) s;

-- n17-other: a worker for another capability only, which takes 3500 MB of the node
SELECT * FROM sched.register_worker('n17-other', 'other', ARRAY['2.0'], slots => 4,
    worker_id => '00000000-0000-0000-0000-000000000017', at => '2024-01-01 11:59:50+00');
-- n04-nocap: also a worker for another capability only (cordoned: must not show up)
SELECT * FROM sched.register_worker('n04-nocap', 'other', ARRAY['2.0'], slots => 4,
    worker_id => '00000000-0000-0000-0000-000000000004', at => '2024-01-01 11:50:00+00');
SELECT worker_id, scheduling_status FROM sched.cordon_worker('00000000-0000-0000-0000-000000000004');

-- live reservations, dispatched while the nodes are still healthy
SELECT sched.submit('e1000000-0000-0000-0000-000000000001', '51000000-0000-0000-0000-000000000013',
                    'build', '2.0', node_id => 'n13-full',
                    available_at => '2024-01-01 11:59:55+00') AS r13 \gset
SELECT sched.submit('e1000000-0000-0000-0000-000000000001', '51000000-0000-0000-0000-000000000015',
                    'build', '2.0', node_id => 'n15-busy', reserve_cpu_millis => 3500,
                    reserve_memory_mb => 3500, reserve_gpus => 2,
                    available_at => '2024-01-01 11:59:55+00') AS r15 \gset
SELECT sched.submit('e1000000-0000-0000-0000-000000000001', '51000000-0000-0000-0000-000000000017',
                    'other', '2.0', node_id => 'n17-other', reserve_memory_mb => 3500,
                    available_at => '2024-01-01 11:59:55+00') AS r17 \gset
SELECT outcome, node_id, score FROM sched.dispatch_attempt(:r13, at => '2024-01-01 11:59:55+00');
SELECT outcome, node_id, score FROM sched.dispatch_attempt(:r15, at => '2024-01-01 11:59:55+00');
SELECT outcome, node_id, score FROM sched.dispatch_attempt(:r17, at => '2024-01-01 11:59:55+00');

-- now degrade the fleet
SELECT node_id, management_status FROM sched.drain_node('n02-draining');
SELECT node_id, management_status FROM sched.upsert_node('n03-disabled', management_status => 'DISABLED');
SELECT worker_id, runtime_state FROM sched.heartbeat('00000000-0000-0000-0000-000000000005', 1,
    at => '2024-01-01 11:59:51+00', runtime_state => 'STARTING');
SELECT worker_id, runtime_state FROM sched.heartbeat('00000000-0000-0000-0000-000000000006', 1,
    at => '2024-01-01 11:59:51+00', runtime_state => 'DRAINING');
SELECT worker_id, scheduling_status FROM sched.cordon_worker('00000000-0000-0000-0000-000000000007');
SELECT node_id, labels FROM sched.upsert_node('n10-zone-us', labels => '{"zone":"us","disk":"ssd"}');
SELECT node_id, labels FROM sched.upsert_node('n11-nozone', labels => '{"rack":"r1"}');
SELECT node_id, cpu_millis, memory_mb, gpus
  FROM sched.upsert_node('n12-small', cpu_millis => 500, memory_mb => 512, gpus => 0);
SELECT node_id, management_status FROM sched.drain_node('n17-other');
SELECT node_id, labels, gpus FROM sched.upsert_node('n17-other', labels => '{}', gpus => 0);

-- the fleet as built
SELECT node_id, management_status, labels, cpu_millis, memory_mb, gpus, weight,
       reserved_cpu_millis AS res_cpu, reserved_memory_mb AS res_mem, reserved_gpus AS res_gpus,
       live_attempts
  FROM sched.node ORDER BY node_id;
SELECT node_id, capability, capability_versions, runtime_state, scheduling_status, slots,
       live_attempts, last_heartbeat, generation
  FROM sched.worker ORDER BY node_id, capability;

-- ---------------------------------------------------------------------------------
-- Q: one row per node, reasons in SPEC order.  Expected:
--   n01 eligible (score 100,000); n02, n03 node_not_active; n04 capability_missing only
--   (its cordoned, stale 'other' worker is not looked at) with worker_id NULL;
--   n05 (STARTING), n06 (DRAINING) worker_not_ready; n07 worker_not_eligible;
--   n08 heartbeat_expired; n09 capability_version_missing (exact match only);
--   n10 (other value), n11 (label absent) required_labels_mismatch;
--   n12 insufficient cpu, memory and gpus; n13 (1 of 1 slot used), n14 (0 slots)
--   no_free_slot; n15 cpu/memory/gpus_exhausted (500, 596 and 0 left);
--   n16 ten reasons at once (insufficient_cpu, so no cpu_exhausted);
--   n17 capability_missing with node reasons and memory_exhausted, no worker reasons.
-- ---------------------------------------------------------------------------------
SELECT * FROM sched.qualification_reasons('build', '2.0', required_labels => '{"zone":"eu"}',
    reserve_cpu_millis => 1000, reserve_memory_mb => 1000, reserve_gpus => 1,
    heartbeat_ttl => '60 s', at => '2024-01-01 12:00:00+00')
 ORDER BY node_id COLLATE "C";

-- the same call ranks exactly the admitted nodes
SELECT * FROM sched.rank_candidates('build', '2.0', required_labels => '{"zone":"eu"}',
    reserve_cpu_millis => 1000, reserve_memory_mb => 1000, reserve_gpus => 1,
    heartbeat_ttl => '60 s', at => '2024-01-01 12:00:00+00');

-- ---------------------------------------------------------------------------------
-- Q pinned to n01-ok: pinned_to_other_node comes first on every other node; n16-all
-- shows eleven reasons.
-- ---------------------------------------------------------------------------------
SELECT node_id, eligible, reasons, score
  FROM sched.qualification_reasons('build', '2.0', required_labels => '{"zone":"eu"}',
    reserve_cpu_millis => 1000, reserve_memory_mb => 1000, reserve_gpus => 1,
    node_id => 'n01-ok', heartbeat_ttl => '60 s', at => '2024-01-01 12:00:00+00')
 ORDER BY node_id COLLATE "C";

-- pinned to a node that does not exist: every node is pinned_to_other_node
SELECT node_id, eligible, reasons
  FROM sched.qualification_reasons('build', '2.0', node_id => 'no-such-node',
    heartbeat_ttl => '60 s', at => '2024-01-01 12:00:00+00')
 WHERE node_id IN ('n01-ok', 'n04-nocap')
 ORDER BY node_id COLLATE "C";

-- ---------------------------------------------------------------------------------
-- insufficient_* compares static capacity with max(min_*, reserve_*).
-- ---------------------------------------------------------------------------------
-- minimums alone (no reservation): n01 and n15 too small, no *_exhausted anywhere
SELECT node_id, eligible, reasons
  FROM sched.qualification_reasons('build', '2.0', min_cpu_millis => 4001,
    min_memory_mb => 4097, min_gpus => 3, heartbeat_ttl => '60 s',
    at => '2024-01-01 12:00:00+00')
 WHERE node_id IN ('n01-ok', 'n12-small', 'n15-busy')
 ORDER BY node_id COLLATE "C";
-- minimums equal to capacity are enough
SELECT node_id, eligible, reasons
  FROM sched.qualification_reasons('build', '2.0', min_cpu_millis => 4000,
    min_memory_mb => 4096, min_gpus => 2, heartbeat_ttl => '60 s',
    at => '2024-01-01 12:00:00+00')
 WHERE node_id IN ('n01-ok', 'n15-busy')
 ORDER BY node_id COLLATE "C";
-- reservations alone: the larger of the two counts
SELECT node_id, eligible, reasons
  FROM sched.qualification_reasons('build', '2.0', min_cpu_millis => 100,
    reserve_cpu_millis => 4001, heartbeat_ttl => '60 s', at => '2024-01-01 12:00:00+00')
 WHERE node_id IN ('n01-ok', 'n15-busy')
 ORDER BY node_id COLLATE "C";

-- ---------------------------------------------------------------------------------
-- *_exhausted is listed only where the matching insufficient_* is not.
-- n15-busy has 3500 cpu, 3500 MB and 2 GPUs reserved.
-- ---------------------------------------------------------------------------------
-- min_cpu 5000 makes cpu insufficient, which hides cpu_exhausted; memory and gpus
-- still exhausted
SELECT node_id, eligible, reasons
  FROM sched.qualification_reasons('build', '2.0', min_cpu_millis => 5000,
    reserve_cpu_millis => 1000, reserve_memory_mb => 1000, reserve_gpus => 1,
    heartbeat_ttl => '60 s', at => '2024-01-01 12:00:00+00')
 WHERE node_id IN ('n01-ok', 'n15-busy')
 ORDER BY node_id COLLATE "C";
-- exactly what is left fits: 500 cpu, 596 MB, 0 GPUs
SELECT node_id, eligible, reasons, score
  FROM sched.qualification_reasons('build', '2.0', reserve_cpu_millis => 500,
    reserve_memory_mb => 596, reserve_gpus => 0, heartbeat_ttl => '60 s',
    at => '2024-01-01 12:00:00+00')
 WHERE node_id = 'n15-busy'
 ORDER BY node_id COLLATE "C";
-- one more of each is exhausted
SELECT node_id, eligible, reasons
  FROM sched.qualification_reasons('build', '2.0', reserve_cpu_millis => 501,
    reserve_memory_mb => 597, reserve_gpus => 0, heartbeat_ttl => '60 s',
    at => '2024-01-01 12:00:00+00')
 WHERE node_id = 'n15-busy'
 ORDER BY node_id COLLATE "C";

-- ---------------------------------------------------------------------------------
-- The unschedulable summary counts every node once under each of its reasons, codes
-- sorted by name.  Request Q pinned to n16-all: no node qualifies.
-- ---------------------------------------------------------------------------------
SELECT sched.submit('e1000000-0000-0000-0000-000000000002', '52000000-0000-0000-0000-000000000001',
                    'build', '2.0', required_labels => '{"zone":"eu"}',
                    reserve_cpu_millis => 1000, reserve_memory_mb => 1000, reserve_gpus => 1,
                    node_id => 'n16-all', available_at => '2024-01-01 12:00:00+00') AS q \gset
-- the stored-request form gives the same rows as the parameter form
SELECT node_id, worker_id, eligible, reasons, score
  FROM sched.qualification_reasons(:q, '2024-01-01 12:00:00+00')
 ORDER BY node_id COLLATE "C";
SELECT outcome, node_id, worker_id, score, detail
  FROM sched.dispatch_attempt(:q, at => '2024-01-01 12:00:00+00');
SELECT state, tries, last_reason, available_at FROM sched.request WHERE request_id = :q;

-- the unpinned Q is placed on n01-ok, the only eligible node
SELECT sched.submit('e1000000-0000-0000-0000-000000000002', '52000000-0000-0000-0000-000000000002',
                    'build', '2.0', required_labels => '{"zone":"eu"}',
                    reserve_cpu_millis => 1000, reserve_memory_mb => 1000, reserve_gpus => 1,
                    available_at => '2024-01-01 12:00:00+00') AS q2 \gset
SELECT outcome, node_id, worker_id, score
  FROM sched.dispatch_attempt(:q2, at => '2024-01-01 12:00:00+00');
