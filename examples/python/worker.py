#!/usr/bin/env python3
"""A pg_sched worker, written against the SQL worker protocol only.

    python3 worker.py --node node-a --capability demo --versions 1.0 --slots 4

The connection comes from the usual PG* environment variables (PGHOST, PGPORT,
PGUSER, PGDATABASE) or --dsn; its role needs sched_worker, and sched_admin too to
declare its node (--cpu, --memory-mb, --gpus or --labels).  What the worker does:

  1. [upsert_node +] register_worker: the node exists, this worker session is READY;
  2. LISTEN "sched_worker_<worker_id>": dispatch wakes us up;
  3. poll_commands: START (run an attempt) and CANCEL (stop one);
  4. start_attempt, do the work, finish_attempt -- in one of `slots` threads;
  5. all the while: heartbeat every heartbeat_ttl / 3, and renew the lease of every
     attempt it holds every lease_ttl / 3 (polling and renewing are not heartbeats).

The "work" is driven by the payload given to sched.submit:
    {"task": 17, "sleep": 0.2}   sleep 0.2 s, then SUCCEEDED with {"task": 17, ...}
    {"fail": true}               FAILED (pg_sched retries it while attempts remain)

SIGTERM or Ctrl-C: stop taking work (heartbeat DRAINING), finish what was started,
then heartbeat STOPPED and exit.  A second one abandons the running attempts: they are
reported FAILED, so pg_sched retries them elsewhere (while attempts remain).
"""

import argparse
import inspect
import json
import logging
import queue
import select
import signal
import threading
import time

import psycopg
from psycopg.rows import namedtuple_row
from psycopg.types.json import Jsonb

log = logging.getLogger("worker")

# Notifications can be missed (e.g. sent before we LISTEN): never wait longer than this
# without polling anyway.
MAX_WAIT = 1.0


def connect(dsn):
    """One connection per thread, in autocommit: every sched.* call is its own transaction."""
    return psycopg.connect(dsn, autocommit=True, row_factory=namedtuple_row)


def setting_seconds(conn, name):
    """A pg_sched duration setting (e.g. '60s', '5min') in seconds, as this session sees it."""
    return conn.execute("SELECT extract(epoch FROM current_setting(%s)::interval)::float8 AS s",
                        (name,)).fetchone().s


class Attempt:
    """An attempt this worker holds, from its START command until it is finished or lost."""

    def __init__(self, cmd):
        self.attempt_id = cmd.attempt_id
        self.lease_version = cmd.lease_version
        self.attempt_number = cmd.attempt_number
        self.step_id = cmd.step_id
        self.payload = cmd.payload or {}
        self.stop = threading.Event()   # set on CANCEL, on abandon, or when the lease is lost
        self.lost = False               # the lease is gone: report nothing any more
        self.abandoned = False          # the worker is shutting down: have it retried
        self.finishing = False


