#!/usr/bin/env bash
# test/upgrade/run.sh — the upgrade test: a database made at 0.1.0 and brought to the
# default version by ALTER EXTENSION pg_sched UPDATE must have exactly the objects of a
# fresh CREATE EXTENSION, and its data must keep working.
#
# Uses the running cluster of the environment (PGHOST, PGPORT, PGUSER, a superuser),
# where the library and every sql/pg_sched--*.sql script are installed and pg_sched is
# preloaded (`make test` and `test/harness.sh up` provide one).  Steps:
#   0. the installed scripts: 0.1.0 and the default version are available, with an update
#      path from 0.1.0;
#   1. database sched_upgrade_old: CREATE EXTENSION pg_sched VERSION '0.1.0', then
#      load_0.1.0.sql (fleet, queue, live attempts, a failed attempt's retry, made with
#      0.1.0 functions only); invariants hold; the maxima of request_id, command_id and
#      timeline_id and the row counts are recorded, and a digest of every table's rows;
#      dispatch_next on the 0.1.0 database either works or refuses with SQLSTATE 55000;
#   2. ALTER EXTENSION pg_sched UPDATE: extversion is the default version; every table
#      still holds the same rows (the digest over the columns it had at 0.1.0);
#   3. database sched_upgrade_new: a fresh CREATE EXTENSION pg_sched;
#   4. describe.sql in both databases (every object of the extension, see its header)
#      must print the same; any difference is printed (with the source diff of the
#      functions whose source differs) and fails the test;
#   5. self-test: the description of a fresh install in a scratch database equals the
#      one of sched_upgrade_new, does not change with data or sequence values, and does
#      change with each of many small changes of the objects (each in a transaction that
#      is rolled back); a change it does not see fails the test;
#   6. the upgraded data works: dispatch_next places the pending requests (among them the
#      retry made at 0.1.0), workers poll their commands (also the one dispatched at
#      0.1.0) and start and finish attempts (also attempts started at 0.1.0), a failure
#      is retried, reap_expired marks every still-live attempt LOST and requeues it, a
#      second dispatch round places the requeued requests; new ids are above the
#      recorded maxima, ids are unique, one attempt per (step, attempt number), no live
#      attempt is left, the diagnostics views answer, test/pgbench/invariants.sql holds,
#      and the description is still the fresh install's;
#   7. the databases are dropped (on failure they are left for debugging).
# Prints one line per check; exits non-zero on the first failure; ends with
# "upgrade: N checks passed".
#
#   env: SCHED_UPGRADE_KEEP=1 keeps the databases also on success;
#        SCHED_UPGRADE_BEFORE_UPDATE='command' runs the command after step 1, before the
#        update (for example: install the new library and restart the server on the same
#        PGHOST/PGPORT, as a real upgrade goes); it must leave the server accepting
#        connections.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
TEST_SUITE=upgrade
# shellcheck source=test/lib/common.sh
source "$ROOT/test/lib/common.sh"      # say, fail (as "FAIL (upgrade): ..."); its own pass
: "${PGHOST:?PGHOST must point at the test cluster}" "${PGPORT:?PGPORT must be set}"
export PGUSER=${PGUSER:-postgres}
unset PGDATABASE

OLD=sched_upgrade_old
NEW=sched_upgrade_new
SCRATCH=sched_upgrade_scratch
FROM_VERSION=0.1.0
INVARIANTS="$ROOT/test/pgbench/invariants.sql"

WORK=$(mktemp -d /tmp/sched_upgrade.XXXXXX)
FAILED=1        # cleared at the end; the EXIT trap reports a failure
on_exit() {
    if [ "$FAILED" -ne 0 ]; then
        printf '%s\n' "FAIL (upgrade): after $CHECKS checks passed; databases $OLD, $NEW, $SCRATCH" \
            "  (those that were created) are left for debugging, and the files in $WORK" >&2
    else
        rm -rf "$WORK"
    fi
}
trap on_exit EXIT

pass() { CHECKS=$((CHECKS + 1)); printf '  ok %2d  %s\n' "$CHECKS" "$*"; }

PSQL=(psql -X -q -v ON_ERROR_STOP=1)
# value DB SQL: the single value the query returns (fields separated by a space)
value() { psql -X -q -At -F ' ' -v ON_ERROR_STOP=1 -d "$1" -c "$2"; }
# expect DB WHAT EXPECTED SQL: the query must return EXPECTED
expect() {
    local got
    got=$(value "$1" "$4") || fail "$2: the query failed: $4"
    [ "$got" = "$3" ] || fail "$2: expected '$3', got '$got'
  query: $4"
    pass "$2"
}
describe() { # describe DB OUTFILE
    "${PSQL[@]}" -At -d "$1" -f "$HERE/describe.sql" >"$2" || fail "describe.sql failed in $1"
}
invariants() { # invariants DB WHEN
    local out
    if out=$("${PSQL[@]}" -d "$1" -f "$INVARIANTS" 2>&1); then
        pass "test/pgbench/invariants.sql holds $2 ($(grep -c 'invariant .*: ok' <<<"$out") invariants)"
    else
        printf '%s\n' "$out" >&2
        fail "test/pgbench/invariants.sql is violated $2 (above)"
    fi
}
fresh_db() { # fresh_db DB [VERSION]
    "${PSQL[@]}" -d postgres -c "SET client_min_messages = warning" \
        -c "DROP DATABASE IF EXISTS $1 WITH (FORCE)" -c "CREATE DATABASE $1"
    if [ -n "${2:-}" ]; then
        "${PSQL[@]}" -d "$1" -c "CREATE EXTENSION pg_sched VERSION '$2'"
    else
        "${PSQL[@]}" -d "$1" -c "CREATE EXTENSION pg_sched"
    fi
}

# ---- 0. what is installed ------------------------------------------------------------------
say "cluster $PGHOST:$PGPORT"
DEFAULT_VERSION=$(value postgres "SELECT default_version FROM pg_available_extensions WHERE name = 'pg_sched'")
[ -n "$DEFAULT_VERSION" ] || fail "extension pg_sched is not installed in this cluster"
say "pg_sched: default version $DEFAULT_VERSION; available: $(value postgres \
    "SELECT string_agg(version, ' ' ORDER BY version) FROM pg_available_extension_versions WHERE name = 'pg_sched'")"
[ "$DEFAULT_VERSION" != "$FROM_VERSION" ] || fail "the default version is still $FROM_VERSION: nothing to upgrade to"
expect postgres "version $FROM_VERSION is installed (its script)" t \
    "SELECT EXISTS (SELECT 1 FROM pg_available_extension_versions WHERE name = 'pg_sched' AND version = '$FROM_VERSION')"
