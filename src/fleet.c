/*
 * fleet.c — reading the fleet snapshot that placement works on, and the locked re-read
 * of one (worker, node) pair that the reservation re-checks.
 *
 * Reads take no locks (plain MVCC snapshot of the calling statement); only
 * sched_fleet_lock_pair() locks, FOR UPDATE of the worker and its node.
 * sched_fleet_pair_locker() tells, without locking, whether another transaction holds
 * either row, so that a dispatcher can pass over (or wait for) a busy pair without
 * ending up holding one row of it: SKIP LOCKED on a join locks the rows it reaches
 * before the one that is skipped, and keeps them.
 */
#include "pg_sched.h"

#include "access/heapam.h"
#include "access/multixact.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "storage/bufmgr.h"
#include "storage/itemptr.h"
#include "storage/procarray.h"
#include "utils/array.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

/* Columns of a fleet row; keep in step with FLEET_COLUMNS. */
enum
{
	FC_NODE_ID = 1, FC_MGMT, FC_LABELS, FC_CPU, FC_MEM, FC_GPUS, FC_WEIGHT,
	FC_RES_CPU, FC_RES_MEM, FC_RES_GPUS, FC_NODE_LIVE,
	FC_WORKER_ID, FC_RUNTIME, FC_SCHEDULING, FC_HEARTBEAT, FC_VERSIONS, FC_SLOTS,
	FC_WORKER_LIVE, FC_GENERATION, FC_WORKER_TID, FC_NODE_TID
};

#define FLEET_COLUMNS \
	"SELECT n.node_id, n.management_status, n.labels, n.cpu_millis, n.memory_mb, n.gpus, " \
	"       n.weight, n.reserved_cpu_millis, n.reserved_memory_mb, n.reserved_gpus, " \
	"       n.live_attempts, w.worker_id, w.runtime_state, w.scheduling_status, " \
	"       w.last_heartbeat, w.capability_versions, w.slots, w.live_attempts, w.generation, " \
	"       w.ctid, n.ctid "

static SchedStatement fleet_capable = {
	FLEET_COLUMNS
	"  FROM sched.worker w JOIN sched.node n ON n.node_id OPERATOR(pg_catalog.=) w.node_id "
	" WHERE w.capability OPERATOR(pg_catalog.=) $1",
	1, {TEXTOID}, NULL, true		/* a capability may have 1 worker or most of the fleet */
};

static SchedStatement fleet_all = {
	FLEET_COLUMNS
	"  FROM sched.node n LEFT JOIN sched.worker w "
	"    ON w.node_id OPERATOR(pg_catalog.=) n.node_id AND w.capability OPERATOR(pg_catalog.=) $1 "
	" ORDER BY n.node_id COLLATE \"C\"",
	1, {TEXTOID}, NULL, true
};

static SchedStatement pair_lock = {
	FLEET_COLUMNS
	"  FROM sched.worker w JOIN sched.node n ON n.node_id OPERATOR(pg_catalog.=) w.node_id "
	" WHERE w.worker_id OPERATOR(pg_catalog.=) $1 FOR UPDATE OF w, n",
	1, {UUIDOID}
};

static SchedStatement pair_lock_skip = {
	FLEET_COLUMNS
	"  FROM sched.worker w JOIN sched.node n ON n.node_id OPERATOR(pg_catalog.=) w.node_id "
	" WHERE w.worker_id OPERATOR(pg_catalog.=) $1 FOR UPDATE OF w, n SKIP LOCKED",
	1, {UUIDOID}
};

static void index_by_node(SchedFleetCacheEntry *e);
static SchedFleetRow *row_of_node(SchedFleetCacheEntry *e, const char *node_id);

static SchedNodeStatus
node_status(const char *s)
{
	if (strcmp(s, "ACTIVE") == 0)
		return SCHED_NODE_ACTIVE;
	if (strcmp(s, "DRAINING") == 0)
		return SCHED_NODE_DRAINING;
	return SCHED_NODE_DISABLED;
}

static SchedRuntimeState
runtime_state(const char *s)
{
	if (strcmp(s, "READY") == 0)
		return SCHED_WORKER_READY;
	if (strcmp(s, "STARTING") == 0)
		return SCHED_WORKER_STARTING;
	if (strcmp(s, "DRAINING") == 0)
		return SCHED_WORKER_DRAINING;
	return SCHED_WORKER_STOPPED;
}