class Worker:
    def __init__(self, args):
        self.args = args
        self.conn = connect(args.dsn)   # main thread only: LISTEN, poll, heartbeat, renew
        # one connection per slot thread: psycopg connections are not for concurrent use
        self.slot_conns = [connect(args.dsn) for _ in range(args.slots)]
        self.held = {}                  # attempt_id -> Attempt
        self.held_lock = threading.Lock()
        self.todo = queue.Queue()       # START commands for the slot threads
        # Both flags are set and read by the main thread only (signal handlers and
        # notify handlers run there), so plain attributes do.
        self.stopping = 0               # SIGTERM / SIGINT received (how many)
        self.woken = False              # a NOTIFY arrived (possibly during another query)
        self.conn.add_notify_handler(self.on_notify)

    def on_notify(self, notify):
        self.woken = True

    # -- session -----------------------------------------------------------------------

    def register(self):
        a = self.args
        if any(v is not None for v in (a.labels, a.cpu, a.memory_mb, a.gpus)):
            # the worker declares its node: that is the fleet's (sched_admin)
            self.conn.execute(
                "SELECT FROM sched.upsert_node(%s, labels => %s, cpu_millis => %s,"
                "                              memory_mb => %s, gpus => %s)",
                (a.node, Jsonb(a.labels) if a.labels is not None else None, a.cpu, a.memory_mb, a.gpus))
        reg = self.conn.execute(
            "SELECT worker_id, generation FROM sched.register_worker(%s, %s, %s, slots => %s)",
            (a.node, a.capability, a.versions, a.slots)).fetchone()
        self.worker_id, self.generation = reg.worker_id, reg.generation
        # The channel name contains dashes: it must be quoted.
        self.conn.execute(f'LISTEN "sched_worker_{self.worker_id}"')
        self.heartbeat_every = setting_seconds(self.conn, "sched.heartbeat_ttl") / 3
        self.renew_every = setting_seconds(self.conn, "sched.lease_ttl") / 3
        log.info("registered worker %s generation %s on node %s (%s slots)",
                 self.worker_id, self.generation, a.node, a.slots)

    def heartbeat(self, state):
        # A stale generation (55000) means another session registered this worker: the
        # exception ends the program, which is what such a zombie should do.
        self.conn.execute("SELECT FROM sched.heartbeat(%s, %s, runtime_state => %s)",
                          (self.worker_id, self.generation, state))

    def renew_leases(self):
        with self.held_lock:
            attempts = list(self.held.values())
        for a in attempts:
            try:
                self.conn.execute("SELECT sched.renew_lease(%s, %s)", (a.attempt_id, a.lease_version))
            except psycopg.errors.ObjectNotInPrerequisiteState:
                if not a.finishing:     # (a finish racing with us is not a loss)
                    log.warning("attempt %s: lease lost, abandoning it", a.attempt_id)
                    a.lost = True
                    a.stop.set()

    def poll(self):
        """Takes the commands waiting for this session; returns how many there were."""
        cmds = self.conn.execute(
            "SELECT kind, attempt_id, lease_version, attempt_number, step_id, payload"
            "  FROM sched.poll_commands(%s, %s, max => %s)",
            (self.worker_id, self.generation, self.args.slots)).fetchall()
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
        return len(cmds)

    def wait_for_notification(self, timeout):
        if self.woken or timeout <= 0:
            return
        if NOTIFIES_HAS_TIMEOUT:        # psycopg >= 3.2
            for _ in self.conn.notifies(timeout=timeout, stop_after=1):
                pass
        else:                           # psycopg 3.1: wait for the socket to be readable;
            select.select([self.conn.fileno()], [], [], timeout)   # the next query reads it

    def run(self):
        slots = [threading.Thread(target=self.slot_loop, args=(conn,), daemon=True)
                 for conn in self.slot_conns]
        for t in slots:
            t.start()
        next_heartbeat = next_renew = time.monotonic()
        draining = abandoned = False
        while True:
            if self.stopping and not draining:
                # No new dispatch once DRAINING is committed; what was dispatched before
                # is still delivered by the polls below, and run to its end.
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
            if now >= next_heartbeat:
                self.heartbeat("DRAINING" if draining else "READY")
                next_heartbeat = now + self.heartbeat_every
            if now >= next_renew:
                self.renew_leases()
                next_renew = now + self.renew_every
            self.woken = False
            got = self.poll()
            if got == self.args.slots:
                continue                # there may be more
            if draining and not got:
                with self.held_lock:
                    if not self.held:
                        break
            now = time.monotonic()
            self.wait_for_notification(min(MAX_WAIT, next_heartbeat - now, next_renew - now))
        for _ in slots:
            self.todo.put(None)
        for t in slots:
            t.join()
        self.heartbeat("STOPPED")
        log.info("stopped")

    # -- attempts (slot threads) -----------------------------------------------------------

    def slot_loop(self, conn):
        while (a := self.todo.get()) is not None:
            try:
                self.run_attempt(conn, a)
            except psycopg.errors.ObjectNotInPrerequisiteState as e:
                # stale lease_version or the attempt is no longer live: it was lost (lease
                # expired and reaped).  Another attempt may own the step: stop, don't retry.
                log.warning("attempt %s: lost (%s)", a.attempt_id, e.diag.message_primary)
            except Exception:
                log.exception("attempt %s: unexpected error", a.attempt_id)
            finally:
                with self.held_lock:
                    self.held.pop(a.attempt_id, None)
        conn.close()

    def run_attempt(self, conn, a):
        if not a.stop.is_set():
            conn.execute("SELECT sched.start_attempt(%s, %s)", (a.attempt_id, a.lease_version))
            outcome, detail = self.work(a)
        else:
            outcome, detail = "CANCELLED", {}   # cancelled before it started
        if a.lost:
            return
        if a.abandoned:
            outcome, detail = "FAILED", {"error": "the worker shut down before the task ended"}
        elif a.stop.is_set() and outcome == "SUCCEEDED":
            outcome = "CANCELLED"
        a.finishing = True
        detail.update(task=a.payload.get("task"), node=self.args.node, worker=str(self.worker_id),
                      attempt_number=a.attempt_number)
        conn.execute("SELECT sched.finish_attempt(%s, %s, %s, %s)",
                     (a.attempt_id, a.lease_version, outcome, Jsonb(detail)))
        log.debug("attempt %s (task %s, try %s): %s", a.attempt_id, a.payload.get("task"),
                  a.attempt_number, outcome)

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


NOTIFIES_HAS_TIMEOUT = "timeout" in inspect.signature(psycopg.Connection.notifies).parameters


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
    p.add_argument("-v", "--verbose", action="store_true", help="log every attempt")
    args = p.parse_args()
    args.versions = args.versions.split(",")
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format=f"%(asctime)s {args.node} %(levelname)s %(message)s")

    w = Worker(args)
    w.register()

    def on_signal(signum, frame):
        w.stopping += 1
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    w.run()


if __name__ == "__main__":
    main()
