/*
 * maintenance.c — the background workers that keep leases and claims honest without any
 * client: when pg_sched is in shared_preload_libraries, one worker per database named in
 * sched.databases calls sched.reap_expired(now()) every sched.maintenance_interval.
 *
 * A launcher (one static worker, connected to no database) starts them once recovery has
 * finished: it looks up each name in pg_database, registers a dynamic worker per database
 * that exists, warns once about each that does not (a worker connecting to a missing
 * database would fail with FATAL and be restarted every 10 s, forever), and exits.
 *
 * Guarantees: each tick is one transaction (a failure rolls the tick back, the worker
 * exits and the postmaster restarts it after 10 s); a database without the extension is
 * skipped quietly; nothing runs before recovery has finished, so a hot standby never
 * writes.  A database created after the server started gets its worker at the next
 * start.  Without preloading, calling sched.reap_expired() from any client (for example
 * from cron) does the same work.
 *
 * Least privilege: a background worker can only connect as a role that may log in, so
 * it connects as the bootstrap superuser, but before every tick it becomes role
 * sched_scheduler (SetCurrentRoleId, as SET ROLE does), the least role that may call
 * sched.reap_expired, and runs nothing else; a database without that role is skipped
 * with a warning.  Its search_path is pinned to pg_catalog, pg_temp (and the settings
 * that could make a tick fail to their defaults) over whatever ALTER DATABASE ... SET
 * gave the connection, and its one statement names everything with its schema.
 */
#include "postgres.h"

#include "executor/spi.h"

#include "maintenance.h"
#include "settings.h"

#include "access/xact.h"
#include "access/heapam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/pg_database.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/acl.h"
#include "utils/snapmgr.h"
#include "utils/varlena.h"

PGDLLEXPORT void sched_maintenance_main(Datum arg);
PGDLLEXPORT void sched_maintenance_launcher_main(Datum arg);

/* The names of sched.databases (ERROR on bad syntax or a name too long). */
static List *
database_names(void)
{
	List	   *names;
	ListCell   *lc;

	if (sched_databases == NULL || sched_databases[0] == '\0')
		return NIL;
	if (!SplitIdentifierString(pstrdup(sched_databases), ',', &names))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid list syntax in parameter \"sched.databases\"")));
	foreach(lc, names)
		if (strlen((const char *) lfirst(lc)) >= BGW_EXTRALEN)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("database name \"%s\" in \"sched.databases\" is too long",
							(const char *) lfirst(lc))));
	return names;
}

/* Registers the launcher when sched.databases names any database (postmaster only). */
void
sched_register_maintenance_workers(void)
{
	BackgroundWorker worker;

	if (database_names() == NIL)
		return;
	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "pg_sched");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "sched_maintenance_launcher_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "pg_sched maintenance launcher");
	snprintf(worker.bgw_type, BGW_MAXLEN, "pg_sched maintenance launcher");
	RegisterBackgroundWorker(&worker);
}

/*
 * The oid of database `name`, or InvalidOid.  Without a database selected only the shared
 * catalogs can be read, and only by heap scan (as the autovacuum launcher does): the
 * index lookup of get_database_oid() would read pg_class.
 */
static Oid
database_oid(const char *name)
{
	Relation	rel = table_open(DatabaseRelationId, AccessShareLock);
	TableScanDesc scan = table_beginscan_catalog(rel, 0, NULL);
	HeapTuple	tup;
	Oid			result = InvalidOid;

	while ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		Form_pg_database db = (Form_pg_database) GETSTRUCT(tup);

		if (strcmp(NameStr(db->datname), name) == 0)
			result = db->oid;
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	return result;
}

