/*
 * queue_bound.c — where each tenant's queue begins: the first entry of request_queue_idx
 * that is not dead, shared so that a queue fetch starts there instead of at the head of
 * the index.
 *
 * A request placed leaves its entry in request_queue_idx until the next vacuum, and the
 * requests placed are the first of their tenant's range: every fetch that started at the
 * head walked over every placement since that vacuum (measured: 1,445 pages, 7.3 ms a
 * fetch, after 175,000 placements).
 *
 * Guarantee: every entry of the tenant's range before its bound pointed, when the bound
 * was set, to a row version that a transaction since committed had deleted or updated (or
 * whose insert had aborted), so no snapshot taken afterwards sees it; and every entry
 * made since is at or after the bound.  A fetch under READ COMMITTED, whose snapshot is
 * taken after it reads the bound, therefore finds nothing before it.  (A REPEATABLE READ
 * snapshot may be older than the bound: such fetches do not use it.)
 *
 *   - A bound is found by a scan of the tenant's range from the current bound with a
 *     dirty snapshot, which returns every version not known dead: the live ones, those
 *     being inserted and those being deleted or updated by running transactions.  The
 *     first such entry is the bound.  The scan is made only by a transaction that has
 *     written nothing yet (no transaction id): a dirty snapshot does not return versions
 *     this transaction deleted, which are live again if it rolls back.
 *   - Every new entry lowers the bound to its key (the AFTER ROW trigger request_queued,
 *     on every version in the index's range), after the entry is in the index.  It also
 *     advances the slot's generation; a bound found by a scan is stored only if the
 *     generation is the one read before the scan, so an entry made during the scan,
 *     which the scan may have passed before it was there, is never left behind a bound.
 *
 * Shared memory (only when preloaded): QUEUE_BOUNDS slots, a tenant's slot chosen by a
 * hash of its database and name, each under its own spinlock, held for a compare and a
 * copy.  A slot holds the bound of one tenant (the one that stored it last); a tenant
 * whose slot holds another's has no bound, and one whose name is NAMEDATALEN bytes or
 * longer never has one.  A slot names the table too: sched.request made again (the
 * extension dropped and created) starts without bounds.  A database at 0.1.0 has no
 * trigger, and its fetches use no bound.  Tenant names compare bytewise: request.tenant is COLLATE "C".
 */
#include "postgres.h"

#include "queue_bound.h"
#include "spi_util.h"

#include "access/genam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "commands/trigger.h"
#include "common/hashfn.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#define QUEUE_BOUNDS 1024

typedef struct BoundSlot
{
	slock_t		mutex;
	uint64		generation;		/* advanced by every entry made in a tenant of the slot */
	bool		valid;
	Oid			dbid;
	Oid			relid;			/* sched.request's: a table made again has none */
	char		tenant[NAMEDATALEN];
	SchedQueueKey bound;
} BoundSlot;

static BoundSlot *slots = NULL;

static int64 bounds_found = 0;	/* this backend's scans that stored a bound */
static int64 bounds_used = 0;	/* fetches it started at a bound */

PG_FUNCTION_INFO_V1(sched_request_queued);

Size
sched_queue_bound_shmem_size(void)
{
	return mul_size(sizeof(BoundSlot), QUEUE_BOUNDS);
}

void
sched_queue_bound_shmem_attach(void *ptr, bool found)
{
	int			i;

	slots = ptr;
	if (!found)
	{
		for (i = 0; i < QUEUE_BOUNDS; i++)
		{
			SpinLockInit(&slots[i].mutex);
			slots[i].generation = 0;
			slots[i].valid = false;
		}
	}
}

static BoundSlot *
slot_of(const char *tenant, size_t len)
{
	uint32		h = hash_bytes((const unsigned char *) tenant, (int) len);

	h = hash_combine(h, hash_uint32((uint32) MyDatabaseId));
	return &slots[h % QUEUE_BOUNDS];
}

static bool
slot_holds(const BoundSlot *s, Oid relid, const char *tenant)
{
	return s->valid && s->dbid == MyDatabaseId && s->relid == relid &&
		strcmp(s->tenant, tenant) == 0;
}

static Oid
request_relid(void)
{
	return get_relname_relid("request", get_namespace_oid("sched", false));
}

static int
key_cmp(const SchedQueueKey *a, const SchedQueueKey *b)
{
	if (a->sort_key != b->sort_key)
		return a->sort_key < b->sort_key ? -1 : 1;
	if (a->queued_at != b->queued_at)
		return a->queued_at < b->queued_at ? -1 : 1;
	if (a->request_id != b->request_id)
		return a->request_id < b->request_id ? -1 : 1;
	return 0;
}

/* the first version of the tenant's range at or after *from (NULL: its head) that a dirty
 * snapshot returns, into *found; false when there is none */
