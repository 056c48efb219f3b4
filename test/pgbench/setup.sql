-- setup.sql — fleet and queue for the pgbench concurrency check (concurrency.sh).
--
-- 50 nodes with few slots and small capacity, so that 8 concurrent dispatchers fight
-- over the same worker/node pairs all the time:
--   * node-01 .. node-50: 2000/3000/4000 mcpu, 4096/8192 MB, GPUs on every 5th node
--     (2 on every 10th), labels zone=z0..z2 and tier=fast|std, weights 50..125;
--   * a "build" worker on every node (versions 1.0 and 2.0, or 1.0 only on every 7th
--     node), 1 or 2 slots (75 slots in all);
--   * a "train" worker with 1 slot on each of the 10 GPU nodes: two workers then share
--     one node's resources, so node counters see reservations from two workers.
-- :requests requests (psql variable), 10 steps per execution, 4 tenants, mixed
-- reservations: most reserve cpu and memory, every 10th is a "train" request reserving
-- a GPU, every 50th is a "build" request reserving a GPU, some require a zone, need a
-- version only some workers have, or a minimum only the largest nodes meet, and every
-- 997th can never fit anywhere (5000 mcpu).  Nothing here is random: the same input
-- every run.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;

CREATE EXTENSION pg_sched;

-- workers registered now stay admitted for the whole run (the check takes < 1 min)
SELECT set_config('sched.heartbeat_ttl', '10min', false);
DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET sched.heartbeat_ttl = %L', current_database(), '10min'); END $$;
-- preemption in the mix (issue 15): every sixth request is preemptible (of priority 0)
DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET sched.preemption = on', current_database()); END $$;

SELECT count(sched.upsert_node(
           node_id => format('node-%s', lpad(i::text, 2, '0')),
           labels => jsonb_build_object('zone', 'z' || (i % 3),
                                        'tier', CASE WHEN i % 4 = 0 THEN 'fast' ELSE 'std' END,
                                        'gen', (i % 5)::text,
                                        'kernel', '5.' || (i % 4) || '.' || (i % 7)),
           cpu_millis => 2000 + (i % 3) * 1000,
           memory_mb => 4096 * (1 + i % 2),
           gpus => CASE WHEN i % 10 = 0 THEN 2 WHEN i % 5 = 0 THEN 1 ELSE 0 END,
           weight => 50 + (i % 4) * 25)) AS nodes
  FROM generate_series(1, 50) AS i;

SELECT count(sched.register_worker(
           node_id => format('node-%s', lpad(i::text, 2, '0')),
           capability => 'build',
           capability_versions => CASE WHEN i % 7 = 0 THEN ARRAY['1.0'] ELSE ARRAY['1.0', '2.0'] END,
           slots => 1 + i % 2)) AS build_workers
  FROM generate_series(1, 50) AS i;

SELECT count(sched.register_worker(
           node_id => format('node-%s', lpad(i::text, 2, '0')),
           capability => 'train',
           capability_versions => ARRAY['1.0'],
           slots => 1)) AS train_workers
  FROM generate_series(5, 50, 5) AS i;

-- the queue
SELECT count(sched.submit(
           -- every i with i % 25 < 3 is a member of gang i / 25 (issue 15): 3 members of
           -- one tenant, in an execution of their own, every other gang on distinct nodes
           execution_id => CASE WHEN i % 25 < 3 THEN md5('bench-gang-execution-' || (i / 25))::uuid
                                ELSE md5('bench-execution-' || (i / 10) || '-' || (i % 4))::uuid END,
           step_id => md5('bench-step-' || i)::uuid,
           capability => CASE WHEN i % 10 = 0 THEN 'train' ELSE 'build' END,
           capability_version => CASE WHEN i % 5 = 3 THEN '2.0' ELSE '1.0' END,
           tenant => CASE WHEN i % 25 < 3 THEN 't' || ((i / 25) % 4) ELSE 't' || (i % 4) END,
           gang_id => CASE WHEN i % 25 < 3 THEN md5('bench-gang-' || (i / 25))::uuid END,
           gang_size => CASE WHEN i % 25 < 3 THEN 3 END,
           distinct_nodes => i % 25 < 3 AND (i / 25) % 2 = 0,
           priority => i % 3,
           required_labels => CASE WHEN i % 7 = 0 THEN '{"zone":"z1"}'::jsonb
                                   -- label expressions (issue 15)
                                   WHEN i % 13 = 0 THEN '{"zone": {"in": ["z0", "z2"]}, "gen": {"gt": 1}}'::jsonb
                                   WHEN i % 17 = 0 THEN '{"kernel": {"version": ">=5.1,<5.3"}, "tier": {"not_in": ["fast"]}}'::jsonb
                                   WHEN i % 19 = 0 THEN '{"gen": {"lt": 3}, "gpu": {"exists": false}}'::jsonb
                                   ELSE '{}' END,
           preferred_labels => CASE WHEN i % 3 = 0 THEN '{"tier":"fast"}'::jsonb ELSE '{}' END,
           spread_key => CASE WHEN i % 4 = 1 THEN 'svc-' || (i % 9) END,
           preemptible => i % 6 = 3,   -- priority i % 3 = 0: preempted by 1 and 2
           min_cpu_millis => CASE WHEN i % 11 = 0 THEN 3000 ELSE 0 END,
           reserve_cpu_millis => CASE WHEN i % 997 = 0 THEN 5000
                                      WHEN i % 10 = 0 THEN 500
                                      ELSE 250 * (1 + i % 4) END,
           reserve_memory_mb => CASE WHEN i % 10 = 0 THEN 1024 ELSE 512 * (1 + i % 3) END,
           reserve_gpus => CASE WHEN i % 10 = 0 OR i % 50 = 1 THEN 1 ELSE 0 END,
           available_at => now() - interval '1 minute')) AS requests
  FROM generate_series(1, :requests) AS i;

-- what each dispatch call answered (written by the pgbench scripts)
-- (placed: the attempts the call made; a dispatch_attempt of a gang member places the
-- whole gang with one result row)
CREATE UNLOGGED TABLE public.bench_outcome (script text NOT NULL, outcome text NOT NULL,
                                            placed int NOT NULL DEFAULT 1);

ANALYZE;
