--
-- bad_input: every parameter of every function of issue 2 with bad input (SPEC sections
-- 5 and 6): NULL where not allowed (22004), empty strings, negative amounts, label maps
-- that are not objects of strings, non-positive TTLs, bad enum values (22023), unknown
-- ids (42704), stale worker generations and wrong states (55000), identity conflicts
-- (23505).  Each line prints SQLSTATE and message, and names_param: whether the message
-- names the parameter (SPEC section 6: bad input, unknown ids included, is an ERROR
-- "with a message that names the parameter").
-- A snapshot of every sched table (row count and a digest of the row contents) and of
-- the sequences, taken before and after, proves that nothing was written.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pg_sched CASCADE;
CREATE EXTENSION pg_sched;
RESET client_min_messages;
SET TIME ZONE 'UTC';

-- runs q; returns 'no error' or 'SQLSTATE: message'
CREATE FUNCTION pg_temp.err(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

-- whether the message names the parameter (NULL: not checked; identity conflicts,
-- stale generations and wrong states are not about one parameter)
CREATE FUNCTION pg_temp.names(result text, param text) RETURNS boolean
LANGUAGE sql AS $$ SELECT CASE WHEN param IS NOT NULL THEN strpos(result, '"' || param || '"') > 0 END $$;

-- every table of the schema (found in the catalog, so a new table is covered too): row
-- count and digest of all row contents; every sequence: last_value and is_called
CREATE FUNCTION pg_temp.snapshot() RETURNS TABLE (object text, n bigint, digest text)
LANGUAGE plpgsql AS $$
DECLARE
    rel record;
BEGIN
    FOR rel IN SELECT c.relname, c.relkind FROM pg_class c
                WHERE c.relnamespace = 'sched'::regnamespace AND c.relkind IN ('r', 'S')
                ORDER BY c.relname
    LOOP
        object := rel.relname;
        IF rel.relkind = 'r' THEN
            EXECUTE format($f$SELECT count(*), md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), ''))
                                FROM sched.%I t$f$, rel.relname) INTO n, digest;
        ELSE
            EXECUTE format('SELECT last_value, is_called::text FROM sched.%I', rel.relname) INTO n, digest;
        END IF;
        RETURN NEXT;
    END LOOP;
END $$;

-- ---------------------------------------------------------------------------------
-- Fixture: nodes n1 (one live attempt reserving 1000 cpu millis) and n2, workers W1 (on
-- n1, re-registered: generation 2) and W2 (on n2), execution E1 with one dispatched and
-- one pending request, tenant weight for 'acme'.
-- ---------------------------------------------------------------------------------
SELECT node_id, cpu_millis FROM sched.upsert_node('n1', labels => '{"zone":"eu"}', cpu_millis => 4000,
                                                  memory_mb => 4096, gpus => 1);
SELECT node_id, cpu_millis FROM sched.upsert_node('n2', cpu_millis => 4000, memory_mb => 4096);
SELECT * FROM sched.register_worker('n1', 'render', ARRAY['1.0'], slots => 1,
    worker_id => '11111111-0000-0000-0000-000000000001', at => '2024-01-01 11:59:00+00');
SELECT * FROM sched.register_worker('n1', 'render', ARRAY['1.0'], slots => 1,
    at => '2024-01-01 12:00:00+00');
SELECT * FROM sched.register_worker('n2', 'render', ARRAY['1.0'], slots => 1,
    worker_id => '22222222-0000-0000-0000-000000000002', at => '2024-01-01 12:00:00+00');
SELECT sched.submit('e4000000-0000-0000-0000-000000000001', '55000000-0000-0000-0000-000000000001',
                    'render', '1.0', node_id => 'n1', reserve_cpu_millis => 1000,
                    available_at => '2024-01-01 12:00:00+00') AS r1 \gset
SELECT outcome, node_id FROM sched.dispatch_attempt(:r1, at => '2024-01-01 12:00:00+00');
SELECT sched.submit('e4000000-0000-0000-0000-000000000001', '55000000-0000-0000-0000-000000000002',
                    'render', '1.0', available_at => '2024-01-01 13:00:00+00') AS r2 \gset
