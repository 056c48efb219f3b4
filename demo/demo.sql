/*
 * pg_sched demo — run by `make demo` in a fresh database of a throwaway cluster:
 *     psql -X -v ON_ERROR_STOP=1 -d sched_demo -f demo/demo.sql
 *
 * The story, in four parts:
 *   1. the seed's worked example (SPEC section 4): three nodes, why node-a wins, why
 *      node-c is filtered out, and what changes with 32 CPUs or a 120 s heartbeat TTL;
 *   2. a generated fleet of 300 more nodes (zones, tiers, GPUs, draining nodes, cordoned
 *      and stale workers), registered through the public functions only;
 *   3. a burst of 400 requests from four tenants, some of them impossible, each
 *      dispatched with one call of sched.dispatch_attempt;
 *   4. what happened: outcomes, who got what, and why the rest wait (sched.pending,
 *      grouped: waiting for capacity, or unable to run on the fleet as it is).
 * It ends with the commands that start the demo's cluster again and open psql on it
 * (test/harness.sh start demo).
 *
 * Everything happens at the fixed instant :t0 (heartbeats are placed relative to it), so
 * the output is the same at every run.  Only the public functions write to sched.*; the
 * demo reads the tables to report.
 */

\set QUIET on
\set ON_ERROR_STOP on
SET client_min_messages = warning;
SET timezone = 'UTC';
\pset footer off
\pset null '-'
\set t0 '2025-03-03 09:00:00+00'

CREATE EXTENSION pg_sched;

-- ---------------------------------------------------------------------------------
-- Part 1: the seed's example fleet and its worked example
-- ---------------------------------------------------------------------------------
\echo
\echo '=============================================================================='
\echo ' 1. The worked example from the seed (SPEC section 4)'
\echo '=============================================================================='
\echo
\echo 'Three nodes serve capability "render" 1.0/2.0.  node-a is tier=fast but small and'
\echo 'already runs 2 attempts; node-b is plain but heavier (weight 150); node-c is the'
\echo 'biggest, but its worker last reported 90 s ago (heartbeat TTL is 60 s).'

SELECT sched.upsert_node('node-a', '{"tier":"fast","zone":"eu-west"}', 4000, 16384, 0, 100) \gset quiet_
SELECT sched.upsert_node('node-b', '{"zone":"eu-west"}', 8000, 32768, 0, 150) \gset quiet_
SELECT sched.upsert_node('node-c', '{"zone":"eu-west"}', 16000, 65536, 0, 100) \gset quiet_

SELECT worker_id AS wa FROM sched.register_worker('node-a', 'render', '{1.0,2.0}', 4, at => :'t0'::timestamptz - interval '5 s') \gset
SELECT worker_id AS wb FROM sched.register_worker('node-b', 'render', '{1.0,2.0}', 4, at => :'t0'::timestamptz - interval '5 s') \gset
SELECT worker_id AS wc FROM sched.register_worker('node-c', 'render', '{1.0,2.0}', 4, at => :'t0'::timestamptz - interval '90 s') \gset
-- fresh heartbeats for node-a and node-b; node-c stays silent
SELECT count(*) AS beat FROM sched.heartbeat(:'wa', 1, :'t0') \gset
SELECT count(*) AS beat FROM sched.heartbeat(:'wb', 1, :'t0') \gset

-- node-a's two running attempts: two small jobs pinned to it, dispatched a minute earlier
SELECT count(sched.submit(md5('seed-exec-' || i)::uuid, md5('seed-step-' || i)::uuid, 'render', '2.0',
                    tenant => 'acme', reserve_cpu_millis => 500, reserve_memory_mb => 1024,
                    node_id => 'node-a', available_at => :'t0'::timestamptz - interval '60 s'))
  FROM generate_series(1, 2) i \gset quiet_
SELECT count(*) AS warmup FROM sched.request r,
       LATERAL sched.dispatch_attempt(r.request_id, at => :'t0'::timestamptz - interval '60 s') d
 WHERE d.outcome = 'DISPATCHED' \gset