expect postgres "an update path $FROM_VERSION -> $DEFAULT_VERSION exists" t \
    "SELECT path IS NOT NULL FROM pg_extension_update_paths('pg_sched') WHERE source = '$FROM_VERSION' AND target = '$DEFAULT_VERSION'"
say "update path: $(value postgres "SELECT path FROM pg_extension_update_paths('pg_sched') WHERE source = '$FROM_VERSION' AND target = '$DEFAULT_VERSION'")"
[ -f "$INVARIANTS" ] || say "no $INVARIANTS: the invariants are not checked"

# ---- 1. a database at 0.1.0 with data ---------------------------------------------------------
say "1. $OLD: CREATE EXTENSION pg_sched VERSION '$FROM_VERSION', fleet, queue, live attempts"
fresh_db "$OLD" "$FROM_VERSION"
expect "$OLD" "$OLD is at $FROM_VERSION" "$FROM_VERSION" "SELECT extversion FROM pg_extension WHERE extname = 'pg_sched'"
"${PSQL[@]}" -d "$OLD" -f "$HERE/load_0.1.0.sql" >"$WORK/load.out" 2>&1 \
    || { cat "$WORK/load.out" >&2; fail "loading the $FROM_VERSION data failed (above): a $FROM_VERSION function failed on the $FROM_VERSION database"; }
expect "$OLD" "dispatch_attempt at 0.1.0: steps 1-6, 9 DISPATCHED, 10 UNSCHEDULABLE" \
    "1 DISPATCHED|2 DISPATCHED|3 DISPATCHED|4 DISPATCHED|5 DISPATCHED|6 DISPATCHED|9 DISPATCHED|10 UNSCHEDULABLE" \
    "SELECT string_agg(n || ' ' || outcome, '|' ORDER BY n) FROM public.upgrade_step WHERE outcome IS NOT NULL"
expect "$OLD" "poll_commands at 0.1.0 delivered the 6 START commands of steps 1-5, 9" "6 6" \
    "SELECT count(*), count(*) FILTER (WHERE p.kind = 'START' AND a.request_id IN
            (SELECT request_id FROM public.upgrade_step WHERE n IN (1, 2, 3, 4, 5, 9)))
       FROM public.upgrade_polled_before p JOIN sched.attempt a USING (attempt_id)"
expect "$OLD" "state at 0.1.0: attempts by status, requests by state" \
    "attempts DISPATCHED 2, FAILED 1, RUNNING 3, SUCCEEDED 1; requests DISPATCHED 7, PENDING 5" \
    "SELECT 'attempts ' || (SELECT string_agg(status || ' ' || n, ', ' ORDER BY status)
                              FROM (SELECT status, count(*) n FROM sched.attempt GROUP BY 1) s)
         || '; requests ' || (SELECT string_agg(state || ' ' || n, ', ' ORDER BY state)
                              FROM (SELECT state, count(*) n FROM sched.request GROUP BY 1) s)"
expect "$OLD" "the retry of the FAILED attempt is queued (step 2 attempt 2, avoiding its node)" "PENDING t" \
    "SELECT r.state, r.avoid_node_id = a.node_id FROM sched.request r
       JOIN sched.attempt a ON a.step_id = r.step_id AND a.attempt_number = 1
      WHERE r.step_id = md5('upgrade-step-2')::uuid AND r.attempt_number = 2"
expect "$OLD" "one START command of step 6 is undelivered" "1" \
    "SELECT count(*) FROM sched.command c JOIN public.upgrade_step s ON s.request_id = c.request_id
      WHERE s.n = 6 AND c.delivered_at IS NULL"
[ -f "$INVARIANTS" ] && invariants "$OLD" "at $FROM_VERSION"

# dispatch_next on a database still at 0.1.0: works, or refuses with 55000 (never another
# error); rolled back either way
probe=$("${PSQL[@]}" -At -d "$OLD" -c "
    DO \$\$ DECLARE st text; msg text; hint text;
    BEGIN
        BEGIN
            PERFORM count(*) FROM sched.dispatch_next(1);
            RAISE EXCEPTION 'probe done' USING ERRCODE = 'P0099';
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, hint = PG_EXCEPTION_HINT;
        END;
        RAISE WARNING 'probe|%|% %', st, msg, hint;
    END \$\$;" 2>&1) || fail "the dispatch_next probe failed: $probe"
probe_state=$(sed -n 's/.*probe|\([^|]*\)|.*/\1/p' <<<"$probe")
probe_msg=$(sed -n 's/.*probe|[^|]*|\(.*\)/\1/p' <<<"$probe")
case "$probe_state" in
    P0099) pass "dispatch_next on the $FROM_VERSION database works (probe rolled back)" ;;
    55000) pass "dispatch_next on the $FROM_VERSION database refuses with 55000: $probe_msg" ;;
    *) fail "dispatch_next on the $FROM_VERSION database failed with SQLSTATE '$probe_state' (only 55000 is allowed): $probe_msg" ;;
esac

# what the update must preserve
"${PSQL[@]}" -d "$OLD" -c "
    CREATE TABLE public.upgrade_before AS SELECT
        (SELECT max(request_id) FROM sched.request) AS max_request_id,
        (SELECT max(command_id) FROM sched.command) AS max_command_id,
        (SELECT max(timeline_id) FROM sched.timeline) AS max_timeline_id,
        (SELECT count(*) FROM sched.request) AS requests,
        (SELECT count(*) FROM sched.command) AS commands,
        (SELECT count(*) FROM sched.timeline) AS timelines,
        (SELECT count(*) FROM sched.attempt) AS attempts;
    -- every table of the extension: its columns now, and a digest of its rows over them
    CREATE FUNCTION public.upgrade_digest(tbl regclass, cols text[]) RETURNS text
    LANGUAGE plpgsql AS \$f\$
    DECLARE d text;
    BEGIN
        EXECUTE format('SELECT count(*) || '' rows, md5 '' || coalesce(md5(string_agg(t::text, E''\n'' ORDER BY t::text)), ''-'')
                          FROM (SELECT %s FROM %s) t',
                       (SELECT string_agg(quote_ident(c), ', ') FROM unnest(cols) c), tbl) INTO d;
        RETURN d;
    END \$f\$;
    CREATE TABLE public.upgrade_table AS
    SELECT c.oid::regclass::text AS tbl,
           ARRAY(SELECT a.attname::text FROM pg_attribute a
                  WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum) AS cols,
           NULL::text AS digest
      FROM pg_class c JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid
     WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
       AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'pg_sched') AND c.relkind = 'r';
    UPDATE public.upgrade_table SET digest = public.upgrade_digest(tbl::regclass, cols);"
