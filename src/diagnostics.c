/*
 * diagnostics.c — "why is it waiting", for every open request at once: the C function
 * behind the view sched.pending.
 *
 * The explanation is computed by sched_admission(), the routine dispatch uses, over a
 * fresh fleet snapshot; it is never a stored copy.  One pass over the open requests
 * keys each by the parameters admission depends on (capability, version, required
 * labels, minimums, reservations, pin); each distinct key is evaluated once, and the
 * fleet of each capability is read once, so the cost grows with nodes x distinct
 * request shapes plus the requests, not with nodes x requests.  Read-only (it works on
 * a hot standby) and takes no locks.
 */
#include "postgres.h"

#include "fleet_mirror.h"
#include "counters.h"
#include "validate.h"
#include "spi_util.h"
#include "settings.h"

#include "funcapi.h"
#include "utils/array.h"
#include "common/hashfn.h"
#include "utils/builtins.h"

PG_FUNCTION_INFO_V1(sched_pending_explanations);

enum
{
	PS_REQUEST_ID = 1, PS_SHAPE, PS_CAPABILITY, PS_VERSION, PS_REQUIRED, PS_MIN_CPU, PS_MIN_MEM,
	PS_MIN_GPUS, PS_RES_CPU, PS_RES_MEM, PS_RES_GPUS, PS_NODE_ID, PS_COUNT = PS_NODE_ID
};

/* every open request with the parameters admission depends on, and their text as a key:
 * each text length-prefixed, so no two shapes share a key whatever their texts hold */
static SchedStatement pending_requests = {
	"SELECT r.request_id, "
	"       pg_catalog.concat(pg_catalog.length(r.capability), ':', r.capability, "
	"                         pg_catalog.length(r.capability_version), ':', r.capability_version, "
	"                         pg_catalog.length(r.required_labels::pg_catalog.text), ':', "
	"                         r.required_labels::pg_catalog.text, ',', r.min_cpu_millis, ',', "
	"                         r.min_memory_mb, ',', r.min_gpus, ',', r.reserve_cpu_millis, ',', "
	"                         r.reserve_memory_mb, ',', r.reserve_gpus, ',', "
	"                         CASE WHEN r.node_id IS NULL THEN '-' "
	"                              ELSE pg_catalog.concat(pg_catalog.length(r.node_id), ':', r.node_id) END), "
	"       r.capability, r.capability_version, r.required_labels, r.min_cpu_millis, "
	"       r.min_memory_mb, r.min_gpus, r.reserve_cpu_millis, r.reserve_memory_mb, "
	"       r.reserve_gpus, r.node_id "
	"  FROM sched.request r WHERE r.state OPERATOR(pg_catalog.=) ANY ('{PENDING,CLAIMED}'::pg_catalog.text[])",
	0, {InvalidOid}
};

typedef struct ShapeEntry
{
	char	   *key;			/* hash key: the shape's text (palloc'd) */
	char	   *summary;
	const char *blocked;
} ShapeEntry;

/* Open addressing on the shape's text; size a power of two, at most half full. */
typedef struct ShapeTable
{
	int			size;
	int			count;
	ShapeEntry *slots;
} ShapeTable;

static ShapeEntry *
shape_slot(ShapeEntry *slots, int size, const char *key)
{
	uint32		h = hash_bytes((const unsigned char *) key, (int) strlen(key));
	int			i;

	for (i = h & (size - 1);; i = (i + 1) & (size - 1))
		if (slots[i].key == NULL || strcmp(slots[i].key, key) == 0)
			return &slots[i];
}

/* The entry of `key` (found) or a new one holding key (not found; caller fills it). */
static ShapeEntry *
lookup_shape(ShapeTable *t, char *key, bool *found)
{
	ShapeEntry *e;

	if (t->count * 2 >= t->size)
	{
		int			size = t->size == 0 ? 64 : t->size * 2;
		ShapeEntry *slots = palloc0(sizeof(ShapeEntry) * size);
		int			i;

		for (i = 0; i < t->size; i++)
			if (t->slots[i].key != NULL)
				*shape_slot(slots, size, t->slots[i].key) = t->slots[i];
		t->slots = slots;
		t->size = size;
	}
	e = shape_slot(t->slots, t->size, key);
	*found = e->key != NULL;
	if (!*found)
	{
		e->key = key;
		t->count++;
	}
	return e;
}

