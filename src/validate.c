/*
 * validate.c — checks and parses what callers pass: label maps, the placement
 * parameters of SPEC section 3, and stored requests.  Every bad input is an ERROR that
 * names the parameter: 22004 (null_value_not_allowed) for a NULL where a value is
 * required, 22023 (invalid_parameter_value) for an invalid value, 22008
 * (datetime_field_overflow) for a time out of range, 54000 (program_limit_exceeded) for
 * a value beyond the documented limits (validate.h).  Nothing here writes.
 */
#include "postgres.h"

#include "validate.h"
#include "spi_util.h"
#include "settings.h"

#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/tuptable.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"

#include <limits.h>

PG_FUNCTION_INFO_V1(sched_check_labels);
PG_FUNCTION_INFO_V1(sched_check_required_labels);
PG_FUNCTION_INFO_V1(sched_check_name);
PG_FUNCTION_INFO_V1(sched_check_versions);
PG_FUNCTION_INFO_V1(sched_check_time_sql);
PG_FUNCTION_INFO_V1(sched_check_time_public);

void
sched_check_name_length(const char *value, const char *parameter)
{
	size_t		len = strlen(value);

	if (len > SCHED_MAX_NAME_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("parameter \"%s\" is too long: %zu bytes", parameter, len),
				 errdetail("The limit is %d bytes.", SCHED_MAX_NAME_BYTES)));
}

void
sched_check_time(TimestampTz t, const char *parameter)
{
	/* 1900-01-01 and 10000-01-01 00:00 UTC, in microseconds since 2000-01-01 */
	const TimestampTz lowest = -INT64CONST(3155673600000000);
	const TimestampTz beyond = INT64CONST(252455616000000000);

	if (TIMESTAMP_NOT_FINITE(t) || t < lowest || t >= beyond)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_FIELD_OVERFLOW),
				 errmsg("parameter \"%s\" is out of range: %s", parameter, timestamptz_to_str(t)),
				 errdetail("Times must be finite, from 1900-01-01 to 9999-12-31 UTC.")));
}

/* ERROR unless labels is a JSON object (22023: its values must be `of`) of at most
 * SCHED_MAX_LABELS keys (54000). */
static void
check_label_map(Jsonb *labels, const char *parameter, const char *of, const char *hint)
{
	if (!JB_ROOT_IS_OBJECT(labels) || JB_ROOT_IS_SCALAR(labels))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("parameter \"%s\" must be a JSON object of %s", parameter, of),
				 errdetail("Got a JSON %s.",
						   JB_ROOT_IS_SCALAR(labels) ? "scalar" :
						   JB_ROOT_IS_ARRAY(labels) ? "array" : "value"),
				 errhint("%s", hint)));
	if (JB_ROOT_COUNT(labels) > SCHED_MAX_LABELS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("parameter \"%s\" has too many labels: %d", parameter,
						(int) JB_ROOT_COUNT(labels)),
				 errdetail("The limit is %d labels.", SCHED_MAX_LABELS)));
}

/* ERROR 54000 when a label key is beyond SCHED_MAX_LABEL_KEY_BYTES. */
static void
check_label_key(const JsonbValue *key, const char *parameter)
{
	if (key->val.string.len > SCHED_MAX_LABEL_KEY_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("parameter \"%s\" has a label key of %d bytes", parameter,
						key->val.string.len),
				 errdetail("The limit is %d bytes.", SCHED_MAX_LABEL_KEY_BYTES)));
}

void
sched_labels_from_jsonb(Jsonb *labels, const char *parameter, SchedLabelSet *out)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	char	   *key = NULL;
	int			n = 0;

	out->count = 0;
	out->items = NULL;
	if (parameter != NULL)
		check_label_map(labels, parameter, "strings", "Pass labels like '{\"tier\": \"fast\"}'.");
	else if (!JB_ROOT_IS_OBJECT(labels) || JB_ROOT_IS_SCALAR(labels))
		return;
	out->items = palloc0(sizeof(SchedLabel) * Max(JB_ROOT_COUNT(labels), 1));
	it = JsonbIteratorInit(&labels->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
		{
			if (parameter != NULL)
				check_label_key(&v, parameter);
			key = pnstrdup(v.val.string.val, v.val.string.len);
		}
		else if (tok == WJB_VALUE)
		{
			if (v.type != jbvString)
			{
				if (parameter == NULL)
					continue;
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("parameter \"%s\" must be a JSON object of strings", parameter),
						 errdetail("The value of label \"%s\" is not a string.", key),
						 errhint("Quote the value: '{\"%s\": \"...\"}'.", key)));
			}
			if (parameter != NULL && v.val.string.len > SCHED_MAX_LABEL_VALUE_BYTES)
				ereport(ERROR,
						(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						 errmsg("parameter \"%s\" has a value of %d bytes for label \"%s\"",
								parameter, v.val.string.len, key),
						 errdetail("The limit is %d bytes.", SCHED_MAX_LABEL_VALUE_BYTES)));
			out->items[n].key = key;
			out->items[n].value = pnstrdup(v.val.string.val, v.val.string.len);
			n++;
		}
	}
	out->count = n;
	/* jsonb keys are unique already; sorting makes them searchable bytewise */
	if (!sched_labels_sort(out))
		elog(ERROR, "pg_sched: duplicate key in a jsonb object");
}