read -r MAX_RID MAX_CID MAX_TID N_REQ N_CMD N_TL N_ATT < <(value "$OLD" "TABLE public.upgrade_before")
say "recorded at $FROM_VERSION: max request_id $MAX_RID, command_id $MAX_CID, timeline_id $MAX_TID;" \
    "$N_REQ requests, $N_CMD commands, $N_TL milestones, $N_ATT attempts;" \
    "$(value "$OLD" "SELECT count(*) FROM public.upgrade_table") tables digested"

if [ -n "${SCHED_UPGRADE_BEFORE_UPDATE:-}" ]; then
    say "SCHED_UPGRADE_BEFORE_UPDATE: $SCHED_UPGRADE_BEFORE_UPDATE"
    bash -c "$SCHED_UPGRADE_BEFORE_UPDATE" || fail "SCHED_UPGRADE_BEFORE_UPDATE failed"
fi

# ---- 2. the update -------------------------------------------------------------------------
say "2. $OLD: ALTER EXTENSION pg_sched UPDATE"
"${PSQL[@]}" -d "$OLD" -c "ALTER EXTENSION pg_sched UPDATE" >"$WORK/update.out" 2>&1 \
    || { cat "$WORK/update.out" >&2; fail "ALTER EXTENSION pg_sched UPDATE failed (above)"; }
expect "$OLD" "extversion after the update is $DEFAULT_VERSION" "$DEFAULT_VERSION" \
    "SELECT extversion FROM pg_extension WHERE extname = 'pg_sched'"
changed=$(value "$OLD" "SELECT string_agg(format('%s: %s, now %s', tbl, digest,
                                                 coalesce(public.upgrade_digest(to_regclass(tbl), cols), 'table gone')), E'\n  ')
                          FROM public.upgrade_table
                         WHERE public.upgrade_digest(to_regclass(tbl), cols) IS DISTINCT FROM digest") \
    || fail "the rows of a table cannot be read over its $FROM_VERSION columns after the update (a column dropped or renamed?)"
[ -z "$changed" ] || fail "the update changed the rows of tables (over their $FROM_VERSION columns):
  $changed"
pass "every table keeps its rows over its $FROM_VERSION columns ($(value "$OLD" "SELECT string_agg(tbl || ' ' || split_part(digest, ',', 1), ', ' ORDER BY tbl) FROM public.upgrade_table WHERE digest NOT LIKE '0 rows%'"))"

# the role model of 0.2.0 (README "Privileges") on the upgraded database
expect "$OLD" "the four roles exist after the update, with their memberships" \
    "sched_admin:sched_scheduler,sched_worker sched_observer: sched_scheduler:sched_observer sched_worker:" \
    "SELECT string_agg(r.rolname || ':' || coalesce((SELECT string_agg(g.rolname, ',' ORDER BY g.rolname)
                                                       FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
                                                      WHERE m.member = r.oid), ''), ' ' ORDER BY r.rolname)
       FROM pg_roles r WHERE r.rolname IN ('sched_admin', 'sched_observer', 'sched_scheduler', 'sched_worker')
        AND NOT r.rolcanlogin"
expect "$OLD" "the grants the 0.1.0 README asked for (tables, sequences, functions, schema) are revoked" "0" \
    "SELECT (SELECT count(*) FROM pg_class c, aclexplode(c.relacl) x
              WHERE c.relnamespace = 'sched'::regnamespace AND x.grantee = 'sched_upgrade_app'::regrole)
          + (SELECT count(*) FROM pg_proc p, aclexplode(p.proacl) x
              WHERE p.pronamespace = 'sched'::regnamespace AND x.grantee = 'sched_upgrade_app'::regrole)
          + (SELECT count(*) FROM pg_namespace n, aclexplode(n.nspacl) x
              WHERE n.nspname = 'sched' AND x.grantee = 'sched_upgrade_app'::regrole)"
expect "$OLD" "no role but the owner may write a table of the extension" "0" \
    "SELECT count(*) FROM pg_class c, aclexplode(c.relacl) x
      WHERE c.relnamespace = 'sched'::regnamespace AND x.grantee <> c.relowner
        AND x.privilege_type IN ('INSERT', 'UPDATE', 'DELETE', 'TRUNCATE')"
expect "$OLD" "the settings that bound leases, heartbeats, backoffs, starvation and aging are superuser-only" \
    "6 superuser" \
    "LOAD 'pg_sched'; SELECT count(*) || ' ' || string_agg(DISTINCT context, ',') FROM pg_settings
      WHERE name IN ('sched.heartbeat_ttl', 'sched.lease_ttl', 'sched.retry_backoff_max',
                     'sched.unschedulable_backoff_max', 'sched.starvation_after', 'sched.aging_interval')"
expect "$OLD" "the workers registered at $FROM_VERSION are owned by no role" "0 5" \
    "SELECT count(registered_by) || ' ' || count(*) FROM sched.worker"
value "$OLD" "DO \$\$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'sched_upgrade_worker') THEN
                CREATE ROLE sched_upgrade_worker NOLOGIN; END IF; END \$\$;
              GRANT sched_worker TO sched_upgrade_worker" >/dev/null
expect "$OLD" "a sched_worker may not heartbeat a worker from $FROM_VERSION (42501), which is unchanged" \
    "42501 unchanged" \
    "SET ROLE sched_upgrade_worker;
     DO \$\$ BEGIN
         PERFORM sched.heartbeat(w.worker_id, w.generation, runtime_state => 'DRAINING')
            FROM sched.worker w WHERE w.node_id = 'node-c' AND w.capability = 'train';
         RAISE EXCEPTION 'allowed';
     EXCEPTION WHEN insufficient_privilege THEN RAISE NOTICE '42501'; END \$\$;
     RESET ROLE;
     SELECT '42501 ' || CASE WHEN runtime_state = 'READY' THEN 'unchanged' ELSE 'changed' END
       FROM sched.worker WHERE node_id = 'node-c' AND capability = 'train'"

# ---- 3. a fresh install ------------------------------------------------------------------------
say "3. $NEW: CREATE EXTENSION pg_sched"
fresh_db "$NEW"
expect "$NEW" "the fresh install is at $DEFAULT_VERSION" "$DEFAULT_VERSION" \
    "SELECT extversion FROM pg_extension WHERE extname = 'pg_sched'"

