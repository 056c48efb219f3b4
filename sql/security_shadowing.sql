--
-- security_shadowing: "no way up" (issue 11).  A database owner who is not a superuser
-- fills schema public with objects that shadow what pg_sched's SQL uses, and puts public
-- first on the search_path of the database and of its own role; in its own session it
-- also fills pg_temp.  Then pg_sched's functions are called, as the superuser that owns
-- the extension (with the attacker's search_path) and as the attacker itself (whose
-- calls of the write functions run as that superuser): none of the traps may run.
--
-- The traps (public.make_traps): every one is SECURITY INVOKER PL/pgSQL that calls
-- public.trap(name), which writes (current_user, name) into public.trap_log (owned by
-- the attacker, INSERT granted to PUBLIC) and tries ALTER ROLE attacker SUPERUSER (a
-- failure is swallowed), and then returns what the original would, so a call through a
-- trap does not fail and hide its trace:
--   - a twin, with the same signature, of ~300 pg_catalog functions pg_sched or any SQL
--     is likely to call: now(), make_interval, jsonb_strip_nulls, date_trunc, length,
--     lower, round, trim_scale, nextval, gen_random_uuid, pg_notify,
--     pg_advisory_xact_lock, unnest, array_to_string, current_setting, ... (exact
--     twins mask the originals where public comes first);
--   - the variadic "any" functions (jsonb_build_object, format, concat, concat_ws, ...),
--     which PL/pgSQL cannot take, as overloads of concrete types (an exact match wins);
--   - a twin of every pg_catalog operator =, <>, <, <=, >, >=, +, -, *, /, %, ||, @>, <@,
--     ?, ?|, ?&, ->, ->>, #>, #>>, #-, ~~, ~~*, ~, ~*, !~, && on text, uuid, jsonb, the
--     integers, numeric, float8, bool, timestamptz, interval, name, oid and arrays;
--   - aggregates count(*) and count(<type>) (an exact type beats count("any")), sum,
--     max, min, bool_or, bool_and, every, string_agg, array_agg, jsonb_agg,
--     jsonb_object_agg, percentile_cont (ordered-set);
--   - domains named text, uuid, jsonb, json, timestamptz, int2, int4, int8, float8, bool,
--     name, oid, regrole, regclass, regnamespace, regprocedure, regtype, date over the
--     real types, CHECKed by a trap (a cast to one runs it);
--   - in pg_temp: the same, plus domains named as pg_sched's types (dispatch_result,
--     registration, ...) and views named as pg_sched's tables, views and sequences
--     whose reading runs a trap (pg_temp is searched for relations and types).
-- A cast cannot be a trap: the attacker owns no type but its domains, and a cast to or
-- from a domain is ignored (the WARNING below).
--
-- The sequence called covers every write path, C and PL/pgSQL, and the readers.  At the
-- end public.trap_log is empty and attacker is no superuser; then the attacker calls
-- now() itself, and the trap leaves its row: the traps work, pg_sched never met one.
--
-- Everything the test's own statements use once the traps are set is qualified
-- (pg_catalog.count, OPERATOR(pg_catalog.=)) or needs no lookup: with the attacker's
-- search_path, an unqualified = or count in the test's own SQL would run a trap, and
-- that would be the test's doing, not pg_sched's.  Even pg_catalog first is not enough:
-- with public anywhere on the path, an overload there such as format(text, text, text)
-- beats pg_catalog's format(text, VARIADIC "any"); only a path without public is safe,
-- as pg_sched's (pg_temp, last in it, is never searched for functions or operators).
-- The attacker's database is dropped at the end, and the role, so the test can run
-- again in the same cluster.
--
SET client_min_messages = warning;
DROP DATABASE IF EXISTS sched_attack WITH (FORCE);
DROP ROLE IF EXISTS attacker;
RESET client_min_messages;
CREATE ROLE attacker LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB;
GRANT sched_admin TO attacker;
CREATE DATABASE sched_attack OWNER attacker;
SELECT current_user AS sched_superuser, current_database() AS home_db \gset