\echo
\echo 'The fleet as the operator sees it (sched.node, sched.worker):'
SELECT n.node_id, n.labels->>'tier' AS tier, n.weight, n.cpu_millis / 1000 AS cpus,
       n.live_attempts AS live, extract(epoch FROM :'t0'::timestamptz - w.last_heartbeat)::int || ' s ago' AS heartbeat
  FROM sched.node n JOIN sched.worker w USING (node_id)
 ORDER BY n.node_id;

\echo
\echo 'Request: render 2.0, preferred {"tier":"fast"}, at least 2 CPUs, TTL 60 s.'
\echo 'sched.rank_candidates -- score = matches*1,000,000 + weight*1,000 - live*10,000:'
SELECT rank, node_id, to_char(score, 'FM9,999,999') AS score, preferred_matches AS matches,
       weight, running_attempts AS live
  FROM sched.rank_candidates('render', '2.0', preferred_labels => '{"tier":"fast"}',
                             min_cpu_millis => 2000, heartbeat_ttl => '60 s', at => :'t0');

\echo 'sched.select_candidate -- what dispatch would take:'
SELECT node_id, to_char(score, 'FM9,999,999') AS score
  FROM sched.select_candidate('render', '2.0', preferred_labels => '{"tier":"fast"}',
                              min_cpu_millis => 2000, heartbeat_ttl => '60 s', at => :'t0');

\echo 'sched.qualification_reasons -- one row per node, the filter explains itself:'
SELECT node_id, eligible, reasons, to_char(score, 'FM9,999,999') AS score
  FROM sched.qualification_reasons('render', '2.0', preferred_labels => '{"tier":"fast"}',
                                   min_cpu_millis => 2000, heartbeat_ttl => '60 s', at => :'t0');

\echo 'What if the job needs 32 CPUs?  No node is eligible, and each one says why:'
SELECT node_id, eligible, reasons
  FROM sched.qualification_reasons('render', '2.0', preferred_labels => '{"tier":"fast"}',
                                   min_cpu_millis => 32000, heartbeat_ttl => '60 s', at => :'t0');

\echo 'What if we tolerate a 120 s heartbeat TTL?  node-c is admitted (and ranks third):'
SELECT rank, node_id, to_char(score, 'FM9,999,999') AS score, preferred_matches AS matches,
       weight, running_attempts AS live
  FROM sched.rank_candidates('render', '2.0', preferred_labels => '{"tier":"fast"}',
                             min_cpu_millis => 2000, heartbeat_ttl => '120 s', at => :'t0');

-- ---------------------------------------------------------------------------------
-- Part 2: a generated fleet of 300 nodes
-- ---------------------------------------------------------------------------------
\echo
\echo '=============================================================================='
\echo ' 2. A bigger fleet: 300 generated nodes (fixed pattern, same at every run)'
\echo '=============================================================================='

-- The plan of the fleet, computed from the node number i with fixed arithmetic.
CREATE TEMP TABLE fleet AS
SELECT i,
       format('node-%s', lpad(i::text, 3, '0')) AS node_id,
       (ARRAY['eu-west', 'eu-north', 'us-east', 'ap-south'])[1 + (i + i / 6) % 4] AS zone,
       CASE WHEN i % 5 = 0 THEN 'fast' WHEN i % 5 IN (1, 3) THEN 'standard' ELSE 'spot' END AS tier,
       CASE WHEN i % 6 = 0 THEN (ARRAY['a100', 'l4', 't4'])[1 + (i / 6) % 3] END AS gpu_type,
       CASE WHEN i % 6 = 0 THEN (ARRAY[1, 2, 4, 8])[1 + (i / 7) % 4] ELSE 0 END AS gpus,
       (ARRAY[4, 8, 16, 32, 64])[1 + (i * 3 + i / 5) % 5] AS cores,
       50 + (i * 37) % 151 AS weight,
       i % 37 = 0 AS draining,           -- operators are draining these nodes
       i % 23 = 0 AS render_cordoned,    -- their render worker is cordoned
       i % 29 = 0 AS stale,              -- every worker went silent 10 minutes ago
       i % 31 = 0 AS render_starting     -- render worker reports STARTING
  FROM generate_series(1, 300) i;

