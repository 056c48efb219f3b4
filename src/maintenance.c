/*
 * maintenance.c — the background workers that keep leases and claims honest without any
 * client: when pg_sched is in shared_preload_libraries, one worker per database named in
 * sched.databases calls sched.reap_expired(now()) every sched.maintenance_interval.
 *
 * A launcher (one static worker, connected to no database) runs for as long as the
 * server, once recovery has finished.  At its start, at every reload (SIGHUP) and every
 * minute it reads sched.databases and pg_database: it starts a dynamic worker for each
 * database listed that exists and has none, stops the worker of a database no longer
 * listed, and warns once about each name that does not exist (a worker connecting to a
 * missing database would fail with FATAL and be restarted every 10 s, forever).  So a
 * database created or listed later gets its worker within a minute, or at the reload.
 *
 * Guarantees: one worker per database (each holds a session lock on its database in a
 * lock space of pg_sched's own, and a second one exits at once: a launcher restarted
 * after a crash cannot double them); each tick is one transaction, run at its interval
 * only (other wake-ups, such as a reload, do not tick), on a schedule of their starts
 * every 90% of the interval, so that an expired lease is reaped within one interval (a
 * tick that leaves expired attempts whose rows were held is retried a few times, 20 ms
 * apart); a tick that fails is logged and rolled back, and the worker goes on at the
 * next tick; a database without the
 * extension is skipped quietly; nothing runs before recovery has finished, so a hot
 * standby never writes.  Without preloading, calling sched.reap_expired() from any
 * client (for example from cron) does the same work.
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
#include "storage/lock.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/acl.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
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

/* Registers the launcher (postmaster only): it runs even while sched.databases is empty,
 * so that a database listed later gets its worker at the reload. */
void
sched_register_maintenance_workers(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 10;
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

/* A maintenance worker the launcher started: its database and handle. */
typedef struct LaunchedWorker
{
	char		name[BGW_EXTRALEN];
	Oid			dboid;
	BackgroundWorkerHandle *handle;
} LaunchedWorker;

static List *launched = NIL;	/* of LaunchedWorker, in TopMemoryContext */
static List *warned = NIL;		/* names warned about as missing */

static bool
name_listed(List *names, const char *name)
{
	ListCell   *lc;

	foreach(lc, names)
		if (strcmp((const char *) lfirst(lc), name) == 0)
			return true;
	return false;
}

static void
start_worker(LaunchedWorker *w)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 10;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "pg_sched");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "sched_maintenance_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "pg_sched maintenance %s", w->name);
	snprintf(worker.bgw_type, BGW_MAXLEN, "pg_sched maintenance");
	strlcpy(worker.bgw_extra, w->name, BGW_EXTRALEN);
	worker.bgw_main_arg = ObjectIdGetDatum(w->dboid);
	worker.bgw_notify_pid = 0;
	if (!RegisterDynamicBackgroundWorker(&worker, &w->handle))
	{
		w->handle = NULL;
		ereport(WARNING,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("no background worker slot for the pg_sched maintenance worker of database \"%s\"", w->name),
				 errhint("Raise max_worker_processes.")));
	}
}

/* The names of sched.databases; a bad list is logged (the workers keep running as the
 * list was) and taken as empty only at the launcher's start. */
static List *
listed_names(void)
{
	static List *last = NIL;	/* the last good list, in TopMemoryContext */
	MemoryContext context = CurrentMemoryContext;
	List	   *names = NIL;

	PG_TRY();
	{
		names = database_names();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(context);
		EmitErrorReport();
		FlushErrorState();
		return last;
	}
	PG_END_TRY();
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
		ListCell   *lc;

		list_free(last);
		last = NIL;
		foreach(lc, names)
			last = lappend(last, pstrdup((const char *) lfirst(lc)));
		MemoryContextSwitchTo(old);
	}
	return names;
}

/*
 * Brings the running workers in line with sched.databases and pg_database: starts the
 * missing ones (and those that stopped for good), stops those of databases no longer
 * listed or gone, and warns once about each listed name that does not exist.
 */