# ---- 4. the same objects ----------------------------------------------------------------------
# same_description A B: quiet when equal; else prints the diff (A = "-", B = "+")
same_description() {
    diff -u --label "$3" --label "$4" "$1" "$2" >"$WORK/last.diff" && return 0
    return 1
}
source_diffs() { # for the functions whose source md5 differs: the diff of their sources
    local fns f
    fns=$(sed -n 's/^[-+]\(function\|procedure\|aggregate\|window function\) \(.*\) | source md5 | .*/\2/p' "$WORK/last.diff" | sort -u)
    [ -n "$fns" ] || return 0
    while IFS= read -r f; do
        for db in "$OLD" "$NEW"; do
            value "$db" "SET search_path = pg_catalog; SELECT prosrc FROM pg_proc WHERE oid = to_regprocedure('$(sed "s/'/''/g" <<<"$f")')" \
                >"$WORK/src.$db" 2>&1 || true
        done
        echo "--- source of $f: upgraded (-) vs fresh (+)"
        diff -u --label "upgraded $f" --label "fresh $f" "$WORK/src.$OLD" "$WORK/src.$NEW" || true
    done <<<"$fns"
}
say "4. every object of the extension: upgraded $OLD vs fresh $NEW"
describe "$OLD" "$WORK/upgraded.txt"
describe "$NEW" "$WORK/fresh.txt"
lines=$(wc -l <"$WORK/fresh.txt")
[ "$lines" -gt 100 ] && grep -q '^member | schema | ' "$WORK/fresh.txt" \
    && grep -q "^extension pg_sched | version | $DEFAULT_VERSION\$" "$WORK/fresh.txt" \
    || fail "describe.sql printed too little ($lines lines, see $WORK/fresh.txt)"
if same_description "$WORK/upgraded.txt" "$WORK/fresh.txt" "upgraded ($OLD)" "fresh ($NEW)"; then
    pass "upgraded and fresh $DEFAULT_VERSION are identical ($lines lines of description," \
         "$(grep -c '^member | ' "$WORK/fresh.txt") member objects)"
else
    echo "=== upgraded ($OLD, -) and fresh ($NEW, +) $DEFAULT_VERSION differ:" >&2
    cat "$WORK/last.diff" >&2
    source_diffs >&2
    fail "the upgraded database differs from a fresh install of $DEFAULT_VERSION (diff above;" \
         "full descriptions in $WORK/upgraded.txt and $WORK/fresh.txt)"
fi

# ---- 5. self-test: the comparison can fail ------------------------------------------------------
say "5. self-test of the comparison, in $SCRATCH (a fresh install)"
fresh_db "$SCRATCH"
describe "$SCRATCH" "$WORK/scratch.txt"
same_description "$WORK/fresh.txt" "$WORK/scratch.txt" "$NEW" "$SCRATCH" \
    || { cat "$WORK/last.diff" >&2; fail "two fresh installs in two databases differ (above): the description shows something database-specific"; }
pass "two fresh installs in two databases describe the same"

# Each case runs in a transaction that is rolled back.  Cases that pick "the first"
# object of a kind look it up, so they do not depend on what the version contains.
FIRST_FN="(SELECT p.oid::regprocedure FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
            WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
              AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'pg_sched')
              AND p.prolang IN (SELECT oid FROM pg_language WHERE lanname IN ('plpgsql', 'sql')) AND p.prokind = 'f'
            ORDER BY p.oid::regprocedure::text LIMIT 1)"
MEMBER_REL="c.oid IN (SELECT objid FROM pg_depend WHERE classid = 'pg_class'::regclass AND refclassid = 'pg_extension'::regclass
                        AND deptype = 'e' AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'pg_sched'))"
do_sql() { printf 'DO $$ DECLARE x record; BEGIN %s END $$' "$1"; }
declare -a CASE_NAMES=() CASE_SQL=()
add_case() { CASE_NAMES+=("$1"); CASE_SQL+=("$2"); }
add_case "column default"            "ALTER TABLE sched.node ALTER COLUMN weight SET DEFAULT 7"
add_case "column NOT NULL"           "ALTER TABLE sched.node ALTER COLUMN weight DROP NOT NULL"
add_case "column added"              "ALTER TABLE sched.node ADD COLUMN upgrade_selftest int"
add_case "column type"               "ALTER TABLE sched.tenant ALTER COLUMN weight TYPE bigint"
add_case "column collation"          "ALTER TABLE sched.timeline ALTER COLUMN title TYPE text COLLATE \"POSIX\""
add_case "column storage"            "ALTER TABLE sched.timeline ALTER COLUMN title SET STORAGE EXTERNAL"
add_case "column statistics target"  "ALTER TABLE sched.node ALTER COLUMN weight SET STATISTICS 500"
add_case "generated column"          "$(do_sql "
    SELECT a.attrelid::regclass AS t, a.attname AS c INTO x FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
     WHERE $MEMBER_REL AND a.attgenerated <> '' AND NOT a.attisdropped ORDER BY 1, 2 LIMIT 1;
    IF FOUND THEN EXECUTE format('ALTER TABLE %s ALTER COLUMN %I DROP EXPRESSION', x.t, x.c);
    ELSE ALTER TABLE sched.node ADD COLUMN upgrade_selftest int GENERATED ALWAYS AS (weight * 2) STORED; END IF;")"
add_case "identity column"           "ALTER TABLE sched.tenant_live ALTER COLUMN backend ADD GENERATED BY DEFAULT AS IDENTITY"
add_case "column position"           "ALTER TABLE sched.node DROP COLUMN weight, ADD COLUMN weight int NOT NULL DEFAULT 100"
add_case "constraint added"          "ALTER TABLE sched.node ADD CONSTRAINT upgrade_selftest CHECK (weight > -1)"
add_case "constraint NOT VALID"      "$(do_sql "
    SELECT co.conrelid::regclass AS t, co.conname AS n, pg_get_constraintdef(co.oid) AS def INTO x
      FROM pg_constraint co JOIN pg_class c ON c.oid = co.conrelid
     WHERE $MEMBER_REL AND co.contype = 'c' ORDER BY 1, 2 LIMIT 1;
    EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I, ADD CONSTRAINT %I %s NOT VALID', x.t, x.n, x.n, x.def);")"
add_case "constraint dropped"        "$(do_sql "
    SELECT co.conrelid::regclass AS t, co.conname AS n INTO x
      FROM pg_constraint co JOIN pg_class c ON c.oid = co.conrelid
     WHERE $MEMBER_REL AND co.contype = 'c' ORDER BY 1, 2 DESC LIMIT 1;
    EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', x.t, x.n);")"
add_case "index added"               "CREATE INDEX upgrade_selftest_idx ON sched.node (weight)"
add_case "index options"             "$(do_sql "
    SELECT i.indexrelid::regclass AS i INTO x FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
     WHERE $MEMBER_REL AND NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conindid = i.indexrelid) ORDER BY 1 LIMIT 1;
    EXECUTE format('ALTER INDEX %s SET (fillfactor = 50)', x.i);")"
add_case "index dropped"             "$(do_sql "
    SELECT i.indexrelid::regclass AS i INTO x FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
     WHERE $MEMBER_REL AND NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conindid = i.indexrelid) ORDER BY 1 DESC LIMIT 1;
    EXECUTE format('DROP INDEX %s', x.i);")"