static const char *const label_operators = "in, not_in, exists, gt, lt, version";

static void pg_attribute_noreturn()
bad_expression(const char *parameter, const char *key, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("parameter \"%s\" has an invalid expression for label \"%s\"", parameter, key),
			 errdetail("%s", detail),
			 errhint("Pass a string, or an object of one operator (%s), like "
					 "'{\"%s\": {\"in\": [\"a\", \"b\"]}}'.", label_operators, key)));
}

/* A label value of a required label (a string, or a string of in / not_in). */
static char *
expression_string(const JsonbValue *v, const char *parameter, const char *key)
{
	if (v->val.string.len > SCHED_MAX_LABEL_VALUE_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("parameter \"%s\" has a value of %d bytes for label \"%s\"",
						parameter, v->val.string.len, key),
				 errdetail("The limit is %d bytes.", SCHED_MAX_LABEL_VALUE_BYTES)));
	return pnstrdup(v->val.string.val, v->val.string.len);
}

/* Parses the operator object `expr` of required label `key` into *out (key set). */
static void
expression_from_jsonb(JsonbContainer *expr, const char *parameter, const char *key,
					  SchedLabel *out)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	char	   *op = NULL;

	if (!JsonContainerIsObject(expr) || JsonContainerSize(expr) != 1)
		bad_expression(parameter, key,
					   JsonContainerIsObject(expr)
					   ? psprintf("An expression is an object of exactly one operator; it has %d keys.",
								  (int) JsonContainerSize(expr))
					   : "An expression is a string or an object; got an array.");
	it = JsonbIteratorInit(expr);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
			op = pnstrdup(v.val.string.val, v.val.string.len);
		else if (tok == WJB_VALUE)
			break;
	}
	Assert(op != NULL);

	if (strcmp(op, "in") == 0 || strcmp(op, "not_in") == 0)
	{
		JsonbIterator *ai;
		JsonbValue	e;
		const char **values;
		int			n = 0;

		out->op = op[0] == 'i' ? SCHED_LABEL_IN : SCHED_LABEL_NOT_IN;
		if (v.type != jbvBinary || !JsonContainerIsArray(v.val.binary.data) ||
			JsonContainerIsScalar(v.val.binary.data) ||
			JsonContainerSize(v.val.binary.data) == 0)
			bad_expression(parameter, key,
						   psprintf("Operator \"%s\" takes a non-empty array of strings.", op));
		if (JsonContainerSize(v.val.binary.data) > SCHED_MAX_LABEL_VALUES)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("parameter \"%s\" has %d values in operator \"%s\" of label \"%s\"",
							parameter, (int) JsonContainerSize(v.val.binary.data), op, key),
					 errdetail("The limit is %d values.", SCHED_MAX_LABEL_VALUES)));
		values = palloc(sizeof(char *) * JsonContainerSize(v.val.binary.data));
		ai = JsonbIteratorInit(v.val.binary.data);
		while ((tok = JsonbIteratorNext(&ai, &e, true)) != WJB_DONE)
		{
			if (tok != WJB_ELEM)
				continue;
			if (e.type != jbvString)
				bad_expression(parameter, key,
							   psprintf("Operator \"%s\" takes a non-empty array of strings.", op));
			values[n++] = expression_string(&e, parameter, key);
		}
		out->values = values;
		out->nvalues = n;
	}
	else if (strcmp(op, "exists") == 0)
	{
		if (v.type != jbvBool)
			bad_expression(parameter, key, "Operator \"exists\" takes true or false.");
		out->op = v.val.boolean ? SCHED_LABEL_EXISTS : SCHED_LABEL_NOT_EXISTS;
	}
	else if (strcmp(op, "gt") == 0 || strcmp(op, "lt") == 0)
	{
		char	   *text;

		out->op = op[0] == 'g' ? SCHED_LABEL_GT : SCHED_LABEL_LT;
		if (v.type != jbvNumeric)
			bad_expression(parameter, key, psprintf("Operator \"%s\" takes a number.", op));
		/* read as node labels are read, so both sides of the comparison agree */
		text = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v.val.numeric)));
		if (!sched_label_number(text, &out->number))
			bad_expression(parameter, key,
						   strlen(text) <= 40
						   ? psprintf("Operator \"%s\" takes a number within the range of double precision; got %s.",
									  op, text)
						   : psprintf("Operator \"%s\" takes a number within the range of double precision; got one of %zu characters.",
									  op, strlen(text)));
	}
	else if (strcmp(op, "version") == 0)
	{
		SchedVersionBound *bounds = palloc(sizeof(SchedVersionBound) * SCHED_MAX_VERSION_BOUNDS);
		char	   *text;

		out->op = SCHED_LABEL_VERSION;
		if (v.type != jbvString)
			bad_expression(parameter, key,
						   "Operator \"version\" takes a string of comparisons, like \">=1.2,<2\".");
		text = expression_string(&v, parameter, key);
		out->nbounds = sched_version_range_parse(text, bounds);
		if (out->nbounds < 1)
			bad_expression(parameter, key,
						   psprintf("\"%s\" is not a version expression: up to %d comparisons (= != > >= < <=) "
									"separated by commas, each of a dotted version of up to %d numbers, like \">=1.2,<2\".",
									text, SCHED_MAX_VERSION_BOUNDS, SCHED_MAX_VERSION_PARTS));
		out->bounds = bounds;
		out->value = text;
	}
	else
		bad_expression(parameter, key, psprintf("Unknown operator \"%s\".", op));
}

