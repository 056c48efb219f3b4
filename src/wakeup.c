/*
 * wakeup.c — waking a worker's session when a command for it commits: the wake-up of
 * sched.wait_commands (lifecycle.c), kept in shared memory, and, when
 * sched.notify_workers is on, NOTIFY sched_worker_<worker_id> for LISTEN users.
 *
 * Why not NOTIFY alone: every notifying transaction holds the notify queue's lock from
 * its pre-commit until its commit record is flushed, so notifying commits of the whole
 * cluster run one at a time; and LISTEN cannot work through a transaction-pooling
 * connection pooler.  The wake-up here costs a committer a scan of one small slot per
 * backend after its commit is visible, under no lock shared with other committers.
 *
 * Shared memory (only when preloaded): one slot per backend (by BackendId), written only
 * by its backend, under the slot's spinlock: the database and the worker the backend
 * waits for, and its PGPROC number (whose latch is set), or nothing.
 *
 * Guarantee (no lost wake-up).  A waiter publishes its slot, then issues a memory
 * barrier, then polls with a fresh snapshot; a committer makes its commit visible
 * (ProcArrayEndTransaction), then issues a memory barrier, then reads the slots (the
 * commit callback runs after the commit is visible).  So either the waiter's snapshot
 * sees the command, or the committer sees the slot and sets the waiter's latch, and
 * WaitLatch returns at once for a latch set before it was called.  A wake-up for a
 * command the waiter then cannot see (a subtransaction that rolled back, another
 * generation) only makes it poll once more.
 *
 * Which workers to wake is kept per transaction (in TopTransactionContext) and
 * forgotten at its end; only a commit wakes.
 *
 * Sleeping without a snapshot.  A function runs under its statement's snapshot, whose
 * xmin (backend_xmin) would hold back vacuum for as long as the wait lasts.  While it
 * sleeps, sched_wakeup_sleep() clears this backend's xmin.  That is safe only when
 * nothing will read with that snapshot again, which sched_wakeup_check_can_sleep()
 * makes sure of before the first poll: READ COMMITTED (every later query takes a fresh
 * snapshot), nothing written yet (no xid, which would hold vacuum back too), called
 * directly by the portal's statement (not from a function's query), a statement that
 * scans no table and calls no non-built-in STABLE function (those read with the
 * statement's snapshot), and no other snapshot registered nor cursor open in the
 * transaction.  Every poll after a sleep takes a new snapshot (and sets xmin anew).
 */
#include "postgres.h"

#include "wakeup.h"
#include "backend_slots.h"
#include "xact_end.h"
#include "settings.h"
#include "spi_util.h"

#include "access/xact.h"
#include "access/htup_details.h"
#include "catalog/pg_language.h"
#include "catalog/pg_proc.h"
#include "commands/async.h"
#include "executor/execdesc.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "nodes/plannodes.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "storage/backendid.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "tcop/pquery.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/portal.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

typedef struct WakeupSlot
{
	slock_t		mutex;
	bool		waiting;
	Oid			dbid;
	int			pgprocno;
	pg_uuid_t	worker_id;
} WakeupSlot;

static WakeupSlot *slots = NULL;	/* [0 .. MaxBackends], by BackendId */
static int	nslots = 0;

/* the workers this transaction has made commands for (TopTransactionContext) */
static pg_uuid_t *pending = NULL;
static int	npending = 0;
static int	maxpending = 0;

Size
sched_wakeup_shmem_size(void)
{
	return sched_backend_slots_size(sizeof(WakeupSlot));
}

void
sched_wakeup_shmem_attach(void *ptr, bool found)
{
	int			i;

	slots = ptr;
	nslots = sched_backend_slots_count();
	if (!found)
	{
		for (i = 0; i < nslots; i++)
		{
			SpinLockInit(&slots[i].mutex);
			slots[i].waiting = false;
		}
	}
}

bool
sched_wakeup_available(void)
{
	return sched_backend_has_slot(slots, nslots);
}