/* Decodes SPI_tuptable row i into *r (strings copied into CurrentMemoryContext).
 * Without with_labels the node's labels are left empty (not parsed). */
static void
decode_row(int i, SchedFleetRow *r, bool with_labels)
{
	SchedCandidate *c = &r->c;
	bool		isnull;
	Datum		d;

	memset(r, 0, sizeof(*r));
	c->node_id = sched_spi_text(i, FC_NODE_ID);
	c->management_status = node_status(sched_spi_text(i, FC_MGMT));
	d = sched_spi_get(i, FC_LABELS, &isnull);
	if (!isnull && with_labels)
		sched_labels_from_jsonb(DatumGetJsonbP(d), NULL, &c->labels);
	c->cpu_millis = sched_spi_int64(i, FC_CPU);
	c->memory_mb = sched_spi_int64(i, FC_MEM);
	c->gpus = sched_spi_int64(i, FC_GPUS);
	c->weight = (int32) sched_spi_int64(i, FC_WEIGHT);
	c->reserved_cpu_millis = sched_spi_int64(i, FC_RES_CPU);
	c->reserved_memory_mb = sched_spi_int64(i, FC_RES_MEM);
	c->reserved_gpus = sched_spi_int64(i, FC_RES_GPUS);
	c->node_live_attempts = (int32) sched_spi_int64(i, FC_NODE_LIVE);
	r->node_tid = *((ItemPointer) DatumGetPointer(sched_spi_get(i, FC_NODE_TID, &isnull)));

	d = sched_spi_get(i, FC_WORKER_ID, &isnull);
	c->has_worker = !isnull;
	if (!c->has_worker)
		return;
	r->worker_id = *DatumGetUUIDP(d);
	c->runtime_state = runtime_state(sched_spi_text(i, FC_RUNTIME));
	c->scheduling_status = strcmp(sched_spi_text(i, FC_SCHEDULING), "ELIGIBLE") == 0
		? SCHED_WORKER_ELIGIBLE : SCHED_WORKER_CORDONED;
	d = sched_spi_get(i, FC_HEARTBEAT, &isnull);
	c->has_heartbeat = !isnull;
	c->last_heartbeat = isnull ? 0 : DatumGetTimestampTz(d);
	d = sched_spi_get(i, FC_VERSIONS, &isnull);
	if (!isnull)
	{
		ArrayType  *arr = DatumGetArrayTypeP(d);
		Datum	   *elems;
		bool	   *nulls;
		int			n;
		int			k;
		const char **versions;

		deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
		versions = palloc(sizeof(char *) * Max(n, 1));
		for (k = 0; k < n; k++)
			versions[k] = nulls[k] ? NULL : TextDatumGetCString(elems[k]);
		c->versions = versions;
		c->version_count = n;
	}
	c->slots = (int32) sched_spi_int64(i, FC_SLOTS);
	c->worker_live_attempts = (int32) sched_spi_int64(i, FC_WORKER_LIVE);
	r->generation = sched_spi_int64(i, FC_GENERATION);
	r->worker_tid = *((ItemPointer) DatumGetPointer(sched_spi_get(i, FC_WORKER_TID, &isnull)));
}

void
sched_fleet_load(const char *capability, int flags, SchedFleet *fleet)
{
	Datum		arg = CStringGetTextDatum(capability);
	uint64		i;

	sched_spi_exec((flags & SCHED_FLEET_ALL_NODES) ? &fleet_all : &fleet_capable, &arg, NULL,
				   !(flags & SCHED_FLEET_FRESH), 0, SPI_OK_SELECT);
	fleet->count = (int) SPI_processed;
	fleet->rows = palloc(sizeof(SchedFleetRow) * Max(fleet->count, 1));
	for (i = 0; i < SPI_processed; i++)
		decode_row((int) i, &fleet->rows[i], (flags & SCHED_FLEET_LABELS) != 0);
}

int
sched_fleet_flags_for(const SchedPlacement *p, bool for_eligibility_only)
{
	bool		labels = p->required_labels.count > 0 ||
		(!for_eligibility_only && p->preferred_labels.count > 0);

	return labels ? SCHED_FLEET_LABELS : 0;
}