SELECT * FROM sched.set_tenant_weight('acme', 3);

CREATE TEMP TABLE before AS SELECT * FROM pg_temp.snapshot();
SELECT object, n FROM before ORDER BY object;

-- ---------------------------------------------------------------------------------
-- upsert_node(node_id, labels, cpu_millis, memory_mb, gpus, weight, management_status)
-- ---------------------------------------------------------------------------------
SELECT call, result, pg_temp.names(result, param) AS names_param
  FROM (VALUES
  ('node_id NULL', 'node_id', $q$SELECT sched.upsert_node(NULL)$q$),
  ('node_id empty', 'node_id', $q$SELECT sched.upsert_node('')$q$),
  ('labels array', 'labels', $q$SELECT sched.upsert_node('n9', labels => '[]')$q$),
  ('labels string', 'labels', $q$SELECT sched.upsert_node('n9', labels => '"x"')$q$),
  ('labels number', 'labels', $q$SELECT sched.upsert_node('n9', labels => '1')$q$),
  ('labels json null', 'labels', $q$SELECT sched.upsert_node('n9', labels => 'null')$q$),
  ('labels number value', 'labels', $q$SELECT sched.upsert_node('n9', labels => '{"a":1}')$q$),
  ('labels boolean value', 'labels', $q$SELECT sched.upsert_node('n9', labels => '{"a":true}')$q$),
  ('labels null value', 'labels', $q$SELECT sched.upsert_node('n9', labels => '{"a":null}')$q$),
  ('labels array value', 'labels', $q$SELECT sched.upsert_node('n9', labels => '{"a":["x"]}')$q$),
  ('labels object value', 'labels', $q$SELECT sched.upsert_node('n9', labels => '{"a":{"b":"c"}}')$q$),
  ('labels of existing node', 'labels', $q$SELECT sched.upsert_node('n1', labels => '{"zone":2}')$q$),
  ('cpu_millis negative', 'cpu_millis', $q$SELECT sched.upsert_node('n9', cpu_millis => -1)$q$),
  ('memory_mb negative', 'memory_mb', $q$SELECT sched.upsert_node('n9', memory_mb => -1)$q$),
  ('gpus negative', 'gpus', $q$SELECT sched.upsert_node('n9', gpus => -1)$q$),
  ('management_status bad', 'management_status', $q$SELECT sched.upsert_node('n9', management_status => 'PAUSED')$q$),
  ('management_status lower', 'management_status', $q$SELECT sched.upsert_node('n9', management_status => 'active')$q$),
  ('management_status empty', 'management_status', $q$SELECT sched.upsert_node('n9', management_status => '')$q$),
  ('cpu_millis below reserved', 'cpu_millis', $q$SELECT sched.upsert_node('n1', cpu_millis => 999)$q$)
) AS t(call, param, q), LATERAL pg_temp.err(q) AS result;

