/*
 * snapshot_release.c — letting go of the statement's snapshot while a call waits, so that
 * the wait does not hold back vacuum (sched.wait_commands' sleep, a placement call's wait
 * for its turn at the dispatch gate).
 *
 * A function runs under its statement's snapshot, whose xmin (backend_xmin) holds back
 * the removal of dead row versions, for every table of the database, for as long as the
 * call lasts.  Clearing this backend's xmin while it waits lets vacuum and page pruning
 * remove versions that snapshot could still see: safe only when nothing will read with
 * that snapshot (or any other the backend holds) again.  sched_snapshot_why_held()
 * makes sure of that: READ COMMITTED (every later query takes a fresh snapshot), nothing
 * written yet (no xid, which would hold vacuum back too), called directly by the portal's
 * statement (not from a function's query, whose caller may read again), a statement that
 * scans no table and calls no non-built-in STABLE function (those read with the
 * statement's snapshot), and no other snapshot registered nor cursor open in the
 * transaction.  After the wait, whatever the call reads it reads with a new snapshot
 * (which sets xmin anew).
 */
#include "postgres.h"

#include "snapshot_release.h"

#include "access/htup_details.h"
#include "access/transam.h"
#include "access/xact.h"
#include "catalog/pg_language.h"
#include "catalog/pg_proc.h"
#include "executor/execdesc.h"
#include "nodes/nodeFuncs.h"
#include "nodes/plannodes.h"
#include "storage/proc.h"
#include "tcop/pquery.h"
#include "utils/lsyscache.h"
#include "utils/portal.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

/* a STABLE function that is not built in: it may read tables with the statement's snapshot */
static bool
stable_user_function(Oid funcid, void *context)
{
	HeapTuple	tp;
	bool		result = false;

	if (func_volatile(funcid) != PROVOLATILE_STABLE)
		return false;
	tp = SearchSysCache1(PROCOID, ObjectIdGetDatum(funcid));
	if (HeapTupleIsValid(tp))
	{
		result = ((Form_pg_proc) GETSTRUCT(tp))->prolang != INTERNALlanguageId;
		ReleaseSysCache(tp);
	}
	return result;
}

static bool
expr_reads_with_snapshot(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (check_functions_in_node(node, stable_user_function, NULL))
		return true;
	return expression_tree_walker(node, expr_reads_with_snapshot, context);
}

/* whether a plan (sub)tree calls a function that may read with the statement's snapshot */
static bool
plan_reads_with_snapshot(Plan *plan)
{
	ListCell   *lc;

	if (plan == NULL)
		return false;
	if (expr_reads_with_snapshot((Node *) plan->targetlist, NULL) ||
		expr_reads_with_snapshot((Node *) plan->qual, NULL))
		return true;
	switch (nodeTag(plan))
	{
		case T_FunctionScan:
			if (expr_reads_with_snapshot((Node *) ((FunctionScan *) plan)->functions, NULL))
				return true;
			break;
		case T_Result:
			if (expr_reads_with_snapshot(((Result *) plan)->resconstantqual, NULL))
				return true;
			break;
		case T_Append:
			foreach(lc, ((Append *) plan)->appendplans)
				if (plan_reads_with_snapshot(lfirst(lc)))
					return true;
			break;
		case T_MergeAppend:
			foreach(lc, ((MergeAppend *) plan)->mergeplans)
				if (plan_reads_with_snapshot(lfirst(lc)))
					return true;
			break;
		case T_SubqueryScan:
			if (plan_reads_with_snapshot(((SubqueryScan *) plan)->subplan))
				return true;
			break;
		case T_NestLoop:
		case T_MergeJoin:
		case T_HashJoin:
			if (expr_reads_with_snapshot((Node *) ((Join *) plan)->joinqual, NULL))
				return true;
			break;
		default:
			break;
	}
	return plan_reads_with_snapshot(plan->lefttree) ||
		plan_reads_with_snapshot(plan->righttree);
}

const char *
sched_snapshot_why_held(const char *function, const char **hint)
{
	Portal		portal = ActivePortal;
	PlannedStmt *stmt;
	ListCell   *lc;
	const char *h = NULL;		/* (the default, built when asked for) */
	const char *why = NULL;

	if (IsolationUsesXactSnapshot())
	{
		why = "the transaction is REPEATABLE READ or SERIALIZABLE";
		h = "Call it in autocommit, or in a READ COMMITTED transaction.";
	}
	else if (TransactionIdIsValid(GetTopTransactionIdIfAny()))
	{
		why = "the transaction has written";
		h = "Commit first, or call it in autocommit.";
	}
	else if (portal == NULL || portal->strategy != PORTAL_ONE_SELECT || portal->queryDesc == NULL ||
			 !ActiveSnapshotSet() || portal->queryDesc->snapshot != GetActiveSnapshot())
	{
		why = "it is not called directly by the statement";
		if (hint != NULL)
			h = psprintf("Call it as a statement of its own: SELECT * FROM sched.%s(...), "
						 "not from a function or procedure.", function);
	}
	if (why == NULL)
	{
		stmt = portal->queryDesc->plannedstmt;
		foreach(lc, stmt->rtable)
		{
			if (((RangeTblEntry *) lfirst(lc))->rtekind == RTE_RELATION)
				why = "its statement reads a table";
		}
		if (why == NULL && plan_reads_with_snapshot(stmt->planTree))
			why = "its statement calls a STABLE function that may read tables";
		foreach(lc, stmt->subplans)
		{
			if (why == NULL && plan_reads_with_snapshot(lfirst(lc)))
				why = "its statement calls a STABLE function that may read tables";
		}
	}
	if (why == NULL)
	{
		InvalidateCatalogSnapshot();
		if (!ThereAreNoPriorRegisteredSnapshots() || !ThereAreNoReadyPortals())
		{
			why = "the transaction holds other snapshots (an open cursor)";
			h = "Close the cursors first, or call it in a transaction of its own.";
		}
	}
	if (hint != NULL)
		*hint = h != NULL ? h : psprintf("Call it as a statement of its own: SELECT * FROM sched.%s(...).",
										 function);
	return why;
}

void
sched_snapshot_let_go(void)
{
	InvalidateCatalogSnapshot();
	MyProc->xmin = InvalidTransactionId;
}
