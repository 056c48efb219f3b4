#!/usr/bin/env python3
"""A pg_sched worker, written against the SQL worker protocol only.

    python3 worker.py --node node-a --capability demo --versions 1.0 --slots 4
    python3 worker.py --node node-a --pooler      # through pgbouncer, pool_mode = transaction

The connection comes from the usual PG* environment variables (PGHOST, PGPORT,
PGUSER, PGDATABASE) or --dsn; its role needs sched_worker, and sched_admin too to
declare its node (--cpu, --memory-mb, --gpus or --labels).  What the worker does:

  1. [upsert_node +] register_worker -> (worker_id, generation): this session is READY;
  2. wait_commands: returns at once when there are commands (START: run an attempt,
     CANCEL: stop one), otherwise sleeps in the server until one commits or the timeout;
  3. start_attempt, the work, finish_attempt -- in one of `slots` threads, each with
     its own connection (with --start-on-delivery, wait_commands starts the attempts
     it returns, start => true, and the thread goes straight to the work);
  4. between waits: heartbeat every heartbeat_ttl / 3, and renew the lease of every
     attempt it holds every lease_ttl / 3 (waiting and renewing are not heartbeats);
  5. the main connection lost (server restart, network, pg_terminate_backend): connect
     again with a backoff, register again (a new generation) and carry on with the
     attempts it holds; one whose lease was lost meanwhile is dropped unreported.

Nothing here depends on session state (no SET, LISTEN, temporary table or advisory
lock), so it works through a pooler in transaction mode; --pooler only turns off
psycopg's prepared statements, which such a pooler cannot keep per client.

The "work" is driven by the payload given to sched.submit:
    {"task": 17, "sleep": 0.2}   sleep 0.2 s, then SUCCEEDED with {"task": 17, ...}
    {"fail": true}               FAILED (pg_sched retries it while attempts remain)

SIGTERM or Ctrl-C: stop taking work (heartbeat DRAINING), finish what was started,
then heartbeat STOPPED and exit.  A second one abandons the running attempts: they are
reported FAILED, so pg_sched retries them elsewhere (while attempts remain).
"""

import argparse
import datetime
import json
import logging
import queue
import signal
import threading
import time

import psycopg
from psycopg.errors import ObjectNotInPrerequisiteState, QueryCanceled
from psycopg.rows import namedtuple_row
from psycopg.types.json import Jsonb

log = logging.getLogger("worker")

RECONNECT_MAX = 5.0     # seconds: the longest pause between two attempts to reconnect


def first_line(e):
    return str(e).strip().split("\n")[0]


class Attempt:
    """An attempt this worker holds, from its START command until it is finished or lost."""

    def __init__(self, cmd):
        self.attempt_id = cmd.attempt_id
        self.lease_version = cmd.lease_version
        self.attempt_number = cmd.attempt_number
        self.payload = cmd.payload or {}
        self.stop = threading.Event()   # set on CANCEL, on abandon, or when the lease is lost
        self.lost = False               # the lease is gone: report nothing any more
        self.abandoned = False          # the worker is shutting down: have it retried
        self.finishing = False          # finish_attempt is under way
        self.started = cmd.lease_expires_at is not None     # by wait_commands(start => true)


