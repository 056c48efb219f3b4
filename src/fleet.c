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
#include "postgres.h"

#include "fleet.h"
#include "validate.h"
#include "spi_util.h"

#include "access/heapam.h"
#include "access/multixact.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "utils/fmgroids.h"
#include "common/hashfn.h"
#include "storage/bufmgr.h"
#include "storage/itemptr.h"
#include "storage/procarray.h"
#include "utils/array.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

uint32
sched_node_hash(const char *node_id)
{
	return hash_bytes((const unsigned char *) node_id, strlen(node_id));
}

/* Columns of a fleet row; keep in step with SCHED_FLEET_COLUMNS. */
enum
{
	FC_NODE_ID = 1, FC_MGMT, FC_LABELS, FC_CPU, FC_MEM, FC_GPUS, FC_WEIGHT,
	FC_RES_CPU, FC_RES_MEM, FC_RES_GPUS, FC_NODE_LIVE,
	FC_WORKER_ID, FC_RUNTIME, FC_SCHEDULING, FC_HEARTBEAT, FC_VERSIONS, FC_SLOTS,
	FC_WORKER_LIVE, FC_GENERATION, FC_WORKER_TID, FC_NODE_TID
};

#define FLEET_COLUMNS SCHED_FLEET_COLUMNS
StaticAssertDecl(FC_NODE_TID == SCHED_FLEET_COLUMN_COUNT, "fleet columns out of step");

static SchedStatement fleet_capable = {
	FLEET_COLUMNS
	"  FROM sched.worker w JOIN sched.node n ON n.node_id OPERATOR(pg_catalog.=) w.node_id "
	" WHERE w.capability OPERATOR(pg_catalog.=) $1 "
	/* in node order, as a dispatch batch indexes its copy (batch.c: no sort then) */
	" ORDER BY n.node_id COLLATE pg_catalog.\"C\"",
	1, {TEXTOID}, NULL, true		/* a capability may have 1 worker or most of the fleet */
};

static SchedStatement fleet_all = {
	FLEET_COLUMNS
	"  FROM sched.node n LEFT JOIN sched.worker w "
	"    ON w.node_id OPERATOR(pg_catalog.=) n.node_id AND w.capability OPERATOR(pg_catalog.=) $1 "
	" ORDER BY n.node_id COLLATE pg_catalog.\"C\"",
	1, {TEXTOID}, NULL, true
};

/* the capability's workers, their nodes' columns NULL but node_id
 * (SCHED_FLEET_WORKERS_ONLY): the nodes are read once for every capability, and merged */
static SchedStatement fleet_workers = {
	"SELECT w.node_id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
	"       w.worker_id, w.runtime_state, w.scheduling_status, w.last_heartbeat, "
	"       w.capability_versions, w.slots, w.live_attempts, w.generation, w.ctid, NULL "
	"  FROM sched.worker w WHERE w.capability OPERATOR(pg_catalog.=) $1 "
	" ORDER BY w.node_id COLLATE pg_catalog.\"C\"",
	1, {TEXTOID}, NULL, true
};

/* every node, with the worker columns NULL (SCHED_FLEET_NO_WORKERS) */
static SchedStatement fleet_nodes = {
	FLEET_COLUMNS
	"  FROM sched.node n LEFT JOIN sched.worker w ON false "
	" ORDER BY n.node_id COLLATE pg_catalog.\"C\"",
	0, {InvalidOid}, NULL, true
};

#define FC_COUNT FC_NODE_TID
#define FLEET_FIRST_ROWS 1024	/* a load's rows array to begin with (grown fourfold) */

/* Whether text datum d equals the ASCII string s (no copy). */
static bool
text_is(Datum d, const char *s)
{
	text	   *t = DatumGetTextPP(d);
	size_t		len = strlen(s);

	return VARSIZE_ANY_EXHDR(t) == len && memcmp(VARDATA_ANY(t), s, len) == 0;
}