SchedFleet *
sched_fleet_cached(SchedFleetCache *cache, const char *capability, bool all_nodes)
{
	int			i;
	MemoryContext old;
	SchedFleetCacheEntry *e;

	for (i = 0; i < cache->count; i++)
		if (cache->entries[i].all_nodes == all_nodes &&
			strcmp(cache->entries[i].capability, capability) == 0)
			return &cache->entries[i].fleet;
	/* the new read must see the batch's reservations: write them first */
	sched_flush_reservations(cache);
	old = MemoryContextSwitchTo(cache->cxt);
	if (cache->count == cache->allocated)
	{
		cache->allocated = Max(4, cache->allocated * 2);
		cache->entries = cache->entries == NULL
			? palloc(sizeof(SchedFleetCacheEntry) * cache->allocated)
			: repalloc(cache->entries, sizeof(SchedFleetCacheEntry) * cache->allocated);
	}
	e = &cache->entries[cache->count++];
	e->capability = pstrdup(capability);
	e->all_nodes = all_nodes;
	sched_fleet_load(capability,
					 SCHED_FLEET_FRESH | SCHED_FLEET_LABELS | (all_nodes ? SCHED_FLEET_ALL_NODES : 0),
					 &e->fleet);
	index_by_node(e);
	if (e->fleet.count > cache->ranked_size)
	{
		cache->ranked_size = e->fleet.count;
		cache->ranked = cache->ranked == NULL
			? palloc(sizeof(SchedRanked) * cache->ranked_size)
			: repalloc(cache->ranked, sizeof(SchedRanked) * cache->ranked_size);
	}
	MemoryContextSwitchTo(old);
	return &e->fleet;
}

void
sched_fleet_cache_update(SchedFleetCache *cache, const SchedFleetRow *fresh)
{
	int			i;

	if (cache == NULL)
		return;
	for (i = 0; i < cache->count; i++)
	{
		SchedFleetRow *r = row_of_node(&cache->entries[i], fresh->c.node_id);
		SchedCandidate *c;

		if (r == NULL)
			continue;
		c = &r->c;
		/* node fields: shared by the node's workers of every capability */
		c->management_status = fresh->c.management_status;
		c->cpu_millis = fresh->c.cpu_millis;
		c->memory_mb = fresh->c.memory_mb;
		c->gpus = fresh->c.gpus;
		c->weight = fresh->c.weight;
		c->reserved_cpu_millis = fresh->c.reserved_cpu_millis;
		c->reserved_memory_mb = fresh->c.reserved_memory_mb;
		c->reserved_gpus = fresh->c.reserved_gpus;
		c->node_live_attempts = fresh->c.node_live_attempts;
		/* worker fields: only the row of that worker (labels and versions, which live
		 * in the caller's memory, are not copied) */
		if (c->has_worker && memcmp(&r->worker_id, &fresh->worker_id, sizeof(pg_uuid_t)) == 0)
		{
			c->runtime_state = fresh->c.runtime_state;
			c->scheduling_status = fresh->c.scheduling_status;
			c->has_heartbeat = fresh->c.has_heartbeat;
			c->last_heartbeat = fresh->c.last_heartbeat;
			c->slots = fresh->c.slots;
			c->worker_live_attempts = fresh->c.worker_live_attempts;
			r->generation = fresh->generation;
		}
	}
}

/*
 * Another in-progress transaction that holds a lock on (or is updating) the row version
 * at tid of relation sched.<relname>, or InvalidTransactionId.  Reads the tuple's xmax
 * (members of a MultiXact too) without taking any row lock.
 */
static TransactionId
row_locker(const char *relname, ItemPointer tid)
{
	Oid			relid = get_relname_relid(relname, get_namespace_oid("sched", false));
	Relation	rel;
	HeapTupleData tuple;
	Buffer		buf;
	TransactionId result = InvalidTransactionId;
	TransactionId xmax;
	uint16		infomask;

	if (!ItemPointerIsValid(tid))
		return InvalidTransactionId;
	rel = table_open(relid, AccessShareLock);
	tuple.t_self = *tid;
	if (!heap_fetch(rel, SnapshotAny, &tuple, &buf, true))
	{
		if (BufferIsValid(buf))
			ReleaseBuffer(buf);
		table_close(rel, AccessShareLock);
		return InvalidTransactionId;
	}
	LockBuffer(buf, BUFFER_LOCK_SHARE);
	infomask = tuple.t_data->t_infomask;
	xmax = HeapTupleHeaderGetRawXmax(tuple.t_data);
	LockBuffer(buf, BUFFER_LOCK_UNLOCK);
	ReleaseBuffer(buf);
	table_close(rel, AccessShareLock);

	if (infomask & HEAP_XMAX_INVALID)
		return InvalidTransactionId;
	if (infomask & HEAP_XMAX_IS_MULTI)
	{
		MultiXactMember *members;
		int			n = GetMultiXactIdMembers(xmax, &members, false,
											  HEAP_XMAX_IS_LOCKED_ONLY(infomask));
		int			i;

		for (i = 0; i < n && !TransactionIdIsValid(result); i++)
			if (!TransactionIdIsCurrentTransactionId(members[i].xid) &&
				TransactionIdIsInProgress(members[i].xid))
				result = members[i].xid;
		if (n > 0)
			pfree(members);
		return result;
	}
	if (TransactionIdIsValid(xmax) && !TransactionIdIsCurrentTransactionId(xmax) &&
		TransactionIdIsInProgress(xmax))
		return xmax;
	return InvalidTransactionId;
}