-- ---------------------------------------------------------------------------------
-- register_worker(node_id, capability, capability_versions, slots, worker_id, at)
-- ---------------------------------------------------------------------------------
SELECT call, result, pg_temp.names(result, param) AS names_param
  FROM (VALUES
  ('node_id NULL', 'node_id', $q$SELECT sched.register_worker(NULL, 'render', ARRAY['1.0'], 1, at => '2024-01-01 12:00:00+00')$q$),
  ('node_id empty', 'node_id', $q$SELECT sched.register_worker('', 'render', ARRAY['1.0'], 1, at => '2024-01-01 12:00:00+00')$q$),
  ('node_id unknown', 'node_id', $q$SELECT sched.register_worker('nope', 'render', ARRAY['1.0'], 1, at => '2024-01-01 12:00:00+00')$q$),
  ('capability NULL', 'capability', $q$SELECT sched.register_worker('n2', NULL, ARRAY['1.0'], 1, at => '2024-01-01 12:00:00+00')$q$),
  ('capability empty', 'capability', $q$SELECT sched.register_worker('n2', '', ARRAY['1.0'], 1, at => '2024-01-01 12:00:00+00')$q$),
  ('capability_versions NULL', 'capability_versions', $q$SELECT sched.register_worker('n2', 'x', NULL, 1, at => '2024-01-01 12:00:00+00')$q$),
  ('capability_versions {}', 'capability_versions', $q$SELECT sched.register_worker('n2', 'x', '{}', 1, at => '2024-01-01 12:00:00+00')$q$),
  ('capability_versions {""}', 'capability_versions', $q$SELECT sched.register_worker('n2', 'x', ARRAY[''], 1, at => '2024-01-01 12:00:00+00')$q$),
  ('capability_versions NULL element', 'capability_versions', $q$SELECT sched.register_worker('n2', 'x', ARRAY['1.0', NULL], 1, at => '2024-01-01 12:00:00+00')$q$),
  ('slots NULL', 'slots', $q$SELECT sched.register_worker('n2', 'x', ARRAY['1.0'], NULL, at => '2024-01-01 12:00:00+00')$q$),
  ('slots negative', 'slots', $q$SELECT sched.register_worker('n2', 'x', ARRAY['1.0'], -1, at => '2024-01-01 12:00:00+00')$q$),
  ('slots below live attempts', 'slots', $q$SELECT sched.register_worker('n1', 'render', ARRAY['1.0'], 0, at => '2024-01-01 12:00:00+00')$q$),
  ('worker_id of other worker', NULL, $q$SELECT sched.register_worker('n2', 'x', ARRAY['1.0'], 1, worker_id => '11111111-0000-0000-0000-000000000001', at => '2024-01-01 12:00:00+00')$q$),
  ('worker_id differs from existing', NULL, $q$SELECT sched.register_worker('n2', 'render', ARRAY['1.0'], 1, worker_id => '33333333-0000-0000-0000-000000000003', at => '2024-01-01 12:00:00+00')$q$),
  ('at NULL', 'at', $q$SELECT sched.register_worker('n2', 'x', ARRAY['1.0'], 1, at => NULL)$q$)
) AS t(call, param, q), LATERAL pg_temp.err(q) AS result;

-- ---------------------------------------------------------------------------------
-- heartbeat(worker_id, generation, at, runtime_state); W1 is at generation 2
-- ---------------------------------------------------------------------------------
SELECT call, result, pg_temp.names(result, param) AS names_param
  FROM (VALUES
  ('worker_id NULL', 'worker_id', $q$SELECT sched.heartbeat(NULL, 1, '2024-01-01 12:00:00+00')$q$),
  ('worker_id unknown', 'worker_id', $q$SELECT sched.heartbeat('99999999-0000-0000-0000-000000000009', 1, '2024-01-01 12:00:00+00')$q$),
  ('generation NULL', 'generation', $q$SELECT sched.heartbeat('11111111-0000-0000-0000-000000000001', NULL, '2024-01-01 12:00:00+00')$q$),
  ('generation stale', NULL, $q$SELECT sched.heartbeat('11111111-0000-0000-0000-000000000001', 1, '2024-01-01 12:00:05+00')$q$),
  ('generation from future', NULL, $q$SELECT sched.heartbeat('11111111-0000-0000-0000-000000000001', 3, '2024-01-01 12:00:05+00')$q$),
  ('at NULL', 'at', $q$SELECT sched.heartbeat('11111111-0000-0000-0000-000000000001', 2, NULL)$q$),
  ('runtime_state NULL', 'runtime_state', $q$SELECT sched.heartbeat('11111111-0000-0000-0000-000000000001', 2, '2024-01-01 12:00:05+00', NULL)$q$),
  ('runtime_state empty', 'runtime_state', $q$SELECT sched.heartbeat('11111111-0000-0000-0000-000000000001', 2, '2024-01-01 12:00:05+00', '')$q$),
  ('runtime_state bad', 'runtime_state', $q$SELECT sched.heartbeat('11111111-0000-0000-0000-000000000001', 2, '2024-01-01 12:00:05+00', 'RUNNING')$q$),
  ('runtime_state lower', 'runtime_state', $q$SELECT sched.heartbeat('11111111-0000-0000-0000-000000000001', 2, '2024-01-01 12:00:05+00', 'ready')$q$)
) AS t(call, param, q), LATERAL pg_temp.err(q) AS result;