-- Nodes, through sched.upsert_node (labels: zone, tier, and gpu where present).
SELECT count(sched.upsert_node(
           node_id,
           jsonb_strip_nulls(jsonb_build_object('zone', zone, 'tier', tier, 'gpu', gpu_type)),
           cores * 1000, cores * 4096::bigint, gpus, weight)) AS nodes
  FROM fleet \gset

-- Workers, through sched.register_worker: render on 9 nodes in 10 (2.0 on two in three),
-- transcode on two in three, train on every GPU node (one slot per GPU).
CREATE TEMP TABLE reg AS
SELECT f.i, f.node_id, c.capability, r.worker_id, r.generation
  FROM fleet f
  CROSS JOIN LATERAL (VALUES
        ('render',    CASE WHEN f.i % 3 = 0 THEN '{1.0}' ELSE '{1.0,2.0}' END::text[], 2 + f.i % 3, f.i % 10 <> 9),
        ('transcode', '{3.1}'::text[], 4, f.i % 3 <> 0),
        ('train',     CASE WHEN f.i % 4 = 0 THEN '{2.2}' ELSE '{2.2,2.3}' END::text[], f.gpus, f.gpus > 0)
       ) AS c(capability, versions, slots, present)
  CROSS JOIN LATERAL sched.register_worker(
        f.node_id, c.capability, c.versions, c.slots,
        at => :'t0'::timestamptz - CASE WHEN f.stale THEN interval '10 min' ELSE interval '20 s' END) r
 WHERE c.present
 ORDER BY f.i, c.capability;

-- Heartbeats at t0 from every live worker (STARTING for a few render workers).
SELECT count(*) AS beats FROM reg
  JOIN fleet f USING (i)
  CROSS JOIN LATERAL sched.heartbeat(reg.worker_id, reg.generation, :'t0',
        CASE WHEN f.render_starting AND reg.capability = 'render' THEN 'STARTING' ELSE 'READY' END) h
 WHERE NOT f.stale \gset
-- Operators drain some nodes and cordon some render workers.
SELECT count(sched.drain_node(node_id)) AS drained FROM fleet WHERE draining \gset
SELECT count(sched.cordon_worker(reg.worker_id)) AS cordoned
  FROM reg JOIN fleet f USING (i)
 WHERE f.render_cordoned AND reg.capability = 'render' \gset

\echo
\echo 'Nodes per zone and tier (sched.node):'
SELECT labels->>'zone' AS zone,
       count(*) FILTER (WHERE labels->>'tier' = 'fast') AS fast,
       count(*) FILTER (WHERE labels->>'tier' = 'standard') AS standard,
       count(*) FILTER (WHERE labels->>'tier' = 'spot') AS spot,
       count(*) FILTER (WHERE labels->>'tier' IS NULL) AS "(none)",
       count(*) FILTER (WHERE gpus > 0) AS gpu_nodes,
       sum(gpus) AS gpus,
       sum(cpu_millis) / 1000 AS cpus,
       count(*) FILTER (WHERE management_status <> 'ACTIVE') AS draining
  FROM sched.node
 GROUP BY 1 ORDER BY 1;

\echo 'Workers per capability (sched.worker): versions, state, and who is usable at t0:'
SELECT w.capability,
       array_to_string(w.capability_versions, ',') AS versions,
       count(*) AS workers,
       sum(w.slots) AS slots,
       count(*) FILTER (WHERE w.runtime_state <> 'READY') AS not_ready,
       count(*) FILTER (WHERE w.scheduling_status = 'CORDONED') AS cordoned,
       count(*) FILTER (WHERE w.last_heartbeat < :'t0'::timestamptz - interval '60 s') AS stale,
       count(*) FILTER (WHERE n.management_status <> 'ACTIVE') AS on_draining
  FROM sched.worker w JOIN sched.node n USING (node_id)
 GROUP BY 1, 2 ORDER BY 1, 2;