/* The node's columns of a fleet row (1-based as FC_*) but its node_id, into *r. */
static void
decode_node_columns(const Datum *v, const bool *n, SchedFleetRow *r, bool with_labels,
					const SchedPlacement *keys_of)
{
	SchedCandidate *c = &r->c;

#define COL(k) v[(k) - 1]
#define NUL(k) n[(k) - 1]
	c->management_status = text_is(COL(FC_MGMT), "ACTIVE") ? SCHED_NODE_ACTIVE :
		text_is(COL(FC_MGMT), "DRAINING") ? SCHED_NODE_DRAINING : SCHED_NODE_DISABLED;
	if (!NUL(FC_LABELS) && with_labels)
	{
		if (keys_of != NULL)
			sched_labels_pick(DatumGetJsonbP(COL(FC_LABELS)), &keys_of->required_labels,
							  &keys_of->preferred_labels, &c->labels);
		else
			sched_labels_from_jsonb(DatumGetJsonbP(COL(FC_LABELS)), NULL, &c->labels);
	}
	c->cpu_millis = DatumGetInt32(COL(FC_CPU));
	c->memory_mb = DatumGetInt64(COL(FC_MEM));
	c->gpus = DatumGetInt32(COL(FC_GPUS));
	c->weight = DatumGetInt32(COL(FC_WEIGHT));
	c->reserved_cpu_millis = DatumGetInt32(COL(FC_RES_CPU));
	c->reserved_memory_mb = DatumGetInt64(COL(FC_RES_MEM));
	c->reserved_gpus = DatumGetInt32(COL(FC_RES_GPUS));
	c->node_live_attempts = DatumGetInt32(COL(FC_NODE_LIVE));
	r->node_tid = *((ItemPointer) DatumGetPointer(COL(FC_NODE_TID)));
#undef COL
#undef NUL
}

/* A string of a fleet row, where it lies in the row's datums. */
typedef struct RowString
{
	const char *data;
	uint32		len;
} RowString;

#define PACK_LABELS_ON_STACK 16

/*
 * The labels of a node's jsonb object whose values are strings (the others are skipped,
 * as sched_labels_from_jsonb skips them without a parameter), read off the container's
 * entries: of an object of count pairs, child i is key i and child count + i its value,
 * their data after the 2 * count entries.  Fills keys/values (count entries at most) and
 * returns how many.  A root that is not an object has none.
 */
static int
label_strings(Jsonb *jb, RowString *keys, RowString *values)
{
	const JsonbContainer *jc = &jb->root;
	int			count;
	const char *data;
	uint32		off = 0;
	int			i;
	int			n = 0;

	if (!JB_ROOT_IS_OBJECT(jb) || JB_ROOT_IS_SCALAR(jb))
		return 0;
	count = JsonContainerSize(jc);
	data = (const char *) &jc->children[2 * count];
	for (i = 0; i < 2 * count; i++)
	{
		uint32		start = off;

		JBE_ADVANCE_OFFSET(off, jc->children[i]);
		if (i < count)
		{
			keys[i].data = data + start;
			keys[i].len = off - start;
		}
		else if (JBE_ISSTRING(jc->children[i]))
		{
			keys[n] = keys[i - count];	/* (key n's value came before: n <= i - count) */
			values[n].data = data + start;
			values[n].len = off - start;
			n++;
		}
	}
	return n;
}

/*
 * The strings of a fleet row (its node_id, the labels when with_labels, the worker's
 * capability versions) decoded into one chunk allocated in pack, r->owned, as the fleet
 * mirror keeps a row: the labels' array, the versions' array, then the strings.  Read
 * where they lie in the datums (the labels off the jsonb's entries), so that a large
 * fleet is decoded without a copy per string.
 */
