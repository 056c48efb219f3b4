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
    preferred_matches int, weight int, running_attempts int, spread_matches int);

CREATE TYPE sched.qualification AS (
    node_id text, worker_id uuid, eligible boolean, reasons text[], score bigint);

CREATE TYPE sched.dispatch_result AS (
    outcome text, request_id bigint, attempt_id uuid, node_id text, worker_id uuid,
    lease_version bigint, score bigint, detail text);

CREATE TYPE sched.registration AS (worker_id uuid, generation bigint);

CREATE TYPE sched.claim AS (request_id bigint, claim_id uuid, claimed_until timestamptz);
