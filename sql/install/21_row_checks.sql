-- sql/install/21_row_checks.sql — the CHECK constraints of the five tables a placement and
-- the end of an attempt write (sched.node, sched.worker, sched.request, sched.attempt,
-- sched.command): one constraint per table, which calls a C function with the whole row
-- (src/row_checks.c).  The executor parses every CHECK expression of a table again at
-- each statement that writes it; the 26 separate constraints these replace made a single
-- placement 20% slower.
--
-- Each function refuses exactly what the constraint of the same name refused before
-- (a condition that is NULL passes), with PostgreSQL's error for a CHECK constraint:
-- SQLSTATE 23514, 'new row for relation "node" violates check constraint
-- "node_cpu_reserved_within_capacity"', and the schema, table and constraint fields:
--   sched.node     node_cpu_nonnegative                 cpu_millis >= 0
--                  node_cpu_reserved_within_capacity    reserved_cpu_millis BETWEEN 0 AND cpu_millis
--                  node_gpus_nonnegative                gpus >= 0
--                  node_gpus_reserved_within_capacity   reserved_gpus BETWEEN 0 AND gpus
--                  node_id_not_empty                    node_id <> ''
--                  node_labels_object                   jsonb_typeof(labels) = 'object'
--                  node_live_attempts_nonnegative       live_attempts >= 0
--                  node_management_status_valid         management_status IN ('ACTIVE', 'DRAINING', 'DISABLED')
--                  node_memory_nonnegative              memory_mb >= 0
--                  node_memory_reserved_within_capacity reserved_memory_mb BETWEEN 0 AND memory_mb
--   sched.worker   worker_capability_not_empty          capability <> ''
--                  worker_live_attempts_within_slots    live_attempts BETWEEN 0 AND slots
--                  worker_runtime_state_valid           runtime_state IN ('STARTING', 'READY', 'DRAINING', 'STOPPED')
--                  worker_scheduling_status_valid       scheduling_status IN ('ELIGIBLE', 'CORDONED')
--                  worker_slots_nonnegative             slots >= 0
--                  worker_versions_not_empty            cardinality(capability_versions) > 0
--   sched.request  request_amounts_nonnegative          min_cpu_millis, min_memory_mb, min_gpus, reserve_cpu_millis,
--                                                       reserve_memory_mb, reserve_gpus all >= 0
--                  request_attempt_number_positive      attempt_number >= 1
--                  request_claim_consistent             (state = 'CLAIMED') = (claim_id IS NOT NULL)
--                  request_hold_consistent              held_node_id, held_worker_id, held_until all NULL or none
--                  request_state_valid                  state IN ('PENDING', 'CLAIMED', 'DISPATCHED', 'CANCELLED')
--   sched.attempt  attempt_finished_when_terminal       (status IN ('DISPATCHED', 'RUNNING')) = (finished_at IS NULL)
--                  attempt_status_valid                 status IN ('DISPATCHED', 'RUNNING', 'SUCCEEDED', 'FAILED',
--                                                       'CANCELLED', 'LOST', 'PREEMPTED')
--   sched.command  command_delivered_no_earlier         delivered_generation >= worker_generation
--                  command_delivered_whole              (delivered_at IS NULL) = (delivered_generation IS NULL)
--                  command_kind_valid                   kind IN ('START', 'CANCEL')
-- When a row breaks several, the first by name is reported (PostgreSQL's order).
--
-- A piece of the install script and of the upgrade from 0.1.0, written to be run again:
-- the constraints of 0.1.0 (and those its upgrade adds) are dropped where they exist, and
-- each table's constraint is added once.

CREATE OR REPLACE FUNCTION sched._node_valid(sched.node) RETURNS boolean
AS 'MODULE_PATHNAME', 'sched_node_valid'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE OR REPLACE FUNCTION sched._worker_valid(sched.worker) RETURNS boolean
AS 'MODULE_PATHNAME', 'sched_worker_valid'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE OR REPLACE FUNCTION sched._request_valid(sched.request) RETURNS boolean
AS 'MODULE_PATHNAME', 'sched_request_valid'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE OR REPLACE FUNCTION sched._attempt_valid(sched.attempt) RETURNS boolean
AS 'MODULE_PATHNAME', 'sched_attempt_valid'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE OR REPLACE FUNCTION sched._command_valid(sched.command) RETURNS boolean
AS 'MODULE_PATHNAME', 'sched_command_valid'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

DO $$
DECLARE
    c record;
BEGIN
    FOR c IN
        SELECT con.conrelid::pg_catalog.regclass AS rel, con.conname
          FROM pg_catalog.pg_constraint con
         WHERE con.contype = 'c'
           AND con.conrelid IN ('sched.node'::pg_catalog.regclass, 'sched.worker'::pg_catalog.regclass,
                                'sched.request'::pg_catalog.regclass, 'sched.attempt'::pg_catalog.regclass,
                                'sched.command'::pg_catalog.regclass)
           AND con.conname IN (
               'node_cpu_nonnegative', 'node_cpu_reserved_within_capacity', 'node_gpus_nonnegative',
               'node_gpus_reserved_within_capacity', 'node_id_not_empty', 'node_labels_object',
               'node_live_attempts_nonnegative', 'node_management_status_valid',
               'node_memory_nonnegative', 'node_memory_reserved_within_capacity',
               'worker_capability_not_empty', 'worker_live_attempts_within_slots',
               'worker_runtime_state_valid', 'worker_scheduling_status_valid',
               'worker_slots_nonnegative', 'worker_versions_not_empty',
               'request_amounts_nonnegative', 'request_attempt_number_positive',
               'request_claim_consistent', 'request_hold_consistent', 'request_state_valid',
               'attempt_finished_when_terminal', 'attempt_status_valid',
               'command_delivered_no_earlier', 'command_delivered_whole', 'command_kind_valid')
    LOOP
        EXECUTE pg_catalog.format('ALTER TABLE %s DROP CONSTRAINT %I', c.rel, c.conname);
    END LOOP;
    -- each table's constraint: <table>_valid CHECK (sched._<table>_valid(<table>.*))
    FOR c IN SELECT t.name FROM pg_catalog.unnest(ARRAY['node', 'worker', 'request', 'attempt', 'command']) t(name)
              WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_constraint con
                                 WHERE con.conrelid = pg_catalog.format('sched.%I', t.name)::pg_catalog.regclass
                                   AND con.conname = t.name OPERATOR(pg_catalog.||) '_valid')
    LOOP
        EXECUTE pg_catalog.format('ALTER TABLE sched.%1$I ADD CONSTRAINT %2$I CHECK (sched.%3$I(%1$I))',
                                  c.name, c.name OPERATOR(pg_catalog.||) '_valid',
                                  '_' OPERATOR(pg_catalog.||) c.name OPERATOR(pg_catalog.||) '_valid');
    END LOOP;
END
$$;
