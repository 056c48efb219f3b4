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
 * sleeps, sched_wakeup_sleep() lets go of it (snapshot_release.c), which
 * sched_wakeup_check_can_sleep() makes sure is safe before the first poll.  Every poll
 * after a sleep takes a new snapshot (and sets xmin anew).
 */
#include "postgres.h"

#include "wakeup.h"
#include "backend_slots.h"
#include "xact_end.h"
#include "settings.h"
#include "spi_util.h"
#include "snapshot_release.h"

#include "access/xact.h"
#include "commands/async.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "storage/backendid.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/memutils.h"
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

void
sched_wakeup_check_can_sleep(void)
{
	const char *hint;
	const char *why = sched_snapshot_why_held("wait_commands", &hint);

	if (why != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("sched.wait_commands cannot wait here: %s", why),
				 errdetail("While it waits it lets go of its snapshot, so that it does not hold back vacuum; "
						   "nothing may read with that snapshot afterwards."),
				 errhint("%s", hint)));
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
	sched_snapshot_let_go();
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, ms,
					 PG_WAIT_EXTENSION);
	CHECK_FOR_INTERRUPTS();
	return true;
}