static void
decode_strings_packed(const Datum *v, const bool *n, SchedFleetRow *r, bool with_labels,
					  MemoryContext pack)
{
	SchedCandidate *c = &r->c;
	text	   *id = DatumGetTextPP(v[FC_NODE_ID - 1]);
	uint32		idlen = VARSIZE_ANY_EXHDR(id);
	RowString	keys_local[PACK_LABELS_ON_STACK];
	RowString	values_local[PACK_LABELS_ON_STACK];
	RowString  *keys = keys_local;
	RowString  *values = values_local;
	int			nlabels = 0;
	Datum	   *elems = NULL;
	bool	   *enulls = NULL;
	int			nversions = 0;
	Size		size;
	char	   *chunk;
	char	   *p;
	SchedLabel *labels;
	const char **versions;
	int			i;

	if (with_labels && !n[FC_LABELS - 1])
	{
		Jsonb	   *jb = DatumGetJsonbP(v[FC_LABELS - 1]);

		if (JB_ROOT_IS_OBJECT(jb) && JsonContainerSize(&jb->root) > PACK_LABELS_ON_STACK)
		{
			keys = palloc(sizeof(RowString) * JsonContainerSize(&jb->root));
			values = palloc(sizeof(RowString) * JsonContainerSize(&jb->root));
		}
		nlabels = label_strings(jb, keys, values);
	}
	if (!n[FC_WORKER_ID - 1] && !n[FC_VERSIONS - 1])
		deconstruct_array(DatumGetArrayTypeP(v[FC_VERSIONS - 1]), TEXTOID, -1, false,
						  TYPALIGN_INT, &elems, &enulls, &nversions);

	size = MAXALIGN(sizeof(SchedLabel) * nlabels) + MAXALIGN(sizeof(char *) * nversions) +
		idlen + 1;
	for (i = 0; i < nlabels; i++)
		size += keys[i].len + values[i].len + 2;
	for (i = 0; i < nversions; i++)
		if (!enulls[i])
			size += VARSIZE_ANY_EXHDR(DatumGetPointer(elems[i])) + 1;
	chunk = MemoryContextAlloc(pack, size);
	labels = (SchedLabel *) chunk;
	versions = (const char **) (chunk + MAXALIGN(sizeof(SchedLabel) * nlabels));
	p = (char *) versions + MAXALIGN(sizeof(char *) * nversions);
#define PUT(dst, s, l) do { memcpy(p, (s), (l)); p[(l)] = '\0'; (dst) = p; p += (l) + 1; } while (0)
	PUT(c->node_id, VARDATA_ANY(id), idlen);
	memset(labels, 0, sizeof(SchedLabel) * nlabels);
	for (i = 0; i < nlabels; i++)
	{
		PUT(labels[i].key, keys[i].data, keys[i].len);
		PUT(labels[i].value, values[i].data, values[i].len);
	}
	for (i = 0; i < nversions; i++)
	{
		if (enulls[i])
			versions[i] = NULL;
		else
			PUT(versions[i], VARDATA_ANY(DatumGetPointer(elems[i])),
				VARSIZE_ANY_EXHDR(DatumGetPointer(elems[i])));
	}
#undef PUT
	Assert(p <= chunk + size);
	sched_candidate_set_node(c, c->node_id);
	c->labels.count = nlabels;
	c->labels.items = nlabels > 0 ? labels : NULL;
	/* jsonb keys are unique already; sorting makes them searchable bytewise */
	if (!sched_labels_sort(&c->labels))
		elog(ERROR, "pg_sched: duplicate key in a jsonb object");
	c->versions = nversions > 0 ? versions : NULL;
	c->version_count = nversions;
	r->owned = chunk;
}

/*
 * Decodes the columns v/n of a fleet row (SCHED_FLEET_COLUMNS, 1-based as FC_*) into *r
 * (strings copied into CurrentMemoryContext, or packed into one chunk in pack when it is
 * not NULL: then keys_of must be NULL).  Without with_labels the node's labels are
 * left empty; without node_columns, of the node only its node_id is read (fleet_workers).
 */
static void
decode_columns(const Datum *v, const bool *n, SchedFleetRow *r, bool with_labels,
			   const SchedPlacement *keys_of, bool node_columns, MemoryContext pack)
{
	SchedCandidate *c = &r->c;

#define COL(k) v[(k) - 1]
#define NUL(k) n[(k) - 1]
	memset(r, 0, sizeof(*r));
	Assert(pack == NULL || keys_of == NULL);
	if (pack != NULL)
		decode_strings_packed(v, n, r, with_labels && node_columns, pack);
	else
		sched_candidate_set_node(c, TextDatumGetCString(COL(FC_NODE_ID)));
	r->node_hash = sched_node_hash(c->node_id);
	if (node_columns)
		decode_node_columns(v, n, r, with_labels && pack == NULL, keys_of);

	c->has_worker = !NUL(FC_WORKER_ID);
	if (!c->has_worker)
		return;
	r->worker_id = *DatumGetUUIDP(COL(FC_WORKER_ID));
	c->runtime_state = text_is(COL(FC_RUNTIME), "READY") ? SCHED_WORKER_READY :
		text_is(COL(FC_RUNTIME), "STARTING") ? SCHED_WORKER_STARTING :
		text_is(COL(FC_RUNTIME), "DRAINING") ? SCHED_WORKER_DRAINING : SCHED_WORKER_STOPPED;
	c->scheduling_status = text_is(COL(FC_SCHEDULING), "ELIGIBLE")
		? SCHED_WORKER_ELIGIBLE : SCHED_WORKER_CORDONED;
	c->has_heartbeat = !NUL(FC_HEARTBEAT);
	c->last_heartbeat = c->has_heartbeat ? DatumGetTimestampTz(COL(FC_HEARTBEAT)) : 0;
	if (!NUL(FC_VERSIONS) && pack == NULL)
	{
		ArrayType  *arr = DatumGetArrayTypeP(COL(FC_VERSIONS));
		Datum	   *elems;
		bool	   *nulls;
		int			count;
		int			k;
		const char **versions;

		deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &count);
		versions = palloc(sizeof(char *) * Max(count, 1));
		for (k = 0; k < count; k++)
			versions[k] = nulls[k] ? NULL : TextDatumGetCString(elems[k]);
		c->versions = versions;
		c->version_count = count;
	}
	c->slots = DatumGetInt32(COL(FC_SLOTS));
	c->worker_live_attempts = DatumGetInt32(COL(FC_WORKER_LIVE));
	r->generation = DatumGetInt64(COL(FC_GENERATION));
	r->worker_tid = *((ItemPointer) DatumGetPointer(COL(FC_WORKER_TID)));