-- ---------------------------------------------------------------------------------
-- drain_node(node_id), cordon_worker(worker_id), uncordon_worker(worker_id)
-- ---------------------------------------------------------------------------------
SELECT call, result, pg_temp.names(result, param) AS names_param
  FROM (VALUES
  ('drain_node node_id NULL', 'node_id', $q$SELECT sched.drain_node(NULL)$q$),
  ('drain_node node_id empty', 'node_id', $q$SELECT sched.drain_node('')$q$),
  ('drain_node node_id unknown', 'node_id', $q$SELECT sched.drain_node('nope')$q$),
  ('cordon_worker worker_id NULL', 'worker_id', $q$SELECT sched.cordon_worker(NULL)$q$),
  ('cordon_worker worker_id unknown', 'worker_id', $q$SELECT sched.cordon_worker('99999999-0000-0000-0000-000000000009')$q$),
  ('uncordon_worker worker_id NULL', 'worker_id', $q$SELECT sched.uncordon_worker(NULL)$q$),
  ('uncordon_worker worker_id unknown', 'worker_id', $q$SELECT sched.uncordon_worker('99999999-0000-0000-0000-000000000009')$q$)
) AS t(call, param, q), LATERAL pg_temp.err(q) AS result;

-- ---------------------------------------------------------------------------------
-- submit(execution_id, step_id, capability, capability_version, attempt_number, tenant,
--        priority, required_labels, preferred_labels, min_*, reserve_*, node_id,
--        max_attempts, available_at).  A fresh execution and step unless stated.
-- ---------------------------------------------------------------------------------
SELECT call, result,
       pg_temp.names(result, CASE WHEN call <> 'step of another execution' THEN split_part(call, ' ', 1) END)
         AS names_param
  FROM (VALUES
  ('execution_id NULL',       'NULL', NULL, NULL, NULL, ''),
  ('step_id NULL',            NULL, 'NULL', NULL, NULL, ''),
  ('capability NULL',         NULL, NULL, 'NULL', NULL, ''),
  ('capability empty',        NULL, NULL, $$''$$, NULL, ''),
  ('capability_version NULL', NULL, NULL, NULL, 'NULL', ''),
  ('capability_version empty', NULL, NULL, NULL, $$''$$, ''),
  ('attempt_number NULL',     NULL, NULL, NULL, NULL, ', attempt_number => NULL'),
  ('attempt_number 0',        NULL, NULL, NULL, NULL, ', attempt_number => 0'),
  ('attempt_number negative', NULL, NULL, NULL, NULL, ', attempt_number => -1'),
  ('tenant NULL',             NULL, NULL, NULL, NULL, ', tenant => NULL'),
  ('tenant empty',            NULL, NULL, NULL, NULL, $$, tenant => ''$$),
  ('priority NULL',           NULL, NULL, NULL, NULL, ', priority => NULL'),
  ('required_labels NULL',    NULL, NULL, NULL, NULL, ', required_labels => NULL'),
  ('required_labels array',   NULL, NULL, NULL, NULL, $$, required_labels => '[]'$$),
  ('required_labels string',  NULL, NULL, NULL, NULL, $$, required_labels => '"x"'$$),
  ('required_labels number',  NULL, NULL, NULL, NULL, $$, required_labels => '1'$$),
  ('required_labels number value', NULL, NULL, NULL, NULL, $$, required_labels => '{"a":1}'$$),
  ('preferred_labels NULL',   NULL, NULL, NULL, NULL, ', preferred_labels => NULL'),
  ('preferred_labels array',  NULL, NULL, NULL, NULL, $$, preferred_labels => '[]'$$),
  ('preferred_labels string', NULL, NULL, NULL, NULL, $$, preferred_labels => '"x"'$$),
  ('preferred_labels number', NULL, NULL, NULL, NULL, $$, preferred_labels => '1'$$),
  ('preferred_labels number value', NULL, NULL, NULL, NULL, $$, preferred_labels => '{"a":1}'$$),
  ('min_cpu_millis NULL',     NULL, NULL, NULL, NULL, ', min_cpu_millis => NULL'),
  ('min_cpu_millis negative', NULL, NULL, NULL, NULL, ', min_cpu_millis => -1'),
  ('min_memory_mb NULL',      NULL, NULL, NULL, NULL, ', min_memory_mb => NULL'),
  ('min_memory_mb negative',  NULL, NULL, NULL, NULL, ', min_memory_mb => -1'),
  ('min_gpus NULL',           NULL, NULL, NULL, NULL, ', min_gpus => NULL'),
  ('min_gpus negative',       NULL, NULL, NULL, NULL, ', min_gpus => -1'),
  ('reserve_cpu_millis NULL', NULL, NULL, NULL, NULL, ', reserve_cpu_millis => NULL'),
  ('reserve_cpu_millis negative', NULL, NULL, NULL, NULL, ', reserve_cpu_millis => -1'),
  ('reserve_memory_mb NULL',  NULL, NULL, NULL, NULL, ', reserve_memory_mb => NULL'),
  ('reserve_memory_mb negative', NULL, NULL, NULL, NULL, ', reserve_memory_mb => -1'),
  ('reserve_gpus NULL',       NULL, NULL, NULL, NULL, ', reserve_gpus => NULL'),
  ('reserve_gpus negative',   NULL, NULL, NULL, NULL, ', reserve_gpus => -1'),
  ('node_id empty',           NULL, NULL, NULL, NULL, $$, node_id => ''$$),
  ('max_attempts NULL',       NULL, NULL, NULL, NULL, ', max_attempts => NULL'),
  ('max_attempts 0',          NULL, NULL, NULL, NULL, ', max_attempts => 0'),
  ('available_at NULL',       NULL, NULL, NULL, NULL, ', available_at => NULL'),
  ('step of another execution', NULL, $$'55000000-0000-0000-0000-000000000001'$$, NULL, NULL, '')
  ) AS v(call, ex0, st0, cap0, ver0, extra),
  LATERAL (SELECT coalesce(ex0, $$'e4000000-0000-0000-0000-000000000099'$$) AS ex,
                  coalesce(st0, $$'55000000-0000-0000-0000-000000000099'$$) AS st,
                  coalesce(cap0, $$'render'$$) AS cap,
                  coalesce(ver0, $$'1.0'$$) AS ver) AS d,
  LATERAL pg_temp.err(format(
         'SELECT sched.submit(execution_id => %s, step_id => %s, capability => %s, capability_version => %s%s)',
         ex, st, cap, ver, extra)) AS result;