add_case "trigger disabled"          "$(do_sql "
    SELECT t.tgrelid::regclass AS r, t.tgname AS n INTO x FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
     WHERE $MEMBER_REL AND NOT t.tgisinternal ORDER BY 1, 2 LIMIT 1;
    EXECUTE format('ALTER TABLE %s DISABLE TRIGGER %I', x.r, x.n);")"
add_case "trigger dropped"           "$(do_sql "
    SELECT t.tgrelid::regclass AS r, t.tgname AS n INTO x FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
     WHERE $MEMBER_REL AND NOT t.tgisinternal ORDER BY 1, 2 DESC LIMIT 1;
    EXECUTE format('DROP TRIGGER %I ON %s', x.n, x.r);")"
add_case "table comment"             "COMMENT ON TABLE sched.node IS 'upgrade self-test'"
add_case "column comment"            "COMMENT ON COLUMN sched.node.weight IS 'upgrade self-test'"
add_case "function comment"          "$(do_sql "EXECUTE format('COMMENT ON FUNCTION %s IS %L', $FIRST_FN, 'upgrade self-test');")"
add_case "schema comment"            "COMMENT ON SCHEMA sched IS 'upgrade self-test'"
add_case "table privilege"           "GRANT INSERT ON sched.node TO sched_observer"
add_case "column privilege"          "GRANT UPDATE (weight) ON sched.node TO sched_observer"
add_case "function privilege"        "$(do_sql "
    SELECT p.oid::regprocedure AS f INTO x FROM pg_proc p WHERE p.pronamespace = 'sched'::regnamespace
       AND NOT has_function_privilege('sched_observer', p.oid, 'EXECUTE') ORDER BY 1 LIMIT 1;
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO sched_observer', x.f);")"
add_case "function privilege revoked" "$(do_sql "
    SELECT p.oid::regprocedure AS f INTO x FROM pg_proc p WHERE p.pronamespace = 'sched'::regnamespace
       AND has_function_privilege('sched_observer', p.oid, 'EXECUTE') ORDER BY 1 LIMIT 1;
    EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM sched_observer', x.f);")"
add_case "function granted to PUBLIC" "$(do_sql "EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO PUBLIC', $FIRST_FN);")"
add_case "schema privilege"          "GRANT CREATE ON SCHEMA sched TO sched_observer"
add_case "sequence privilege"        "$(do_sql "
    SELECT c.oid::regclass AS s INTO x FROM pg_class c WHERE $MEMBER_REL AND c.relkind = 'S' ORDER BY 1 LIMIT 1;
    EXECUTE format('GRANT USAGE ON SEQUENCE %s TO sched_observer', x.s);")"
add_case "type privilege"            "$(do_sql "
    SELECT t.oid::regtype AS t INTO x FROM pg_type t WHERE t.typnamespace = 'sched'::regnamespace AND t.typtype = 'c'
       AND (SELECT relkind FROM pg_class WHERE oid = t.typrelid) = 'c' ORDER BY 1 LIMIT 1;
    EXECUTE format('REVOKE USAGE ON TYPE %s FROM PUBLIC', x.t);")"
add_case "default privileges"        "ALTER DEFAULT PRIVILEGES IN SCHEMA sched GRANT SELECT ON TABLES TO sched_observer"
add_case "initial privileges"        "DELETE FROM pg_init_privs WHERE classoid = 'pg_class'::regclass AND objoid = 'sched.node'::regclass"
add_case "function volatility"       "$(do_sql "
    EXECUTE format('ALTER FUNCTION %s %s', $FIRST_FN,
                   CASE WHEN (SELECT provolatile FROM pg_proc WHERE oid = $FIRST_FN) = 'v' THEN 'STABLE' ELSE 'VOLATILE' END);")"
add_case "function strictness"       "$(do_sql "
    EXECUTE format('ALTER FUNCTION %s %s', $FIRST_FN,
                   CASE WHEN (SELECT proisstrict FROM pg_proc WHERE oid = $FIRST_FN) THEN 'CALLED ON NULL INPUT' ELSE 'STRICT' END);")"
add_case "function SECURITY DEFINER" "$(do_sql "
    EXECUTE format('ALTER FUNCTION %s %s', $FIRST_FN,
                   CASE WHEN (SELECT prosecdef FROM pg_proc WHERE oid = $FIRST_FN) THEN 'SECURITY INVOKER' ELSE 'SECURITY DEFINER' END);")"
add_case "function leakproof"        "$(do_sql "
    EXECUTE format('ALTER FUNCTION %s %s', $FIRST_FN,
                   CASE WHEN (SELECT proleakproof FROM pg_proc WHERE oid = $FIRST_FN) THEN 'NOT LEAKPROOF' ELSE 'LEAKPROOF' END);")"
add_case "function parallel"         "$(do_sql "
    EXECUTE format('ALTER FUNCTION %s %s', $FIRST_FN,
                   CASE WHEN (SELECT proparallel FROM pg_proc WHERE oid = $FIRST_FN) = 's' THEN 'PARALLEL UNSAFE' ELSE 'PARALLEL SAFE' END);")"
add_case "function cost"             "$(do_sql "EXECUTE format('ALTER FUNCTION %s COST 12345', $FIRST_FN);")"
add_case "function SET option"       "$(do_sql "EXECUTE format('ALTER FUNCTION %s SET work_mem = %L', $FIRST_FN, '1234kB');")"
add_case "function source"           "UPDATE pg_proc SET prosrc = prosrc || ' ' WHERE oid = $FIRST_FN"
add_case "function argument default" "UPDATE pg_proc SET proargdefaults = NULL, pronargdefaults = 0
                                       WHERE oid = (SELECT oid FROM pg_proc WHERE pronamespace = 'sched'::regnamespace
                                                       AND pronargdefaults > 0 ORDER BY oid::regprocedure::text LIMIT 1)"
add_case "function renamed argument" "UPDATE pg_proc SET proargnames[1] = 'upgrade_selftest'
                                       WHERE oid = (SELECT oid FROM pg_proc WHERE pronamespace = 'sched'::regnamespace
                                                       AND proargnames IS NOT NULL ORDER BY oid::regprocedure::text LIMIT 1)"