void
sched_required_labels_from_jsonb(Jsonb *labels, const char *parameter, SchedLabelSet *out)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	char	   *key = NULL;
	int			n = 0;

	check_label_map(labels, parameter, "strings or expressions",
					"Pass labels like '{\"tier\": \"fast\", \"zone\": {\"in\": [\"a\", \"b\"]}}'.");
	out->items = palloc0(sizeof(SchedLabel) * Max(JB_ROOT_COUNT(labels), 1));
	it = JsonbIteratorInit(&labels->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
		{
			check_label_key(&v, parameter);
			key = pnstrdup(v.val.string.val, v.val.string.len);
		}
		else if (tok == WJB_VALUE)
		{
			SchedLabel *l = &out->items[n++];

			l->key = key;
			if (v.type == jbvString)
				l->value = expression_string(&v, parameter, key);
			else if (v.type == jbvBinary)
				expression_from_jsonb(v.val.binary.data, parameter, key, l);
			else
				bad_expression(parameter, key,
							   psprintf("An expression is a string or an object; got a JSON %s.",
										v.type == jbvNull ? "null" :
										v.type == jbvBool ? "boolean" : "number"));
		}
	}
	out->count = n;
	/* jsonb keys are unique already; sorting makes them searchable bytewise */
	if (!sched_labels_sort(out))
		elog(ERROR, "pg_sched: duplicate key in a jsonb object");
}

void
sched_labels_pick(Jsonb *labels, const SchedLabelSet *a, const SchedLabelSet *b,
				  SchedLabelSet *out)
{
	int			i = 0;
	int			j = 0;
	int			n = 0;

	out->count = 0;
	out->items = palloc0(sizeof(SchedLabel) * Max(a->count + b->count, 1));
	if (!JB_ROOT_IS_OBJECT(labels) || JB_ROOT_IS_SCALAR(labels))
		return;
	/* merge the two sorted key lists, each key once, looking each up in the object */
	while (i < a->count || j < b->count)
	{
		const char *key;
		int			c;
		JsonbValue	v;

		if (j >= b->count)
			c = -1;
		else if (i >= a->count)
			c = 1;
		else
			c = strcmp(a->items[i].key, b->items[j].key);
		key = c <= 0 ? a->items[i].key : b->items[j].key;
		if (c <= 0)
			i++;
		if (c >= 0)
			j++;
		if (getKeyJsonValueFromContainer(&labels->root, key, strlen(key), &v) != NULL &&
			v.type == jbvString)
		{
			out->items[n].key = key;
			out->items[n].value = pnstrdup(v.val.string.val, v.val.string.len);
			n++;
		}
	}
	out->count = n;
}

/*
 * sched._check_labels(labels jsonb, parameter text) → labels: the same check for the
 * PL/pgSQL functions, so a label map is validated by one routine everywhere.
 */
Datum
sched_check_labels(PG_FUNCTION_ARGS)
{
	SchedLabelSet set;
	char	   *parameter;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	parameter = PG_ARGISNULL(1) ? "labels" : text_to_cstring(PG_GETARG_TEXT_PP(1));
	sched_labels_from_jsonb(PG_GETARG_JSONB_P(0), parameter, &set);
	PG_RETURN_DATUM(PG_GETARG_DATUM(0));
}

/*
 * sched._check_required_labels(labels jsonb, parameter text) → labels: required labels,
 * strings or expressions, checked by the routine placement parses them with.
 */
Datum
sched_check_required_labels(PG_FUNCTION_ARGS)
{
	SchedLabelSet set;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	sched_required_labels_from_jsonb(PG_GETARG_JSONB_P(0),
									 PG_ARGISNULL(1) ? "required_labels" : text_to_cstring(PG_GETARG_TEXT_PP(1)),
									 &set);
	PG_RETURN_DATUM(PG_GETARG_DATUM(0));
}