-- ---------------------------------------------------------------------------------
-- claim_requests(max_requests, claim_ttl, capability, tenant, at)
-- ---------------------------------------------------------------------------------
SELECT call, result, pg_temp.names(result, param) AS names_param
  FROM (VALUES
  ('max_requests NULL', 'max_requests', $q$SELECT * FROM sched.claim_requests(max_requests => NULL, at => '2024-01-01 14:00:00+00')$q$),
  ('max_requests 0', 'max_requests', $q$SELECT * FROM sched.claim_requests(max_requests => 0, at => '2024-01-01 14:00:00+00')$q$),
  ('max_requests negative', 'max_requests', $q$SELECT * FROM sched.claim_requests(max_requests => -1, at => '2024-01-01 14:00:00+00')$q$),
  ('claim_ttl NULL', 'claim_ttl', $q$SELECT * FROM sched.claim_requests(claim_ttl => NULL, at => '2024-01-01 14:00:00+00')$q$),
  ('claim_ttl 0 s', 'claim_ttl', $q$SELECT * FROM sched.claim_requests(claim_ttl => '0 s', at => '2024-01-01 14:00:00+00')$q$),
  ('claim_ttl -1 s', 'claim_ttl', $q$SELECT * FROM sched.claim_requests(claim_ttl => '-1 s', at => '2024-01-01 14:00:00+00')$q$),
  ('capability empty', 'capability', $q$SELECT * FROM sched.claim_requests(capability => '', at => '2024-01-01 14:00:00+00')$q$),
  ('tenant empty', 'tenant', $q$SELECT * FROM sched.claim_requests(tenant => '', at => '2024-01-01 14:00:00+00')$q$),
  ('at NULL', 'at', $q$SELECT * FROM sched.claim_requests(at => NULL)$q$)
) AS t(call, param, q), LATERAL pg_temp.err(q) AS result;