#undef COL
#undef NUL
}

/*
 * Decodes tuple `tup` of a fleet read into *r, as decode_columns with every column and
 * the labels, the row's strings packed into one chunk in pack.  The tuple is deformed
 * once (fetching columns one by one re-walks the variable-length ones before each).
 * Columns after SCHED_FLEET_COLUMNS (at most 4) are ignored.
 */
void
sched_fleet_decode_packed(HeapTuple tup, TupleDesc desc, SchedFleetRow *r,
						  MemoryContext pack)
{
	Datum		v[FC_COUNT + 4];
	bool		n[FC_COUNT + 4];

	if (desc->natts < FC_COUNT || desc->natts > FC_COUNT + 4)
		elog(ERROR, "pg_sched: a fleet row has %d columns", desc->natts);
	heap_deform_tuple(tup, desc, v, n);
	decode_columns(v, n, r, true, NULL, true, pack);
}

/*
 * A fleet read's receiver: each row is decoded as the executor makes it, into the rows
 * array (allocated in the context it was allocated in, grown fourfold), its strings into
 * `caller`, or packed into one chunk in `pack`.  Nothing else is kept: no copy of the
 * tuple, no batch of them (a cursor read in chunks made and freed both for every row).
 */
typedef struct FleetReceiver
{
	DestReceiver pub;
	SchedFleet *fleet;
	int			allocated;
	int			flags;
	const SchedPlacement *keys_of;
	MemoryContext caller;
	MemoryContext pack;			/* strings packed there (decode_strings_packed), or NULL */
} FleetReceiver;

static bool
fleet_receive(TupleTableSlot *slot, DestReceiver *self)
{
	FleetReceiver *r = (FleetReceiver *) self;
	SchedFleet *fleet = r->fleet;
	int			natts = slot->tts_tupleDescriptor->natts;
	SchedFleetRow *row;
	MemoryContext old;

	if (natts < FC_COUNT || natts > FC_COUNT + 4)
		elog(ERROR, "pg_sched: a fleet row has %d columns", natts);
	slot_getallattrs(slot);
	if (fleet->count == r->allocated)
	{
		r->allocated *= 4;		/* few copies of a large fleet */
		fleet->rows = repalloc(fleet->rows, sizeof(SchedFleetRow) * r->allocated);
	}
	row = &fleet->rows[fleet->count++];
	old = MemoryContextSwitchTo(r->caller);
	decode_columns(slot->tts_values, slot->tts_isnull, row,
				   (r->flags & SCHED_FLEET_LABELS) != 0, r->keys_of,
				   (r->flags & SCHED_FLEET_WORKERS_ONLY) == 0, r->pack);
	MemoryContextSwitchTo(old);
	return true;
}

static void
fleet_startup(DestReceiver *self, int operation, TupleDesc typeinfo)
{
}

static void
fleet_shutdown(DestReceiver *self)
{
}

static void
fleet_destroy(DestReceiver *self)
{
}

void
sched_fleet_load(const char *capability, int flags, const SchedPlacement *keys_of,
				 SchedFleet *fleet)
{
	sched_fleet_load_into(capability, flags, keys_of, fleet, CurrentMemoryContext, false);
}

void
sched_fleet_load_into(const char *capability, int flags, const SchedPlacement *keys_of,
					  SchedFleet *fleet, MemoryContext rows_cxt, bool pack)
{
	SchedStatement *stmt = (flags & SCHED_FLEET_NO_WORKERS) ? &fleet_nodes :
		(flags & SCHED_FLEET_WORKERS_ONLY) ? &fleet_workers :
		(flags & SCHED_FLEET_ALL_NODES) ? &fleet_all : &fleet_capable;
	Datum		arg = CStringGetTextDatum(capability);
	FleetReceiver r = {
		{fleet_receive, fleet_startup, fleet_shutdown, fleet_destroy, DestNone},
		fleet, FLEET_FIRST_ROWS, flags, keys_of, CurrentMemoryContext,
		pack ? rows_cxt : NULL
	};

	fleet->count = 0;
	fleet->busy_count = 0;
	fleet->busy_rows = NULL;
	fleet->busy_allocated = 0;
	fleet->rows = MemoryContextAlloc(rows_cxt, sizeof(SchedFleetRow) * FLEET_FIRST_ROWS);
	sched_spi_exec_into(stmt, &arg, NULL, !(flags & SCHED_FLEET_FRESH), &r.pub);
}