static void
launcher_sync(void)
{
	List	   *names;
	List	   *kept = NIL;
	ListCell   *lc;
	MemoryContext old;

	StartTransactionCommand();
	(void) GetTransactionSnapshot();
	names = listed_names();

	old = MemoryContextSwitchTo(TopMemoryContext);
	/* the workers to keep: listed, their database still there under its OID */
	foreach(lc, launched)
	{
		LaunchedWorker *w = (LaunchedWorker *) lfirst(lc);
		pid_t		pid;

		if (name_listed(names, w->name) && database_oid(w->name) == w->dboid)
		{
			if (w->handle == NULL || GetBackgroundWorkerPid(w->handle, &pid) == BGWH_STOPPED)
				start_worker(w);
			kept = lappend(kept, w);
		}
		else
		{
			if (w->handle != NULL)
				TerminateBackgroundWorker(w->handle);
			ereport(LOG,
					(errmsg("pg_sched maintenance worker of database \"%s\" stopped: the database is no longer listed in \"sched.databases\" or is gone", w->name)));
			pfree(w);
		}
	}
	list_free(launched);
	launched = kept;

	foreach(lc, names)
	{
		const char *name = (const char *) lfirst(lc);
		Oid			dboid = database_oid(name);
		ListCell   *lw;
		bool		running = false;

		foreach(lw, launched)
			if (strcmp(((LaunchedWorker *) lfirst(lw))->name, name) == 0)
				running = true;
		if (running)
			continue;
		if (!OidIsValid(dboid))
		{
			if (!name_listed(warned, name))
			{
				ereport(WARNING,
						(errcode(ERRCODE_UNDEFINED_DATABASE),
						 errmsg("database \"%s\" named in \"sched.databases\" does not exist: no pg_sched maintenance worker for it", name),
						 errhint("Create the database: its worker starts within a minute, or at the next reload.")));
				warned = lappend(warned, pstrdup(name));
			}
			continue;
		}
		{
			LaunchedWorker *w = palloc0(sizeof(LaunchedWorker));

			strlcpy(w->name, name, BGW_EXTRALEN);
			w->dboid = dboid;
			start_worker(w);
			launched = lappend(launched, w);
		}
	}
	/* a name that exists now may be warned about again if it goes */
	{
		List	   *still = NIL;

		foreach(lc, warned)
			if (name_listed(names, (const char *) lfirst(lc)) && !OidIsValid(database_oid((const char *) lfirst(lc))))
				still = lappend(still, lfirst(lc));
		list_free(warned);
		warned = still;
	}
	MemoryContextSwitchTo(old);
	CommitTransactionCommand();
}

#define LAUNCHER_RESCAN_MS 60000L

void
sched_maintenance_launcher_main(Datum arg)
{
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);	/* shared catalogs only */

	for (;;)
	{
		launcher_sync();
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 LAUNCHER_RESCAN_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
	}
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
static bool
maintenance_tick(void)
{
	Oid			role = tick_role();
	int			rc;
	bool		left;
	bool		isnull;

	if (!OidIsValid(role))
		return false;
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
	/* expired attempts it passed over (their rows were held) or could not end */
	rc = SPI_execute("SELECT EXISTS (SELECT 1 FROM sched.attempt a "
					 " WHERE a.finished_at IS NULL "
					 "   AND a.status OPERATOR(pg_catalog.=) ANY ('{DISPATCHED,RUNNING}'::pg_catalog.text[]) "
					 "   AND a.lease_expires_at OPERATOR(pg_catalog.<) pg_catalog.now())", true, 1);
	if (rc != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "pg_sched: the check for expired attempts returned %s", SPI_result_code_string(rc));
	left = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_stat(false);
	pgstat_report_activity(STATE_IDLE, NULL);
	return left;
}

/* The objsubid (advisory lock tag field 4) of the per-database maintenance lock: no
 * SQL function takes it (pg_advisory_lock uses 1 and 2; dispatch's step locks 0x5343). */
