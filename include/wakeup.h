/*
 * wakeup.h — waking a worker's session when a command for it commits (wakeup.c).
 */
#ifndef PG_SCHED_WAKEUP_H
#define PG_SCHED_WAKEUP_H

#include "utils/timestamp.h"
#include "utils/uuid.h"

/* The shared slots (shmem.c allocates them, when preloading), and the transaction
 * callback that wakes at commit (registered when preloading). */
extern Size sched_wakeup_shmem_size(void);
extern void sched_wakeup_shmem_attach(void *ptr, bool found);
extern void sched_wakeup_preload(void);

/* Whether this backend can wait (pg_sched preloaded, a regular backend). */
extern bool sched_wakeup_available(void);

/* This transaction made a command for the worker: wake its waiting session when the
 * transaction commits (and NOTIFY its channel at commit when sched.notify_workers). */
extern void sched_wake_worker(const pg_uuid_t *worker_id);

/* This backend waits for commands of the worker from now on (until sched_wakeup_done):
 * a commit that made one sets its latch.  Call before the poll that may find nothing. */
extern void sched_wakeup_wait_for(const pg_uuid_t *worker_id);
extern void sched_wakeup_done(void);

/* Refuses (25000) to wait in a call whose snapshot could be read again after the wait
 * (see wakeup.c); call before anything is read. */
extern void sched_wakeup_check_can_sleep(void);

/* Forgets the wake-ups so far: call before each poll (a commit after it wakes the
 * sleep that follows the poll). */
extern void sched_wakeup_arm(void);

/* Sleeps until the latch is set (a wake-up, an interrupt) or the deadline, with no
 * snapshot holding back vacuum.  Raises pending interrupts (cancel, statement_timeout)
 * before and after.  False when the deadline had passed (no sleep). */
extern bool sched_wakeup_sleep(TimestampTz deadline);

#endif							/* PG_SCHED_WAKEUP_H */
