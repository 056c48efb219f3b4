/*
 * fleet_mirror.h — the per-backend fleet mirror and the shared change log that keeps it current (fleet_mirror.c).
 */
#ifndef PG_SCHED_FLEET_MIRROR_H
#define PG_SCHED_FLEET_MIRROR_H

#include "admit_memo.h"
#include "access/htup.h"
#include "utils/relcache.h"

extern int	sched_fleet_change_log_size;
extern bool sched_fleet_mirror;

/* The change log's shared memory (shmem.c allocates it, when preloading). */
extern Size sched_fleet_mirror_shmem_size(void);
extern void sched_fleet_mirror_shmem_attach(void *ptr, bool found);

/* The change log's entry for an UPDATE of a row of sched.node or sched.worker written
 * without a statement (row_write.c): what the table's trigger sched._fleet_changed()
 * appends, called once the new version is written (oldtup->t_self the old version's,
 * newtup->t_self the new one's; the row still locked by this transaction). */
extern void sched_fleet_row_updated(Relation rel, HeapTuple oldtup, HeapTuple newtup);

/* Whether this backend may answer fleet reads from its mirror now. */
extern bool sched_fleet_mirror_usable(void);

/*
 * The fleet of `capability` (nodes with a worker for it) from the mirror, brought up to
 * the active snapshot (fresh: a new snapshot that sees this transaction's writes).  The
 * rows are borrowed (valid until the transaction ends; not to be modified).  Returns
 * false when the mirror cannot answer: read the tables instead.  Inside SPI.
 */
extern bool sched_fleet_mirror_read(const char *capability, bool fresh, SchedFleet *fleet);

/* The fleet of `capability` as sched_fleet_load reads it (flags as there), from the
 * mirror where it can answer (never for SCHED_FLEET_ALL_NODES), else from the tables. */
extern void sched_fleet_read(const char *capability, int flags, const SchedPlacement *keys_of,
							 SchedFleet *fleet);

/*
 * sched_fleet_admit(p, fleet, out), with the mirror's admission memo when fleet is the
 * mirror's fleet of a capability as it is now (as sched_fleet_mirror_read returned it, with
 * no refresh since that changed it): each row is judged in full once per shape, across
 * calls, until the mirror re-reads it (admit_memo.h).  Any other fleet is judged in full.
 */
extern int	sched_fleet_mirror_admit(const SchedFleet *fleet, const SchedPlacement *p,
									 SchedRanked *out);

/*
 * sched_fleet_mirror_admit, but on the mirror's fleet only the rows that may rank first
 * (sched_admit_memos_best): *bound NULL when out holds every admitted row, else every
 * admitted row not in out ranks after *bound.
 */
extern int	sched_fleet_mirror_admit_best(const SchedFleet *fleet, const SchedPlacement *p,
										  SchedRanked *out, const SchedRanked **bound);

/* The mirror's admission memos of `fleet` when it is the mirror's fleet of a capability
 * as it is now (as for sched_fleet_mirror_admit), else NULL. */
extern const SchedAdmitMemos *sched_fleet_mirror_memos(const SchedFleet *fleet);

/* This backend's mirror counters (sched._fleet_mirror_stats, diagnostics.c). */
typedef struct SchedMirrorStats
{
	bool		usable;
	int			capabilities;
	int			rows_held;
	int			pending;
	int64		refreshes;
	int64		full_loads;
	int64		rows_reread;
	int64		bypassed;
	int64		losses;
	int64		rows_patched;	/* counters taken from a row version (patch_counters) */
	int64		admissions_walked;	/* admissions by a memo that read every row */
	int64		admissions_carried; /* by a memo that read only its carried rows */
} SchedMirrorStats;
extern void sched_fleet_mirror_get_stats(SchedMirrorStats *out);

/* Nodes whose mirrored rows of `capability`, brought up to a fresh snapshot, differ from
 * the tables read with that snapshot, plus the rows whose admission memo is wrong
 * (sched_admit_memos_check): 0 is the mirror's invariant. */
extern int	sched_fleet_mirror_differences(const char *capability);

#endif							/* PG_SCHED_FLEET_MIRROR_H */
