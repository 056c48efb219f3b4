/*
 * privileges.h — who may act: the caller of a pg_sched function, the owner of a worker
 * or tenant, and sched_admin (privileges.c).
 *
 * The write functions run as the extension's owner (SECURITY DEFINER), so the role that
 * asked is not current_user inside them: it is the role the session runs as (its login
 * role, or the role SET ROLE chose), which a SECURITY DEFINER function cannot change.
 */
#ifndef PG_SCHED_PRIVILEGES_H
#define PG_SCHED_PRIVILEGES_H

#include "fmgr.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

/* The role the session runs as.  ERROR 42501 inside a security-restricted operation
 * (an index expression, a materialized view refresh, VACUUM, ANALYZE), where that role
 * is not the one that asked. */
extern Oid	sched_caller(void);

/* Whether `caller` has the privileges of sched_admin (superusers do). */
extern bool sched_caller_is_admin(Oid caller);

/* Nothing, when the caller may act for worker `worker_id`, registered by `owner`
 * (InvalidOid: a worker registered before 0.2.0, owned by no role): the owner, a role
 * with its privileges, or sched_admin.  Else ERROR 42501 naming the worker. */
extern void sched_require_worker_access(const pg_uuid_t *worker_id, Oid owner);

/* Nothing, when the caller may submit, cancel or complete work of `tenant`, owned by
 * `owner` (InvalidOid: no owner, any caller may).  Else ERROR 42501 naming the tenant. */
extern void sched_require_tenant_access(const char *tenant, Oid owner);

/* Nothing, when `at` (the time a worker or scheduler says an event happens: it starts
 * a lease or a heartbeat's validity, ends leases and claims, makes requests ready) is
 * not later than now, or the caller is sched_admin.  Else ERROR 22023 naming the
 * parameter: a later `at` would stretch the lease or heartbeat TTL the settings bound,
 * or expire leases and claims early. */
extern void sched_check_at_not_future(TimestampTz at, const char *parameter);

#endif							/* PG_SCHED_PRIVILEGES_H */
