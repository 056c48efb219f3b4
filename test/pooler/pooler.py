#!/usr/bin/env python3
"""test/pooler/pooler.py — the clients of test/pooler/run.sh, behind pgbouncer in
pool_mode = transaction.

    pooler.py mirror    many clients share few server connections while they change the
                        fleet, place, dispatch and finish; every placement read is
                        compared with the same read without the fleet mirror
    pooler.py mirror-fresh   a new server connection's first transaction changes the
                        fleet, reads placement, rolls back; the next client's reads on
                        that connection must see the committed fleet
    pooler.py wait      wait_commands through the pooler: a dispatch wakes it, a cancel
                        ends it, others keep working meanwhile
    pooler.py prepared  psycopg with prepare_threshold=None: no error
    pooler.py prepared-demo   the same with psycopg's default prepare_threshold (5):
                        what goes wrong on pgbouncer 1.18 (an observation, not a check)
    pooler.py settings  role settings (ALTER ROLE ... IN DATABASE) reach every client;
                        SET LOCAL does not leak into the next client's transaction

It prints one line per result, tab-separated, for run.sh to judge:
    CHECK <what> <got> <expected>      run.sh fails unless got = expected
    INFO  <text>                       printed as it is
and exits non-zero (with a traceback) on anything it did not expect.

The database, the roles, the fleet and the helper functions of schema pooler_test are
made by run.sh (as the superuser, directly on the server); every client here connects
through pgbouncer (--bouncer-port), except the observers that read pg_stat_activity and
LISTEN, which connect to the server directly (--pg-port) as the superuser.
"""
import argparse
import datetime
import json
import os
import random
import sys
import threading
import time
import traceback

import psycopg
from psycopg import errors

ADMIN = "sched_pooler_admin"      # granted sched_admin: fleet, dispatch, worker calls
APP = "sched_pooler_app"          # granted sched_scheduler
WORKER = "sched_pooler_worker"    # granted sched_worker
OWNER = "postgres"                # the extension's owner (the internal checks)
CAPS = ["build", "train", "render"]
HANG = 120                        # s: only catches hangs

OUT_LOCK = threading.Lock()


def out(kind, *fields):
    with OUT_LOCK:
        print("\t".join([kind] + [str(f).replace("\t", " ").replace("\n", " ") for f in fields]),
              flush=True)


def check(what, got, expected):
    """A check for run.sh; a failed one ends this program at once (run.sh reports it)."""
    out("CHECK", what, got, expected)
    if str(got) != str(expected):
        sys.stdout.flush()
        os._exit(3)


def info(text):
    out("INFO", text)


class Env:
    def __init__(self, args):
        self.args = args

    def pooled(self, user, dbname=None, autocommit=False, name="", threshold=None):
        """A client connection through pgbouncer."""
        return psycopg.connect(host=self.args.host, port=self.args.bouncer_port,
                               dbname=dbname or self.args.db, user=user,
                               autocommit=autocommit, prepare_threshold=threshold,
                               application_name=name or user, connect_timeout=30)

    def direct(self, autocommit=True):
        """The superuser, on the server itself (observers only)."""
        return psycopg.connect(host=self.args.host, port=self.args.pg_port, dbname=self.args.db,
                               user=OWNER, autocommit=autocommit, application_name="pooler observer",
                               connect_timeout=30)

    def admin_console(self, command):
        """One command on pgbouncer's admin console (simple query protocol): list of dicts."""
        c = psycopg.connect(host=self.args.host, port=self.args.bouncer_port, dbname="pgbouncer",
                            user=OWNER, autocommit=True, connect_timeout=30)
        try:
            res = c.pgconn.exec_(command.encode())
            if res.status not in (psycopg.pq.ExecStatus.TUPLES_OK, psycopg.pq.ExecStatus.COMMAND_OK):
                raise RuntimeError(f"pgbouncer admin console: {command}: "
                                   f"{res.error_message.decode(errors='replace')}")
            names = [res.fname(i).decode() for i in range(res.nfields)]
            rows = []
            for r in range(res.ntuples):
                rows.append({names[i]: (None if res.get_value(r, i) is None else res.get_value(r, i).decode())
                             for i in range(res.nfields)})
            return rows
        finally:
            c.close()

    def pool(self, user, dbname=None):
        """(clients, servers) of the pool (dbname, user) now."""
        for r in self.admin_console("SHOW POOLS"):
            if r["database"] == (dbname or self.args.db) and r["user"] == user:
                clients = int(r["cl_active"]) + int(r["cl_waiting"])
                servers = sum(int(r[k]) for k in ("sv_active", "sv_idle", "sv_used", "sv_tested", "sv_login"))
                return clients, servers
        return 0, 0