-- =====================================================================================
-- 1. The attacker, owner of sched_attack, sets its traps in public (which it owns:
-- public belongs to pg_database_owner) with the default search_path, where pg_catalog
-- comes first.
-- =====================================================================================
\c sched_attack attacker
SELECT current_user, rolsuper FROM pg_roles WHERE rolname = current_user;
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

CALL public.make_traps('public');
-- the traps of public, by kind
SELECT 'functions' AS kind, pg_catalog.count(*) AS traps FROM pg_proc
 WHERE pronamespace = 'public'::regnamespace AND prokind = 'f' AND proname !~ '^trap'
UNION ALL
SELECT 'aggregates', pg_catalog.count(*) FROM pg_proc WHERE pronamespace = 'public'::regnamespace AND prokind = 'a'
UNION ALL
SELECT 'operators', pg_catalog.count(*) FROM pg_operator WHERE oprnamespace = 'public'::regnamespace
UNION ALL
SELECT 'domains', pg_catalog.count(*) FROM pg_type WHERE typnamespace = 'public'::regnamespace AND typtype = 'd';
-- among them (count() is count(*))
SELECT trap FROM (
    SELECT pg_catalog.format('public.%s(%s)', p.proname,
                             pg_catalog.array_to_string(p.proargtypes::regtype[], ', ')) AS trap
      FROM pg_proc p
     WHERE p.pronamespace = 'public'::regnamespace
       AND p.proname IN ('now', 'make_interval', 'jsonb_strip_nulls', 'jsonb_build_object', 'count')) t
 ORDER BY trap COLLATE "C";
SELECT o.oid::regoperator AS trap FROM pg_operator o
 WHERE o.oprnamespace = 'public'::regnamespace AND o.oprname = '='
   AND o.oprleft IN ('text'::regtype, 'uuid'::regtype, 'jsonb'::regtype)
 ORDER BY o.oprleft, o.oprright;
-- a cast: the attacker owns no type but its domains, and PostgreSQL ignores casts on those
CREATE FUNCTION public.trap_cast(v pg_catalog.text) RETURNS public.uuid
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM public.trap('public.uuid(text) (cast)'); RETURN v::pg_catalog.uuid; END $$;
CREATE CAST (pg_catalog.text AS public.uuid) WITH FUNCTION public.trap_cast(pg_catalog.text) AS IMPLICIT;
-- public first, for everyone who connects to the database, and for the attacker's role
ALTER DATABASE sched_attack SET search_path = public, pg_catalog;
ALTER ROLE attacker SET search_path = public, pg_catalog;
SELECT pg_catalog.count(*) AS trap_rows FROM public.trap_log;

-- =====================================================================================
-- 2. The superuser connects: the database's search_path applies (public first).  It
-- installs pg_sched and runs every write path and the readers.
-- =====================================================================================
\c sched_attack :sched_superuser
SHOW search_path;
SELECT rolsuper AS superuser FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) current_user;
CREATE EXTENSION pg_sched;
SET sched.heartbeat_ttl = '1d';
-- T = 2024-01-01 00:00:00+00.  Nodes n1 (zone a, a GPU, weight 200) and n2 (zone b).
SELECT node_id, management_status, labels, weight
  FROM sched.upsert_node('n1', labels => '{"zone": "a", "gpu": "a100"}', cpu_millis => 8000,
                         memory_mb => 16384, gpus => 1, weight => 200);
SELECT node_id, management_status, labels, weight
  FROM sched.upsert_node('n2', labels => '{"zone": "b"}', cpu_millis => 8000, memory_mb => 16384,
                         weight => 100);
SELECT * FROM sched.register_worker('n1', 'build', ARRAY['1', '2'], 2,
    worker_id => '00000000-0000-4000-8000-0000000000a1', at => '2024-01-01 00:00:00+00');
