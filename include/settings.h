/*
 * settings.h — the settings (GUCs) of pg_sched, defined by settings.c, which also holds _PG_init.
 */
#ifndef PG_SCHED_SETTINGS_H
#define PG_SCHED_SETTINGS_H


extern int	sched_heartbeat_ttl_s;
extern int	sched_lease_ttl_s;
extern int	sched_unschedulable_backoff_max_s;
extern int	sched_starvation_after_s;
extern int	sched_aging_interval_s;
extern int	sched_maintenance_interval_s;
extern int	sched_retry_backoff_max_s;
extern bool sched_notify_workers;
extern bool sched_preemption;
extern int	sched_preemption_hold_s;
extern bool sched_fleet_mirror_carry;
extern bool sched_direct_writes;
extern char *sched_databases;

/* Defines every sched.* setting; called once, when the library is loaded. */
extern void sched_define_settings(void);

#endif							/* PG_SCHED_SETTINGS_H */
