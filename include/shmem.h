/*
 * shmem.h — everything pg_sched keeps in shared memory, allocated by one hook pair (shmem.c).
 */
#ifndef PG_SCHED_SHMEM_H
#define PG_SCHED_SHMEM_H


/* Installs the shared memory hooks (from _PG_init, when preloading). */
extern void sched_shmem_preload(void);

#endif							/* PG_SCHED_SHMEM_H */
