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
#include "dispatch_gate.h"
#include "queue_bound.h"
#include "queue_held.h"
#include "validate.h"
#include "spi_util.h"
#include "settings.h"

#include "funcapi.h"
#include "catalog/pg_type.h"
#include "utils/hsearch.h"
#include "lib/stringinfo.h"
#include "utils/jsonb.h"
#include "utils/array.h"
#include "common/hashfn.h"
#include "utils/builtins.h"
#include "utils/guc.h"

PG_FUNCTION_INFO_V1(sched_pending_explanations);

/* the parameters admission depends on, in the order of sched.pending_explanation's
 * arguments (and of pending_requests' columns after the request id) */
enum
{
	PS_CAPABILITY, PS_VERSION, PS_REQUIRED, PS_MIN_CPU, PS_MIN_MEM, PS_MIN_GPUS, PS_RES_CPU,
	PS_RES_MEM, PS_RES_GPUS, PS_NODE_ID, PS_COUNT
};

/* every open request with the parameters admission depends on */
static SchedStatement pending_requests = {
	"SELECT r.request_id, r.capability, r.capability_version, r.required_labels, "
	"       r.min_cpu_millis, r.min_memory_mb, r.min_gpus, r.reserve_cpu_millis, "
	"       r.reserve_memory_mb, r.reserve_gpus, r.node_id "
	"  FROM sched.request r WHERE r.state OPERATOR(pg_catalog.=) ANY ('{PENDING,CLAIMED}'::pg_catalog.text[])",
	0, {InvalidOid}
};

typedef struct ShapeEntry
{
	char	   *key;			/* hash key: the shape's parameters, as shape_key writes
								 * them (palloc'd) */
	int			keylen;
	char	   *summary;
	const char *blocked;
	Datum		result;			/* pending_explanation: its (explanation, blocked) record,
								 * formed once in the query's memory; 0 until then */
} ShapeEntry;

/* Open addressing on the shape's key; size a power of two, at most half full. */
typedef struct ShapeTable
{
	int			size;
	int			count;
	ShapeEntry *slots;
} ShapeTable;

/*
 * The key of a shape: each parameter in turn, a text or jsonb as its length (-1: NULL)
 * and its bytes, a number as a NULL mark and its 8 bytes.  Two keys are equal only when
 * every parameter is (two jsonb values equal but stored apart, 1.0 and 1.00, are two
 * keys: evaluated twice, to the same explanation).
 */
static void
shape_key(StringInfo buf, const Datum *v, const bool *n)
{
	struct varlena *data[PS_COUNT];
	int32		lens[PS_COUNT];
	int			total = 0;
	char	   *out;
	int			i;

	/* the key's length first, so that it is written with one enlargement at most */
	for (i = 0; i < PS_COUNT; i++)
	{
		data[i] = NULL;
		lens[i] = -1;
		switch (i)
		{
			case PS_CAPABILITY:
			case PS_VERSION:
			case PS_REQUIRED:
			case PS_NODE_ID:
				if (!n[i])
				{
					data[i] = PG_DETOAST_DATUM_PACKED(v[i]);
					lens[i] = VARSIZE_ANY_EXHDR(data[i]);
					total += lens[i];
				}
				total += sizeof(int32);
				break;
			default:
				total += 1 + sizeof(int64);
				break;
		}
	}
	resetStringInfo(buf);
	enlargeStringInfo(buf, total);
	out = buf->data;
	for (i = 0; i < PS_COUNT; i++)
	{
		if (i == PS_CAPABILITY || i == PS_VERSION || i == PS_REQUIRED || i == PS_NODE_ID)
		{
			memcpy(out, &lens[i], sizeof(int32));
			out += sizeof(int32);
			if (data[i] != NULL)
			{
				memcpy(out, VARDATA_ANY(data[i]), lens[i]);
				out += lens[i];
				if ((Pointer) data[i] != DatumGetPointer(v[i]))
					pfree(data[i]);	/* a detoasted copy (of a large label set) */
			}
		}
		else
		{
			/* (a NULL is not a 0: it is refused, and a 0 is explained) */
			int64		x = n[i] ? 0 : (i == PS_MIN_MEM || i == PS_RES_MEM) ?
				DatumGetInt64(v[i]) : DatumGetInt32(v[i]);

			*out++ = n[i] ? 'n' : 'v';
			memcpy(out, &x, sizeof(x));
			out += sizeof(x);
		}
	}
	buf->len = out - buf->data;
	Assert(buf->len == total);
	buf->data[buf->len] = '\0';
}