SELECT * FROM sched.register_worker('n2', 'build', ARRAY['1'], 2,
    worker_id => '00000000-0000-4000-8000-0000000000a2', at => '2024-01-01 00:00:00+00');
SELECT worker_id, generation, runtime_state, scheduling_status
  FROM sched.heartbeat('00000000-0000-4000-8000-0000000000a1', 1, at => '2024-01-01 00:00:05+00');
SELECT worker_id, generation, runtime_state, scheduling_status
  FROM sched.heartbeat('00000000-0000-4000-8000-0000000000a2', 1, at => '2024-01-01 00:00:05+00');
SELECT tenant, weight, owner FROM sched.set_tenant_weight('t1', 3);
SELECT tenant, weight, owner FROM sched.set_tenant_owner('t1', 'sched_admin');
-- E1/S1: payload and labels; E2/S2 pinned to zone b; E3/S3
SELECT sched.submit('e1000000-0000-4000-8000-000000000001', '51000000-0000-4000-8000-000000000001',
    'build', '1', tenant => 't1', priority => 5,
    preferred_labels => '{"gpu": "a100"}', reserve_cpu_millis => 1000, reserve_memory_mb => 1024,
    max_attempts => 3, available_at => '2024-01-01 00:00:00+00',
    payload => '{"cmd": "make", "env": {"CI": "1"}, "none": null}') AS r1 \gset
SELECT sched.submit('e2000000-0000-4000-8000-000000000002', '52000000-0000-4000-8000-000000000002',
    'build', '1', required_labels => '{"zone": "b"}', reserve_cpu_millis => 500,
    available_at => '2024-01-01 00:00:00+00') AS r2 \gset
SELECT sched.submit('e3000000-0000-4000-8000-000000000003', '53000000-0000-4000-8000-000000000003',
    'build', '2', available_at => '2024-01-01 00:00:00+00') AS r3 \gset
-- an idempotent repeat returns the same request
SELECT sched.submit('e1000000-0000-4000-8000-000000000001', '51000000-0000-4000-8000-000000000001',
    'build', '1', tenant => 't1') OPERATOR(pg_catalog.=) :r1 AS same_request;

-- the readers, before dispatch
SELECT node_id, worker_id, score
  FROM sched.select_candidate('build', '1', preferred_labels => '{"gpu": "a100"}',
                              reserve_cpu_millis => 1000, at => '2024-01-01 00:00:10+00');
SELECT node_id, score
  FROM sched.rank_candidates('build', '1', required_labels => '{"zone": "b"}',
                             at => '2024-01-01 00:00:10+00');
SELECT node_id, eligible, reasons
  FROM sched.qualification_reasons('build', '2', min_gpus => 1, at => '2024-01-01 00:00:10+00')
 ORDER BY node_id;
SELECT node_id, eligible, reasons
  FROM sched.qualification_reasons(:r2, '2024-01-01 00:00:10+00') ORDER BY node_id;
SELECT pg_catalog.length(sched.explain(:r1, '2024-01-01 00:00:10+00')) OPERATOR(pg_catalog.>) 0 AS explained;
SELECT request_id, tenant, capability, priority, state, pinned_to
  FROM sched.pending('2024-01-01 00:00:10+00') ORDER BY request_id;
SELECT request_id, explanation IS NOT NULL AS explained
  FROM sched.pending_explanations('2024-01-01 00:00:10+00') ORDER BY request_id;
-- the view's per-row function has no proconfig (it pins the path itself while it runs
-- SQL): every row explained with the attacker's path in force, and the path given back
SELECT pg_catalog.count(explanation) AS explained, pg_catalog.current_setting('search_path') AS path
  FROM sched.pending;
SELECT (sched.pending_explanation('build', '1', '{"zone": "b"}', 0, 0, 0, 0, 0, 0, NULL,
                                  '2024-01-01 00:00:10+00')).blocked AS blocked_zone_b;

