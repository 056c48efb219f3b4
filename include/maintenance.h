/*
 * maintenance.h — the maintenance background workers (maintenance.c).
 */
#ifndef PG_SCHED_MAINTENANCE_H
#define PG_SCHED_MAINTENANCE_H


extern void sched_register_maintenance_workers(void);

#endif							/* PG_SCHED_MAINTENANCE_H */