add_case "function added"            "CREATE FUNCTION sched.upgrade_selftest() RETURNS int LANGUAGE sql AS 'SELECT 1'"
add_case "member removed"            "$(do_sql "EXECUTE format('ALTER EXTENSION pg_sched DROP FUNCTION %s', $FIRST_FN);")"
add_case "table not a member"        "CREATE TABLE sched.upgrade_selftest (i int)"
add_case "table owner"               "ALTER TABLE sched.node OWNER TO sched_observer"
add_case "table options"             "ALTER TABLE sched.node SET (fillfactor = 50)"
add_case "replica identity"          "ALTER TABLE sched.node REPLICA IDENTITY FULL"
add_case "unlogged table"            "ALTER TABLE sched.tenant_live SET UNLOGGED"
add_case "row level security"        "ALTER TABLE sched.node ENABLE ROW LEVEL SECURITY"
add_case "policy"                    "CREATE POLICY upgrade_selftest ON sched.node USING (true)"
add_case "rule"                      "CREATE RULE upgrade_selftest AS ON DELETE TO sched.tenant DO INSTEAD NOTHING"
add_case "extended statistics"       "CREATE STATISTICS sched.upgrade_selftest ON cpu_millis, memory_mb FROM sched.node"
add_case "view options"              "$(do_sql "
    SELECT c.oid::regclass AS v INTO x FROM pg_class c WHERE $MEMBER_REL AND c.relkind = 'v' ORDER BY 1 LIMIT 1;
    EXECUTE format('ALTER VIEW %s SET (security_barrier = true)', x.v);")"
add_case "view definition"           "$(do_sql "
    SELECT c.oid::regclass AS v, pg_get_viewdef(c.oid) AS def INTO x FROM pg_class c WHERE $MEMBER_REL AND c.relkind = 'v' ORDER BY 1 LIMIT 1;
    EXECUTE format('CREATE OR REPLACE VIEW %s AS SELECT * FROM (%s) s', x.v, rtrim(x.def, ';'));")"
add_case "sequence parameters"       "$(do_sql "
    SELECT c.oid::regclass AS s INTO x FROM pg_class c WHERE $MEMBER_REL AND c.relkind = 'S' ORDER BY 1 LIMIT 1;
    EXECUTE format('ALTER SEQUENCE %s INCREMENT BY 2', x.s);")"
add_case "sequence owner column"     "$(do_sql "
    SELECT c.oid::regclass AS s INTO x FROM pg_class c WHERE $MEMBER_REL AND c.relkind = 'S' ORDER BY 1 LIMIT 1;
    EXECUTE format('ALTER SEQUENCE %s OWNED BY NONE', x.s);")"
add_case "composite type attribute"  "$(do_sql "
    SELECT t.oid::regtype AS t INTO x FROM pg_type t WHERE t.typnamespace = 'sched'::regnamespace AND t.typtype = 'c'
       AND (SELECT relkind FROM pg_class WHERE oid = t.typrelid) = 'c' ORDER BY 1 LIMIT 1;
    EXECUTE format('ALTER TYPE %s ADD ATTRIBUTE upgrade_selftest int', x.t);")"
add_case "extension config condition" "UPDATE pg_extension SET extcondition[1] = 'WHERE false' WHERE extname = 'pg_sched'"
add_case "extension config table"    "UPDATE pg_extension SET extconfig = extconfig[2:], extcondition = extcondition[2:] WHERE extname = 'pg_sched'"
add_case "extension version"         "UPDATE pg_extension SET extversion = 'upgrade-selftest' WHERE extname = 'pg_sched'"
add_case "role attribute"            "ALTER ROLE sched_observer CONNECTION LIMIT 5"
add_case "role membership"           "GRANT pg_read_all_stats TO sched_observer"
add_case "role setting"              "ALTER ROLE sched_observer SET work_mem = '1234kB'"

# what must NOT change the description: data, sequence values, statistics
declare -a SAME_NAMES=() SAME_SQL=()
SAME_NAMES+=("rows and sequence values"); SAME_SQL+=("SELECT sched.upsert_node('upgrade-selftest', cpu_millis => 1000);
    $(do_sql "FOR x IN SELECT c.oid::regclass AS s FROM pg_class c WHERE $MEMBER_REL AND c.relkind = 'S' LOOP
                  PERFORM setval(x.s, 1000); END LOOP;")")
SAME_NAMES+=("ANALYZE");                  SAME_SQL+=("ANALYZE")

run_case() { # run_case SQL OUTFILE: the description with SQL applied, in a rolled-back transaction
    {
        printf 'BEGIN;\n%s;\n\\o %s\n\\i %s\n\\o\nROLLBACK;\n' "$1" "$2" "$HERE/describe.sql"
    } >"$WORK/case.sql"
    "${PSQL[@]}" -At -d "$SCRATCH" -f "$WORK/case.sql" >"$WORK/case.out" 2>&1
}
unseen=()
for i in "${!CASE_NAMES[@]}"; do
    name=${CASE_NAMES[$i]}
    run_case "${CASE_SQL[$i]}" "$WORK/case.txt" \
        || { cat "$WORK/case.out" >&2; fail "self-test case '$name' could not be applied (above): ${CASE_SQL[$i]}"; }
    if same_description "$WORK/scratch.txt" "$WORK/case.txt" fresh "$name"; then
        unseen+=("$name")
    else
        printf '         %-28s seen: %s\n' "$name" "$(grep -m1 '^[-+][^-+]' "$WORK/last.diff" | cut -c1-110)"
    fi
done
[ ${#unseen[@]} -eq 0 ] || fail "the description does not see these changes: ${unseen[*]}"
pass "each of ${#CASE_NAMES[@]} small changes of the objects changes the description"
for i in "${!SAME_NAMES[@]}"; do
    run_case "${SAME_SQL[$i]}" "$WORK/case.txt" \
        || { cat "$WORK/case.out" >&2; fail "self-test case '${SAME_NAMES[$i]}' could not be applied (above)"; }
    same_description "$WORK/scratch.txt" "$WORK/case.txt" fresh "${SAME_NAMES[$i]}" \
        || { cat "$WORK/last.diff" >&2; fail "the description changes with ${SAME_NAMES[$i]} (above): it must not"; }
    pass "the description does not change with ${SAME_NAMES[$i]}"
done
# physical column numbers do not matter: a table whose column was dropped and added
# again describes like one created with the columns in that order
run_case "ALTER TABLE sched.node ADD COLUMN upgrade_a int, ADD COLUMN upgrade_b int; ALTER TABLE sched.node DROP COLUMN upgrade_a" "$WORK/case_a.txt" \
    || { cat "$WORK/case.out" >&2; fail "self-test: dropped column case could not be applied"; }
run_case "ALTER TABLE sched.node ADD COLUMN upgrade_b int" "$WORK/case_b.txt" \
    || { cat "$WORK/case.out" >&2; fail "self-test: added column case could not be applied"; }
same_description "$WORK/case_b.txt" "$WORK/case_a.txt" "added" "added, a dropped one before it" \
    || { cat "$WORK/last.diff" >&2; fail "a dropped column changes the description (above): it must not"; }
pass "the description does not change with a dropped column's gap in the column numbers"
describe "$SCRATCH" "$WORK/scratch_after.txt"
same_description "$WORK/scratch.txt" "$WORK/scratch_after.txt" before after \
    || { cat "$WORK/last.diff" >&2; fail "the self-test left changes behind in $SCRATCH (above)"; }
pass "the self-test's changes were all rolled back"

# ---- 6. the upgraded data works --------------------------------------------------------------
say "6. $OLD: the $FROM_VERSION data at $DEFAULT_VERSION: dispatch, poll, start, finish, reap"
# the retry of step 2 is due 1 s after the failure
"${PSQL[@]}" -d "$OLD" -c "SELECT pg_sleep(greatest(0, extract(epoch FROM (
        SELECT r.available_at - now() FROM sched.request r JOIN public.upgrade_step s USING (request_id) WHERE s.n = 12)) + 0.05))" >/dev/null
