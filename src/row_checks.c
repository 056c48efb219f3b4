/*
 * row_checks.c — the CHECK constraints of the five tables every placement and every end of
 * an attempt writes (sched.node, sched.worker, sched.request, sched.attempt,
 * sched.command): one C function per table, which one constraint per table calls with the
 * whole row (node_valid CHECK (sched._node_valid(node.*)), and so on).
 *
 * Why: the executor parses and prepares every CHECK expression of a table again at each
 * statement that writes it (ExecRelCheck, once per result relation: stringToNode of each
 * constraint's stored tree, then ExecPrepareExpr).  The 26 constraints these functions
 * replace were 19,000 characters of trees, parsed at every dispatch (a single placement
 * writes all five tables): with them, a dispatch_next(1) ran 20% slower.  One call with
 * the whole row is a tree of a few hundred characters.
 *
 * Guarantee: each function refuses exactly the rows the constraints it replaces refused
 * (SQL's rule: a condition that is NULL passes), with the error PostgreSQL gives for a
 * CHECK constraint, under the replaced constraint's name: SQLSTATE 23514
 * (check_violation), "new row for relation "node" violates check constraint
 * "node_cpu_reserved_within_capacity"", the schema, table and constraint fields set, and a
 * detail naming the values.  When a row breaks several, the first by name is reported,
 * as PostgreSQL checks constraints in the order of their names.  A row that passes
 * returns true; none returns false.
 *
 * Columns are found by name in the row type's descriptor (an upgraded table and a fresh
 * one order their columns differently), once per descriptor.  Nothing here runs SQL or
 * resolves a name in the catalogs: the functions have no pinned search_path
 * (90_privileges.sql), as the other per-row C functions.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/tupdesc.h"
#include "fmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/typcache.h"

#include "row_checks.h"

PG_FUNCTION_INFO_V1(sched_node_valid);
PG_FUNCTION_INFO_V1(sched_worker_valid);
PG_FUNCTION_INFO_V1(sched_request_valid);
PG_FUNCTION_INFO_V1(sched_attempt_valid);
PG_FUNCTION_INFO_V1(sched_command_valid);

#define ROW_COLUMNS_MAX 16

/* The columns a table's check reads, by name; their positions in the row type's
 * descriptor as last looked up. */
typedef struct RowColumns
{
	const char *table;
	int			ncolumns;
	const char *names[ROW_COLUMNS_MAX];
	Oid			typid;			/* InvalidOid: not looked up yet */
	uint64		tupdesc_id;		/* the typcache's identifier of that descriptor */
	int			index[ROW_COLUMNS_MAX];	/* 0-based attribute index */
} RowColumns;

/* A row's values of the columns of rc, in rc's order. */
typedef struct RowValues
{
	Datum		v[ROW_COLUMNS_MAX];
	bool		isnull[ROW_COLUMNS_MAX];
} RowValues;

static void
row_values(HeapTupleHeader td, RowColumns *rc, RowValues *out)
{
	Oid			typid = HeapTupleHeaderGetTypeId(td);
	TypeCacheEntry *tce = lookup_type_cache(typid, TYPECACHE_TUPDESC);
	TupleDesc	desc = tce->tupDesc;
	HeapTupleData tuple;
	Datum	   *values;
	bool	   *nulls;
	int			i;

	if (desc == NULL)
		elog(ERROR, "pg_sched: type %u of a sched.%s row is not a row type", typid, rc->table);
	PinTupleDesc(desc);
	if (rc->typid != typid || rc->tupdesc_id != tce->tupDesc_identifier)
	{
		for (i = 0; i < rc->ncolumns; i++)
		{
			int			a;

			rc->index[i] = -1;
			for (a = 0; a < desc->natts; a++)
			{
				Form_pg_attribute att = TupleDescAttr(desc, a);

				if (!att->attisdropped && strcmp(NameStr(att->attname), rc->names[i]) == 0)
				{
					rc->index[i] = a;
					break;
				}
			}
			if (rc->index[i] < 0)
				elog(ERROR, "pg_sched: sched.%s has no column %s", rc->table, rc->names[i]);
		}
		rc->typid = typid;
		rc->tupdesc_id = tce->tupDesc_identifier;
	}
	tuple.t_len = HeapTupleHeaderGetDatumLength(td);
	ItemPointerSetInvalid(&tuple.t_self);
	tuple.t_tableOid = InvalidOid;
	tuple.t_data = td;
	values = palloc(sizeof(Datum) * desc->natts);
	nulls = palloc(sizeof(bool) * desc->natts);
	heap_deform_tuple(&tuple, desc, values, nulls);
	for (i = 0; i < rc->ncolumns; i++)
	{
		out->v[i] = values[rc->index[i]];
		out->isnull[i] = nulls[rc->index[i]];
	}
	ReleaseTupleDesc(desc);
	pfree(values);
	pfree(nulls);
}