static ShapeEntry *
shape_slot(ShapeEntry *slots, int size, const char *key, int keylen)
{
	uint32		h = hash_bytes((const unsigned char *) key, keylen);
	int			i;

	for (i = h & (size - 1);; i = (i + 1) & (size - 1))
		if (slots[i].key == NULL ||
			(slots[i].keylen == keylen && memcmp(slots[i].key, key, keylen) == 0))
			return &slots[i];
}

/* The entry of `key` (found) or a new one holding a copy of key, allocated in the current
 * memory context (not found; the caller fills it). */
static ShapeEntry *
lookup_shape(ShapeTable *t, const char *key, int keylen, bool *found)
{
	ShapeEntry *e;

	if (t->count * 2 >= t->size)
	{
		int			size = t->size == 0 ? 64 : t->size * 2;
		ShapeEntry *slots = palloc0(sizeof(ShapeEntry) * size);
		int			i;

		for (i = 0; i < t->size; i++)
			if (t->slots[i].key != NULL)
				*shape_slot(slots, size, t->slots[i].key, t->slots[i].keylen) = t->slots[i];
		t->slots = slots;
		t->size = size;
	}
	e = shape_slot(t->slots, t->size, key, keylen);
	*found = e->key != NULL;
	if (!*found)
	{
		e->key = palloc(keylen);
		memcpy(e->key, key, keylen);
		e->keylen = keylen;
		t->count++;
	}
	return e;
}

typedef struct CapabilityFleet
{
	char	   *capability;
	SchedFleet	capable;		/* its workers' rows, given their nodes' labels */
	SchedFleetRefs fleet;		/* every node, in node order: into capable and the nodes */
	bool		classified;
	SchedFleetClasses classes;	/* of fleet, when classified */
} CapabilityFleet;

/*
 * A shape's explanation is the aggregated summary over the fleet, and blocked: "none"
 * when some node admits the request now (it waits for its turn or its backoff),
 * "transient" when some node fails only on reasons that clear as attempts end, else
 * "static" (it cannot run until the fleet or the request changes).
 */
static const char *
blocked_of(SchedVerdict verdict)
{
	return verdict == SCHED_VERDICT_FITS ? "none"
		: verdict == SCHED_VERDICT_WAITS ? "transient" : "static";
}

/* The fleets read for one query (or one call of pending_explanations), all at its
 * snapshot: every node once, and for each capability its workers' rows merged in. */
typedef struct FleetCache
{
	bool		have_nodes;
	SchedFleet	nodes;			/* every node, without workers, label maps parsed */
	List	   *fleets;			/* of CapabilityFleet */
} FleetCache;

/*
 * The fleet of `capability` (every node, as SCHED_FLEET_ALL_NODES reads it), read once
 * per cache: the nodes, with their label maps, are read and parsed once for every
 * capability, and each capability's own read is its workers' rows.
 */
static CapabilityFleet *
fleet_of(FleetCache *cache, const char *capability)
{
	ListCell   *lc;
	CapabilityFleet *cf;

	foreach(lc, cache->fleets)
	{
		cf = (CapabilityFleet *) lfirst(lc);
		if (strcmp(cf->capability, capability) == 0)
			return cf;
	}
	if (!cache->have_nodes)
	{
		sched_fleet_load(capability, SCHED_FLEET_NO_WORKERS | SCHED_FLEET_LABELS, NULL,
						 &cache->nodes);
		cache->have_nodes = true;
	}
	cf = palloc0(sizeof(CapabilityFleet));
	cf->capability = pstrdup(capability);
	sched_fleet_load(capability, SCHED_FLEET_WORKERS_ONLY, NULL, &cf->capable);
	sched_fleet_merge(&cache->nodes, &cf->capable, &cf->fleet);
	cache->fleets = lappend(cache->fleets, cf);
	return cf;
}

