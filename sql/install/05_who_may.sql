-- sql/install/05_who_may.sql — who may act: the checks the PL/pgSQL write functions make
-- (src/privileges.c, which the C functions call directly).  A piece of
-- pg_sched--0.2.0.sql (the Makefile builds it from sql/install/*.sql in the order of
-- their names) and of the upgrade from 0.1.0, hence CREATE OR REPLACE.  Internal: no
-- role but the extension's owner may call them (90_privileges.sql).

/* The role the session runs as (its login role, or the role SET ROLE chose): who asked,
 * inside a SECURITY DEFINER function, where current_user is the owner.  42501 inside a
 * security-restricted operation (index expressions, VACUUM, ...). */
CREATE OR REPLACE FUNCTION sched._caller()
RETURNS regrole
AS 'MODULE_PATHNAME', 'sched_caller_sql'
LANGUAGE C STABLE;

/* Returns when the caller may act for the worker registered by `registered_by`: that
 * role, a role with its privileges, or sched_admin.  Else 42501 naming the worker. */
CREATE OR REPLACE FUNCTION sched._require_worker_access(worker_id uuid, registered_by regrole)
RETURNS void
AS 'MODULE_PATHNAME', 'sched_require_worker_access_sql'
LANGUAGE C STABLE;

/* Returns when the tenant has no owner, or the caller has the owner's privileges or is
 * sched_admin.  Else 42501 naming the tenant. */
CREATE OR REPLACE FUNCTION sched._require_tenant_access(tenant text, owner regrole)
RETURNS void
AS 'MODULE_PATHNAME', 'sched_require_tenant_access_sql'
LANGUAGE C STABLE;

/* Returns when `at` is within the range of times (else 22008) and not in the future or
 * the caller is sched_admin (else 22023), naming the parameter: a later time would
 * stretch the lease or heartbeat TTL. */
CREATE OR REPLACE FUNCTION sched._check_at(at timestamptz, parameter text)
RETURNS void
AS 'MODULE_PATHNAME', 'sched_check_at_sql'
LANGUAGE C STABLE;
