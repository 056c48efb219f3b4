/*
 * row_checks.h — the CHECK constraints of sched.node, sched.worker, sched.request,
 * sched.attempt and sched.command, one C function per table (row_checks.c): each takes
 * the whole row (a composite Datum of the table's row type), returns true or fails with
 * 23514 under the name of the constraint the row breaks.
 */
#ifndef PG_SCHED_ROW_CHECKS_H
#define PG_SCHED_ROW_CHECKS_H

#include "fmgr.h"

extern PGDLLEXPORT Datum sched_node_valid(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum sched_worker_valid(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum sched_request_valid(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum sched_attempt_valid(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum sched_command_valid(PG_FUNCTION_ARGS);

#endif
