#!/usr/bin/env bash
# test/hostile/run.sh — the generated hostile-input test (issue 12, item 5), against the
# running cluster of the environment (PGHOST, PGPORT, PGUSER; `test/harness.sh up` gives
# one, with pg_sched installed and preloaded).
#
# Creates its own database (sched_hostile_<pid>), builds a small fleet and queue in it as
# the superuser with the extension's functions, then test/hostile/hostile.py:
#   - lists every public function of schema sched from pg_proc (name not starting with
#     '_'), with its parameter names, types and defaults, and calls each one with
#     otherwise valid arguments and one parameter replaced in turn by hostile values
#     (NULL, '', 1 MB, control characters, unknown ids, integer extremes, malformed and
#     oversized JSON, infinite and out-of-range times, extreme intervals, odd arrays, stale
#     states), each call in a transaction that is rolled back;
#   - requires each call to succeed or to fail with a SQLSTATE of the README's Errors table
#     (never XX000, never a crash, never another SQLSTATE), where the README says which
#     code a value gets, that code, and that a refusal names the parameter;
#   - after every call: the server still answers, the md5 of every table of schema sched is
#     unchanged, and sched._fleet_mirror_check(capability) is 0 for every capability
#     (with pg_sched preloaded);
#   - then the regression cases of issue 12, each asserted, and at the end SELECT * of
#     every view and a pg_dump of the database.
# Prints every failure (function, parameter, value, SQLSTATE, message) and a summary of the
# calls by outcome; exits 1 on any failure.  The database is dropped at the end (kept with
# SCHED_HOSTILE_KEEP=1).  Options for hostile.py pass through: --only FUNC[,FUNC]
# (matrix for these functions only), --no-matrix, --no-regressions, -v (the function
# list, every failure as it happens, the regression assertions passed), --log FILE
# (every matrix call and its outcome).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
: "${PGHOST:?PGHOST must point at the test cluster (source the env file of test/harness.sh up)}"
: "${PGPORT:?PGPORT must be set}"
export PGUSER=${PGUSER:-postgres}

find_python() {
    local p
    for p in ${PYTHON:-} /usr/bin/python3 python3; do
        if command -v "$p" >/dev/null && "$p" -c 'import psycopg' 2>/dev/null; then
            PY=$(command -v "$p"); return 0
        fi
    done
    return 1
}
if ! find_python; then
    echo "FAIL: no python3 can import psycopg (install python3-psycopg)" >&2
    exit 2
fi

DB=sched_hostile_$$
PGBIN=/usr/lib/postgresql/15/bin
PSQL=psql; command -v psql >/dev/null || PSQL=$PGBIN/psql
PG_DUMP=$PGBIN/pg_dump; [ -x "$PG_DUMP" ] || PG_DUMP=pg_dump
export SCHED_HOSTILE_PG_DUMP=$PG_DUMP

cleanup() {
    if [ -z "${SCHED_HOSTILE_KEEP:-}" ]; then
        "$PSQL" -X -q -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 || true
    else
        echo "database $DB kept"
    fi
}
trap cleanup EXIT

"$PSQL" -X -q -v ON_ERROR_STOP=1 -d postgres -c "CREATE DATABASE $DB" >/dev/null
"$PSQL" -X -q -v ON_ERROR_STOP=1 -d "$DB" -c "CREATE EXTENSION pg_sched" >/dev/null

"$PY" "$HERE/hostile.py" --dbname "$DB" "$@"
