/*
 * tenant_live.h — the sums of sched.tenant_live (tenant_live.c).
 */
#ifndef PG_SCHED_TENANT_LIVE_H
#define PG_SCHED_TENANT_LIVE_H

#include "postgres.h"

/* One change of a tenant's live attempts and of what they reserve. */
typedef struct SchedTenantDelta
{
	char	   *tenant;
	int64		live;
	int64		cpu_millis;
	int64		memory_mb;
	int64		gpus;
} SchedTenantDelta;

/*
 * Adds the n changes (any order, a tenant any number of times) to this backend's rows
 * of sched.tenant_live, one write per tenant whose sums change, in the order of the
 * tenants' names: what the triggers on sched.attempt do for a statement's attempts, for
 * attempts written without a statement (row_write.c).  Needs an SPI connection; sorts
 * deltas.
 */
extern void sched_tenant_live_add(SchedTenantDelta *deltas, int n);

/* *d: a live attempt's share of its tenant's sums, from the attempt row's tenant,
 * reserve_cpu_millis, reserve_memory_mb and reserve_gpus Datums, counted sign (+1 in, -1
 * out).  The tenant's name is palloc'd. */
extern void sched_tenant_delta_of_attempt(Datum tenant, Datum cpu_millis, Datum memory_mb,
										  Datum gpus, int sign, SchedTenantDelta *d);

#endif
