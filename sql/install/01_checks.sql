-- sql/install/01_checks.sql — the input checks the PL/pgSQL functions share (the C
-- functions call src/validate.c, which implements the C ones here, so each rule has one
-- routine).  A piece of pg_sched--0.2.0.sql (the Makefile builds it from
-- sql/install/*.sql in the order of their names) and of the upgrade from 0.1.0, hence
-- CREATE OR REPLACE.  Internal: no role but the extension's owner may call them.

-- ---------------------------------------------------------------------------------
-- Input checks shared by the PL/pgSQL functions (C functions use src/validate.c, which
-- also implements sched._check_labels so label maps are checked by one routine).
-- All raise ERROR naming the parameter: 22004 for NULL, 22023 for an invalid value,
-- 22008 for a time out of range, 54000 beyond the limits of README "Limits".
-- ---------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION sched._check_labels(labels jsonb, parameter text)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'sched_check_labels'
LANGUAGE C IMMUTABLE;

/* Required labels: strings or operator objects (README, "Label expressions"), parsed
 * by the routine placement reads them with (validate.c). */
CREATE OR REPLACE FUNCTION sched._check_required_labels(labels jsonb, parameter text)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'sched_check_required_labels'
LANGUAGE C IMMUTABLE;

/* The static queue key of SPEC section 7 (ascending = earlier): epoch(queued_at) -
 * priority * sched.aging_interval, in seconds. */
CREATE OR REPLACE FUNCTION sched._queue_key(priority int, queued_at timestamptz)
RETURNS double precision
AS 'MODULE_PATHNAME', 'sched_queue_key'
LANGUAGE C STABLE STRICT;

CREATE OR REPLACE FUNCTION sched._require(value anyelement, parameter text)
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

CREATE OR REPLACE FUNCTION sched._require_text(value text, parameter text)
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
    RETURN sched._check_name(value, parameter);
END
$$;

CREATE OR REPLACE FUNCTION sched._check_nonnegative(value bigint, parameter text)
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

CREATE OR REPLACE FUNCTION sched._check_one_of(value text, parameter text, allowed text[])
RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM sched._check_name(value, parameter);
    IF value IS NOT NULL AND NOT (value = ANY (allowed)) THEN
        RAISE EXCEPTION 'invalid value for parameter "%": "%"', parameter, value
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('Valid values are %s.', array_to_string(allowed, ', '));
    END IF;
    RETURN value;
END
$$;

/* The one error for an unknown id: 42704, naming the parameter that carried it. */
CREATE OR REPLACE FUNCTION sched._unknown(kind text, id text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION '% "%" does not exist (parameter "%_id")', kind, id, kind
        USING ERRCODE = 'undefined_object';
END
$$;

/* The length limit of names (node_id, capability, capability_version, tenant, ...):
 * 54000 beyond it. */
CREATE OR REPLACE FUNCTION sched._check_name(value text, parameter text)
RETURNS text
AS 'MODULE_PATHNAME', 'sched_check_name'
LANGUAGE C IMMUTABLE;

/* A worker's capability versions: a one-dimensional, non-empty array of non-empty
 * names, at most 64 (22004, 22023, 54000). */
CREATE OR REPLACE FUNCTION sched._check_versions(capability_versions text[])
RETURNS text[]
AS 'MODULE_PATHNAME', 'sched_check_versions'
LANGUAGE C IMMUTABLE;

/* A time parameter: finite, from 1900-01-01 to 9999-12-31 UTC (22008). */
CREATE OR REPLACE FUNCTION sched._check_time(value timestamptz, parameter text)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'sched_check_time_sql'
LANGUAGE C IMMUTABLE;

/* The same, public, and refusing NULL (22004): value, when it is a time pg_sched's
 * functions take.  sched.pending(at) checks its `at` with it (it runs inlined in its
 * caller's query, with the caller's privileges, which do not reach the helpers). */
CREATE OR REPLACE FUNCTION sched.check_time(value timestamptz, parameter text DEFAULT 'value')
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'sched_check_time_public'
LANGUAGE C IMMUTABLE;
