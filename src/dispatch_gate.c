/*
 * dispatch_gate.c — at most sched.dispatch_concurrency placement calls (dispatch_next,
 * dispatch_attempt) of the cluster run at once; the others wait their turn, in the
 * order they came, before they read or lock anything.
 *
 * Why: a placement call holds the requests it fetched, and the worker and node rows it
 * reserved on, until its transaction ends, and every other call walks past what it
 * holds at the head of the queue.  With more calls running than there are CPUs, most of
 * them wait for a core while holding their locks, and the ones on a core spend their
 * time passing over those rows and patching their fleet mirrors with the others'
 * changes: placements per second fell to a third between 2 and 32 dispatching
 * sessions on 2 cores.  A turn is held for the call, not the transaction: the commit
 * that follows it runs while the next call starts.
 *
 * A call waits only where waiting cannot hold up a running call: its transaction has no
 * xid (so it holds no row lock) and has made no placement call before (so it holds no
 * step lock).  Anything else it may hold (an advisory or table lock of its own) is
 * bounded by sched.dispatch_wait_max: a call that waited that long runs without a turn
 * (over the limit), so the gate never stops progress, it only orders it.  A call inside
 * a transaction that already has an xid or made an earlier placement call runs at once
 * without a turn (counted as bypassed).
 *
 * Shared memory (only when preloaded): under one spinlock (held for a handful of
 * assignments or one shift of the queue; no error, no wait, no other lock inside), the
 * number of turns held, and the waiting backends in arrival order with, for each proc,
 * whether a turn was handed to it.  A call that leaves hands its turn to the first
 * waiter (who then holds it without the count changing) and sets its latch, unless more
 * turns are held than the leaver's limit (after waits that ran out): then the count
 * goes down instead.  A waiter that runs out of time, or is cancelled, takes itself off
 * the queue; one that was handed a turn meanwhile holds it (and leaves it as usual, or
 * hands it on if it was cancelled).
 *
 * Turns are given back when the call ends, and also when the (sub)transaction that took
 * one aborts (an error inside the call: its internal subtransactions, deeper than the
 * turn's level, do not count) and when the backend exits.
 */
#include "postgres.h"

#include <unistd.h>

#include "dispatch_gate.h"

#include "access/transam.h"
#include "access/twophase.h"
#include "access/xact.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

int			sched_dispatch_concurrency = -1;
int			sched_dispatch_wait_max_ms = 1000;

typedef struct DispatchGate
{
	slock_t		mutex;
	int			running;		/* turns held */
	int			nwaiting;		/* queue[0 .. nwaiting - 1]: pgprocnos, first come first */
	pg_atomic_uint64 entered;
	pg_atomic_uint64 waited;
	pg_atomic_uint64 timed_out;
	pg_atomic_uint64 bypassed;
	/* int queue[gate_procs()]; bool granted[gate_procs()] follow, by pgprocno */
} DispatchGate;

static DispatchGate *gate = NULL;
static int *gate_queue = NULL;
static bool *gate_granted = NULL;

/* this backend */
static bool holding = false;	/* holds a turn */
static int	holding_level = 0;	/* the transaction nesting level that took it */
static bool queued = false;		/* is on the queue (or was handed a turn there) */
static bool xact_called = false;	/* this transaction made a placement call */
static bool exit_registered = false;
static int	auto_limit = 0;

static int
gate_procs(void)
{
	/* every PGPROC a backend can have (ProcGlobalShmemSize's count) */
	return MaxBackends + NUM_AUXILIARY_PROCS + max_prepared_xacts;
}

Size
sched_dispatch_gate_shmem_size(void)
{
	Size		size = MAXALIGN(sizeof(DispatchGate));

	size = add_size(size, MAXALIGN(mul_size(sizeof(int), gate_procs())));
	size = add_size(size, MAXALIGN(mul_size(sizeof(bool), gate_procs())));
	return size;
}

void
sched_dispatch_gate_shmem_attach(void *ptr, bool found)
{
	int			n = gate_procs();

	gate = ptr;
	gate_queue = (int *) ((char *) ptr + MAXALIGN(sizeof(DispatchGate)));
	gate_granted = (bool *) ((char *) gate_queue + MAXALIGN(mul_size(sizeof(int), n)));
	if (!found)
	{
		SpinLockInit(&gate->mutex);
		gate->running = 0;
		gate->nwaiting = 0;
		pg_atomic_init_u64(&gate->entered, 0);
		pg_atomic_init_u64(&gate->waited, 0);
		pg_atomic_init_u64(&gate->timed_out, 0);
		pg_atomic_init_u64(&gate->bypassed, 0);
		memset(gate_granted, 0, sizeof(bool) * n);
	}
}

int
sched_dispatch_gate_auto_limit(void)
{
	if (auto_limit == 0)
	{
		long		n = sysconf(_SC_NPROCESSORS_ONLN);

		auto_limit = (n >= 1 && n <= 1024) ? (int) n : 1;
	}
	return auto_limit;
}

static int
effective_limit(void)
{
	return sched_dispatch_concurrency < 0 ? sched_dispatch_gate_auto_limit()
		: sched_dispatch_concurrency;
}

/* Gives this backend's turn back: to the first waiter, or to the count.  Spinlock held. */
static void
give_back_locked(int limit, int *wake)
{
	if (gate->nwaiting > 0 && gate->running <= Max(limit, 1))
	{
		int			procno = gate_queue[0];

		gate->nwaiting--;
		memmove(gate_queue, gate_queue + 1, sizeof(int) * gate->nwaiting);
		gate_granted[procno] = true;
		*wake = procno;
	}
	else
		gate->running--;
}