static void pg_attribute_noreturn()
violation(const char *table, const char *constraint, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_CHECK_VIOLATION),
			 errmsg("new row for relation \"%s\" violates check constraint \"%s\"",
					table, constraint),
			 errdetail_internal("%s", detail),
			 err_generic_string(PG_DIAG_SCHEMA_NAME, "sched"),
			 err_generic_string(PG_DIAG_TABLE_NAME, table),
			 err_generic_string(PG_DIAG_CONSTRAINT_NAME, constraint)));
}

/* text value i is one of the NULL-terminated `allowed` (a NULL value passes) */
static bool
text_in(const RowValues *r, int i, const char *const *allowed)
{
	char	   *s;

	if (r->isnull[i])
		return true;
	s = TextDatumGetCString(r->v[i]);
	for (; *allowed != NULL; allowed++)
		if (strcmp(s, *allowed) == 0)
			return true;
	return false;
}

static bool
text_empty(const RowValues *r, int i)
{
	return !r->isnull[i] && VARSIZE_ANY_EXHDR(DatumGetPointer(r->v[i])) == 0;
}

static char *
text_of(const RowValues *r, int i)
{
	return r->isnull[i] ? pstrdup("NULL") : TextDatumGetCString(r->v[i]);
}

/* ---- sched.node -------------------------------------------------------------------- */

enum
{
	N_NODE_ID, N_MGMT, N_LABELS, N_CPU, N_MEM, N_GPUS, N_RES_CPU, N_RES_MEM, N_RES_GPUS,
	N_LIVE
};
static RowColumns node_columns = {
	"node", 10,
	{"node_id", "management_status", "labels", "cpu_millis", "memory_mb", "gpus",
	"reserved_cpu_millis", "reserved_memory_mb", "reserved_gpus", "live_attempts"}
};

/* value `value` of column `name` BETWEEN 0 AND value of `bound` (NULLs pass) */
static void
check_within(const RowValues *r, int value, int bound, const char *table,
			 const char *constraint, const char *name, const char *bound_name, bool int8)
{
	int64		x,
				b;

	if (r->isnull[value])
		return;
	x = int8 ? DatumGetInt64(r->v[value]) : DatumGetInt32(r->v[value]);
	if (x < 0)
		violation(table, constraint, psprintf("%s is %lld, below 0.", name, (long long) x));
	if (r->isnull[bound])
		return;
	b = int8 ? DatumGetInt64(r->v[bound]) : DatumGetInt32(r->v[bound]);
	if (x > b)
		violation(table, constraint,
				  psprintf("%s is %lld, above %s %lld.", name, (long long) x, bound_name,
						   (long long) b));
}

static void
check_nonnegative(const RowValues *r, int i, const char *table, const char *constraint,
				  const char *name, bool int8)
{
	int64		x;

	if (r->isnull[i])
		return;
	x = int8 ? DatumGetInt64(r->v[i]) : DatumGetInt32(r->v[i]);
	if (x < 0)
		violation(table, constraint, psprintf("%s is %lld, below 0.", name, (long long) x));
}

/* _node_valid(sched.node): the constraints of a node row, in the order of their names */
Datum
sched_node_valid(PG_FUNCTION_ARGS)
{
	static const char *const statuses[] = {"ACTIVE", "DRAINING", "DISABLED", NULL};
	RowValues	r;

	row_values(PG_GETARG_HEAPTUPLEHEADER(0), &node_columns, &r);
	check_nonnegative(&r, N_CPU, "node", "node_cpu_nonnegative", "cpu_millis", false);
	check_within(&r, N_RES_CPU, N_CPU, "node", "node_cpu_reserved_within_capacity",
				 "reserved_cpu_millis", "cpu_millis", false);
	check_nonnegative(&r, N_GPUS, "node", "node_gpus_nonnegative", "gpus", false);
	check_within(&r, N_RES_GPUS, N_GPUS, "node", "node_gpus_reserved_within_capacity",
				 "reserved_gpus", "gpus", false);
	if (text_empty(&r, N_NODE_ID))
		violation("node", "node_id_not_empty", "node_id is empty.");
	if (!r.isnull[N_LABELS] && !JB_ROOT_IS_OBJECT(DatumGetJsonbP(r.v[N_LABELS])))
		violation("node", "node_labels_object", "labels is not a JSON object.");
	check_nonnegative(&r, N_LIVE, "node", "node_live_attempts_nonnegative", "live_attempts",
					  false);
	if (!text_in(&r, N_MGMT, statuses))
		violation("node", "node_management_status_valid",
				  psprintf("management_status is \"%s\".", text_of(&r, N_MGMT)));
	check_nonnegative(&r, N_MEM, "node", "node_memory_nonnegative", "memory_mb", true);
	check_within(&r, N_RES_MEM, N_MEM, "node", "node_memory_reserved_within_capacity",
				 "reserved_memory_mb", "memory_mb", true);
	PG_RETURN_BOOL(true);
}