-- ---------------------------------------------------------------------------------
-- select_candidate, rank_candidates, qualification_reasons (placement parameters):
-- the same bad arguments for each of the three functions.
-- ---------------------------------------------------------------------------------
SELECT fn, call, result, pg_temp.names(result, split_part(call, ' ', 1)) AS names_param
  FROM unnest(ARRAY['select_candidate', 'rank_candidates', 'qualification_reasons'])
         WITH ORDINALITY AS f(fn, fno),
       (VALUES
  (1, 'capability NULL',         'NULL', NULL, ''),
  (2, 'capability empty',        $$''$$, NULL, ''),
  (3, 'capability_version NULL', NULL, 'NULL', ''),
  (4, 'capability_version empty', NULL, $$''$$, ''),
  (5, 'required_labels NULL',    NULL, NULL, ', required_labels => NULL'),
  (6, 'required_labels array',   NULL, NULL, $$, required_labels => '[]'$$),
  (7, 'required_labels string',  NULL, NULL, $$, required_labels => '"x"'$$),
  (8, 'required_labels number',  NULL, NULL, $$, required_labels => '1'$$),
  (9, 'required_labels number value', NULL, NULL, $$, required_labels => '{"a":1}'$$),
  (10, 'preferred_labels NULL',   NULL, NULL, ', preferred_labels => NULL'),
  (11, 'preferred_labels array',  NULL, NULL, $$, preferred_labels => '[]'$$),
  (12, 'preferred_labels string', NULL, NULL, $$, preferred_labels => '"x"'$$),
  (13, 'preferred_labels number', NULL, NULL, $$, preferred_labels => '1'$$),
  (14, 'preferred_labels number value', NULL, NULL, $$, preferred_labels => '{"a":1}'$$),
  (15, 'min_cpu_millis NULL',     NULL, NULL, ', min_cpu_millis => NULL'),
  (16, 'min_cpu_millis negative', NULL, NULL, ', min_cpu_millis => -1'),
  (17, 'min_memory_mb NULL',      NULL, NULL, ', min_memory_mb => NULL'),
  (18, 'min_memory_mb negative',  NULL, NULL, ', min_memory_mb => -1'),
  (19, 'min_gpus NULL',           NULL, NULL, ', min_gpus => NULL'),
  (20, 'min_gpus negative',       NULL, NULL, ', min_gpus => -1'),
  (21, 'reserve_cpu_millis NULL', NULL, NULL, ', reserve_cpu_millis => NULL'),
  (22, 'reserve_cpu_millis negative', NULL, NULL, ', reserve_cpu_millis => -1'),
  (23, 'reserve_memory_mb NULL',  NULL, NULL, ', reserve_memory_mb => NULL'),
  (24, 'reserve_memory_mb negative', NULL, NULL, ', reserve_memory_mb => -1'),
  (25, 'reserve_gpus NULL',       NULL, NULL, ', reserve_gpus => NULL'),
  (26, 'reserve_gpus negative',   NULL, NULL, ', reserve_gpus => -1'),
  (27, 'node_id empty',           NULL, NULL, $$, node_id => ''$$),
  (28, 'heartbeat_ttl 0 s',       NULL, NULL, $$, heartbeat_ttl => '0 s'$$),
  (29, 'heartbeat_ttl -1 s',      NULL, NULL, $$, heartbeat_ttl => '-1 s'$$),
  (30, 'heartbeat_ttl 1 day ago', NULL, NULL, $$, heartbeat_ttl => '-1 day'$$),
  (31, 'at NULL',                 NULL, NULL, ', at => NULL')
  ) AS v(cno, call, cap, ver, extra),
  LATERAL pg_temp.err(format(
         'SELECT * FROM sched.%s(capability => %s, capability_version => %s%s)',
         fn, coalesce(cap, $$'render'$$), coalesce(ver, $$'1.0'$$), extra)) AS result
 ORDER BY fno, cno;

