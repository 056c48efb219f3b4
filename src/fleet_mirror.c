/*
 * fleet_mirror.c — a per-backend copy of the fleet, kept current through a change log in
 * shared memory, so that placement reads only the nodes that changed since its last call
 * instead of every worker of the capability.
 *
 * The change log (shared, only when pg_sched is in shared_preload_libraries): a ring of
 * sched.fleet_change_log_size entries (database, top-level xid, node_id).  A BEFORE ROW
 * trigger on sched.node and sched.worker appends the node_id of every row it sees
 * inserted, updated or deleted (old and new node_id), before the row is written and so
 * before the writing transaction can commit; a BEFORE TRUNCATE trigger appends a
 * "reload everything" entry, as does a node_id longer than CHANGE_ID_MAX.  An update of
 * the counter columns alone (the reservations, the live attempts, a worker's
 * last_heartbeat: reservations, ends and heartbeats) is a counters entry
 * instead: it also carries the subtransaction that writes, the version it updates and
 * the new counters, so that a mirror can patch them in (patch_counters) without
 * re-reading the row.  An update written without a statement (row_write.c) appends the
 * same entry just after the new version is written, with its tid, while the row is
 * still locked by the writing transaction: before that transaction can commit, and in
 * the order of the row's writes, as the trigger's.  Writers serialize on a spinlock;
 * `next_seq` only ever covers complete entries, and readers detect an entry overwritten
 * under them by its sequence number (seqlock).
 *
 * The mirror (backend-local, in its own memory context): for each capability asked for,
 * the rows sched_fleet_load would return, as of the snapshot of the last refresh.
 * Invariant, for a refresh with snapshot S (taken before the ring head H is read):
 *   every row whose S-visible version differs from the mirror's was written by a
 *   transaction T whose entry is either (a) past the entries already processed, so
 *   seq < H and the refresh re-reads it, or (b) in the pending list, because T was still
 *   in progress (or is this transaction) when the entry was processed.
 * A transaction visible in S committed before S was taken, so its entries were appended
 * before H was read.  Pending entries are re-read at every refresh and dropped once their
 * transaction is settled in S (neither this transaction nor in progress for S).  Counters
 * entries of other transactions are not re-read while pending (S does not see their
 * writes): once settled, they are patched in, or re-read when that cannot be shown exact.
 *
 * When entries were lost (the ring wrapped, a TRUNCATE, the first use in this backend),
 * transactions still running may have written entries this backend never saw.  After the
 * first use or a wrap, the refresh first looks for them in the ring (window_start): every
 * entry records the highest xid appended up to it, so when an entry still in the ring
 * precedes every transaction unsettled in the snapshot, reading from it on finds all
 * their entries, and the capabilities, loaded afresh, need nothing more.  Otherwise (and
 * after a TRUNCATE or an error) the mirror
 * reloads each capability from scratch at every refresh until a snapshot shows every
 * transaction older than the loss (xid < reload_xid) settled: transactions started after
 * it append only entries this backend reads.  The refreshing transaction itself counts
 * as unsettled when its xid is older than the loss (its own rows, read by the reloads,
 * may yet roll back).  A prepared transaction keeps it in that mode
 * (correct, but as slow as no mirror) until it is resolved.
 *
 * The mirror is used only where it is exact: READ COMMITTED (snapshots of one backend
 * grow monotonically; anything else, and a snapshot older than the last refresh, reads the
 * tables as before), not during recovery (a standby's rows change without triggers), with
 * sched.fleet_mirror on.  It only steers selection: dispatch re-checks admission on the
 * rows it locks.
 *
 * Admission memos (admit_memo.c): each capability keeps what admission found of the last
 * few shapes on its rows, across calls.  Every change to a row goes through reread_nodes
 * (re-read in place: forgotten; removed: the last row moves into its index) or drops
 * the capability (drop_caps, with its memos), so a memo's judgement of a row holds for
 * the row as the mirror has it; sched_fleet_mirror_admit uses it only for the fleet a
 * caller got as the mirror has it now.
 *
 * Rows handed out are borrowed: their strings and the row arrays are freed only by a
 * refresh in a later transaction, so that they stay valid for the whole call (and
 * transaction) that got them.  Callers must not modify them (SCHED_FLEET_COPY copies).
 */
#include "postgres.h"

#include "fleet_mirror.h"
#include "grow_array.h"
#include "admit_memo.h"
#include "validate.h"
#include "spi_util.h"
#include "settings.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/transam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "commands/trigger.h"
#include "common/hashfn.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/bufmgr.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#define CHANGE_ID_MAX 88		/* bytes of node_id kept; longer ones reload everything */

typedef enum ChangeKind
{
	CHANGE_NODE = 1,			/* re-read node_id and its workers */
	CHANGE_ALL,					/* reload the whole fleet of database dbid */
	CHANGE_NODE_COUNTERS,		/* an update of node node_id's counters only */
	CHANGE_WORKER_COUNTERS		/* an update of worker worker_id's counters only */
} ChangeKind;

#define IS_COUNTERS(kind) ((kind) == CHANGE_NODE_COUNTERS || (kind) == CHANGE_WORKER_COUNTERS)

/* The counter columns of a node row (all four) or a worker row (live_attempts, and its
 * heartbeat, which changes as often). */
typedef struct ChangeCounters
{
	int32		reserved_cpu_millis;
	int64		reserved_memory_mb;
	int32		reserved_gpus;
	int32		live_attempts;
	bool		has_heartbeat;	/* worker: last_heartbeat is not NULL */
	TimestampTz last_heartbeat;
} ChangeCounters;

typedef struct SchedChange
{
	pg_atomic_uint64 seq;		/* sequence number of the entry in this slot; 0: none */
	Oid			dbid;
	TransactionId xid;			/* top-level */
	FullTransactionId hi;		/* the highest top-level xid among the entries up to this
								 * one (any database): a transaction with a later xid
								 * appended nothing before it (window_start) */
	TransactionId subxid;		/* counters: the (sub)transaction that updates the row */
	ItemPointerData old_tid;	/* counters: the version it updates */
	ItemPointerData new_tid;	/* counters written without a statement: the version
								 * written (else invalid: appended before the write) */
	uint8		kind;
	uint8		len;
	pg_uuid_t	worker_id;		/* CHANGE_WORKER_COUNTERS */
	ChangeCounters counters;	/* counters: the values the new version holds */
	char		node_id[CHANGE_ID_MAX];
} SchedChange;

typedef struct SchedChangeLog
{
	slock_t		mutex;			/* serializes writers */
	pg_atomic_uint64 next_seq;	/* entries with seq < next_seq are complete */
	FullTransactionId hi;		/* the last entry's hi (under mutex) */
	int			size;
	SchedChange entries[FLEXIBLE_ARRAY_MEMBER];
} SchedChangeLog;

int			sched_fleet_change_log_size = 16384;
bool		sched_fleet_mirror = true;

static SchedChangeLog *change_log = NULL;

Size
sched_fleet_mirror_shmem_size(void)
{
	return add_size(offsetof(SchedChangeLog, entries),
					mul_size(sizeof(SchedChange), sched_fleet_change_log_size));
}

void
sched_fleet_mirror_shmem_attach(void *ptr, bool found)
{
	change_log = ptr;
	if (!found)
	{
		int			i;

		SpinLockInit(&change_log->mutex);
		pg_atomic_init_u64(&change_log->next_seq, 1);
		change_log->hi = InvalidFullTransactionId;
		change_log->size = sched_fleet_change_log_size;
		for (i = 0; i < change_log->size; i++)
			pg_atomic_init_u64(&change_log->entries[i].seq, 0);
	}
}

/* Appends an entry; old_tid, counters and worker_id only for the counters kinds (else
 * NULL); new_tid for counters written already (else NULL). */