class Worker:
    def __init__(self, args):
        self.args = args
        self.conn = None                # the main thread's: register, wait, heartbeat, renew
        self.held = {}                  # attempt_id -> Attempt
        self.held_lock = threading.Lock()
        self.todo = queue.Queue()       # START commands for the slot threads
        self.stopping = 0               # SIGTERM / SIGINT received (how many)
        self.waiting = False            # the main connection is in wait_commands

    def connect(self, name):
        """A connection in autocommit: every sched.* call is its own transaction."""
        return psycopg.connect(
            self.args.dsn, autocommit=True, row_factory=namedtuple_row,
            # a pooler in transaction mode hands each transaction to any server
            # connection: a statement prepared on one is unknown (or taken) on another
            prepare_threshold=None if self.args.pooler else 5,
            # who is who in pg_stat_activity (unless PGAPPNAME or --dsn says otherwise)
            fallback_application_name=f"pg_sched worker {self.args.node} {name}",
            # notice a dead peer within about a minute, also in the middle of a wait
            keepalives_idle=30, keepalives_interval=10, keepalives_count=3)

    # -- the session (main thread) ---------------------------------------------------------

    def register(self):
        """Connects the main connection and registers: a new generation."""
        a = self.args
        self.conn = self.connect("main")
        if any(v is not None for v in (a.labels, a.cpu, a.memory_mb, a.gpus)):
            # the worker declares its node: that is the fleet's (sched_admin)
            self.conn.execute(
                "SELECT FROM sched.upsert_node(%s, labels => %s, cpu_millis => %s,"
                "                              memory_mb => %s, gpus => %s)",
                (a.node, Jsonb(a.labels) if a.labels is not None else None, a.cpu, a.memory_mb, a.gpus))
        # Attempts of an earlier generation that this process still holds stay its own:
        # start, renew and finish take the lease_version, not the generation.  Commands of
        # the earlier generation that were never delivered are not delivered to this one:
        # those attempts expire and are retried.
        reg = self.conn.execute(
            "SELECT worker_id, generation FROM sched.register_worker(%s, %s, %s, slots => %s)",
            (a.node, a.capability, a.versions, a.slots)).fetchone()
        self.worker_id, self.generation = reg.worker_id, reg.generation
        # the settings of the database or role, as the server gives them to every session
        ttl = self.conn.execute(
            "SELECT extract(epoch FROM current_setting('sched.heartbeat_ttl')::interval)::float8 AS heartbeat,"
            "       extract(epoch FROM current_setting('sched.lease_ttl')::interval)::float8 AS lease").fetchone()
        self.heartbeat_every, self.renew_every = ttl.heartbeat / 3, ttl.lease / 3
        now = time.monotonic()
        self.next_heartbeat = now + self.heartbeat_every    # registering was a heartbeat
        self.next_renew = now                               # renewals may have been missed
        log.info("registered worker %s generation %s on node %s (%s slots)",
                 self.worker_id, self.generation, a.node, a.slots)

    def reconnect(self, error):
        log.warning("main connection lost (%s): connecting again", first_line(error))
        self.conn.close()
        delay = 0.1
        while True:
            if self.stopping > 1:
                raise SystemExit("abandoned while the database was unreachable")
            try:
                self.register()
                return
            except psycopg.OperationalError as e:
                if self.conn is not None:
                    self.conn.close()
                log.warning("cannot register again (%s): retrying in %.1f s", first_line(e), delay)
                time.sleep(delay)
                delay = min(delay * 2, RECONNECT_MAX)

    def heartbeat(self, state):
        self.conn.execute("SELECT FROM sched.heartbeat(%s, %s, runtime_state => %s)",
                          (self.worker_id, self.generation, state))

    def renew_leases(self):
        with self.held_lock:
            attempts = list(self.held.values())
        for a in attempts:
            try:
                self.conn.execute("SELECT sched.renew_lease(%s, %s)", (a.attempt_id, a.lease_version))
            except ObjectNotInPrerequisiteState:
                if not a.finishing:     # (a finish racing with us is not a loss)
                    log.warning("attempt %s: lease lost, dropping it", a.attempt_id)
                    a.lost = True
                    a.stop.set()

    def wait_commands(self, timeout):
        """The commands for this session; sleeps in the server up to `timeout` s for one."""
        self.waiting = True             # from here on, a signal cancels the wait
        try:
            return self.conn.execute(
                "SELECT kind, attempt_id, lease_version, attempt_number, payload, lease_expires_at"
                "  FROM sched.wait_commands(%s, %s, max => %s, timeout => %s, start => %s)",
                (self.worker_id, self.generation, self.args.slots,
                 datetime.timedelta(seconds=max(timeout, 0)),
                 self.args.start_on_delivery)).fetchall()
        finally:
            self.waiting = False

    def on_signal(self, signum, frame):
        self.stopping += 1
        if self.waiting:
            self.conn.cancel()          # end the wait now; the loop sees `stopping`

    def take(self, cmds):
        for cmd in cmds:
            if cmd.kind == "START":
                a = Attempt(cmd)
                if self.stopping > 1:   # dispatched before we drained, but we are leaving
                    a.abandoned = True
                    a.stop.set()
                with self.held_lock:
                    self.held[a.attempt_id] = a
                self.todo.put(a)
            elif cmd.kind == "CANCEL":
                with self.held_lock:
                    a = self.held.get(cmd.attempt_id)
                if a:
                    log.info("attempt %s: cancel requested", a.attempt_id)
                    a.stop.set()

    def run(self):
        slots = [threading.Thread(target=self.slot_loop, args=(i,), daemon=True)
                 for i in range(1, self.args.slots + 1)]
        for t in slots:
            t.start()
        draining = abandoned = False
        while True:
            try:
                if self.stopping and not draining:
                    # No new dispatch once DRAINING is committed; what was dispatched
                    # before is still delivered by the waits below, and run to its end.
                    log.info("stopping: draining %d attempts", len(self.held))
                    self.heartbeat("DRAINING")
                    draining = True
                if self.stopping > 1 and not abandoned:
                    with self.held_lock:
                        log.info("abandoning %d attempts", len(self.held))
                        for a in self.held.values():
                            a.abandoned = True
                            a.stop.set()
                    abandoned = True
                now = time.monotonic()
                if now >= self.next_heartbeat:
                    self.heartbeat("DRAINING" if draining else "READY")
                    self.next_heartbeat = now + self.heartbeat_every
                if now >= self.next_renew:
                    self.renew_leases()
                    self.next_renew = now + self.renew_every
                with self.held_lock:
                    idle = not self.held
                if not draining:
                    timeout = min(self.args.wait, self.next_heartbeat - now, self.next_renew - now)
                else:           # nothing wakes us when the last attempt ends: look often
                    timeout = 0 if idle else 0.2
                cmds = self.wait_commands(timeout)
                if draining and idle and not cmds:
                    break       # DRAINING is committed and nothing more was dispatched
                self.take(cmds)
            except ObjectNotInPrerequisiteState as e:
                # 55000 from heartbeat or wait_commands: the generation is stale (another
                # process registered this worker, same node and capability: it owns the
                # worker now), or wait_commands cannot work here (pg_sched not preloaded).
                raise SystemExit(f"worker session ended: {e.diag.message_primary}")
            except QueryCanceled:
                continue        # our signal handler (or an operator) cancelled the wait
            except psycopg.OperationalError as e:
                if self.conn.closed:
                    self.reconnect(e)
                    if draining:
                        self.next_heartbeat = 0     # registering made it READY again
                else:   # the connection is fine: a transient error (deadlock, lock timeout)
                    log.warning("%s: trying again", first_line(e))
                    time.sleep(1)
        for _ in slots:
            self.todo.put(None)
        for t in slots:
            t.join()
        try:
            self.heartbeat("STOPPED")
        except psycopg.OperationalError as e:
            log.warning("could not report STOPPED: %s", first_line(e))
        log.info("stopped")

    # -- attempts (slot threads) -----------------------------------------------------------

    def slot_loop(self, number):
        conn = None
        while (a := self.todo.get()) is not None:
            try:
                conn = self.run_attempt(conn, number, a)
            except Exception:
                log.exception("attempt %s: unexpected error", a.attempt_id)
            finally:
                with self.held_lock:
                    self.held.pop(a.attempt_id, None)
        if conn is not None:
            conn.close()

    def call(self, conn, number, a, sql, params):
        """One call about attempt `a` on the slot's connection, repeated (connecting again
        if need be) until it succeeds: start_attempt and finish_attempt may be repeated.
        Returns (connection, True), or (connection, False) when the lease is lost."""
        delay = 0.1
        while True:
            try:
                if conn is None or conn.closed:
                    conn = self.connect(f"slot {number}")
                conn.execute(sql, params)
                return conn, True
            except ObjectNotInPrerequisiteState as e:
                # a stale lease_version or an attempt no longer live: it was lost (lease
                # expired and reaped).  Another attempt may own the step: stop, don't retry.
                log.warning("attempt %s: lost (%s)", a.attempt_id, e.diag.message_primary)
                return conn, False
            except psycopg.OperationalError as e:
                # the connection lost (connected again at the next try), or a transient
                # error (deadlock, lock timeout): the call is repeated
                if a.lost or self.stopping > 1:
                    return conn, False
                log.warning("slot %d: %s: retrying in %.1f s", number, first_line(e), delay)
                time.sleep(delay)
                delay = min(delay * 2, RECONNECT_MAX)

    def run_attempt(self, conn, number, a):
        if not a.stop.is_set():
            if not a.started:
                conn, live = self.call(conn, number, a, "SELECT sched.start_attempt(%s, %s)",
                                       (a.attempt_id, a.lease_version))
                if not live:
                    return conn
            outcome, detail = self.work(a)
        else:
            outcome, detail = "CANCELLED", {}   # cancelled before it started
        if a.lost:
            return conn
        if a.abandoned:
            outcome, detail = "FAILED", {"error": "the worker shut down before the task ended"}
        elif a.stop.is_set() and outcome == "SUCCEEDED":
            outcome = "CANCELLED"
        a.finishing = True
        detail.update(task=a.payload.get("task"), node=self.args.node, worker=str(self.worker_id),
                      attempt_number=a.attempt_number)
        conn, live = self.call(conn, number, a, "SELECT sched.finish_attempt(%s, %s, %s, %s)",
                               (a.attempt_id, a.lease_version, outcome, Jsonb(detail)))
        if live:
            log.debug("attempt %s (task %s, try %s): %s", a.attempt_id, a.payload.get("task"),
                      a.attempt_number, outcome)
        return conn

    def work(self, a):
        """The task itself. Returns (outcome, detail). Replace this with real work."""
        try:
            if a.stop.wait(float(a.payload.get("sleep", 0))):
                return "CANCELLED", {}
            if a.payload.get("fail"):
                return "FAILED", {"error": "the payload asked to fail"}
            return "SUCCEEDED", {}
        except Exception as e:          # a bad payload is the task's failure, not ours
            return "FAILED", {"error": repr(e)}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dsn", default="", help="libpq conninfo (default: PG* environment)")
    p.add_argument("--node", required=True,
                   help="node id (created or updated when a capacity or --labels is given)")
    p.add_argument("--capability", default="demo")
    p.add_argument("--versions", default="1.0", help="comma-separated capability versions")
    p.add_argument("--slots", type=int, default=4, help="attempts run concurrently")
    p.add_argument("--cpu", type=int, default=None, help="node cpu_millis")
    p.add_argument("--memory-mb", type=int, default=None, help="node memory_mb")
    p.add_argument("--gpus", type=int, default=None, help="node gpus")
    p.add_argument("--labels", type=json.loads, default=None, help='node labels, e.g. \'{"zone":"a"}\'')
    p.add_argument("--wait", type=float, default=30.0,
                   help="longest wait_commands, seconds (heartbeats and renewals may cut it short)")
    p.add_argument("--pooler", action="store_true",
                   help="connected through a pooler in transaction mode (pgbouncer): no prepared statements")
    p.add_argument("--start-on-delivery", action="store_true",
                   help="start each attempt as wait_commands delivers it (start => true)")
    p.add_argument("-v", "--verbose", action="store_true", help="log every attempt")
    args = p.parse_args()
    args.versions = args.versions.split(",")
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format=f"%(asctime)s {args.node} %(levelname)s %(message)s")

    w = Worker(args)
    w.register()
    signal.signal(signal.SIGTERM, w.on_signal)
    signal.signal(signal.SIGINT, w.on_signal)
    w.run()


if __name__ == "__main__":
    main()