/* ---- sched.worker ------------------------------------------------------------------ */

enum
{
	W_CAPABILITY, W_VERSIONS, W_RUNTIME, W_SCHEDULING, W_SLOTS, W_LIVE
};
static RowColumns worker_columns = {
	"worker", 6,
	{"capability", "capability_versions", "runtime_state", "scheduling_status", "slots",
	"live_attempts"}
};

/* _worker_valid(sched.worker) */
Datum
sched_worker_valid(PG_FUNCTION_ARGS)
{
	static const char *const runtime_states[] = {"STARTING", "READY", "DRAINING", "STOPPED", NULL};
	static const char *const scheduling[] = {"ELIGIBLE", "CORDONED", NULL};
	RowValues	r;

	row_values(PG_GETARG_HEAPTUPLEHEADER(0), &worker_columns, &r);
	if (text_empty(&r, W_CAPABILITY))
		violation("worker", "worker_capability_not_empty", "capability is empty.");
	check_within(&r, W_LIVE, W_SLOTS, "worker", "worker_live_attempts_within_slots",
				 "live_attempts", "slots", false);
	if (!text_in(&r, W_RUNTIME, runtime_states))
		violation("worker", "worker_runtime_state_valid",
				  psprintf("runtime_state is \"%s\".", text_of(&r, W_RUNTIME)));
	if (!text_in(&r, W_SCHEDULING, scheduling))
		violation("worker", "worker_scheduling_status_valid",
				  psprintf("scheduling_status is \"%s\".", text_of(&r, W_SCHEDULING)));
	check_nonnegative(&r, W_SLOTS, "worker", "worker_slots_nonnegative", "slots", false);
	if (!r.isnull[W_VERSIONS])
	{
		ArrayType  *a = DatumGetArrayTypeP(r.v[W_VERSIONS]);

		/* cardinality(capability_versions) > 0 */
		if (ArrayGetNItems(ARR_NDIM(a), ARR_DIMS(a)) <= 0)
			violation("worker", "worker_versions_not_empty", "capability_versions is empty.");
	}
	PG_RETURN_BOOL(true);
}

/* ---- sched.request ----------------------------------------------------------------- */

enum
{
	R_ATTEMPT_NUMBER, R_MIN_CPU, R_MIN_MEM, R_MIN_GPUS, R_RES_CPU, R_RES_MEM, R_RES_GPUS,
	R_STATE, R_CLAIM_ID, R_HELD_NODE, R_HELD_WORKER, R_HELD_UNTIL
};
static RowColumns request_columns = {
	"request", 12,
	{"attempt_number", "min_cpu_millis", "min_memory_mb", "min_gpus", "reserve_cpu_millis",
		"reserve_memory_mb", "reserve_gpus", "state", "claim_id", "held_node_id",
	"held_worker_id", "held_until"}
};

