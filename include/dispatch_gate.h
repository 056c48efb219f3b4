/*
 * dispatch_gate.h — at most sched.dispatch_concurrency placement calls of the cluster
 * run at once; the others wait their turn before they lock anything (dispatch_gate.c).
 */
#ifndef PG_SCHED_DISPATCH_GATE_H
#define PG_SCHED_DISPATCH_GATE_H

#include "postgres.h"

extern int	sched_dispatch_concurrency;
extern int	sched_dispatch_wait_max_ms;
extern int	sched_dispatch_handoff_after_ms;
extern bool sched_dispatch_move_to_free_cpu;

/* The gate's shared memory (shmem.c allocates it, when preloading). */
extern Size sched_dispatch_gate_shmem_size(void);
extern void sched_dispatch_gate_shmem_attach(void *ptr, bool found);
extern void sched_dispatch_gate_preload(void);

/*
 * Called by a placement call (dispatch_next, dispatch_attempt) before it reads or locks
 * anything: takes a turn, waiting for one when the limit is reached, unless this
 * transaction may hold what a running call waits for (see dispatch_gate.c).  Returns
 * whether the caller took a turn: then it must call sched_dispatch_gate_leave() when it
 * is done (an error that aborts the (sub)transaction gives the turn back by itself).
 */
extern bool sched_dispatch_gate_enter(void);
extern void sched_dispatch_gate_leave(void);

/* The gate now, and cluster-wide since the server started: calls that took a turn, those
 * of them that waited, those that waited sched.dispatch_wait_max in vain (sched._dispatch_gate).
 * False (and nothing set) without the shared memory. */
typedef struct SchedGateStats
{
	int			limit;			/* the limit in force for this session (0: none) */
	int			running;
	int			waiting;
	int64		entered;
	int64		waited;
	int64		timed_out;
	int64		bypassed;		/* calls let through without a turn (an xid, an earlier
								 * call of the transaction) */
	int64		moved;			/* waiters that moved to the CPU their turn was freed on */
	int64		handed;			/* turns handed to a waiter that had waited
								 * sched.dispatch_handoff_after */
} SchedGateStats;
extern bool sched_dispatch_gate_get_stats(SchedGateStats *out);

#endif							/* PG_SCHED_DISPATCH_GATE_H */