-- ---------------------------------------------------------------------------------
-- Part 3: a burst of 400 requests
-- ---------------------------------------------------------------------------------
\echo
\echo '=============================================================================='
\echo ' 3. A burst: 400 requests from 4 tenants, dispatched one call each'
\echo '=============================================================================='
\echo
\echo 'Mix (by request number j):'
\echo '  render 2.0     50%  2 CPUs + 4 GiB, prefers tier=fast'
\echo '  transcode 3.1  20%  1 CPU + 2 GiB, required zone (one of four)'
\echo '  train 2.3      20%  1-2 GPUs + 4 CPUs, half of them require gpu=a100'
\echo '  impossible     10%  16 GPUs / render 3.0 (no such version) / pinned to a'
\echo '                      draining node / 1 TiB of memory'

CREATE TEMP TABLE burst_plan AS
SELECT j,
       (ARRAY['acme', 'globex', 'initech', 'umbrella'])[1 + (j + j / 20) % 4] AS tenant,
       CASE WHEN j % 20 < 10 THEN 'render'
            WHEN j % 20 < 14 THEN 'transcode'
            WHEN j % 20 < 18 AND j % 2 = 0 THEN 'train a100'
            WHEN j % 20 < 18 THEN 'train'
            WHEN j % 20 = 18 THEN 'too many GPUs'
            WHEN j % 80 = 19 THEN 'missing version'
            WHEN j % 80 = 39 THEN 'pinned to drained'
            WHEN j % 80 = 59 THEN 'too much memory'
            ELSE 'render' END AS kind
  FROM generate_series(1, 400) j;

SELECT count(*) AS submitted FROM burst_plan p
 CROSS JOIN LATERAL sched.submit(
        execution_id => md5('demo-exec-' || p.j)::uuid,
        step_id => md5('demo-step-' || p.j)::uuid,
        tenant => p.tenant,
        capability => CASE WHEN p.kind IN ('render', 'missing version', 'pinned to drained',
                                           'too much memory') THEN 'render'
                           WHEN p.kind = 'transcode' THEN 'transcode'
                           ELSE 'train' END,
        capability_version => CASE p.kind WHEN 'transcode' THEN '3.1'
                                          WHEN 'train' THEN '2.3'
                                          WHEN 'train a100' THEN '2.3'
                                          WHEN 'too many GPUs' THEN '2.3'
                                          WHEN 'missing version' THEN '3.0'
                                          ELSE '2.0' END,
        required_labels => CASE
              WHEN p.kind = 'transcode'
                THEN jsonb_build_object('zone', (ARRAY['eu-west', 'eu-north', 'us-east', 'ap-south'])[1 + p.j % 4])
              WHEN p.kind = 'train a100' THEN '{"gpu":"a100"}'
              ELSE '{}' END::jsonb,
        preferred_labels => CASE WHEN p.kind = 'render' THEN '{"tier":"fast"}' ELSE '{}' END::jsonb,
        reserve_cpu_millis => CASE p.kind WHEN 'transcode' THEN 1000
                                          WHEN 'train' THEN 4000
                                          WHEN 'train a100' THEN 4000 ELSE 2000 END,
        reserve_memory_mb => CASE p.kind WHEN 'transcode' THEN 2048
                                         WHEN 'too much memory' THEN 1048576 ELSE 4096 END,
        reserve_gpus => CASE WHEN p.kind LIKE 'train%' THEN 1 + p.j % 3 / 2
                             WHEN p.kind = 'too many GPUs' THEN 16 ELSE 0 END,
        node_id => CASE WHEN p.kind = 'pinned to drained' THEN 'node-074' END,
        available_at => :'t0'::timestamptz) AS s \gset
\echo
\echo 'Submitted' :submitted 'requests.  Dispatching every PENDING request, in request_id'
\echo 'order, with sched.dispatch_attempt(request_id, at => t0) ...'