/* sched._check_name(value text, parameter text) → value: the length limit, for the
 * PL/pgSQL functions. */
Datum
sched_check_name(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	sched_check_name_length(text_to_cstring(PG_GETARG_TEXT_PP(0)),
							PG_ARGISNULL(1) ? "value" : text_to_cstring(PG_GETARG_TEXT_PP(1)));
	PG_RETURN_DATUM(PG_GETARG_DATUM(0));
}

/* sched._check_versions(versions text[]) → versions: a worker's capability versions are
 * a one-dimensional array of 1 to SCHED_MAX_VERSIONS non-empty names within the name
 * limit. */
Datum
sched_check_versions(PG_FUNCTION_ARGS)
{
	ArrayType  *a;
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	int			i;

	sched_check_not_null(fcinfo, 0, "capability_versions");
	a = PG_GETARG_ARRAYTYPE_P(0);
	if (ARR_NDIM(a) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("parameter \"capability_versions\" must be a one-dimensional array"),
				 errdetail("Got %d dimensions.", ARR_NDIM(a))));
	deconstruct_array(a, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("parameter \"capability_versions\" must not be empty")));
	if (n > SCHED_MAX_VERSIONS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("parameter \"capability_versions\" has too many versions: %d", n),
				 errdetail("The limit is %d versions.", SCHED_MAX_VERSIONS)));
	for (i = 0; i < n; i++)
	{
		char	   *v;

		if (nulls[i] || VARSIZE_ANY_EXHDR(DatumGetPointer(elems[i])) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("parameter \"capability_versions\" must not contain NULL or empty versions")));
		v = TextDatumGetCString(elems[i]);
		sched_check_name_length(v, "capability_versions");
	}
	PG_RETURN_POINTER(a);
}

/* sched._check_time(value timestamptz, parameter text) → value: the range of times. */
Datum
sched_check_time_sql(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	sched_check_time(PG_GETARG_TIMESTAMPTZ(0),
					 PG_ARGISNULL(1) ? "value" : text_to_cstring(PG_GETARG_TEXT_PP(1)));
	PG_RETURN_DATUM(PG_GETARG_DATUM(0));
}

/*
 * sched.check_time(value timestamptz, parameter text) → value, when it is a time
 * pg_sched's functions take (not NULL, and as sched_check_time); else their ERROR for
 * it, naming `parameter` ("value" when NULL).  Public: the inlined sched.pending(at),
 * run with its caller's privileges, checks its `at` with it.
 */
Datum
sched_check_time_public(PG_FUNCTION_ARGS)
{
	const char *parameter = PG_ARGISNULL(1) ? "value" : text_to_cstring(PG_GETARG_TEXT_PP(1));

	sched_check_name_length(parameter, "parameter");
	sched_check_not_null(fcinfo, 0, parameter);
	sched_check_time(PG_GETARG_TIMESTAMPTZ(0), parameter);
	PG_RETURN_DATUM(PG_GETARG_DATUM(0));
}

void
sched_check_not_null(FunctionCallInfo fcinfo, int argno, const char *parameter)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("parameter \"%s\" must not be NULL", parameter)));
}

static char *
required_text(FunctionCallInfo fcinfo, int argno, const char *parameter)
{
	char	   *s;

	sched_check_not_null(fcinfo, argno, parameter);
	s = text_to_cstring(PG_GETARG_TEXT_PP(argno));
	if (s[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("parameter \"%s\" must not be empty", parameter)));
	sched_check_name_length(s, parameter);
	return s;
}

static int64
amount(FunctionCallInfo fcinfo, int argno, const char *parameter, bool is_int8)
{
	int64		v;

	sched_check_not_null(fcinfo, argno, parameter);
	v = is_int8 ? PG_GETARG_INT64(argno) : (int64) PG_GETARG_INT32(argno);
	if (v < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("parameter \"%s\" must not be negative: " INT64_FORMAT, parameter, v)));
	return v;
}

void
sched_placement_set_clock(SchedPlacementArgs *args, TimestampTz at, Interval *ttl)
{
	Interval	zero = {0, 0, 0};
	Interval   *effective = ttl;

	if (ttl != NULL &&
		!DatumGetBool(DirectFunctionCall2(interval_gt, IntervalPGetDatum(ttl),
										  IntervalPGetDatum(&zero))))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("parameter \"heartbeat_ttl\" must be positive: %s",
						DatumGetCString(DirectFunctionCall1(interval_out, IntervalPGetDatum(ttl)))),
				 errhint("Pass NULL to use the setting sched.heartbeat_ttl.")));
	if (ttl != NULL && (ttl->month != 0 || ttl->day != 0 ||
						ttl->time > (int64) INT_MAX * USECS_PER_SEC))
	{
		/* months and days are not a fixed length: compare the whole in seconds */
		double		secs = DatumGetFloat8(DirectFunctionCall2(interval_part,
															  CStringGetTextDatum("epoch"),
															  IntervalPGetDatum(ttl)));

		if (secs > (double) INT_MAX)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("parameter \"heartbeat_ttl\" is too long: %s",
							DatumGetCString(DirectFunctionCall1(interval_out, IntervalPGetDatum(ttl)))),
					 errdetail("The limit is %d s, as for sched.heartbeat_ttl.", INT_MAX)));
	}
	sched_check_time(at, "at");
	if (effective == NULL)
	{
		effective = palloc0(sizeof(Interval));
		effective->time = (int64) sched_heartbeat_ttl_s * USECS_PER_SEC;
	}
	args->at = at;
	args->p.heartbeat_cutoff =
		DatumGetTimestampTz(DirectFunctionCall2(timestamptz_mi_interval,
												TimestampTzGetDatum(at),
												IntervalPGetDatum(effective)));
}