/* Sets the latch of every backend of this database waiting for one of the workers. */
static void
wake_pending(void)
{
	int			b,
				i;

	pg_memory_barrier();		/* our commit is visible before we read the slots */
	for (b = 1; b < nslots; b++)
	{
		WakeupSlot *s = &slots[b];
		int			procno = -1;

		SpinLockAcquire(&s->mutex);
		if (s->waiting && s->dbid == MyDatabaseId)
		{
			for (i = 0; i < npending; i++)
				if (memcmp(&s->worker_id, &pending[i], sizeof(pg_uuid_t)) == 0)
				{
					procno = s->pgprocno;
					break;
				}
		}
		SpinLockRelease(&s->mutex);
		if (procno >= 0)
			SetLatch(&ProcGlobal->allProcs[procno].procLatch);
	}
}

static void
wakeup_xact_end(XactEvent event, void *arg)
{
	if (!sched_xact_event_ends(event))
		return;
	if ((event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT) &&
		npending > 0 && slots != NULL)
		wake_pending();
	/* TopTransactionContext goes with the transaction */
	pending = NULL;
	npending = 0;
	maxpending = 0;
}

void
sched_wakeup_preload(void)
{
	RegisterXactCallback(wakeup_xact_end, NULL);
}

void
sched_wake_worker(const pg_uuid_t *worker_id)
{
	int			i;

	if (sched_notify_workers)
	{
		/* an empty payload: anyone may LISTEN on any channel (see reservation.c) */
		Async_Notify(psprintf("sched_worker_%s", sched_uuid_out(worker_id)), "");
	}
	if (slots == NULL)
		return;
	for (i = 0; i < npending; i++)
		if (memcmp(&pending[i], worker_id, sizeof(pg_uuid_t)) == 0)
			return;
	if (npending == maxpending)
	{
		int			n = Max(8, maxpending * 2);

		if (pending == NULL)
			pending = MemoryContextAlloc(TopTransactionContext, n * sizeof(pg_uuid_t));
		else
			pending = repalloc(pending, n * sizeof(pg_uuid_t));
		maxpending = n;
	}
	pending[npending++] = *worker_id;
}

/* a backend that exits while it waits (FATAL does not unwind PG_FINALLY) leaves no slot */
static void
wakeup_on_exit(int code, Datum arg)
{
	sched_wakeup_done();
}

void
sched_wakeup_wait_for(const pg_uuid_t *worker_id)
{
	static bool exit_hook = false;
	WakeupSlot *s;

	Assert(sched_wakeup_available());
	if (!exit_hook)
	{
		before_shmem_exit(wakeup_on_exit, (Datum) 0);
		exit_hook = true;
	}
	s = &slots[MyBackendId];
	SpinLockAcquire(&s->mutex);
	s->dbid = MyDatabaseId;
	s->pgprocno = MyProc->pgprocno;
	s->worker_id = *worker_id;
	s->waiting = true;
	SpinLockRelease(&s->mutex);
	pg_memory_barrier();		/* the slot is visible before our next snapshot */
}

void
sched_wakeup_done(void)
{
	WakeupSlot *s;

	if (!sched_wakeup_available())
		return;
	s = &slots[MyBackendId];
	SpinLockAcquire(&s->mutex);
	s->waiting = false;
	SpinLockRelease(&s->mutex);
}

/* ---- sleeping without a snapshot ---------------------------------------------------- */

/* a STABLE function that is not built in: it may read tables with the statement's snapshot */
static bool
stable_user_function(Oid funcid, void *context)
{
	HeapTuple	tp;
	bool		result = false;

	if (func_volatile(funcid) != PROVOLATILE_STABLE)
		return false;
	tp = SearchSysCache1(PROCOID, ObjectIdGetDatum(funcid));
	if (HeapTupleIsValid(tp))
	{
		result = ((Form_pg_proc) GETSTRUCT(tp))->prolang != INTERNALlanguageId;
		ReleaseSysCache(tp);
	}
	return result;
}

static bool
expr_reads_with_snapshot(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (check_functions_in_node(node, stable_user_function, NULL))
		return true;
	return expression_tree_walker(node, expr_reads_with_snapshot, context);
}

