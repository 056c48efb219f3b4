/*
 * privileges.c — who may act (see privileges.h): the caller, sched_admin, the owners
 * of workers (sched.worker.registered_by) and tenants (sched.tenant.owner), and the
 * SQL helpers the PL/pgSQL write functions check with.  Reads only the role catalogs;
 * calls nothing else of pg_sched.
 *
 * Role membership is has_privs_of_role: a role with the privileges of the owner
 * (directly, or through INHERIT memberships) acts for it, as PostgreSQL's own
 * ownership checks do; superusers have the privileges of every role.
 */
#include "postgres.h"

#include "privileges.h"
#include "validate.h"

#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

PG_FUNCTION_INFO_V1(sched_caller_sql);
PG_FUNCTION_INFO_V1(sched_require_worker_access_sql);
PG_FUNCTION_INFO_V1(sched_require_tenant_access_sql);
PG_FUNCTION_INFO_V1(sched_check_at_sql);

Oid
sched_caller(void)
{
	if (InSecurityRestrictedOperation())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("pg_sched cannot act for a caller inside a security-restricted operation"),
				 errdetail("Index expressions, materialized views, VACUUM and ANALYZE run as another role than the session's.")));
	return GetOuterUserId();
}

bool
sched_caller_is_admin(Oid caller)
{
	Oid			admin = get_role_oid("sched_admin", true);

	return superuser_arg(caller) || (OidIsValid(admin) && has_privs_of_role(caller, admin));
}

static char *
role_name(Oid role)
{
	char	   *name = GetUserNameFromId(role, true);

	return name != NULL ? name : psprintf("%u", role);
}

void
sched_require_worker_access(const pg_uuid_t *worker_id, Oid owner)
{
	Oid			caller = sched_caller();
	char	   *id;

	if (OidIsValid(owner) && has_privs_of_role(caller, owner))
		return;
	if (sched_caller_is_admin(caller))
		return;
	id = DatumGetCString(DirectFunctionCall1(uuid_out, UUIDPGetDatum(worker_id)));
	if (OidIsValid(owner))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for worker %s", id),
				 errdetail("Worker %s was registered by role \"%s\"; role \"%s\" is not a member of it.",
						   id, role_name(owner), role_name(caller)),
				 errhint("Only the role that registered a worker, its members and sched_admin act for it.")));
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied for worker %s", id),
			 errdetail("Worker %s was registered before pg_sched 0.2.0 and has no owning role.", id),
			 errhint("Register the worker again (its next registration records its role), or act as sched_admin.")));
}

void
sched_require_tenant_access(const char *tenant, Oid owner)
{
	Oid			caller;

	if (!OidIsValid(owner))
		return;
	caller = sched_caller();
	if (has_privs_of_role(caller, owner) || sched_caller_is_admin(caller))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied for tenant \"%s\"", tenant),
			 errdetail("Tenant \"%s\" is owned by role \"%s\"; role \"%s\" is not a member of it.",
					   tenant, role_name(owner), role_name(caller)),
			 errhint("Only members of a tenant's owner and sched_admin submit, cancel or complete its work.")));
}

void
sched_check_at_not_future(TimestampTz at, const char *parameter)
{
	if (at <= GetCurrentTimestamp() || sched_caller_is_admin(sched_caller()))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("parameter \"%s\" must not be in the future: %s", parameter,
					timestamptz_to_str(at)),
			 errdetail("A later time would stretch the lease or heartbeat TTL that the settings bound, or end leases and claims before their time."),
			 errhint("Pass the time the event happened, or leave the parameter at its default, now().")));
}

/* sched._caller() → regrole: the role the session runs as (see privileges.h). */
Datum
sched_caller_sql(PG_FUNCTION_ARGS)
{
	PG_RETURN_OID(sched_caller());
}

/* sched._require_worker_access(worker_id uuid, registered_by regrole) */
Datum
sched_require_worker_access_sql(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("parameter \"worker_id\" must not be NULL")));
	sched_require_worker_access(PG_GETARG_UUID_P(0), PG_ARGISNULL(1) ? InvalidOid : PG_GETARG_OID(1));
	PG_RETURN_VOID();
}

/* sched._require_tenant_access(tenant text, owner regrole) */
Datum
sched_require_tenant_access_sql(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("parameter \"tenant\" must not be NULL")));
	sched_require_tenant_access(text_to_cstring(PG_GETARG_TEXT_PP(0)),
								PG_ARGISNULL(1) ? InvalidOid : PG_GETARG_OID(1));
	PG_RETURN_VOID();
}

/* sched._check_at(at timestamptz, parameter text) */
Datum
sched_check_at_sql(PG_FUNCTION_ARGS)
{
	if (!PG_ARGISNULL(0))
	{
		char	   *parameter = PG_ARGISNULL(1) ? "at" : text_to_cstring(PG_GETARG_TEXT_PP(1));

		sched_check_time(PG_GETARG_TIMESTAMPTZ(0), parameter);
		sched_check_at_not_future(PG_GETARG_TIMESTAMPTZ(0), parameter);
	}
	PG_RETURN_VOID();
}