/*
 * The parameters the what-if functions and pending_explanation share, checked and
 * parsed: capability (0), capability_version (1), required_labels (2), then
 * preferred_labels at `preferred` (-1: none), the six amounts from `amounts`, the
 * optional node_id at `node`.
 */
static void
placement_params(FunctionCallInfo fcinfo, int preferred, int amounts, int node,
				 SchedPlacementArgs *out)
{
	SchedPlacement *p = &out->p;

	memset(out, 0, sizeof(*out));
	p->capability = required_text(fcinfo, 0, "capability");
	p->capability_version = required_text(fcinfo, 1, "capability_version");
	sched_check_not_null(fcinfo, 2, "required_labels");
	sched_required_labels_from_jsonb(PG_GETARG_JSONB_P(2), "required_labels", &p->required_labels);
	if (preferred >= 0)
	{
		sched_check_not_null(fcinfo, preferred, "preferred_labels");
		sched_labels_from_jsonb(PG_GETARG_JSONB_P(preferred), "preferred_labels",
								&p->preferred_labels);
	}
	p->min_cpu_millis = amount(fcinfo, amounts, "min_cpu_millis", false);
	p->min_memory_mb = amount(fcinfo, amounts + 1, "min_memory_mb", true);
	p->min_gpus = amount(fcinfo, amounts + 2, "min_gpus", false);
	p->reserve_cpu_millis = amount(fcinfo, amounts + 3, "reserve_cpu_millis", false);
	p->reserve_memory_mb = amount(fcinfo, amounts + 4, "reserve_memory_mb", true);
	p->reserve_gpus = amount(fcinfo, amounts + 5, "reserve_gpus", false);
	if (PG_ARGISNULL(node))
		p->pin_node_id = NULL;
	else
	{
		p->pin_node_id = text_to_cstring(PG_GETARG_TEXT_PP(node));
		if (p->pin_node_id[0] == '\0')
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("parameter \"node_id\" must not be empty"),
					 errhint("Pass NULL for a request that is not pinned to a node.")));
		sched_check_name_length(p->pin_node_id, "node_id");
	}
}

void
sched_placement_from_args(FunctionCallInfo fcinfo, SchedPlacementArgs *out)
{
	placement_params(fcinfo, 3, 4, 10, out);
	sched_check_not_null(fcinfo, 12, "at");
	sched_placement_set_clock(out, PG_GETARG_TIMESTAMPTZ(12),
							  PG_ARGISNULL(11) ? NULL : PG_GETARG_INTERVAL_P(11));
	if (PG_NARGS() > 13 && !PG_ARGISNULL(13))
	{
		out->spread_key = text_to_cstring(PG_GETARG_TEXT_PP(13));
		if (out->spread_key[0] == '\0')
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("parameter \"spread_key\" must not be empty"),
					 errhint("Pass NULL for a request that is not spread.")));
		sched_check_name_length(out->spread_key, "spread_key");
	}
}

void
sched_placement_from_pending_args(FunctionCallInfo fcinfo, SchedPlacementArgs *out)
{
	placement_params(fcinfo, -1, 3, 9, out);
	sched_check_not_null(fcinfo, 10, "at");
	sched_placement_set_clock(out, PG_GETARG_TIMESTAMPTZ(10), NULL);
}

/* Columns of the request read below; keep in step with REQUEST_COLUMNS. */
enum
{
	RQ_REQUEST_ID = 1, RQ_EXECUTION_ID, RQ_STEP_ID, RQ_ATTEMPT_NUMBER, RQ_TENANT, RQ_STATE,
	RQ_CLAIM_ID, RQ_CLAIMED_UNTIL, RQ_TRIES, RQ_CAPABILITY, RQ_VERSION, RQ_REQUIRED,
	RQ_PREFERRED, RQ_MIN_CPU, RQ_MIN_MEM, RQ_MIN_GPUS, RQ_RES_CPU, RQ_RES_MEM, RQ_RES_GPUS,
	RQ_NODE_ID, RQ_AVAILABLE_AT, RQ_AVOID_NODE_ID, RQ_LAST_REASON,
	/* 0.2.0 */
	RQ_SPREAD_KEY, RQ_GANG_ID, RQ_PRIORITY, RQ_PREEMPTIBLE, RQ_HELD_NODE_ID, RQ_HELD_WORKER_ID,
	RQ_HELD_UNTIL, RQ_CONCURRENCY_KEY,
	RQ_COUNT = RQ_CONCURRENCY_KEY
};