"${PSQL[@]}" -d "$OLD" -c "
    SET sched.heartbeat_ttl = '1h';   -- the workers' last heartbeat was at their registration
    CREATE TABLE public.upgrade_dispatched AS
    SELECT 1 AS round, d.outcome, d.request_id, d.attempt_id FROM sched.dispatch_next(10) d"
expect "$OLD" "dispatch_next(10) DISPATCHED the 3 ready requests (steps 7, 8 and the retry of step 2)" "7 8 12" \
    "SELECT string_agg(s.n::text, ' ' ORDER BY s.n) FROM public.upgrade_dispatched d
       JOIN public.upgrade_step s USING (request_id) WHERE d.outcome = 'DISPATCHED'"
expect "$OLD" "no other request was dispatched, the render slots are all taken" "0 7 7" \
    "SELECT (SELECT count(*) FROM public.upgrade_dispatched d WHERE d.outcome = 'DISPATCHED'
               AND d.request_id NOT IN (SELECT request_id FROM public.upgrade_step WHERE n IN (7, 8, 12))),
            (SELECT sum(live_attempts) FROM sched.worker WHERE capability = 'render'),
            (SELECT sum(slots) FROM sched.worker w JOIN sched.node n USING (node_id)
              WHERE capability = 'render' AND n.management_status = 'ACTIVE')"

poll() { # poll ROUND: every worker polls its commands
    "${PSQL[@]}" -d "$OLD" -c "SET client_min_messages = warning" -c "
        CREATE TABLE IF NOT EXISTS public.upgrade_polled (round int, worker_id uuid, command_id bigint,
                                                          kind text, attempt_id uuid, lease_version bigint);
        INSERT INTO public.upgrade_polled
        SELECT $1, w.worker_id, p.command_id, p.kind, p.attempt_id, p.lease_version
          FROM sched.worker w,
               LATERAL (SELECT c.command_id, c.kind, c.attempt_id, c.lease_version
                          FROM sched.poll_commands(w.worker_id, w.generation) c) p"
}
poll 1
expect "$OLD" "the workers polled 4 START commands: step 6's from $FROM_VERSION and the 3 new ones" "6 7 8 12" \
    "SELECT string_agg(s.n::text, ' ' ORDER BY s.n) FROM public.upgrade_polled p
       JOIN sched.attempt a USING (attempt_id) JOIN public.upgrade_step s ON s.request_id = a.request_id
      WHERE p.round = 1 AND p.kind = 'START'"
expect "$OLD" "the 3 new commands have ids above the $FROM_VERSION maximum, step 6's is below it" "3 1" \
    "SELECT count(*) FILTER (WHERE command_id > $MAX_CID), count(*) FILTER (WHERE command_id <= $MAX_CID)
       FROM public.upgrade_polled WHERE round = 1"
expect "$OLD" "no live attempt's command is left undelivered" 0 \
    "SELECT count(*) FROM sched.command c JOIN sched.attempt a USING (attempt_id)
      WHERE c.delivered_at IS NULL AND a.status IN ('DISPATCHED', 'RUNNING')"
expect "$OLD" "a second poll delivers nothing" 0 \
    "SELECT count(*) FROM sched.worker w, LATERAL (SELECT c.command_id FROM sched.poll_commands(w.worker_id, w.generation) c) p"

"${PSQL[@]}" -d "$OLD" -c "
    SELECT count(sched.start_attempt(p.attempt_id, p.lease_version)) FROM public.upgrade_polled p WHERE p.round = 1;
    -- step 5: dispatched and delivered at $FROM_VERSION, started now
    SELECT sched.start_attempt(a.attempt_id, a.lease_version)
      FROM sched.attempt a JOIN public.upgrade_step s USING (request_id) WHERE s.n = 5;" >/dev/null
expect "$OLD" "start_attempt: steps 3, 4, 9 (started at $FROM_VERSION), 5, 6, 7, 8, 12 are RUNNING" "3 4 5 6 7 8 9 12" \
    "SELECT string_agg(s.n::text, ' ' ORDER BY s.n) FROM sched.attempt a JOIN public.upgrade_step s USING (request_id)
      WHERE a.status = 'RUNNING'"
expect "$OLD" "finish_attempt: step 3 (started at $FROM_VERSION) and 7 SUCCEEDED, 8 FAILED" "SUCCEEDED SUCCEEDED FAILED" \
    "SELECT sched.finish_attempt(a.attempt_id, a.lease_version, 'SUCCEEDED') || ' ' ||
            (SELECT sched.finish_attempt(a7.attempt_id, a7.lease_version, 'SUCCEEDED')
               FROM sched.attempt a7 JOIN public.upgrade_step s7 USING (request_id) WHERE s7.n = 7) || ' ' ||
            (SELECT sched.finish_attempt(a8.attempt_id, a8.lease_version, 'FAILED', '{\"exit\": 2}')
               FROM sched.attempt a8 JOIN public.upgrade_step s8 USING (request_id) WHERE s8.n = 8)
       FROM sched.attempt a JOIN public.upgrade_step s USING (request_id) WHERE s.n = 3"
expect "$OLD" "the failure of step 8 queued its retry, with a new request_id" "PENDING t" \
    "SELECT state, request_id > $MAX_RID FROM sched.request WHERE step_id = md5('upgrade-step-8')::uuid AND attempt_number = 2"

LIVE=$(value "$OLD" "SELECT count(*) FROM sched.attempt WHERE status IN ('DISPATCHED', 'RUNNING')")
expect "$OLD" "reap_expired(now() + 10 min) reaps the $LIVE live attempts" "$LIVE" \
    "SELECT sched.reap_expired(now() + interval '10 minutes')"
expect "$OLD" "the LOST attempts are those of steps 4, 5, 6, 9 (from $FROM_VERSION) and 12" "4 5 6 9 12" \
    "SELECT string_agg(s.n::text, ' ' ORDER BY s.n) FROM sched.attempt a JOIN public.upgrade_step s USING (request_id)
      WHERE a.status = 'LOST'"