-- ---------------------------------------------------------------------------------
-- qualification_reasons(request_id, at), dispatch_attempt(request_id, claim_id, at)
-- ---------------------------------------------------------------------------------
SELECT call, result, pg_temp.names(result, param) AS names_param
  FROM (VALUES
  ('qualification_reasons request_id NULL', 'request_id', $q$SELECT * FROM sched.qualification_reasons(request_id => NULL, at => '2024-01-01 12:00:00+00')$q$),
  ('qualification_reasons request_id unknown', 'request_id', $q$SELECT * FROM sched.qualification_reasons(request_id => 999999, at => '2024-01-01 12:00:00+00')$q$),
  ('qualification_reasons at NULL', 'at', format($q$SELECT * FROM sched.qualification_reasons(request_id => %s, at => NULL)$q$, :r2)),
  ('dispatch_attempt request_id NULL', 'request_id', $q$SELECT * FROM sched.dispatch_attempt(NULL, at => '2024-01-01 13:00:00+00')$q$),
  ('dispatch_attempt request_id unknown', 'request_id', $q$SELECT * FROM sched.dispatch_attempt(999999, at => '2024-01-01 13:00:00+00')$q$),
  ('dispatch_attempt at NULL', 'at', format($q$SELECT * FROM sched.dispatch_attempt(%s, at => NULL)$q$, :r2))
) AS t(call, param, q), LATERAL pg_temp.err(q) AS result;

-- ---------------------------------------------------------------------------------
-- set_tenant_weight(tenant, weight); complete_execution / cancel_execution(execution_id, at)
-- ---------------------------------------------------------------------------------
SELECT call, result, pg_temp.names(result, param) AS names_param
  FROM (VALUES
  ('set_tenant_weight tenant NULL', 'tenant', $q$SELECT sched.set_tenant_weight(NULL, 2)$q$),
  ('set_tenant_weight tenant empty', 'tenant', $q$SELECT sched.set_tenant_weight('', 2)$q$),
  ('set_tenant_weight weight NULL', 'weight', $q$SELECT sched.set_tenant_weight('acme', NULL)$q$),
  ('set_tenant_weight weight 0', 'weight', $q$SELECT sched.set_tenant_weight('acme', 0)$q$),
  ('set_tenant_weight weight negative', 'weight', $q$SELECT sched.set_tenant_weight('acme', -1)$q$),
  ('complete_execution execution_id NULL', 'execution_id', $q$SELECT sched.complete_execution(NULL, '2024-01-01 12:00:00+00')$q$),
  ('complete_execution execution_id unknown', 'execution_id', $q$SELECT sched.complete_execution('e4000000-0000-0000-0000-000000000999', '2024-01-01 12:00:00+00')$q$),
  ('complete_execution at NULL', 'at', $q$SELECT sched.complete_execution('e4000000-0000-0000-0000-000000000001', NULL)$q$),
  ('complete_execution with pending work', NULL, $q$SELECT sched.complete_execution('e4000000-0000-0000-0000-000000000001', '2024-01-01 12:00:00+00')$q$),
  ('cancel_execution execution_id NULL', 'execution_id', $q$SELECT sched.cancel_execution(NULL, '2024-01-01 12:00:00+00')$q$),
  ('cancel_execution execution_id unknown', 'execution_id', $q$SELECT sched.cancel_execution('e4000000-0000-0000-0000-000000000999', '2024-01-01 12:00:00+00')$q$),
  ('cancel_execution at NULL', 'at', $q$SELECT sched.cancel_execution('e4000000-0000-0000-0000-000000000001', NULL)$q$)
) AS t(call, param, q), LATERAL pg_temp.err(q) AS result;

-- ---------------------------------------------------------------------------------
-- Nothing was written: every table and sequence is as before.
-- ---------------------------------------------------------------------------------
SELECT b.object, b.n AS n_before, a.n AS n_after,
       b.n = a.n AND b.digest = a.digest AS unchanged
  FROM before b JOIN pg_temp.snapshot() a USING (object)
 ORDER BY b.object;

-- and no error left a transaction open or aborted: a plain call still works
SELECT worker_id, generation, runtime_state
  FROM sched.heartbeat('11111111-0000-0000-0000-000000000001', 2, '2024-01-01 12:00:05+00');