/* The names of those columns in sched.request, by RQ_* number. */
static const char *const request_column_names[RQ_COUNT + 1] = {
	NULL, "request_id", "execution_id", "step_id", "attempt_number", "tenant", "state",
	"claim_id", "claimed_until", "tries", "capability", "capability_version",
	"required_labels", "preferred_labels", "min_cpu_millis", "min_memory_mb", "min_gpus",
	"reserve_cpu_millis", "reserve_memory_mb", "reserve_gpus", "node_id", "available_at",
	"avoid_node_id", "last_reason", "spread_key", "gang_id", "priority", "preemptible",
	"held_node_id", "held_worker_id", "held_until", "concurrency_key"
};

/*
 * A row's columns, numbered from 1 as the statement (or REQUEST_COLUMNS_0_2) gives them:
 * the values (valid while the tuple they were taken from is), nulls and types.
 */
typedef struct RowColumns
{
	int			count;
	Datum	   *v;
	bool	   *n;
	Oid		   *t;
} RowColumns;

/* Columns of SPI_tuptable's row `row`. */
static void
spi_row_columns(int row, RowColumns *rc)
{
	int			k;

	rc->count = SPI_tuptable->tupdesc->natts;
	rc->v = palloc(sizeof(Datum) * (rc->count + 1));
	rc->n = palloc(sizeof(bool) * (rc->count + 1));
	rc->t = palloc(sizeof(Oid) * (rc->count + 1));
	heap_deform_tuple(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, rc->v + 1, rc->n + 1);
	for (k = 1; k <= rc->count; k++)
		rc->t[k] = TupleDescAttr(SPI_tuptable->tupdesc, k - 1)->atttypid;
}

static char *
col_text(const RowColumns *rc, int k)
{
	return rc->n[k] ? NULL : TextDatumGetCString(rc->v[k]);
}

/* 0 when NULL, as sched_spi_int64 */
static int64
col_int64(const RowColumns *rc, int k)
{
	return rc->n[k] ? 0 : sched_datum_int64(rc->v[k], rc->t[k], k);
}

/* Columns of 0.1.0 (a database not yet updated is served too: dispatch_attempt,
 * explain, qualification_reasons), and those 0.2.0 added (REQUEST_COLUMNS_0_2). */

#define REQUEST_COLUMNS \
	"SELECT r.request_id, r.execution_id, r.step_id, r.attempt_number, r.tenant, r.state, " \
	"       r.claim_id, r.claimed_until, r.tries, " SCHED_PLACEMENT_COLUMNS("r") ", " \
	"       r.available_at, r.avoid_node_id, r.last_reason " \
	"  FROM sched.request r WHERE r.request_id OPERATOR(pg_catalog.=) $1"
#define REQUEST_COLUMNS_0_2 \
	"SELECT r.request_id, r.execution_id, r.step_id, r.attempt_number, r.tenant, r.state, " \
	"       r.claim_id, r.claimed_until, r.tries, " SCHED_PLACEMENT_COLUMNS("r") ", " \
	"       r.available_at, r.avoid_node_id, r.last_reason, r.spread_key, r.gang_id, " \
	"       r.priority, r.preemptible, r.held_node_id, r.held_worker_id, r.held_until, " \
	"       r.concurrency_key " \
	"  FROM sched.request r WHERE r.request_id OPERATOR(pg_catalog.=) $1"

static SchedStatement request_read = {REQUEST_COLUMNS, 1, {INT8OID}, .keyed = true};
static SchedStatement request_lock = {REQUEST_COLUMNS " FOR UPDATE OF r", 1, {INT8OID}, .keyed = true};
static SchedStatement request_lock_skip = {REQUEST_COLUMNS " FOR UPDATE OF r SKIP LOCKED", 1, {INT8OID}, .keyed = true};
static SchedStatement request_read_0_2 = {REQUEST_COLUMNS_0_2, 1, {INT8OID}, .keyed = true};