-- S1, attempt 1: dispatch, poll, start, renew, finish FAILED (a retry is queued)
SELECT outcome, node_id, worker_id, lease_version, score
  FROM sched.dispatch_attempt(:r1, at => '2024-01-01 00:00:10+00');
SELECT attempt_id AS a1 FROM sched.attempt
 WHERE step_id OPERATOR(pg_catalog.=) '51000000-0000-4000-8000-000000000001'
   AND attempt_number OPERATOR(pg_catalog.=) 1 \gset
SELECT kind, lease_version, step_id, attempt_number, capability, capability_version, payload
  FROM sched.poll_commands('00000000-0000-4000-8000-0000000000a1', 1, at => '2024-01-01 00:00:11+00');
SELECT sched.start_attempt(:'a1', 1, '2024-01-01 00:00:12+00') AS lease_expires_at;
SELECT sched.renew_lease(:'a1', 1, '2024-01-01 00:00:20+00') AS lease_expires_at;
SELECT sched.finish_attempt(:'a1', 1, 'FAILED', '{"exit_code": 1}', '2024-01-01 00:00:30+00');
SELECT attempt_number, state, avoid_node_id, available_at
  FROM sched.request WHERE step_id OPERATOR(pg_catalog.=) '51000000-0000-4000-8000-000000000001'
 ORDER BY attempt_number;

-- S1, attempt 2 by dispatch_next (it avoids n1), finish SUCCEEDED, complete E1
SELECT outcome, node_id, lease_version
  FROM sched.dispatch_next(1, capability => 'build', tenant => 't1', at => '2024-01-01 00:01:00+00');
SELECT attempt_id AS a1b FROM sched.attempt
 WHERE step_id OPERATOR(pg_catalog.=) '51000000-0000-4000-8000-000000000001'
   AND attempt_number OPERATOR(pg_catalog.=) 2 \gset
SELECT kind, lease_version, attempt_number, payload
  FROM sched.poll_commands('00000000-0000-4000-8000-0000000000a2', 1, at => '2024-01-01 00:01:01+00');
SELECT sched.start_attempt(:'a1b', 1, '2024-01-01 00:01:02+00') AS lease_expires_at;
SELECT sched.finish_attempt(:'a1b', 1, 'SUCCEEDED', at => '2024-01-01 00:01:30+00');
SELECT sched.complete_execution('e1000000-0000-4000-8000-000000000001', '2024-01-01 00:01:31+00');

-- S3: dispatched, then its execution cancelled while the attempt is live: CANCEL command
SELECT outcome, node_id FROM sched.dispatch_attempt(:r3, at => '2024-01-01 00:02:00+00');
SELECT attempt_id AS a3 FROM sched.attempt
 WHERE step_id OPERATOR(pg_catalog.=) '53000000-0000-4000-8000-000000000003' \gset
SELECT sched.cancel_execution('e3000000-0000-4000-8000-000000000003', '2024-01-01 00:02:01+00');
SELECT kind, attempt_number
  FROM sched.poll_commands('00000000-0000-4000-8000-0000000000a1', 1, at => '2024-01-01 00:02:02+00');
SELECT sched.finish_attempt(:'a3', 1, 'CANCELLED', at => '2024-01-01 00:02:03+00');

-- S2: claimed, dispatched under its claim, its lease expires: reap_expired (later `at`)
SELECT claim_id AS c2 FROM sched.claim_requests(1, '30 s', capability => 'build',
    at => '2024-01-01 00:03:00+00') \gset
SELECT state FROM sched.request WHERE request_id OPERATOR(pg_catalog.=) :r2;
SELECT outcome, node_id, lease_version
  FROM sched.dispatch_attempt(:r2, claim_id => :'c2', at => '2024-01-01 00:03:01+00');
SELECT sched.reap_expired('2024-01-02 00:00:00+00') AS reaped;
SELECT attempt_number, status FROM sched.attempt
 WHERE step_id OPERATOR(pg_catalog.=) '52000000-0000-4000-8000-000000000002' ORDER BY attempt_number;
