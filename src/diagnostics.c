/*
 * diagnostics.c — "why is it waiting", for every open request at once: the C function
 * behind the view sched.pending.
 *
 * The explanation is computed by sched_admission(), the routine dispatch uses, over a
 * fresh fleet snapshot; it is never a stored copy.  Requests are grouped by the
 * parameters admission depends on (capability, version, required labels, minimums,
 * reservations, pin), each group is evaluated once, and the fleet of each capability is
 * read once, so the cost grows with nodes x distinct request shapes, not with nodes x
 * requests.  Read-only (it works on a hot standby) and takes no locks.
 */
#include "pg_sched.h"

#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"

PG_FUNCTION_INFO_V1(sched_pending_explanations);

enum
{
	PS_IDS = 1, PS_CAPABILITY, PS_VERSION, PS_REQUIRED, PS_MIN_CPU, PS_MIN_MEM, PS_MIN_GPUS,
	PS_RES_CPU, PS_RES_MEM, PS_RES_GPUS, PS_NODE_ID
};

static SchedStatement pending_shapes = {
	"SELECT pg_catalog.array_agg(r.request_id ORDER BY r.request_id), r.capability, "
	"       r.capability_version, r.required_labels, r.min_cpu_millis, r.min_memory_mb, "
	"       r.min_gpus, r.reserve_cpu_millis, r.reserve_memory_mb, r.reserve_gpus, r.node_id "
	"  FROM sched.request r WHERE r.state IN ('PENDING', 'CLAIMED') "
	" GROUP BY r.capability, r.capability_version, r.required_labels, r.min_cpu_millis, "
	"          r.min_memory_mb, r.min_gpus, r.reserve_cpu_millis, r.reserve_memory_mb, "
	"          r.reserve_gpus, r.node_id "
	" ORDER BY r.capability COLLATE \"C\"",
	0, {InvalidOid}
};

/*
 * blocked: "none" when some node admits the request now (it waits for its turn or its
 * backoff), "transient" when some node fails only on reasons that clear as attempts
 * end, else "static" (it cannot run until the fleet or the request changes).
 */
static const char *
blocked_kind(const SchedPlacement *p, const SchedFleet *fleet)
{
	bool		transient = false;
	int			i;

	for (i = 0; i < fleet->count; i++)
	{
		SchedReasonSet r = sched_admission(p, &fleet->rows[i].c);

		if (r == 0)
			return "none";
		if ((r & ~SCHED_TRANSIENT_REASONS) == 0)
			transient = true;
	}
	return transient ? "transient" : "static";
}

/* sched._pending_explanations(at) → (request_id, explanation, blocked) per open request */
Datum
sched_pending_explanations(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	TimestampTz at;
	SPITupleTable *shapes;
	uint64		nshapes;
	uint64		s;
	char	   *fleet_capability = NULL;
	SchedFleet	fleet = {0, NULL};
	MemoryContext per_shape;
	MemoryContext outer;

	sched_check_not_null(fcinfo, 0, "at");
	at = PG_GETARG_TIMESTAMPTZ(0);
	InitMaterializedSRF(fcinfo, 0);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pg_sched: SPI_connect failed");

	sched_spi_exec(&pending_shapes, NULL, NULL, true, 0, SPI_OK_SELECT);
	shapes = SPI_tuptable;
	nshapes = SPI_processed;
	SPI_tuptable = NULL;		/* keep it: the fleet loads below must not free it */

	outer = CurrentMemoryContext;
	per_shape = AllocSetContextCreate(outer, "pg_sched pending shape", ALLOCSET_DEFAULT_SIZES);
	for (s = 0; s < nshapes; s++)
	{
		HeapTuple	tup = shapes->vals[s];
		TupleDesc	desc = shapes->tupdesc;
		SchedPlacementArgs args;
		SchedPlacement *p = &args.p;
		bool		isnull;
		char	   *capability = TextDatumGetCString(SPI_getbinval(tup, desc, PS_CAPABILITY, &isnull));
		ArrayType  *ids;
		Datum	   *id_datums;
		int			nids;
		int			k;
		char	   *summary;
		const char *blocked;
		Datum		d;

		/* one fleet read per capability (shapes come sorted by capability) */
		if (fleet_capability == NULL || strcmp(fleet_capability, capability) != 0)
		{
			fleet_capability = capability;
			sched_fleet_load(capability, SCHED_FLEET_ALL_NODES | SCHED_FLEET_LABELS, NULL, &fleet);
		}

		MemoryContextSwitchTo(per_shape);
		memset(&args, 0, sizeof(args));
		p->capability = capability;
		p->capability_version = TextDatumGetCString(SPI_getbinval(tup, desc, PS_VERSION, &isnull));
		d = SPI_getbinval(tup, desc, PS_REQUIRED, &isnull);
		sched_labels_from_jsonb(DatumGetJsonbP(d), "required_labels", &p->required_labels);
		p->min_cpu_millis = DatumGetInt32(SPI_getbinval(tup, desc, PS_MIN_CPU, &isnull));
		p->min_memory_mb = DatumGetInt64(SPI_getbinval(tup, desc, PS_MIN_MEM, &isnull));
		p->min_gpus = DatumGetInt32(SPI_getbinval(tup, desc, PS_MIN_GPUS, &isnull));
		p->reserve_cpu_millis = DatumGetInt32(SPI_getbinval(tup, desc, PS_RES_CPU, &isnull));
		p->reserve_memory_mb = DatumGetInt64(SPI_getbinval(tup, desc, PS_RES_MEM, &isnull));
		p->reserve_gpus = DatumGetInt32(SPI_getbinval(tup, desc, PS_RES_GPUS, &isnull));
		d = SPI_getbinval(tup, desc, PS_NODE_ID, &isnull);
		p->pin_node_id = isnull ? NULL : TextDatumGetCString(d);
		sched_placement_set_clock(&args, at, NULL);

		summary = sched_fleet_summary(p, &fleet, NULL);
		blocked = blocked_kind(p, &fleet);

		ids = DatumGetArrayTypeP(SPI_getbinval(tup, desc, PS_IDS, &isnull));
		deconstruct_array(ids, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &id_datums, NULL, &nids);
		for (k = 0; k < nids; k++)
		{
			Datum		values[3];
			bool		nulls[3] = {0};

			values[0] = id_datums[k];
			values[1] = CStringGetTextDatum(summary);
			values[2] = CStringGetTextDatum(blocked);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
		MemoryContextSwitchTo(outer);
		MemoryContextReset(per_shape);
	}
	SPI_freetuptable(shapes);
	SPI_finish();
	return (Datum) 0;
}