/* The placement of a row whose columns from `first` on are SCHED_PLACEMENT_COLUMNS. */
static void
placement_of_columns(const RowColumns *rc, int first, int spread_key_column, TimestampTz at,
					 SchedPlacementArgs *out)
{
	SchedPlacement *p = &out->p;

	StaticAssertStmt(RQ_NODE_ID - RQ_CAPABILITY == SCHED_PLACEMENT_COLUMN_COUNT - 1,
					 "SCHED_PLACEMENT_COLUMNS and REQUEST_COLUMNS differ");
	memset(out, 0, sizeof(*out));
	p->capability = col_text(rc, first);
	p->capability_version = col_text(rc, first + 1);
	sched_required_labels_from_jsonb(DatumGetJsonbP(rc->v[first + 2]), "required_labels",
									 &p->required_labels);
	sched_labels_from_jsonb(DatumGetJsonbP(rc->v[first + 3]), "preferred_labels",
							&p->preferred_labels);
	p->min_cpu_millis = col_int64(rc, first + 4);
	p->min_memory_mb = col_int64(rc, first + 5);
	p->min_gpus = col_int64(rc, first + 6);
	p->reserve_cpu_millis = col_int64(rc, first + 7);
	p->reserve_memory_mb = col_int64(rc, first + 8);
	p->reserve_gpus = col_int64(rc, first + 9);
	p->pin_node_id = col_text(rc, first + 10);
	sched_placement_set_clock(out, at, NULL);
	if (spread_key_column > 0)
		out->spread_key = col_text(rc, spread_key_column);
}

void
sched_placement_decode(int row, int first, int spread_key_column, TimestampTz at,
					   SchedPlacementArgs *out)
{
	RowColumns	rc;

	spi_row_columns(row, &rc);
	placement_of_columns(&rc, first, spread_key_column, at, out);
}

/* The request row's fields (REQUEST_COLUMNS, and REQUEST_COLUMNS_0_2's with v0_2). */
static void
request_row_of_columns(const RowColumns *rc, bool v0_2, SchedRequestRow *row)
{
	memset(row, 0, sizeof(*row));
	row->request_id = col_int64(rc, RQ_REQUEST_ID);
	row->execution_id = *DatumGetUUIDP(rc->v[RQ_EXECUTION_ID]);
	row->step_id = *DatumGetUUIDP(rc->v[RQ_STEP_ID]);
	row->attempt_number = (int32) col_int64(rc, RQ_ATTEMPT_NUMBER);
	row->tenant = col_text(rc, RQ_TENANT);
	row->state = col_text(rc, RQ_STATE);
	row->has_claim = !rc->n[RQ_CLAIM_ID];
	if (row->has_claim)
		row->claim_id = *DatumGetUUIDP(rc->v[RQ_CLAIM_ID]);
	row->claimed_until = rc->n[RQ_CLAIMED_UNTIL] ? DT_NOBEGIN
		: DatumGetTimestampTz(rc->v[RQ_CLAIMED_UNTIL]);
	row->tries = (int32) col_int64(rc, RQ_TRIES);
	row->available_at = DatumGetTimestampTz(rc->v[RQ_AVAILABLE_AT]);
	row->avoid_node_id = col_text(rc, RQ_AVOID_NODE_ID);
	row->last_reason = col_text(rc, RQ_LAST_REASON);
	if (v0_2)
	{
		row->in_gang = !rc->n[RQ_GANG_ID];
		if (row->in_gang)
			row->gang_id = *DatumGetUUIDP(rc->v[RQ_GANG_ID]);
		row->priority = (int32) col_int64(rc, RQ_PRIORITY);
		row->preemptible = DatumGetBool(rc->v[RQ_PREEMPTIBLE]);
		row->concurrency_key = col_text(rc, RQ_CONCURRENCY_KEY);
		row->held_node_id = col_text(rc, RQ_HELD_NODE_ID);
		if (row->held_node_id != NULL)
		{
			row->held_worker_id = *DatumGetUUIDP(rc->v[RQ_HELD_WORKER_ID]);
			row->held_until = DatumGetTimestampTz(rc->v[RQ_HELD_UNTIL]);
		}
	}
}

/*
 * The columns of sched.request's row locked in slot, numbered as REQUEST_COLUMNS_0_2
 * (RQ_*): the tuple copied (its values outlive the slot), attribute numbers looked up
 * once per relation and kept while its descriptor has the same shape.
 */
static void
slot_request_columns(Relation rel, TupleTableSlot *slot, RowColumns *rc)
{
	static Oid	relid = InvalidOid;
	static int	natts = 0;
	static AttrNumber attnums[RQ_COUNT + 1];
	TupleDesc	desc = RelationGetDescr(rel);
	HeapTuple	tuple = ExecCopySlotHeapTuple(slot);
	Datum	   *values = palloc(sizeof(Datum) * desc->natts);
	bool	   *nulls = palloc(sizeof(bool) * desc->natts);
	int			k;

	if (relid != RelationGetRelid(rel) || natts != desc->natts)
	{
		for (k = 1; k <= RQ_COUNT; k++)
			attnums[k] = sched_column_of(rel, request_column_names[k]);
		relid = RelationGetRelid(rel);
		natts = desc->natts;
	}
	heap_deform_tuple(tuple, desc, values, nulls);
	rc->count = RQ_COUNT;
	rc->v = palloc(sizeof(Datum) * (RQ_COUNT + 1));
	rc->n = palloc(sizeof(bool) * (RQ_COUNT + 1));
	rc->t = palloc(sizeof(Oid) * (RQ_COUNT + 1));
	for (k = 1; k <= RQ_COUNT; k++)
	{
		rc->v[k] = values[attnums[k] - 1];
		rc->n[k] = nulls[attnums[k] - 1];
		rc->t[k] = TupleDescAttr(desc, attnums[k] - 1)->atttypid;
	}
}