typedef struct CapabilityFleet
{
	char	   *capability;
	SchedFleet	fleet;
} CapabilityFleet;

/*
 * One pass over the fleet: the aggregated summary, and blocked: "none" when some node
 * admits the request now (it waits for its turn or its backoff), "transient" when some
 * node fails only on reasons that clear as attempts end, else "static" (it cannot run
 * until the fleet or the request changes).
 */
static void
summarize(const SchedPlacement *p, const SchedFleet *fleet, ShapeEntry *e)
{
	SchedVerdict verdict;

	e->summary = sched_fleet_summary(p, fleet, &verdict);
	e->blocked = verdict == SCHED_VERDICT_FITS ? "none"
		: verdict == SCHED_VERDICT_WAITS ? "transient" : "static";
}

/* The fleet of `capability` (every node), read once per call: all label maps parsed. */
static SchedFleet *
fleet_of(List **fleets, const char *capability)
{
	ListCell   *lc;
	CapabilityFleet *cf;

	foreach(lc, *fleets)
	{
		cf = (CapabilityFleet *) lfirst(lc);
		if (strcmp(cf->capability, capability) == 0)
			return &cf->fleet;
	}
	cf = palloc(sizeof(CapabilityFleet));
	cf->capability = pstrdup(capability);
	sched_fleet_load(capability, SCHED_FLEET_ALL_NODES | SCHED_FLEET_LABELS, NULL, &cf->fleet);
	*fleets = lappend(*fleets, cf);
	return &cf->fleet;
}

/* Evaluates one shape (the request in v/n) over its capability's fleet. */
static void
evaluate_shape(Datum *v, bool *n, TimestampTz at, List **fleets, ShapeEntry *e)
{
	SchedPlacementArgs args;
	SchedPlacement *p = &args.p;
	SchedFleet *fleet;

	memset(&args, 0, sizeof(args));
	p->capability = TextDatumGetCString(v[PS_CAPABILITY - 1]);
	p->capability_version = TextDatumGetCString(v[PS_VERSION - 1]);
	sched_required_labels_from_jsonb(DatumGetJsonbP(v[PS_REQUIRED - 1]), "required_labels",
									 &p->required_labels);
	p->min_cpu_millis = DatumGetInt32(v[PS_MIN_CPU - 1]);
	p->min_memory_mb = DatumGetInt64(v[PS_MIN_MEM - 1]);
	p->min_gpus = DatumGetInt32(v[PS_MIN_GPUS - 1]);
	p->reserve_cpu_millis = DatumGetInt32(v[PS_RES_CPU - 1]);
	p->reserve_memory_mb = DatumGetInt64(v[PS_RES_MEM - 1]);
	p->reserve_gpus = DatumGetInt32(v[PS_RES_GPUS - 1]);
	p->pin_node_id = n[PS_NODE_ID - 1] ? NULL : TextDatumGetCString(v[PS_NODE_ID - 1]);
	sched_placement_set_clock(&args, at, NULL);

	fleet = fleet_of(fleets, p->capability);
	summarize(p, fleet, e);
}