/* whether a plan (sub)tree calls a function that may read with the statement's snapshot */
static bool
plan_reads_with_snapshot(Plan *plan)
{
	ListCell   *lc;

	if (plan == NULL)
		return false;
	if (expr_reads_with_snapshot((Node *) plan->targetlist, NULL) ||
		expr_reads_with_snapshot((Node *) plan->qual, NULL))
		return true;
	switch (nodeTag(plan))
	{
		case T_FunctionScan:
			if (expr_reads_with_snapshot((Node *) ((FunctionScan *) plan)->functions, NULL))
				return true;
			break;
		case T_Result:
			if (expr_reads_with_snapshot(((Result *) plan)->resconstantqual, NULL))
				return true;
			break;
		case T_Append:
			foreach(lc, ((Append *) plan)->appendplans)
				if (plan_reads_with_snapshot(lfirst(lc)))
					return true;
			break;
		case T_MergeAppend:
			foreach(lc, ((MergeAppend *) plan)->mergeplans)
				if (plan_reads_with_snapshot(lfirst(lc)))
					return true;
			break;
		case T_SubqueryScan:
			if (plan_reads_with_snapshot(((SubqueryScan *) plan)->subplan))
				return true;
			break;
		case T_NestLoop:
		case T_MergeJoin:
		case T_HashJoin:
			if (expr_reads_with_snapshot((Node *) ((Join *) plan)->joinqual, NULL))
				return true;
			break;
		default:
			break;
	}
	return plan_reads_with_snapshot(plan->lefttree) ||
		plan_reads_with_snapshot(plan->righttree);
}

static void
refuse(const char *why, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
			 errmsg("sched.wait_commands cannot wait here: %s", why),
			 errdetail("While it waits it lets go of its snapshot, so that it does not hold back vacuum; "
					   "nothing may read with that snapshot afterwards."),
			 errhint("%s", hint)));
}

void
sched_wakeup_check_can_sleep(void)
{
	Portal		portal = ActivePortal;
	PlannedStmt *stmt;
	ListCell   *lc;

	if (IsolationUsesXactSnapshot())
		refuse("the transaction is REPEATABLE READ or SERIALIZABLE",
			   "Call it in autocommit, or in a READ COMMITTED transaction.");
	if (TransactionIdIsValid(GetTopTransactionIdIfAny()))
		refuse("the transaction has written",
			   "Commit first, or call it in autocommit.");
	if (portal == NULL || portal->strategy != PORTAL_ONE_SELECT || portal->queryDesc == NULL ||
		!ActiveSnapshotSet() || portal->queryDesc->snapshot != GetActiveSnapshot())
		refuse("it is not called directly by the statement",
			   "Call it as a statement of its own: SELECT * FROM sched.wait_commands(...), "
			   "not from a function or procedure.");
	stmt = portal->queryDesc->plannedstmt;
	foreach(lc, stmt->rtable)
	{
		if (((RangeTblEntry *) lfirst(lc))->rtekind == RTE_RELATION)
			refuse("its statement reads a table",
				   "Call it as a statement of its own: SELECT * FROM sched.wait_commands(...).");
	}
	if (plan_reads_with_snapshot(stmt->planTree))
		refuse("its statement calls a STABLE function that may read tables",
			   "Call it as a statement of its own: SELECT * FROM sched.wait_commands(...).");
	foreach(lc, stmt->subplans)
	{
		if (plan_reads_with_snapshot(lfirst(lc)))
			refuse("its statement calls a STABLE function that may read tables",
				   "Call it as a statement of its own: SELECT * FROM sched.wait_commands(...).");
	}
	InvalidateCatalogSnapshot();
	if (!ThereAreNoPriorRegisteredSnapshots() || !ThereAreNoReadyPortals())
		refuse("the transaction holds other snapshots (an open cursor)",
			   "Close the cursors first, or call it in a transaction of its own.");
}

void
sched_wakeup_arm(void)
{
	ResetLatch(MyLatch);
}

bool
sched_wakeup_sleep(TimestampTz deadline)
{
	long		ms;

	CHECK_FOR_INTERRUPTS();
	ms = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
	if (ms <= 0)
		return false;
	/* what sched_wakeup_check_can_sleep() allowed: no snapshot will be read again */
	InvalidateCatalogSnapshot();
	MyProc->xmin = InvalidTransactionId;
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, ms,
					 PG_WAIT_EXTENSION);
	CHECK_FOR_INTERRUPTS();
	return true;
}
