#!/usr/bin/env python3
"""test/hostile/hostile.py — the generated hostile-input test of pg_sched (run by run.sh).

The matrix: every public function of schema sched (pg_proc, name not starting with '_'),
with its parameters as pg_proc has them; for each function, a base call with valid
arguments taken from the fixture, then one call per (parameter, hostile value), every other
argument as in the base call.  Each call runs in its own transaction, always rolled back.

What a call must do (README, "Errors" and "Limits"):
  - end successfully, or with one of the SQLSTATEs of the README's Errors table that can
    apply to a superuser calling a function (22004 22023 22008 22P02 42704 55000 23505
    54000): never XX000, never another SQLSTATE, never a lost connection;
  - where the README says which code a value gets (a required parameter NULL: 22004; an
    empty name or a negative amount: 22023; an infinite or out-of-range time: 22008; a
    value beyond a limit: 54000; an unknown id: 42704; a stale lease or generation:
    55000; ...), end with that code ("expectation" failures; the rules are in expect());
  - when refused as bad input (22004 22023 22008 54000 42704) by the product, name the
    parameter ("names the parameter", README "Errors");
  - leave every table of schema sched as it was (md5 of its ordered rows), and the fleet
    mirror in agreement with the tables (sched._fleet_mirror_check(capability) = 0 for
    every capability of the fixture), the server answering.
A refused call that advanced one of pg_sched's sequences (it wrote before it refused), and
an error message longer than 4 kB (it echoes an oversized value), are reported as
warnings, not failures.

The regression cases of issue 12 follow, each asserted, and at the end every view of
schema sched is read and the database dumped with pg_dump.
"""
import argparse
import collections
import os
import re
import subprocess
import sys
import time
import uuid

import psycopg
from psycopg import sql as S

# SQLSTATEs of the README's Errors table a superuser may get from a call.  42501 (privilege)
# must not appear for a superuser; 23514 only from direct table writes; 25006 only in a
# read-only transaction, which this test does not use.
DOCUMENTED = {'22004', '22023', '22008', '22P02', '42704', '55000', '23505', '54000'}
NAMED = {'22004', '22023', '22008', '54000', '42704'}    # bad input: names the parameter

MB = 1024 * 1024
LIMITED_TEXT = {'node_id', 'capability', 'capability_version', 'tenant', 'runtime_state',
                'outcome'}
ENUM_TEXT = {'runtime_state', 'outcome', 'management_status'}
LABEL_MAPS = {'labels', 'required_labels', 'preferred_labels'}
AMOUNTS = {'cpu_millis', 'memory_mb', 'gpus', 'min_cpu_millis', 'min_memory_mb', 'min_gpus',
           'reserve_cpu_millis', 'reserve_memory_mb', 'reserve_gpus', 'slots'}
COUNTS = {'max', 'max_requests', 'max_dispatches'}
TIMES = {'at', 'available_at'}
# parameters whose NULL the README gives a meaning to although they have no NULL default
NULL_MEANS_SOMETHING = {('set_tenant_owner', 'owner'),
                        # NULL removes a limit, or a quota's dimension (issue 14)
                        ('set_concurrency_limit', 'max_live'),
                        ('set_tenant_quota', 'max_live'), ('set_tenant_quota', 'max_cpu_millis'),
                        ('set_tenant_quota', 'max_memory_mb'), ('set_tenant_quota', 'max_gpus'),
                        # a request without gang, or without last reason (issue 16)
                        ('gang_reason', 'gang_id'), ('gang_reason', 'last_reason')}

INT4_MIN, INT4_MAX = -2147483648, 2147483647
INT8_MIN, INT8_MAX = -9223372036854775808, 9223372036854775807
JSON_DEPTH = 10000          # PostgreSQL 15 (max_stack_depth 2MB) accepts 10,000 levels

UNKNOWN_UUID = '00000000-0000-4000-8000-00000000dead'

W1 = 'a1000000-0000-4000-8000-000000000001'     # node-a render, holds the live attempt
W2 = 'a2000000-0000-4000-8000-000000000002'     # node-b render
W3 = 'a3000000-0000-4000-8000-000000000003'     # node-b train, cordoned
E_OPEN = 'e0000000-0000-4000-8000-000000000001'
E_DONE = 'e0000000-0000-4000-8000-000000000002'     # RUNNING, no open work
E_CANCELLED = 'e0000000-0000-4000-8000-000000000003'
E_SUCCEEDED = 'e0000000-0000-4000-8000-000000000004'
E_FAILED = 'e0000000-0000-4000-8000-000000000005'
E_ACME = 'e0000000-0000-4000-8000-000000000006'     # tenant acme


def short(v, n=70):
    s = repr(v)
    if len(s) > n:
        s = s[:n] + '...(%d chars)' % len(v) if isinstance(v, str) else s[:n] + '...'
    return s


class Value:
    """An argument: a Python value sent as a parameter and cast to the parameter's type,
    an SQL expression (trusted, written here), or NULL."""

    def __init__(self, kind, v=None):
        self.kind, self.v = kind, v

    @staticmethod
    def p(v):
        return Value('param', v)

    @staticmethod
    def e(sqltext):
        return Value('expr', sqltext)

    def describe(self):
        if self.kind == 'null':
            return 'NULL'
        if self.kind == 'expr':
            return self.v
        return short(self.v)


NULL = Value('null')


class Param:
    def __init__(self, name, typ, default):
        self.name, self.type, self.default = name, typ, default


class Func:
    def __init__(self, oid, name, volatile, strict, params):
        self.oid, self.name, self.volatile, self.strict, self.params = \
            oid, name, volatile, strict, params
        self.sig = '%s(%s)' % (name, ', '.join(p.name for p in params))

    def has(self, name):
        return any(p.name == name for p in self.params)


class Variant:
    def __init__(self, label, value, kind, overrides=None):
        self.label, self.value, self.kind = label, value, kind
        self.overrides = overrides or {}


class Result:
    def __init__(self, state, rows=None, msg=None):
        self.state, self.rows, self.msg = state, rows, msg

    @property
    def ok(self):
        return self.state == 'ok'

    def text(self):
        if self.msg is None:
            return ''
        m, d, h = self.msg
        out = m or ''
        if d:
            out += ' | DETAIL: ' + d
        if h:
            out += ' | HINT: ' + h
        return out