/* sched._pending_explanations(at) → (request_id, explanation, blocked) per open request */
Datum
sched_pending_explanations(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	TimestampTz at;
	ShapeTable	shapes;
	List	   *fleets = NIL;
	Portal		portal;

	sched_check_not_null(fcinfo, 0, "at");
	sched_check_time(PG_GETARG_TIMESTAMPTZ(0), "at");
	at = PG_GETARG_TIMESTAMPTZ(0);
	InitMaterializedSRF(fcinfo, 0);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pg_sched: SPI_connect failed");

	memset(&shapes, 0, sizeof(shapes));
	portal = SPI_cursor_open(NULL, sched_spi_plan(&pending_requests), NULL, NULL, true);
	if (portal == NULL)
		elog(ERROR, "pg_sched: could not open the pending cursor");
	for (;;)
	{
		uint64		i;
		uint64		nrows;
		SPITupleTable *rows;

		SPI_cursor_fetch(portal, true, 1024);
		/* keep the chunk: reading a capability's fleet below runs other SPI queries */
		rows = SPI_tuptable;
		nrows = SPI_processed;
		SPI_tuptable = NULL;
		if (nrows == 0)
			break;
		for (i = 0; i < nrows; i++)
		{
			Datum		v[PS_COUNT];
			bool		n[PS_COUNT];
			Datum		values[3];
			bool		nulls[3] = {0};
			char	   *key;
			ShapeEntry *e;
			bool		found;

			heap_deform_tuple(rows->vals[i], rows->tupdesc, v, n);
			key = TextDatumGetCString(v[PS_SHAPE - 1]);
			e = lookup_shape(&shapes, key, &found);
			if (!found)
				evaluate_shape(v, n, at, &fleets, e);
			else
				pfree(key);
			values[0] = v[PS_REQUEST_ID - 1];
			values[1] = CStringGetTextDatum(e->summary);
			values[2] = CStringGetTextDatum(e->blocked);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
		SPI_freetuptable(rows);
	}
	SPI_cursor_close(portal);
	SPI_finish();
	return (Datum) 0;
}

/* sched._dispatch_counters() → (calls, placements, conflicts, held_passed) since the
 * server started, NULLs without preloading (counters.c). */
PG_FUNCTION_INFO_V1(sched_dispatch_counters);

Datum
sched_dispatch_counters(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	Datum		values[4];
	bool		nulls[4] = {false, false, false, false};
	int64		calls;
	int64		placements;
	int64		conflicts;
	int64		held_passed;

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "pg_sched: _dispatch_counters must return a record");
	if (!sched_counters_read(&calls, &placements, &conflicts, &held_passed))
		nulls[0] = nulls[1] = nulls[2] = nulls[3] = true;
	else
	{
		values[0] = Int64GetDatum(calls);
		values[1] = Int64GetDatum(placements);
		values[2] = Int64GetDatum(conflicts);
		values[3] = Int64GetDatum(held_passed);
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}

/* sched.dispatch_stats() → one row per outcome of dispatch calls (UNSCHEDULABLE by why
 * it waits: waits_for_capacity, fits_nowhere, contention) with the calls that had it and
 * their conflicts, since the server started; no rows without preloading (counters.c). */
PG_FUNCTION_INFO_V1(sched_dispatch_stats);

Datum
sched_dispatch_stats(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			i;

	InitMaterializedSRF(fcinfo, 0);
	for (i = 0; i < sched_counters_kinds(); i++)
	{
		Datum		values[5];
		bool		nulls[5] = {false, false, false, false, false};
		const char *outcome;
		const char *reason;
		int64		calls,
					conflicts,
					held_passed;

		sched_counters_read_kind(i, &outcome, &reason, &calls, &conflicts, &held_passed);
		values[0] = CStringGetTextDatum(outcome);
		if (reason == NULL)
			nulls[1] = true;
		else
			values[1] = CStringGetTextDatum(reason);
		values[2] = Int64GetDatum(calls);
		values[3] = Int64GetDatum(conflicts);
		values[4] = Int64GetDatum(held_passed);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/* sched._fleet_mirror_stats(): this backend's fleet mirror (fleet_mirror.c). */
PG_FUNCTION_INFO_V1(sched_fleet_mirror_stats);

Datum
sched_fleet_mirror_stats(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	Datum		values[9];
	bool		nulls[9] = {0};
	SchedMirrorStats st;

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "pg_sched: _fleet_mirror_stats must return a record");
	sched_fleet_mirror_get_stats(&st);
	values[0] = BoolGetDatum(st.usable);
	values[1] = Int32GetDatum(st.capabilities);
	values[2] = Int32GetDatum(st.rows_held);
	values[3] = Int32GetDatum(st.pending);
	values[4] = Int64GetDatum(st.refreshes);
	values[5] = Int64GetDatum(st.full_loads);
	values[6] = Int64GetDatum(st.rows_reread);
	values[7] = Int64GetDatum(st.bypassed);
	values[8] = Int64GetDatum(st.losses);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}

/*
 * sched._fleet_mirror_check(capability): how many nodes of this backend's mirror of
 * `capability` differ from the tables, read with the same fresh snapshot (fleet_mirror.c).
 */
PG_FUNCTION_INFO_V1(sched_fleet_mirror_check);

Datum
sched_fleet_mirror_check(PG_FUNCTION_ARGS)
{
	char	   *capability;
	int			differ;

	sched_check_not_null(fcinfo, 0, "capability");
	capability = text_to_cstring(PG_GETARG_TEXT_PP(0));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pg_sched: SPI_connect failed");
	differ = sched_fleet_mirror_differences(capability);
	SPI_finish();
	PG_RETURN_INT32(differ);
}