expect "$OLD" "no live attempt is left, every worker and node is free" "0 0 0" \
    "SELECT (SELECT count(*) FROM sched.attempt WHERE status IN ('DISPATCHED', 'RUNNING')),
            (SELECT sum(live_attempts) FROM sched.worker),
            (SELECT sum(live_attempts + reserved_cpu_millis + reserved_memory_mb + reserved_gpus) FROM sched.node)"
expect "$OLD" "each LOST attempt was requeued as attempt_number + 1, with new request_ids" "$LIVE $LIVE" \
    "SELECT count(r.*), count(*) FILTER (WHERE r.request_id > $MAX_RID AND r.state = 'PENDING')
       FROM sched.attempt a LEFT JOIN sched.request r ON r.step_id = a.step_id AND r.attempt_number = a.attempt_number + 1
      WHERE a.status = 'LOST'"

# round 2, 15 minutes on: the requeued requests, step 8's retry and step 11 (due in 5 min)
"${PSQL[@]}" -d "$OLD" -c "
    SET sched.heartbeat_ttl = '1h';   -- the workers' last heartbeat was at their registration
    INSERT INTO public.upgrade_dispatched
    SELECT 2, d.outcome, d.request_id, d.attempt_id FROM sched.dispatch_next(10, at => now() + interval '15 minutes') d"
expect "$OLD" "dispatch_next round 2 DISPATCHED the 5 requeued, step 8's retry and step 11" "7 7" \
    "SELECT count(*), count(*) FILTER (WHERE r.step_id IN (SELECT step_id FROM public.upgrade_step WHERE n IN (2, 4, 5, 6, 8, 9, 11))
                                         AND (r.attempt_number > 1 OR r.step_id = md5('upgrade-step-11')::uuid))
       FROM public.upgrade_dispatched d JOIN sched.request r USING (request_id)
      WHERE d.round = 2 AND d.outcome = 'DISPATCHED'"
poll 2
expect "$OLD" "the workers polled the 7 START commands of round 2, all with new command_ids" "7 7" \
    "SELECT count(*), count(*) FILTER (WHERE command_id > $MAX_CID) FROM public.upgrade_polled WHERE round = 2 AND kind = 'START'"
expect "$OLD" "round 2: start_attempt on each" "7" \
    "SELECT count(sched.start_attempt(p.attempt_id, p.lease_version, now() + interval '16 minutes'))
       FROM public.upgrade_polled p WHERE p.round = 2"
expect "$OLD" "round 2: finish_attempt SUCCEEDED on each" "SUCCEEDED 7" \
    "SELECT min(o) || ' ' || count(*) FROM (
        SELECT sched.finish_attempt(p.attempt_id, p.lease_version, 'SUCCEEDED', NULL, now() + interval '17 minutes') o
          FROM public.upgrade_polled p WHERE p.round = 2) f"

say "ids, uniqueness, state"
expect "$OLD" "no new row took an id at or below the $FROM_VERSION maxima (request, command, timeline)" \
    "$N_REQ $N_CMD $N_TL" \
    "SELECT (SELECT count(*) FROM sched.request WHERE request_id <= $MAX_RID),
            (SELECT count(*) FROM sched.command WHERE command_id <= $MAX_CID),
            (SELECT count(*) FROM sched.timeline WHERE timeline_id <= $MAX_TID)"
expect "$OLD" "new requests, commands, milestones and attempts were made after the update" "t t t t" \
    "SELECT (SELECT count(*) FROM sched.request) > $N_REQ, (SELECT count(*) FROM sched.command) > $N_CMD,
            (SELECT count(*) FROM sched.timeline) > $N_TL, (SELECT count(*) FROM sched.attempt) > $N_ATT"
expect "$OLD" "request_id, attempt_id, command_id, timeline_id are unique" "0 0 0 0" \
    "SELECT (SELECT count(*) - count(DISTINCT request_id) FROM sched.request),
            (SELECT count(*) - count(DISTINCT attempt_id) FROM sched.attempt),
            (SELECT count(*) - count(DISTINCT command_id) FROM sched.command),
            (SELECT count(*) - count(DISTINCT timeline_id) FROM sched.timeline)"
expect "$OLD" "one attempt and one request per (step_id, attempt_number)" "0 0" \
    "SELECT (SELECT count(*) FROM (SELECT 1 FROM sched.attempt GROUP BY step_id, attempt_number HAVING count(*) > 1) x),
            (SELECT count(*) FROM (SELECT 1 FROM sched.request GROUP BY step_id, attempt_number HAVING count(*) > 1) x)"
expect "$OLD" "attempts by status at the end" "FAILED 2, LOST 5, SUCCEEDED 10" \
    "SELECT string_agg(status || ' ' || n, ', ' ORDER BY status) FROM (SELECT status, count(*) n FROM sched.attempt GROUP BY 1) s"
expect "$OLD" "requests left PENDING: step 10 (fits nowhere) only" "10" \
    "SELECT string_agg(s.n::text, ' ') FROM sched.request r JOIN public.upgrade_step s USING (step_id) WHERE r.state = 'PENDING'"
expect "$OLD" "the diagnostics answer (pending, node_overview, queue_stats, attempt_overview, explain)" "t" \
    "SELECT (SELECT count(*) FROM sched.pending) = 1 AND (SELECT count(*) FROM sched.node_overview) = 4
        AND (SELECT count(*) FROM sched.queue_stats) >= 1 AND (SELECT count(*) FROM sched.attempt_overview) = 17
        AND (SELECT count(*) FROM sched.explain((SELECT request_id FROM sched.request WHERE state = 'PENDING'))) > 0"
[ -f "$INVARIANTS" ] && invariants "$OLD" "on the upgraded database after use"
describe "$OLD" "$WORK/upgraded_after.txt"
same_description "$WORK/upgraded_after.txt" "$WORK/fresh.txt" "upgraded, after use" fresh \
    || { cat "$WORK/last.diff" >&2; fail "after use, the upgraded database differs from a fresh install (above)"; }
pass "after use, the upgraded database still describes as a fresh install"

# ---- 7. clean up ---------------------------------------------------------------------------------
if [ -z "${SCHED_UPGRADE_KEEP:-}" ]; then
    "${PSQL[@]}" -d postgres -c "DROP DATABASE $OLD WITH (FORCE)" -c "DROP DATABASE $NEW WITH (FORCE)" \
        -c "DROP DATABASE $SCRATCH WITH (FORCE)"
    say "databases dropped"
else
    say "SCHED_UPGRADE_KEEP: databases $OLD, $NEW, $SCRATCH kept"
fi
FAILED=0
echo "upgrade: $CHECKS checks passed"