static void
change_log_append(ChangeKind kind, const char *node_id, size_t len, ItemPointer old_tid,
				  ItemPointer new_tid, const ChangeCounters *counters,
				  const pg_uuid_t *worker_id)
{
	FullTransactionId full = GetTopFullTransactionId();	/* assigned before the append */
	TransactionId xid = XidFromFullTransactionId(full);
	TransactionId subxid = IS_COUNTERS(kind) ? GetCurrentTransactionId()
		: InvalidTransactionId;
	SchedChange *e;
	uint64		seq;

	if (kind != CHANGE_ALL && len > CHANGE_ID_MAX)
		kind = CHANGE_ALL;
	SpinLockAcquire(&change_log->mutex);
	seq = pg_atomic_read_u64(&change_log->next_seq);
	e = &change_log->entries[seq % change_log->size];
	pg_atomic_write_u64(&e->seq, 0);
	pg_write_barrier();
	e->dbid = MyDatabaseId;
	e->xid = xid;
	if (FullTransactionIdFollows(full, change_log->hi))
		change_log->hi = full;
	e->hi = change_log->hi;
	e->subxid = subxid;
	e->kind = (uint8) kind;
	e->len = kind != CHANGE_ALL ? (uint8) len : 0;
	if (kind != CHANGE_ALL)
		memcpy(e->node_id, node_id, len);
	if (IS_COUNTERS(kind))
	{
		e->old_tid = *old_tid;
		if (new_tid != NULL)
			e->new_tid = *new_tid;
		else
			ItemPointerSetInvalid(&e->new_tid);
		e->counters = *counters;
	}
	if (kind == CHANGE_WORKER_COUNTERS)
		e->worker_id = *worker_id;
	pg_write_barrier();
	pg_atomic_write_u64(&e->seq, seq);
	pg_write_barrier();
	pg_atomic_write_u64(&change_log->next_seq, seq + 1);
	SpinLockRelease(&change_log->mutex);
}

static void
append_node_of(HeapTuple tup, TupleDesc desc, int attnum)
{
	bool		isnull;
	Datum		d = heap_getattr(tup, attnum, desc, &isnull);
	text	   *t;

	if (isnull)
		return;
	t = DatumGetTextPP(d);
	change_log_append(CHANGE_NODE, VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t), NULL, NULL, NULL,
					  NULL);
}

/*
 * Whether column `name` is a counter: what a reservation or the end of an attempt
 * changes, or a worker's heartbeat, and nothing else does so often.  An update of these
 * alone is logged with their new values (patch_counters takes them in); if it is one,
 * its value goes into *counters (a counter that is NULL, which the table refuses, is
 * not one: it counts as a change).
 */
static bool
put_counter(bool of_node, const char *name, Datum value, bool isnull,
			ChangeCounters *counters)
{
	if (!of_node && strcmp(name, "last_heartbeat") == 0)
	{
		counters->has_heartbeat = !isnull;
		counters->last_heartbeat = isnull ? 0 : DatumGetTimestampTz(value);
		return true;
	}
	if (isnull)
		return false;
	if (strcmp(name, "live_attempts") == 0)
		counters->live_attempts = DatumGetInt32(value);
	else if (!of_node)
		return false;
	else if (strcmp(name, "reserved_cpu_millis") == 0)
		counters->reserved_cpu_millis = DatumGetInt32(value);
	else if (strcmp(name, "reserved_memory_mb") == 0)
		counters->reserved_memory_mb = DatumGetInt64(value);
	else if (strcmp(name, "reserved_gpus") == 0)
		counters->reserved_gpus = DatumGetInt32(value);
	else
		return false;
	return true;
}

/* Whether two values of a column are the same bytes.  A varlena's header is not compared
 * (an inserted row may hold a 4-byte header where the updated copy holds a 1-byte one);
 * one compressed or stored out of line is the same only as the same pointer. */
static bool
same_bytes(Datum a, Datum b, Form_pg_attribute att)
{
	struct varlena *x;
	struct varlena *y;

	if (att->attlen != -1)
		return datumIsEqual(a, b, att->attbyval, att->attlen);
	x = (struct varlena *) DatumGetPointer(a);
	y = (struct varlena *) DatumGetPointer(b);
	if (VARATT_IS_EXTERNAL(x) || VARATT_IS_COMPRESSED(x) ||
		VARATT_IS_EXTERNAL(y) || VARATT_IS_COMPRESSED(y))
		return datumIsEqual(a, b, false, -1);
	return VARSIZE_ANY_EXHDR(x) == VARSIZE_ANY_EXHDR(y) &&
		memcmp(VARDATA_ANY(x), VARDATA_ANY(y), VARSIZE_ANY_EXHDR(x)) == 0;
}

/* Whether newtup differs from oldtup in counter columns only (same_bytes: a value stored
 * differently, as a TOAST pointer against an inline copy, counts as a change); if so,
 * *counters holds newtup's counters. */
static bool
only_counters_changed(TupleDesc desc, bool of_node, HeapTuple oldtup, HeapTuple newtup,
					  ChangeCounters *counters)
{
	Datum	   *ov = palloc(sizeof(Datum) * desc->natts);
	Datum	   *nv = palloc(sizeof(Datum) * desc->natts);
	bool	   *on = palloc(sizeof(bool) * desc->natts);
	bool	   *nn = palloc(sizeof(bool) * desc->natts);
	bool		same = true;
	int			i;

	heap_deform_tuple(oldtup, desc, ov, on);
	heap_deform_tuple(newtup, desc, nv, nn);
	for (i = 0; i < desc->natts && same; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attisdropped)
			continue;
		if (put_counter(of_node, NameStr(att->attname), nv[i], nn[i], counters))
			continue;
		same = on[i] == nn[i] && (on[i] || same_bytes(ov[i], nv[i], att));
	}
	pfree(ov);
	pfree(nv);
	pfree(on);
	pfree(nn);
	return same;
}

/*
 * The entry of an UPDATE of a row of sched.node or sched.worker (relation rel, column
 * node_id at attnum): oldtup is the version updated (its t_self set: the newest,
 * locked by this transaction), newtup the new one; written: newtup is in the table
 * already, at newtup->t_self (else it is yet to be written).
 */
static void
row_updated(Relation rel, int attnum, HeapTuple oldtup, HeapTuple newtup, bool written)
{
	TupleDesc	desc = RelationGetDescr(rel);
	bool		of_node = strcmp(RelationGetRelationName(rel), "node") == 0;
	int			worker_attnum = of_node ? 0 : SPI_fnumber(desc, "worker_id");
	bool		old_null,
				new_null;
	Datum		old_id = heap_getattr(oldtup, attnum, desc, &old_null);
	Datum		new_id = heap_getattr(newtup, attnum, desc, &new_null);
	Datum		worker_id = (Datum) 0;
	bool		worker_null = true;
	ChangeCounters counters = {0};

	if (worker_attnum > 0)
		worker_id = heap_getattr(oldtup, worker_attnum, desc, &worker_null);
	if (!old_null && (of_node || !worker_null) &&
		only_counters_changed(desc, of_node, oldtup, newtup, &counters))
	{
		text	   *t = DatumGetTextPP(old_id);

		change_log_append(of_node ? CHANGE_NODE_COUNTERS : CHANGE_WORKER_COUNTERS,
						  VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t), &oldtup->t_self,
						  written ? &newtup->t_self : NULL, &counters,
						  of_node ? NULL : DatumGetUUIDP(worker_id));
	}
	else
	{
		append_node_of(oldtup, desc, attnum);
		if (old_null || new_null || !datumIsEqual(old_id, new_id, false, -1))
			append_node_of(newtup, desc, attnum);
	}
}

/*
 * What sched._fleet_changed() does for an UPDATE of a row of sched.node or sched.worker,
 * for an update written without a statement (row_write.c): the same entry, appended
 * just after the new version is written (the row still locked by this transaction,
 * which has not committed), with that version's tid, so that a mirror patches the
 * counters in without reading the version (patch_counters).
 */
void
sched_fleet_row_updated(Relation rel, HeapTuple oldtup, HeapTuple newtup)
{
	int			attnum;

	if (change_log == NULL)
		return;
	attnum = SPI_fnumber(RelationGetDescr(rel), "node_id");
	if (attnum <= 0)
		elog(ERROR, "pg_sched: table %s has no node_id column", RelationGetRelationName(rel));
	row_updated(rel, attnum, oldtup, newtup, true);
}

/*
 * sched._fleet_changed(): BEFORE INSERT OR UPDATE OR DELETE FOR EACH ROW and BEFORE
 * TRUNCATE on sched.node and sched.worker (both have a node_id column).  Without the
 * shared change log (not preloaded) it does nothing: no backend has a mirror then.
 *
 * An UPDATE that changes only counter columns (put_counter) is logged as a
 * counters entry with the version it updates (tg_trigtuple: the newest version, locked
 * by this transaction before BEFORE ROW triggers fire), the subtransaction that writes
 * the new one, and the new counters; every other change as CHANGE_NODE of the old and
 * new node_id.
 * The row is locked when the entry is appended, so the entries of one row are in the
 * order of its versions.  No other BEFORE ROW trigger on these tables may change the
 * new row after this one (the only other triggers are this function's).
 */
PG_FUNCTION_INFO_V1(sched_fleet_changed);