/*
 * Evaluates one shape over its capability's fleet (SPI connected).  An unpinned shape
 * is evaluated over the fleet's classes of nodes alike (fleet.h), made on the first such
 * shape and again if its heartbeat cutoff differs: 162 shapes over 10,000 nodes are 1.6
 * million admissions node by node, a few hundred times fewer by class.  A pinned one
 * (its pin tells nodes of a class apart) is evaluated node by node.
 */
static void
evaluate_placement(const SchedPlacementArgs *args, FleetCache *fleets, ShapeEntry *e)
{
	const SchedPlacement *p = &args->p;
	CapabilityFleet *cf = fleet_of(fleets, p->capability);
	SchedVerdict verdict;

	if (p->pin_node_id != NULL)
		e->summary = sched_fleet_refs_summary(p, &cf->fleet, &verdict);
	else
	{
		if (!cf->classified || cf->classes.heartbeat_cutoff != p->heartbeat_cutoff)
		{
			sched_fleet_classify(&cf->fleet, p->heartbeat_cutoff, &cf->classes);
			cf->classified = true;
		}
		e->summary = sched_fleet_classes_summary(p, &cf->classes, &verdict);
	}
	e->blocked = blocked_of(verdict);
}

/* Evaluates one shape (its parameters in v/n, from a request row) (SPI connected). */
static void
evaluate_shape(const Datum *v, const bool *n, TimestampTz at, FleetCache *fleets, ShapeEntry *e)
{
	SchedPlacementArgs args;
	SchedPlacement *p = &args.p;

	memset(&args, 0, sizeof(args));
	p->capability = TextDatumGetCString(v[PS_CAPABILITY]);
	p->capability_version = TextDatumGetCString(v[PS_VERSION]);
	sched_required_labels_from_jsonb(DatumGetJsonbP(v[PS_REQUIRED]), "required_labels",
									 &p->required_labels);
	p->min_cpu_millis = DatumGetInt32(v[PS_MIN_CPU]);
	p->min_memory_mb = DatumGetInt64(v[PS_MIN_MEM]);
	p->min_gpus = DatumGetInt32(v[PS_MIN_GPUS]);
	p->reserve_cpu_millis = DatumGetInt32(v[PS_RES_CPU]);
	p->reserve_memory_mb = DatumGetInt64(v[PS_RES_MEM]);
	p->reserve_gpus = DatumGetInt32(v[PS_RES_GPUS]);
	p->pin_node_id = n[PS_NODE_ID] ? NULL : TextDatumGetCString(v[PS_NODE_ID]);
	sched_placement_set_clock(&args, at, NULL);
	evaluate_placement(&args, fleets, e);
}