static void
wake(int procno)
{
	if (procno >= 0)
		SetLatch(&ProcGlobal->allProcs[procno].procLatch);
}

/* Takes this backend off the queue, if it is there; true if a turn was handed to it. */
static bool
withdraw_locked(void)
{
	int			me = MyProc->pgprocno;
	int			i;

	if (gate_granted[me])
	{
		gate_granted[me] = false;
		return true;
	}
	for (i = 0; i < gate->nwaiting; i++)
	{
		if (gate_queue[i] == me)
		{
			gate->nwaiting--;
			memmove(gate_queue + i, gate_queue + i + 1, sizeof(int) * (gate->nwaiting - i));
			break;
		}
	}
	return false;
}

/* A wait that ends by an error (a cancel, a timeout of the statement): off the queue, and a
 * turn handed over meanwhile goes to the next waiter. */
static void
abandon_wait(void)
{
	int			procno = -1;

	if (!queued)
		return;
	queued = false;
	SpinLockAcquire(&gate->mutex);
	if (withdraw_locked())
		give_back_locked(effective_limit(), &procno);
	SpinLockRelease(&gate->mutex);
	wake(procno);
}

static void gate_exit(int code, Datum arg);

bool
sched_dispatch_gate_enter(void)
{
	int			limit = effective_limit();
	int			me;
	TimestampTz deadline;
	bool		granted = false;

	if (gate == NULL || limit <= 0 || holding || MyProc == NULL)
		return false;
	if (xact_called || GetTopTransactionIdIfAny() != InvalidTransactionId)
	{
		xact_called = true;
		pg_atomic_fetch_add_u64(&gate->bypassed, 1);
		return false;
	}
	xact_called = true;
	me = MyProc->pgprocno;
	if (!exit_registered)
	{
		/* a FATAL error while waiting leaves without unwinding the wait */
		before_shmem_exit(gate_exit, (Datum) 0);
		exit_registered = true;
	}

	SpinLockAcquire(&gate->mutex);
	if (gate->running < limit)
	{
		gate->running++;
		granted = true;
	}
	else
	{
		gate_granted[me] = false;
		gate_queue[gate->nwaiting++] = me;
		queued = true;
	}
	SpinLockRelease(&gate->mutex);
	if (granted)
	{
		pg_atomic_fetch_add_u64(&gate->entered, 1);
		holding = true;
		holding_level = GetCurrentTransactionNestLevel();
		return true;
	}

	pg_atomic_fetch_add_u64(&gate->waited, 1);
	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), sched_dispatch_wait_max_ms);
	PG_TRY();
	{
		for (;;)
		{
			long		ms;

			SpinLockAcquire(&gate->mutex);
			granted = gate_granted[me];
			if (granted)
				gate_granted[me] = false;
			SpinLockRelease(&gate->mutex);
			if (granted)
			{
				queued = false;
				break;
			}
			ms = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
			if (ms <= 0)
			{
				/* waited long enough: run over the limit, or with the turn handed over
				 * at the last moment */
				SpinLockAcquire(&gate->mutex);
				granted = withdraw_locked();
				if (!granted)
					gate->running++;
				SpinLockRelease(&gate->mutex);
				queued = false;
				if (!granted)
					pg_atomic_fetch_add_u64(&gate->timed_out, 1);
				break;
			}
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, ms,
							 PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
	}
	PG_CATCH();
	{
		abandon_wait();
		PG_RE_THROW();
	}
	PG_END_TRY();
	pg_atomic_fetch_add_u64(&gate->entered, 1);
	holding = true;
	holding_level = GetCurrentTransactionNestLevel();
	return true;
}

void
sched_dispatch_gate_leave(void)
{
	int			procno = -1;

	if (!holding || gate == NULL)
		return;
	holding = false;
	SpinLockAcquire(&gate->mutex);
	give_back_locked(effective_limit(), &procno);
	SpinLockRelease(&gate->mutex);
	wake(procno);
}

static void
gate_xact_end(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			sched_dispatch_gate_leave();
			xact_called = false;
			break;
		default:
			break;
	}
}

static void
gate_subxact_end(SubXactEvent event, SubTransactionId mySubid,
				 SubTransactionId parentSubid, void *arg)
{
	/* the call's own (sub)transaction, or one outside it, aborts: the call is gone */
	if (event == SUBXACT_EVENT_ABORT_SUB && holding &&
		GetCurrentTransactionNestLevel() <= holding_level)
		sched_dispatch_gate_leave();
}

static void
gate_exit(int code, Datum arg)
{
	abandon_wait();
	sched_dispatch_gate_leave();
}

void
sched_dispatch_gate_preload(void)
{
	RegisterXactCallback(gate_xact_end, NULL);
	RegisterSubXactCallback(gate_subxact_end, NULL);
}

bool
sched_dispatch_gate_get_stats(SchedGateStats *out)
{
	memset(out, 0, sizeof(*out));
	if (gate == NULL)
		return false;
	out->limit = Max(effective_limit(), 0);
	SpinLockAcquire(&gate->mutex);
	out->running = gate->running;
	out->waiting = gate->nwaiting;
	SpinLockRelease(&gate->mutex);
	out->entered = (int64) pg_atomic_read_u64(&gate->entered);
	out->waited = (int64) pg_atomic_read_u64(&gate->waited);
	out->timed_out = (int64) pg_atomic_read_u64(&gate->timed_out);
	out->bypassed = (int64) pg_atomic_read_u64(&gate->bypassed);
	return true;
}
