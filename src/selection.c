/*
 * selection.c — stages 2 and 3 as SQL functions: select_candidate, rank_candidates and
 * both forms of qualification_reasons.  All are read-only (STABLE), take no locks, and
 * are a pure function of (fleet snapshot, request, at): they read the fleet once and
 * hand it to the placement core, whose sched_admission() is also what dispatch uses.
 */
#include "postgres.h"

#include "fleet_mirror.h"
#include "validate.h"
#include "spi_util.h"
#include "spread.h"

#include "catalog/pg_type.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"

PG_FUNCTION_INFO_V1(sched_select_candidate);
PG_FUNCTION_INFO_V1(sched_rank_candidates);
PG_FUNCTION_INFO_V1(sched_qualification_reasons);
PG_FUNCTION_INFO_V1(sched_qualification_reasons_for_request);

static void
connect_spi(void)
{
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pg_sched: SPI_connect failed");
}

/* The best admitted pair alone (one pass, no sort): *count is 0 or 1. */
static SchedRanked *
best_of(const SchedPlacement *p, const SchedFleet *fleet, int *count)
{
	SchedRanked *best = palloc(sizeof(SchedRanked));
	SchedRanked cand;
	int			i;

	*count = 0;
	for (i = 0; i < fleet->count; i++)
	{
		if (sched_admission(p, &fleet->rows[i].c) != 0)
			continue;
		sched_score(p, &fleet->rows[i].c, &cand);
		cand.index = i;
		if (*count == 0 || sched_ranked_cmp(&cand, best) < 0)
			*best = cand;
		*count = 1;
	}
	return best;
}

/* Emits ranked candidates (all, or only the best with limit 1) into the SRF result. */
static void
emit_ranked(FunctionCallInfo fcinfo, const SchedPlacementArgs *args, bool full, int limit)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	SchedFleet	fleet;
	SchedRanked *ranked;
	int			n;
	int			i;
	SchedSpread spread;

	connect_spi();
	sched_fleet_read(args->p.capability, sched_fleet_flags_for(&args->p, false), &args->p, &fleet);
	if (args->spread_key == NULL && limit == 1)
		ranked = best_of(&args->p, &fleet, &n);
	else
	{
		ranked = palloc(sizeof(SchedRanked) * Max(fleet.count, 1));
		n = sched_fleet_mirror_admit(&fleet, &args->p, ranked);
		if (args->spread_key != NULL)
		{
			/* the spread term, counted beside the fleet, then the order */
			sched_spread_count(args->spread_key, false, &fleet, &spread);
			sched_spread_score(&spread, ranked, n);
		}
		sched_rank(ranked, n);
	}
	for (i = 0; i < n && (limit <= 0 || i < limit); i++)
	{
		SchedFleetRow *row = &fleet.rows[ranked[i].index];
		Datum		values[8];
		bool		nulls[8] = {0};

		if (full)
		{
			values[0] = Int32GetDatum(i + 1);
			values[1] = CStringGetTextDatum(ranked[i].node_id);
			values[2] = UUIDPGetDatum(&row->worker_id);
			values[3] = Int64GetDatum(ranked[i].score);
			values[4] = Int32GetDatum(ranked[i].preferred_matches);
			values[5] = Int32GetDatum(ranked[i].weight);
			values[6] = Int32GetDatum(ranked[i].running_attempts);
			values[7] = Int32GetDatum(ranked[i].spread_matches);
		}
		else
		{
			values[0] = CStringGetTextDatum(ranked[i].node_id);
			values[1] = UUIDPGetDatum(&row->worker_id);
			values[2] = Int64GetDatum(ranked[i].score);
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	SPI_finish();
}

/* select_candidate(<placement>) → at most one (node_id, worker_id, score). */
Datum
sched_select_candidate(PG_FUNCTION_ARGS)
{
	SchedPlacementArgs args;

	sched_placement_from_args(fcinfo, &args);
	InitMaterializedSRF(fcinfo, 0);
	emit_ranked(fcinfo, &args, false, 1);
	return (Datum) 0;
}

/* rank_candidates(<placement>) → every admitted pair, best first, with score terms. */
Datum
sched_rank_candidates(PG_FUNCTION_ARGS)
{
	SchedPlacementArgs args;

	sched_placement_from_args(fcinfo, &args);
	InitMaterializedSRF(fcinfo, 0);
	emit_ranked(fcinfo, &args, true, 0);
	return (Datum) 0;
}

/* One row per node, bytewise node_id order: eligible, every reason, score if eligible. */
static void
emit_qualification(FunctionCallInfo fcinfo, const SchedPlacementArgs *args)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	SchedFleet	fleet;
	int			i;
	SchedSpread spread = {0, NULL};

	sched_fleet_read(args->p.capability,
					 SCHED_FLEET_ALL_NODES | sched_fleet_flags_for(&args->p, false), &args->p,
					 &fleet);
	if (args->spread_key != NULL)
		sched_spread_count(args->spread_key, false, &fleet, &spread);
	for (i = 0; i < fleet.count; i++)
	{
		SchedFleetRow *row = &fleet.rows[i];
		SchedReasonSet reasons = sched_admission(&args->p, &row->c);
		Datum		codes[SCHED_R_COUNT];
		int			n = 0;
		int			k;
		Datum		values[5];
		bool		nulls[5] = {0};

		for (k = 0; k < SCHED_R_COUNT; k++)
			if (reasons & SCHED_REASON_BIT(k))
				codes[n++] = CStringGetTextDatum(sched_reason_names[k]);

		values[0] = CStringGetTextDatum(row->c.node_id);
		if (row->c.has_worker)
			values[1] = UUIDPGetDatum(&row->worker_id);
		else
			nulls[1] = true;
		values[2] = BoolGetDatum(reasons == 0);
		values[3] = PointerGetDatum(construct_array(codes, n, TEXTOID, -1, false, TYPALIGN_INT));
		if (reasons == 0)
		{
			SchedRanked scored;

			sched_score(&args->p, &row->c, &scored);
			sched_score_add_spread(&scored, sched_spread_of(&spread, i));
			values[4] = Int64GetDatum(scored.score);
		}
		else
			nulls[4] = true;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
}

/* qualification_reasons(<placement>) */
Datum
sched_qualification_reasons(PG_FUNCTION_ARGS)
{
	SchedPlacementArgs args;

	sched_placement_from_args(fcinfo, &args);
	InitMaterializedSRF(fcinfo, 0);
	connect_spi();
	emit_qualification(fcinfo, &args);
	SPI_finish();
	return (Datum) 0;
}

/* qualification_reasons(request_id, at): the stored request, heartbeat TTL from the setting. */
Datum
sched_qualification_reasons_for_request(PG_FUNCTION_ARGS)
{
	SchedPlacementArgs args;
	int64		request_id;

	sched_check_not_null(fcinfo, 0, "request_id");
	sched_check_not_null(fcinfo, 1, "at");
	sched_check_time(PG_GETARG_TIMESTAMPTZ(1), "at");
	request_id = PG_GETARG_INT64(0);
	InitMaterializedSRF(fcinfo, 0);
	connect_spi();
	if (!sched_request_load(request_id, SCHED_LOCK_NONE, PG_GETARG_TIMESTAMPTZ(1), &args, NULL))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("request \"" INT64_FORMAT "\" does not exist (parameter \"request_id\")", request_id)));
	emit_qualification(fcinfo, &args);
	SPI_finish();
	return (Datum) 0;
}