-- The volatile call is evaluated after the sort, so requests are dispatched in order.
CREATE TEMP TABLE burst AS
SELECT p.j, p.tenant, p.kind, r.capability, (d).*
  FROM (SELECT r.request_id,
               sched.dispatch_attempt(r.request_id, at => :'t0') AS d
          FROM sched.request r
         WHERE r.state = 'PENDING'
         ORDER BY r.request_id) x
  JOIN sched.request r ON r.request_id = (x.d).request_id
  JOIN burst_plan p ON md5('demo-step-' || p.j)::uuid = r.step_id;

-- ---------------------------------------------------------------------------------
-- Part 4: what happened
-- ---------------------------------------------------------------------------------
\echo
\echo '=============================================================================='
\echo ' 4. What happened'
\echo '=============================================================================='
\echo
\echo 'A few of the rows sched.dispatch_attempt returned (the first of each kind):'
SELECT s.request_id, s.kind, s.outcome, s.node_id, to_char(s.score, 'FM9,999,999') AS score,
       CASE WHEN s.outcome = 'DISPATCHED'
            THEN format('%s, weight %s', coalesce('tier=' || (n.labels->>'tier'), 'no tier'), n.weight)
            ELSE split_part(s.detail, ':', 1) || ': ...' END AS "why / detail"
  FROM (SELECT DISTINCT ON (kind) * FROM burst ORDER BY kind, request_id) s
  LEFT JOIN sched.node n USING (node_id)
 ORDER BY s.request_id;

\echo 'Outcomes by kind of request:'
SELECT kind,
       count(*) AS requests,
       count(*) FILTER (WHERE outcome = 'DISPATCHED') AS dispatched,
       count(*) FILTER (WHERE outcome = 'UNSCHEDULABLE') AS unschedulable,
       count(*) FILTER (WHERE outcome NOT IN ('DISPATCHED', 'UNSCHEDULABLE')) AS other
  FROM burst
 GROUP BY ROLLUP (kind)
 ORDER BY kind IS NULL, min(j);

\echo 'Per tenant:'
SELECT tenant,
       count(*) AS requests,
       count(*) FILTER (WHERE outcome = 'DISPATCHED') AS dispatched,
       count(*) FILTER (WHERE outcome = 'UNSCHEDULABLE') AS waiting
  FROM burst GROUP BY tenant ORDER BY tenant;

\echo 'Who got what: the 15 busiest nodes (reserved / capacity, from sched.node):'
SELECT n.node_id,
       coalesce(n.labels->>'tier', '-') AS tier,
       coalesce(n.labels->>'gpu', '-') AS gpu,
       n.weight,
       n.live_attempts AS live,
       format('%s/%s', trim_scale(round(n.reserved_cpu_millis / 1000.0, 1)), n.cpu_millis / 1000) AS cpus,
       format('%s/%s', n.reserved_memory_mb / 1024, n.memory_mb / 1024) AS "mem GiB",
       format('%s/%s', n.reserved_gpus, n.gpus) AS gpus,
       (SELECT string_agg(format('%s %s', c.capability, c.count), ', ' ORDER BY c.capability)
          FROM (SELECT a.capability, count(*) FROM burst a
                 WHERE a.node_id = n.node_id GROUP BY 1) c) AS "burst attempts"
  FROM sched.node n
 WHERE n.live_attempts > 0
 ORDER BY n.live_attempts DESC, n.node_id
 LIMIT 15;

\echo 'GPUs by type (train asks for 1-2 GPUs; half of it insists on a100):'
\echo 'Only nodes that are ACTIVE, with a fresh READY train worker serving 2.3, count:'
SELECT n.labels->>'gpu' AS gpu, count(*) AS "all nodes",
       count(*) FILTER (WHERE usable) AS "usable nodes",
       sum(n.gpus) FILTER (WHERE usable) AS "their gpus",
       sum(n.reserved_gpus) FILTER (WHERE usable) AS reserved,
       sum(w.live_attempts) FILTER (WHERE usable) AS "train attempts"
  FROM sched.node n
  JOIN sched.worker w ON w.node_id = n.node_id AND w.capability = 'train'
  CROSS JOIN LATERAL (SELECT n.management_status = 'ACTIVE' AND w.runtime_state = 'READY'
                             AND w.scheduling_status = 'ELIGIBLE'
                             AND w.last_heartbeat >= :'t0'::timestamptz - interval '60 s'
                             AND '2.3' = ANY (w.capability_versions) AS usable) u
 GROUP BY 1 ORDER BY 1;