Datum
sched_fleet_changed(PG_FUNCTION_ARGS)
{
	TriggerData *td = (TriggerData *) fcinfo->context;
	TupleDesc	desc;
	int			attnum;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("sched._fleet_changed() may only be called as a trigger")));
	if (TRIGGER_FIRED_BY_TRUNCATE(td->tg_event))
	{
		if (change_log != NULL)
			change_log_append(CHANGE_ALL, NULL, 0, NULL, NULL, NULL, NULL);
		return PointerGetDatum(NULL);
	}
	if (!TRIGGER_FIRED_FOR_ROW(td->tg_event) || !TRIGGER_FIRED_BEFORE(td->tg_event))
		elog(ERROR, "sched._fleet_changed() must be a BEFORE ROW or BEFORE TRUNCATE trigger");
	if (change_log != NULL)
	{
		desc = RelationGetDescr(td->tg_relation);
		attnum = SPI_fnumber(desc, "node_id");
		if (attnum <= 0)
			elog(ERROR, "sched._fleet_changed(): table %s has no node_id column",
				 RelationGetRelationName(td->tg_relation));
		if (TRIGGER_FIRED_BY_UPDATE(td->tg_event))
			row_updated(td->tg_relation, attnum, td->tg_trigtuple, td->tg_newtuple, false);
		else
			append_node_of(td->tg_trigtuple, desc, attnum);
	}
	return PointerGetDatum(TRIGGER_FIRED_BY_UPDATE(td->tg_event) ? td->tg_newtuple
						   : td->tg_trigtuple);
}

/* ---- the mirror ---- */

typedef struct MirrorCap
{
	char	   *capability;
	SchedFleet	fleet;			/* rows: each row's strings in one chunk (row.owned) */
	MemoryContext rows_cxt;		/* a child of M.cxt: the rows as loaded, and the array
								 * until append_row replaces it (rows re-read are
								 * packed in M.cxt); deleted with the capability */
	int			allocated;
	int		   *slots;			/* open addressing by node_id: row index or -1 */
	int			nslots;			/* power of two, > 2 x rows */
	SchedAdmitMemos memos;		/* kept across calls: a row re-read is judged again */
} MirrorCap;

/* An entry of the change log, as the mirror keeps it (pending) or patches from it. */
typedef struct PendingChange
{
	uint64		seq;
	TransactionId xid;
	TransactionId subxid;
	uint8		kind;
	ItemPointerData old_tid;
	ItemPointerData new_tid;
	pg_uuid_t	worker_id;
	ChangeCounters counters;
	uint32		node_hash;		/* sched_node_hash(node_id): orders before node_id */
	bool		own;			/* written by the transaction that read it: the mirror
								 * may hold what it wrote, committed or not */
	char	   *node_id;
} PendingChange;

static struct
{
	MemoryContext cxt;
	Oid			dbid;
	Oid			node_relid;
	Oid			worker_relid;
	uint64		next_seq;		/* entries below are processed */
	bool		reloading;		/* entries may have been lost: reload at every refresh */
	TransactionId reload_xid;	/* ... until every xid before this is settled */
	PendingChange *pending;
	int			npending;
	int			pending_allocated;
	MirrorCap  *caps;
	int			ncaps;
	int			caps_allocated;
	void	  **garbage;		/* chunks to free once no call of this transaction can
								 * hold them */
	int			ngarbage;
	int			garbage_allocated;
	MemoryContext *garbage_cxts;	/* and contexts (rows_cxt) to delete, after them */
	int			ngarbage_cxts;
	int			garbage_cxts_allocated;
	LocalTransactionId garbage_lxid;
	bool		has_last;		/* the snapshot of the last refresh */
	TransactionId last_xmax;
	TransactionId *last_xip;
	int			last_xcnt;
	/* counters, for sched._fleet_mirror_stats() */
	int64		refreshes;
	int64		full_loads;
	int64		rows_reread;
	int64		rows_patched;
	int64		admissions_walked;	/* memo admissions that read every row */
	int64		admissions_carried; /* and that read the rows carried (admit_memo.c) */
	int64		bypassed;
	int64		losses;
} M;

/*
 * The scratch space of a refresh, kept from one to the next in its own context (under
 * the mirror's) and only grown: with many sessions dispatching, each refresh takes
 * thousands of other sessions' entries, and arrays made afresh at every call, and the
 * node ids copied one by one, cost their allocations, their copies as they doubled, and
 * the page faults of memory the backend had just given back.  Nothing in it outlives
 * the refresh that filled it: every refresh starts with it empty.  A refresh that took
 * so many entries that the space grew past SCRATCH_KEEP_MAX (32 sessions of
 * dispatch_next(100) need about 1.3 MB) gives it all back when it ends, so a backend
 * keeps at most that much of it.  One refresh uses it at a time: a refresh runs nothing
 * that refreshes the mirror again (its statements read the node and worker tables).
 */
#define SCRATCH_ID_BLOCK 65536	/* bytes of each block of copied node ids */
#define SCRATCH_KEEP_MAX (2 * 1024 * 1024)	/* more is given back after the refresh */

static struct
{
	MemoryContext cxt;
	PendingChange *cands;		/* counters entries settled in the snapshot */
	int			cands_allocated;
	char	  **changed;		/* node ids to re-read */
	int			changed_allocated;
	char	  **fallback;		/* patch_counters: node ids it could not patch */
	int			fallback_allocated;
	void	   *groups;			/* patch_counters: PatchGroup per row */
	int			groups_allocated;
	int		   *slots;			/* patch_counters: its hash table of groups */
	int			slots_allocated;
	char	  **id_blocks;		/* node ids copied by this refresh, in blocks that stay */
	int			id_nblocks;
	int			id_blocks_allocated;
	int			id_block;		/* the block being filled */
	Size		id_used;		/* bytes of it used */
} R;

/* The same for an array of the refresh's scratch space. */
static void
scratch_reserve(void **array, int *allocated, int need, Size elem)
{
	sched_grow_array(R.cxt, array, allocated, need, elem, 64);
}

/* At the end of a refresh: the scratch space given back if it grew past
 * SCRATCH_KEEP_MAX, else kept for the next refresh. */
static void
scratch_trim(void)
{
	MemoryContext cxt = R.cxt;

	if (cxt == NULL || MemoryContextMemAllocated(cxt, false) <= SCRATCH_KEEP_MAX)
		return;
	MemoryContextReset(cxt);
	memset(&R, 0, sizeof(R));
	R.cxt = cxt;
}

/* A copy of node id `id` (len bytes) valid until the next refresh starts. */
static char *
scratch_id(const char *id, int len)
{
	char	   *copy;

	if (R.id_used + len + 1 > SCRATCH_ID_BLOCK)
	{
		R.id_block++;
		R.id_used = 0;
	}
	if (R.id_block == R.id_nblocks)
	{
		scratch_reserve((void **) &R.id_blocks, &R.id_blocks_allocated, R.id_nblocks + 1,
						sizeof(char *));
		R.id_blocks[R.id_nblocks++] = MemoryContextAlloc(R.cxt, SCRATCH_ID_BLOCK);
	}
	copy = R.id_blocks[R.id_block] + R.id_used;
	memcpy(copy, id, len);
	copy[len] = '\0';
	R.id_used += len + 1;
	return copy;
}

static void
to_garbage(void *chunk)
{
	if (chunk == NULL)
		return;
	sched_grow_array(M.cxt, (void **) &M.garbage, &M.garbage_allocated, M.ngarbage + 1,
			   sizeof(void *), 64);
	M.garbage[M.ngarbage++] = chunk;
	M.garbage_lxid = MyProc->lxid;
}

static void
to_garbage_cxt(MemoryContext cxt)
{
	if (cxt == NULL)
		return;
	sched_grow_array(M.cxt, (void **) &M.garbage_cxts, &M.garbage_cxts_allocated,
			   M.ngarbage_cxts + 1, sizeof(MemoryContext), 8);
	M.garbage_cxts[M.ngarbage_cxts++] = cxt;
	M.garbage_lxid = MyProc->lxid;
}

static void
collect_garbage(void)
{
	int			i;

	if ((M.ngarbage == 0 && M.ngarbage_cxts == 0) || M.garbage_lxid == MyProc->lxid)
		return;
	/* chunks first: some may lie in the contexts */
	for (i = 0; i < M.ngarbage; i++)
		pfree(M.garbage[i]);
	M.ngarbage = 0;
	for (i = 0; i < M.ngarbage_cxts; i++)
		MemoryContextDelete(M.garbage_cxts[i]);
	M.ngarbage_cxts = 0;
}