/* sched.pending_explanations(at) → (request_id, explanation, blocked) per open request */
Datum
sched_pending_explanations(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	TimestampTz at;
	ShapeTable	shapes;
	FleetCache	fleets;
	Portal		portal;
	StringInfoData key;

	sched_check_not_null(fcinfo, 0, "at");
	sched_check_time(PG_GETARG_TIMESTAMPTZ(0), "at");
	at = PG_GETARG_TIMESTAMPTZ(0);
	InitMaterializedSRF(fcinfo, 0);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pg_sched: SPI_connect failed");

	memset(&shapes, 0, sizeof(shapes));
	memset(&fleets, 0, sizeof(fleets));
	initStringInfo(&key);
	portal = sched_spi_cursor_open(&pending_requests, NULL, NULL, true);
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
			Datum		v[1 + PS_COUNT];
			bool		n[1 + PS_COUNT];
			Datum		values[3];
			bool		nulls[3] = {0};
			ShapeEntry *e;
			bool		found;

			heap_deform_tuple(rows->vals[i], rows->tupdesc, v, n);
			shape_key(&key, v + 1, n + 1);
			e = lookup_shape(&shapes, key.data, key.len, &found);
			if (!found)
				evaluate_shape(v + 1, n + 1, at, &fleets, e);
			values[0] = v[0];
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

/*
 * What sched.pending_explanation keeps from one call to the next of one query (in
 * fn_extra, in the query's memory): the shapes evaluated so far and the fleets read, at
 * one time `at`.  The view sched.pending calls it once per row it returns, so a query
 * that reads its first 100 rows evaluates the shapes of those rows only.
 */
typedef struct PendingCache
{
	TimestampTz at;
	ShapeTable	shapes;
	FleetCache	fleets;
	StringInfoData key;
	TupleDesc	desc;
} PendingCache;

/*
 * sched.pending_explanation(capability, capability_version, required_labels,
 * min_cpu_millis, min_memory_mb, min_gpus, reserve_cpu_millis, reserve_memory_mb,
 * reserve_gpus, node_id, at) → (explanation, blocked): for one request with these
 * parameters, what sched.pending_explanations says of it.
 */
PG_FUNCTION_INFO_V1(sched_pending_explanation);

Datum
sched_pending_explanation(PG_FUNCTION_ARGS)
{
	PendingCache *c = (PendingCache *) fcinfo->flinfo->fn_extra;
	MemoryContext caller = CurrentMemoryContext;
	Datum		v[PS_COUNT];
	bool		n[PS_COUNT];
	Datum		values[2];
	bool		nulls[2] = {false, false};
	TimestampTz at;
	ShapeEntry *e;
	bool		found;
	int			i;

	/* (the arguments are checked below, once per shape: equal keys, equal arguments) */
	for (i = 0; i < PS_COUNT; i++)
	{
		n[i] = PG_ARGISNULL(i);
		v[i] = n[i] ? (Datum) 0 : PG_GETARG_DATUM(i);
	}
	sched_check_not_null(fcinfo, PS_COUNT, "at");
	at = PG_GETARG_TIMESTAMPTZ(PS_COUNT);

	MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);
	if (c == NULL || c->at != at)
	{
		TupleDesc	desc;

		if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
			elog(ERROR, "pg_sched: pending_explanation must return a record");
		c = palloc0(sizeof(PendingCache));
		c->at = at;
		initStringInfo(&c->key);
		c->desc = BlessTupleDesc(desc);
		fcinfo->flinfo->fn_extra = c;
	}
	shape_key(&c->key, v, n);
	e = lookup_shape(&c->shapes, c->key.data, c->key.len, &found);
	if (!found)
	{
		SchedPlacementArgs args;
		int			nestlevel = sched_pin_search_path();

		/* (an error here ends the query, and this cache with its memory; the abort
		 * restores the caller's search_path) */
		sched_placement_from_pending_args(fcinfo, &args);
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "pg_sched: SPI_connect failed");
		MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);
		evaluate_placement(&args, &c->fleets, e);
		SPI_finish();
		AtEOXact_GUC(true, nestlevel);
	}
	/* every row of a shape returns the one record, which lives as long as the query
	 * (the caller reads it and copies what it keeps, as any function's result) */
	if (e->result == (Datum) 0)
	{
		values[0] = CStringGetTextDatum(e->summary);
		values[1] = CStringGetTextDatum(e->blocked);
		e->result = HeapTupleGetDatum(heap_form_tuple(c->desc, values, nulls));
	}
	MemoryContextSwitchTo(caller);
	PG_RETURN_DATUM(e->result);
}

/* A hash table in the memory of the query fcinfo's function is called by (fn_mcxt),
 * for what a function called per row reads once per query. */
