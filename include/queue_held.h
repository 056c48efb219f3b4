/*
 * queue_held.h — the requests other running transactions hold locked from the queue
 * (queue_held.c).
 */
#ifndef PG_SCHED_QUEUE_HELD_H
#define PG_SCHED_QUEUE_HELD_H

/* The shared slots (shmem.c allocates them, when preloading), and the (sub)transaction
 * callbacks that withdraw this backend's entries (registered when preloading). */
extern Size sched_queue_held_shmem_size(void);
extern void sched_queue_held_shmem_attach(void *ptr, bool found);
extern void sched_queue_held_preload(void);

/* Publishes a request a fetch of this transaction has just locked. */
extern void sched_queue_held_publish(int64 request_id);

/* Puts in force, for the statement that follows, the set of requests other running
 * transactions of this database hold (sched._request_held_elsewhere reads it); release
 * ends it and adds the rows it left out to this backend's count. */
extern void sched_queue_held_collect(void);
extern void sched_queue_held_release(void);
/* Whether the fetch in progress leaves request id out (sched._request_held_elsewhere):
 * another running transaction held it locked when the fetch began.  False outside a
 * fetch (between collect and release). */
extern bool sched_queue_held_elsewhere(int64 id);

/* This backend's requests published now, and the rows its fetches have left out. */
extern void sched_queue_held_stats(int *published, int64 *passed_over);

#endif							/* PG_SCHED_QUEUE_HELD_H */