static bool
first_not_dead(Oid relid, const char *tenant, const SchedQueueKey *from, SchedQueueKey *found)
{
	Oid			indexid = get_relname_relid("request_queue_idx", get_namespace_oid("sched", false));
	SnapshotData dirty;
	Relation	rel;
	Relation	index;
	TupleTableSlot *slot;
	IndexScanDesc scan;
	ScanKeyData keys[2];
	int			nkeys = 1;
	AttrNumber	sort_att,
				queued_att,
				id_att;
	bool		any = false;

	if (!OidIsValid(relid) || !OidIsValid(indexid))
		elog(ERROR, "pg_sched: sched.request or its index request_queue_idx is missing");
	InitDirtySnapshot(dirty);
	rel = table_open(relid, AccessShareLock);
	index = index_open(indexid, AccessShareLock);
	sort_att = sched_column_of(rel, "sort_key");
	queued_att = sched_column_of(rel, "queued_at");
	id_att = sched_column_of(rel, "request_id");
	ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_TEXTEQ, CStringGetTextDatum(tenant));
	keys[0].sk_collation = index->rd_indcollation[0];
	if (from != NULL)
	{
		ScanKeyInit(&keys[1], 2, BTGreaterEqualStrategyNumber, F_FLOAT8GE,
					Float8GetDatum(from->sort_key));
		nkeys = 2;
	}
	slot = table_slot_create(rel, NULL);
	scan = index_beginscan(rel, index, &dirty, nkeys, 0);
	index_rescan(scan, keys, nkeys, NULL, 0);
	while (index_getnext_slot(scan, ForwardScanDirection, slot))
	{
		bool		isnull;

		found->sort_key = DatumGetFloat8(slot_getattr(slot, sort_att, &isnull));
		found->queued_at = DatumGetTimestampTz(slot_getattr(slot, queued_att, &isnull));
		found->request_id = DatumGetInt64(slot_getattr(slot, id_att, &isnull));
		if (from == NULL || key_cmp(found, from) >= 0)
		{
			any = true;
			break;
		}
	}
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	index_close(index, AccessShareLock);
	table_close(rel, AccessShareLock);
	return any;
}

bool
sched_queue_bound(const char *tenant, SchedQueueKey *bound)
{
	size_t		len = strlen(tenant);
	BoundSlot  *s;
	bool		have;
	uint64		generation;
	SchedQueueKey found;

	Oid			relid;

	/* (a 0.1.0 schema has no trigger request_queued to lower the bound) */
	if (slots == NULL || len >= NAMEDATALEN || IsolationUsesXactSnapshot() ||
		!sched_schema_is_0_2())
		return false;
	relid = request_relid();
	s = slot_of(tenant, len);
	SpinLockAcquire(&s->mutex);
	have = slot_holds(s, relid, tenant);
	if (have)
		*bound = s->bound;
	generation = s->generation;
	SpinLockRelease(&s->mutex);

	/* only a transaction that has written nothing may move the bound (see above) */
	if (!TransactionIdIsValid(GetTopTransactionIdIfAny()) &&
		first_not_dead(relid, tenant, have ? bound : NULL, &found) &&
		(!have || key_cmp(&found, bound) > 0))
	{
		SpinLockAcquire(&s->mutex);
		if (s->generation == generation)
		{
			s->valid = true;
			s->dbid = MyDatabaseId;
			s->relid = relid;
			strlcpy(s->tenant, tenant, NAMEDATALEN);
			s->bound = found;
			*bound = found;
			have = true;
			bounds_found++;
		}
		SpinLockRelease(&s->mutex);
	}
	if (have)
		bounds_used++;
	return have;
}

void
sched_queue_bound_stats(int64 *found, int64 *used)
{
	*found = bounds_found;
	*used = bounds_used;
}

/*
 * sched._request_queued(): the AFTER INSERT OR UPDATE trigger of sched.request, for
 * versions in request_queue_idx's range (state PENDING or CLAIMED): lowers the tenant's
 * bound to the version's key and advances its slot's generation.
 */
Datum
sched_request_queued(PG_FUNCTION_ARGS)
{
	TriggerData *td = (TriggerData *) fcinfo->context;
	HeapTuple	tuple;
	TupleDesc	desc;
	SchedQueueKey key;
	bool		isnull;
	char	   *tenant;
	BoundSlot  *s;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_AFTER(td->tg_event) ||
		!TRIGGER_FIRED_FOR_ROW(td->tg_event))
		elog(ERROR, "pg_sched: _request_queued must be an AFTER ROW trigger");
	tuple = TRIGGER_FIRED_BY_UPDATE(td->tg_event) ? td->tg_newtuple : td->tg_trigtuple;
	if (slots == NULL)
		return PointerGetDatum(NULL);
	desc = RelationGetDescr(td->tg_relation);
	tenant = TextDatumGetCString(heap_getattr(tuple, sched_column_of(td->tg_relation, "tenant"),
											  desc, &isnull));
	key.sort_key = DatumGetFloat8(heap_getattr(tuple, sched_column_of(td->tg_relation, "sort_key"),
											   desc, &isnull));
	key.queued_at = DatumGetTimestampTz(heap_getattr(tuple, sched_column_of(td->tg_relation, "queued_at"),
													 desc, &isnull));
	key.request_id = DatumGetInt64(heap_getattr(tuple, sched_column_of(td->tg_relation, "request_id"),
												desc, &isnull));
	s = slot_of(tenant, strlen(tenant));
	SpinLockAcquire(&s->mutex);
	s->generation++;
	if (slot_holds(s, RelationGetRelid(td->tg_relation), tenant) && key_cmp(&key, &s->bound) < 0)
		s->bound = key;
	SpinLockRelease(&s->mutex);
	return PointerGetDatum(NULL);
}