void
sched_fleet_merge(const SchedFleet *nodes, SchedFleet *capable, SchedFleetRefs *out)
{
	int			i = 0;
	int			j = 0;

	out->count = 0;
	out->cands = palloc(sizeof(SchedCandidate *) * Max(nodes->count, 1));
	/* both sorted by node_id bytewise */
	while (i < nodes->count)
	{
		int			cmp = j == capable->count ? -1 :
			strcmp(nodes->rows[i].c.node_id, capable->rows[j].c.node_id);

		if (cmp < 0)
			out->cands[out->count++] = &nodes->rows[i++].c;
		else if (cmp > 0)
			j++;				/* a worker of no node */
		else
		{
			const SchedFleetRow *node = &nodes->rows[i++];
			SchedFleetRow *row = &capable->rows[j++];
			SchedCandidate *c = &row->c;

			/* the node's columns, as decode_node_columns reads them */
			sched_candidate_take_node(c, &node->c);
			c->labels = node->c.labels;
			row->node_tid = node->node_tid;
			out->cands[out->count++] = c;
		}
	}
}

int
sched_fleet_flags_for(const SchedPlacement *p, bool for_eligibility_only)
{
	bool		labels = p->required_labels.count > 0 ||
		(!for_eligibility_only && p->preferred_labels.count > 0);

	return labels ? SCHED_FLEET_LABELS : 0;
}