/* Drops every capability (their rows go to the garbage). */
static void
drop_caps(void)
{
	int			i,
				j;

	for (i = 0; i < M.ncaps; i++)
	{
		MirrorCap  *cap = &M.caps[i];

		/* (what lies in rows_cxt goes with it) */
		for (j = 0; j < cap->fleet.count; j++)
			if (cap->fleet.rows[j].owned != NULL &&
				GetMemoryChunkContext(cap->fleet.rows[j].owned) != cap->rows_cxt)
				to_garbage(cap->fleet.rows[j].owned);
		if (cap->fleet.rows != NULL && GetMemoryChunkContext(cap->fleet.rows) != cap->rows_cxt)
			to_garbage(cap->fleet.rows);
		to_garbage_cxt(cap->rows_cxt);
		to_garbage(cap->slots);
		to_garbage(cap->capability);
		sched_admit_memos_reset(&cap->memos);	/* (no caller holds them) */
	}
	M.ncaps = 0;
}

static void
index_rows(MirrorCap *cap)
{
	int			want = 16;
	int			i;

	while (want < 2 * cap->fleet.count + 2)
		want *= 2;
	if (want != cap->nslots)
	{
		to_garbage(cap->slots);
		cap->slots = MemoryContextAlloc(M.cxt, sizeof(int) * want);
		cap->nslots = want;
	}
	memset(cap->slots, -1, sizeof(int) * cap->nslots);
	for (i = 0; i < cap->fleet.count; i++)
	{
		uint32		h = cap->fleet.rows[i].node_hash & (cap->nslots - 1);

		while (cap->slots[h] >= 0)
			h = (h + 1) & (cap->nslots - 1);
		cap->slots[h] = i;
	}
}

/* Row index of node_id (whose sched_node_hash is hash) in cap, or -1. */
static int
find_row_hashed(MirrorCap *cap, const char *node_id, uint32 hash)
{
	uint32		h = hash & (cap->nslots - 1);

	while (cap->slots[h] >= 0)
	{
		const SchedFleetRow *row = &cap->fleet.rows[cap->slots[h]];

		if (row->node_hash == hash && strcmp(row->c.node_id, node_id) == 0)
			return cap->slots[h];
		h = (h + 1) & (cap->nslots - 1);
	}
	return -1;
}

/* Row index of node_id in cap, or -1. */
static int
find_row(MirrorCap *cap, const char *node_id)
{
	return find_row_hashed(cap, node_id, sched_node_hash(node_id));
}

/* The mirror's capability `capability`, or NULL. */
static MirrorCap *
find_cap(const char *capability)
{
	int			k;

	for (k = 0; k < M.ncaps; k++)
		if (strcmp(M.caps[k].capability, capability) == 0)
			return &M.caps[k];
	return NULL;
}

/* Appends a packed row; the old array goes to the garbage when it has to grow. */
static void
append_row(MirrorCap *cap, const SchedFleetRow *row)
{
	if (cap->fleet.count == cap->allocated)
	{
		int			allocated = Max(64, cap->allocated * 2);
		SchedFleetRow *rows = MemoryContextAlloc(M.cxt, sizeof(SchedFleetRow) * allocated);

		if (cap->fleet.count > 0)
			memcpy(rows, cap->fleet.rows, sizeof(SchedFleetRow) * cap->fleet.count);
		to_garbage(cap->fleet.rows);
		cap->fleet.rows = rows;
		cap->allocated = allocated;
	}
	cap->fleet.rows[cap->fleet.count++] = *row;
	if (2 * cap->fleet.count + 2 > cap->nslots)
		index_rows(cap);
	else
	{
		uint32		h = row->node_hash & (cap->nslots - 1);

		while (cap->slots[h] >= 0)
			h = (h + 1) & (cap->nslots - 1);
		cap->slots[h] = cap->fleet.count - 1;
	}
}

/*
 * The changed nodes' rows, as SCHED_FLEET_COLUMNS plus the capability.  A few primary key
 * probes: a generic plan (planning a custom one cost more than running it), and the
 * workers are read through a lateral subquery kept apart (OFFSET 0) so that the plan is
 * a nested loop over worker (node_id, capability); as a plain join the generic plan
 * hashed a sequential scan of every worker.
 */
static SchedStatement mirror_reread = {
	SCHED_FLEET_COLUMNS_WITH("w.wtid") ", w.capability "
	"  FROM sched.node n "
	"  CROSS JOIN LATERAL (SELECT x.*, x.ctid AS wtid FROM sched.worker x "
	"                       WHERE x.node_id OPERATOR(pg_catalog.=) n.node_id OFFSET 0) w "
	" WHERE n.node_id OPERATOR(pg_catalog.=) ANY ($1)",
	1, {TEXTARRAYOID}, NULL, false, true
};

#define REREAD_CAPABILITY_COLUMN (SCHED_FLEET_COLUMN_COUNT + 1)

/* Loads capability `capability` whole, with snapshot S (the active one). */
static MirrorCap *
load_cap(const char *capability)
{
	MemoryContext tmp = AllocSetContextCreate(CurrentMemoryContext, "pg_sched mirror load",
											  ALLOCSET_DEFAULT_SIZES);
	/* the rows, packed as they are read; under tmp until the load has completed, so that
	 * an error (a cancel) leaves nothing in the mirror, not even blocks its free chunks
	 * would keep */
	MemoryContext rows_cxt = AllocSetContextCreate(tmp, "pg_sched mirror rows",
												   ALLOCSET_DEFAULT_SIZES);
	MemoryContext old;
	SchedFleet	read;
	MirrorCap  *cap;

	sched_grow_array(M.cxt, (void **) &M.caps, &M.caps_allocated, M.ncaps + 1,
			   sizeof(MirrorCap), 4);
	/*
	 * The load first, before anything of the capability is allocated in M.cxt: an error
	 * in it (a cancel) leaves nothing there (rows_cxt goes with tmp), and nothing after
	 * it checks for interrupts.  test/t/011_fleet_mirror_cancel.pl.
	 */
	old = MemoryContextSwitchTo(tmp);
	sched_fleet_load_into(capability, SCHED_FLEET_LABELS, NULL, &read, rows_cxt, true);
	MemoryContextSwitchTo(old);
	MemoryContextSetParent(rows_cxt, M.cxt);
	cap = &M.caps[M.ncaps];
	memset(cap, 0, sizeof(*cap));
	sched_admit_memos_init(&cap->memos, M.cxt);
	cap->capability = MemoryContextStrdup(M.cxt, capability);

	/*
	 * The capability takes the rows' array the load filled, each row's strings packed by
	 * the load into one chunk (all in rows_cxt), and indexes it once.  Appended one by
	 * one into arrays of its own, a fleet of 100,000 nodes was copied into 11 ever larger
	 * arrays, each in memory the backend faulted in, and indexed again at each
	 * (bench/NOTES.md, twenty-fifth sitting); decoded and then packed, every string was
	 * copied twice (twenty-sixth).  append_row grows it later as before (the capacity
	 * counted is the rows).
	 */
	/* (the load grows the array fourfold: give back what it did not fill) */
	cap->fleet.rows = repalloc(read.rows, sizeof(SchedFleetRow) * Max(read.count, 1));
	cap->fleet.count = read.count;
	cap->allocated = Max(read.count, 1);
	cap->rows_cxt = rows_cxt;
	MemoryContextDelete(tmp);
	index_rows(cap);
	M.ncaps++;
	M.full_loads++;
	return cap;
}

/* Whether xid's effects are final in snapshot S: not ours, and not in progress for S. */
static bool
xid_settled(TransactionId xid, Snapshot S)
{
	return !TransactionIdIsCurrentTransactionId(xid) && !XidInMVCCSnapshot(xid, S);
}

/* Whether everything the last refresh's snapshot saw committed, S sees too. */
static bool
snapshot_covers_last(Snapshot S)
{
	int			i,
				j;

	if (!M.has_last)
		return true;
	if (TransactionIdPrecedes(S->xmax, M.last_xmax))
		return false;
	for (i = 0; i < S->xcnt; i++)
	{
		bool		was_running = false;

		if (!TransactionIdPrecedes(S->xip[i], M.last_xmax))
			continue;
		for (j = 0; j < M.last_xcnt && !was_running; j++)
			was_running = M.last_xip[j] == S->xip[i];
		if (!was_running)
			return false;
	}
	return true;
}