/* _request_valid(sched.request) */
Datum
sched_request_valid(PG_FUNCTION_ARGS)
{
	static const char *const states[] = {"PENDING", "CLAIMED", "DISPATCHED", "CANCELLED", NULL};
	static const struct
	{
		int			column;
		const char *name;
		bool		int8;
	}			amounts[] = {
		{R_MIN_CPU, "min_cpu_millis", false}, {R_MIN_MEM, "min_memory_mb", true},
		{R_MIN_GPUS, "min_gpus", false}, {R_RES_CPU, "reserve_cpu_millis", false},
		{R_RES_MEM, "reserve_memory_mb", true}, {R_RES_GPUS, "reserve_gpus", false}
	};
	RowValues	r;
	int			i;

	row_values(PG_GETARG_HEAPTUPLEHEADER(0), &request_columns, &r);
	/* an AND of six comparisons: false when one is false, whatever the others */
	for (i = 0; i < lengthof(amounts); i++)
		check_nonnegative(&r, amounts[i].column, "request", "request_amounts_nonnegative",
						  amounts[i].name, amounts[i].int8);
	if (!r.isnull[R_ATTEMPT_NUMBER] && DatumGetInt32(r.v[R_ATTEMPT_NUMBER]) < 1)
		violation("request", "request_attempt_number_positive",
				  psprintf("attempt_number is %d, below 1.", DatumGetInt32(r.v[R_ATTEMPT_NUMBER])));
	if (!r.isnull[R_STATE])
	{
		bool		claimed = strcmp(text_of(&r, R_STATE), "CLAIMED") == 0;

		if (claimed != !r.isnull[R_CLAIM_ID])
			violation("request", "request_claim_consistent",
					  claimed ? "state is CLAIMED without a claim_id."
					  : "claim_id is set, state is not CLAIMED.");
	}
	if (r.isnull[R_HELD_NODE] != r.isnull[R_HELD_WORKER] ||
		r.isnull[R_HELD_NODE] != r.isnull[R_HELD_UNTIL])
		violation("request", "request_hold_consistent",
				  "held_node_id, held_worker_id and held_until are not all set or all NULL.");
	if (!text_in(&r, R_STATE, states))
		violation("request", "request_state_valid",
				  psprintf("state is \"%s\".", text_of(&r, R_STATE)));
	PG_RETURN_BOOL(true);
}

/* ---- sched.attempt ----------------------------------------------------------------- */

enum
{
	A_STATUS, A_FINISHED_AT
};
static RowColumns attempt_columns = {
	"attempt", 2, {"status", "finished_at"}
};

/* _attempt_valid(sched.attempt) */
Datum
sched_attempt_valid(PG_FUNCTION_ARGS)
{
	static const char *const statuses[] = {"DISPATCHED", "RUNNING", "SUCCEEDED", "FAILED",
	"CANCELLED", "LOST", "PREEMPTED", NULL};
	static const char *const live[] = {"DISPATCHED", "RUNNING", NULL};
	RowValues	r;

	row_values(PG_GETARG_HEAPTUPLEHEADER(0), &attempt_columns, &r);
	if (!r.isnull[A_STATUS] && text_in(&r, A_STATUS, live) != r.isnull[A_FINISHED_AT])
		violation("attempt", "attempt_finished_when_terminal",
				  r.isnull[A_FINISHED_AT]
				  ? psprintf("status is %s, finished_at is NULL.", text_of(&r, A_STATUS))
				  : psprintf("status is %s, finished_at is set.", text_of(&r, A_STATUS)));
	if (!text_in(&r, A_STATUS, statuses))
		violation("attempt", "attempt_status_valid",
				  psprintf("status is \"%s\".", text_of(&r, A_STATUS)));
	PG_RETURN_BOOL(true);
}

/* ---- sched.command ----------------------------------------------------------------- */

enum
{
	C_KIND, C_WORKER_GENERATION, C_DELIVERED_AT, C_DELIVERED_GENERATION
};
static RowColumns command_columns = {
	"command", 4, {"kind", "worker_generation", "delivered_at", "delivered_generation"}
};

/* _command_valid(sched.command) */
Datum
sched_command_valid(PG_FUNCTION_ARGS)
{
	static const char *const kinds[] = {"START", "CANCEL", NULL};
	RowValues	r;

	row_values(PG_GETARG_HEAPTUPLEHEADER(0), &command_columns, &r);
	if (!r.isnull[C_DELIVERED_GENERATION] && !r.isnull[C_WORKER_GENERATION] &&
		DatumGetInt64(r.v[C_DELIVERED_GENERATION]) < DatumGetInt64(r.v[C_WORKER_GENERATION]))
		violation("command", "command_delivered_no_earlier",
				  psprintf("delivered_generation %lld is below worker_generation %lld.",
						   (long long) DatumGetInt64(r.v[C_DELIVERED_GENERATION]),
						   (long long) DatumGetInt64(r.v[C_WORKER_GENERATION])));
	if (r.isnull[C_DELIVERED_AT] != r.isnull[C_DELIVERED_GENERATION])
		violation("command", "command_delivered_whole",
				  "delivered_at and delivered_generation are not both set or both NULL.");
	if (!text_in(&r, C_KIND, kinds))
		violation("command", "command_kind_valid",
				  psprintf("kind is \"%s\".", text_of(&r, C_KIND)));
	PG_RETURN_BOOL(true);
}