/* The request in slot (a version of sched.request at tid) as sched_request_load gives
 * it: its placement into *out, its row into *row unless NULL. */
static void
request_of_slot(Relation rel, TupleTableSlot *slot, ItemPointer tid, TimestampTz at,
				SchedPlacementArgs *out, SchedRequestRow *row)
{
	RowColumns	rc;

	slot_request_columns(rel, slot, &rc);
	placement_of_columns(&rc, RQ_CAPABILITY, RQ_SPREAD_KEY, at, out);
	if (row != NULL)
	{
		request_row_of_columns(&rc, true, row);
		row->tid = *tid;
	}
}

/*
 * sched_request_load's locks at 0.2.0, in C (as the fleet's pair lock: no statement per
 * dispatch): what REQUEST_COLUMNS_0_2 FOR UPDATE OF r [SKIP LOCKED] does, through
 * request_pkey (sched_index_lock_row: the newest version under READ COMMITTED, 40001
 * under REPEATABLE READ and SERIALIZABLE for a row changed since the snapshot).
 */
static bool
request_lock_in_c(int64 request_id, bool wait, TimestampTz at, SchedPlacementArgs *out,
				  SchedRequestRow *row)
{
	SchedIndexScan s;
	ScanKeyData key;
	bool		locked;

	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_INT8EQ, Int64GetDatum(request_id));
	locked = sched_index_lock_row(&s, "request", "request_pkey", &key, 1, LockTupleExclusive,
								  wait) == SCHED_ROW_LOCKED;
	if (locked)
		request_of_slot(s.rel, s.slot, &s.slot->tts_tid, at, out, row);
	sched_index_scan_end(&s);
	return locked;
}

void
sched_request_placement_of_slot(Relation rel, TupleTableSlot *slot, TimestampTz at,
								SchedPlacementArgs *out)
{
	request_of_slot(rel, slot, &slot->tts_tid, at, out, NULL);
}

bool
sched_request_read_locked(ItemPointer tid, TimestampTz at, SchedPlacementArgs *out,
						  SchedRequestRow *row)
{
	Oid			relid;
	Relation	rel;
	HeapTuple	held;

	if (tid == NULL || !ItemPointerIsValid(tid))
		return false;			/* no version known: the caller reads by key */
	relid = get_relname_relid("request", get_namespace_oid("sched", false));
	if (!OidIsValid(relid))
		elog(ERROR, "pg_sched: sched.request is missing");
	rel = table_open(relid, RowShareLock);
	held = sched_row_version_held(rel, tid);
	if (held != NULL)
	{
		TupleTableSlot *slot = MakeSingleTupleTableSlot(RelationGetDescr(rel),
														&TTSOpsHeapTuple);

		ExecStoreHeapTuple(held, slot, true);
		request_of_slot(rel, slot, tid, at, out, row);
		ExecDropSingleTupleTableSlot(slot);
	}
	table_close(rel, NoLock);
	return held != NULL;
}

bool
sched_request_any_held(void)
{
	SchedIndexScan s;
	bool		found = false;

	sched_index_scan_begin_fresh(&s, "request", "request_held_idx", NULL, 0);
	while (!found && sched_index_scan_next(&s))
	{
		bool		isnull;

		(void) slot_getattr(s.slot, sched_column_of(s.rel, "held_until"), &isnull);
		found = !isnull;
	}
	sched_index_scan_end(&s);
	return found;
}

bool
sched_request_load(int64 request_id, SchedRowLock lock, TimestampTz at,
				   SchedPlacementArgs *out, SchedRequestRow *row)
{
	Datum		arg = Int64GetDatum(request_id);
	bool		v0_2 = sched_schema_is_0_2();
	RowColumns	rc;

	if (v0_2 && lock != SCHED_LOCK_NONE)
		return request_lock_in_c(request_id, lock == SCHED_LOCK_WAIT, at, out, row);
	sched_spi_exec(v0_2 ? &request_read_0_2
				   : (lock == SCHED_LOCK_NONE ? &request_read :
					  lock == SCHED_LOCK_WAIT ? &request_lock : &request_lock_skip),
				   &arg, NULL, lock == SCHED_LOCK_NONE, 1, SPI_OK_SELECT);
	if (SPI_processed == 0)
		return false;
	spi_row_columns(0, &rc);
	placement_of_columns(&rc, RQ_CAPABILITY, v0_2 ? RQ_SPREAD_KEY : 0, at, out);
	if (row != NULL)
		request_row_of_columns(&rc, v0_2, row);
	return true;
}
