/*
 * tenant_live.c — the sums of sched.tenant_live, kept by the statement triggers on
 * sched.attempt (sched._attempt_live_changed, 25_work_api.sql).
 *
 * For each tenant a statement changed attempts of: the change in its live attempts
 * (DISPATCHED or RUNNING) and in what they reserve, from the statement's transition
 * tables, added to the tenant's row of this backend's slot (MyBackendId: no concurrent
 * transaction writes that row, so writers never wait on one another) in the same
 * transaction as the attempts' change.  Only tenants whose sums change are written: a
 * start (DISPATCHED to RUNNING) and a change of an ended attempt write nothing.  TRUNCATE
 * of sched.attempt empties sched.tenant_live.
 *
 * Guarantee: for every tenant, the sums of its rows equal what its live attempts count
 * and reserve, in every snapshot (the trigger's writes commit with the attempts').  The
 * same trigger rebuilds the sums while pg_restore loads sched.attempt (ENABLE ALWAYS).
 */
#include "postgres.h"

#include "commands/trigger.h"
#include "common/int.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/rel.h"
#include "utils/tuplestore.h"

#include "access/stratnum.h"
#include "catalog/pg_collation.h"
#include "utils/fmgroids.h"

#include "placement.h"
#include "row_write.h"
#include "settings.h"
#include "spi_util.h"
#include "tenant_live.h"

PG_FUNCTION_INFO_V1(sched_attempt_live_changed);

/* one tenant's change: live attempts, and what they reserve */
typedef SchedTenantDelta TenantDelta;

/* the columns of sched.attempt the sums read */
typedef struct LiveColumns
{
	AttrNumber	tenant;
	AttrNumber	status;
	AttrNumber	cpu_millis;
	AttrNumber	memory_mb;
	AttrNumber	gpus;
} LiveColumns;

static SchedStatement tenant_live_added = {
	"INSERT INTO sched.tenant_live AS l (tenant, backend, live, cpu_millis, memory_mb, gpus) "
	"VALUES ($1, $2, $3, $4, $5, $6) "
	"ON CONFLICT (tenant, backend) DO UPDATE "
	"   SET live = l.live OPERATOR(pg_catalog.+) excluded.live, "
	"       cpu_millis = l.cpu_millis OPERATOR(pg_catalog.+) excluded.cpu_millis, "
	"       memory_mb = l.memory_mb OPERATOR(pg_catalog.+) excluded.memory_mb, "
	"       gpus = l.gpus OPERATOR(pg_catalog.+) excluded.gpus",
	6, {TEXTOID, INT4OID, INT8OID, INT8OID, INT8OID, INT8OID},
	.keyed = true
};

static SchedStatement tenant_live_emptied = {
	"DELETE FROM sched.tenant_live",
	0, {InvalidOid}
};

static void
add_checked(int64 *sum, int64 value)
{
	if (pg_add_s64_overflow(*sum, value, sum))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("bigint out of range"),
				 errcontext("summing the live attempts of sched.attempt into sched.tenant_live")));
}

void
sched_tenant_delta_of_attempt(Datum tenant, Datum cpu_millis, Datum memory_mb, Datum gpus,
							  int sign, SchedTenantDelta *d)
{
	d->tenant = TextDatumGetCString(tenant);
	d->live = sign;
	d->cpu_millis = sign * (int64) DatumGetInt32(cpu_millis);
	d->memory_mb = sign * DatumGetInt64(memory_mb);
	d->gpus = sign * (int64) DatumGetInt32(gpus);
}

/*
 * Appends the live rows of transition table `rows`, each counted `sign` (+1 new, -1
 * old), to deltas (one entry per row; summed by tenant afterwards).
 */
static void
collect(Tuplestorestate *rows, TupleDesc desc, const LiveColumns *col, int sign,
		TenantDelta **deltas, int *n, int *cap)
{
	TupleTableSlot *slot = MakeSingleTupleTableSlot(desc, &TTSOpsMinimalTuple);
	int			ptr = tuplestore_alloc_read_pointer(rows, EXEC_FLAG_REWIND);

	tuplestore_select_read_pointer(rows, ptr);
	tuplestore_rescan(rows);
	while (tuplestore_gettupleslot(rows, true, false, slot))
	{
		bool		isnull;
		char	   *status = TextDatumGetCString(slot_getattr(slot, col->status, &isnull));

		if (!sched_attempt_status_live(status))
			continue;
		if (*n == *cap)
		{
			*cap *= 2;
			*deltas = repalloc(*deltas, sizeof(TenantDelta) * *cap);
		}
		sched_tenant_delta_of_attempt(slot_getattr(slot, col->tenant, &isnull),
									  slot_getattr(slot, col->cpu_millis, &isnull),
									  slot_getattr(slot, col->memory_mb, &isnull),
									  slot_getattr(slot, col->gpus, &isnull),
									  sign, &(*deltas)[(*n)++]);
	}
	ExecDropSingleTupleTableSlot(slot);
}

static int
by_tenant(const void *a, const void *b)
{
	return strcmp(((const TenantDelta *) a)->tenant, ((const TenantDelta *) b)->tenant);
}

static const char *const tenant_live_columns[] = {
	"tenant", "backend", "live", "cpu_millis", "memory_mb", "gpus", NULL
};
static const char *const no_triggers[] = {NULL};
static const SchedTableShape tenant_live_shape = {
	"tenant_live", no_triggers, NULL, NULL, NULL, false, tenant_live_columns
};

/*
 * What tenant_live_added does, without the statement (row_write.c): the row of
 * (tenant, backend) gets the sums added, or is inserted with them.  Only this backend
 * writes its rows (its slot is its own while it runs), so the row's lock is free and no
 * concurrent insert of the same key can be under way.
 */
