# 005_security_bgworker.pl — the maintenance worker finds no way up (issue 11).
#
# The pg_sched maintenance worker connects to each database of sched.databases as the
# bootstrap superuser (a background worker can only connect as a login role), so the
# database's settings apply to its connection: a database owner who is not a superuser
# can give it a search_path with public first, and fill public with traps.  It must not
# matter: the worker pins its search_path, runs each tick as role sched_scheduler, and
# reap_expired is pinned too.  This test:
#
#   - creates role attacker (LOGIN, not a superuser) owning database sched_attack, whose
#     public schema it fills with traps (the set of sql/security_shadowing.sql, built by
#     public.make_traps: twins of ~300 pg_catalog functions such as now(), make_interval,
#     jsonb_build_object overloads, of the operators = <> < + - || @> ->> ... on text,
#     uuid, jsonb, the numbers and times, aggregates count(*) count(x) sum max min
#     string_agg ..., domains named text, uuid, timestamptz ...; each writes (current_user,
#     its name) into public.trap_log and tries ALTER ROLE attacker SUPERUSER), then runs
#     ALTER DATABASE sched_attack SET search_path = public, pg_catalog;
#   - installs pg_sched there (as the superuser), restarts with sched.databases =
#     'sched_attack', sched.maintenance_interval = 1s, and dispatches an attempt with
#     `at` an hour ago, so its lease is already expired;
#   - waits for the worker to reap it (LOST, by the Reaper): public.trap_log is empty and
#     attacker is still no superuser;
#   - proves the worker runs as sched_scheduler, not as the superuser it connects as:
#     with EXECUTE on sched.reap_expired(timestamptz) revoked from sched_scheduler, a new
#     expired attempt is not reaped and the server log shows the worker's "permission
#     denied for function reap_expired" (a superuser would not be refused); the worker
#     logs the failed tick and goes on (same PID); once the privilege is granted back,
#     its next tick reaps it;
#   - proves the traps work: the attacker calling now() with its database's search_path
#     leaves a row in public.trap_log.
#
# Run as an unprivileged OS user (test/harness.sh suite_tap does this).

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

# poll_query_until waits up to this long (seconds)
$PostgreSQL::Test::Utils::timeout_default = 60
  if $PostgreSQL::Test::Utils::timeout_default > 60;

my $node = PostgreSQL::Test::Cluster->new('sched_sec_bgw');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'pg_sched'
sched.maintenance_interval = '1s'
log_min_messages = warning
});
$node->start;

# ---------------------------------------------------------------------------------------
# The attacker: a database owner, not a superuser; its traps in public.
# ---------------------------------------------------------------------------------------
$node->safe_psql(
	'postgres', q{
CREATE ROLE attacker LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB;
CREATE DATABASE sched_attack OWNER attacker;
});

my $traps = <<'SQL';
CREATE TABLE public.trap_log (who pg_catalog.text NOT NULL, trap pg_catalog.text NOT NULL);
GRANT INSERT ON public.trap_log TO PUBLIC;
CREATE FUNCTION public.trap(what pg_catalog.text) RETURNS pg_catalog.bool
LANGUAGE plpgsql SECURITY INVOKER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    INSERT INTO public.trap_log (who, trap) VALUES (current_user, what);
    BEGIN
        ALTER ROLE attacker SUPERUSER;
    EXCEPTION WHEN OTHERS THEN
        NULL;
    END;
    RETURN true;
END
$$;
GRANT EXECUTE ON FUNCTION public.trap(pg_catalog.text) TO PUBLIC;

CREATE PROCEDURE public.make_traps(target pg_catalog.text)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $make$
DECLARE
    f record;
    call text;
    body text;
    n int := 0;
    t regtype;
    types regtype[] := ARRAY['text', 'uuid', 'jsonb', 'int2', 'int4', 'int8', 'numeric', 'float8', 'bool',
                             'timestamptz', 'interval', 'name', 'oid', 'text[]', 'uuid[]', 'jsonb[]',
                             'int4[]', 'int8[]', 'anyarray', 'anyelement', 'anycompatiblearray',
                             'anycompatible', 'anycompatiblenonarray', 'anynonarray']::regtype[];