SELECT attempt_number, state, avoid_node_id FROM sched.request
 WHERE step_id OPERATOR(pg_catalog.=) '52000000-0000-4000-8000-000000000002' ORDER BY attempt_number;
SELECT sched.cancel_execution('e2000000-0000-4000-8000-000000000002', '2024-01-02 00:00:01+00');

-- the fleet: drain, cordon, uncordon; the tenant's fence off
SELECT node_id, management_status FROM sched.drain_node('n2');
SELECT worker_id, scheduling_status FROM sched.cordon_worker('00000000-0000-4000-8000-0000000000a1');
SELECT worker_id, scheduling_status FROM sched.uncordon_worker('00000000-0000-4000-8000-0000000000a1');
SELECT tenant, weight, owner FROM sched.set_tenant_owner('t1', NULL);

-- the readers, after
SELECT node_id, status, workers, worker_states, live_attempts, weight
  FROM sched.node_overview('2024-01-02 00:01:00+00') ORDER BY node_id;
SELECT tenant, capability, pending, ready_now, dispatched_5m
  FROM sched.queue_stats('2024-01-01 00:02:30+00') ORDER BY tenant, capability;
SELECT step_id, attempt_number, status, node_id
  FROM sched.attempt_overview('2024-01-02 00:01:00+00') ORDER BY step_id, attempt_number;
SELECT stage, milestone, state, component
  FROM sched.execution_timeline('e1000000-0000-4000-8000-000000000001');
SELECT pg_catalog.count(*) OPERATOR(pg_catalog.>=) 0 AS read FROM sched.pending;
SELECT pg_catalog.count(*) OPERATOR(pg_catalog.>=) 0 AS read FROM sched.node_overview;
SELECT pg_catalog.count(*) OPERATOR(pg_catalog.>=) 0 AS read FROM sched.queue_stats;
SELECT pg_catalog.count(*) OPERATOR(pg_catalog.>=) 0 AS read FROM sched.attempt_overview;
SELECT sched.step_lock_key('51000000-0000-4000-8000-000000000001', 1) IS NOT NULL AS keyed,
       sched.setting_seconds('sched.lease_ttl') AS lease_ttl_s,
       sched.format_cpus(1500) AS cpus, sched.format_amount('1', 'GPU') AS gpus,
       sched.format_duration('125 s') AS duration;

-- `at` left to its default, now() (bound when pg_sched was installed, not looked up)
SELECT sched.reap_expired() AS reaped;
SELECT pg_catalog.length(sched.explain(:r1)) OPERATOR(pg_catalog.>) 0 AS explained;

-- no trap ran, and the attacker is what it was
SELECT pg_catalog.count(*) AS trap_rows FROM public.trap_log;
SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) 'attacker';

-- =====================================================================================
-- 3. The attacker's own session: traps in pg_temp too, pg_temp first on its path, and
-- the write functions (which run as the superuser that owns pg_sched) called by the
-- attacker (a member of sched_admin: it may call every one).  Its own statements use
-- nothing a trap shadows.
-- =====================================================================================
\c sched_attack attacker
SHOW search_path;
SET search_path = pg_catalog, pg_temp;
CALL public.make_traps('pg_temp');
SET search_path = pg_temp, public, pg_catalog;
SHOW search_path;
SELECT node_id, management_status FROM sched.upsert_node('n3', labels => '{"zone": "c"}',
    cpu_millis => 4000, memory_mb => 8192);
SELECT * FROM sched.register_worker('n3', 'build', ARRAY['1'], 1,
    worker_id => '00000000-0000-4000-8000-0000000000a3', at => '2024-01-03 00:00:00+00');
SELECT generation, runtime_state
  FROM sched.heartbeat('00000000-0000-4000-8000-0000000000a3', 1, at => '2024-01-03 00:00:01+00');
