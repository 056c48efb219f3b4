/*
 * dispatch_gate.c — at most sched.dispatch_concurrency placement calls (dispatch_next,
 * dispatch_attempt) of the cluster run at once; the others wait for a turn before they
 * read or lock anything.
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
 * Turns are not handed over: a call that leaves frees its turn and wakes the first
 * waiter, and whoever finds a turn free takes it, the woken waiter or a call just
 * arriving (which then goes first; the waiter sleeps on, still first in line).  A waiter
 * that takes a turn wakes the next one if another turn is still free.  (Handing the turn
 * to the first waiter, strictly first come first served, cost 8-20% of single
 * placements at 32 sessions: every call then slept and was woken, and a turn stayed idle
 * until its new holder got a core; side by side in bench/NOTES.md.)
 *
 * Shared memory (only when preloaded): under one spinlock (held for a handful of
 * assignments or one shift of the queue; no error, no wait, no other lock inside), the
 * number of turns held and the waiting backends' pgprocnos in arrival order.  Waiters
 * sleep on their own latches; a waiter that runs out of time, is cancelled or exits
 * takes itself off the queue (and passes a wake-up on if a turn is free).
 *
 * Turns are given back when the call ends, and also when the (sub)transaction that took
 * one aborts (an error inside the call: its internal subtransactions, deeper than the
 * turn's level, do not count) and when the backend exits.
 */
#include "postgres.h"

#include <unistd.h>

#include "dispatch_gate.h"
#include "xact_end.h"

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
	int			running;		/* turns held (more than the limit after waits that ran out) */
	int			nwaiting;		/* queue[0 .. nwaiting - 1]: pgprocnos, in arrival order */
	pg_atomic_uint64 entered;
	pg_atomic_uint64 waited;
	pg_atomic_uint64 timed_out;
	pg_atomic_uint64 bypassed;
	/* int queue[gate_procs()] follows */
} DispatchGate;

static DispatchGate *gate = NULL;
static int *gate_queue = NULL;

/* this backend */
static bool holding = false;	/* holds a turn */
static int	holding_level = 0;	/* the transaction nesting level that took it */
static bool queued = false;		/* is on the queue */
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
	return add_size(MAXALIGN(sizeof(DispatchGate)), mul_size(sizeof(int), gate_procs()));
}

void
sched_dispatch_gate_shmem_attach(void *ptr, bool found)
{
	gate = ptr;
	gate_queue = (int *) ((char *) ptr + MAXALIGN(sizeof(DispatchGate)));
	if (!found)
	{
		SpinLockInit(&gate->mutex);
		gate->running = 0;
		gate->nwaiting = 0;
		pg_atomic_init_u64(&gate->entered, 0);
		pg_atomic_init_u64(&gate->waited, 0);
		pg_atomic_init_u64(&gate->timed_out, 0);
		pg_atomic_init_u64(&gate->bypassed, 0);
	}
}

/* the limit sched.dispatch_concurrency = -1 stands for: the CPUs online */
static int
auto_limit_of_cpus(void)
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
	return sched_dispatch_concurrency < 0 ? auto_limit_of_cpus() : sched_dispatch_concurrency;
}

/* The first waiter, to wake when a turn is free under `limit` (else -1).  Spinlock held. */
static int
next_to_wake_locked(int limit)
{
	return gate->nwaiting > 0 && gate->running < Max(limit, 1) ? gate_queue[0] : -1;
}

static void
wake(int procno)
{
	if (procno >= 0)
		SetLatch(&ProcGlobal->allProcs[procno].procLatch);
}

/* Takes this backend off the queue.  Spinlock held. */
static void
withdraw_locked(void)
{
	int			me = MyProc->pgprocno;
	int			i;

	for (i = 0; i < gate->nwaiting; i++)
	{
		if (gate_queue[i] == me)
		{
			gate->nwaiting--;
			memmove(gate_queue + i, gate_queue + i + 1, sizeof(int) * (gate->nwaiting - i));
			break;
		}
	}
}

/* A wait that ends by an error (a cancel, a timeout of the statement, the backend's exit):
 * off the queue; a wake-up it may have had goes to the next waiter. */
static void
abandon_wait(void)
{
	int			procno;

	if (!queued)
		return;
	queued = false;
	SpinLockAcquire(&gate->mutex);
	withdraw_locked();
	procno = next_to_wake_locked(effective_limit());
	SpinLockRelease(&gate->mutex);
	wake(procno);
}

/*
 * Waits on the queue (this backend is on it) until a turn is free, and takes it; or, at
 * sched.dispatch_wait_max, takes one over the limit.  An error (a cancel) takes this
 * backend off the queue.
 */
static void
wait_for_turn(int limit)
{
	TimestampTz deadline;

	pg_atomic_fetch_add_u64(&gate->waited, 1);
	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), sched_dispatch_wait_max_ms);
	PG_TRY();
	{
		for (;;)
		{
			long		ms = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
			int			next = -1;
			bool		over = ms <= 0;
			bool		taken = false;

			/* a free turn, or the wait is over: take one (over the limit, then), and
			 * wake the next waiter if a turn is still free */
			SpinLockAcquire(&gate->mutex);
			if (gate->running < limit || over)
			{
				withdraw_locked();
				taken = gate->running < limit;
				gate->running++;
				next = next_to_wake_locked(limit);
			}
			SpinLockRelease(&gate->mutex);
			if (taken || over)
			{
				queued = false;
				wake(next);
				if (!taken)
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
}

static void gate_exit(int code, Datum arg);

bool
sched_dispatch_gate_enter(void)
{
	int			limit = effective_limit();
	bool		taken = false;

	if (gate == NULL || limit <= 0 || holding || MyProc == NULL)
		return false;
	if (xact_called || GetTopTransactionIdIfAny() != InvalidTransactionId)
	{
		xact_called = true;
		pg_atomic_fetch_add_u64(&gate->bypassed, 1);
		return false;
	}
	xact_called = true;
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
		taken = true;
	}
	else
	{
		gate_queue[gate->nwaiting++] = MyProc->pgprocno;
		queued = true;
	}
	SpinLockRelease(&gate->mutex);

	if (!taken)
		wait_for_turn(limit);
	pg_atomic_fetch_add_u64(&gate->entered, 1);
	holding = true;
	holding_level = GetCurrentTransactionNestLevel();
	return true;
}

void
sched_dispatch_gate_leave(void)
{
	int			procno;

	if (!holding || gate == NULL)
		return;
	holding = false;
	SpinLockAcquire(&gate->mutex);
	gate->running--;
	procno = next_to_wake_locked(effective_limit());
	SpinLockRelease(&gate->mutex);
	wake(procno);
}

static void
gate_xact_end(XactEvent event, void *arg)
{
	if (!sched_xact_event_ends(event))
		return;
	sched_dispatch_gate_leave();
	xact_called = false;
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