BEGIN
    -- functions: a twin of each pg_catalog function of these names (same signature, so
    -- it masks the original wherever target comes first on the path)
    FOR f IN
        SELECT p.oid, p.proname, p.pronargs, p.provariadic, p.proretset, p.prorettype,
               pg_get_function_arguments(p.oid) AS args, format_type(p.prorettype, NULL) AS rettype
          FROM pg_proc p
         WHERE p.pronamespace = 'pg_catalog'::regnamespace AND p.prokind = 'f'
           AND p.proallargtypes IS NULL
           AND p.proname = ANY (ARRAY[
               'now', 'clock_timestamp', 'statement_timestamp', 'transaction_timestamp', 'timeofday',
               'date_trunc', 'date_part', 'make_interval', 'make_timestamptz', 'age', 'justify_interval',
               'to_timestamp', 'to_char', 'isfinite', 'timezone',
               'length', 'char_length', 'octet_length', 'lower', 'upper', 'btrim', 'ltrim', 'rtrim',
               'substr', 'substring', 'left', 'right', 'replace', 'split_part', 'strpos', 'repeat',
               'lpad', 'rpad', 'md5', 'encode', 'decode', 'quote_ident', 'quote_literal',
               'quote_nullable', 'format_type', 'hashtext', 'hashtextextended', 'textcat', 'texteq',
               'round', 'ceil', 'ceiling', 'floor', 'trunc', 'abs', 'sqrt', 'power', 'ln', 'log',
               'exp', 'div', 'mod', 'trim_scale', 'scale', 'random', 'sign',
               'nextval', 'currval', 'setval', 'gen_random_uuid',
               'to_jsonb', 'jsonb_strip_nulls', 'jsonb_typeof', 'jsonb_build_array', 'jsonb_set',
               'jsonb_insert', 'jsonb_extract_path', 'jsonb_extract_path_text', 'jsonb_array_length',
               'jsonb_object_keys', 'jsonb_pretty', 'jsonb_exists', 'jsonb_exists_any',
               'jsonb_exists_all', 'jsonb_contains', 'jsonb_contained', 'jsonb_concat',
               'jsonb_delete', 'jsonb_object_field', 'jsonb_object_field_text', 'jsonb_eq',
               'array_to_string', 'array_length', 'array_upper', 'array_lower', 'array_position',
               'array_positions', 'array_append', 'array_prepend', 'array_cat', 'array_remove',
               'array_fill', 'cardinality', 'unnest', 'string_to_array', 'regexp_replace',
               'regexp_match', 'regexp_split_to_array', 'array_eq',
               'pg_notify', 'pg_advisory_xact_lock', 'pg_advisory_lock', 'pg_try_advisory_xact_lock',
               'pg_try_advisory_lock', 'pg_advisory_unlock', 'pg_advisory_xact_lock_shared',
               'pg_backend_pid', 'txid_current', 'pg_current_xact_id', 'current_setting',
               'set_config', 'has_table_privilege', 'has_function_privilege', 'pg_has_role',
               'pg_get_userbyid', 'generate_series', 'uuid_eq', 'int8', 'int4', 'float8',
               'numeric', 'text', 'bool', 'interval', 'timestamptz', 'jsonb', 'uuid',
               'aclexplode', 'regrole', 'regclass', 'pg_extension_config_dump'])
           AND NOT EXISTS (
               SELECT 1 FROM unnest(p.proargtypes::oid[] || p.prorettype) AS t(typ)
                 JOIN pg_type y ON y.oid = t.typ
                WHERE y.typtype = 'p'
                  AND y.typname NOT IN ('anyelement', 'anyarray', 'anynonarray', 'anycompatible',
                                        'anycompatiblearray', 'anycompatiblenonarray', 'void'))
         ORDER BY p.proname, p.oid
    LOOP
        SELECT string_agg(CASE WHEN i = f.pronargs AND f.provariadic <> 0 THEN 'VARIADIC $' ELSE '$' END || i,
                          ', ' ORDER BY i)
          INTO call FROM generate_series(1, f.pronargs) AS i;
        call := format('pg_catalog.%I(%s)', f.proname, coalesce(call, ''));
        IF f.prorettype = 'void'::regtype THEN
            body := format('PERFORM %s; RETURN;', call);
        ELSIF f.proretset THEN
            body := format('RETURN QUERY SELECT x FROM %s AS x;', call);
        ELSE
            body := format('RETURN %s;', call);
        END IF;
        BEGIN
            EXECUTE format('CREATE FUNCTION %I.%I(%s) RETURNS %s%s LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS %L',
                           target, f.proname, f.args, CASE WHEN f.proretset THEN 'SETOF ' ELSE '' END, f.rettype,
                           format('BEGIN PERFORM public.trap(%L); %s END',
                                  format('%s.%s', target, f.oid::regprocedure), body));
        EXCEPTION WHEN OTHERS THEN
            RAISE NOTICE 'no trap for %: %', f.oid::regprocedure, SQLERRM;
        END;
    END LOOP;

    -- operators: a twin of each pg_catalog operator of these names on these types, its
    -- function a trap that calls the original's
    FOR f IN
        SELECT o.oid, o.oprname, o.oprleft, o.oprright, o.oprcode::oid AS code,
               format_type(o.oprresult, NULL) AS rettype
          FROM pg_operator o
         WHERE o.oprnamespace = 'pg_catalog'::regnamespace
           AND o.oprname = ANY (ARRAY['=', '<>', '<', '<=', '>', '>=', '+', '-', '*', '/', '%',
                                      '||', '@>', '<@', '?', '?|', '?&', '->', '->>', '#>',
                                      '#>>', '#-', '~~', '~~*', '~', '~*', '!~', '&&'])
           AND (o.oprleft = 0 OR o.oprleft = ANY (types))
           AND o.oprright = ANY (types)
         ORDER BY o.oprname, o.oprleft, o.oprright
    LOOP
        n := n + 1;
        BEGIN
            IF f.oprleft = 0 THEN
                EXECUTE format('CREATE FUNCTION %I.trap_op_%s(b %s) RETURNS %s LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS %L',
                               target, n, format_type(f.oprright, NULL), f.rettype,
                               format('BEGIN PERFORM public.trap(%L); RETURN pg_catalog.%I(b); END',
                                      format('%s.%s', target, f.oid::regoperator), (SELECT proname FROM pg_proc WHERE oid = f.code)));
                EXECUTE format('CREATE OPERATOR %I.%s (RIGHTARG = %s, FUNCTION = %I.trap_op_%s)',
                               target, f.oprname, format_type(f.oprright, NULL), target, n);
            ELSE
                EXECUTE format('CREATE FUNCTION %I.trap_op_%s(a %s, b %s) RETURNS %s LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS %L',
                               target, n, format_type(f.oprleft, NULL), format_type(f.oprright, NULL), f.rettype,
                               format('BEGIN PERFORM public.trap(%L); RETURN pg_catalog.%I(a, b); END',
                                      format('%s.%s', target, f.oid::regoperator), (SELECT proname FROM pg_proc WHERE oid = f.code)));
                EXECUTE format('CREATE OPERATOR %I.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = %I.trap_op_%s)',
                               target, f.oprname, format_type(f.oprleft, NULL), format_type(f.oprright, NULL), target, n);
            END IF;
        EXCEPTION WHEN OTHERS THEN
            RAISE NOTICE 'no trap for operator %: %', f.oid::regoperator, SQLERRM;
        END;
    END LOOP;

    -- aggregates: count(*), and of one argument of these types (pg_catalog's is
    -- count("any"): an exact type is a better match), sum, max, min, bool_or, bool_and,
    -- string_agg, array_agg, jsonb_agg, jsonb_object_agg, percentile_cont
    EXECUTE format($f$
        CREATE FUNCTION %1$I.trap_count_star(s int8) RETURNS int8 LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS
        'BEGIN PERFORM public.trap(''%1$s.count(*)''); RETURN s + 1; END';
        CREATE AGGREGATE %1$I.count(*) (SFUNC = %1$I.trap_count_star, STYPE = int8, INITCOND = '0');
        CREATE FUNCTION %1$I.trap_count(s int8, v anyelement) RETURNS int8 LANGUAGE plpgsql STRICT SET search_path = pg_catalog, pg_temp AS
        'BEGIN PERFORM public.trap(''%1$s.count(x)''); RETURN s + 1; END';
        CREATE FUNCTION %1$I.trap_max(s anyelement, v anyelement) RETURNS anyelement LANGUAGE plpgsql STRICT SET search_path = pg_catalog, pg_temp AS
        'BEGIN PERFORM public.trap(''%1$s.max(x)''); RETURN CASE WHEN v > s THEN v ELSE s END; END';
        CREATE FUNCTION %1$I.trap_min(s anyelement, v anyelement) RETURNS anyelement LANGUAGE plpgsql STRICT SET search_path = pg_catalog, pg_temp AS
        'BEGIN PERFORM public.trap(''%1$s.min(x)''); RETURN CASE WHEN v < s THEN v ELSE s END; END';
        CREATE FUNCTION %1$I.trap_sum(s numeric, v anyelement) RETURNS numeric LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS
        'BEGIN PERFORM public.trap(''%1$s.sum(x)''); RETURN CASE WHEN v IS NULL THEN s ELSE coalesce(s, 0) + v::numeric END; END';
        CREATE FUNCTION %1$I.trap_sum_interval(s interval, v interval) RETURNS interval LANGUAGE plpgsql STRICT SET search_path = pg_catalog, pg_temp AS
        'BEGIN PERFORM public.trap(''%1$s.sum(interval)''); RETURN s + v; END';
        CREATE FUNCTION %1$I.trap_or(s bool, v bool) RETURNS bool LANGUAGE plpgsql STRICT SET search_path = pg_catalog, pg_temp AS
        'BEGIN PERFORM public.trap(''%1$s.bool_or(bool)''); RETURN s OR v; END';
        CREATE FUNCTION %1$I.trap_and(s bool, v bool) RETURNS bool LANGUAGE plpgsql STRICT SET search_path = pg_catalog, pg_temp AS
        'BEGIN PERFORM public.trap(''%1$s.bool_and(bool)''); RETURN s AND v; END';
        CREATE FUNCTION %1$I.trap_string_agg(s text, v text, d text) RETURNS text LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS
        'BEGIN PERFORM public.trap(''%1$s.string_agg(text,text)'');
         RETURN CASE WHEN v IS NULL THEN s WHEN s IS NULL THEN v ELSE s || coalesce(d, '''') || v END; END';
        CREATE AGGREGATE %1$I.string_agg(text, text) (SFUNC = %1$I.trap_string_agg, STYPE = text);
        CREATE FUNCTION %1$I.trap_array_agg(s anyarray, v anynonarray) RETURNS anyarray LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS
        'BEGIN PERFORM public.trap(''%1$s.array_agg(anynonarray)''); RETURN array_append(s, v); END';
        CREATE AGGREGATE %1$I.array_agg(anynonarray) (SFUNC = %1$I.trap_array_agg, STYPE = anyarray);
        CREATE FUNCTION %1$I.trap_jsonb_agg(s jsonb, v anyelement) RETURNS jsonb LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS
        'BEGIN PERFORM public.trap(''%1$s.jsonb_agg(anyelement)''); RETURN coalesce(s, ''[]'') || jsonb_build_array(v); END';
        CREATE AGGREGATE %1$I.jsonb_agg(anyelement) (SFUNC = %1$I.trap_jsonb_agg, STYPE = jsonb);
        CREATE FUNCTION %1$I.trap_jsonb_object_agg(s jsonb, k text, v anyelement) RETURNS jsonb LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS
        'BEGIN PERFORM public.trap(''%1$s.jsonb_object_agg(text,x)''); RETURN coalesce(s, ''{}'') || jsonb_build_object(k, v); END';
        CREATE AGGREGATE %1$I.jsonb_object_agg(text, jsonb) (SFUNC = %1$I.trap_jsonb_object_agg, STYPE = jsonb);
        CREATE AGGREGATE %1$I.jsonb_object_agg(text, text) (SFUNC = %1$I.trap_jsonb_object_agg, STYPE = jsonb);
        CREATE FUNCTION %1$I.trap_collect(s anyarray, v anyelement) RETURNS anyarray LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS
        'BEGIN RETURN array_append(s, v); END';
        CREATE FUNCTION %1$I.trap_percentile_cont(s float8[], f float8, v float8) RETURNS float8 LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS
        'BEGIN PERFORM public.trap(''%1$s.percentile_cont(float8 ORDER BY float8)'');
         RETURN (SELECT percentile_cont(f) WITHIN GROUP (ORDER BY x) FROM unnest(s) x); END';
        CREATE AGGREGATE %1$I.percentile_cont(float8 ORDER BY float8)
            (SFUNC = %1$I.trap_collect, STYPE = float8[], FINALFUNC = %1$I.trap_percentile_cont, FINALFUNC_EXTRA);
        CREATE FUNCTION %1$I.trap_percentile_cont(s interval[], f float8, v interval) RETURNS interval LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS
        'BEGIN PERFORM public.trap(''%1$s.percentile_cont(float8 ORDER BY interval)'');
         RETURN (SELECT percentile_cont(f) WITHIN GROUP (ORDER BY x) FROM unnest(s) x); END';
        CREATE AGGREGATE %1$I.percentile_cont(float8 ORDER BY interval)
            (SFUNC = %1$I.trap_collect, STYPE = interval[], FINALFUNC = %1$I.trap_percentile_cont, FINALFUNC_EXTRA);
        CREATE AGGREGATE %1$I.bool_or(bool) (SFUNC = %1$I.trap_or, STYPE = bool);
        CREATE AGGREGATE %1$I.bool_and(bool) (SFUNC = %1$I.trap_and, STYPE = bool);
        CREATE AGGREGATE %1$I.every(bool) (SFUNC = %1$I.trap_and, STYPE = bool);
        CREATE AGGREGATE %1$I.sum(interval) (SFUNC = %1$I.trap_sum_interval, STYPE = interval);
        $f$, target);
    FOREACH t IN ARRAY ARRAY['text', 'uuid', 'jsonb', 'int2', 'int4', 'int8', 'numeric', 'float8', 'bool',
                             'timestamptz', 'interval', 'name', 'oid', 'regrole']::regtype[] LOOP
        EXECUTE format('CREATE AGGREGATE %I.count(%s) (SFUNC = %I.trap_count, STYPE = int8, INITCOND = ''0'')', target, t, target);
        IF t NOT IN ('jsonb'::regtype, 'bool'::regtype, 'regrole'::regtype) THEN
            EXECUTE format('CREATE AGGREGATE %I.max(%s) (SFUNC = %I.trap_max, STYPE = %s)', target, t, target, t);
            EXECUTE format('CREATE AGGREGATE %I.min(%s) (SFUNC = %I.trap_min, STYPE = %s)', target, t, target, t);
        END IF;
        IF t IN ('int2'::regtype, 'int4'::regtype, 'int8'::regtype, 'numeric'::regtype, 'float8'::regtype) THEN
            EXECUTE format('CREATE AGGREGATE %I.sum(%s) (SFUNC = %I.trap_sum, STYPE = numeric)', target, t, target);
        END IF;
    END LOOP;

    -- the variadic "any" functions, which PL/pgSQL cannot take: overloads of the types
    -- pg_sched passes (an exact match beats "any")
    FOR f IN
        SELECT x.name, x.args FROM (VALUES
            ('jsonb_build_object', ARRAY['text', 'text']), ('jsonb_build_object', ARRAY['text', 'uuid']),
            ('jsonb_build_object', ARRAY['text', 'int8']), ('jsonb_build_object', ARRAY['text', 'int4']),
            ('jsonb_build_object', ARRAY['text', 'jsonb']), ('jsonb_build_object', ARRAY['text', 'timestamptz']),
            ('jsonb_build_object', ARRAY['text', 'bool']), ('jsonb_build_object', ARRAY['text', 'numeric']),
            ('jsonb_build_object', ARRAY['text', 'text', 'text', 'text']),
            ('jsonb_build_object', ARRAY['text', 'text', 'text', 'int8']),
            ('jsonb_build_object', ARRAY['text', 'int4', 'text', 'int8']),
            ('jsonb_build_object', ARRAY['text', 'uuid', 'text', 'int4']),
            ('jsonb_build_array', ARRAY['text']), ('jsonb_build_array', ARRAY['jsonb']),
            ('format', ARRAY['text']), ('format', ARRAY['text', 'text']), ('format', ARRAY['text', 'uuid']),
            ('format', ARRAY['text', 'int4']), ('format', ARRAY['text', 'int8']),
            ('format', ARRAY['text', 'text', 'text']), ('format', ARRAY['text', 'text', 'int8']),
            ('format', ARRAY['text', 'uuid', 'int4']), ('format', ARRAY['text', 'regprocedure']),
            ('concat', ARRAY['text', 'text']), ('concat', ARRAY['text', 'text', 'text']),
            ('concat_ws', ARRAY['text', 'text', 'text']), ('concat_ws', ARRAY['text', 'text', 'text', 'text']),
            ('num_nulls', ARRAY['text']), ('num_nonnulls', ARRAY['text']),
            ('pg_typeof', ARRAY['text']), ('to_json', ARRAY['text'])
        ) AS x(name, args)
    LOOP
        SELECT string_agg('$' || i, ', ' ORDER BY i) INTO call FROM generate_subscripts(f.args, 1) AS i;
        EXECUTE format('CREATE FUNCTION %I.%I(%s) RETURNS %s LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS %L',
                       target, f.name, array_to_string(f.args, ', '),
                       (SELECT format_type(p.prorettype, NULL) FROM pg_proc p
                         WHERE p.pronamespace = 'pg_catalog'::regnamespace AND p.proname = f.name LIMIT 1),
                       format('BEGIN PERFORM public.trap(%L); RETURN pg_catalog.%I(%s); END',
                              format('%s.%s(%s)', target, f.name, array_to_string(f.args, ',')), f.name, call));
    END LOOP;

    -- domains named as the types pg_sched names, over them, checked by a trap (so a
    -- value cast to one runs the trap); in pg_temp also the names of pg_sched's own types
    FOR f IN SELECT unnest(ARRAY['text', 'uuid', 'jsonb', 'json', 'timestamptz', 'int2', 'int4', 'int8',
                                 'float8', 'bool', 'name', 'oid', 'regrole', 'regclass', 'regnamespace',
                                 'regprocedure', 'regtype', 'date']) AS name LOOP
        EXECUTE format('CREATE DOMAIN %I.%I AS pg_catalog.%I CHECK (public.trap(%L))',
                       target, f.name, f.name, format('%s.%s (domain)', target, f.name));
    END LOOP;
    IF target = 'pg_temp' THEN
        FOR f IN SELECT unnest(ARRAY['candidate', 'claim', 'dispatch_result', 'qualification',
                                     'ranked_candidate', 'registration']) AS name LOOP
            EXECUTE format('CREATE DOMAIN pg_temp.%I AS pg_catalog.text CHECK (public.trap(%L))',
                           f.name, format('pg_temp.%s (domain)', f.name));
        END LOOP;
        -- relations named as pg_sched's tables and views: views that run a trap when read
        FOR f IN SELECT c.relname FROM pg_class c
                  WHERE c.relnamespace = 'sched'::regnamespace AND c.relkind IN ('r', 'v', 'S')
                  ORDER BY c.relname LOOP
            EXECUTE format('CREATE VIEW pg_temp.%I AS SELECT s.* FROM public.trap(%L) AS t(ok), '
                           'LATERAL (SELECT * FROM sched.%I WHERE t.ok) AS s',
                           f.relname, format('pg_temp.%s (view)', f.relname), f.relname);
        END LOOP;
    END IF;
END
$make$;
SQL

$node->safe_psql('sched_attack', $traps, extra_params => [ '-U', 'attacker' ]);
$node->safe_psql(
	'sched_attack', q{
CALL public.make_traps('public');
ALTER DATABASE sched_attack SET search_path = public, pg_catalog;
ALTER ROLE attacker SET search_path = public, pg_catalog;
}, extra_params => [ '-U', 'attacker' ]);

is( $node->safe_psql(
		'sched_attack', q{
SELECT pg_catalog.count(*) FROM pg_catalog.pg_proc
 WHERE pronamespace OPERATOR(pg_catalog.=) 'public'::pg_catalog.regnamespace
   AND proname OPERATOR(pg_catalog.=) ANY (ARRAY['now', 'make_interval', 'jsonb_build_object', 'count'])}),
	'29',
	'the traps are set (now, make_interval, 12 jsonb_build_object, 15 count)');
is($node->safe_psql('sched_attack', 'SHOW search_path'),
	'public, pg_catalog', "a superuser's connection to sched_attack gets public first");

# The superuser installs pg_sched (CREATE EXTENSION sets its own search_path).
$node->safe_psql('sched_attack', 'CREATE EXTENSION pg_sched');

# From here on the test's own statements run with search_path pg_catalog, pg_temp: with
# the database's path an unqualified now() or = in them would run a trap, the test's
# doing, not the worker's.  (PGOPTIONS reaches the test's psql only, not the server's
# background workers.)
$ENV{PGOPTIONS} = '-c search_path=pg_catalog,pg_temp';

# ---------------------------------------------------------------------------------------
# The maintenance worker of sched_attack.
# ---------------------------------------------------------------------------------------
$node->append_conf('postgresql.conf', "sched.databases = 'sched_attack'\n");
my $log_offset = -s $node->logfile;
$node->restart;
ok( $node->poll_query_until(
		'postgres', q{
SELECT count(*) = 1 FROM pg_stat_activity
 WHERE backend_type = 'pg_sched maintenance' AND datname = 'sched_attack'}),
	'the maintenance worker of sched_attack runs');

$node->safe_psql(
	'sched_attack', q{
SELECT sched.upsert_node('n1', cpu_millis => 4000, memory_mb => 8192);
SELECT sched.register_worker('n1', 'cap', ARRAY['v1'], 4,
    worker_id => 'aaaaaaaa-0000-4000-8000-00000000000a', at => now() - interval '1 hour 10 s');
SELECT sched.submit('e0000000-0000-4000-8000-000000000001', '50000000-0000-4000-8000-000000000001',
    'cap', 'v1', max_attempts => 1, available_at => now() - interval '2 hours');
});

# Dispatched an hour ago: the lease (sched.lease_ttl, 300 s) expired 55 minutes ago.
is( $node->safe_psql(
		'sched_attack', q{
SELECT outcome || ' ' || node_id FROM sched.dispatch_attempt(
    (SELECT request_id FROM sched.request WHERE step_id = '50000000-0000-4000-8000-000000000001'),
    at => now() - interval '1 hour')}),
	'DISPATCHED n1',
	'attempt of step 1 dispatched an hour ago');

ok( $node->poll_query_until(
		'sched_attack', q{
SELECT status = 'LOST' FROM sched.attempt WHERE step_id = '50000000-0000-4000-8000-000000000001'}),
	'the maintenance worker reaped the expired lease: LOST');
is( $node->safe_psql(
		'sched_attack', q{
SELECT component || ' ' || state FROM sched.timeline
 WHERE milestone_key = 'step.attempt.lost:50000000-0000-4000-8000-000000000001:1'}),
	'Reaper LOST',
	'a LOST milestone by the Reaper');
is($node->safe_psql('sched_attack', 'SELECT count(*) FROM public.trap_log'),
	'0', 'no trap ran in the worker\'s tick');
is($node->safe_psql('postgres', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'attacker'}),
	'f', 'attacker is no superuser');

# ---------------------------------------------------------------------------------------
# The worker runs as sched_scheduler: without EXECUTE on reap_expired it is refused.
# ---------------------------------------------------------------------------------------
my $worker_pid = $node->safe_psql('postgres',
	q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'pg_sched maintenance'});
$node->safe_psql('sched_attack',
	'REVOKE EXECUTE ON FUNCTION sched.reap_expired(timestamptz) FROM sched_scheduler');
$log_offset = -s $node->logfile;
$node->safe_psql(
	'sched_attack', q{
SELECT sched.submit('e0000000-0000-4000-8000-000000000002', '50000000-0000-4000-8000-000000000002',
    'cap', 'v1', max_attempts => 1, available_at => now() - interval '2 hours');
SELECT outcome FROM sched.dispatch_attempt(
    (SELECT request_id FROM sched.request WHERE step_id = '50000000-0000-4000-8000-000000000002'),
    at => now() - interval '1 hour');
});

# the refusal, logged by the worker, which goes on
my $log = '';
for (my $i = 0; $i < 600; $i++)
{
	$log = slurp_file($node->logfile, $log_offset);
	last
	  if $log =~ /ERROR:  permission denied for function reap_expired/
	  && $log =~ /pg_sched maintenance tick failed/;
	usleep(100_000);
}
like(
	$log,
	qr/ERROR:  permission denied for function reap_expired/,
	'the worker\'s tick is refused: permission denied for function reap_expired');
like($log, qr/pg_sched maintenance tick failed/, 'the worker logs the failed tick');
unlike($log, qr/background worker "pg_sched maintenance" \(PID \d+\) exited/,
	'the worker did not exit on the error');
is($node->safe_psql('postgres',
		q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'pg_sched maintenance'}),
	$worker_pid, 'the same worker process goes on');
is( $node->safe_psql(
		'sched_attack', q{
SELECT status FROM sched.attempt WHERE step_id = '50000000-0000-4000-8000-000000000002'}),
	'DISPATCHED',
	'the expired attempt of step 2 is not reaped (the refused tick rolled back)');
# the refusal is sched_scheduler's: a superuser, as whom the worker connects, has every
# privilege (it is the function's owner, too)
is($node->safe_psql('sched_attack', q{SELECT has_function_privilege('sched_scheduler',
    'sched.reap_expired(timestamptz)', 'EXECUTE')}), 'f', 'sched_scheduler lacks EXECUTE');

$node->safe_psql('sched_attack',
	'GRANT EXECUTE ON FUNCTION sched.reap_expired(timestamptz) TO sched_scheduler');
ok( $node->poll_query_until(
		'sched_attack', q{
SELECT status = 'LOST' FROM sched.attempt WHERE step_id = '50000000-0000-4000-8000-000000000002'}),
	'EXECUTE granted back: the worker\'s next tick reaps step 2');
is($node->safe_psql('sched_attack', 'SELECT count(*) FROM public.trap_log'),
	'0', 'still no trap ran');
is($node->safe_psql('postgres', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'attacker'}),
	'f', 'attacker is still no superuser');

# ---------------------------------------------------------------------------------------
# The traps work: the attacker's now(), with the database's search_path, leaves a row.
# ---------------------------------------------------------------------------------------
{
	local $ENV{PGOPTIONS} = '';
	is($node->safe_psql('sched_attack', 'SELECT now() IS NOT NULL', extra_params => [ '-U', 'attacker' ]),
		't', 'the attacker calls now()');
}
is($node->safe_psql('sched_attack', 'SELECT who || \' \' || trap FROM public.trap_log'),
	'attacker public.now()', 'and its trap left a row: the traps work');
is($node->safe_psql('postgres', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'attacker'}),
	'f', 'attacker could not make itself a superuser');

$node->stop;
done_testing();