/* Another in-progress transaction among the lockers of xmax (a MultiXact's members too). */
static TransactionId
other_locker(TransactionId xmax, uint16 infomask)
{
	TransactionId result = InvalidTransactionId;

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

/* The most row versions followed from the one a fleet read saw to the newest. */
#define ROW_VERSIONS_FOLLOWED 32

/*
 * Another in-progress transaction that holds a lock on (or is updating) the row whose
 * version at tid of relation sched.<relname> a fleet read saw, or InvalidTransactionId.
 * Reads the versions' xmax without taking any row lock, following the update chain from
 * that version to the newest one (the fleet may be the mirror's or a batch's, older
 * than the rows: a lock taken on a newer version is on that version only).  Unknown
 * (a version pruned away, a chain longer than ROW_VERSIONS_FOLLOWED) is
 * InvalidTransactionId: the caller's skip-locked lock then finds out.  *newest is set to
 * the version the walk ended at when no other transaction holds the row and that
 * version is the newest (neither updated nor deleted by a transaction that committed or
 * is running), else invalid: a hint for sched_index_lock_row_hinted.
 */
static TransactionId
row_locker(const char *relname, ItemPointer tid, ItemPointer newest)
{
	Oid			relid = get_relname_relid(relname, get_namespace_oid("sched", false));
	Relation	rel;
	ItemPointerData at;
	TransactionId result = InvalidTransactionId;
	int			hops;

	ItemPointerSetInvalid(newest);
	if (!ItemPointerIsValid(tid))
		return InvalidTransactionId;
	rel = table_open(relid, AccessShareLock);
	at = *tid;
	for (hops = 0; hops < ROW_VERSIONS_FOLLOWED; hops++)
	{
		HeapTupleData tuple;
		Buffer		buf;
		TransactionId xmax;
		uint16		infomask;
		ItemPointerData next;

		tuple.t_self = at;
		if (!heap_fetch(rel, SnapshotAny, &tuple, &buf, true))
		{
			if (BufferIsValid(buf))
				ReleaseBuffer(buf);
			break;
		}
		LockBuffer(buf, BUFFER_LOCK_SHARE);
		infomask = tuple.t_data->t_infomask;
		xmax = HeapTupleHeaderGetRawXmax(tuple.t_data);
		next = tuple.t_data->t_ctid;
		LockBuffer(buf, BUFFER_LOCK_UNLOCK);
		ReleaseBuffer(buf);

		if (infomask & HEAP_XMAX_INVALID)
		{
			*newest = at;		/* the newest version, neither locked nor updated */
			break;
		}
		result = other_locker(xmax, infomask);
		if (TransactionIdIsValid(result))
			break;
		/* no other transaction holds it: the newest version, unless an update ended */
		if (HEAP_XMAX_IS_LOCKED_ONLY(infomask))
		{
			*newest = at;
			break;
		}
		if (ItemPointerEquals(&next, &at))
			break;				/* deleted */
		if (!(infomask & HEAP_XMAX_IS_MULTI) && !TransactionIdIsCurrentTransactionId(xmax) &&
			!TransactionIdDidCommit(xmax))
		{
			*newest = at;		/* the update was rolled back: this version is the newest */
			break;
		}
		at = next;
	}
	/* (the lock stays: a version seen here stays in the table until this transaction
	 * ends, so sched_fleet_lock_pair may read it by its tid) */
	table_close(rel, NoLock);
	return result;
}

TransactionId
sched_fleet_pair_locker(const SchedFleetRow *row, SchedPairHint *hint)
{
	SchedPairHint unused;
	TransactionId xid;

	if (hint == NULL)
		hint = &unused;
	ItemPointerSetInvalid(&hint->node_tid);
	xid = row_locker("worker", (ItemPointer) &row->worker_tid, &hint->worker_tid);
	if (!TransactionIdIsValid(xid))
		xid = row_locker("node", (ItemPointer) &row->node_tid, &hint->node_tid);
	return xid;
}

/* Column `name` of the row in slot (of relation rel) into v/n at fleet column k. */
static void
put_column(Relation rel, TupleTableSlot *slot, const char *name, int k, Datum *v, bool *n)
{
	v[k - 1] = slot_getattr(slot, sched_column_of(rel, name), &n[k - 1]);
}

/*
 * What SELECT <SCHED_FLEET_COLUMNS> FROM worker w JOIN node n ... WHERE w.worker_id = $1
 * FOR UPDATE OF w, n [SKIP LOCKED] did, in C (no statement per try): the worker's row
 * locked first, then the row of the node it is on, each its newest version
 * (sched_index_lock_row), the two locked in the order the statement locked them.
 */
bool
sched_fleet_lock_pair(pg_uuid_t *worker_id, bool skip_locked, const SchedPairHint *hint,
					  SchedFleetRow *row)
{
	SchedIndexScan ws;
	SchedIndexScan ns;
	ScanKeyData wkey;
	ScanKeyData nkey;
	Datum		v[FC_COUNT];
	bool		n[FC_COUNT];
	bool		isnull;
	Datum		node_id;
	ItemPointerData wtid;
	ItemPointerData ntid;
	bool		locked = false;

	ScanKeyInit(&wkey, 1, BTEqualStrategyNumber, F_UUID_EQ, UUIDPGetDatum(worker_id));
	if (sched_index_lock_row_hinted(&ws, "worker", "worker_pkey", &wkey, 1, LockTupleExclusive,
									!skip_locked,
									hint == NULL ? NULL : (ItemPointer) &hint->worker_tid) ==
		SCHED_ROW_LOCKED)
	{
		node_id = slot_getattr(ws.slot, sched_column_of(ws.rel, "node_id"), &isnull);
		ScanKeyInit(&nkey, 1, BTEqualStrategyNumber, F_TEXTEQ, node_id);
		nkey.sk_collation = C_COLLATION_OID;	/* node_id's */
		if (!isnull &&
			sched_index_lock_row_hinted(&ns, "node", "node_pkey", &nkey, 1, LockTupleExclusive,
										!skip_locked,
										hint == NULL ? NULL : (ItemPointer) &hint->node_tid) ==
			SCHED_ROW_LOCKED)
		{
			memset(n, 0, sizeof(n));
			put_column(ns.rel, ns.slot, "node_id", FC_NODE_ID, v, n);
			put_column(ns.rel, ns.slot, "management_status", FC_MGMT, v, n);
			put_column(ns.rel, ns.slot, "labels", FC_LABELS, v, n);
			put_column(ns.rel, ns.slot, "cpu_millis", FC_CPU, v, n);
			put_column(ns.rel, ns.slot, "memory_mb", FC_MEM, v, n);
			put_column(ns.rel, ns.slot, "gpus", FC_GPUS, v, n);
			put_column(ns.rel, ns.slot, "weight", FC_WEIGHT, v, n);
			put_column(ns.rel, ns.slot, "reserved_cpu_millis", FC_RES_CPU, v, n);
			put_column(ns.rel, ns.slot, "reserved_memory_mb", FC_RES_MEM, v, n);
			put_column(ns.rel, ns.slot, "reserved_gpus", FC_RES_GPUS, v, n);
			put_column(ns.rel, ns.slot, "live_attempts", FC_NODE_LIVE, v, n);
			put_column(ws.rel, ws.slot, "worker_id", FC_WORKER_ID, v, n);
			put_column(ws.rel, ws.slot, "runtime_state", FC_RUNTIME, v, n);
			put_column(ws.rel, ws.slot, "scheduling_status", FC_SCHEDULING, v, n);
			put_column(ws.rel, ws.slot, "last_heartbeat", FC_HEARTBEAT, v, n);
			put_column(ws.rel, ws.slot, "capability_versions", FC_VERSIONS, v, n);
			put_column(ws.rel, ws.slot, "slots", FC_SLOTS, v, n);
			put_column(ws.rel, ws.slot, "live_attempts", FC_WORKER_LIVE, v, n);
			put_column(ws.rel, ws.slot, "generation", FC_GENERATION, v, n);
			/* the versions locked, as the statement's ctid columns gave them */
			wtid = ws.slot->tts_tid;
			ntid = ns.slot->tts_tid;
			v[FC_WORKER_TID - 1] = PointerGetDatum(&wtid);
			v[FC_NODE_TID - 1] = PointerGetDatum(&ntid);
			decode_columns(v, n, row, true, NULL, true, NULL);
			locked = true;
		}
		if (!isnull)
			sched_index_scan_end(&ns);
	}
	sched_index_scan_end(&ws);
	return locked;
}

int
sched_fleet_admit(const SchedPlacement *p, const SchedFleet *fleet, SchedRanked *out)
{
	int			n = 0;
	int			i;

	for (i = 0; i < fleet->count; i++)
	{
		if (fleet->rows[i].busy || sched_admission(p, &fleet->rows[i].c) != 0)
			continue;
		sched_score(p, &fleet->rows[i].c, &out[n]);
		out[n].index = i;
		n++;
	}
	return n;
}

/* What a summary counts: nodes, those admitted, each reason, and the verdict so far. */
typedef struct SummaryTally
{
	int			nodes;
	int			ok;
	int			counts[SCHED_R_COUNT];
	SchedVerdict verdict;
} SummaryTally;

/* Adds n nodes that sched_admission() gives the reasons r. */
static void
tally_add(SummaryTally *t, SchedReasonSet r, int n)
{
	int			k;

	t->nodes += n;
	if (r == 0)
		t->ok += n;
	t->verdict = sched_verdict_add(t->verdict, r);
	for (k = 0; k < SCHED_R_COUNT; k++)
		if (r & SCHED_REASON_BIT(k))
			t->counts[k] += n;
}

static char *
tally_summary(const SummaryTally *t, SchedVerdict *verdict)
{
	size_t		len = sched_format_summary(NULL, 0, t->nodes, t->ok, t->counts);
	char	   *buf = palloc(len + 1);

	sched_format_summary(buf, len + 1, t->nodes, t->ok, t->counts);
	if (verdict != NULL)
		*verdict = t->verdict;
	return buf;
}

char *
sched_fleet_summary(const SchedPlacement *p, const SchedFleet *fleet, SchedVerdict *verdict)
{
	SummaryTally t = {0};
	int			i;

	t.verdict = SCHED_VERDICT_STATIC;
	for (i = 0; i < fleet->count; i++)
		tally_add(&t, sched_admission(p, &fleet->rows[i].c), 1);
	return tally_summary(&t, verdict);
}

char *
sched_fleet_refs_summary(const SchedPlacement *p, const SchedFleetRefs *fleet,
						 SchedVerdict *verdict)
{
	SummaryTally t = {0};
	int			i;

	t.verdict = SCHED_VERDICT_STATIC;
	for (i = 0; i < fleet->count; i++)
		tally_add(&t, sched_admission(p, fleet->cands[i]), 1);
	return tally_summary(&t, verdict);
}

static void
append_key_string(StringInfo buf, const char *str)
{
	if (str == NULL)
		appendStringInfoChar(buf, '\0');
	else
	{
		appendStringInfoChar(buf, '\1');
		appendBinaryStringInfo(buf, str, strlen(str) + 1);
	}
}

/*
 * The class key of a node: every field sched_admission() reads of a candidate but its
 * node_id (which only a pin compares), with the heartbeat as whether it has expired at
 * the cutoff, and the worker's fields only when it has one (a node's labels are plain
 * {key: value} pairs).  Keep in step with sched_admission() (placement.c): a field it
 * reads that is left out here would explain nodes by another node's values.  Strings
 * are written with a NULL mark and their terminating NUL, and every list with its length
 * first, so two candidates that differ in any of them never write one key.
 */
static void
class_key(StringInfo buf, const SchedCandidate *c, int64_t heartbeat_cutoff)
{
	int64_t		numbers[6];
	int32_t		status[2];
	int			i;

	resetStringInfo(buf);
	status[0] = (int32_t) c->management_status;
	status[1] = c->has_worker ? 1 : 0;
	appendBinaryStringInfo(buf, (char *) status, sizeof(status));
	numbers[0] = c->cpu_millis;
	numbers[1] = c->memory_mb;
	numbers[2] = c->gpus;
	numbers[3] = c->reserved_cpu_millis;
	numbers[4] = c->reserved_memory_mb;
	numbers[5] = c->reserved_gpus;
	appendBinaryStringInfo(buf, (char *) numbers, sizeof(numbers));
	if (c->has_worker)
	{
		int32_t		worker[6];

		worker[0] = (int32_t) c->runtime_state;
		worker[1] = (int32_t) c->scheduling_status;
		worker[2] = (!c->has_heartbeat || c->last_heartbeat < heartbeat_cutoff) ? 1 : 0;
		worker[3] = c->slots;
		worker[4] = c->worker_live_attempts;
		worker[5] = c->version_count;
		appendBinaryStringInfo(buf, (char *) worker, sizeof(worker));
		for (i = 0; i < c->version_count; i++)
			append_key_string(buf, c->versions[i]);
	}
	appendBinaryStringInfo(buf, (char *) &c->labels.count, sizeof(c->labels.count));
	for (i = 0; i < c->labels.count; i++)
	{
		const SchedLabel *l = &c->labels.items[i];

		append_key_string(buf, l->key);
		append_key_string(buf, l->value);
	}
}

typedef struct ClassSlot
{
	char	   *key;			/* NULL: free */
	int			keylen;
	int			class;
	uint32		hash;
} ClassSlot;

/* The slots of `slots` (`size` of them) in a table twice as large, freeing the old. */
static ClassSlot *
grow_class_slots(ClassSlot *slots, int size)
{
	ClassSlot  *grown = palloc0(sizeof(ClassSlot) * size * 2);
	int			i;

	for (i = 0; i < size; i++)
	{
		int			j;

		if (slots[i].key == NULL)
			continue;
		for (j = slots[i].hash & (2 * size - 1); grown[j].key != NULL; j = (j + 1) & (2 * size - 1))
			;
		grown[j] = slots[i];
	}
	pfree(slots);
	return grown;
}

void
sched_fleet_classify(const SchedFleetRefs *fleet, int64_t heartbeat_cutoff, SchedFleetClasses *out)
{
	int			size = 256;		/* a power of 2; grown to stay at most half full */
	ClassSlot  *slots;
	StringInfoData key;
	int			i;

	slots = palloc0(sizeof(ClassSlot) * size);
	out->count = 0;
	out->members = palloc(sizeof(SchedCandidate *) * Max(fleet->count, 1));
	out->sizes = palloc(sizeof(int) * Max(fleet->count, 1));
	out->nodes = fleet->count;
	out->heartbeat_cutoff = heartbeat_cutoff;
	initStringInfo(&key);
	for (i = 0; i < fleet->count; i++)
	{
		const SchedCandidate *c = fleet->cands[i];
		uint32		h;
		int			j;

		class_key(&key, c, heartbeat_cutoff);
		h = hash_bytes((const unsigned char *) key.data, key.len);
		for (j = h & (size - 1);; j = (j + 1) & (size - 1))
		{
			if (slots[j].key == NULL)
			{
				slots[j].key = palloc(key.len);
				memcpy(slots[j].key, key.data, key.len);
				slots[j].keylen = key.len;
				slots[j].class = out->count;
				slots[j].hash = h;
				out->members[out->count] = c;
				out->sizes[out->count] = 1;
				out->count++;
				if (2 * out->count >= size)
				{
					slots = grow_class_slots(slots, size);
					size *= 2;
				}
				break;
			}
			if (slots[j].hash == h && slots[j].keylen == key.len &&
				memcmp(slots[j].key, key.data, key.len) == 0)
			{
				out->sizes[slots[j].class]++;
				break;
			}
		}
	}
	for (i = 0; i < size; i++)
		if (slots[i].key != NULL)
			pfree(slots[i].key);
	pfree(slots);
	pfree(key.data);
}

char *
sched_fleet_classes_summary(const SchedPlacement *p, const SchedFleetClasses *classes,
							SchedVerdict *verdict)
{
	SummaryTally t = {0};
	int			i;

	Assert(p->pin_node_id == NULL && p->heartbeat_cutoff == classes->heartbeat_cutoff);
	t.verdict = SCHED_VERDICT_STATIC;
	for (i = 0; i < classes->count; i++)
		tally_add(&t, sched_admission(p, classes->members[i]), classes->sizes[i]);
	return tally_summary(&t, verdict);
}