static HTAB *
query_hash(FunctionCallInfo fcinfo, const char *name, Size keysize, Size entrysize)
{
	HASHCTL		ctl;

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = keysize;
	ctl.entrysize = entrysize;
	ctl.hcxt = fcinfo->flinfo->fn_mcxt;
	return hash_create(name, 64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

/*
 * What sched.limit_reason keeps from one call to the next of one query (fn_extra): the
 * reasons sched.limit_explanations(at) gives, by request, read once.
 */
typedef struct LimitReasons
{
	TimestampTz at;
	HTAB	   *reasons;		/* request_id → LimitReason */
} LimitReasons;

typedef struct LimitReason
{
	int64		request_id;
	char	   *reason;
} LimitReason;

static SchedStatement limit_reasons = {
	"SELECT l.request_id, l.reason FROM sched.limit_explanations($1) l",
	1, {TIMESTAMPTZOID}
};

/*
 * sched.limit_reason(request_id, at) → text: the reason sched.limit_explanations(at)
 * gives for the request (a limit that holds it back now), or NULL.  The view
 * sched.pending calls it once per row it returns; limit_explanations runs once per query
 * (it returns at once when no limit is set), so no row is joined to it again and again.
 */
PG_FUNCTION_INFO_V1(sched_limit_reason);

Datum
sched_limit_reason(PG_FUNCTION_ARGS)
{
	LimitReasons *c = (LimitReasons *) fcinfo->flinfo->fn_extra;
	int64		request_id;
	TimestampTz at;
	LimitReason *found;

	sched_check_not_null(fcinfo, 0, "request_id");
	sched_check_not_null(fcinfo, 1, "at");
	request_id = PG_GETARG_INT64(0);
	at = PG_GETARG_TIMESTAMPTZ(1);
	sched_check_time(at, "at");
	if (c == NULL || c->at != at)
	{
		MemoryContext caller = CurrentMemoryContext;
		Datum		arg = TimestampTzGetDatum(at);
		uint64		i;

		MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);
		c = palloc0(sizeof(LimitReasons));
		c->at = at;
		c->reasons = query_hash(fcinfo, "pg_sched limit reasons", sizeof(int64),
								sizeof(LimitReason));
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "pg_sched: SPI_connect failed");
		sched_spi_exec(&limit_reasons, &arg, NULL, true, 0, SPI_OK_SELECT);
		MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);
		for (i = 0; i < SPI_processed; i++)
		{
			int64		id = sched_spi_int64(i, 1);
			char	   *reason = sched_spi_text(i, 2);
			bool		exists;
			LimitReason *r = hash_search(c->reasons, &id, HASH_ENTER, &exists);

			if (!exists)
				r->reason = reason != NULL ? pstrdup(reason) : NULL;
		}
		SPI_finish();
		MemoryContextSwitchTo(caller);
		fcinfo->flinfo->fn_extra = c;
	}
	found = hash_search(c->reasons, &request_id, HASH_FIND, NULL);
	if (found == NULL || found->reason == NULL)
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(cstring_to_text(found->reason));
}

/*
 * What sched.gang_reason keeps from one call to the next of one query (fn_extra, a hash
 * table gang_id → GangOpen): each gang not placed yet, with its size and how many
 * members it has, read once.
 */
typedef struct GangOpen
{
	pg_uuid_t	gang_id;
	int32		size;
	int64		members;
} GangOpen;

static SchedStatement gangs_open = {
	"SELECT g.gang_id, g.gang_size, "
	"       (SELECT pg_catalog.count(*) FROM sched.request m "
	"         WHERE m.gang_id OPERATOR(pg_catalog.=) g.gang_id) "
	"  FROM sched.gang g WHERE g.placed_at IS NULL",
	0, {InvalidOid}
};

/*
 * sched.gang_reason(gang_id, last_reason) → text: why a request of gang gang_id waits
 * for its gang, as sched.pending says it: "gang_incomplete: gang … has 2 of 4 members
 * submitted" while members are missing, else the reason its last try wrote if that was
 * the gang's ("gang_incomplete: …"); NULL without gang, for a gang placed, or for a
 * last reason of another kind.  The unplaced gangs are read once per query.
 */
PG_FUNCTION_INFO_V1(sched_gang_reason);

