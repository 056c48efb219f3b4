-- describe.sql — a canonical text description of everything extension pg_sched installs
-- in the current database, one property per line, sorted (COLLATE "C").  run.sh prints
-- it for a database brought to the default version by ALTER EXTENSION ... UPDATE and for
-- a fresh CREATE EXTENSION, and requires the two to be identical.
--
-- Generic on purpose: it knows nothing of what a version contains.  It describes
--   * the extension row (version, schema, owner, config dump tables with conditions,
--     required extensions) and every member object (pg_depend deptype 'e');
--   * every member schema, and every relation, type and function that is a member or
--     lies in a member schema (objects in a member schema that are not members are
--     flagged NOT A MEMBER);
--   * tables, views, sequences, composite types: columns in order (type, collation,
--     NOT NULL, default, generated expression, identity, storage, compression,
--     statistics target, options, column privileges), constraints, indexes, triggers
--     (with their enabled state), rules, policies, extended statistics, options,
--     persistence, replica identity, row security, inheritance, view definitions,
--     sequence parameters and OWNED BY (not the current value);
--   * types: kind, storage, I/O functions, domain base type, default and constraints,
--     enum labels, range parameters;
--   * functions and procedures: arguments with defaults, identity arguments, result,
--     kind, language, volatility, strictness, SECURITY DEFINER, leakproof, parallel,
--     cost, rows, support function, SET options, md5 and length of the source, probin;
--   * owners, privileges (effective: the default ones when the ACL is NULL) and the
--     initial privileges pg_dump uses (pg_init_privs), with role names, sorted;
--   * comments and security labels of all of the above (also columns, constraints,
--     indexes, triggers), default privileges in member schemas;
--   * roles whose name starts with 'sched': attributes, settings, memberships.
-- Left out because they legitimately differ: OIDs, the database name, current sequence
-- values, physical column numbers (a dropped column leaves a gap; positions are counted
-- over the live columns), the "missing value" ALTER TABLE ADD COLUMN keeps for old rows,
-- statistics and sizes, and the attribute option pg_attver that this server stamps on
-- every column with a value of its own per relation and database.
--
-- Usage: psql -X -q -At -v ON_ERROR_STOP=1 -f describe.sql   (creates two functions in
-- pg_temp, nothing else; may run inside a transaction)
SET search_path = pg_catalog, pg_temp;   -- every name outside pg_catalog comes qualified
SET client_min_messages = warning;

-- privileges as sorted lines "grantee: PRIV, PRIV* (granted by role)" (* = grant option)
CREATE OR REPLACE FUNCTION pg_temp.acl_lines(acl aclitem[])
RETURNS SETOF text LANGUAGE sql STABLE AS $$
    SELECT format('%s: %s (granted by %s)',
                  CASE WHEN x.grantee = 0 THEN 'PUBLIC' ELSE x.grantee::regrole::text END,
                  string_agg(x.privilege_type || CASE WHEN x.is_grantable THEN '*' ELSE '' END,
                             ', ' ORDER BY x.privilege_type),
                  x.grantor::regrole::text)
      FROM aclexplode(acl) x
     GROUP BY x.grantee, x.grantor
    UNION ALL
    SELECT '(no privileges)' WHERE cardinality(acl) = 0
$$;

-- multi-line text (view definitions, sources) indented under its line
CREATE OR REPLACE FUNCTION pg_temp.ml(t text)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(replace(rtrim(t, E'\n'), E'\n', E'\n        '), '<null>')
$$;

WITH
ext AS (SELECT e.* FROM pg_extension e WHERE e.extname = 'pg_sched'),
mem AS (
    SELECT d.classid, d.objid, d.objsubid
      FROM pg_depend d JOIN ext ON d.refobjid = ext.oid
     WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
),
nsp AS (SELECT n.* FROM pg_namespace n
         WHERE n.oid IN (SELECT objid FROM mem WHERE classid = 'pg_namespace'::regclass)),