static void
remember_snapshot(Snapshot S)
{
	if (M.last_xip != NULL)
		pfree(M.last_xip);
	M.last_xip = MemoryContextAlloc(M.cxt, sizeof(TransactionId) * Max(S->xcnt, 1));
	memcpy(M.last_xip, S->xip, sizeof(TransactionId) * S->xcnt);
	M.last_xcnt = S->xcnt;
	M.last_xmax = S->xmax;
	M.has_last = true;
}

/* Entries were lost: from now on, reload until every older transaction is settled. */
static void
lose_entries(uint64 head)
{
	int			i;

	drop_caps();
	for (i = 0; i < M.npending; i++)
		to_garbage(M.pending[i].node_id);
	M.npending = 0;	/* (and the counters entries of this refresh: nothing to patch) */
	M.next_seq = head;
	M.reloading = true;
	M.reload_xid = ReadNextTransactionId();
	M.losses++;
}

/* The hi of entry seq, if the entry is still in its slot (read as refresh reads one). */
static bool
entry_hi(uint64 seq, FullTransactionId *hi)
{
	SchedChange *slot = &change_log->entries[seq % change_log->size];

	if (pg_atomic_read_u64(&slot->seq) != seq)
		return false;
	pg_read_barrier();
	*hi = slot->hi;
	pg_read_barrier();
	return pg_atomic_read_u64(&slot->seq) == seq;
}

/*
 * After a loss that dropped every capability, the first entry a refresh with snapshot S
 * can read from instead of reloading until the older transactions settle: the
 * capabilities are loaded afresh at S, so only the writes of transactions S does not see
 * as settled can be missing, and every entry of theirs is at or after *start.
 *
 * Why: an entry's hi is the highest top-level xid among the entries up to it, kept under
 * the log's mutex; a transaction appends only after its xid is assigned, so one that
 * appended entry q has an xid at most hi(p) for every p >= q.  Every transaction S does
 * not see as settled has an xid at least m = min(S->xmin, ours).  So if hi(p) < m, none
 * of them appended anything up to p, and reading from p + 1 finds all their entries;
 * the refresh keeps them pending (and drops nothing else: no capability is held).  hi
 * grows with the entries, so the last such p still in the ring is found by bisection.
 * False when even the oldest entry left has hi >= m (a transaction unsettled in S may
 * have lost entries to the ring's wrap): then the mirror reloads as before.
 */
static bool
window_start(Snapshot S, uint64 head, uint64 *start)
{
	FullTransactionId next = ReadNextFullTransactionId();	/* after S was taken */
	FullTransactionId mine = GetTopFullTransactionIdIfAny();
	FullTransactionId m;
	FullTransactionId h;
	uint64		oldest = head > (uint64) change_log->size ? head - change_log->size : 1;
	uint64		lo = oldest - 1;	/* the last position known to qualify (or none) */
	uint64		past = head;	/* the first position known not to */

	m = FullTransactionIdFromU64(U64FromFullTransactionId(next) -
								 (uint32) (XidFromFullTransactionId(next) - S->xmin));
	if (FullTransactionIdIsValid(mine) && FullTransactionIdPrecedes(mine, m))
		m = mine;
	/* qualifies: overwritten already (older than any entry left) or hi < m */
	while (past - lo > 1)
	{
		uint64		mid = lo + (past - lo) / 2;

		if (!entry_hi(mid, &h) || FullTransactionIdPrecedes(h, m))
			lo = mid;
		else
			past = mid;
	}
	if (lo >= oldest && entry_hi(lo, &h) && FullTransactionIdPrecedes(h, m))
	{
		*start = lo + 1;
		return true;
	}
	if (lo < oldest && oldest == 1)
	{
		*start = 1;				/* the log has never wrapped: every entry is there */
		return true;
	}
	return false;
}

/*
 * Whether every transaction with an xid before M.reload_xid is settled in S.  This
 * transaction never is while it runs: if it wrote fleet rows before the loss, their
 * entries were skipped, and the reloads read its own uncommitted rows; only a refresh in
 * a later transaction (when it has committed or rolled back) may end the reloading.
 */
static bool
older_settled(Snapshot S)
{
	int			i;
	TransactionId mine = GetTopTransactionIdIfAny();
	TransactionId xid;

	if (TransactionIdIsValid(mine) && TransactionIdPrecedes(mine, M.reload_xid))
		return false;
	/* S treats xids from its xmax on as running: only ours may be among them */
	if (TransactionIdPrecedes(S->xmax, M.reload_xid))
	{
		if (M.reload_xid - S->xmax > 64)
			return false;
		xid = S->xmax;
		while (TransactionIdPrecedes(xid, M.reload_xid))
		{
			if (!TransactionIdIsCurrentTransactionId(xid))
				return false;
			TransactionIdAdvance(xid);
		}
	}
	for (i = 0; i < S->xcnt; i++)
		if (TransactionIdPrecedes(S->xip[i], M.reload_xid))
			return false;
	return true;
}

static void
add_pending(const PendingChange *c)
{
	sched_grow_array(M.cxt, (void **) &M.pending, &M.pending_allocated, M.npending + 1,
			   sizeof(PendingChange), 64);
	M.pending[M.npending] = *c;
	M.pending[M.npending].node_id = MemoryContextStrdup(M.cxt, c->node_id);
	M.npending++;
}

/* Orders changes by the row they change (node, kind, worker). */
static int
change_row_cmp(const PendingChange *x, const PendingChange *y)
{
	int			c;

	if (x->node_hash != y->node_hash)
		return x->node_hash < y->node_hash ? -1 : 1;
	if ((c = strcmp(x->node_id, y->node_id)) != 0)
		return c;
	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	if (x->kind == CHANGE_WORKER_COUNTERS)
		return memcmp(&x->worker_id, &y->worker_id, sizeof(pg_uuid_t));
	return 0;
}

static int
pending_cmp(const void *a, const void *b)
{
	const PendingChange *x = a;
	const PendingChange *y = b;
	int			c;

	if (x->xid != y->xid)
		return x->xid < y->xid ? -1 : 1;
	if ((c = change_row_cmp(x, y)) != 0)
		return c;
	if (x->subxid != y->subxid)
		return x->subxid < y->subxid ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq ? 1 : 0;
}

static int
cstring_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/* Sorts ids and leaves each once at the front, as reread_nodes wants them; their number. */
static int
sort_unique(char **ids, int count)
{
	int			unique = 0;
	int			i;

	qsort(ids, count, sizeof(char *), cstring_cmp);
	for (i = 0; i < count; i++)
		if (unique == 0 || strcmp(ids[unique - 1], ids[i]) != 0)
			ids[unique++] = ids[i];
	return unique;
}

/* Re-reads `count` nodes (sorted, unique) with the active snapshot and patches every
 * capability of the mirror. */