Datum
sched_gang_reason(PG_FUNCTION_ARGS)
{
	HTAB	   *gangs = (HTAB *) fcinfo->flinfo->fn_extra;
	pg_uuid_t  *gang_id;
	GangOpen   *g;
	text	   *last;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	gang_id = PG_GETARG_UUID_P(0);
	if (gangs == NULL)
	{
		uint64		i;

		gangs = query_hash(fcinfo, "pg_sched open gangs", sizeof(pg_uuid_t), sizeof(GangOpen));
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "pg_sched: SPI_connect failed");
		sched_spi_exec(&gangs_open, NULL, NULL, true, 0, SPI_OK_SELECT);
		for (i = 0; i < SPI_processed; i++)
		{
			bool		isnull;
			pg_uuid_t	id = *DatumGetUUIDP(sched_spi_get(i, 1, &isnull));
			GangOpen   *e = hash_search(gangs, &id, HASH_ENTER, NULL);

			e->size = (int32) sched_spi_int64(i, 2);
			e->members = sched_spi_int64(i, 3);
		}
		SPI_finish();
		fcinfo->flinfo->fn_extra = gangs;
	}
	g = hash_search(gangs, gang_id, HASH_FIND, NULL);
	if (g == NULL)
		PG_RETURN_NULL();
	if (g->members < g->size)
		PG_RETURN_TEXT_P(cstring_to_text(psprintf("gang_incomplete: gang %s has " INT64_FORMAT " of %d members submitted",
												  sched_uuid_out(gang_id), g->members, g->size)));
	if (PG_ARGISNULL(1))
		PG_RETURN_NULL();
	last = PG_GETARG_TEXT_PP(1);
	if (VARSIZE_ANY_EXHDR(last) >= 16 && memcmp(VARDATA_ANY(last), "gang_incomplete:", 16) == 0)
		PG_RETURN_TEXT_P(last);
	PG_RETURN_NULL();
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

/* sched._queue_fetch_stats() → (held_published, held_passed_over, bounds_found,
 * bounds_used): this backend's side of the queue fetch's shared state: the requests its
 * transaction has published as held and the rows its fetches left out as held by others
 * (queue_held.c); its scans that moved a tenant's bound and its fetches that started at
 * one (queue_bound.c).  Since the backend started, except the first. */
PG_FUNCTION_INFO_V1(sched_queue_fetch_stats);

Datum
sched_queue_fetch_stats(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	Datum		values[4];
	bool		nulls[4] = {false, false, false, false};
	int			published;
	int64		passed_over;
	int64		found;
	int64		used;

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "pg_sched: _queue_fetch_stats must return a record");
	sched_queue_held_stats(&published, &passed_over);
	sched_queue_bound_stats(&found, &used);
	values[0] = Int32GetDatum(published);
	values[1] = Int64GetDatum(passed_over);
	values[2] = Int64GetDatum(found);
	values[3] = Int64GetDatum(used);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}

/* sched._dispatch_gate() → (concurrency, running, waiting, entered, waited, timed_out,
 * bypassed, moved, handed): the dispatch gate now and since the server started (dispatch_gate.c);
 * all NULL without preloading. */
PG_FUNCTION_INFO_V1(sched_dispatch_gate);

Datum
sched_dispatch_gate(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	Datum		values[9];
	bool		nulls[9];
	SchedGateStats st;
	bool		preloaded = sched_dispatch_gate_get_stats(&st);

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "pg_sched: _dispatch_gate must return a record");
	memset(nulls, !preloaded, sizeof(nulls));
	values[0] = Int32GetDatum(st.limit);
	values[1] = Int32GetDatum(st.running);
	values[2] = Int32GetDatum(st.waiting);
	values[3] = Int64GetDatum(st.entered);
	values[4] = Int64GetDatum(st.waited);
	values[5] = Int64GetDatum(st.timed_out);
	values[6] = Int64GetDatum(st.bypassed);
	values[7] = Int64GetDatum(st.moved);
	values[8] = Int64GetDatum(st.handed);
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
	Datum		values[12];
	bool		nulls[12] = {0};
	SchedMirrorStats st;

	/* 0.1.0 declares the first 9 columns, 0.2.0 all 12 */
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE ||
		(desc->natts != 9 && desc->natts != 12))
		elog(ERROR, "pg_sched: _fleet_mirror_stats must return a record of 9 or 12 columns");
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
	values[9] = Int64GetDatum(st.rows_patched);
	values[10] = Int64GetDatum(st.admissions_walked);
	values[11] = Int64GetDatum(st.admissions_carried);
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
