/*
 * settings.c — the sched.* settings (module.c defines them at load).
 *
 * The settings that bound what a caller gets (heartbeat and lease TTLs, backoffs,
 * starvation and aging, preemption, the dispatch gate's limit and wait) are PGC_SUSET:
 * a session cannot raise them for itself; a superuser sets them in postgresql.conf, per database or role with ALTER ... SET, or
 * lets a role set them with GRANT SET ON PARAMETER.  The switches that change only how
 * the caller's own work is done (sched.notify_workers, sched.fleet_mirror) stay
 * PGC_USERSET.  Durations are in seconds (GUC_UNIT_S: '2min' and '90s' are accepted).
 */
#include "postgres.h"

#include <limits.h>

#include "settings.h"
#include "fleet_mirror.h"
#include "dispatch_gate.h"

#include "miscadmin.h"
#include "utils/guc.h"

int			sched_heartbeat_ttl_s = 60;
int			sched_lease_ttl_s = 300;
int			sched_unschedulable_backoff_max_s = 60;
int			sched_starvation_after_s = 600;
int			sched_aging_interval_s = 60;
int			sched_maintenance_interval_s = 5;
int			sched_retry_backoff_max_s = 60;
char	   *sched_databases = NULL;
bool		sched_notify_workers = false;
bool		sched_preemption = false;
int			sched_preemption_hold_s = 30;
bool		sched_fleet_mirror_carry = true;
bool		sched_direct_writes = true;

/* Defines every sched.* setting (module.c, at load). */
void
sched_define_settings(void)
{
	DefineCustomIntVariable("sched.heartbeat_ttl",
							"A worker whose last heartbeat is older than this is not admitted (heartbeat_expired).",
							"Used when a placement call passes heartbeat_ttl => NULL, and by dispatch.",
							&sched_heartbeat_ttl_s, 60, 1, INT_MAX,
							PGC_SUSET, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("sched.lease_ttl",
							"Lease of a dispatched attempt: the worker must start or renew it within this time.",
							NULL,
							&sched_lease_ttl_s, 300, 1, INT_MAX,
							PGC_SUSET, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("sched.unschedulable_backoff_max",
							"Longest backoff of an unschedulable request (1 s, doubling at every try).",
							NULL,
							&sched_unschedulable_backoff_max_s, 60, 1, INT_MAX,
							PGC_SUSET, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("sched.starvation_after",
							"A ready request waiting longer than this goes before every other.",
							NULL,
							&sched_starvation_after_s, 600, 1, INT_MAX,
							PGC_SUSET, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("sched.aging_interval",
							"A waiting request gains one priority level per interval waited.",
							NULL,
							&sched_aging_interval_s, 60, 1, INT_MAX,
							PGC_SUSET, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("sched.maintenance_interval",
							"How often the background worker reaps expired leases and claims.",
							NULL,
							&sched_maintenance_interval_s, 5, 1, 86400,
							PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("sched.retry_backoff_max",
							"Longest backoff before the retry of a failed or lost attempt (1 s, doubling per attempt).",
							NULL,
							&sched_retry_backoff_max_s, 60, 1, INT_MAX,
							PGC_SUSET, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomBoolVariable("sched.preemption",
							 "Whether a request that waits for capacity may preempt preemptible attempts of lower priority.",
							 "Off unless asked for: set it per database (ALTER DATABASE ... SET sched.preemption = on).",
							 &sched_preemption, false,
							 PGC_SUSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("sched.preemption_hold",
							"How long the capacity a preemption freed is held for the preemptor, if it is not dispatched before.",
							NULL,
							&sched_preemption_hold_s, 30, 1, 86400,
							PGC_SUSET, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomBoolVariable("sched.notify_workers",
							 "Whether a command for a worker also sends NOTIFY sched_worker_<worker_id>, for workers that LISTEN.",
							 "NOTIFY serializes the commits of all notifying transactions of the cluster, and LISTEN does not "
							 "work through a transaction-pooling pooler; sched.wait_commands needs neither.",
							 &sched_notify_workers, false,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomStringVariable("sched.databases",
							   "Databases in which a background worker reaps expired leases and claims (comma-separated).",
							   "Needs pg_sched in shared_preload_libraries; a change takes effect at the reload.",
							   &sched_databases, "",
							   PGC_SIGHUP, GUC_LIST_INPUT, NULL, NULL, NULL);
	DefineCustomBoolVariable("sched.fleet_mirror",
							 "Whether placement reads the fleet from this backend's mirror, re-reading only nodes that changed.",
							 "Needs pg_sched in shared_preload_libraries; off reads every worker of the capability at every call.",
							 &sched_fleet_mirror, true,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("sched.fleet_mirror_carry",
							 "Whether a placement chooses among the best rows kept from the last pass over the fleet when one of them ranks first for certain.",
							 "Off: every placement ranks every row of the fleet (the same choice, for comparisons).",
							 &sched_fleet_mirror_carry, true,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("sched.direct_writes",
							 "Whether a placement writes its rows without statements (the same rows, the same checks) while its tables are as pg_sched made them.",
							 "Off: every placement writes with its statements (for comparisons).  A table with a trigger, rule, check or column "
							 "pg_sched did not make is always written with a statement, which fires what was added.",
							 &sched_direct_writes, true,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("sched.dispatch_concurrency",
							"Placement calls (dispatch_next, dispatch_attempt) of the cluster that run at once; the others wait their turn.",
							"-1: as many as the server's CPUs; 0: no limit.  A call waits only while its transaction holds no row "
							"or step lock, and at most sched.dispatch_wait_max.  Needs pg_sched in shared_preload_libraries.",
							&sched_dispatch_concurrency, -1, -1, 10000,
							PGC_SUSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("sched.dispatch_wait_max",
							"Longest time a placement call waits for its turn while no call gives one back; after it the call runs over sched.dispatch_concurrency.",
							NULL,
							&sched_dispatch_wait_max_ms, 1000, 0, 3600 * 1000,
							PGC_SUSET, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("sched.dispatch_handoff_after",
							"Wait of the first placement call in line after which freed turns are handed to the waiting calls in order.",
							"Until then a call that arrives while a turn is free takes it first; -1: never hand over.",
							&sched_dispatch_handoff_after_ms, 100, -1, 3600 * 1000,
							PGC_SUSET, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomBoolVariable("sched.dispatch_move_to_free_cpu",
							 "Whether a placement call that waited for its turn moves to the CPU the turn was freed on.",
							 "When it woke on a CPU where another call holds a turn and none is held on the freed one "
							 "(Linux; elsewhere nothing moves).  Off: it runs where the kernel woke it.",
							 &sched_dispatch_move_to_free_cpu, true,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	/* PGC_POSTMASTER settings can only be defined while preloading (else FATAL) */
	if (process_shared_preload_libraries_in_progress)
		DefineCustomIntVariable("sched.fleet_change_log_size",
								"Entries of the shared log of changed nodes that keeps fleet mirrors current.",
								"A backend that falls further behind reloads its mirror.",
								&sched_fleet_change_log_size, 16384, 16, 1 << 22,
								PGC_POSTMASTER, 0, NULL, NULL, NULL);
	MarkGUCPrefixReserved("sched");
}