static void
reread_nodes(char **ids, int count)
{
	MemoryContext tmp = AllocSetContextCreate(CurrentMemoryContext, "pg_sched mirror reread",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(tmp);
	Datum	   *elems = palloc(sizeof(Datum) * count);
	bool	  **stale = palloc0(sizeof(bool *) * M.ncaps);
	int		   *before = palloc0(sizeof(int) * M.ncaps);
	Datum		arg;
	int			i,
				k;
	uint64		t;

	for (i = 0; i < count; i++)
		elems[i] = CStringGetTextDatum(ids[i]);
	arg = PointerGetDatum(construct_array(elems, count, TEXTOID, -1, false, TYPALIGN_INT));
	/* rows of the changed nodes as the mirror has them: stale until re-read */
	for (k = 0; k < M.ncaps; k++)
	{
		before[k] = M.caps[k].fleet.count;
		stale[k] = palloc0(sizeof(bool) * Max(before[k], 1));
		for (i = 0; i < count; i++)
		{
			int			r = find_row(&M.caps[k], ids[i]);

			if (r >= 0)
				stale[k][r] = true;
		}
	}
	MemoryContextSwitchTo(old);
	sched_spi_exec(&mirror_reread, &arg, NULL, true, 0, SPI_OK_SELECT);
	M.rows_reread += SPI_processed;
	for (t = 0; t < SPI_processed; t++)
	{
		HeapTuple	tup = SPI_tuptable->vals[t];
		bool		isnull;
		Datum		capd = SPI_getbinval(tup, SPI_tuptable->tupdesc, REREAD_CAPABILITY_COLUMN,
										 &isnull);
		char	   *capability = TextDatumGetCString(capd);
		MirrorCap  *cap = find_cap(capability);
		SchedFleetRow row;
		int			r;

		pfree(capability);
		if (cap == NULL)
			continue;			/* a capability nobody asked for */
		k = cap - M.caps;
		old = MemoryContextSwitchTo(tmp);
		sched_fleet_decode_packed(tup, SPI_tuptable->tupdesc, &row, M.cxt);
		MemoryContextSwitchTo(old);
		r = find_row(&M.caps[k], row.c.node_id);
		if (r >= 0)
		{
			to_garbage(M.caps[k].fleet.rows[r].owned);
			M.caps[k].fleet.rows[r] = row;	/* same node_id: the index stays right */
			sched_admit_memos_forget(&M.caps[k].memos, r);
			if (r < before[k])
				stale[k][r] = false;
		}
		else
			append_row(&M.caps[k], &row);
	}
	SPI_freetuptable(SPI_tuptable);
	SPI_tuptable = NULL;
	/* rows still stale are gone (node or worker deleted, capability changed) */
	for (k = 0; k < M.ncaps; k++)
	{
		MirrorCap  *cap = &M.caps[k];
		bool		removed = false;

		for (i = before[k] - 1; i >= 0; i--)
		{
			if (!stale[k][i])
				continue;
			to_garbage(cap->fleet.rows[i].owned);
			cap->fleet.rows[i] = cap->fleet.rows[cap->fleet.count - 1];
			sched_admit_memos_move(&cap->memos, cap->fleet.count - 1, i);
			sched_admit_memos_forget(&cap->memos, cap->fleet.count - 1);
			cap->fleet.count--;
			removed = true;
		}
		if (removed)
			index_rows(cap);
	}
	MemoryContextDelete(tmp);
}

/*
 * The row version that change c's (sub)transaction wrote: the successor (t_ctid) of the
 * version c->old_tid it updated, when that version is still there with c->subxid as its
 * updater.  A subtransaction updates a version at most once, so that successor holds
 * the counters c carries.  False when that cannot be shown (the version pruned, its slot
 * reused, the relation extended since nblocks was read): the caller re-reads the node.
 */
static bool
new_version_of(Relation rel, BlockNumber nblocks, const PendingChange *c, ItemPointer out)
{
	HeapTupleData tuple;
	Buffer		buf;
	ItemPointerData old_tid = c->old_tid;
	bool		ok;

	if (ItemPointerGetBlockNumber(&old_tid) >= nblocks)
		return false;
	tuple.t_self = old_tid;
	if (!heap_fetch(rel, SnapshotAny, &tuple, &buf, true))
	{
		if (BufferIsValid(buf))
			ReleaseBuffer(buf);
		return false;
	}
	LockBuffer(buf, BUFFER_LOCK_SHARE);
	ok = !(tuple.t_data->t_infomask & HEAP_XMAX_INVALID) &&
		!HEAP_XMAX_IS_LOCKED_ONLY(tuple.t_data->t_infomask) &&
		TransactionIdEquals(HeapTupleHeaderGetUpdateXid(tuple.t_data), c->subxid);
	*out = tuple.t_data->t_ctid;
	UnlockReleaseBuffer(buf);
	return ok && !ItemPointerEquals(out, &old_tid) && ItemPointerGetBlockNumber(out) < nblocks;
}

/* The counters entries of one row (a node's, or one worker's), as patch_counters
 * gathers them. */
typedef struct PatchGroup
{
	const PendingChange *first;	/* an entry of the row: its key */
	const PendingChange *last;	/* its committed entry with the highest seq, or NULL */
	bool		own;			/* one of its entries is own */
} PatchGroup;

/* A hash of the row change c changes, consistent with change_row_cmp. */
static uint32
change_row_hash(const PendingChange *c)
{
	uint32		h = hash_combine(c->node_hash, (uint32) c->kind);

	if (c->kind == CHANGE_WORKER_COUNTERS)
		h = hash_combine(h, hash_bytes((const unsigned char *) &c->worker_id,
									   sizeof(pg_uuid_t)));
	return h;
}

/*
 * Patches the mirror from counters entries `cands` of transactions settled in S, for
 * nodes not in `reread` (sorted; those are re-read whole).  For each row changed, the
 * entry of its last committed (sub)transaction names the version S sees: the row's
 * writers are ordered by its lock, and each appends its entry while it holds that lock
 * (a BEFORE ROW trigger, or a direct write just after it wrote), so the row's entries
 * are in the order of its writes; a writer after the last committed one is not settled
 * in S (it started writing after the settled one ended), and aborted writers changed
 * nothing.  The rows of that version's
 * node (or worker) get the entry's counters and the version's tid (the entry's new_tid
 * when it was appended once the version was written, else read: new_version_of); the
 * other columns are those the mirror has, which counters entries do not change.  When
 * none committed, the mirror's row stands, unless it was read by the transaction that
 * wrote (own: it may hold a rolled back write).  Nodes whose version cannot be read this
 * way are returned in *fallback (to re-read; the array and the ids are the refresh's).
 *
 * The entries are gathered by row in a hash table, newest first, so that a row's
 * commit lookups stop at its last committed entry: a mirror 31 sessions behind takes
 * thousands of entries at a refresh (sorting them by row cost 7% of such a call).
 */
static void
patch_counters(PendingChange *cands, int ncand, char **reread, int nreread,
			   char ***fallback, int *nfallback)
{
	Relation	rels[2] = {NULL, NULL};	/* node, worker */
	BlockNumber nblocks[2] = {0, 0};
	PatchGroup *groups;
	int			ngroups = 0;
	int		   *slots;
	int			nslots = 16;
	int			i,
				k,
				w;

	scratch_reserve((void **) &R.fallback, &R.fallback_allocated, ncand, sizeof(char *));
	*fallback = R.fallback;
	*nfallback = 0;
	while (nslots < 2 * ncand)
		nslots *= 2;
	scratch_reserve((void **) &R.slots, &R.slots_allocated, nslots, sizeof(int));
	slots = R.slots;
	memset(slots, -1, sizeof(int) * nslots);
	scratch_reserve(&R.groups, &R.groups_allocated, ncand, sizeof(PatchGroup));
	groups = R.groups;
	/* from the end: the entries that were pending (older, appended last, in any order)
	 * first, then the ring's newest first; the seq test below holds for any order */
	for (i = ncand - 1; i >= 0; i--)
	{
		const PendingChange *c = &cands[i];
		uint32		h = change_row_hash(c) & (nslots - 1);
		PatchGroup *g;

		while (slots[h] >= 0 && change_row_cmp(groups[slots[h]].first, c) != 0)
			h = (h + 1) & (nslots - 1);
		if (slots[h] < 0)
		{
			slots[h] = ngroups;
			g = &groups[ngroups++];
			g->first = c;
			g->last = NULL;
			g->own = false;
		}
		else
			g = &groups[slots[h]];
		g->own |= c->own;
		if ((g->last == NULL || g->last->seq < c->seq) && TransactionIdDidCommit(c->subxid))
			g->last = c;
	}
	for (i = 0; i < ngroups; i++)
	{
		const PatchGroup *g = &groups[i];
		const PendingChange *last = g->last;
		const char *node_id = g->first->node_id;
		bool		of_node = g->first->kind == CHANGE_NODE_COUNTERS;
		int			rows[64];
		int			caps[64];
		int			nrows = 0;
		ItemPointerData tid;

		if (nreread > 0 &&
			bsearch(&node_id, reread, nreread, sizeof(char *), cstring_cmp) != NULL)
			continue;
		if (last == NULL)
		{
			/* nothing committed: the version before them is unchanged, unless the
			 * mirror read one of our own that rolled back */
			if (g->own)
				(*fallback)[(*nfallback)++] = (char *) node_id;
			continue;
		}
		for (k = 0; k < M.ncaps && nrows < lengthof(rows); k++)
		{
			int			r = find_row_hashed(&M.caps[k], node_id, g->first->node_hash);

			if (r < 0 || (!of_node &&
						  memcmp(&M.caps[k].fleet.rows[r].worker_id, &last->worker_id,
								 sizeof(pg_uuid_t)) != 0))
				continue;
			caps[nrows] = k;
			rows[nrows++] = r;
		}
		if (nrows == 0)
			continue;			/* no row of it mirrored */
		if (nrows == lengthof(rows))
		{
			(*fallback)[(*nfallback)++] = (char *) node_id;
			continue;
		}
		if (ItemPointerIsValid(&last->new_tid))
			tid = last->new_tid;	/* appended once written: no read */
		else
		{
			w = of_node ? 0 : 1;
			if (rels[w] == NULL)
			{
				rels[w] = table_open(of_node ? M.node_relid : M.worker_relid,
									 AccessShareLock);
				nblocks[w] = RelationGetNumberOfBlocks(rels[w]);
			}
			if (!new_version_of(rels[w], nblocks[w], last, &tid))
			{
				(*fallback)[(*nfallback)++] = (char *) node_id;
				continue;
			}
		}
		for (k = 0; k < nrows; k++)
		{
			SchedFleetRow *row = &M.caps[caps[k]].fleet.rows[rows[k]];

			if (of_node)
			{
				row->c.reserved_cpu_millis = last->counters.reserved_cpu_millis;
				row->c.reserved_memory_mb = last->counters.reserved_memory_mb;
				row->c.reserved_gpus = last->counters.reserved_gpus;
				row->c.node_live_attempts = last->counters.live_attempts;
				row->node_tid = tid;
			}
			else
			{
				row->c.worker_live_attempts = last->counters.live_attempts;
				row->c.has_heartbeat = last->counters.has_heartbeat;
				row->c.last_heartbeat = last->counters.last_heartbeat;
				row->worker_tid = tid;
			}
			sched_admit_memos_counters_changed(&M.caps[caps[k]].memos, rows[k]);
			M.rows_patched++;
		}
	}
	for (w = 0; w < 2; w++)
		if (rels[w] != NULL)
			table_close(rels[w], AccessShareLock);
}

/* Appends counters entry c to the refresh's candidates (R.cands; *n of them so far),
 * its node_id as it is (it lives until the refresh ends). */
static void
add_cand(int *n, const PendingChange *c)
{
	scratch_reserve((void **) &R.cands, &R.cands_allocated, *n + 1, sizeof(PendingChange));
	R.cands[(*n)++] = *c;
}

/* Appends node id `id` to the ids to re-read (R.changed; *n of them so far). */
static void
add_changed(int *n, char *id)
{
	scratch_reserve((void **) &R.changed, &R.changed_allocated, *n + 1, sizeof(char *));
	R.changed[(*n)++] = id;
}

/*
 * Brings the mirror up to snapshot S (which must stay the active snapshot for the
 * statements run here).  Returns false when the mirror cannot answer for S.
 */
static bool
refresh(Snapshot S)
{
	Oid			nsp;
	Oid			node_relid;
	Oid			worker_relid;
	uint64		head;
	uint64		seq;
	int			nchanged = 0;	/* R.changed */
	int			ncand = 0;		/* R.cands */
	PendingChange c;
	int			i;
	int			kept;

	nsp = get_namespace_oid("sched", false);
	node_relid = get_relname_relid("node", nsp);
	worker_relid = get_relname_relid("worker", nsp);
	if (M.cxt == NULL)
	{
		M.cxt = AllocSetContextCreate(TopMemoryContext, "pg_sched fleet mirror",
									  ALLOCSET_DEFAULT_SIZES);
		M.dbid = InvalidOid;
	}
	if (R.cxt == NULL)
		R.cxt = AllocSetContextCreate(M.cxt, "pg_sched mirror refresh", ALLOCSET_DEFAULT_SIZES);
	R.id_block = 0;
	R.id_used = 0;
	collect_garbage();
	if (!snapshot_covers_last(S))
	{
		M.bypassed++;
		return false;
	}
	M.refreshes++;
	head = pg_atomic_read_u64(&change_log->next_seq);	/* after S was taken */
	pg_read_barrier();
	if (M.dbid != MyDatabaseId || M.node_relid != node_relid || M.worker_relid != worker_relid ||
		head - M.next_seq > (uint64) change_log->size)
	{
		uint64		start;

		M.dbid = MyDatabaseId;
		M.node_relid = node_relid;
		M.worker_relid = worker_relid;
		lose_entries(head);
		/* read back to the first entry of any transaction unsettled in S, if still there */
		if (window_start(S, head, &start))
		{
			M.next_seq = start;
			M.reloading = false;
		}
	}

	for (seq = M.next_seq; seq < head; seq++)
	{
		SchedChange *slot = &change_log->entries[seq % change_log->size];
		Oid			dbid;
		uint8		len;
		char		id[CHANGE_ID_MAX + 1];

		if (pg_atomic_read_u64(&slot->seq) != seq)
		{
			lose_entries(head);
			break;
		}
		pg_read_barrier();
		dbid = slot->dbid;
		c.seq = seq;
		c.xid = slot->xid;
		c.subxid = slot->subxid;
		c.kind = slot->kind;
		c.old_tid = slot->old_tid;
		c.new_tid = slot->new_tid;
		c.worker_id = slot->worker_id;
		c.counters = slot->counters;
		len = Min(slot->len, CHANGE_ID_MAX);
		memcpy(id, slot->node_id, len);
		id[len] = '\0';
		pg_read_barrier();
		if (pg_atomic_read_u64(&slot->seq) != seq)
		{
			lose_entries(head);
			break;
		}
		if (dbid != MyDatabaseId)
			continue;
		if (c.kind == CHANGE_ALL)
		{
			lose_entries(head);
			break;
		}
		c.node_hash = sched_node_hash(id);
		c.node_id = id;
		c.own = TransactionIdIsCurrentTransactionId(c.xid);
		if (IS_COUNTERS(c.kind) && !c.own)
		{
			/* invisible in S until settled: then patched from (patch_counters) */
			if (XidInMVCCSnapshot(c.xid, S))
				add_pending(&c);
			else
			{
				c.node_id = scratch_id(id, len);
				add_cand(&ncand, &c);
			}
			continue;
		}
		/* other changes, and our own (visible in S): re-read, until settled */
		if (!xid_settled(c.xid, S))
			add_pending(&c);
		add_changed(&nchanged, scratch_id(id, len));
	}
	M.next_seq = head;

	if (M.reloading)
	{
		/* every capability is loaded afresh at S by its caller; pending keeps what is
		 * still in progress */
		drop_caps();
		if (older_settled(S))
			M.reloading = false;
	}
	/* pending entries: re-read every time (counters: patched once settled), dropped
	 * once settled */
	for (i = 0, kept = 0; i < M.npending; i++)
	{
		PendingChange *p = &M.pending[i];

		if (IS_COUNTERS(p->kind) && !TransactionIdIsCurrentTransactionId(p->xid))
		{
			if (XidInMVCCSnapshot(p->xid, S))
				M.pending[kept++] = *p;
			else
			{
				add_cand(&ncand, p);	/* (its node_id freed at a later refresh) */
				to_garbage(p->node_id);
			}
			continue;
		}
		add_changed(&nchanged, p->node_id);
		if (xid_settled(p->xid, S))
			to_garbage(p->node_id);
		else
			M.pending[kept++] = *p;
	}
	M.npending = kept;
	if (M.npending > 1)
	{
		/*
		 * One entry per (transaction, row changed, subtransaction): the latest.  Not
		 * fewer: which subtransactions commit is known only once the transaction is
		 * settled, and the version S sees is the last that a committed one wrote.
		 */
		qsort(M.pending, M.npending, sizeof(PendingChange), pending_cmp);
		for (i = 1, kept = 1; i < M.npending; i++)
		{
			if (M.pending[i].xid == M.pending[kept - 1].xid &&
				M.pending[i].subxid == M.pending[kept - 1].subxid &&
				change_row_cmp(&M.pending[i], &M.pending[kept - 1]) == 0)
			{
				to_garbage(M.pending[kept - 1].node_id);
				M.pending[kept - 1] = M.pending[i];
			}
			else
				M.pending[kept++] = M.pending[i];
		}
		M.npending = kept;
	}

	if (nchanged > 0 && M.ncaps > 0)
	{
		int			total = 0;

		for (i = 0; i < M.ncaps; i++)
			total += M.caps[i].fleet.count;
		nchanged = sort_unique(R.changed, nchanged);
		if (nchanged > 64 && nchanged > total / 4)
			drop_caps();		/* cheaper to read the capabilities again */
		else
			reread_nodes(R.changed, nchanged);
	}
	if (ncand > 0 && M.ncaps > 0)
	{
		char	  **fallback;
		int			nfallback;

		patch_counters(R.cands, ncand, R.changed, nchanged, &fallback, &nfallback);
		/* (a node may fall back twice: its row and its worker's) */
		if (nfallback > 0)
			reread_nodes(fallback, sort_unique(fallback, nfallback));
	}
	scratch_trim();
	remember_snapshot(S);
	return true;
}

bool
sched_fleet_mirror_usable(void)
{
	return change_log != NULL && sched_fleet_mirror && !RecoveryInProgress() &&
		!IsolationUsesXactSnapshot();
}

bool
sched_fleet_mirror_read(const char *capability, bool fresh, SchedFleet *fleet)
{
	Snapshot	S;
	bool		ok;
	MirrorCap  *cap = NULL;
	MemoryContext caller = CurrentMemoryContext;	/* SPI returns in its own */

	if (!sched_fleet_mirror_usable())
		return false;
	if (fresh)
	{
		/* what a non-read-only SPI statement would see: our own writes included */
		CommandCounterIncrement();
		S = GetTransactionSnapshot();
	}
	else
		S = GetActiveSnapshot();
	PushActiveSnapshot(S);
	S = GetActiveSnapshot();
	PG_TRY();
	{
		ok = refresh(S);
		if (ok)
		{
			cap = find_cap(capability);
			if (cap == NULL)
				cap = load_cap(capability);
		}
	}
	PG_CATCH();
	{
		/* the mirror may be half patched: start over next time */
		lose_entries(pg_atomic_read_u64(&change_log->next_seq));
		M.has_last = false;
		PG_RE_THROW();
	}
	PG_END_TRY();
	PopActiveSnapshot();
	MemoryContextSwitchTo(caller);
	if (!ok)
		return false;
	*fleet = cap->fleet;
	return true;
}

/* The memos of the capability whose rows `fleet` is, as the mirror has them now, or NULL. */
static SchedAdmitMemos *
memos_of(const SchedFleet *fleet)
{
	int			k;

	for (k = 0; k < M.ncaps; k++)
		if (M.caps[k].fleet.rows == fleet->rows && M.caps[k].fleet.count == fleet->count)
			return &M.caps[k].memos;
	return NULL;
}

const SchedAdmitMemos *
sched_fleet_mirror_memos(const SchedFleet *fleet)
{
	return memos_of(fleet);
}

int
sched_fleet_mirror_admit(const SchedFleet *fleet, const SchedPlacement *p, SchedRanked *out)
{
	SchedAdmitMemos *memos = memos_of(fleet);

	if (memos == NULL)
		return sched_fleet_admit(p, fleet, out);
	M.admissions_walked++;
	return sched_admit_memos_admit(memos, fleet, p, out);
}

int
sched_fleet_mirror_admit_best(const SchedFleet *fleet, const SchedPlacement *p,
							  SchedRanked *out, const SchedRanked **bound)
{
	SchedAdmitMemos *memos = memos_of(fleet);
	bool		walked;
	int			n;

	*bound = NULL;
	if (memos == NULL)
		return sched_fleet_admit(p, fleet, out);
	n = sched_admit_memos_best(memos, fleet, p, out, bound, &walked);
	if (walked)
		M.admissions_walked++;
	else
		M.admissions_carried++;
	return n;
}

/* This backend's mirror, for sched._fleet_mirror_stats() (diagnostics.c). */
void
sched_fleet_mirror_get_stats(SchedMirrorStats *out)
{
	int			i;

	memset(out, 0, sizeof(*out));
	out->usable = sched_fleet_mirror_usable();
	out->capabilities = M.ncaps;
	for (i = 0; i < M.ncaps; i++)
		out->rows_held += M.caps[i].fleet.count;
	out->pending = M.npending;
	out->refreshes = M.refreshes;
	out->full_loads = M.full_loads;
	out->rows_reread = M.rows_reread;
	out->bypassed = M.bypassed;
	out->losses = M.losses;
	out->rows_patched = M.rows_patched;
	out->admissions_walked = M.admissions_walked;
	out->admissions_carried = M.admissions_carried;
}

static bool
labels_equal(const SchedLabelSet *a, const SchedLabelSet *b)
{
	int			i;

	if (a->count != b->count)
		return false;
	for (i = 0; i < a->count; i++)
		if (strcmp(a->items[i].key, b->items[i].key) != 0 ||
			strcmp(a->items[i].value, b->items[i].value) != 0)
			return false;
	return true;
}

/* Whether two fleet rows of one node hold the same values (every field placement or the
 * reservation's re-check reads). */
static bool
rows_equal(const SchedFleetRow *x, const SchedFleetRow *y)
{
	const SchedCandidate *a = &x->c;
	const SchedCandidate *b = &y->c;
	int			i;

	if (strcmp(a->node_id, b->node_id) != 0 || a->management_status != b->management_status ||
		!labels_equal(&a->labels, &b->labels) || a->cpu_millis != b->cpu_millis ||
		a->memory_mb != b->memory_mb || a->gpus != b->gpus || a->weight != b->weight ||
		a->reserved_cpu_millis != b->reserved_cpu_millis ||
		a->reserved_memory_mb != b->reserved_memory_mb || a->reserved_gpus != b->reserved_gpus ||
		a->node_live_attempts != b->node_live_attempts || a->has_worker != b->has_worker ||
		a->runtime_state != b->runtime_state || a->scheduling_status != b->scheduling_status ||
		a->has_heartbeat != b->has_heartbeat || a->last_heartbeat != b->last_heartbeat ||
		a->version_count != b->version_count || a->slots != b->slots ||
		a->worker_live_attempts != b->worker_live_attempts ||
		memcmp(&x->worker_id, &y->worker_id, sizeof(pg_uuid_t)) != 0 ||
		x->generation != y->generation ||
		!ItemPointerEquals((ItemPointer) &x->worker_tid, (ItemPointer) &y->worker_tid) ||
		!ItemPointerEquals((ItemPointer) &x->node_tid, (ItemPointer) &y->node_tid))
		return false;
	for (i = 0; i < a->version_count; i++)
		if ((a->versions[i] == NULL) != (b->versions[i] == NULL) ||
			(a->versions[i] != NULL && strcmp(a->versions[i], b->versions[i]) != 0))
			return false;
	return true;
}

/*
 * For sched._fleet_mirror_check(capability) (diagnostics.c), inside SPI: brings the
 * mirror up to a fresh snapshot, reads the tables with that same snapshot, and returns
 * how many nodes differ (rows missing on either side, or holding other values).  0 is
 * the mirror's invariant; the concurrency test calls it while other sessions dispatch,
 * finish and change the fleet.  ERROR (55000) when the mirror is not in use.
 */
int
sched_fleet_mirror_differences(const char *capability)
{
	SchedFleet	mirrored;
	SchedFleet	direct;
	MirrorCap  *cap;
	bool	   *seen;
	int			differ = 0;
	int			i;

	if (!sched_fleet_mirror_usable())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the fleet mirror is not in use in this session"),
				 errhint("It needs pg_sched in shared_preload_libraries, sched.fleet_mirror = on, READ COMMITTED and no recovery.")));
	CommandCounterIncrement();
	PushActiveSnapshot(GetTransactionSnapshot());
	if (!sched_fleet_mirror_read(capability, false, &mirrored))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the fleet mirror cannot answer for this snapshot")));
	/* the same snapshot, read from the tables */
	sched_fleet_load(capability, SCHED_FLEET_LABELS, NULL, &direct);
	PopActiveSnapshot();

	cap = find_cap(capability);
	Assert(cap != NULL && cap->fleet.rows == mirrored.rows);
	seen = palloc0(sizeof(bool) * Max(mirrored.count, 1));
	for (i = 0; i < direct.count; i++)
	{
		int			r = find_row(cap, direct.rows[i].c.node_id);

		if (r < 0 || !rows_equal(&cap->fleet.rows[r], &direct.rows[i]))
			differ++;
		if (r >= 0)
			seen[r] = true;
	}
	for (i = 0; i < mirrored.count; i++)
		if (!seen[i])
			differ++;
	/* and what the admission memos say of the rows (kept across calls) */
	return differ + sched_admit_memos_check(&cap->memos, &cap->fleet);
}

/*
 * The fleet of `capability` as sched_fleet_load reads it (flags as there), answered from
 * this backend's mirror where the mirror can answer (not for SCHED_FLEET_ALL_NODES: the
 * mirror holds only nodes with a worker of the capability), else from the tables.
 * Mirror rows are borrowed (valid until the transaction ends); SCHED_FLEET_COPY gives
 * the caller rows of its own to modify (their strings stay borrowed).
 */
void
sched_fleet_read(const char *capability, int flags, const SchedPlacement *keys_of,
				 SchedFleet *fleet)
{
	if (!(flags & SCHED_FLEET_ALL_NODES) &&
		sched_fleet_mirror_read(capability, (flags & SCHED_FLEET_FRESH) != 0, fleet))
	{
		if (flags & SCHED_FLEET_COPY)
		{
			SchedFleetRow *rows = palloc(sizeof(SchedFleetRow) * Max(fleet->count, 1));

			memcpy(rows, fleet->rows, sizeof(SchedFleetRow) * fleet->count);
			fleet->rows = rows;
		}
		return;
	}
	sched_fleet_load(capability, flags, keys_of, fleet);
}