class Hostile:
    def __init__(self, args):
        self.args = args
        self.dbname = args.dbname
        self.conn = self.connect()
        self.failures = collections.OrderedDict()   # category -> [lines]
        self.warnings = []
        self.notes = []
        self.outcomes = collections.Counter()
        self.calls = 0
        self.F = {}
        self.cast_cache = {}
        self.checksum_count = self.mirror_count = 0
        self.log = open(args.log, 'w') if args.log else None

    # ---- connections and calls -------------------------------------------------------

    def connect(self):
        c = psycopg.connect(dbname=self.dbname, autocommit=False)
        c.execute("SET statement_timeout = '20s'")
        c.execute("SET lock_timeout = '5s'")
        c.execute("SET client_min_messages = warning")
        c.commit()
        return c

    def fail(self, category, line):
        self.failures.setdefault(category, []).append(line)
        if self.args.verbose:
            print('FAIL [%s] %s' % (category, line), flush=True)

    def q(self, query, params=None, conn=None):
        """Runs one statement in a transaction it commits; returns the rows."""
        c = conn or self.conn
        try:
            cur = c.execute(query, params)
            rows = cur.fetchall() if cur.description else []
            c.commit()
        except psycopg.Error:
            if not c.broken:
                c.rollback()
            raise
        return rows

    def q1(self, query, params=None, conn=None):
        return self.q(query, params, conn)[0][0]

    def attempt(self, query, params=None, conn=None, commit=False):
        """Runs one statement; returns a Result.  Rolled back unless commit."""
        c = conn or self.conn
        try:
            cur = c.execute(query, params)
            try:
                rows = cur.fetchall() if cur.description else []
            except psycopg.DataError as e:
                if e.diag.sqlstate:
                    raise
                rows = [('<result Python cannot load: %s>' % e,)]    # the server succeeded
            if commit:
                c.commit()
            else:
                c.rollback()
            return Result('ok', rows)
        except psycopg.Error as e:
            d = e.diag
            state = d.sqlstate
            msg = (d.message_primary or str(e), d.message_detail, d.message_hint)
            if c.broken or c.closed:
                return Result('lost', None, (str(e).strip() or 'connection lost', None, None))
            try:
                c.rollback()
            except psycopg.Error:
                return Result('lost', None, (str(e), None, None))
            return Result(state or 'client:' + type(e).__name__, None, msg)

    def alive(self):
        """The server still answers; after a lost connection, reconnects (waiting for a
        crash restart) and says it was not."""
        try:
            self.conn.execute('SELECT 1').fetchall()
            self.conn.rollback()
            return True
        except psycopg.Error:
            pass
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                self.conn.close()
            except Exception:
                pass
            try:
                self.conn = self.connect()
                return False
            except psycopg.Error:
                time.sleep(0.5)
        print('FATAL: the server does not answer any more', flush=True)
        self.report()
        sys.exit(1)

    # ---- catalog -----------------------------------------------------------------------

    def functions(self):
        rows = self.q("""
            SELECT p.oid, p.proname, p.provolatile, p.proisstrict,
                   coalesce(p.proargmodes::text[], array_fill('i'::text, ARRAY[p.pronargs::int])),
                   coalesce(p.proallargtypes, p.proargtypes::oid[]), p.proargnames
              FROM pg_proc p
             WHERE p.pronamespace = 'sched'::regnamespace AND p.prokind = 'f'
               AND p.proname !~ '^_'
             ORDER BY p.proname, p.pronargs, p.oid""")
        out = []
        for oid, name, vol, strict, modes, types, names in rows:
            params = []
            for i, (m, t) in enumerate(zip(modes, types)):
                if m not in ('i', 'b', 'v'):
                    continue
                typ, dflt = self.q('SELECT format_type(%s, NULL), pg_get_function_arg_default(%s, %s)',
                                   (t, oid, i + 1))[0]
                params.append(Param(names[i] if names and i < len(names) else '$%d' % (i + 1), typ, dflt))
            out.append(Func(oid, name, vol, strict, params))
        return out

    def build_checks(self):
        tables = [r[0] for r in self.q("""
            SELECT c.relname FROM pg_class c
             WHERE c.relnamespace = 'sched'::regnamespace AND c.relkind IN ('r', 'p')
             ORDER BY 1""")]
        self.tables = tables
        self.checksum_sql = S.SQL(' UNION ALL ').join(
            S.SQL("SELECT {name}, md5(coalesce(string_agg(x::text, E'\\n' ORDER BY x::text), '')) "
                  "FROM sched.{t} x").format(name=S.Literal(t), t=S.Identifier(t))
            for t in tables)
        seqs = [r[0] for r in self.q("""
            SELECT c.relname FROM pg_class c
             WHERE c.relnamespace = 'sched'::regnamespace AND c.relkind = 'S' ORDER BY 1""")]
        self.seq_sql = S.SQL(' UNION ALL ').join(
            S.SQL("SELECT {name}, last_value, is_called FROM sched.{s}").format(
                name=S.Literal(s), s=S.Identifier(s)) for s in seqs) if seqs else None
        self.preloaded = self.q1(
            "SELECT coalesce(current_setting('shared_preload_libraries'), '') ~ 'pg_sched'")
        self.capabilities = [r[0] for r in self.q(
            'SELECT DISTINCT capability FROM sched.worker ORDER BY 1')]

    def checksums(self):
        self.checksum_count += 1
        r = self.attempt(self.checksum_sql)
        if not r.ok:
            return {'<the tables cannot be read>': '%s %s' % (r.state, r.text())}
        return dict(r.rows)

    def sequences(self):
        return {r[0]: (r[1], r[2]) for r in self.q(self.seq_sql)} if self.seq_sql else {}

    def mirror_disagreements(self):
        if not self.preloaded:
            return []
        bad = []
        for cap in self.capabilities:
            self.mirror_count += 1
            r = self.attempt('SELECT sched._fleet_mirror_check(%s)', (cap,))
            if not r.ok:
                bad.append('%s: %s %s' % (cap, r.state, r.text()))
            elif r.rows[0][0] != 0:
                bad.append('%s: %s nodes differ' % (cap, r.rows[0][0]))
        return bad

    # ---- the fixture -------------------------------------------------------------------

    def fixture(self):
        q, q1 = self.q, self.q1
        q("SELECT sched.upsert_node('node-a', labels => '{\"tier\":\"fast\",\"zone\":\"eu\"}', "
          "cpu_millis => 8000, memory_mb => 16384, gpus => 2)")
        q("SELECT sched.upsert_node('node-b', cpu_millis => 4000, memory_mb => 8192)")
        q("SELECT sched.upsert_node('node-c', cpu_millis => 4000, memory_mb => 8192, "
          "management_status => 'DRAINING')")
        q("SELECT sched.register_worker('node-a', 'render', ARRAY['1.0','2.0'], 4, worker_id => %s)", (W1,))
        q("SELECT sched.register_worker('node-b', 'render', ARRAY['1.0'], 2, worker_id => %s)", (W2,))
        q("SELECT sched.register_worker('node-b', 'train', ARRAY['1'], 1, worker_id => %s)", (W3,))
        q("SELECT sched.register_worker('node-c', 'render', ARRAY['1.0'], 2)")
        q('SELECT sched.cordon_worker(%s)', (W3,))
        q("SELECT sched.set_tenant_weight('acme', 2)")

        def submit(ex, cap='render', ver='1.0', **kw):
            extra = ''.join(', %s => %%(%s)s' % (k, k) for k in kw)
            params = dict(kw, ex=ex, step=str(uuid.uuid4()), cap=cap, ver=ver)
            return q1('SELECT sched.submit(%(ex)s, %(step)s, %(cap)s, %(ver)s' + extra + ')', params)

        def dispatch(rid, at=None):
            if at:
                r = q('SELECT outcome, attempt_id, lease_version FROM sched.dispatch_attempt(%s, at => ' + at + ')', (rid,))
            else:
                r = q('SELECT outcome, attempt_id, lease_version FROM sched.dispatch_attempt(%s)', (rid,))
            assert r[0][0] == 'DISPATCHED', ('fixture dispatch', rid, r)
            return str(r[0][1]), r[0][2]

        F = self.F
        # E_OPEN: a live (RUNNING) attempt, a finished one, ready / later / unschedulable /
        # claimed requests, a LOST attempt and its requeued retry
        F['R_live'] = submit(E_OPEN, node_id='node-a', reserve_cpu_millis=1000, reserve_memory_mb=1024)
        F['A_live'], _ = dispatch(F['R_live'])
        q('SELECT sched.start_attempt(%s, 1)', (F['A_live'],))
        F['A_live_lv'] = q1('SELECT lease_version FROM sched.attempt WHERE attempt_id = %s', (F['A_live'],))
        F['R_done'] = submit(E_OPEN, node_id='node-a')
        F['A_done'], F['A_done_lv'] = dispatch(F['R_done'])
        q('SELECT sched.start_attempt(%s, %s)', (F['A_done'], F['A_done_lv']))
        q("SELECT sched.finish_attempt(%s, %s, 'SUCCEEDED')", (F['A_done'], F['A_done_lv']))
        F['R_ready'] = submit(E_OPEN)
        F['R_later'] = submit(E_OPEN, available_at='2100-01-01 00:00:00+00')
        F['R_unsched'] = submit(E_OPEN, ver='9.9')
        r = q('SELECT outcome FROM sched.dispatch_attempt(%s)', (F['R_unsched'],))
        assert r[0][0] == 'UNSCHEDULABLE', r
        F['R_claimed'] = submit(E_OPEN, cap='train', ver='1')
        r = q("SELECT request_id, claim_id FROM sched.claim_requests(1, '10 min', capability => 'train')")
        assert r and r[0][0] == F['R_claimed'], r
        F['C_claim'] = str(r[0][1])
        F['R_lost'] = submit(E_OPEN, node_id='node-b')
        F['A_lost'], F['A_lost_lv'] = dispatch(F['R_lost'], at="now() - interval '10 min'")
        n = q1('SELECT sched.reap_expired()')
        assert n == 1, ('fixture reap', n)
        # closed executions, and one with nothing open
        F['R_cancelled'] = submit(E_CANCELLED)
        q('SELECT sched.cancel_execution(%s)', (E_CANCELLED,))
        rid = submit(E_SUCCEEDED, node_id='node-b')
        a, lv = dispatch(rid)
        q("SELECT sched.finish_attempt(%s, %s, 'SUCCEEDED')", (a, lv))
        q('SELECT sched.complete_execution(%s)', (E_SUCCEEDED,))
        rid = submit(E_FAILED, node_id='node-b', max_attempts=1)
        a, lv = dispatch(rid)
        q("SELECT sched.finish_attempt(%s, %s, 'FAILED')", (a, lv))
        rid = submit(E_DONE, node_id='node-b')
        a, lv = dispatch(rid)
        q('SELECT sched.start_attempt(%s, %s)', (a, lv))
        q("SELECT sched.finish_attempt(%s, %s, 'SUCCEEDED')", (a, lv))
        F['R_acme'] = submit(E_ACME, ver='2.0', tenant='acme')
        F['W1_gen'] = q1('SELECT generation FROM sched.worker WHERE worker_id = %s', (W1,))
        F['W2_gen'] = q1('SELECT generation FROM sched.worker WHERE worker_id = %s', (W2,))
        F['W3_gen'] = q1('SELECT generation FROM sched.worker WHERE worker_id = %s', (W3,))
        states = dict(q('SELECT execution_id::text, status FROM sched.execution'))
        assert states[E_CANCELLED] == 'CANCELLED' and states[E_SUCCEEDED] == 'SUCCEEDED' \
            and states[E_FAILED] == 'FAILED' and states[E_OPEN] == 'RUNNING', states
        # this session's mirror is loaded for every capability
        for cap in ('render', 'train'):
            q("SELECT count(*) FROM sched.select_candidate(%s, '1.0')", (cap,))

    # ---- base arguments ----------------------------------------------------------------

    def hints(self):
        F = self.F
        p = Value.p
        return {
            ('*', 'node_id'): p('node-a'),
            ('*', 'capability'): p('render'),
            ('*', 'capability_version'): p('1.0'),
            ('*', 'capability_versions'): p('{1.0,2.0}'),
            ('*', 'slots'): p(4),
            ('*', 'worker_id'): p(W1),
            ('*', 'generation'): p(F['W1_gen']),
            ('*', 'attempt_id'): p(F['A_live']),
            ('*', 'lease_version'): p(F['A_live_lv']),
            ('*', 'outcome'): p('SUCCEEDED'),
            ('*', 'request_id'): p(F['R_ready']),
            ('*', 'execution_id'): p(E_OPEN),
            ('*', 'step_id'): Value.e('gen_random_uuid()'),
            ('*', 'attempt_number'): p(1),
            ('*', 'name'): p('sched.heartbeat_ttl'),
            ('*', 'millis'): p(1500),
            ('*', 'amount'): p('12'),
            ('*', 'unit'): p('MB'),
            ('*', 'd'): p('90 seconds'),
            ('*', 'at'): Value.e('now()'),
            ('*', 'owner'): p('sched_scheduler'),
            ('*', 'weight'): p(2),
            ('*', 'detail'): p('{"exit_code": 0}'),
            ('*', 'tenant'): p('acme'),
            ('upsert_node', 'labels'): p('{"tier": "fast", "zone": "eu"}'),
            ('complete_execution', 'execution_id'): p(E_DONE),
            ('submit', 'tenant'): p('default'),
            # no sleeping in the base call: there is no command for it
            ('wait_commands', 'timeout'): p('0'),
        }

    def base_value(self, fn, p):
        """The valid argument of the base call: a hint for this function's parameter, the
        parameter's default when it is NULL (filters and options stay off), a hint for the
        parameter's name, its default, or a value of its type."""
        H = self.hints()
        null_default = p.default is not None and p.default.upper().startswith('NULL')
        v = None
        if (fn.name, p.name) in H:
            v = H[(fn.name, p.name)]
        elif not null_default and ('*', p.name) in H:
            v = H[('*', p.name)]
        if v is not None:
            return v
        if p.default is not None:
            return Value.e(p.default)
        return self.fallback(p)

    def fallback(self, p):
        t = p.type
        if t == 'text':
            return Value.p('x')
        if t in ('integer', 'bigint', 'smallint'):
            return Value.p(1)
        if t == 'uuid':
            return Value.e('gen_random_uuid()')
        if t == 'jsonb' or t == 'json':
            return Value.p('{}')
        if t == 'timestamp with time zone':
            return Value.e('now()')
        if t == 'interval':
            return Value.p('1 min')
        if t == 'text[]':
            return Value.p('{1.0}')
        if t == 'boolean':
            return Value.p('true')
        if t == 'regrole':
            return Value.p('sched_admin')
        return NULL

    # ---- hostile values ----------------------------------------------------------------

    def variants(self, fn, p):
        F = self.F
        t, n = p.type, p.name
        v = [Variant('NULL', NULL, 'null')]
        P = Value.p
        if t == 'text':
            v += [Variant("''", P(''), 'empty'),
                  Variant('1 MB', P('x' * MB), 'oversize'),
                  Variant('256 bytes', P('n' * 256), 'edge_ok'),
                  Variant('257 bytes', P('n' * 257), 'oversize'),
                  Variant('258 bytes in 129 characters', P('\u00e9' * 129), 'oversize'),
                  Variant("E'a\\x1fb'", P('a\x1fb'), 'ctrl'),
                  Variant("E'line\\nbreak'", P('line\nbreak'), 'ctrl'),
                  Variant("E'\\x01\\x7f\\t'", P('\x01\x7f\t'), 'ctrl')]
            if n.endswith('node_id'):
                v.append(Variant("unknown node 'no-such-node'", P('no-such-node'), 'unknown_id'))
            if n == 'tenant':
                v.append(Variant("unknown tenant 'no-such-tenant'", P('no-such-tenant'), 'unknown_tenant'))
            if n == 'node_id':
                v.append(Variant("draining node 'node-c'", P('node-c'), 'state'))
        elif t in ('integer', 'bigint', 'smallint'):
            v += [Variant('-1', P(-1), 'neg'), Variant('0', P(0), 'zero'),
                  Variant('-2147483648', P(INT4_MIN), 'neg'), Variant('2147483647', P(INT4_MAX), 'max')]
            if t == 'bigint':
                v += [Variant('2147483648', P(INT4_MAX + 1), 'max'),
                      Variant('-9223372036854775808', P(INT8_MIN), 'neg'),
                      Variant('9223372036854775807', P(INT8_MAX), 'max')]
            if n == 'request_id':
                v += [Variant('unknown request 987654321', P(987654321), 'unknown_id'),
                      Variant('DISPATCHED request', P(F['R_done']), 'state'),
                      Variant('CANCELLED request', P(F['R_cancelled']), 'state'),
                      Variant('CLAIMED request (no claim_id)', P(F['R_claimed']), 'state'),
                      Variant('unschedulable request', P(F['R_unsched']), 'state'),
                      Variant('request ready only in 2100', P(F['R_later']), 'state')]
            if n == 'lease_version' and fn.has('attempt_id'):
                cur = F['A_live_lv']
                v += [Variant('stale lease_version %d' % (cur - 1), P(cur - 1), 'stale'),
                      Variant('future lease_version %d' % (cur + 1), P(cur + 1), 'stale')]
            if n == 'generation' and fn.has('worker_id'):
                cur = F['W1_gen']
                v += [Variant('stale generation %d' % (cur - 1), P(cur - 1), 'stale'),
                      Variant('future generation %d' % (cur + 1), P(cur + 1), 'stale')]
            if n == 'attempt_number':
                v += [Variant('1100', P(1100), 'edge_ok')]
        elif t in ('jsonb', 'json'):
            deep = '{"a":' * JSON_DEPTH + '"x"' + '}' * JSON_DEPTH
            keys = lambda k: '{' + ','.join('"k%02d":"v"' % i for i in range(k)) + '}'
            v += [Variant('malformed JSON', P('{"a": '), 'malformed'),
                  Variant('JSON array', P('["a", "b"]'), 'notmap'),
                  Variant('JSON string', P('"tier"'), 'notmap'),
                  Variant('JSON null', P('null'), 'notmap'),
                  Variant('object with non-string values', P('{"a": 1, "b": true, "c": null}'), 'notmap'),
                  Variant('object with an object value', P('{"a": {"b": "c"}}'), 'notmap'),
                  Variant('%d levels deep' % JSON_DEPTH, P(deep), 'notmap'),
                  Variant('{} (empty object)', P('{}'), 'edge_ok'),
                  Variant('64 keys', P(keys(64)), 'edge_ok'),
                  Variant('65 keys', P(keys(65)), 'oversize'),
                  Variant('key of 256 bytes', P('{"%s": "v"}' % ('k' * 256)), 'edge_ok'),
                  Variant('key of 257 bytes', P('{"%s": "v"}' % ('k' * 257)), 'oversize'),
                  Variant('key of 258 bytes in 129 characters', P('{"%s": "v"}' % ('\u00e9' * 129)), 'oversize'),
                  Variant('value of 1024 bytes', P('{"k": "%s"}' % ('v' * 1024)), 'edge_ok'),
                  Variant('value of 1025 bytes', P('{"k": "%s"}' % ('v' * 1025)), 'oversize'),
                  Variant('key with control characters', P('{"a\\u001fb": "c\\nd"}'), 'ctrl')]
        elif t == 'uuid':
            v.append(Variant('unknown uuid', P(UNKNOWN_UUID), 'unknown_id'))
            if n == 'attempt_id':
                v += [Variant('SUCCEEDED attempt (its lease_version)', P(F['A_done']), 'finished',
                              {'lease_version': P(F['A_done_lv'])}),
                      Variant('LOST attempt (its lease_version)', P(F['A_lost']), 'lost',
                              {'lease_version': P(F['A_lost_lv'])})]
            if n == 'execution_id':
                v += [Variant('CANCELLED execution', P(E_CANCELLED), 'closed'),
                      Variant('SUCCEEDED execution', P(E_SUCCEEDED), 'closed'),
                      Variant('FAILED execution', P(E_FAILED), 'closed'),
                      Variant('execution with open work', P(E_OPEN), 'state')]
            if n == 'worker_id':
                v += [Variant('cordoned worker (its generation)', P(W3), 'state',
                              {'generation': P(F['W3_gen'])} if fn.has('generation') else {}),
                      Variant('another worker (its generation)', P(W2), 'state',
                              {'generation': P(F['W2_gen'])} if fn.has('generation') else {})]
            if n == 'claim_id':
                v += [Variant('the claim of the CLAIMED request', P(F['C_claim']), 'state',
                              {'request_id': P(F['R_claimed'])} if fn.has('request_id') else {}),
                      Variant('a claim of another request', P(F['C_claim']), 'state')]
        elif t == 'timestamp with time zone':
            v += [Variant("'infinity'", P('infinity'), 'badtime'),
                  Variant("'-infinity'", P('-infinity'), 'badtime'),
                  Variant("'1800-01-01'", P('1800-01-01'), 'badtime'),
                  Variant("'294276-12-31 23:59:59+00'", P('294276-12-31 23:59:59+00'), 'badtime'),
                  Variant("'1899-12-31 23:59:59.999999+00'", P('1899-12-31 23:59:59.999999+00'), 'badtime'),
                  Variant("'10000-01-01 00:00:00+00'", P('10000-01-01 00:00:00+00'), 'badtime'),
                  Variant("'9999-12-31 23:59:59+00'", P('9999-12-31 23:59:59+00'), 'future_edge'),
                  Variant("'1900-01-01 00:00:00+00'", P('1900-01-01 00:00:00+00'), 'past'),
                  Variant("now() + 1 day", Value.e("now() + interval '1 day'"), 'future'),
                  Variant("now() - 1 day", Value.e("now() - interval '1 day'"), 'past')]
        elif t == 'interval':
            v += [Variant("'-1 min'", P('-1 min'), 'nonpos'),
                  Variant("'0'", P('0'), 'nonpos'),
                  Variant("'-100000 years'", P('-100000 years'), 'nonpos'),
                  Variant("'100000 years'", P('100000 years'), 'huge'),
                  Variant("'2147483648 seconds'", P('2147483648 seconds'), 'huge'),
                  Variant("'2147483647 seconds'", P('2147483647 seconds'), 'big'),
                  Variant("'1 mon'", P('1 mon'), 'big'),
                  Variant("'1 day 1 second'", P('1 day 1 second'), 'big'),
                  Variant("'1 day'", P('1 day'), 'day'),
                  Variant("'1 second'", P('1 second'), 'edge_ok')]
        elif t == 'text[]':
            v += [Variant("'{}'", P('{}'), 'emptyarr'),
                  Variant("'{NULL}'", P('{NULL}'), 'nullelem'),
                  Variant("'{\"\"}'", P('{""}'), 'emptyelem'),
                  Variant('2-D array', P('{{1.0,2.0},{3.0,4.0}}'), 'twod'),
                  Variant("'[0:1]={1.0,2.0}' (lower bound 0)", P('[0:1]={1.0,2.0}'), 'oddbound'),
                  Variant('64 elements', P('{%s}' % ','.join('v%d' % i for i in range(64))), 'edge_ok'),
                  Variant('65 elements', P('{%s}' % ','.join('v%d' % i for i in range(65))), 'oversize'),
                  Variant('an element of 256 bytes', P('{1.0,%s}' % ('v' * 256)), 'edge_ok'),
                  Variant('an element of 257 bytes', P('{1.0,%s}' % ('v' * 257)), 'oversize'),
                  Variant('an element of 1 MB', P('{1.0,%s}' % ('v' * MB)), 'oversize'),
                  Variant("an element E'1\\x1f0'", P(['1\x1f0']), 'ctrl')]
        elif t == 'regrole':
            v += [Variant("'sched_admin'", P('sched_admin'), 'edge_ok'),
                  Variant("unknown role", P('no_such_role_hostile'), 'unknown_id')]
        return v

    # ---- what the README says a value gets ---------------------------------------------

    def expect(self, fn, p, var):
        """The outcomes the README allows for this call: a set of 'ok' and SQLSTATEs, or
        None for "succeed, or any documented SQLSTATE"."""
        n, k = p.name, var.kind
        writes = fn.volatile == 'v'
        creates_execution = fn.has('step_id') and fn.has('execution_id')
        if k == 'null':
            if (fn.name, n) in NULL_MEANS_SOMETHING or fn.strict or fn.volatile == 'i':
                return None
            if p.default is not None and p.default.upper().startswith('NULL'):
                return None
            return {'22004'}
        if p.type == 'text':
            if creates_execution and n == 'tenant':
                # differs from the execution's tenant (default): 22023, or beyond the limit
                return {'22023', '54000'} if k == 'oversize' else {'22023'}
            if n in LIMITED_TEXT:
                if k == 'empty':
                    return {'22023'}
                if k == 'oversize':
                    if n in ENUM_TEXT:
                        return {'54000', '22023'}
                    if n == 'node_id' and writes and p.default is None and fn.name != 'upsert_node':
                        return {'54000', '42704'}     # a lookup: no such node exists either
                    return {'54000'}
                if k == 'ctrl' and n in ENUM_TEXT:
                    return {'22023'}
            if n in ENUM_TEXT and k in ('empty', 'oversize', 'edge_ok'):
                return {'22023', '54000'} if k == 'oversize' else {'22023'}
            if k == 'unknown_id' and n == 'node_id':
                if fn.name == 'upsert_node':
                    return {'ok'}
                if writes and p.default is None:
                    return {'42704'}
            return None
        if p.type in ('integer', 'bigint', 'smallint'):
            if n in AMOUNTS and k == 'neg':
                return {'22023'}
            if n in COUNTS:
                if k in ('neg', 'zero'):
                    return {'22023'}
                if k == 'max':
                    return {'ok'}
            if n in ('attempt_number', 'max_attempts') and k in ('neg', 'zero') and writes:
                return {'22023'}
            if n == 'attempt_number' and k == 'edge_ok' and fn.name == 'submit':
                return {'ok'}
            if n == 'weight' and fn.name == 'set_tenant_weight' and k in ('neg', 'zero'):
                return {'22023'}
            if n in ('lease_version', 'generation') and k in ('stale', 'neg', 'zero', 'max'):
                if (n == 'lease_version' and fn.has('attempt_id')) or \
                        (n == 'generation' and fn.has('worker_id')):
                    return {'55000', '22023'} if k in ('neg', 'zero') else {'55000'}
            if n == 'request_id' and k in ('unknown_id', 'neg', 'zero', 'max'):
                return {'42704', '22023'} if writes else {'ok', '42704', '22023'}
            return None
        if p.type in ('jsonb', 'json'):
            if k == 'malformed':
                return {'22P02'}
            if n in LABEL_MAPS:
                if k == 'notmap':
                    return {'22023'}
                if k == 'oversize':
                    return {'54000'}
                if k == 'edge_ok' and self.base_ok.get(fn.sig):
                    return {'ok'}
            return None
        if p.type == 'uuid':
            if k == 'unknown_id':
                if n == 'attempt_id':
                    return {'42704'}
                if n == 'worker_id' and fn.name != 'register_worker':
                    return {'42704'} if writes else None
                if n == 'execution_id':
                    if creates_execution:
                        return {'ok'}
                    return {'42704'} if writes else None
                if n in ('claim_id', 'step_id'):
                    return {'ok'}
            if k == 'finished' and fn.name in ('start_attempt', 'renew_lease'):
                return {'55000'}
            if k == 'lost':
                return {'55000'} if fn.name in ('start_attempt', 'renew_lease', 'finish_attempt') else None
            if k == 'closed' and creates_execution:
                return {'55000'}
            return None
        if p.type == 'timestamp with time zone' and n in TIMES:
            if k == 'badtime':
                return {'22008'}
            if k == 'future':
                return {'ok', '22023'}
            return None
        if p.type == 'interval':
            if n == 'claim_ttl':
                if k in ('nonpos', 'huge') or (k == 'big'):
                    return {'22023'}
                if k in ('day', 'edge_ok'):
                    return {'ok'}
            if n == 'timeout' and fn.name == 'wait_commands':
                if k in ('huge', 'big', 'day'):
                    return {'22023'}
                if k == 'nonpos':
                    return {'ok', '22023'}     # '0' is fine, negative ones are not
                if k == 'edge_ok':
                    return {'ok'}
            if n == 'heartbeat_ttl':
                if k in ('nonpos', 'huge'):
                    return {'22023'}
                if k in ('big', 'day', 'edge_ok'):
                    return {'ok'}
            return None
        if p.type == 'text[]' and n == 'capability_versions':
            if k in ('emptyarr', 'emptyelem', 'twod'):
                return {'22023'}
            if k == 'nullelem':
                return {'22023', '22004'}
            if k == 'oversize':
                return {'54000'}
            if k == 'edge_ok' and self.base_ok.get(fn.sig):
                return {'ok'}
            return None
        return None

    # ---- the matrix --------------------------------------------------------------------

    def call_sql(self, fn, values):
        parts, params = [], []
        for p in fn.params:
            val = values[p.name]
            if val.kind == 'null':
                e = S.SQL('NULL::{}').format(S.SQL(p.type))
            elif val.kind == 'expr':
                e = S.SQL('({})::{}').format(S.SQL(val.v), S.SQL(p.type))
            else:
                e = S.SQL('{}::{}').format(S.Placeholder(), S.SQL(p.type))
                params.append(val.v)
            parts.append(S.SQL('{} => {}').format(S.Identifier(p.name), e))
        # the result as text: Python cannot hold every timestamptz (infinity, year 10000)
        q = S.SQL('SELECT r::text FROM sched.{}({}) AS r').format(S.Identifier(fn.name), S.SQL(', ').join(parts))
        return q, params

    def cast_state(self, p, val):
        """The SQLSTATE of casting the value to the parameter's type, or None when it casts."""
        if val.kind != 'param':
            return None
        key = (p.type, val.v if not isinstance(val.v, list) else tuple(val.v))
        if key not in self.cast_cache:
            r = self.attempt(S.SQL('SELECT {}::{} IS NULL').format(S.Placeholder(), S.SQL(p.type)), [val.v])
            self.cast_cache[key] = None if r.ok else r.state
        return self.cast_cache[key]

    def after_call(self, where, r, seq_before):
        """The checks after every call: alive, tables unchanged, mirror agrees."""
        if not self.alive() or r.state == 'lost':
            self.fail('server crash / connection lost', '%s -> %s %s' % (where, r.state, r.text()))
            self.alive()
        sums = self.checksums()
        if sums != self.baseline:
            changed = sorted(t for t in set(sums) | set(self.baseline) if sums.get(t) != self.baseline.get(t))
            self.fail('tables changed', '%s -> %s: tables %s differ from before the call'
                      % (where, r.state, ', '.join(changed)))
            self.baseline = sums
        if not r.ok and seq_before is not None:
            seq_after = self.sequences()
            moved = [s for s in seq_after if seq_after[s] != seq_before.get(s)]
            if moved:
                self.warnings.append('%s -> %s: refused, but sequence %s advanced (written before the refusal?)'
                                     % (where, r.state, ', '.join(moved)))
        bad = self.mirror_disagreements()
        if bad:
            self.fail('fleet mirror disagrees', '%s -> %s: %s' % (where, r.state, '; '.join(bad)))

    def run_one(self, fn, values, label, param=None, var=None):
        q, params = self.call_sql(fn, values)
        seq_before = self.sequences()
        r = self.attempt(q, params)
        self.calls += 1
        self.outcomes[r.state] += 1
        where = '%s [%s = %s]' % (fn.sig, param.name if param else '-', label)
        msg = ('' if r.ok else ' %s: %s' % (r.state, r.text()))
        if not r.ok and len(r.text()) > 4096:
            self.warnings.append('%s -> %s: the error message is %d bytes long (it echoes the value)'
                                 % (where, r.state, len(r.text())))
        if self.log:
            self.log.write('%s -> %s%s\n' % (where, r.state, (': ' + r.text()[:300].replace('\n', ' '))
                                             if not r.ok else ''))
        if r.state == 'lost':
            pass
        elif r.state == 'XX000':
            self.fail('XX000 (internal error)', where + msg)
        elif r.state == '42501':
            self.fail('42501 for the superuser', where + msg)
        elif not r.ok and r.state not in DOCUMENTED:
            self.fail('undocumented SQLSTATE', where + msg)
        if param is not None and r.state != 'lost':
            cast = self.cast_state(param, var.value)
            allowed = {cast} if cast else self.expect(fn, param, var)
            if allowed is not None and r.state not in allowed:
                ro = '' if fn.volatile == 'v' else ' (read-only function)'
                if r.ok:
                    self.fail('expectation: accepted what the README refuses' + ro,
                              '%s -> ok, expected %s' % (where, '/'.join(sorted(allowed))))
                elif r.state in DOCUMENTED:
                    self.fail('expectation: another documented SQLSTATE' + ro,
                              '%s -> %s, expected %s: %s' % (where, r.state, '/'.join(sorted(allowed)), r.text()))
            if (not r.ok and r.state in NAMED and not cast and not var.overrides
                    and self.base_ok.get(fn.sig) and var.kind not in ('state', 'closed', 'finished', 'lost', 'stale')):
                text = r.text()
                pn = re.escape(param.name)
                if not re.search(r'"%s"|parameter %s\b|\b%s =>' % (pn, pn, pn), text):
                    self.fail('refusal does not name the parameter', '%s%s' % (where, msg))
        self.after_call(where, r, seq_before)
        return r

    def matrix(self, funcs):
        self.base_ok = {}
        for fn in funcs:
            if self.args.only and fn.name not in self.args.only:
                continue
            base = {p.name: self.base_value(fn, p) for p in fn.params}
            r = self.run_one(fn, base, 'base call')
            self.base_ok[fn.sig] = r.ok
            if not r.ok:
                self.notes.append('base call %s(%s) did not succeed: %s %s' % (
                    fn.name, ', '.join('%s => %s' % (k, v.describe()) for k, v in base.items()),
                    r.state, r.text()))
            for p in fn.params:
                for var in self.variants(fn, p):
                    vals = dict(base)
                    vals[p.name] = var.value
                    for k, ov in var.overrides.items():
                        if k in vals:
                            vals[k] = ov
                    self.run_one(fn, vals, var.label, p, var)

    # ---- regression cases of issue 12 --------------------------------------------------

    def check(self, name, cond, detail=''):
        if cond:
            self.passed.append(name)
        else:
            self.fail('regression', '%s%s' % (name, (': ' + detail) if detail else ''))

    def expect_state(self, name, query, params, state, commit=True, conn=None):
        """Runs a call (committed when it succeeds, so a wrongly accepted value stays for
        the checks after it) and asserts its SQLSTATE."""
        sums_before = self.checksums()
        r = self.attempt(query, params, conn=conn, commit=commit)
        self.calls += 1
        self.outcomes[r.state] += 1
        if r.state == 'XX000':
            self.fail('XX000 (internal error)', '%s -> %s' % (name, r.text()))
        elif not r.ok and r.state not in DOCUMENTED and r.state != 'lost':
            self.fail('undocumented SQLSTATE', '%s -> %s: %s' % (name, r.state, r.text()))
        if r.state == 'lost' or not self.alive():
            self.fail('server crash / connection lost', '%s -> %s' % (name, r.text()))
        self.check(name, r.state == state, 'got %s%s' % (r.state, (': ' + r.text()) if r.text() else
                                                       (' rows %s' % short(r.rows, 200))))
        if not r.ok:
            self.check(name + ': nothing changed', self.checksums() == sums_before)
        bad = self.mirror_disagreements()
        if bad:
            self.fail('fleet mirror disagrees', '%s: %s' % (name, '; '.join(bad)))
        return r

    def reg_node(self, node, cap, versions='{1}', slots=10):
        self.q('SELECT sched.upsert_node(%s, cpu_millis => 64000, memory_mb => 65536)', (node,))
        return self.q('SELECT worker_id, generation FROM sched.register_worker(%s, %s, %s::text[], %s)',
                      (node, cap, versions, slots))[0]

    def submit(self, cap, ver='1', ex=None, **kw):
        extra = ''.join(', %s => %%(%s)s' % (k, k) for k in kw)
        params = dict(kw, ex=ex or str(uuid.uuid4()), step=str(uuid.uuid4()), cap=cap, ver=ver)
        return self.q1('SELECT sched.submit(%(ex)s, %(step)s, %(cap)s, %(ver)s' + extra + ')', params)

    def regressions(self):
        self.capabilities = sorted(set(self.capabilities) | {'reg_retry', 'reg_batch', 'reg_inf'})
        # reg_infinity last: a time accepted there may leave rows nothing can read any more
        for case in (self.reg_retry, self.reg_batch, self.reg_ttl, self.reg_closed, self.reg_x1f,
                     self.reg_2d, self.reg_mirror, self.reg_infinity):
            try:
                case()
            except psycopg.Error as e:
                try:
                    self.conn.rollback()
                except psycopg.Error:
                    self.alive()
                self.fail('regression', '%s: stopped by an unexpected error %s: %s'
                          % (case.__name__, e.diag.sqlstate, e.diag.message_primary or e))

    def reg_retry(self):
        q, q1 = self.q, self.q1
        # 1. attempt_number 1100 of 1200: dispatched, FAILED, requeued, reap keeps working
        w, gen = self.reg_node('reg-retry', 'reg_retry', slots=4)
        for an, ma in ((1100, 1200), (2147483647, 2147483647), (2147483646, 2147483647)):
            name = 'submit(attempt_number => %d, max_attempts => %d)' % (an, ma)
            r = self.attempt('SELECT sched.submit(gen_random_uuid(), gen_random_uuid(), %s, %s, '
                             'attempt_number => %s, max_attempts => %s)', ('reg_retry', '1', an, ma), commit=True)
            self.check(name + ' succeeds', r.ok, '%s %s' % (r.state, r.text()))
            if not r.ok:
                continue
            rid = r.rows[0][0]
            r = self.attempt('SELECT outcome, attempt_id, lease_version FROM sched.dispatch_attempt(%s)', (rid,),
                             commit=True)
            self.check(name + ' then dispatch_attempt is DISPATCHED', r.ok and r.rows[0][0] == 'DISPATCHED',
                       '%s %s %s' % (r.state, r.text(), r.rows))
            if not (r.ok and r.rows[0][0] == 'DISPATCHED'):
                continue
            att, lv = str(r.rows[0][1]), r.rows[0][2]
            self.expect_state(name + ", finish_attempt(..., 'FAILED')",
                              "SELECT sched.finish_attempt(%s, %s, 'FAILED')", (att, lv), 'ok')
            nxt = q('SELECT r.state, r.available_at::text, r.available_at <= now() + '
                    "(sched.setting_seconds('sched.retry_backoff_max') + 1) * interval '1 s', "
                    'r.attempt_number FROM sched.request r JOIN sched.request o ON o.step_id = r.step_id '
                    'WHERE o.request_id = %s AND r.attempt_number::bigint = o.attempt_number::bigint + 1', (rid,))
            exst = q1('SELECT e.status FROM sched.execution e JOIN sched.request r USING (execution_id) '
                      'WHERE r.request_id = %s', (rid,))
            if an < ma:
                self.check(name + ': FAILED requeues attempt %d, ready within retry_backoff_max' % (an + 1),
                           len(nxt) == 1 and nxt[0][0] == 'PENDING' and nxt[0][2] is True,
                           'retry rows %s, execution %s' % (nxt, exst))
            else:
                self.check(name + ': FAILED on the last attempt fails the execution',
                           not nxt and exst == 'FAILED', 'retry rows %s, execution %s' % (nxt, exst))
            self.expect_state(name + ': reap_expired() afterwards', 'SELECT sched.reap_expired()', None, 'ok')
            self.expect_state(name + ": reap_expired(now() + '10 min') afterwards",
                              "SELECT sched.reap_expired(now() + interval '10 min')", None, 'ok', commit=False)
            self.expect_state(name + ': SELECT * FROM sched.pending afterwards', 'SELECT * FROM sched.pending',
                              None, 'ok')
            if an < ma and nxt:
                # the retry, dispatched and lost: reap_expired requeues it (or fails the execution)
                retry = q1('SELECT r.request_id FROM sched.request r JOIN sched.request o USING (step_id) '
                           'WHERE o.request_id = %s AND r.attempt_number::bigint = o.attempt_number::bigint + 1',
                           (rid,))
                try:
                    # at the time the retry is ready, with a heartbeat then (the superuser may)
                    ready = "(SELECT greatest(available_at, now()) FROM sched.request WHERE request_id = %s)"
                    self.conn.execute('SELECT sched.heartbeat(%s, %s, at => ' + ready + ')', (w, gen, retry))
                    cur = self.conn.execute('SELECT outcome FROM sched.dispatch_attempt(%s, at => ' + ready + ')',
                                            (retry, retry))
                    out = cur.fetchone()[0]
                    cur = self.conn.execute("SELECT sched.reap_expired(now() + interval '1 hour')")
                    lost = cur.fetchone()[0]
                    cur = self.conn.execute('SELECT count(*) FROM sched.pending')
                    cur.fetchone()
                    self.conn.rollback()
                    self.check(name + ': the retry dispatched, then reap_expired marks it LOST',
                               out == 'DISPATCHED' and lost >= 1, 'dispatch %s, reaped %s' % (out, lost))
                except psycopg.Error as e:
                    self.conn.rollback()
                    self.check(name + ': the retry dispatched, then reap_expired marks it LOST', False,
                               '%s %s' % (e.diag.sqlstate, e.diag.message_primary))

    def reg_batch(self):
        # 2. large batch sizes return the ready requests
        w, gen = self.reg_node('reg-batch', 'reg_batch', slots=10)
        rids = sorted(self.submit('reg_batch') for _ in range(3))
        for nmax in (536870912, 1073741824, 2147483647):
            r = self.attempt('SELECT outcome, request_id FROM sched.dispatch_next(%s, capability => %s)',
                             (nmax, 'reg_batch'))
            got = sorted(x[1] for x in (r.rows or []) if x[0] == 'DISPATCHED')
            self.check('dispatch_next(%d, capability => reg_batch) dispatches the 3 ready requests' % nmax,
                       r.ok and got == rids, '%s %s rows %s' % (r.state, r.text(), r.rows))
            r = self.attempt('SELECT outcome, request_id FROM sched.dispatch_next(%s)', (nmax,))
            got = sorted(x[1] for x in (r.rows or []) if x[0] == 'DISPATCHED' and x[1] in rids)
            self.check('dispatch_next(%d) dispatches the 3 ready reg_batch requests' % nmax,
                       r.ok and got == rids, '%s %s rows %s' % (r.state, r.text(), r.rows))
        for nmax in (1000000000, 2147483647):
            r = self.attempt('SELECT request_id FROM sched.claim_requests(%s, capability => %s)', (nmax, 'reg_batch'))
            got = sorted(x[0] for x in (r.rows or []))
            self.check('claim_requests(%d, capability => reg_batch) claims the 3 ready requests' % nmax,
                       r.ok and got == rids, '%s %s rows %s' % (r.state, r.text(), r.rows))
        # poll_commands(max => 2147483647) after dispatching them, in one transaction
        try:
            cur = self.conn.execute('SELECT count(*) FROM sched.dispatch_next(3, capability => %s) '
                                    "WHERE outcome = 'DISPATCHED'", ('reg_batch',))
            nd = cur.fetchone()[0]
            cur = self.conn.execute("SELECT count(*) FROM sched.poll_commands(%s, %s, max => 2147483647) "
                                    "WHERE kind = 'START'", (w, gen))
            npoll = cur.fetchone()[0]
            self.conn.rollback()
            self.check('poll_commands(max => 2147483647) returns the 3 START commands', nd == 3 and npoll == 3,
                       'dispatched %s, polled %s' % (nd, npoll))
        except psycopg.Error as e:
            self.conn.rollback()
            self.check('poll_commands(max => 2147483647) returns the 3 START commands', False,
                       '%s %s' % (e.diag.sqlstate, e.diag.message_primary))

    def reg_infinity(self):
        q1 = self.q1
        # 3. infinite times refused (22008), and everything still reads and dumps afterwards
        w, gen = self.reg_node('reg-inf', 'reg_inf', slots=4)
        rid = self.submit('reg_inf')
        for at in ('infinity', '-infinity'):
            self.expect_state("dispatch_attempt(%d, at => '%s')" % (rid, at),
                              'SELECT * FROM sched.dispatch_attempt(%s, at => %s)', (rid, at), '22008')
        for what in ('SELECT * FROM sched.request', 'SELECT * FROM sched.pending',
                     'SELECT * FROM sched.attempt_overview', 'SELECT * FROM sched.node_overview',
                     'SELECT * FROM sched.queue_stats'):
            self.expect_state("after dispatch_attempt(at => 'infinity'): %s" % what, what, None, 'ok')
        self.check("after dispatch_attempt(at => 'infinity'): pg_dump works", *self.pg_dump())
        self.expect_state("heartbeat(at => 'infinity')", 'SELECT * FROM sched.heartbeat(%s, %s, at => %s)',
                          (w, gen, 'infinity'), '22008')
        self.expect_state("submit(available_at => '-infinity')",
                          'SELECT sched.submit(gen_random_uuid(), gen_random_uuid(), %s, %s, available_at => %s)',
                          ('reg_inf', '1', '-infinity'), '22008')
        self.expect_state("submit(available_at => 'infinity')",
                          'SELECT sched.submit(gen_random_uuid(), gen_random_uuid(), %s, %s, available_at => %s)',
                          ('reg_inf', '1', 'infinity'), '22008')
        r = self.attempt('SELECT attempt_id, lease_version FROM sched.dispatch_attempt(%s)', (rid,), commit=True)
        if r.ok and r.rows[0][0] is not None:
            att, lv = str(r.rows[0][0]), r.rows[0][1]
            self.q('SELECT sched.start_attempt(%s, %s)', (att, lv))
            lv = q1('SELECT lease_version FROM sched.attempt WHERE attempt_id = %s', (att,))
            self.expect_state("renew_lease(at => 'infinity')", 'SELECT sched.renew_lease(%s, %s, at => %s)',
                              (att, lv, 'infinity'), '22008')
            self.expect_state("start_attempt(at => 'infinity')", 'SELECT sched.start_attempt(%s, %s, at => %s)',
                              (att, lv, 'infinity'), '22008')
            self.expect_state("finish_attempt(at => 'infinity')",
                              "SELECT sched.finish_attempt(%s, %s, 'SUCCEEDED', at => %s)", (att, lv, 'infinity'),
                              '22008')
        else:
            self.check('reg_inf request dispatches (setup of renew_lease(at => infinity))', False,
                       '%s %s %s' % (r.state, r.text(), r.rows))
        self.expect_state("reap_expired(at => 'infinity')", 'SELECT sched.reap_expired(%s)', ('infinity',), '22008')
        self.expect_state("register_worker(at => 'infinity')",
                          'SELECT * FROM sched.register_worker(%s, %s, %s, 4, at => %s)',
                          ('reg-inf', 'reg_inf', '{1}', 'infinity'), '22008')

    def reg_ttl(self):
        # 4. claim_ttl and heartbeat_ttl beyond their limits
        self.expect_state("claim_requests(claim_ttl => '100000 years')",
                          'SELECT * FROM sched.claim_requests(claim_ttl => %s)', ('100000 years',), '22023')
        self.expect_state("claim_requests(claim_ttl => '1 day 1 second')",
                          'SELECT * FROM sched.claim_requests(claim_ttl => %s)', ('1 day 1 second',), '22023')
        self.expect_state("select_candidate(heartbeat_ttl => '100000 years')",
                          "SELECT * FROM sched.select_candidate('render', '1.0', heartbeat_ttl => %s)",
                          ('100000 years',), '22023')

    def reg_closed(self):
        # 5. closed executions take no new work (55000); a different tenant is refused (22023)
        for ex, st in ((E_CANCELLED, 'CANCELLED'), (E_SUCCEEDED, 'SUCCEEDED'), (E_FAILED, 'FAILED')):
            self.expect_state('submit into a %s execution' % st,
                              'SELECT sched.submit(%s, gen_random_uuid(), %s, %s)', (ex, 'render', '1.0'), '55000')
        self.expect_state("submit(tenant => 'globex') into an execution of tenant acme",
                          "SELECT sched.submit(%s, gen_random_uuid(), 'render', '1.0', tenant => 'globex')",
                          (E_ACME,), '22023')
        self.expect_state("submit (tenant left to its default 'default') into an execution of tenant acme",
                          "SELECT sched.submit(%s, gen_random_uuid(), 'render', '1.0')", (E_ACME,), '22023')
        self.expect_state("submit(tenant => 'acme') into an execution of tenant acme (same tenant)",
                          "SELECT sched.submit(%s, gen_random_uuid(), 'render', '2.0', tenant => 'acme')",
                          (E_ACME,), 'ok', commit=False)

    def reg_x1f(self):
        q, q1 = self.q, self.q1
        # 6. sched.pending does not confuse shapes that differ only in where \x1f is
        for served, other in ((('a\x1fb', 'c'), ('a', 'b\x1fc')), (('x', 'y\x1fz'), ('x\x1fy', 'z'))):
            label = '(%r, %r) served, (%r, %r) not' % (served + other)
            r = self.attempt("SELECT sched.upsert_node('reg-x1f', cpu_millis => 1000)", commit=True)
            r = self.attempt('SELECT * FROM sched.register_worker(%s, %s, ARRAY[%s], 4)',
                             ('reg-x1f', served[0], served[1]), commit=True)
            self.check('register_worker with capability %r accepted' % served[0], r.ok, '%s %s' % (r.state, r.text()))
            if not r.ok:
                continue
            self.capabilities = sorted(set(self.capabilities) | {served[0]})
            ra = self.submit(served[0], served[1])
            rb = self.submit(other[0], other[1])
            rows = {x[0]: (x[1], x[2]) for x in q(
                'SELECT request_id, explanation, blocked FROM sched.pending WHERE request_id IN (%s, %s)', (ra, rb))}
            pe = {x[0]: (x[1], x[2]) for x in q(
                'SELECT request_id, explanation, blocked FROM sched.pending_explanations(now()) '
                'WHERE request_id IN (%s, %s)', (ra, rb))}
            eligible_a = q1('SELECT count(*) FILTER (WHERE eligible) FROM sched.qualification_reasons(%s)', (ra,))
            eligible_b = q1('SELECT count(*) FILTER (WHERE eligible) FROM sched.qualification_reasons(%s)', (rb,))
            ok = (ra in rows and rb in rows and rows[ra][0] != rows[rb][0]
                  and rows[ra][1] == 'none' and rows[rb][1] == 'static')
            self.check('sched.pending explains %s differently (eligible %s, not %s)' % (label, 'none', 'static'),
                       ok, 'pending rows %s; qualification_reasons eligible %s / %s' % (rows, eligible_a, eligible_b))
            self.check('sched.pending_explanations agrees for %s' % label, pe == rows, 'got %s vs %s' % (pe, rows))
            self.check('qualification_reasons agrees for %s' % label, eligible_a >= 1 and eligible_b == 0,
                       'eligible %s / %s' % (eligible_a, eligible_b))
            q('SELECT sched.cancel_execution(execution_id) FROM sched.request WHERE request_id IN (%s, %s)', (ra, rb))

    def reg_2d(self):
        # 7. a 2-D capability_versions is 22023 (new worker and existing worker)
        self.expect_state('register_worker(capability_versions => 2-D) for a new worker',
                          "SELECT * FROM sched.register_worker('node-a', 'reg_2d', '{{1,2},{3,4}}'::text[], 1)",
                          None, '22023')
        self.expect_state('register_worker(capability_versions => 2-D) for an existing worker',
                          "SELECT * FROM sched.register_worker('node-a', 'render', '{{1.0,2.0},{3.0,4.0}}'::text[], 4)",
                          None, '22023')
        self.expect_state('register_worker(capability_versions => 65 elements)',
                          "SELECT * FROM sched.register_worker('node-a', 'render', %s::text[], 4)",
                          ('{%s}' % ','.join('v%d' % i for i in range(65)),), '54000')

    def reg_mirror(self):
        # 8. a 1 MB node_id is 54000, and forces no full reload of loaded mirrors
        if not self.preloaded:
            self.expect_state('upsert_node(1 MB node_id)', 'SELECT * FROM sched.upsert_node(%s)', ('n' * MB,), '54000')
            self.notes.append('pg_sched is not preloaded: the fleet mirror checks were skipped')
            return
        other = psycopg.connect(dbname=self.dbname, autocommit=False)
        stats_sql = 'SELECT full_loads, losses, refreshes FROM sched._fleet_mirror_stats()'
        load_sql = "SELECT count(*) FROM sched.select_candidate('render', '1.0')"

        def settled(conn):
            """Loads the mirror and refreshes it until a refresh no longer reloads (a
            mirror reloads at every refresh until the transactions older than its load
            are settled); returns its stats."""
            prev = None
            for _ in range(40):
                self.q(load_sql, conn=conn)
                st = self.q(stats_sql, conn=conn)[0]
                if prev is not None and st[0] == prev[0] and st[1] == prev[1]:
                    return st
                prev = st
                time.sleep(0.05)
            return prev

        before_other = settled(other)
        before_self = settled(self.conn)
        r = self.attempt('SELECT * FROM sched.upsert_node(%s)', ('n' * MB,))
        self.calls += 1
        self.outcomes[r.state] += 1
        self.q(load_sql, conn=other)
        after_other = self.q(stats_sql, conn=other)[0]
        self.q(load_sql)
        after_self = self.q(stats_sql)[0]
        self.check('upsert_node(1 MB node_id) is 54000', r.state == '54000', 'got %s %s' % (r.state, r.text()))
        self.check('upsert_node(1 MB node_id) forces no full reload on another session with its mirror loaded',
                   after_other[0] == before_other[0] and after_other[1] == before_other[1],
                   'full_loads %s -> %s, losses %s -> %s' % (before_other[0], after_other[0],
                                                             before_other[1], after_other[1]))
        self.check('upsert_node(1 MB node_id) forces no full reload on the calling session',
                   after_self[0] == before_self[0] and after_self[1] == before_self[1],
                   'full_loads %s -> %s, losses %s -> %s' % (before_self[0], after_self[0],
                                                             before_self[1], after_self[1]))
        self.expect_state('upsert_node(257-byte node_id)', 'SELECT * FROM sched.upsert_node(%s)', ('n' * 257,),
                          '54000')
        self.expect_state('upsert_node(256-byte node_id) (at the limit)',
                          'SELECT * FROM sched.upsert_node(%s, cpu_millis => 1)', ('m' * 256,), 'ok')
        # informational: a node_id within the limit but longer than what the change log keeps
        before = settled(other)
        self.q('SELECT sched.upsert_node(%s, cpu_millis => 2)', ('m' * 256,))
        self.q(load_sql, conn=other)
        st = self.q(stats_sql, conn=other)[0]
        if st[0] != before[0] or st[1] != before[1]:
            self.notes.append('updating the node with a valid 256-byte node_id made another session reload its '
                              'mirror whole (full_loads %s -> %s, losses %s -> %s): the change log keeps '
                              'node_ids of at most CHANGE_ID_MAX bytes' % (before[0], st[0], before[1], st[1]))
        other.close()

    def pg_dump(self):
        cmd = [os.environ.get('SCHED_HOSTILE_PG_DUMP', 'pg_dump'), '-d', self.dbname, '-f', os.devnull]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        except Exception as e:  # noqa: BLE001
            return False, str(e)
        return p.returncode == 0, p.stderr.strip()[:500]

    def final(self):
        views = [r[0] for r in self.q("SELECT c.relname FROM pg_class c WHERE c.relnamespace = "
                                      "'sched'::regnamespace AND c.relkind = 'v' ORDER BY 1")]
        for v in views:
            r = self.attempt(S.SQL('SELECT * FROM sched.{}').format(S.Identifier(v)))
            self.check('at the end: SELECT * FROM sched.%s' % v, r.ok, '%s %s' % (r.state, r.text()))
        for t in self.tables:
            r = self.attempt(S.SQL('SELECT * FROM sched.{}').format(S.Identifier(t)))
            self.check('at the end: SELECT * FROM sched.%s' % t, r.ok, '%s %s' % (r.state, r.text()))
        self.check('at the end: pg_dump works', *self.pg_dump())
        bad = self.mirror_disagreements()
        self.check('at the end: the fleet mirror agrees for every capability', not bad, '; '.join(bad))

    # ---- report ------------------------------------------------------------------------

    def report(self):
        print()
        print('== summary: %d calls' % self.calls)
        for state, n in sorted(self.outcomes.items(), key=lambda x: (x[0] != 'ok', x[0])):
            print('   %-6s %6d' % (state, n))
        print('== after every call: %d table checksum comparisons, %d fleet mirror checks'
              % (self.checksum_count, self.mirror_count))
        if hasattr(self, 'passed'):
            print('== regression assertions passed: %d' % len(self.passed))
            if self.args.verbose:
                for n in self.passed:
                    print('   ok: ' + n.replace('\n', ' '))
        for n in self.notes:
            print('note: ' + n)
        if self.warnings:
            print('== warnings (%d)' % len(self.warnings))
            for w in self.warnings:
                print('   ' + w)
        total = sum(len(v) for v in self.failures.values())
        print('== failures: %d' % total)
        for cat, lines in self.failures.items():
            print('-- %s (%d)' % (cat, len(lines)))
            for ln in lines:
                print('   ' + ln.replace('\n', '\n      '))
        return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--dbname', required=True)
    ap.add_argument('--only', type=lambda s: set(s.split(',')), default=None)
    ap.add_argument('--no-matrix', action='store_true')
    ap.add_argument('--no-regressions', action='store_true')
    ap.add_argument('-v', '--verbose', action='store_true')
    ap.add_argument('--log', help='write every matrix call and its outcome to this file')
    args = ap.parse_args()
    h = Hostile(args)
    t0 = time.time()
    h.fixture()
    h.build_checks()
    h.baseline = h.checksums()
    funcs = h.functions()
    names = collections.Counter(f.name for f in funcs)
    for f in funcs:
        if names[f.name] == 1:
            f.sig = f.name
    print('pg_sched hostile-input test: %d public functions, %d parameters; preloaded: %s'
          % (len(funcs), sum(len(f.params) for f in funcs), h.preloaded), flush=True)
    if args.verbose:
        for f in funcs:
            print('   sched.%s(%s)' % (f.name, ', '.join('%s %s%s' % (p.name, p.type, ' DEFAULT ' + p.default
                                                                  if p.default else '') for p in f.params)))
    h.base_ok = {}
    if not args.no_matrix:
        h.matrix(funcs)
        print('matrix done: %d calls in %.1f s' % (h.calls, time.time() - t0), flush=True)
    h.passed = []
    if not args.no_regressions:
        h.regressions()
        print('regressions done in %.1f s' % (time.time() - t0), flush=True)
    h.final()
    total = h.report()
    print('time: %.1f s' % (time.time() - t0))
    sys.exit(1 if total else 0)


if __name__ == '__main__':
    main()