\echo 'Where the burst went, by node tier (render prefers tier=fast):'
SELECT coalesce(n.labels->>'tier', '-') AS tier, b.capability, count(*) AS attempts,
       count(DISTINCT n.node_id) AS nodes
  FROM burst b JOIN sched.node n USING (node_id)
 WHERE b.outcome = 'DISPATCHED'
 GROUP BY 1, 2 ORDER BY 2, 1;

\echo 'Why the rest wait (sched.pending at t0: one row per waiting request, with a live'
\echo 'explanation and blocked = none / transient / static):'
SELECT b.blocked, count(p.request_id) AS requests,
       count(p.request_id) FILTER (WHERE p.next_try_at > :'t0') AS backing_off,
       b.meaning AS "what it means"
  FROM (VALUES (1, 'none', 'some node admits it now: it waits for its turn'),
               (2, 'transient', 'waits for capacity: the nodes that fit it are full'),
               (3, 'static', 'cannot run on the fleet as it is: a static reason on every node'))
       AS b(o, blocked, meaning)
  LEFT JOIN sched.pending(:'t0') p USING (blocked)
 GROUP BY b.o, b.blocked, b.meaning
 ORDER BY b.o;

\echo 'Only static requests back off (1 s doubling per try).  A transient one keeps its place'
\echo 'in the queue and is placed by the first dispatch after capacity is released.'
\echo
\echo 'Grouped by what holds them back: the reasons on the nodes closest to admitting each'
\echo 'request (those with the fewest static reasons), with how many nodes give each reason'
\echo '(as counted in sched.pending.explanation); "kind" is the plan of part 3:'
WITH transient(codes) AS (
    VALUES ('{no_free_slot,cpu_exhausted,memory_exhausted,gpus_exhausted}'::text[])
), reasons AS (         -- per waiting request and node: each reason (none where eligible)
    SELECT p.request_id, p.capability, p.blocked, p.explanation, q.node_id, x.code,
           x.code = ANY (t.codes) AS is_transient,
           cardinality(array(SELECT c FROM unnest(q.reasons) c WHERE c <> ALL (t.codes))) AS statics
      FROM sched.pending(:'t0') p
     CROSS JOIN transient t
     CROSS JOIN LATERAL sched.qualification_reasons(p.request_id, :'t0') q
      LEFT JOIN LATERAL unnest(q.reasons) AS x(code) ON true
), closest AS (         -- the request's nodes with the fewest static reasons
    SELECT r.*, min(r.statics) OVER (PARTITION BY r.request_id) AS fewest FROM reasons r
), held AS (           -- on those: the static reasons, or for a transient request what fills them
    SELECT request_id, capability, blocked, explanation,
           array_agg(DISTINCT code) FILTER (WHERE is_transient = (blocked = 'transient')) AS codes
      FROM closest WHERE statics = fewest
     GROUP BY 1, 2, 3, 4
), counted AS (         -- "N code" from the explanation, per code held on
    SELECT h.blocked, h.capability, h.codes, h.request_id, c.code,
           substring(h.explanation FROM '(\d+) ' || c.code || '\M')::int AS nodes
      FROM held h CROSS JOIN LATERAL unnest(h.codes) AS c(code)
), per_code AS (
    SELECT blocked, capability, codes, code, min(nodes) AS lo, max(nodes) AS hi
      FROM counted GROUP BY 1, 2, 3, 4
), groups AS (
    SELECT h.blocked, h.capability, h.codes, count(*) AS requests,
           string_agg(DISTINCT b.kind, ', ') AS kind
      FROM held h JOIN burst b USING (request_id)
     GROUP BY 1, 2, 3
)
SELECT g.blocked, g.requests, g.capability,
       (SELECT string_agg(pc.code || ' ' || pc.lo || CASE WHEN pc.hi > pc.lo THEN '-' || pc.hi ELSE '' END,
                          ', ' ORDER BY pc.hi DESC, pc.code)
          FROM per_code pc
         WHERE (pc.blocked, pc.capability, pc.codes) = (g.blocked, g.capability, g.codes))
         AS "held back by (nodes)",
       g.kind
  FROM groups g
 ORDER BY g.blocked = 'static', g.requests DESC, g.capability, g.kind
 LIMIT 8;