void
sched_maintenance_launcher_main(Datum arg)
{
	List	   *names;
	List	   *oids = NIL;
	List	   *found = NIL;
	ListCell   *lc,
			   *lc2;

	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);	/* shared catalogs only */

	StartTransactionCommand();
	(void) GetTransactionSnapshot();
	names = database_names();
	foreach(lc, names)
	{
		const char *db = (const char *) lfirst(lc);
		Oid			dboid = database_oid(db);

		if (!OidIsValid(dboid))
		{
			ereport(WARNING,
					(errcode(ERRCODE_UNDEFINED_DATABASE),
					 errmsg("database \"%s\" named in \"sched.databases\" does not exist: no pg_sched maintenance worker for it", db),
					 errhint("Create the database and restart the server, or remove it from \"sched.databases\".")));
			continue;
		}
		oids = lappend_oid(oids, dboid);
		found = lappend(found, pstrdup(db));
	}
	CommitTransactionCommand();

	forboth(lc, oids, lc2, found)
	{
		const char *db = (const char *) lfirst(lc2);
		BackgroundWorker worker;

		memset(&worker, 0, sizeof(worker));
		worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
		worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
		worker.bgw_restart_time = 10;
		snprintf(worker.bgw_library_name, BGW_MAXLEN, "pg_sched");
		snprintf(worker.bgw_function_name, BGW_MAXLEN, "sched_maintenance_main");
		snprintf(worker.bgw_name, BGW_MAXLEN, "pg_sched maintenance %s", db);
		snprintf(worker.bgw_type, BGW_MAXLEN, "pg_sched maintenance");
		strlcpy(worker.bgw_extra, db, BGW_EXTRALEN);
		worker.bgw_main_arg = ObjectIdGetDatum(lfirst_oid(lc));
		if (!RegisterDynamicBackgroundWorker(&worker, NULL))
			ereport(WARNING,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("no background worker slot for the pg_sched maintenance worker of database \"%s\"", db),
					 errhint("Raise max_worker_processes.")));
	}
	proc_exit(0);
}

/*
 * The role the ticks run as: sched_scheduler's OID, InvalidOid (with a warning) when the
 * extension is installed but the role is missing, and InvalidOid quietly when the
 * extension is not installed here.  Reads the catalogs in a transaction of its own.
 */
static Oid
tick_role(void)
{
	Oid			role = InvalidOid;

	StartTransactionCommand();
	if (OidIsValid(get_extension_oid("pg_sched", true)))
	{
		role = get_role_oid("sched_scheduler", true);
		if (!OidIsValid(role))
			ereport(WARNING,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("role \"sched_scheduler\" does not exist: the pg_sched maintenance worker skips this tick"),
					 errhint("ALTER EXTENSION pg_sched UPDATE creates it.")));
	}
	CommitTransactionCommand();
	return role;
}

/*
 * One tick: reap expired leases and claims, if the extension is installed here.  The
 * session becomes sched_scheduler first, between transactions, as SET ROLE would make
 * it: current and outer user both (so pg_sched's functions see sched_scheduler as their
 * caller too), and a transaction that fails falls back to it, not to the superuser.
 */
static void
maintenance_tick(void)
{
	Oid			role = tick_role();
	int			rc;

	if (!OidIsValid(role))
		return;
	SetCurrentRoleId(role, false);

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "SELECT sched.reap_expired(pg_catalog.now())");
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pg_sched: SPI_connect failed");
	rc = SPI_execute("SELECT sched.reap_expired(pg_catalog.now())", false, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "pg_sched: reap_expired returned %s", SPI_result_code_string(rc));
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_stat(false);
	pgstat_report_activity(STATE_IDLE, NULL);
}

void
sched_maintenance_main(Datum arg)
{
	char		db[BGW_EXTRALEN];

	strlcpy(db, MyBgworkerEntry->bgw_extra, BGW_EXTRALEN);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(DatumGetObjectId(arg), InvalidOid, 0);
	/* over what ALTER DATABASE ... SET gave the connection: a path of the database
	 * owner's choosing, or settings that would make every tick fail */
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("default_transaction_read_only", "off", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("default_transaction_isolation", "read committed", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("statement_timeout", "0", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("lock_timeout", "0", PGC_SUSET, PGC_S_OVERRIDE);
	elog(LOG, "pg_sched maintenance worker started for database \"%s\"", db);

	for (;;)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 (long) sched_maintenance_interval_s * 1000L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		maintenance_tick();
	}
}