def run_threads(targets):
    """Runs each (name, fn) in a thread; re-raises the first exception of any."""
    failures = []

    def wrap(name, fn):
        try:
            fn()
        except BaseException as e:          # reported below, with its traceback
            failures.append((name, e, traceback.format_exc()))

    threads = [threading.Thread(target=wrap, args=(n, f), name=n, daemon=True) for n, f in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(HANG * 3)
        if t.is_alive():
            raise RuntimeError(f"thread {t.name} still runs after {HANG * 3} s (a hang)")
    if failures:
        name, e, tb = failures[0]
        sys.stderr.write(f"thread {name} failed:\n{tb}")
        raise e


# ---- placement parameters -----------------------------------------------------------------

# qualification_reasons reads every node from the tables (the mirror holds only the nodes
# with a worker of the capability), so it compares the tables with themselves: kept for
# the record, but the mirror is tested by the other two (and by dispatch and the checks)
PLACEMENT_FUNCTIONS = ["select_candidate", "rank_candidates", "rank_candidates", "qualification_reasons"]
# the 12 placement parameters of sched.select_candidate and its kin, in order (README)
PLACEMENT_PARAMS = "%s, %s, %s::jsonb, %s::jsonb, %s, %s, %s, %s, %s, %s, %s, %s::interval"
PLACEMENT_ARGS = "%s, " + PLACEMENT_PARAMS      # with the function's name first


def random_placement(rng, nodes):
    return (rng.choice(PLACEMENT_FUNCTIONS),
            rng.choice(CAPS + ["build", "build"]),
            rng.choice(["1.0", "1.0", "2.0"]),
            rng.choice(["{}", "{}", '{"zone": "z1"}', '{"tier": "fast"}']),
            rng.choice(["{}", '{"tier": "fast"}', '{"zone": "z0", "tier": "std"}']),
            rng.choice([0, 0, 3000]),
            rng.choice([0, 0, 8192]),
            rng.choice([0, 0, 1]),
            rng.choice([0, 250, 500, 3000]),
            rng.choice([0, 512, 1024]),
            rng.choice([0, 0, 0, 1]),
            rng.choice([None] * 9 + [rng.choice(nodes)]),
            rng.choice([None, None, "3 seconds", "1 hour"]))


# ---- mirror ---------------------------------------------------------------------------------

class MirrorRun:
    """Check a: the fleet mirror stays exact while transactions of many clients share each
    server connection, among them fleet changes that roll back."""

    # refusals: stale generation or lease, capacity or slots below what is reserved or
    # live, deadlock (transactions of several calls), serialization (REPEATABLE READ)
    EXPECTED = {"55000", "22023", "40P01", "40001"}

    def __init__(self, env):
        self.env = env
        a = env.args
        self.deadline = time.monotonic() + a.seconds
        self.lock = threading.Lock()
        self.comparisons = 0
        self.locked_comparisons = 0
        self.per_function = {}          # placement function -> comparisons
        self.checks = 0                 # _fleet_mirror_check calls
        self.differences = []           # (what, details)
        self.refused = {}               # sqlstate -> count
        self.refused_where = {}         # sqlstate and where -> count
        self.unexpected = []            # messages
        self.leaks = []                 # a transaction that began with fleet_mirror off
        self.txns = {"fleet": 0, "fleet_rolled_back": 0, "placement": 0, "dispatch": 0,
                     "dispatch_rolled_back": 0, "finish": 0, "reap": 0, "owner_locked": 0,
                     "owner_lock_busy": 0,
                     "repeatable_read": 0, "placement_cancelled": 0, "placement_not_cancelled": 0,
                     "owner_check": 0, "owner_fleet": 0}
        self.ops = {}                   # fleet operation -> count
        self.backend_clients = {}       # (role, backend pid) -> set of clients
        self.stats = {}                 # (role, backend pid) -> latest mirror stats
        self.dispatched = 0
        self.finished = 0
        self.samples = []               # (admin clients, admin servers, admin backends, owner ...)
        with env.direct() as c:
            self.nodes = [r[0] for r in c.execute("SELECT node_id FROM sched.node WHERE node_id LIKE 'node-%' ORDER BY 1")]
            self.workers = [r[0] for r in c.execute(
                "SELECT worker_id FROM sched.worker WHERE node_id LIKE 'node-%' ORDER BY 1")]
            self.gpu_nodes = [r[0] for r in c.execute(
                "SELECT node_id FROM sched.node WHERE node_id LIKE 'node-%' AND gpus > 0 ORDER BY 1")]

    # -- bookkeeping
    def count(self, key, n=1):
        with self.lock:
            self.txns[key] += n

    def op(self, name):
        with self.lock:
            self.ops[name] = self.ops.get(name, 0) + 1

    def seen(self, role, client, pid):
        with self.lock:
            self.backend_clients.setdefault((role, pid), set()).add(client)

    def refusal(self, e, where):
        st = e.sqlstate
        if st in self.EXPECTED:
            with self.lock:
                self.refused[st] = self.refused.get(st, 0) + 1
                key = f"{st} in {where.split(' ', 1)[-1]}"
                self.refused_where[key] = self.refused_where.get(key, 0) + 1
            return True
        with self.lock:
            self.unexpected.append(f"{where}: {st} {e}")
        return False

    def begin(self, conn, role, client):
        """First statement of every transaction: the backend, and that no SET LOCAL of an
        earlier transaction (of whatever client) on this server connection leaked."""
        pid, mirror, st, lt = conn.execute(
            "SELECT pg_backend_pid(), current_setting('sched.fleet_mirror'),"
            " current_setting('statement_timeout'), current_setting('lock_timeout')").fetchone()
        self.seen(role, client, pid)
        if (mirror, st, lt) != ("on", "0", "0"):
            with self.lock:
                self.leaks.append(f"{client} on backend {pid}: sched.fleet_mirror = {mirror}, statement_timeout = {st},"
                                  f" lock_timeout = {lt} at transaction start")
        return pid

    def savepoint(self, conn, where, fn):
        """fn() in a savepoint; an expected refusal rolls back to it.  True if it held."""
        conn.execute("SAVEPOINT op")
        try:
            fn()
        except psycopg.Error as e:
            conn.execute("ROLLBACK TO SAVEPOINT op")
            if not self.refusal(e, where):
                raise
            return False
        conn.execute("RELEASE SAVEPOINT op")
        return True

    # -- the comparisons
    def compare(self, conn, rng, client, pid, where):
        """One placement read with the mirror and without it (SET LOCAL sched.fleet_mirror
        = off, through set_config(..., true)), in one statement of a STABLE function, so
        both read with the same snapshot (pooler_test.compare)."""
        p = random_placement(rng, self.nodes)
        mirrored, direct = conn.execute(f"SELECT * FROM pooler_test.compare({PLACEMENT_ARGS})", p).fetchone()
        with self.lock:
            self.comparisons += 1
            self.per_function[p[0]] = self.per_function.get(p[0], 0) + 1
            if mirrored != direct:
                self.differences.append((where, f"{client} backend {pid}: sched.{p[0]}{p[1:]} "
                                                 f"with the mirror: {mirrored} ; without: {direct}"))

    def mirror_check(self, conn, client, pid, where, owner=False):
        fn = "sched._fleet_mirror_check" if owner else "pooler_test.mirror_check"
        rows = conn.execute(f"SELECT c, {fn}(c) FROM unnest(%s::text[]) c", (CAPS,)).fetchall()
        with self.lock:
            self.checks += len(rows)
            for cap, d in rows:
                if d != 0:
                    self.differences.append((where, f"{client} backend {pid}: {fn}('{cap}') = {d} nodes differ"))

    def record_stats(self, conn, role, owner=False):
        sql = ("SELECT pg_backend_pid(), usable, refreshes, full_loads, rows_reread, bypassed, losses, pending "
               "FROM sched._fleet_mirror_stats()" if owner else "SELECT * FROM pooler_test.mirror_stats()")
        pid, *vals = conn.execute(sql).fetchone()
        with self.lock:
            self.stats[(role, pid)] = vals

    # -- the fleet operations (each in a savepoint)
    def fleet_op(self, conn, rng):
        kind = rng.choice(["capacity", "labels", "drain", "undrain", "cordon", "uncordon",
                           "register", "heartbeat", "heartbeat", "weight"])
        node = rng.choice(self.nodes)
        worker = rng.choice(self.workers)
        if kind == "capacity":
            gpus = rng.choice([1, 2, 3]) if node in self.gpu_nodes else None
            sql, args = ("SELECT sched.upsert_node(%s, cpu_millis => %s, memory_mb => %s, gpus => %s)",
                         (node, rng.choice([1000, 2000, 4000, 8000]), rng.choice([2048, 4096, 8192, 16384]), gpus))
        elif kind == "labels":
            sql, args = ("SELECT sched.upsert_node(%s, labels => %s::jsonb)",
                         (node, json.dumps({"zone": f"z{rng.randrange(3)}", "tier": rng.choice(["fast", "std"])})))
        elif kind == "weight":
            sql, args = "SELECT sched.upsert_node(%s, weight => %s)", (node, rng.choice([50, 100, 150]))
        elif kind == "drain":
            sql, args = "SELECT sched.drain_node(%s)", (node,)
        elif kind == "undrain":
            sql, args = ("SELECT sched.upsert_node(%s, management_status => %s)",
                         (node, rng.choice(["ACTIVE", "ACTIVE", "DISABLED"])))
        elif kind == "cordon":
            sql, args = "SELECT sched.cordon_worker(%s)", (worker,)
        elif kind == "uncordon":
            sql, args = "SELECT sched.uncordon_worker(%s)", (worker,)
        elif kind == "register":
            sql, args = ("SELECT sched.register_worker(w.node_id, w.capability, %s, %s) FROM sched.worker w WHERE w.worker_id = %s",
                         (rng.choice([["1.0"], ["1.0", "2.0"], ["2.0"]]), rng.choice([1, 2, 3, 4]), worker))
        else:
            sql, args = ("SELECT sched.heartbeat(w.worker_id, w.generation, runtime_state => %s) FROM sched.worker w WHERE w.worker_id = %s",
                         (rng.choice(["READY", "READY", "READY", "STARTING", "DRAINING", "STOPPED"]), worker))
        if self.savepoint(conn, kind, lambda: conn.execute(sql, args)):
            self.op(kind)

    # -- the admin clients: fleet, placement, dispatch, finish, through one small pool
    def admin_client(self, n):
        rng = random.Random(self.env.args.seed * 1000 + n)
        client = f"admin-{n}"
        conn = self.env.pooled(ADMIN, name=client)
        try:
            while time.monotonic() < self.deadline:
                r = rng.random()
                kind = ("fleet" if r < 0.30 else "placement" if r < 0.60 else "dispatch" if r < 0.78
                        else "finish" if r < 0.97 else "reap")
                if kind == "placement" and rng.random() < 0.1:
                    kind = "placement_cancelled"
                # some fleet changes and dispatches in REPEATABLE READ (where the mirror is
                # not used), between the others on the same server connections
                rr = kind in ("fleet", "dispatch") and rng.random() < 0.15
                if rr:
                    conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
                    self.count("repeatable_read")
                try:
                    if kind == "reap":
                        conn.execute("SELECT sched.reap_expired()")
                        conn.commit()
                        self.count("reap")
                    else:
                        getattr(self, f"admin_{kind}")(conn, rng, client)
                except psycopg.Error as e:
                    conn.rollback()
                    if not self.refusal(e, f"{client} {kind}{' (repeatable read)' if rr else ''}"):
                        raise
                finally:
                    if rr:
                        conn.isolation_level = None
            self.record_stats(conn, ADMIN)
            conn.commit()
        finally:
            conn.close()

    def admin_fleet(self, conn, rng, client):
        pid = self.begin(conn, ADMIN, client)
        for _ in range(rng.randint(1, 3)):
            self.fleet_op(conn, rng)
        if rng.random() < 0.2:
            # a change undone by ROLLBACK TO SAVEPOINT, inside a transaction that goes on
            conn.execute("SAVEPOINT undone")
            self.fleet_op(conn, rng)
            conn.execute("ROLLBACK TO SAVEPOINT undone")
            self.op("undone_by_rollback_to_savepoint")
        if conn.isolation_level is None and rng.random() < 0.6:
            # the mirror must see this transaction's own uncommitted changes
            self.compare(conn, rng, client, pid, "after own uncommitted fleet changes")
            self.mirror_check(conn, client, pid, "after own uncommitted fleet changes")
        if rng.random() < 0.35:
            conn.rollback()
            self.count("fleet_rolled_back")
        else:
            conn.commit()
            self.count("fleet")

    def admin_placement(self, conn, rng, client):
        pid = self.begin(conn, ADMIN, client)
        # a placement read as a client makes it, a statement of its own
        p = random_placement(rng, self.nodes)
        conn.execute(f"SELECT * FROM sched.{p[0]}({PLACEMENT_PARAMS})", p[1:]).fetchall()
        for _ in range(rng.randint(1, 3)):
            self.compare(conn, rng, client, pid, "placement transaction")
        if rng.random() < 0.5:
            self.mirror_check(conn, client, pid, "placement transaction")
        self.record_stats(conn, ADMIN)
        # a transaction-scoped setting: the next transaction on this server connection,
        # of whatever client, must start with the mirror on again (begin() checks)
        conn.execute("SET LOCAL sched.fleet_mirror = off")
        conn.commit()
        self.count("placement")

    def admin_placement_cancelled(self, conn, rng, client):
        """A placement read cancelled by statement_timeout, maybe in the middle of the
        mirror's refresh: the next transaction on this server connection, of whatever
        client, must find the mirror exact all the same."""
        pid = self.begin(conn, ADMIN, client)
        conn.execute("SET LOCAL statement_timeout = '1ms'")
        try:
            self.compare(conn, rng, client, pid, "placement with statement_timeout 1ms")
            self.count("placement_not_cancelled")
        except errors.QueryCanceled:
            self.count("placement_cancelled")
        # ROLLBACK itself runs under the transaction's 1 ms statement_timeout, and on a
        # loaded machine it may be cancelled in turn (seen once in make test): the
        # transaction then still has to end, so roll back again
        for attempt in range(10):
            try:
                conn.rollback()
                break
            except errors.QueryCanceled:
                if attempt == 9:
                    raise

    def admin_dispatch(self, conn, rng, client):
        pid = self.begin(conn, ADMIN, client)
        cap = rng.choice(CAPS)
        for _ in range(rng.randint(1, 3)):
            conn.execute(
                "SELECT sched.submit(gen_random_uuid(), gen_random_uuid(), %s, %s, tenant => %s,"
                " reserve_cpu_millis => %s, reserve_memory_mb => %s, reserve_gpus => %s,"
                " required_labels => %s::jsonb, preferred_labels => %s::jsonb)",
                (cap, rng.choice(["1.0", "1.0", "2.0"]), rng.choice(["t0", "t1"]),
                 rng.choice([250, 500, 1000]), rng.choice([256, 512, 2048]),
                 1 if cap == "train" and rng.random() < 0.5 else 0,
                 rng.choice(["{}", "{}", '{"zone": "z1"}']), rng.choice(["{}", '{"tier": "fast"}'])))
        rows = conn.execute("SELECT outcome FROM sched.dispatch_next(%s, capability => %s)",
                            (rng.randint(1, 3), cap)).fetchall()
        placed = sum(1 for (o,) in rows if o == "DISPATCHED")
        if conn.isolation_level is None and rng.random() < 0.5:
            # after this transaction's own reservations
            self.compare(conn, rng, client, pid, "after own dispatches")
        if rng.random() < 0.2:
            conn.rollback()
            self.count("dispatch_rolled_back")
        else:
            conn.commit()
            self.count("dispatch")
            with self.lock:
                self.dispatched += placed

    def admin_finish(self, conn, rng, client):
        """One call, as a worker makes it: start a dispatched attempt, or finish a running one."""
        self.begin(conn, ADMIN, client)
        live = conn.execute("SELECT attempt_id, lease_version, status FROM sched.attempt"
                            " WHERE status IN ('DISPATCHED', 'RUNNING') ORDER BY random() LIMIT 1").fetchone()
        if live is None:
            conn.commit()
            return
        attempt_id, lease_version, status = live
        if status == "DISPATCHED":
            conn.execute("SELECT sched.start_attempt(%s, %s)", (attempt_id, lease_version))
        else:
            conn.execute("SELECT sched.finish_attempt(%s, %s, %s)",
                         (attempt_id, lease_version, rng.choice(["SUCCEEDED", "SUCCEEDED", "FAILED"])))
        conn.commit()
        self.count("finish")
        with self.lock:
            self.finished += 1

    # -- the owner's clients: the internal checker, and reads with the fleet frozen
    def owner_client(self, n):
        rng = random.Random(self.env.args.seed * 1000 + 500 + n)
        client = f"owner-{n}"
        conn = self.env.pooled(OWNER, name=client)
        try:
            while time.monotonic() < self.deadline:
                r = rng.random()
                kind = "owner_locked" if r < 0.25 else "owner_check" if r < 0.65 else "owner_fleet"
                try:
                    if r < 0.25:
                        self.owner_locked(conn, rng, client)
                    elif r < 0.65:
                        pid = self.begin(conn, OWNER, client)
                        self.mirror_check(conn, client, pid, "owner check", owner=True)
                        self.record_stats(conn, OWNER, owner=True)
                        conn.commit()
                        self.count("owner_check")
                    else:
                        pid = self.begin(conn, OWNER, client)
                        for _ in range(rng.randint(1, 2)):
                            self.fleet_op(conn, rng)
                        self.mirror_check(conn, client, pid, "owner, after own uncommitted fleet changes", owner=True)
                        if rng.random() < 0.5:
                            conn.rollback()
                        else:
                            conn.commit()
                        self.count("owner_fleet")
                except psycopg.Error as e:
                    conn.rollback()
                    if e.sqlstate == "55P03" and kind == "owner_locked":
                        self.count("owner_lock_busy")
                    elif not self.refusal(e, f"{client} {kind}"):
                        raise
        finally:
            conn.close()

    def owner_locked(self, conn, rng, client):
        """The comparison as the brief words it, two statements apart: with the mirror, then
        after SET LOCAL sched.fleet_mirror = off.  Between two statements other clients
        commit, so the fleet is frozen first (SHARE locks, which only the owner may take)."""
        pid = self.begin(conn, OWNER, client)
        # waiting for the locks while holding one of them is a deadlock in the making, and
        # queued behind us the other clients wait too: give up soon, and try again later
        conn.execute("SET LOCAL lock_timeout = '100ms'")
        conn.execute("LOCK TABLE sched.node, sched.worker IN SHARE MODE")
        self.mirror_check(conn, client, pid, "owner, fleet locked", owner=True)
        self.record_stats(conn, OWNER, owner=True)
        reads = [random_placement(rng, self.nodes) for _ in range(3)]
        with_mirror = [conn.execute(f"SELECT pooler_test.placement({PLACEMENT_ARGS})", p).fetchone()[0] for p in reads]
        conn.execute("SET LOCAL sched.fleet_mirror = off")
        without = [conn.execute(f"SELECT pooler_test.placement({PLACEMENT_ARGS})", p).fetchone()[0] for p in reads]
        conn.commit()
        self.count("owner_locked")
        with self.lock:
            self.locked_comparisons += len(reads)
            for p in reads:
                self.per_function[p[0]] = self.per_function.get(p[0], 0) + 1
            for p, m, d in zip(reads, with_mirror, without):
                if m != d:
                    self.differences.append(("owner, fleet locked", f"{client} backend {pid}: sched.{p[0]}{p[1:]} "
                                                                    f"with the mirror: {m} ; without: {d}"))

    # -- the observer: the pools, from pgbouncer and from the server
    def sampler(self):
        with self.env.direct() as c:
            while time.monotonic() < self.deadline:
                backends = dict(c.execute(
                    "SELECT usename, count(*) FROM pg_stat_activity WHERE datname = %s AND usename IN (%s, %s)"
                    " AND pid <> pg_backend_pid() GROUP BY usename", (self.env.args.db, ADMIN, OWNER)).fetchall())
                ac, asv = self.env.pool(ADMIN)
                oc, osv = self.env.pool(OWNER)
                with self.lock:
                    self.samples.append((ac, asv, backends.get(ADMIN, 0), oc, osv, backends.get(OWNER, 0)))
                time.sleep(0.25)

    def run(self):
        a = self.env.args
        info(f"mirror: {a.admin_clients} clients as {ADMIN} and {a.owner_clients} as {OWNER}, "
             f"{a.seconds} s, {len(self.nodes)} nodes, {len(self.workers)} workers, seed {a.seed}")
        targets = [(f"admin-{i}", lambda i=i: self.admin_client(i)) for i in range(a.admin_clients)]
        targets += [(f"owner-{i}", lambda i=i: self.owner_client(i)) for i in range(a.owner_clients)]
        targets.append(("sampler", self.sampler))
        run_threads(targets)
        self.report()

    def report(self):
        a = self.env.args
        info("transactions: " + ", ".join(f"{k} {v}" for k, v in self.txns.items()))
        info("fleet operations: " + ", ".join(f"{k} {v}" for k, v in sorted(self.ops.items())))
        info(f"attempts dispatched {self.dispatched}, started or finished {self.finished}; "
             f"refused (expected): " + (", ".join(f"{k} {v}" for k, v in sorted(self.refused_where.items())) or "none"))
        for role, clients in ((ADMIN, a.admin_clients), (OWNER, a.owner_clients)):
            per = {pid: len(c) for (r, pid), c in self.backend_clients.items() if r == role}
            info(f"{role}: {clients} clients ran their transactions on {len(per)} server backends; "
                 "clients per backend: " + ", ".join(f"{pid}: {n}" for pid, n in sorted(per.items())))
            check(f"mirror: the {clients} {role} clients shared at most {a.pool_size} server backends",
                  len(per) <= a.pool_size and len(per) < clients, True)
            check(f"mirror: a {role} server backend ran transactions of several clients",
                  max(per.values(), default=0) >= 2, True)
        if self.samples:
            mx = [max(s[i] for s in self.samples) for i in range(6)]
            shared = sum(1 for s in self.samples if s[0] > s[1] > 0)
            info(f"{len(self.samples)} samples: {ADMIN} pool up to {mx[0]} clients on up to {mx[1]} server "
                 f"connections (pg_stat_activity: up to {mx[2]} backends), {shared} samples with more clients "
                 f"than servers; {OWNER} pool up to {mx[3]} clients on {mx[4]} ({mx[5]} backends)")
            check(f"mirror: pg_stat_activity never showed more than {a.pool_size} backends of {ADMIN}",
                  mx[2] <= a.pool_size, True)
            check("mirror: SHOW POOLS saw more clients than server connections", shared > 0, True)
        agg = [0] * 7
        unusable = 0
        for (role, pid), v in self.stats.items():
            unusable += 0 if v[0] else 1
            for i in range(1, 7):
                agg[i] += v[i]
        info(f"mirror counters over {len(self.stats)} backends (sched._fleet_mirror_stats): refreshes {agg[1]}, "
             f"full loads {agg[2]}, rows re-read {agg[3]}, bypassed {agg[4]}, losses {agg[5]}, "
             f"pending at last look {agg[6]}")
        check("mirror: in use in every backend, refreshed incrementally (refreshes > full loads, rows re-read)",
              unusable == 0 and agg[1] > agg[2] and agg[3] > 0, True)
        info(f"comparisons: {self.comparisons} in one statement (mirror, then SET LOCAL off), "
             f"{self.locked_comparisons} two statements apart with the fleet locked, "
             f"{self.checks} sched._fleet_mirror_check calls; by function: "
             + ", ".join(f"{k} {v}" for k, v in sorted(self.per_function.items())))
        for where, d in self.differences[:10]:
            info(f"DIFFERENCE ({where}): {d}")
        check(f"mirror: results with and without the mirror, and _fleet_mirror_check, differ nowhere "
              f"({self.comparisons + self.locked_comparisons} comparisons, {self.checks} checks)",
              len(self.differences), 0)
        check("mirror: enough of everything happened (comparisons, checks, rolled back fleet changes, dispatches)",
              self.comparisons > 0 and self.locked_comparisons > 0 and self.checks > 0
              and self.txns["fleet_rolled_back"] > 0 and self.dispatched > 0, True)
        for l in self.leaks[:5]:
            info(f"LEAK: {l}")
        check("mirror: no transaction began with a SET LOCAL of an earlier one (sched.fleet_mirror, "
              "statement_timeout, lock_timeout)", len(self.leaks), 0)
        for u in self.unexpected[:5]:
            info(f"UNEXPECTED: {u}")
        check("mirror: no error but the expected refusals (55000, 22023, 40P01, 40001)", len(self.unexpected), 0)


def mirror_fresh_check(env):
    """Check a, the deterministic part: the first transaction a new server connection
    serves changes the fleet, reads placement (the backend's first use of its mirror,
    which loads the fleet as that transaction sees it) and rolls back; the next client's
    transaction on that same server connection must read the fleet as committed.  Through
    the pgbouncer name --db-one (one server connection per role), after RECONNECT."""
    a = env.args
    node = "node-05"
    with env.pooled(ADMIN, name="fresh setup") as c:
        # the node and its build worker eligible, as the random run may have left them
        c.execute("SELECT sched.upsert_node(%s, management_status => 'ACTIVE')", (node,))
        c.execute("SELECT sched.uncordon_worker(w.worker_id) FROM sched.worker w"
                  " WHERE w.node_id = %s AND w.capability = 'build'", (node,))
        c.execute("SELECT sched.register_worker(%s, 'build', ARRAY['1.0', '2.0'], 4)", (node,))
        weight = c.execute("SELECT weight FROM sched.node WHERE node_id = %s", (node,)).fetchone()[0]
        c.commit()
    env.admin_console(f"RECONNECT {a.db_one}")
    env.admin_console(f"WAIT_CLOSE {a.db_one}")
    read = ("SELECT * FROM pooler_test.compare('rank_candidates', 'build', '1.0', '{}', '{}', 0, 0, 0, 0, 0, 0,"
            " NULL, '1 day')")
    first = env.pooled(ADMIN, dbname=a.db_one, name="fresh first")
    second = env.pooled(ADMIN, dbname=a.db_one, name="fresh second")
    try:
        pid1 = first.execute("SELECT pg_backend_pid()").fetchone()[0]
        first.execute("SELECT sched.upsert_node(%s, weight => %s)", (node, weight + 7))
        m1, d1 = first.execute(read).fetchone()
        c1 = first.execute("SELECT pooler_test.mirror_check('build')").fetchone()[0]
        first.rollback()
        pid2 = second.execute("SELECT pg_backend_pid()").fetchone()[0]
        m2, d2 = second.execute(read).fetchone()
        c2 = second.execute("SELECT pooler_test.mirror_check('build')").fetchone()[0]
        second.commit()
    finally:
        first.close()
        second.close()
    check(f"mirror, new server connection: both transactions ran on it (backend {pid1})", pid1 == pid2, True)
    check(f"mirror, new server connection: the first transaction read its own change of {node} "
          f"(weight {weight} -> {weight + 7}) with and without the mirror alike", (m1 == d1, c1), (True, 0))
    if m2 != d2:
        info(f"DIFFERENCE: after the rollback, rank_candidates('build', '1.0') with the mirror: {m2} ; "
             f"without: {d2}")
    check("mirror, new server connection: after that transaction rolled back, the next client's transaction "
          "reads the committed fleet with the mirror too (rank_candidates alike, _fleet_mirror_check 0)",
          (m2 == d2, c2), (True, 0))
    # the same with ROLLBACK TO SAVEPOINT: the transaction goes on, and must not read its
    # undone change with the mirror
    env.admin_console(f"RECONNECT {a.db_one}")
    env.admin_console(f"WAIT_CLOSE {a.db_one}")
    with env.pooled(ADMIN, dbname=a.db_one, name="fresh savepoint") as c:
        c.execute("SAVEPOINT s")
        c.execute("SELECT sched.upsert_node(%s, weight => %s)", (node, weight + 9))
        m1, d1 = c.execute(read).fetchone()
        c.execute("ROLLBACK TO SAVEPOINT s")
        m2, d2 = c.execute(read).fetchone()
        c2 = c.execute("SELECT pooler_test.mirror_check('build')").fetchone()[0]
        c.commit()
    if m2 != d2:
        info(f"DIFFERENCE: after ROLLBACK TO SAVEPOINT, rank_candidates('build', '1.0') with the mirror: {m2} ; "
             f"without: {d2}")
    check("mirror, new server connection: after ROLLBACK TO SAVEPOINT undid a change the mirror had loaded, "
          "the transaction reads the fleet without it, with the mirror too", (m1 == d1, m2 == d2, c2), (True, True, 0))


# ---- wait_commands --------------------------------------------------------------------------

def wait_check(env):
    """Check b."""
    a = env.args
    with env.direct() as d:
        waiters = d.execute("SELECT node_id FROM sched.node WHERE node_id LIKE 'wnode-%' ORDER BY 1").fetchall()
    nodes = [r[0] for r in waiters]
    # every client of the worker role through the pool; each registers its own worker
    conns = [env.pooled(WORKER, autocommit=True, name=f"worker {n}") for n in nodes]
    regs = [c.execute("SELECT worker_id, generation FROM sched.register_worker(%s, 'wait', ARRAY['1.0'], 4)",
                      (n,)).fetchone() for c, n in zip(conns, nodes)]
    waiter, wreg = conns[0], regs[0]
    busy = list(zip(conns[1:], regs[1:]))
    stop = threading.Event()
    progress = [0]
    lock = threading.Lock()

    def busy_client(conn, reg):
        while not stop.is_set():
            conn.execute("SELECT sched.heartbeat(%s, %s)", reg)
            conn.execute("SELECT * FROM sched.poll_commands(%s, %s)", reg).fetchall()
            with lock:
                progress[0] += 1

    result = {}

    def wait_once(key):
        try:
            result[key] = waiter.execute(
                "SELECT kind, attempt_id, lease_version FROM sched.wait_commands(%s, %s, 10, %s)",
                (wreg[0], wreg[1], datetime.timedelta(seconds=HANG))).fetchall()
        except psycopg.Error as e:
            result[key] = e

    def in_wait(d, previous=None):
        """The waiter's backend while it sleeps in wait_commands, seen from the server.

        One row of pg_stat_activity takes backend_xmin from the status copy read first and
        the wait event from the backend's PGPROC a moment later, so a waiter caught just as
        it goes from its poll (snapshot held) to its sleep reads as both.  A backend seen
        in the wait event is therefore read again, up to 50 times over a second, while it
        stays asleep in the same call: the row returned is the first that shows no snapshot,
        or the last one read if all 50 showed one (then the check fails, as it should)."""
        deadline = time.monotonic() + HANG
        while time.monotonic() < deadline:
            row = d.execute(
                "SELECT pid, query_start, wait_event_type, wait_event, backend_xmin IS NULL FROM pg_stat_activity"
                " WHERE datname = %s AND usename = %s AND state = 'active' AND query LIKE %s",
                (a.db, WORKER, "%wait_commands%")).fetchone()
            if row and row[2] == "Extension" and (previous is None or row[:2] != previous[:2]):
                seen = row
                for _ in range(50):
                    if seen is None or seen[4]:
                        break
                    time.sleep(0.02)
                    again = d.execute(
                        "SELECT pid, query_start, wait_event_type, wait_event, backend_xmin IS NULL"
                        " FROM pg_stat_activity WHERE pid = %s AND state = 'active'", (row[0],)).fetchone()
                    # out of the sleep (or the call) between two reads: look for the waiter again
                    seen = again if again and again[:2] == row[:2] and again[2] == "Extension" else None
                if seen is not None:
                    return seen
            time.sleep(0.02)
        raise RuntimeError("the waiter was never seen sleeping in wait_commands")

    busy_threads = [threading.Thread(target=busy_client, args=br, daemon=True) for br in busy]
    for t in busy_threads:
        t.start()
    try:
        with env.direct() as d:
            t1 = threading.Thread(target=wait_once, args=("start",), daemon=True)
            t1.start()
            w = in_wait(d)
            info(f"wait: the waiter sleeps in wait_commands on backend {w[0]} (wait event {w[2]}:{w[3]})")
            check("wait: the waiter sleeps in wait_commands through pgbouncer without a snapshot "
                  "(backend_xmin NULL)", w[4], True)
            with lock:
                p0 = progress[0]
            deadline = time.monotonic() + HANG
            while True:
                with lock:
                    if progress[0] >= p0 + 40:
                        break
                if time.monotonic() > deadline:
                    raise RuntimeError("the busy clients made no progress while the waiter slept")
                time.sleep(0.02)
            clients, servers = env.pool(WORKER)
            still = d.execute("SELECT pid, query_start FROM pg_stat_activity WHERE pid = %s AND state = 'active'"
                              " AND query LIKE %s", (w[0], "%wait_commands%")).fetchone()
            info(f"wait: pool {WORKER}: {clients} clients, {servers} server connections while the waiter slept")
            check(f"wait: {len(busy)} other clients of the pool made 40 calls while the waiter slept on, in the "
                  f"same wait, on one of the pool's {a.pool_size} server connections",
                  f"still waiting: {still == w[:2] and t1.is_alive()}, servers within the pool: {servers <= a.pool_size}",
                  "still waiting: True, servers within the pool: True")
            # a dispatch through the pooler wakes it
            with env.pooled(APP, autocommit=True, name="dispatcher") as app:
                rid = app.execute("SELECT sched.submit(gen_random_uuid(), gen_random_uuid(), 'wait', '1.0',"
                                  " node_id => %s)", (nodes[0],)).fetchone()[0]
                outcome, attempt_id, lease_version = app.execute(
                    "SELECT outcome, attempt_id, lease_version FROM sched.dispatch_attempt(%s)", (rid,)).fetchone()
            check("wait: dispatch_attempt through pgbouncer placed the request on the waiter's worker",
                  outcome, "DISPATCHED")
            t1.join(HANG)
            got = result.get("start")
            check("wait: the dispatch woke the waiter, which returned its START",
                  got if isinstance(got, Exception) else [tuple(r) for r in got],
                  [("START", attempt_id, lease_version)])
            # between two waits the waiter holds no server connection: with the busy clients
            # stopped, two transactions of two other clients at once get both of the pool's
            # server connections, among them the one the waiter slept on
            stop.set()
            for t in busy_threads:
                t.join(HANG)
            (c1, _), (c2, _) = busy[0], busy[1]
            both = {}
            with c1.transaction():
                both["first"] = c1.execute("SELECT pg_backend_pid()").fetchone()[0]
                t = threading.Thread(target=lambda: both.update(second=c2.execute("SELECT pg_backend_pid()").fetchone()[0]),
                                     daemon=True)
                t.start()
                t.join(HANG)
            check("wait: once it woke, the waiter's connection held no server connection: two other clients' "
                  "transactions at once ran on both (the one it slept on among them)",
                  len({both.get("first"), both.get("second")}) == 2 and w[0] in both.values(), True)
            # a cancel through pgbouncer (psycopg sends it to pgbouncer, which forwards it)
            t2 = threading.Thread(target=wait_once, args=("cancel",), daemon=True)
            t2.start()
            w2 = in_wait(d, previous=w)
            waiter.cancel()
            t2.join(HANG)
            got = result.get("cancel")
            check("wait: a cancel through pgbouncer ended the wait with SQLSTATE 57014",
                  getattr(got, "sqlstate", repr(got)), "57014")
            info(f"wait: the second wait slept on backend {w2[0]}")
            check("wait: the waiter's connection works after the cancel (heartbeat)",
                  waiter.execute("SELECT (sched.heartbeat(%s, %s)).runtime_state", wreg).fetchone()[0], "READY")
    finally:
        stop.set()
        for t in busy_threads:
            t.join(HANG)
        for c in conns:
            c.close()


# ---- prepared statements --------------------------------------------------------------------

def prepared_check(env):
    """Check c: prepare_threshold=None, many clients, the same statements many times."""
    a = env.args
    errors_seen = []
    calls = [0]
    pids = set()
    lock = threading.Lock()
    with env.direct() as d:
        nodes = [r[0] for r in d.execute("SELECT node_id FROM sched.node WHERE node_id LIKE 'pnode-%' ORDER BY 1")]

    def client(n):
        with env.pooled(WORKER, autocommit=True, name=f"prepared {n}", threshold=None) as c:
            reg = c.execute("SELECT worker_id, generation FROM sched.register_worker(%s, 'prep', ARRAY['1.0'], 2)",
                            (nodes[n],)).fetchone()
            for _ in range(a.iterations):
                try:
                    pid = c.execute("SELECT pg_backend_pid() FROM sched.heartbeat(%s, %s)", reg).fetchone()[0]
                    c.execute("SELECT * FROM sched.poll_commands(%s, %s)", reg).fetchall()
                    c.execute("SELECT * FROM sched.wait_commands(%s, %s, 1, %s)",
                              reg + (datetime.timedelta(0),)).fetchall()
                    with c.transaction():
                        c.execute("SELECT (sched.heartbeat(%s, %s, runtime_state => %s)).generation", reg + ("READY",))
                        c.execute("SELECT * FROM sched.poll_commands(%s, %s)", reg).fetchall()
                    with lock:
                        calls[0] += 5
                        pids.add(pid)
                except psycopg.Error as e:
                    with lock:
                        errors_seen.append(f"{type(e).__name__} {e.sqlstate}: {e}")

    run_threads([(f"prepared-{i}", lambda i=i: client(i)) for i in range(a.clients)])
    info(f"prepared: {a.clients} clients, {calls[0]} calls of 5 statement texts, on {len(pids)} server backends")
    for e in errors_seen[:5]:
        info(f"ERROR: {e}")
    check(f"prepared: prepare_threshold=None, {a.clients} clients x {a.iterations} rounds of the same "
          "statements through pgbouncer: no error", len(errors_seen), 0)
    check(f"prepared: the clients shared at most {a.pool_size} server backends", len(pids) <= a.pool_size, True)


def prepared_demo(env):
    """Not a check: what psycopg's default prepare_threshold does through pgbouncer 1.18."""
    a = env.args
    kinds = {}
    wrong = [0]
    calls = [0]
    lock = threading.Lock()

    def client(n):
        with env.pooled(WORKER, autocommit=True, name=f"prepared-demo {n}", threshold=5) as c:
            for i in range(a.iterations):
                try:
                    # the same parameter types, a different text per client: a statement
                    # prepared by another client under the same name runs silently
                    who = c.execute(f"SELECT %s::int AS i, 'client {n}' AS who", (i,)).fetchone()[1]
                    with lock:
                        calls[0] += 1
                        if who != f"client {n}":
                            wrong[0] += 1
                except psycopg.Error as e:
                    with lock:
                        k = f"{type(e).__name__} ({e.sqlstate})"
                        kinds[k] = kinds.get(k, 0) + 1

    run_threads([(f"demo-{i}", lambda i=i: client(i)) for i in range(a.clients)])
    info(f"prepared-demo (prepare_threshold=5, psycopg's default): {calls[0]} statements answered, "
         f"{wrong[0]} of them by another client's statement; errors: "
         + (", ".join(f"{k} {v}" for k, v in sorted(kinds.items())) or "none"))


# ---- settings -------------------------------------------------------------------------------

def settings_check(env):
    """Check d.  run.sh has set, as the superuser, for the application's role
    sched.lease_ttl and sched.heartbeat_ttl, and for the workers' role sched.lease_ttl
    (ALTER ROLE ... IN DATABASE), and given their expected values."""
    a = env.args
    app_lease, app_hb, worker_lease = a.app_lease, a.app_heartbeat, a.worker_lease
    with env.direct() as d:
        # what a session without the role settings gets: the worker registered with an old
        # heartbeat is expired for it (so the dispatches below depend on the setting)
        reasons = d.execute("SELECT reasons FROM sched.qualification_reasons('lease', '1.0')").fetchone()[0]
        default_lease = d.execute("SELECT current_setting('sched.lease_ttl')::interval").fetchone()[0]
    check("settings: without the role's heartbeat_ttl the lease worker is heartbeat_expired",
          "heartbeat_expired" in reasons, True)
    # the server connections pgbouncer already holds started before ALTER ROLE: they keep
    # the old values (an observation); RECONNECT closes them as they are released
    with env.pooled(APP, autocommit=True, name="before reconnect") as c:
        before = c.execute("SELECT current_setting('sched.lease_ttl')").fetchone()[0]
    info(f"settings: a pooled {APP} session before RECONNECT sees sched.lease_ttl = {before} "
         f"(server connections keep the settings they started with)")
    env.admin_console(f"RECONNECT {a.db}")
    env.admin_console(f"WAIT_CLOSE {a.db}")

    lock = threading.Lock()
    seen = []                       # (client, pid, lease_ttl, heartbeat_ttl, dispatch lease, attempt, lease_version)
    starts = []                     # (client, pid, lease_ttl, start lease)

    retries = []                    # the details of UNSCHEDULABLE outcomes, tried again

    def app_client(n):
        with env.pooled(APP, name=f"app {n}") as c:
            for _ in range(a.rounds):
                rid = None
                for _ in range(100):
                    pid, lease, hb = c.execute("SELECT pg_backend_pid(), current_setting('sched.lease_ttl')::interval,"
                                               " current_setting('sched.heartbeat_ttl')::interval").fetchone()
                    if rid is None:
                        rid = c.execute("SELECT sched.submit(gen_random_uuid(), gen_random_uuid(), 'lease', '1.0')"
                                        ).fetchone()[0]
                    outcome, attempt_id, lv, detail = c.execute(
                        "SELECT outcome, attempt_id, lease_version, detail FROM sched.dispatch_attempt(%s)",
                        (rid,)).fetchone()
                    length = None
                    if outcome == "DISPATCHED":
                        length = c.execute("SELECT lease_expires_at - dispatched_at FROM sched.attempt"
                                           " WHERE attempt_id = %s", (attempt_id,)).fetchone()[0]
                    c.commit()
                    with lock:
                        seen.append((n, pid, lease, hb, outcome, length, attempt_id, lv))
                    if outcome != "UNSCHEDULABLE" or "heartbeat_expired" in (detail or ""):
                        break
                    # the one worker's pair was held by a concurrent dispatch (dispatch never
                    # waits for a pair): the request waits for capacity; try it again
                    with lock:
                        retries.append(detail)
                    time.sleep(0.01)

    run_threads([(f"app-{i}", lambda i=i: app_client(i)) for i in range(a.clients)])
    info(f"settings: {len(retries)} dispatches found the worker held by a concurrent one and were tried again"
         + (f" (first: {retries[0]})" if retries else ""))
    dispatched = [s for s in seen if s[4] == "DISPATCHED"]
    check(f"settings: {a.clients} {APP} clients dispatched all {a.clients * a.rounds} requests, none refused "
          "otherwise than for a pair held by a concurrent dispatch (the role's heartbeat_ttl admits the worker)",
          (len(dispatched), len(seen) - len(dispatched) - len(retries)), (a.clients * a.rounds, 0))
    check(f"settings: every {APP} transaction saw the role's lease_ttl and heartbeat_ttl",
          sorted({(str(s[2]), str(s[3])) for s in seen}), [(str(app_lease), str(app_hb))])
    check(f"settings: every dispatched lease is the role's lease_ttl, not the default {default_lease}",
          (sorted({str(s[5]) for s in dispatched}), app_lease != default_lease), ([str(app_lease)], True))
    info(f"settings: {APP} transactions ran on backends {sorted({s[1] for s in seen})}")

    with env.direct() as d:
        reg = d.execute("SELECT worker_id FROM sched.worker WHERE capability = 'lease'").fetchone()
    attempts = [(s[6], s[7]) for s in dispatched]

    def worker_client(n):
        with env.pooled(WORKER, name=f"worker {n}") as c:
            for attempt_id, lv in attempts[n::a.clients]:
                pid, lease, length = c.execute(
                    "SELECT pg_backend_pid(), current_setting('sched.lease_ttl')::interval,"
                    " sched.start_attempt(%s, %s) - now()", (attempt_id, lv)).fetchone()
                c.commit()
                with lock:
                    starts.append((n, pid, lease, length))

    run_threads([(f"worker-{i}", lambda i=i: worker_client(i)) for i in range(a.clients)])
    check(f"settings: every start_attempt by {a.clients} {WORKER} clients ran the lease for the workers' "
          f"role's lease_ttl ({len(starts)} starts)",
          sorted({(str(s[2]), str(s[3])) for s in starts}), [(str(worker_lease), str(worker_lease))])
    assert reg is not None

    # SET LOCAL in one client's transaction does not reach the next client's, on one
    # server connection (the pool of database alias --db-one has a single one)
    notify_check(env)


def notify_check(env):
    a = env.args
    with env.direct() as d:
        worker_id = d.execute("SELECT worker_id FROM sched.worker WHERE capability = 'notify'").fetchone()[0]
    channel = f"sched_worker_{worker_id}"
    listener = env.direct()
    got = []
    listener.add_notify_handler(got.append)         # called while it runs a query
    listener.execute(f'LISTEN "{channel}"')
    try:
        one = [env.pooled(APP, dbname=a.db_one, name=f"one {n}") for n in range(a.clients)]
        records = []                                # (client, pid, notify_workers, outcome)
        try:
            def dispatch(c, n, local):
                if local:
                    c.execute("SET LOCAL sched.notify_workers = on")
                pid, setting = c.execute("SELECT pg_backend_pid(), current_setting('sched.notify_workers')").fetchone()
                rid = c.execute("SELECT sched.submit(gen_random_uuid(), gen_random_uuid(), 'notify', '1.0')").fetchone()[0]
                outcome = c.execute("SELECT outcome FROM sched.dispatch_attempt(%s)", (rid,)).fetchone()[0]
                c.commit()
                records.append((n, pid, setting, outcome))

            # client 0 notifies in its transaction, then every other client, in turn, on
            # the same server connection; then client 0 again without SET LOCAL
            dispatch(one[0], 0, True)
            for n in range(1, a.clients):
                dispatch(one[n], n, False)
            dispatch(one[0], 0, False)
            # a session SET (what the issue saw leak), then what the next client sees
            one[1].execute("SET sched.notify_workers = on")
            one[1].commit()
            leaked = one[2].execute("SHOW sched.notify_workers").fetchone()[0]
            one[2].commit()
            one[1].execute("RESET sched.notify_workers")
            one[1].commit()
        finally:
            for c in one:
                c.close()
        # the sentinel: notifications arrive in commit order, so once it is here every
        # dispatch's NOTIFY (if any) has arrived too
        with env.direct() as d:
            d.execute("SELECT pg_notify(%s, 'sentinel')", (channel,))
        deadline = time.monotonic() + HANG
        while not any(n.payload == "sentinel" for n in got):
            if time.monotonic() > deadline:
                raise RuntimeError("the sentinel notification never arrived")
            listener.execute("SELECT 1")
            time.sleep(0.02)
        got = [n for n in got if n.payload != "sentinel"]
        pids = {r[1] for r in records}
        check(f"settings: the {len(records)} dispatching transactions through the {a.db_one} pool "
              "shared one server backend", len(pids), 1)
        check("settings: SET LOCAL sched.notify_workers = on held in its transaction only "
              "(the setting each transaction saw)", [r[2] for r in records], ["on"] + ["off"] * (len(records) - 1))
        check("settings: dispatches placed", sorted({r[3] for r in records}), ["DISPATCHED"])
        check("settings: one NOTIFY, from the transaction with SET LOCAL (empty payload)",
              [(n.channel, n.payload) for n in got], [(channel, "")])
        info(f"settings: a session SET sched.notify_workers = on by one client was seen by the next "
             f"client on that server connection as '{leaked}' (why pg_sched needs no session setting)")
    finally:
        listener.close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("command", choices=["mirror", "mirror-fresh", "wait", "prepared", "prepared-demo", "settings"])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--pg-port", type=int, required=True)
    p.add_argument("--bouncer-port", type=int, required=True)
    p.add_argument("--db", default="sched_pooler")
    p.add_argument("--db-one", default="sched_pooler_one", help="a pgbouncer name of --db with pool_size = 1")
    p.add_argument("--pool-size", type=int, default=2)
    p.add_argument("--seconds", type=float, default=25)
    p.add_argument("--admin-clients", type=int, default=8)
    p.add_argument("--owner-clients", type=int, default=3)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--iterations", type=int, default=40)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--app-lease", type=lambda s: datetime.timedelta(seconds=float(s)))
    p.add_argument("--app-heartbeat", type=lambda s: datetime.timedelta(seconds=float(s)))
    p.add_argument("--worker-lease", type=lambda s: datetime.timedelta(seconds=float(s)))
    args = p.parse_args()
    env = Env(args)
    if args.command == "mirror":
        MirrorRun(env).run()
    elif args.command == "mirror-fresh":
        mirror_fresh_check(env)
    elif args.command == "wait":
        wait_check(env)
    elif args.command == "prepared":
        prepared_check(env)
    elif args.command == "prepared-demo":
        prepared_demo(env)
    else:
        settings_check(env)


if __name__ == "__main__":
    main()