SELECT min(r.request_id) AS waiting_id
  FROM sched.request r JOIN burst b USING (request_id)
 WHERE r.state = 'PENDING' AND b.kind = 'train a100' \gset
\echo
\echo 'One waiting "train a100" request, #':waiting_id', through sched.qualification_reasons(':waiting_id', t0)'
\echo '-- nearest misses first: transient reasons only (they clear as attempts end),'
\echo '-- then the fewest reasons; nodes without a train worker last:'
SELECT node_id, eligible, reasons
  FROM sched.qualification_reasons(:waiting_id, at => :'t0')
 ORDER BY worker_id IS NULL,
          reasons <@ '{no_free_slot,cpu_exhausted,memory_exhausted,gpus_exhausted}' DESC,
          cardinality(reasons), node_id
 LIMIT 8;

\echo 'Invariants after the burst (must all be 0):'
SELECT (SELECT count(*) FROM sched.node
         WHERE reserved_cpu_millis > cpu_millis OR reserved_memory_mb > memory_mb
            OR reserved_gpus > gpus) AS nodes_over_capacity,
       (SELECT count(*) FROM sched.worker WHERE live_attempts > slots) AS workers_over_slots,
       (SELECT count(*) FROM (SELECT step_id, attempt_number FROM sched.attempt
                               GROUP BY 1, 2 HAVING count(*) > 1) s) AS double_attempts,
       (SELECT count(*) FROM sched.request r
         WHERE (r.state = 'DISPATCHED') <> EXISTS (SELECT 1 FROM sched.attempt a
                                                    WHERE a.request_id = r.request_id)) AS request_attempt_mismatch;

-- ---------------------------------------------------------------------------------
-- The end: how to come back to this database
-- ---------------------------------------------------------------------------------
-- The harness stops the demo's cluster when the demo ends; its data directory stays.
-- Its parent is the harness's SCHED_TMP, its name the cluster's (demo).
SELECT regexp_replace(setting, '/[^/]+/?$', '') AS sched_tmp,
       substring(setting FROM '([^/]+)/?$') AS cluster
  FROM pg_settings WHERE name = 'data_directory' \gset
\echo
\echo '=============================================================================='
\echo ' Explore it yourself'
\echo '=============================================================================='
\echo
\echo 'The cluster stops when the demo ends; its data stays in' :sched_tmp/:cluster
\echo 'Start it again (on a free port) and open psql on the demo database:'
\echo
\echo '    SCHED_TMP=':sched_tmp' bash test/harness.sh start' :cluster
\echo '    source ':sched_tmp'/env && psql -d sched_demo'
\echo
\echo 'Everything above happened at t0 = ':t0', so ask the views for that'
\echo 'instant (at now(), every heartbeat has long expired):'
\echo
\echo '    SELECT blocked, count(*) FROM sched.pending(':'t0'') GROUP BY 1;'
\echo '    SELECT * FROM sched.pending(':'t0'') WHERE request_id = ':waiting_id' \\gx'
\echo '    \\a \\t'
\echo '    SELECT sched.explain(':waiting_id', ':'t0'');   -- a line per node, then the closest misses'
\echo
\echo 'Stop it with:'
\echo
\echo '    SCHED_TMP=':sched_tmp' bash test/harness.sh down' :cluster