TransactionId
sched_fleet_pair_locker(const SchedFleetRow *row)
{
	TransactionId xid = row_locker("worker", (ItemPointer) &row->worker_tid);

	if (!TransactionIdIsValid(xid))
		xid = row_locker("node", (ItemPointer) &row->node_tid);
	return xid;
}

bool
sched_fleet_lock_pair(pg_uuid_t *worker_id, bool skip_locked, SchedFleetRow *row)
{
	Datum		arg = UUIDPGetDatum(worker_id);

	sched_spi_exec(skip_locked ? &pair_lock_skip : &pair_lock, &arg, NULL, false, 1,
				   SPI_OK_SELECT);
	if (SPI_processed == 0)
		return false;
	decode_row(0, row, true);
	return true;
}

int
sched_fleet_admit(const SchedPlacement *p, const SchedFleet *fleet, SchedRanked *out)
{
	int			n = 0;
	int			i;

	for (i = 0; i < fleet->count; i++)
	{
		if (sched_admission(p, &fleet->rows[i].c) != 0)
			continue;
		sched_score(p, &fleet->rows[i].c, &out[n]);
		out[n].index = i;
		n++;
	}
	return n;
}

SchedRanked *
sched_fleet_rank(const SchedPlacement *p, const SchedFleet *fleet, int *count)
{
	SchedRanked *ranked = palloc(sizeof(SchedRanked) * Max(fleet->count, 1));

	*count = sched_fleet_admit(p, fleet, ranked);
	sched_rank(ranked, *count);
	return ranked;
}

static const SchedFleet *sort_fleet;

static int
row_node_cmp(const void *a, const void *b)
{
	return strcmp(sort_fleet->rows[*(const int *) a].c.node_id,
				  sort_fleet->rows[*(const int *) b].c.node_id);
}

/* Builds e->by_node: row indexes of e's fleet sorted by node_id (one row per node). */
static void
index_by_node(SchedFleetCacheEntry *e)
{
	int			i;

	e->by_node = palloc(sizeof(int) * Max(e->fleet.count, 1));
	for (i = 0; i < e->fleet.count; i++)
		e->by_node[i] = i;
	sort_fleet = &e->fleet;
	qsort(e->by_node, e->fleet.count, sizeof(int), row_node_cmp);
	sort_fleet = NULL;
}

/* The row of node_id in e's fleet, or NULL. */
static SchedFleetRow *
row_of_node(SchedFleetCacheEntry *e, const char *node_id)
{
	int			lo = 0;
	int			hi = e->fleet.count - 1;

	while (lo <= hi)
	{
		int			mid = lo + (hi - lo) / 2;
		SchedFleetRow *r = &e->fleet.rows[e->by_node[mid]];
		int			c = strcmp(r->c.node_id, node_id);

		if (c == 0)
			return r;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return NULL;
}

char *
sched_fleet_summary(const SchedPlacement *p, const SchedFleet *fleet, int *eligible)
{
	int			counts[SCHED_R_COUNT] = {0};
	int			ok = 0;
	int			i;
	size_t		len;
	char	   *buf;

	for (i = 0; i < fleet->count; i++)
	{
		SchedReasonSet r = sched_admission(p, &fleet->rows[i].c);

		if (r == 0)
			ok++;
		sched_count_reasons(r, counts);
	}
	len = sched_format_summary(NULL, 0, fleet->count, ok, counts);
	buf = palloc(len + 1);
	sched_format_summary(buf, len + 1, fleet->count, ok, counts);
	if (eligible != NULL)
		*eligible = ok;
	return buf;
}