-- relations: members, and tables/views/sequences/foreign tables in a member schema
rel AS (
    SELECT c.*, o.type AS otype, o.identity AS oname,
           CASE WHEN EXISTS (SELECT 1 FROM mem m WHERE m.classid = 'pg_class'::regclass AND m.objid = c.oid)
                THEN 'member'
                WHEN EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass
                                AND d.objid = c.oid AND d.deptype = 'i')
                THEN 'internal (part of another object)'
                ELSE 'NOT A MEMBER' END AS membership
      FROM pg_class c, LATERAL pg_identify_object('pg_class'::regclass, c.oid, 0) o
     WHERE c.oid IN (SELECT objid FROM mem WHERE classid = 'pg_class'::regclass)
        OR (c.relnamespace IN (SELECT oid FROM nsp) AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f'))
),
-- types: members, and in a member schema every type that is not an array type or the
-- row type of a table/view/sequence (those belong to their relation)
typ AS (
    SELECT t.*, o.type AS otype, o.identity AS oname,
           CASE WHEN EXISTS (SELECT 1 FROM mem m WHERE m.classid = 'pg_type'::regclass AND m.objid = t.oid)
                THEN 'member'
                WHEN EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_type'::regclass
                                AND d.objid = t.oid AND d.deptype = 'i')
                THEN 'internal (part of another object)'
                ELSE 'NOT A MEMBER' END AS membership
      FROM pg_type t, LATERAL pg_identify_object('pg_type'::regclass, t.oid, 0) o
     WHERE t.oid IN (SELECT objid FROM mem WHERE classid = 'pg_type'::regclass)
        OR (t.typnamespace IN (SELECT oid FROM nsp)
            AND (t.typrelid = 0 OR (SELECT c.relkind FROM pg_class c WHERE c.oid = t.typrelid) = 'c')
            AND NOT EXISTS (SELECT 1 FROM pg_type a WHERE a.typarray = t.oid))
),
fn AS (
    SELECT p.*, o.type AS otype, p.oid::regprocedure::text AS oname,
           CASE WHEN EXISTS (SELECT 1 FROM mem m WHERE m.classid = 'pg_proc'::regclass AND m.objid = p.oid)
                THEN 'member' ELSE 'NOT A MEMBER' END AS membership
      FROM pg_proc p, LATERAL pg_identify_object('pg_proc'::regclass, p.oid, 0) o
     WHERE p.oid IN (SELECT objid FROM mem WHERE classid = 'pg_proc'::regclass)
        OR p.pronamespace IN (SELECT oid FROM nsp)
),
-- objects that have columns, constraints, indexes, triggers: relations and composite types
owners AS (
    SELECT r.oid AS relid, r.otype || ' ' || r.oname AS key FROM rel r
    UNION ALL
    SELECT t.typrelid, t.otype || ' ' || t.oname FROM typ t WHERE t.typrelid <> 0
),
-- everything described, for comments, security labels and initial privileges
described AS (
    SELECT 'pg_extension'::regclass::oid AS classid, ext.oid AS objid FROM ext
    UNION SELECT 'pg_namespace'::regclass, oid FROM nsp
    UNION SELECT 'pg_class'::regclass, relid FROM owners
    UNION SELECT 'pg_class'::regclass, indexrelid FROM pg_index WHERE indrelid IN (SELECT relid FROM owners)
    UNION SELECT 'pg_type'::regclass, oid FROM typ
    UNION SELECT 'pg_proc'::regclass, oid FROM fn
    UNION SELECT 'pg_constraint'::regclass, oid FROM pg_constraint
           WHERE conrelid IN (SELECT relid FROM owners) OR contypid IN (SELECT oid FROM typ)
    UNION SELECT 'pg_trigger'::regclass, oid FROM pg_trigger
           WHERE tgrelid IN (SELECT relid FROM owners) AND NOT tgisinternal
    UNION SELECT 'pg_policy'::regclass, oid FROM pg_policy WHERE polrelid IN (SELECT relid FROM owners)
    UNION SELECT 'pg_rewrite'::regclass, oid FROM pg_rewrite WHERE ev_class IN (SELECT relid FROM owners)
    UNION SELECT 'pg_statistic_ext'::regclass, oid FROM pg_statistic_ext WHERE stxrelid IN (SELECT relid FROM owners)
    UNION SELECT classid, objid FROM mem
),
sched_roles AS (SELECT r.* FROM pg_roles r WHERE r.rolname LIKE 'sched%'),
lines(line) AS (
    -- ---- the extension ----------------------------------------------------------------
    SELECT 'extension pg_sched | installed | ' || CASE WHEN EXISTS (SELECT 1 FROM ext) THEN 'yes' ELSE 'NO' END
    UNION ALL
    SELECT format('extension pg_sched | %s | %s', k, v)
      FROM ext, LATERAL (VALUES
          ('version', ext.extversion),
          ('owner', ext.extowner::regrole::text),
          ('schema', ext.extnamespace::regnamespace::text),
          ('relocatable', ext.extrelocatable::text),
          ('config tables', coalesce(cardinality(ext.extconfig), 0)::text)) AS p(k, v)
    UNION ALL
    SELECT format('extension pg_sched | config table %s | condition %L', c.tbl::regclass, c.cond)
      FROM ext, LATERAL unnest(ext.extconfig, ext.extcondition) AS c(tbl, cond)
    UNION ALL
    SELECT 'extension pg_sched | requires | ' || e2.extname
      FROM ext JOIN pg_depend d ON d.classid = 'pg_extension'::regclass AND d.objid = ext.oid
      JOIN pg_extension e2 ON d.refclassid = 'pg_extension'::regclass AND d.refobjid = e2.oid
     WHERE d.deptype = 'n'
    UNION ALL
    SELECT format('member | %s | %s', o.type, o.identity)
      FROM mem, LATERAL pg_identify_object(mem.classid, mem.objid, mem.objsubid) o

    -- ---- schemas ----------------------------------------------------------------------
    UNION ALL
    SELECT format('schema %s | owner | %s', n.nspname, n.nspowner::regrole) FROM nsp n
    UNION ALL
    SELECT format('schema %s | privileges | %s', n.nspname, a)
      FROM nsp n, LATERAL pg_temp.acl_lines(coalesce(n.nspacl, acldefault('n', n.nspowner))) a
    UNION ALL
    SELECT format('default privileges | schema %s, role %s, on %s | %s',
                  d.defaclnamespace::regnamespace, d.defaclrole::regrole, d.defaclobjtype, a)
      FROM pg_default_acl d, LATERAL pg_temp.acl_lines(d.defaclacl) a
     WHERE d.defaclnamespace IN (SELECT oid FROM nsp)

    -- ---- relations ----------------------------------------------------------------------
    UNION ALL
    SELECT format('%s %s | %s | %s', r.otype, r.oname, p.k, p.v)
      FROM rel r, LATERAL (VALUES
          ('membership', r.membership),
          ('owner', r.relowner::regrole::text),
          ('persistence', r.relpersistence::text),
          ('access method', coalesce((SELECT amname::text FROM pg_am WHERE oid = r.relam), '-')),
          ('tablespace', coalesce((SELECT spcname::text FROM pg_tablespace WHERE oid = r.reltablespace), 'default')),
          ('options', coalesce((SELECT string_agg(o, ', ' ORDER BY o) FROM unnest(r.reloptions) o), '-')),
          ('replica identity', r.relreplident::text),
          ('row security', format('enabled %s, forced %s', r.relrowsecurity, r.relforcerowsecurity)),
          ('of type', CASE WHEN r.reloftype = 0 THEN '-' ELSE format_type(r.reloftype, NULL) END),
          ('partition key', coalesce(pg_get_partkeydef(r.oid), '-')),
          ('partition bound', coalesce(pg_get_expr(r.relpartbound, r.oid), '-')),
          ('inherits', coalesce((SELECT string_agg(i.inhparent::regclass::text, ', ' ORDER BY i.inhseqno)
                                   FROM pg_inherits i WHERE i.inhrelid = r.oid), '-'))) AS p(k, v)
    UNION ALL
    SELECT format('%s %s | definition | %s', r.otype, r.oname, pg_temp.ml(pg_get_viewdef(r.oid)))
      FROM rel r WHERE r.relkind IN ('v', 'm')
    UNION ALL
    SELECT format('%s %s | privileges | %s', r.otype, r.oname, a)
      FROM rel r, LATERAL pg_temp.acl_lines(coalesce(r.relacl,
               acldefault(CASE WHEN r.relkind = 'S' THEN 's' ELSE 'r' END::"char", r.relowner))) a
    -- sequences
    UNION ALL
    SELECT format('%s %s | parameters | type %s, start %s, increment %s, min %s, max %s, cache %s, cycle %s',
                  r.otype, r.oname, format_type(s.seqtypid, NULL), s.seqstart, s.seqincrement,
                  s.seqmin, s.seqmax, s.seqcache, s.seqcycle)
      FROM rel r JOIN pg_sequence s ON s.seqrelid = r.oid
    UNION ALL
    SELECT format('%s %s | owned by | %s.%I (%s)', r.otype, r.oname, d.refobjid::regclass, a.attname,
                  CASE d.deptype WHEN 'a' THEN 'OWNED BY' WHEN 'i' THEN 'identity' ELSE d.deptype::text END)
      FROM rel r
      JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = r.oid
                      AND d.refclassid = 'pg_class'::regclass AND d.refobjsubid > 0 AND d.deptype IN ('a', 'i')
      JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
     WHERE r.relkind = 'S'
    -- columns (of relations and composite types), in order
    UNION ALL
    SELECT format('%s | column %s %I | %s', o.key, lpad(a.pos::text, 3, '0'), a.attname,
                  concat_ws(', ',
                      format_type(a.atttypid, a.atttypmod),
                      CASE WHEN a.attcollation <> 0 THEN
                          (SELECT format('collate %I.%I', cn.nspname, co.collname)
                             FROM pg_collation co JOIN pg_namespace cn ON cn.oid = co.collnamespace
                            WHERE co.oid = a.attcollation) END,
                      CASE WHEN a.attnotnull THEN 'not null' END,
                      CASE WHEN a.attgenerated = 's' THEN 'generated always as (' || pg_get_expr(ad.adbin, ad.adrelid) || ') stored'
                           WHEN a.attgenerated <> '' THEN format('generated (%s) as (%s)', a.attgenerated, pg_get_expr(ad.adbin, ad.adrelid))
                           WHEN ad.adbin IS NOT NULL THEN 'default ' || pg_get_expr(ad.adbin, ad.adrelid) END,
                      CASE a.attidentity WHEN 'a' THEN 'generated always as identity'
                                         WHEN 'd' THEN 'generated by default as identity' END,
                      'storage ' || a.attstorage::text,
                      CASE WHEN a.attcompression <> '' THEN 'compression ' || a.attcompression::text END,
                      CASE WHEN a.attstattarget <> -1 THEN 'statistics ' || a.attstattarget END,
                      (SELECT 'options ' || string_agg(o, ',' ORDER BY o) FROM unnest(a.attoptions) o
                        WHERE o NOT LIKE 'pg\_attver=%'),
                      CASE WHEN a.attfdwoptions IS NOT NULL THEN 'fdw options ' || array_to_string(a.attfdwoptions, ',') END,
                      CASE WHEN NOT a.attislocal OR a.attinhcount > 0
                           THEN format('inherited %s, local %s', a.attinhcount, a.attislocal) END))
      FROM owners o
      JOIN (SELECT x.*, row_number() OVER (PARTITION BY x.attrelid ORDER BY x.attnum) AS pos
              FROM pg_attribute x WHERE x.attnum > 0 AND NOT x.attisdropped) a ON a.attrelid = o.relid
      LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
    UNION ALL
    SELECT format('%s | column %I | privileges | %s', o.key, a.attname, p)
      FROM owners o
      JOIN pg_attribute a ON a.attrelid = o.relid AND a.attnum > 0 AND NOT a.attisdropped AND a.attacl IS NOT NULL,
           LATERAL pg_temp.acl_lines(a.attacl) p
    -- constraints, indexes, triggers, rules, policies, extended statistics
    UNION ALL
    SELECT format('%s | constraint %I | %s%s', o.key, c.conname, pg_get_constraintdef(c.oid),
                  CASE WHEN NOT c.conislocal OR c.coninhcount > 0
                       THEN format(' (inherited %s, local %s)', c.coninhcount, c.conislocal) ELSE '' END)
      FROM owners o JOIN pg_constraint c ON c.conrelid = o.relid
    UNION ALL
    SELECT format('%s | index %s | %s%s%s%s', o.key, i.indexrelid::regclass, pg_get_indexdef(i.indexrelid),
                  CASE WHEN i.indisclustered THEN ' [clustered]' ELSE '' END,
                  CASE WHEN i.indisreplident THEN ' [replica identity]' ELSE '' END,
                  CASE WHEN NOT i.indisvalid OR NOT i.indisready THEN ' [invalid]' ELSE '' END)
      FROM owners o JOIN pg_index i ON i.indrelid = o.relid
    UNION ALL
    SELECT format('%s | trigger %I | %s | enabled %s', o.key, t.tgname, pg_get_triggerdef(t.oid), t.tgenabled)
      FROM owners o JOIN pg_trigger t ON t.tgrelid = o.relid
     WHERE NOT t.tgisinternal
    UNION ALL
    SELECT format('%s | rule %I | %s | enabled %s', o.key, w.rulename, pg_temp.ml(pg_get_ruledef(w.oid)), w.ev_enabled)
      FROM owners o JOIN pg_rewrite w ON w.ev_class = o.relid
     WHERE w.rulename <> '_RETURN'
    UNION ALL
    SELECT format('%s | policy %I | %s, %s, to %s, using (%s), with check (%s)', o.key, p.polname,
                  p.polcmd, CASE WHEN p.polpermissive THEN 'permissive' ELSE 'restrictive' END,
                  (SELECT string_agg(CASE WHEN r = 0 THEN 'PUBLIC' ELSE r::regrole::text END, ', ' ORDER BY 1)
                     FROM unnest(p.polroles) r),
                  pg_get_expr(p.polqual, p.polrelid), pg_get_expr(p.polwithcheck, p.polrelid))
      FROM owners o JOIN pg_policy p ON p.polrelid = o.relid
    UNION ALL
    SELECT format('%s | statistics | %s, target %s', o.key, pg_get_statisticsobjdef(s.oid), s.stxstattarget)
      FROM owners o JOIN pg_statistic_ext s ON s.stxrelid = o.relid

    -- ---- types ----------------------------------------------------------------------------
    UNION ALL
    SELECT format('%s %s | %s | %s', t.otype, t.oname, p.k, p.v)
      FROM typ t, LATERAL (VALUES
          ('membership', t.membership),
          ('owner', t.typowner::regrole::text),
          ('kind', format('typtype %s, category %s, preferred %s', t.typtype, t.typcategory, t.typispreferred)),
          ('representation', format('len %s, byval %s, align %s, storage %s, delimiter %s',
                                    t.typlen, t.typbyval, t.typalign, t.typstorage, t.typdelim)),
          ('functions', format('in %s, out %s, receive %s, send %s, typmod in %s, typmod out %s, analyze %s, subscript %s',
                               t.typinput::regproc, t.typoutput::regproc, t.typreceive::regproc, t.typsend::regproc,
                               t.typmodin::regproc, t.typmodout::regproc, t.typanalyze::regproc, t.typsubscript::regproc)),
          ('element', CASE WHEN t.typelem = 0 THEN '-' ELSE format_type(t.typelem, NULL) END),
          ('array type', CASE WHEN t.typarray = 0 THEN '-' ELSE format_type(t.typarray, NULL) END),
          ('base type', CASE WHEN t.typbasetype = 0 THEN '-' ELSE format_type(t.typbasetype, t.typtypmod) END),
          ('not null', t.typnotnull::text),
          ('default', coalesce(pg_get_expr(t.typdefaultbin, 0), t.typdefault, '-')),
          ('collation', CASE WHEN t.typcollation = 0 THEN '-' ELSE
                            (SELECT format('%I.%I', cn.nspname, co.collname)
                               FROM pg_collation co JOIN pg_namespace cn ON cn.oid = co.collnamespace
                              WHERE co.oid = t.typcollation) END)) AS p(k, v)
    UNION ALL
    SELECT format('%s %s | privileges | %s', t.otype, t.oname, a)
      FROM typ t, LATERAL pg_temp.acl_lines(coalesce(t.typacl, acldefault('T', t.typowner))) a
    UNION ALL
    SELECT format('%s %s | constraint %I | %s', t.otype, t.oname, c.conname, pg_get_constraintdef(c.oid))
      FROM typ t JOIN pg_constraint c ON c.contypid = t.oid
    UNION ALL
    SELECT format('%s %s | enum labels | %s', t.otype, t.oname,
                  string_agg(quote_literal(e.enumlabel), ', ' ORDER BY e.enumsortorder))
      FROM typ t JOIN pg_enum e ON e.enumtypid = t.oid
     GROUP BY t.otype, t.oname
    UNION ALL
    SELECT format('%s %s | range | subtype %s, collation %s, opclass %s, canonical %s, subdiff %s, multirange %s',
                  t.otype, t.oname, format_type(g.rngsubtype, NULL), g.rngcollation::regcollation,
                  g.rngsubopc::regclass, g.rngcanonical::regproc, g.rngsubdiff::regproc,
                  format_type(g.rngmultitypid, NULL))
      FROM typ t JOIN pg_range g ON g.rngtypid = t.oid

    -- ---- functions, procedures, aggregates ----------------------------------------------
    UNION ALL
    SELECT format('%s %s | %s | %s', f.otype, f.oname, p.k, p.v)
      FROM fn f, LATERAL (VALUES
          ('membership', f.membership),
          ('owner', f.proowner::regrole::text),
          ('kind', f.prokind::text),
          ('arguments', pg_get_function_arguments(f.oid)),
          ('identity arguments', pg_get_function_identity_arguments(f.oid)),
          ('result', coalesce(pg_get_function_result(f.oid), '-')),
          ('language', (SELECT lanname::text FROM pg_language WHERE oid = f.prolang)),
          ('volatility', f.provolatile::text),
          ('strict', f.proisstrict::text),
          ('security definer', f.prosecdef::text),
          ('leakproof', f.proleakproof::text),
          ('parallel', f.proparallel::text),
          ('cost', f.procost::text),
          ('rows', f.prorows::text),
          ('support', f.prosupport::regproc::text),
          ('transforms', coalesce(f.protrftypes::regtype[]::text, '-')),
          ('config', coalesce((SELECT string_agg(c, ', ' ORDER BY c) FROM unnest(f.proconfig) c), '-')),
          ('source md5', md5(f.prosrc)),
          ('source length', length(f.prosrc)::text),
          ('probin', coalesce(f.probin, '-')),
          ('sql body', pg_temp.ml(pg_get_function_sqlbody(f.oid)))) AS p(k, v)
    UNION ALL
    SELECT format('%s %s | privileges | %s', f.otype, f.oname, a)
      FROM fn f, LATERAL pg_temp.acl_lines(coalesce(f.proacl, acldefault('f', f.proowner))) a
    UNION ALL
    SELECT format('%s %s | aggregate | kind %s, direct args %s, trans %s, final %s (extra %s, modify %s), combine %s, serial %s, deserial %s, moving %s/%s/%s, sort op %s, state %s/%s, init %L',
                  f.otype, f.oname, g.aggkind, g.aggnumdirectargs, g.aggtransfn::regproc, g.aggfinalfn::regproc,
                  g.aggfinalextra, g.aggfinalmodify, g.aggcombinefn::regproc, g.aggserialfn::regproc,
                  g.aggdeserialfn::regproc, g.aggmtransfn::regproc, g.aggminvtransfn::regproc,
                  g.aggmfinalfn::regproc, g.aggsortop::regoperator, format_type(g.aggtranstype, NULL),
                  g.aggtransspace, g.agginitval)
      FROM fn f JOIN pg_aggregate g ON g.aggfnoid = f.oid

    -- ---- other member kinds with a definition worth comparing ----------------------------
    UNION ALL
    SELECT format('event trigger %I | on %s, function %s, enabled %s, tags %s', e.evtname, e.evtevent,
                  e.evtfoid::regproc, e.evtenabled, coalesce(e.evttags::text, '-'))
      FROM pg_event_trigger e JOIN mem ON mem.classid = 'pg_event_trigger'::regclass AND mem.objid = e.oid
    UNION ALL
    SELECT format('cast (%s AS %s) | function %s, context %s, method %s', format_type(c.castsource, NULL),
                  format_type(c.casttarget, NULL), c.castfunc::regprocedure, c.castcontext, c.castmethod)
      FROM pg_cast c JOIN mem ON mem.classid = 'pg_cast'::regclass AND mem.objid = c.oid
    UNION ALL
    SELECT format('operator %s | code %s, result %s, commutator %s, negator %s, restrict %s, join %s, merges %s, hashes %s',
                  o.oid::regoperator, o.oprcode::regproc, format_type(o.oprresult, NULL), o.oprcom::regoperator,
                  o.oprnegate::regoperator, o.oprrest::regproc, o.oprjoin::regproc, o.oprcanmerge, o.oprcanhash)
      FROM pg_operator o
     WHERE o.oid IN (SELECT objid FROM mem WHERE classid = 'pg_operator'::regclass)
        OR o.oprnamespace IN (SELECT oid FROM nsp)

    -- ---- comments, security labels, initial privileges of everything described -------------
    UNION ALL
    SELECT format('comment | %s %s | %s', o.type, o.identity, pg_temp.ml(d.description))
      FROM pg_description d
      JOIN described x ON x.classid = d.classoid AND x.objid = d.objoid,
           LATERAL pg_identify_object(d.classoid, d.objoid, d.objsubid) o
    UNION ALL
    SELECT format('security label | %s %s | %s: %s', o.type, o.identity, s.provider, s.label)
      FROM pg_seclabel s
      JOIN described x ON x.classid = s.classoid AND x.objid = s.objoid,
           LATERAL pg_identify_object(s.classoid, s.objoid, s.objsubid) o
    UNION ALL
    SELECT format('initial privileges | %s %s | %s | %s', o.type, o.identity, i.privtype, a)
      FROM pg_init_privs i
      JOIN described x ON x.classid = i.classoid AND x.objid = i.objoid,
           LATERAL pg_identify_object(i.classoid, i.objoid, i.objsubid) o,
           LATERAL pg_temp.acl_lines(i.initprivs) a

    -- ---- roles 'sched%' (cluster-wide) ------------------------------------------------------
    UNION ALL
    SELECT format('role %I | attributes | super %s, inherit %s, createrole %s, createdb %s, login %s, replication %s, bypassrls %s, connection limit %s, valid until %s',
                  r.rolname, r.rolsuper, r.rolinherit, r.rolcreaterole, r.rolcreatedb, r.rolcanlogin,
                  r.rolreplication, r.rolbypassrls, r.rolconnlimit, coalesce(r.rolvaliduntil::text, '-'))
      FROM sched_roles r
    UNION ALL
    SELECT format('role %I | settings %s | %s', r.rolname,
                  CASE WHEN s.setdatabase = 0 THEN 'in every database' ELSE 'in this database' END,
                  array_to_string(ARRAY(SELECT c FROM unnest(s.setconfig) c ORDER BY 1), ', '))
      FROM sched_roles r
      JOIN pg_db_role_setting s ON s.setrole = r.oid
                               AND s.setdatabase IN (0, (SELECT oid FROM pg_database WHERE datname = current_database()))
    UNION ALL
    SELECT format('role membership | %s in %s | admin option %s, granted by %s',
                  m.member::regrole, m.roleid::regrole, m.admin_option, m.grantor::regrole)
      FROM pg_auth_members m
     WHERE m.roleid IN (SELECT oid FROM sched_roles) OR m.member IN (SELECT oid FROM sched_roles)
)
SELECT line FROM lines ORDER BY line COLLATE "C";
