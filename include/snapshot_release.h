/*
 * snapshot_release.h — letting go of the statement's snapshot while a call waits
 * (snapshot_release.c).
 */
#ifndef PG_SCHED_SNAPSHOT_RELEASE_H
#define PG_SCHED_SNAPSHOT_RELEASE_H

/* NULL when nothing will read again with a snapshot this backend holds now, so that the
 * calling function (sched.<function>) may let go of them while it waits; else why not
 * (and *hint, when hint is not NULL: what the caller can do).  Call before the call
 * reads anything. */
extern const char *sched_snapshot_why_held(const char *function, const char **hint);

/* Clears this backend's xmin (and its catalog snapshot): only after
 * sched_snapshot_why_held() answered NULL; whatever is read afterwards must be read
 * with a new snapshot. */
extern void sched_snapshot_let_go(void);

#endif							/* PG_SCHED_SNAPSHOT_RELEASE_H */