#define SCHED_MAINTENANCE_LOCK_SPACE 0x534D

/* One tick, whatever happens in it: an error is logged and rolled back, and the worker
 * goes on (a FATAL, such as a shutdown request, still ends it).  Returns whether
 * expired attempts are left (false after an error). */
static bool
maintenance_tick_guarded(void)
{
	MemoryContext context = CurrentMemoryContext;
	volatile bool left = false;

	PG_TRY();
	{
		left = maintenance_tick();
	}
	PG_CATCH();
	{
		HOLD_INTERRUPTS();
		MemoryContextSwitchTo(context);
		EmitErrorReport();
		AbortCurrentTransaction();
		FlushErrorState();
		pgstat_report_activity(STATE_IDLE, NULL);
		RESUME_INTERRUPTS();
		ereport(LOG,
				(errmsg("pg_sched maintenance tick failed (above); the next tick is in %d s",
						sched_maintenance_interval_s)));
	}
	PG_END_TRY();
	return left;
}

/* The period of the ticks: 90% of sched.maintenance_interval, so that a lease that
 * expires just after a tick is reaped within one interval, with a tenth of it to spare
 * for the tick itself and for retries of attempts whose rows were held. */
static int64
tick_period_us(void)
{
	return (int64) sched_maintenance_interval_s * USECS_PER_SEC * 9 / 10;
}

/* Retries of a tick that left expired attempts (held by a dispatch or a finish for a
 * moment): at most this many, this far apart, within the tick's period. */
#define TICK_RETRIES 5
#define TICK_RETRY_MS 20L

void
sched_maintenance_main(Datum arg)
{
	char		db[BGW_EXTRALEN];
	LOCKTAG		tag;
	TimestampTz next_tick;

	strlcpy(db, MyBgworkerEntry->bgw_extra, BGW_EXTRALEN);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(DatumGetObjectId(arg), InvalidOid, 0);

	/* one worker per database: a second one (a launcher restarted after a crash) leaves */
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, 0, 0, SCHED_MAINTENANCE_LOCK_SPACE);
	if (LockAcquire(&tag, ExclusiveLock, true, true) == LOCKACQUIRE_NOT_AVAIL)
	{
		elog(LOG, "pg_sched maintenance worker for database \"%s\" is already running", db);
		proc_exit(0);
	}

	/* over what ALTER DATABASE ... SET gave the connection: a path of the database
	 * owner's choosing, or settings that would make every tick fail */
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("default_transaction_read_only", "off", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("default_transaction_isolation", "read committed", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("statement_timeout", "0", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("lock_timeout", "0", PGC_SUSET, PGC_S_OVERRIDE);
	elog(LOG, "pg_sched maintenance worker started for database \"%s\"", db);

	next_tick = GetCurrentTimestamp() + tick_period_us();
	for (;;)
	{
		long		wait_ms;
		TimestampTz now = GetCurrentTimestamp();

		wait_ms = next_tick > now ? (long) ((next_tick - now + 999) / 1000) : 0;
		if (wait_ms > 0)
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 wait_ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			/* a shorter interval takes effect from now, not after the old one */
			next_tick = Min(next_tick, GetCurrentTimestamp() + tick_period_us());
		}
		if (GetCurrentTimestamp() < next_tick)
			continue;			/* woken early (a reload, a signal): not a tick */
		{
			int			retries = 0;

			while (maintenance_tick_guarded() && retries++ < TICK_RETRIES &&
				   GetCurrentTimestamp() + TICK_RETRY_MS * 1000 < next_tick + tick_period_us())
			{
				(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
								 TICK_RETRY_MS, PG_WAIT_EXTENSION);
				ResetLatch(MyLatch);
				CHECK_FOR_INTERRUPTS();
			}
		}
		/* on the schedule of the ticks' starts, not their ends; behind it, from now */
		next_tick += tick_period_us();
		if (next_tick < GetCurrentTimestamp())
			next_tick = GetCurrentTimestamp() + tick_period_us();
	}
}
