/*
 * shmem.c — everything pg_sched keeps in shared memory, allocated by one pair of hooks,
 * only when pg_sched is in shared_preload_libraries (without it every part stays
 * unattached and its module works without it: see each module).
 *
 * The parts, and their lock rules:
 *   - the fleet change log (fleet_mirror.c): writers append under the log's spinlock
 *     (held for the copy of one entry, nothing else); readers take no lock and detect an
 *     entry overwritten under them by its sequence number (seqlock);
 *   - reservations in flight (inflight.c): one slot per backend, written only by its own
 *     backend, each under its own spinlock, held for a copy of the slot;
 *   - limit claims (limit_claims.c): one slot per backend, written only by its own
 *     backend, each under its own spinlock, held for the look-up of one entry; read
 *     under the scope's LWLock of the module;
 *   - dispatch counters (counters.c): atomics, no lock;
 *   - wake-ups of waiting worker sessions (wakeup.c): one slot per backend, written only
 *     by its backend, each under its own spinlock, held for a copy of the slot;
 *   - requests held from the queue (queue_held.c): one slot per backend, written only by
 *     its backend, each under its own spinlock, held for one append, one truncation or
 *     a copy of the slot;
 *   - where each tenant's queue begins (queue_bound.c): slots chosen by a hash of the
 *     tenant, each under its own spinlock, held for a compare and a copy;
 *   - the dispatch gate (dispatch_gate.c): one spinlock, held for a few assignments or
 *     one shift of its queue of waiters (never while waiting: they sleep on their latches).
 * No code holds two of these locks at once, waits or raises an error while holding one,
 * or holds one across a call into another module.  AddinShmemInitLock is held only here,
 * while the parts are created or attached at startup.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"

#include "counters.h"
#include "dispatch_gate.h"
#include "fleet_mirror.h"
#include "inflight.h"
#include "limit_claims.h"
#include "queue_bound.h"
#include "queue_held.h"
#include "shmem.h"
#include "wakeup.h"

typedef struct SchedShmemPart
{
	const char *name;
	Size		(*size) (void);
	void		(*attach) (void *ptr, bool found);
} SchedShmemPart;

static const SchedShmemPart parts[] = {
	{"pg_sched fleet change log", sched_fleet_mirror_shmem_size, sched_fleet_mirror_shmem_attach},
	{"pg_sched reservations in flight", sched_inflight_shmem_size, sched_inflight_shmem_attach},
	{"pg_sched limit claims", sched_limit_claims_shmem_size, sched_limit_claims_shmem_attach},
	{"pg_sched dispatch counters", sched_counters_shmem_size, sched_counters_shmem_attach},
	{"pg_sched worker wake-ups", sched_wakeup_shmem_size, sched_wakeup_shmem_attach},
	{"pg_sched requests held", sched_queue_held_shmem_size, sched_queue_held_shmem_attach},
	{"pg_sched queue bounds", sched_queue_bound_shmem_size, sched_queue_bound_shmem_attach},
	{"pg_sched dispatch gate", sched_dispatch_gate_shmem_size, sched_dispatch_gate_shmem_attach},
};

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static void
shmem_request(void)
{
	int			i;

	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	for (i = 0; i < lengthof(parts); i++)
		RequestAddinShmemSpace(parts[i].size());
}

static void
shmem_startup(void)
{
	int			i;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	for (i = 0; i < lengthof(parts); i++)
	{
		bool		found;
		void	   *ptr = ShmemInitStruct(parts[i].name, parts[i].size(), &found);

		parts[i].attach(ptr, found);
	}
	LWLockRelease(AddinShmemInitLock);
}

void
sched_shmem_preload(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = shmem_startup;
	sched_inflight_preload();
	sched_limit_claims_preload();
	sched_wakeup_preload();
	sched_queue_held_preload();
	sched_dispatch_gate_preload();
}
