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
 * step lock).  Anything else it may hold (an advisory or table lock of its own) could
 * stop the calls that hold the turns: a waiter that sees no call give back a turn for
 * sched.dispatch_wait_max runs without one (over the limit), so the gate never stops
 * progress, it only orders it.  (Counted from the last turn given back, not from the
 * start of the wait: with 32 sessions of 100 placements a call, a waiter's turn came
 * after about a second of others' calls, and waits bounded from their start ran over the
 * limit together, each holding up the others.)  A call inside a transaction that
 * already has an xid or made an earlier placement call runs at once without a turn
 * (counted as bypassed).
 *
 * A wait without a snapshot: a call runs under its statement's snapshot, whose xmin would
 * hold back the removal of dead row versions for as long as it waits: with 32 sessions
 * of dispatch_next(100), the waiters held the horizon about a second back, so that the
 * node and worker rows' counter updates found their pages full of versions no one could
 * see but none could remove (29% of them not HOT, against 11% with 2 sessions), and the
 * queue's fetch walked the placed requests' entries.  When nothing will read with the
 * snapshot again (snapshot_release.c: a call made directly by its statement, READ
 * COMMITTED, no table read by the statement, no cursor), a waiter lets go of it while
 * it sleeps, and once it has its turn, the call reads with a snapshot taken then (pushed
 * for the call, popped when it leaves).
 *
 * Turns are not handed over while the first waiter has waited less than
 * sched.dispatch_handoff_after: a call that leaves frees its turn and wakes the first
 * waiter, and whoever finds a turn free takes it, the woken waiter or a call just
 * arriving (which then goes first; the waiter sleeps on, still first in line).  A waiter
 * that takes a turn wakes the next one if another turn is still free.  (Handing the turn
 * to the first waiter, strictly first come first served, cost 8-20% of single
 * placements at 32 sessions: every call then slept and was woken, and a turn stayed idle
 * until its new holder got a core; side by side in bench/NOTES.md.)  Once the first
 * waiter has waited that long, the gate hands turns over: a turn given back goes to the
 * first waiter before it wakes (taken off the queue, counted as held), and an arriving
 * call queues behind; until a waiter handed a turn had waited less, or none is left.  So
 * a call that arrives just as turns are freed cannot keep a waiter from its turn for
 * ever.
 *
 * Shared memory (only when preloaded): under one spinlock (held for a handful of
 * assignments or one shift of the queue; no error, no wait, no other lock inside), the
 * number of turns held, whether turns are handed over, when a turn was last given back,
 * the waiting backends' pgprocnos in arrival order, the turns held by the CPU each was
 * taken on, and for each waiter when it queued, whether a turn was handed to it, and the
 * CPU its last waker freed.  Waiters sleep on their own latches; a waiter that runs out
 * of time, is cancelled or exits takes itself off the queue, or gives back a turn handed
 * to it (and passes a wake-up on if a turn is free).
 *
 * Turns are given back when the call ends, and also when the (sub)transaction that took
 * one aborts (an error inside the call: its internal subtransactions, deeper than the
 * turn's level, do not count) and when the backend exits.
 *
 * Where a woken waiter runs (Linux, sched.dispatch_move_to_free_cpu): the kernel places
 * a woken process on a CPU of its choosing, often one where another turn holder runs,
 * which it then pushes off that CPU; the call that freed the turn goes on to its commit
 * and sleeps in the WAL flush, and its CPU stays idle while the pushed-off holder waits
 * on the other (the kernel does not move a process that ran a moment ago).  Measured on 2
 * CPUs with 8 sessions calling dispatch_next(100): a tenth of the CPU time idle in that
 * state (bench/NOTES.md).  So a call that leaves records the CPU it freed for the waiter
 * it wakes, and the waiter, once it has the turn, moves itself to that CPU when it woke on
 * a CPU where another turn was taken and none was taken on the freed one: it pins itself
 * to the freed CPU (the kernel moves it there before the call returns) and gives itself
 * back the CPUs it was allowed before at once, so nothing stays pinned.  The CPUs of turns
 * are those their holders took them on (a holder the kernel moves since is not followed):
 * a hint for placement, never for correctness.
 */
#include "postgres.h"

#include <unistd.h>
#ifdef __linux__
#include <sched.h>
#endif

#include "dispatch_gate.h"
#include "snapshot_release.h"
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
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

int			sched_dispatch_concurrency = -1;
int			sched_dispatch_wait_max_ms = 1000;
int			sched_dispatch_handoff_after_ms = 100;
bool		sched_dispatch_move_to_free_cpu = true;

/* CPUs the gate counts turns on (numbers at or above it are not counted) */
#define GATE_CPUS 1024

typedef struct DispatchGate
{
	slock_t		mutex;
	int			running;		/* turns held (more than the limit after waits that ran out) */
	int			nwaiting;		/* queue[0 .. nwaiting - 1]: pgprocnos, in arrival order */
	bool		handoff;		/* free turns go to the first waiter, not to arrivals */
	TimestampTz last_freed;		/* when a call last gave back its turn */
	pg_atomic_uint64 entered;
	pg_atomic_uint64 waited;
	pg_atomic_uint64 timed_out;
	pg_atomic_uint64 bypassed;
	pg_atomic_uint64 moved;		/* waiters that moved to the CPU of their turn */
	pg_atomic_uint64 handed;	/* turns handed to a waiter */
	int			turns_on_cpu[GATE_CPUS];	/* turns held, by the CPU taken on */
	/* then, each of gate_procs() entries: TimestampTz queued_at[], int queue[], int
	 * freed_cpu[], bool granted[] */
} DispatchGate;

static DispatchGate *gate = NULL;
static int *gate_queue = NULL;
static int *gate_freed_cpu = NULL;	/* by pgprocno: the CPU the turn was freed on by the
									 * call that last woke that waiter (-1: none) */
static TimestampTz *gate_queued_at = NULL;	/* by pgprocno: when that waiter queued */
static bool *gate_granted = NULL;	/* by pgprocno: a turn was handed to that waiter (it
									 * is off the queue, and counted in `running`) */

/* this backend */
static bool holding = false;	/* holds a turn */
static int	holding_level = 0;	/* the transaction nesting level that took it */
static bool queued = false;		/* is on the queue */
static bool xact_called = false;	/* this transaction made a placement call */
static bool exit_registered = false;
static int	auto_limit = 0;
static int	turn_cpu = -1;		/* the CPU this backend's turn is counted on (-1: none) */
static Snapshot turn_snapshot = NULL;	/* pushed for the call after a wait without a
										 * snapshot (popped when the call leaves) */

static int
gate_procs(void)
{
	/* every PGPROC a backend can have (ProcGlobalShmemSize's count) */
	return MaxBackends + NUM_AUXILIARY_PROCS + max_prepared_xacts;
}

Size
sched_dispatch_gate_shmem_size(void)
{
	Size		per_proc = 2 * sizeof(int) + sizeof(TimestampTz) + sizeof(bool);

	return add_size(MAXALIGN(sizeof(DispatchGate)), mul_size(per_proc, gate_procs()));
}

void
sched_dispatch_gate_shmem_attach(void *ptr, bool found)
{
	gate = ptr;
	gate_queued_at = (TimestampTz *) ((char *) ptr + MAXALIGN(sizeof(DispatchGate)));
	gate_queue = (int *) (gate_queued_at + gate_procs());
	gate_freed_cpu = gate_queue + gate_procs();
	gate_granted = (bool *) (gate_freed_cpu + gate_procs());
	if (!found)
	{
		int			i;

		SpinLockInit(&gate->mutex);
		gate->running = 0;
		gate->nwaiting = 0;
		gate->handoff = false;
		gate->last_freed = 0;
		pg_atomic_init_u64(&gate->entered, 0);
		pg_atomic_init_u64(&gate->waited, 0);
		pg_atomic_init_u64(&gate->timed_out, 0);
		pg_atomic_init_u64(&gate->bypassed, 0);
		pg_atomic_init_u64(&gate->moved, 0);
		pg_atomic_init_u64(&gate->handed, 0);
		memset(gate->turns_on_cpu, 0, sizeof(gate->turns_on_cpu));
		for (i = 0; i < gate_procs(); i++)
		{
			gate_freed_cpu[i] = -1;
			gate_queued_at[i] = 0;
			gate_granted[i] = false;
		}
	}
}

/* The CPU this backend runs on now, or -1 (unknown, or not counted). */
static int
current_cpu(void)
{
#ifdef __linux__
	int			cpu = sched_getcpu();

	return cpu >= 0 && cpu < GATE_CPUS ? cpu : -1;
#else
	return -1;
#endif
}

/* Counts this backend's turn on `cpu`.  Spinlock held. */
static void
count_turn_locked(int cpu)
{
	turn_cpu = cpu;
	if (cpu >= 0)
		gate->turns_on_cpu[cpu]++;
}

/* Takes this backend's turn off its CPU's count.  Spinlock held. */
static void
uncount_turn_locked(void)
{
	if (turn_cpu >= 0 && gate->turns_on_cpu[turn_cpu] > 0)
		gate->turns_on_cpu[turn_cpu]--;
	turn_cpu = -1;
}

/*
 * The CPU a waiter that took a turn, running on `cur`, should run its call on: the CPU
 * its turn was freed on when another turn was taken on `cur` and none on that one; else
 * `cur`.  Spinlock held.
 */
static int
cpu_for_turn_locked(int cur)
{
	int			freed = gate_freed_cpu[MyProc->pgprocno];

	if (!sched_dispatch_move_to_free_cpu || cur < 0 || freed < 0 || freed == cur)
		return cur;
	if (gate->turns_on_cpu[cur] > 0 && gate->turns_on_cpu[freed] == 0)
		return freed;
	return cur;
}

/*
 * Moves this backend to `cpu`, and gives it back the CPUs it was allowed before.  False
 * when it may not run there (or cannot move).  Linux only.
 */
static bool
move_to_cpu(int cpu)
{
#ifdef __linux__
	cpu_set_t	allowed;
	cpu_set_t	one;

	if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0 || !CPU_ISSET(cpu, &allowed))
		return false;
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	if (sched_setaffinity(0, sizeof(one), &one) != 0)
		return false;
	/* the kernel moved this process before the call returned; unpin it */
	if (sched_setaffinity(0, sizeof(allowed), &allowed) != 0)
	{
		/* (its cpuset changed meanwhile) every CPU the kernel allows it */
		cpu_set_t	any;
		int			i;

		CPU_ZERO(&any);
		for (i = 0; i < CPU_SETSIZE; i++)
			CPU_SET(i, &any);
		if (sched_setaffinity(0, sizeof(any), &any) != 0)
			ereport(WARNING,
					(errmsg("pg_sched: could not give this backend back its CPUs after moving it to CPU %d: %m",
							cpu)));
	}
	return true;
#else
	return false;
#endif
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

/* Whether the first waiter (there is one) has waited sched.dispatch_handoff_after by
 * `now`.  Spinlock held. */
static bool
head_starves_locked(TimestampTz now)
{
	return sched_dispatch_handoff_after_ms >= 0 &&
		now - gate_queued_at[gate_queue[0]] >= (int64) sched_dispatch_handoff_after_ms * 1000;
}

/* Whether a free turn is owed to the first waiter (there is a waiter, and turns are
 * handed over or it has waited sched.dispatch_handoff_after), not to whoever takes it
 * first.  Spinlock held. */
static bool
turn_owed_to_first_locked(TimestampTz now)
{
	return gate->nwaiting > 0 && (gate->handoff || head_starves_locked(now));
}

/*
 * A turn may be free under `limit`: the first waiter, to wake for it (else -1).  In
 * handoff mode (entered when the first waiter has waited sched.dispatch_handoff_after)
 * the turn is that waiter's before it wakes: it is taken off the queue and counted in
 * `running`, so that no arriving call can take it first; the mode ends when the waiter
 * handed a turn had waited less, or none is left.  `cpu`: where the turn was freed (-1:
 * not known), for the waiter to move to.  Spinlock held.
 */
static int
next_turn_locked(int limit, TimestampTz now, int cpu)
{
	int			head;
	bool		starves;

	if (gate->nwaiting == 0)
	{
		gate->handoff = false;
		return -1;
	}
	if (gate->running >= Max(limit, 1))
		return -1;
	head = gate_queue[0];
	starves = head_starves_locked(now);
	if (gate->handoff || starves)
	{
		gate->handoff = starves && gate->nwaiting > 1;
		gate->nwaiting--;
		memmove(gate_queue, gate_queue + 1, sizeof(int) * gate->nwaiting);
		gate->running++;
		gate_granted[head] = true;
		pg_atomic_fetch_add_u64(&gate->handed, 1);
	}
	gate_freed_cpu[head] = cpu;
	return head;
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
	TimestampTz now;

	if (!queued)
		return;
	queued = false;
	now = GetCurrentTimestamp();
	SpinLockAcquire(&gate->mutex);
	if (gate_granted[MyProc->pgprocno])
	{
		/* a turn handed over while this backend left: give it back */
		gate_granted[MyProc->pgprocno] = false;
		gate->running--;
	}
	else
		withdraw_locked();
	procno = next_turn_locked(effective_limit(), now, -1);
	SpinLockRelease(&gate->mutex);
	wake(procno);
}

/*
 * One look at the gate by a waiter (on the queue, or handed a turn): takes a turn handed
 * over, or a free one this waiter may take (it is first, or the first is not owed it),
 * or, when the wait is over (no call gave back a turn for sched.dispatch_wait_max since
 * this waiter queued), one over the limit; passes on a turn still free (a free turn the
 * first waiter is owed goes to it).  Returns whether it took one; else sets *ms to the
 * time left until the wait is over.  Sets *cur to the CPU it runs on and *target to the
 * CPU its turn is counted on.  (Not inlined: wait_for_turn's PG_TRY would have its
 * locals clobbered.)
 */
static pg_noinline bool
look_for_turn(int limit, TimestampTz now, long *ms, int *cur, int *target)
{
	int			me = MyProc->pgprocno;
	int			next;
	bool		taken = false;
	bool		over;

	*cur = current_cpu();
	SpinLockAcquire(&gate->mutex);
	*ms = TimestampDifferenceMilliseconds(now,
										  TimestampTzPlusMilliseconds(Max(gate_queued_at[me],
																		  gate->last_freed),
																	  sched_dispatch_wait_max_ms));
	over = *ms <= 0;
	if (gate_granted[me])
	{
		gate_granted[me] = false;
		taken = true;
	}
	else if (gate->running < limit &&
			 (gate_queue[0] == me || !turn_owed_to_first_locked(now)))
	{
		withdraw_locked();
		gate->running++;
		taken = true;
	}
	else if (over)
	{
		withdraw_locked();
		gate->running++;
	}
	if (taken || over)
	{
		*target = taken ? cpu_for_turn_locked(*cur) : *cur;
		count_turn_locked(*target);
		gate_freed_cpu[me] = -1;
	}
	next = next_turn_locked(limit, now, -1);
	SpinLockRelease(&gate->mutex);
	wake(next);
	if (taken || over)
	{
		queued = false;
		if (!taken)
			pg_atomic_fetch_add_u64(&gate->timed_out, 1);
	}
	return taken || over;
}

/*
 * Waits on the queue (this backend is on it) until a turn is free or handed to it, and
 * takes it; or, when no call gave back a turn for sched.dispatch_wait_max, takes one over
 * the limit.  An error (a cancel) takes this backend off the queue (and gives back a turn
 * handed to it).
 */
static void
wait_for_turn(int limit, bool let_go)
{
	int			cur = -1;
	int			target = -1;

	pg_atomic_fetch_add_u64(&gate->waited, 1);
	PG_TRY();
	{
		for (;;)
		{
			long		ms;

			if (look_for_turn(limit, GetCurrentTimestamp(), &ms, &cur, &target))
				break;
			if (let_go)
				sched_snapshot_let_go();
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

	if (target != cur)
	{
		if (move_to_cpu(target))
			pg_atomic_fetch_add_u64(&gate->moved, 1);
		else
		{
			/* it stays where it is: count it there */
			SpinLockAcquire(&gate->mutex);
			uncount_turn_locked();
			count_turn_locked(cur);
			SpinLockRelease(&gate->mutex);
		}
	}
}

static void gate_exit(int code, Datum arg);

bool
sched_dispatch_gate_enter(void)
{
	int			limit = effective_limit();
	bool		taken = false;
	int			next = -1;
	int			cpu;
	TimestampTz now;

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

	cpu = current_cpu();
	now = GetCurrentTimestamp();
	SpinLockAcquire(&gate->mutex);
	if (gate->running < limit && !turn_owed_to_first_locked(now))
	{
		gate->running++;
		count_turn_locked(cpu);
		taken = true;
	}
	else
	{
		gate_queue[gate->nwaiting++] = MyProc->pgprocno;
		gate_freed_cpu[MyProc->pgprocno] = -1;
		gate_queued_at[MyProc->pgprocno] = now;
		gate_granted[MyProc->pgprocno] = false;
		queued = true;
		/* a free turn the first waiter is owed */
		next = next_turn_locked(limit, now, -1);
	}
	SpinLockRelease(&gate->mutex);

	if (!taken)
	{
		/* a wait without a snapshot, when nothing reads with the statement's again */
		bool		let_go = sched_snapshot_why_held("dispatch", NULL) == NULL;

		wake(next);
		wait_for_turn(limit, let_go);
		if (let_go)
		{
			/* what the call reads, it reads with a snapshot taken now */
			PushActiveSnapshot(GetTransactionSnapshot());
			turn_snapshot = GetActiveSnapshot();
		}
	}
	pg_atomic_fetch_add_u64(&gate->entered, 1);
	holding = true;
	holding_level = GetCurrentTransactionNestLevel();
	return true;
}

/* Gives back this backend's turn (if it holds one), waking the waiter it goes to. */
static void
give_back_turn(void)
{
	int			procno;
	int			cpu;
	TimestampTz now;

	if (!holding || gate == NULL)
		return;
	holding = false;
	cpu = current_cpu();
	now = GetCurrentTimestamp();
	SpinLockAcquire(&gate->mutex);
	gate->running--;
	gate->last_freed = now;
	uncount_turn_locked();
	/* the waiter may move to this CPU (cpu_for_turn_locked) */
	procno = next_turn_locked(effective_limit(), now, cpu);
	SpinLockRelease(&gate->mutex);
	wake(procno);
}

void
sched_dispatch_gate_leave(void)
{
	if (turn_snapshot != NULL)
	{
		if (ActiveSnapshotSet() && GetActiveSnapshot() == turn_snapshot)
			PopActiveSnapshot();
		turn_snapshot = NULL;
	}
	give_back_turn();
}

static void
gate_xact_end(XactEvent event, void *arg)
{
	if (!sched_xact_event_ends(event))
		return;
	turn_snapshot = NULL;		/* (the transaction's end pops what is pushed) */
	give_back_turn();
	xact_called = false;
}

static void
gate_subxact_end(SubXactEvent event, SubTransactionId mySubid,
				 SubTransactionId parentSubid, void *arg)
{
	/* the call's own (sub)transaction, or one outside it, aborts: the call is gone */
	if (event == SUBXACT_EVENT_ABORT_SUB && holding &&
		GetCurrentTransactionNestLevel() <= holding_level)
	{
		turn_snapshot = NULL;	/* (the abort pops what the call pushed) */
		give_back_turn();
	}
}

static void
gate_exit(int code, Datum arg)
{
	abandon_wait();
	give_back_turn();
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
	out->moved = (int64) pg_atomic_read_u64(&gate->moved);
	out->handed = (int64) pg_atomic_read_u64(&gate->handed);
	return true;
}
