/*
 * pg_sched 0.2.0 — install script.  The Makefile builds pg_sched--0.2.0.sql from the
 * pieces in directory sql/install, in the order of their names, one per stage:
 * 00_schema (this one: the schema, result types, input checks), 10_fleet, 20_work,
 * 30_dispatch, 40_lifecycle, 50_diagnostics, 90_privileges.  A database at 0.1.0 is
 * brought to the same objects by pg_sched--0.1.0--0.2.0.sql (test/upgrade proves it).
 *
 * Tables hold the fleet (node, worker), the work (execution, request, attempt), what
 * workers are told (command) and what happened (timeline).  Writes go through the
 * functions below; placement, reservation, the queue and the attempt lifecycle are C
 * (src/), fleet and submission bookkeeping are PL/pgSQL.
 *
 * Reservation invariant, enforced twice: the reservation transaction (src/reservation.c)
 * re-checks admission under row locks, and CHECK constraints refuse any row where live
 * attempts exceed slots or reservations exceed capacity.  The counters on node and worker
 * are maintained only by src/batch.c, which writes reservations and their release (when
 * src/lifecycle.c ends an attempt), in the same transaction as the attempt row they count.
 */

\echo Use "CREATE EXTENSION pg_sched" to load this file. \quit

CREATE SCHEMA sched;
COMMENT ON SCHEMA sched IS 'pg_sched: task attempt scheduler';

-- ---------------------------------------------------------------------------------
-- Result types (functions whose results reuse parameter names return these)
-- ---------------------------------------------------------------------------------

CREATE TYPE sched.candidate AS (node_id text, worker_id uuid, score bigint);

CREATE TYPE sched.ranked_candidate AS (
    rank int, node_id text, worker_id uuid, score bigint,
    preferred_matches int, weight int, running_attempts int);

CREATE TYPE sched.qualification AS (
    node_id text, worker_id uuid, eligible boolean, reasons text[], score bigint);

CREATE TYPE sched.dispatch_result AS (
    outcome text, request_id bigint, attempt_id uuid, node_id text, worker_id uuid,
    lease_version bigint, score bigint, detail text);

CREATE TYPE sched.registration AS (worker_id uuid, generation bigint);

CREATE TYPE sched.claim AS (request_id bigint, claim_id uuid, claimed_until timestamptz);

-- ---------------------------------------------------------------------------------
-- Input checks shared by the PL/pgSQL functions (C functions use src/validate.c, which
-- also implements sched._check_labels so label maps are checked by one routine).
-- All raise ERROR: 22004 for NULL, 22023 for an invalid value, naming the parameter.
-- ---------------------------------------------------------------------------------

CREATE FUNCTION sched._check_labels(labels jsonb, parameter text)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'sched_check_labels'
LANGUAGE C IMMUTABLE;

/* The static queue key of SPEC section 7 (ascending = earlier): epoch(queued_at) -
 * priority * sched.aging_interval, in seconds. */
CREATE FUNCTION sched._queue_key(priority int, queued_at timestamptz)
RETURNS double precision
AS 'MODULE_PATHNAME', 'sched_queue_key'
LANGUAGE C STABLE STRICT;

CREATE FUNCTION sched._require(value anyelement, parameter text)
RETURNS anyelement
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF value IS NULL THEN
        RAISE EXCEPTION 'parameter "%" must not be NULL', parameter
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    RETURN value;
END
$$;

CREATE FUNCTION sched._require_text(value text, parameter text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF value IS NULL THEN
        RAISE EXCEPTION 'parameter "%" must not be NULL', parameter
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF value = '' THEN
        RAISE EXCEPTION 'parameter "%" must not be empty', parameter
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN value;
END
$$;

CREATE FUNCTION sched._check_nonnegative(value bigint, parameter text)
RETURNS bigint
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF value < 0 THEN
        RAISE EXCEPTION 'parameter "%" must not be negative: %', parameter, value
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN value;
END
$$;

CREATE FUNCTION sched._check_one_of(value text, parameter text, allowed text[])
RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF value IS NOT NULL AND NOT (value = ANY (allowed)) THEN
        RAISE EXCEPTION 'invalid value for parameter "%": "%"', parameter, value
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('Valid values are %s.', array_to_string(allowed, ', '));
    END IF;
    RETURN value;
END
$$;

/* The one error for an unknown id: 42704, naming the parameter that carried it. */
CREATE FUNCTION sched._unknown(kind text, id text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION '% "%" does not exist (parameter "%_id")', kind, id, kind
        USING ERRCODE = 'undefined_object';
END
$$;