SELECT worker_id, scheduling_status FROM sched.uncordon_worker('00000000-0000-4000-8000-0000000000a3');
SELECT tenant, weight FROM sched.set_tenant_weight('t4', 2);
SELECT tenant, owner FROM sched.set_tenant_owner('t4', 'attacker');
SELECT sched.submit('e4000000-0000-4000-8000-000000000004', '54000000-0000-4000-8000-000000000004',
    'build', '1', tenant => 't4', required_labels => '{"zone": "c"}',
    payload => '{"x": [1, 2]}', available_at => '2024-01-03 00:00:00+00') AS r4 \gset
SELECT sched.submit('e4000000-0000-4000-8000-000000000004', '54000000-0000-4000-8000-000000000005',
    'build', '1', tenant => 't4', required_labels => '{"zone": "c"}',
    available_at => '2024-01-03 00:00:00+00') AS r5 \gset
SELECT claim_id AS c4, request_id OPERATOR(pg_catalog.=) :r4 AS claimed_r4
  FROM sched.claim_requests(1, '1 min', tenant => 't4', at => '2024-01-03 00:00:02+00') \gset
\echo claimed r4: :claimed_r4
SELECT outcome, node_id, lease_version
  FROM sched.dispatch_attempt(:r4, claim_id => :'c4', at => '2024-01-03 00:00:03+00');
SELECT attempt_id AS a4 FROM sched.poll_commands('00000000-0000-4000-8000-0000000000a3', 1,
    at => '2024-01-03 00:00:04+00') \gset
SELECT sched.start_attempt(:'a4', 1, '2024-01-03 00:00:05+00') AS lease_expires_at;
SELECT sched.renew_lease(:'a4', 1, '2024-01-03 00:00:06+00') AS lease_expires_at;
SELECT sched.finish_attempt(:'a4', 1, 'SUCCEEDED', '{"ok": true}', '2024-01-03 00:00:07+00');
SELECT outcome, node_id, lease_version
  FROM sched.dispatch_next(1, tenant => 't4', at => '2024-01-03 00:00:08+00');
SELECT sched.reap_expired('2024-01-04 00:00:00+00') AS reaped;
-- the readers, as the attacker
SELECT node_id, eligible FROM sched.qualification_reasons(:r4, '2024-01-03 00:00:10+00') ORDER BY node_id;
SELECT node_id, score FROM sched.select_candidate('build', '1', required_labels => '{"zone": "c"}',
    at => '2024-01-03 00:00:10+00');
SELECT node_id, status FROM sched.node_overview('2024-01-03 00:00:10+00') ORDER BY node_id;
SELECT pg_catalog.length(sched.explain(:r5, '2024-01-03 00:00:10+00')) OPERATOR(pg_catalog.>) 0 AS explained;
SELECT pg_catalog.count(*) AS timeline_rows
  FROM sched.execution_timeline('e4000000-0000-4000-8000-000000000004');
SELECT sched.cancel_execution('e4000000-0000-4000-8000-000000000004', '2024-01-04 00:00:01+00');
SELECT sched.complete_execution('e1000000-0000-4000-8000-000000000001', '2024-01-04 00:00:02+00');
SELECT worker_id, scheduling_status FROM sched.cordon_worker('00000000-0000-4000-8000-0000000000a3');
SELECT node_id, management_status FROM sched.drain_node('n3');
-- no trap ran
SELECT pg_catalog.count(*) AS trap_rows FROM public.trap_log;
SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) 'attacker';

-- =====================================================================================
-- 4. The traps work: the attacker, with its own search_path, calls now() and the trap
-- leaves its row (and fails to make it a superuser).
-- =====================================================================================
\c sched_attack attacker
SHOW search_path;
SELECT now() IS NOT NULL AS called;
SELECT who, trap FROM public.trap_log;
SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) 'attacker';

-- =====================================================================================
-- Clean up: the database and the role.
-- =====================================================================================
\c :home_db :sched_superuser
DROP DATABASE sched_attack WITH (FORCE);
DROP ROLE attacker;