static void
tenant_live_add_direct(SchedRowWriter *w, const TenantDelta *sum, int backend)
{
	static const char *const names[] = {"live", "cpu_millis", "memory_mb", "gpus"};
	ScanKeyData keys[2];
	HeapTuple	old;
	Datum		v[6];
	bool		n[6] = {false, false, false, false, false, false};
	int64		add[4];
	int			k;

	add[0] = sum->live;
	add[1] = sum->cpu_millis;
	add[2] = sum->memory_mb;
	add[3] = sum->gpus;
	ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_TEXTEQ, CStringGetTextDatum(sum->tenant));
	keys[0].sk_collation = C_COLLATION_OID; /* tenant's */
	ScanKeyInit(&keys[1], 2, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(backend));
	old = sched_row_lock(w, "tenant_live_pkey", keys, 2);
	if (old == NULL)
	{
		v[0] = CStringGetTextDatum(sum->tenant);
		v[1] = Int32GetDatum(backend);
		for (k = 0; k < 4; k++)
			v[2 + k] = Int64GetDatum(add[k]);
		sched_row_insert(w, v, n);
		return;
	}
	for (k = 0; k < 4; k++)
	{
		Datum		d = heap_getattr(old, sched_column_of(w->rel, names[k]),
									 RelationGetDescr(w->rel), &n[k]);
		int64		x = n[k] ? 0 : DatumGetInt64(d);

		/* NULL + x is NULL in SQL (the columns are NOT NULL: the check refuses it) */
		if (!n[k])
			add_checked(&x, add[k]);
		v[k] = Int64GetDatum(x);
	}
	(void) sched_row_update(w, old, names, v, n, 4);
}

void
sched_tenant_live_add(SchedTenantDelta *deltas, int n)
{
	int			backend = MyBackendId;
	int			i;
	SchedRowWriter w;
	EState	   *estate = NULL;
	bool		direct = false;

	if (n > 1)
		qsort(deltas, n, sizeof(TenantDelta), by_tenant);

	for (i = 0; i < n;)
	{
		TenantDelta sum = deltas[i];
		int			j;

		for (j = i + 1; j < n && strcmp(deltas[j].tenant, sum.tenant) == 0; j++)
		{
			add_checked(&sum.live, deltas[j].live);
			add_checked(&sum.cpu_millis, deltas[j].cpu_millis);
			add_checked(&sum.memory_mb, deltas[j].memory_mb);
			add_checked(&sum.gpus, deltas[j].gpus);
		}
		i = j;
		if (sum.live == 0 && sum.cpu_millis == 0 && sum.memory_mb == 0 && sum.gpus == 0)
			continue;
		if (estate == NULL && sched_direct_writes)
		{
			estate = CreateExecutorState();
			direct = sched_row_writer_open(&w, &tenant_live_shape, estate);
		}
		if (direct)
			tenant_live_add_direct(&w, &sum, backend);
		else
		{
			Datum		v[6];

			v[0] = CStringGetTextDatum(sum.tenant);
			v[1] = Int32GetDatum(backend);
			v[2] = Int64GetDatum(sum.live);
			v[3] = Int64GetDatum(sum.cpu_millis);
			v[4] = Int64GetDatum(sum.memory_mb);
			v[5] = Int64GetDatum(sum.gpus);
			sched_spi_exec(&tenant_live_added, v, NULL, false, 0, SPI_OK_INSERT);
		}
	}
	if (direct)
	{
		sched_row_writer_close(&w);
		CommandCounterIncrement();
	}
	if (estate != NULL)
		FreeExecutorState(estate);
}

/*
 * sched._attempt_live_changed(): AFTER INSERT, UPDATE or DELETE FOR EACH STATEMENT on
 * sched.attempt, with the transition tables of its event (new_rows, old_rows), and
 * AFTER TRUNCATE.  Writes each tenant's change, in the order of the tenants' names.
 */
Datum
sched_attempt_live_changed(PG_FUNCTION_ARGS)
{
	TriggerData *td = (TriggerData *) fcinfo->context;
	TupleDesc	desc;
	LiveColumns col;
	TenantDelta *deltas;
	int			n = 0;
	int			cap = 8;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("sched._attempt_live_changed() may only be called as a trigger")));
	if (!TRIGGER_FIRED_AFTER(td->tg_event) || TRIGGER_FIRED_FOR_ROW(td->tg_event))
		elog(ERROR, "sched._attempt_live_changed() must be an AFTER STATEMENT trigger");

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pg_sched: SPI_connect failed");
	if (TRIGGER_FIRED_BY_TRUNCATE(td->tg_event))
	{
		sched_spi_exec(&tenant_live_emptied, NULL, NULL, false, 0, SPI_OK_DELETE);
		SPI_finish();
		return PointerGetDatum(NULL);
	}

	desc = RelationGetDescr(td->tg_relation);
	col.tenant = sched_column_of(td->tg_relation, "tenant");
	col.status = sched_column_of(td->tg_relation, "status");
	col.cpu_millis = sched_column_of(td->tg_relation, "reserve_cpu_millis");
	col.memory_mb = sched_column_of(td->tg_relation, "reserve_memory_mb");
	col.gpus = sched_column_of(td->tg_relation, "reserve_gpus");

	deltas = palloc(sizeof(TenantDelta) * cap);
	if (td->tg_newtable != NULL)
		collect(td->tg_newtable, desc, &col, 1, &deltas, &n, &cap);
	if (td->tg_oldtable != NULL)
		collect(td->tg_oldtable, desc, &col, -1, &deltas, &n, &cap);
	sched_tenant_live_add(deltas, n);
	SPI_finish();
	return PointerGetDatum(NULL);
}
