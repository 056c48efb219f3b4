#!/usr/bin/env python3
"""soak.py — the clients of the soak test (test/soak/run.sh starts the cluster and runs it).

Connects with the PG* environment (PGHOST, PGPORT, PGDATABASE; PGUSER a superuser) to a
database with pg_sched installed, preloaded and reaped by its maintenance worker, then:

  setup   login roles soak_app (sched_scheduler), soak_worker (sched_worker) and soak_ops
          (sched_admin); 12 nodes (3 zones, 2 tiers, cpu 4/8/16 cores, 2 GPUs on three of
          them); on every node a worker of capability "render" (versions 1.0 and 2.0, or
          1.0 only) and one of "encode" (h264): 24 workers, 60 slots; 4 tenants with
          weights 1..3.
  load    SOAK_CLIENTS client threads, each with its own connection, for SOAK_SECONDS:
          - submitters (soak_app): executions of 1-4 steps for the 4 tenants, mixed
            shapes (versions, required and preferred labels, minimums, cpu/memory/GPU
            reservations, a few pinned to a node), most with a payload; some submits
            repeated (must return the same request_id), some steps added to older
            executions; the backlog of open requests is capped (SOAK_BACKLOG);
          - dispatchers (soak_app), by turns: dispatch_next (batches of 1-16, sometimes
            for one capability or tenant); claim_requests + dispatch_attempt with the
            claim (some claims left to expire); dispatch_attempt of recent request ids;
          - worker clients (soak_worker), each running several worker sessions on one
            connection, as README "Writing a worker" says: register_worker, LISTEN,
            heartbeat every heartbeat_ttl / 3, renew_lease every lease_ttl / 3,
            poll_commands and start_attempt (every other session: poll_commands with
            start => true, which starts what it delivers), finish_attempt SUCCEEDED (85 %) or FAILED after
            0.05-7 s of "work" (the payload's work_ms when it has one; the payload must
            arrive intact), CANCELLED on a CANCEL command; some finishes repeated (must
            return the same status); from time to time a session "dies": it stops
            heartbeating, renewing and polling for lease_ttl + maintenance_interval +
            1-3 s, then registers again (a new generation) and, as the zombie of its old
            session, calls heartbeat and poll_commands with the old generation and
            renew_lease / finish_attempt on an attempt it held (each must be refused with
            55000); each worker client has a first death in the first half of the load,
            then one every SOAK_DEATH_MEAN seconds on average;
          - an operator (soak_ops): drain_node then upsert_node(management_status =>
            'ACTIVE') some seconds later, cordon_worker / uncordon_worker,
            cancel_execution, complete_execution, set_tenant_weight.
          No client calls reap_expired: only the maintenance worker reaps.  In the last
          SOAK_DRAIN seconds nothing new is submitted, the operator restores the fleet and
          no worker dies; the clients run on until nothing is pending or live (at most
          SOAK_DRAIN_TIMEOUT seconds more).  During the run test/pgbench/invariants.sql
          is run every SOAK_AUDIT_EVERY seconds (REPEATABLE READ, one snapshot).
  checks  (each named; any that fails fails the run; --list-checks prints them)
          no_deadlocks          no client got 40P01 and the server log has no 40P01 (at
                                any level: the reaper logs one it passed over as a WARNING)
          no_unexpected_errors  every error a client got is an expected refusal (below),
                                and no zombie call was accepted
          invariants            invariants.sql held at every audit and at the end
          steps_ended_once      every submitted step ended exactly once: none pending or
                                live, at most one SUCCEEDED attempt and, if one, it is the
                                step's last; a step without one is of a FAILED or
                                CANCELLED execution; the workers' accepted SUCCEEDED
                                reports are exactly the SUCCEEDED attempts
          executions_complete   complete_execution succeeds on every execution still open
          reaped_in_time        every attempt a dying worker held ended LOST, with the
                                lease it last renewed, at most lease_ttl +
                                maintenance_interval (+ SOAK_REAP_SLACK, default 0) after
                                that renewal; so did every LOST attempt (lease_expires_at -
                                lease_ttl is its last renewal or its dispatch); and some
                                worker did die
          payloads_intact       every START command carried the payload submitted
          maintenance_clean     the server log has no WARNING, ERROR, FATAL or PANIC of a
                                background process (the maintenance worker logs a failed
                                tick, or an attempt it could not reap, as a WARNING; a
                                deadlock it met counts under no_deadlocks too), and its
                                worker ran throughout with one pid
        Expected refusals: 55000 from start_attempt / renew_lease / finish_attempt (the
        lease was lost: counted apart when the worker was alive), from the zombie's calls,
        from complete_execution (work left, or closed) and cancel_execution (closed), and
        from submit into a closed execution; every other SQLSTATE (42704 included: no id
        here is ever unknown) is unexpected.
  report  clients, durations, calls and latency per function, dispatch outcomes and
          dispatches/s, errors by SQLSTATE, deaths and the reap delay distribution
          (min/median/p95/max), the server log's errors; printed, and written as markdown
          to SOAK_REPORT when set.

env: SOAK_CLIENTS (16), SOAK_SECONDS (120), SOAK_DRAIN (10), SOAK_DRAIN_TIMEOUT (90),
     SOAK_SEED (12), SOAK_BACKLOG (120), SOAK_DEATH_MEAN (20: seconds between deaths, per
     worker client), SOAK_AUDIT_EVERY (10), SOAK_LEASE_TTL (3), SOAK_HEARTBEAT_TTL (3),
     SOAK_MAINTENANCE_INTERVAL (1), SOAK_REAP_SLACK (0), SOAK_REPORT, SOAK_SERVER_LOG,
     SOAK_INVARIANTS, SOAK_WORK (where failed_checks is written),
     SOAK_BREAK (comma list of check names, or "all": break those checks on purpose, to
     show they can fail; see break_* below).
Fixed seeds: every client draws from its own random.Random(f"{SOAK_SEED}:{name}"), so a
run makes the same decisions in the same order (timing, and so interleaving, varies).
"""

import collections
import json
import os
import random
import re
import select
import statistics
import subprocess
import sys
import threading
import time
import traceback
import uuid

import psycopg
from psycopg.types.json import Jsonb

CHECKS = ["no_deadlocks", "no_unexpected_errors", "invariants", "steps_ended_once",
          "executions_complete", "reaped_in_time", "payloads_intact", "maintenance_clean"]

if "--list-checks" in sys.argv:
    print("\n".join(CHECKS))
    sys.exit(0)


def env_num(name, default, kind=float):
    v = os.environ.get(name)
    return kind(v) if v not in (None, "") else default


CLIENTS = env_num("SOAK_CLIENTS", 16, int)
SECONDS = env_num("SOAK_SECONDS", 120.0)
DRAIN = env_num("SOAK_DRAIN", 10.0)
DRAIN_TIMEOUT = env_num("SOAK_DRAIN_TIMEOUT", 90.0)
SEED = os.environ.get("SOAK_SEED", "12")
BACKLOG = env_num("SOAK_BACKLOG", 120, int)
DEATH_MEAN = env_num("SOAK_DEATH_MEAN", 20.0)
AUDIT_EVERY = env_num("SOAK_AUDIT_EVERY", 10.0)
LEASE_TTL = env_num("SOAK_LEASE_TTL", 3.0)
HEARTBEAT_TTL = env_num("SOAK_HEARTBEAT_TTL", 3.0)
INTERVAL = env_num("SOAK_MAINTENANCE_INTERVAL", 1.0)
REAP_SLACK = env_num("SOAK_REAP_SLACK", 0.0)
REPORT = os.environ.get("SOAK_REPORT", "")
SERVER_LOG = os.environ.get("SOAK_SERVER_LOG", "")
INVARIANTS = os.environ.get("SOAK_INVARIANTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "pgbench", "invariants.sql")
WORK = os.environ.get("SOAK_WORK", "")
_breaks = {b.strip() for b in os.environ.get("SOAK_BREAK", "").split(",") if b.strip()}
BREAK = set(CHECKS) if "all" in _breaks else _breaks
unknown_breaks = BREAK - set(CHECKS)
if unknown_breaks:
    sys.exit(f"SOAK_BREAK: unknown checks {sorted(unknown_breaks)}; known: {CHECKS}")
if SECONDS <= DRAIN + 5:
    sys.exit(f"SOAK_SECONDS ({SECONDS}) must exceed SOAK_DRAIN ({DRAIN}) by more than 5 s")

LIVE = ("DISPATCHED", "RUNNING")
TENANTS = {"acme": 3, "globex": 2, "initech": 1, "umbrella": 1}
NODES = [f"node-{i:02d}" for i in range(1, 13)]


def log(msg):
    print(f"{time.strftime('%H:%M:%S')} {msg}", file=sys.stderr, flush=True)


def connect(user, name):
    return psycopg.connect(user=user, application_name=name, autocommit=True)


def pct(values, p):
    if not values:
        return None
    v = sorted(values)
    k = max(0, min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1)))))
    return v[k]


def fmt_s(x):
    return "-" if x is None else f"{x:.3f}"


# ---- shared state ---------------------------------------------------------------------------

class Shared:
    def __init__(self):
        self.lock = threading.Lock()
        self.phase = "load"              # load -> drain -> stop
        self.stop = threading.Event()
        self.steps = {}                  # step_id -> {execution_id, request_id, payload}
        self.executions = []             # (execution_id, submitted monotonic)
        self.exec_steps = collections.defaultdict(list)
        self.recent_requests = collections.deque(maxlen=400)
        self.succeeded = collections.defaultdict(set)  # step_id -> attempt_ids reported SUCCEEDED
        self.deaths = []                 # Death records
        self.payload_bad = []            # (step_id, expected, got)
        self.anomalies = []              # zombie calls accepted, repeated calls that differ
        self.open_requests = 0
        self.live_attempts = 0
        self.maintenance_pids = []       # distinct pids seen, in order
        self.maintenance_missing = 0     # monitor samples without a maintenance worker
        self.audits = []                 # (elapsed, ok, output on failure)
        self.workers = []                # (worker_id, node, capability)
        self.load_samples = []           # (phase, open requests, live attempts), every 0.5 s

    def anomaly(self, check, text):
        with self.lock:
            self.anomalies.append((check, text))
        log(f"ANOMALY [{check}] {text}")


S = Shared()


class Stats:
    """Per-client counters, merged at the end."""

    def __init__(self):
        self.calls = collections.Counter()
        self.latency = collections.defaultdict(list)
        self.errors = collections.Counter()          # (function, sqlstate, expected?)
        self.samples = []                            # unexpected errors: details
        self.outcomes = collections.Counter()        # (function, outcome)
        self.events = collections.Counter()          # anything else worth a number
        self.gaps = collections.defaultdict(list)    # seconds between a live worker's heartbeats, renewals

    def merge(self, other):
        self.calls.update(other.calls)
        for k, v in other.latency.items():
            self.latency[k].extend(v)
        self.errors.update(other.errors)
        self.samples.extend(other.samples)
        self.outcomes.update(other.outcomes)
        self.events.update(other.events)
        for k, v in other.gaps.items():
            self.gaps[k].extend(v)


ALL_STATS = []


class Refused(Exception):
    def __init__(self, sqlstate, message):
        super().__init__(f"{sqlstate}: {message}")
        self.sqlstate = sqlstate
        self.message = message


class Client:
    """One connection, with every call counted, timed and its errors classified."""

    def __init__(self, name, user):
        self.name = name
        self.user = user
        self.stats = Stats()
        ALL_STATS.append(self.stats)
        self.rng = random.Random(f"{SEED}:{name}")
        self.conn = connect(user, name)

    def uuid4(self):
        return uuid.UUID(int=self.rng.getrandbits(128), version=4)

    def call(self, fn, sql, params=(), expect=(), must_fail=False):
        """Runs one statement (its own transaction).  An error whose SQLSTATE is in
        `expect` is counted as an expected refusal, any other as unexpected; both raise
        Refused.  must_fail: success is an anomaly (a zombie call that was accepted)."""
        self.stats.calls[fn] += 1
        t0 = time.monotonic()
        try:
            cur = self.conn.execute(sql, params)
            rows = cur.fetchall() if cur.description else []
        except psycopg.Error as e:
            st = getattr(e, "sqlstate", None) or "connection"
            diag = getattr(e, "diag", None)
            msg = (diag.message_primary if diag and diag.message_primary else str(e)).strip()
            expected = st in expect
            self.stats.errors[(fn, st, expected)] += 1
            if not expected:
                detail = diag.message_detail if diag else None
                self.stats.samples.append((round(time.monotonic() - T0, 3), self.name, fn, st, msg, detail))
                log(f"{self.name}: unexpected {st} from {fn}: {msg}" + (f" ({detail})" if detail else ""))
            if self.conn.closed or self.conn.broken:
                self.stats.events["reconnects"] += 1
                time.sleep(0.2)
                self.conn = connect(self.user, self.name)
                self.after_reconnect()
            raise Refused(st, msg) from None
        finally:
            self.stats.latency[fn].append(time.monotonic() - t0)
        if must_fail:
            S.anomaly("no_unexpected_errors", f"{self.name}: {fn} was accepted but must be refused (55000)")
        return rows

    def after_reconnect(self):
        pass


T0 = time.monotonic()


def elapsed():
    return time.monotonic() - T0


# ---- setup ----------------------------------------------------------------------------------

def setup(admin):
    admin.execute("SET client_min_messages = warning")
    for role, grant in (("soak_app", "sched_scheduler"), ("soak_worker", "sched_worker"),
                        ("soak_ops", "sched_admin")):
        admin.execute(f"DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{role}') "
                      f"THEN CREATE ROLE {role} LOGIN; END IF; END $$")
        admin.execute(f"GRANT {grant} TO {role}")
    ops = connect("soak_ops", "soak-setup")
    for i, node in enumerate(NODES, start=1):
        ops.execute("SELECT sched.upsert_node(%s, labels => %s, cpu_millis => %s, memory_mb => %s,"
                    " gpus => %s, weight => %s)",
                    (node, Jsonb({"zone": f"z{(i - 1) // 4}", "tier": "fast" if i % 3 == 0 else "std"}),
                     [4000, 8000, 16000][i % 3], [8192, 16384, 32768][i % 3],
                     2 if i % 4 == 1 else 0, 50 + (i % 4) * 25))
    for tenant, weight in TENANTS.items():
        ops.execute("SELECT sched.set_tenant_weight(%s, %s)", (tenant, weight))
    ops.close()
    specs = []
    for i, node in enumerate(NODES, start=1):
        specs.append((node, "render", ["1.0"] if i % 4 == 3 else ["1.0", "2.0"], 2))
        specs.append((node, "encode", ["h264"], 3))
    return specs


# ---- submitters -----------------------------------------------------------------------------

def step_shape(rng, _=None):
    """Placement of one step.  Every shape can run on the whole fleet (each zone has a
    node of each size, one with GPUs, and render 2.0; setup checks a sample of shapes)."""
    p = {}
    if rng.random() < 0.6:
        p["capability"], p["capability_version"] = "render", ("2.0" if rng.random() < 0.2 else "1.0")
    else:
        p["capability"], p["capability_version"] = "encode", "h264"
    r = rng.random()
    if r < 0.10:
        p["required_labels"] = Jsonb({"zone": f"z{rng.randrange(3)}"})
    if rng.random() < 0.3:
        p["preferred_labels"] = Jsonb({"tier": "fast"})
    if p["capability"] == "render" and rng.random() < 0.05:
        p["reserve_gpus"] = 1
    elif rng.random() < 0.05:
        p["min_cpu_millis"] = 8000
    p["reserve_cpu_millis"] = rng.choice([0, 250, 500, 500, 1000, 2000])
    p["reserve_memory_mb"] = rng.choice([0, 512, 1024, 2048, 4096])
    if rng.random() < 0.03 and "required_labels" not in p and "reserve_gpus" not in p \
            and "min_cpu_millis" not in p and p["capability_version"] == "1.0":
        p["node_id"] = rng.choice(NODES)
    return p


def work_seconds(rng):
    r = rng.random()
    if r < 0.70:
        return rng.uniform(0.05, 0.5)
    if r < 0.95:
        return rng.uniform(0.5, 2.0)
    return rng.uniform(LEASE_TTL + 0.5, LEASE_TTL + 4.0)   # needs renewals


def submit_sql(p):
    cols = ["execution_id", "step_id", "capability", "capability_version", "tenant", "priority"]
    for k in ("required_labels", "preferred_labels", "min_cpu_millis", "reserve_cpu_millis",
              "reserve_memory_mb", "reserve_gpus", "node_id", "payload"):
        if k in p:
            cols.append(k)
    return ("SELECT sched.submit(" + ", ".join(f"{c} => %({c})s" for c in cols) + ")"), p


def submitter(c):
    mine = []                            # this submitter's executions
    last = None
    task = 0
    while S.phase == "load" and not S.stop.is_set():
        if S.open_requests > BACKLOG:
            time.sleep(0.1)
            continue
        rng = c.rng
        execution_id = c.uuid4()
        tenant = rng.choice(list(TENANTS))
        priority = rng.choice([0, 0, 0, 1, 2, -1])
        nsteps = rng.randint(1, 4)
        for _ in range(nsteps):
            step_id = c.uuid4()
            p = step_shape(rng, None)
            p.update(execution_id=execution_id, step_id=step_id, tenant=tenant, priority=priority)
            payload = None
            if rng.random() < 0.7:
                task += 1
                payload = {"task": f"{c.name}/{task}", "work_ms": int(work_seconds(rng) * 1000),
                           "blob": "x" * rng.choice([0, 10, 100, 1000, 4000])}
                p["payload"] = Jsonb(payload)
            sql, params = submit_sql(p)
            try:
                rid = c.call("submit", sql, params)[0][0]
            except Refused:
                continue
            with S.lock:
                S.steps[step_id] = {"execution_id": execution_id, "request_id": rid, "payload": payload}
                S.exec_steps[execution_id].append(step_id)
                S.recent_requests.append(rid)
            last = (sql, params, rid)
        with S.lock:
            S.executions.append((execution_id, time.monotonic()))
        mine.append((execution_id, tenant))
        if last and rng.random() < 0.05:
            # the same submit again: idempotent, the same request_id
            sql, params, rid = last
            try:
                again = c.call("submit", sql, params)[0][0]
                c.stats.events["submit repeated"] += 1
                if again != rid:
                    S.anomaly("no_unexpected_errors", f"submit repeated returned request {again}, first {rid}")
            except Refused:
                pass
        if len(mine) > 5 and rng.random() < 0.03:
            # one more step into an older execution of ours (it may be closed by now:
            # its request is then cancelled by the next dispatch, EXECUTION_CLOSED)
            execution_id, old_tenant = rng.choice(mine[:-1])
            step_id = c.uuid4()
            p = step_shape(rng, None)
            p.update(execution_id=execution_id, step_id=step_id, tenant=old_tenant, priority=0)
            sql, params = submit_sql(p)
            try:
                rid = c.call("submit", sql, params, expect=("55000",))[0][0]
                c.stats.events["steps added to an older execution"] += 1
                with S.lock:
                    S.steps[step_id] = {"execution_id": execution_id, "request_id": rid, "payload": None}
                    S.exec_steps[execution_id].append(step_id)
            except Refused:
                pass
        time.sleep(rng.uniform(0.0, 0.03))


# ---- dispatchers ----------------------------------------------------------------------------

def count_outcomes(c, fn, rows):
    n = 0
    for r in rows:
        c.stats.outcomes[(fn, r[0])] += 1
        if r[0] == "DISPATCHED":
            n += 1
            c.stats.events[f"dispatched ({S.phase})"] += 1
    return n


DISPATCH_COLS = "outcome, request_id, attempt_id"


def dispatcher(c, kind):
    rng = c.rng
    while not S.stop.is_set():
        placed = 0
        try:
            if kind == "next":
                r = rng.random()
                n = rng.choice([1, 4, 8, 16])
                if r < 0.15:
                    rows = c.call("dispatch_next", f"SELECT {DISPATCH_COLS} FROM sched.dispatch_next(%s, capability => %s)",
                                  (n, rng.choice(["render", "encode"])))
                elif r < 0.25:
                    rows = c.call("dispatch_next", f"SELECT {DISPATCH_COLS} FROM sched.dispatch_next(%s, tenant => %s)",
                                  (n, rng.choice(list(TENANTS))))
                else:
                    rows = c.call("dispatch_next", f"SELECT {DISPATCH_COLS} FROM sched.dispatch_next(%s)", (n,))
                placed = count_outcomes(c, "dispatch_next", rows)
            elif kind == "claim":
                claims = c.call("claim_requests", "SELECT request_id, claim_id FROM sched.claim_requests(%s, claim_ttl => '3 s')",
                                (rng.randint(1, 6),))
                for rid, claim_id in claims:
                    if rng.random() < 0.08:
                        c.stats.events["claims left to expire"] += 1
                        continue
                    try:
                        rows = c.call("dispatch_attempt", f"SELECT {DISPATCH_COLS} FROM sched.dispatch_attempt(%s, %s)",
                                      (rid, claim_id))
                        placed += count_outcomes(c, "dispatch_attempt", rows)
                    except Refused:
                        pass
            else:
                with S.lock:
                    rids = list(S.recent_requests)
                if rids:
                    rid = rng.choice(rids)
                    rows = c.call("dispatch_attempt", f"SELECT {DISPATCH_COLS} FROM sched.dispatch_attempt(%s)", (rid,))
                    placed = count_outcomes(c, "dispatch_attempt", rows)
                if not placed:
                    rows = c.call("dispatch_next", f"SELECT {DISPATCH_COLS} FROM sched.dispatch_next(%s)", (4,))
                    placed += count_outcomes(c, "dispatch_next", rows)
        except Refused:
            pass
        if not placed:
            time.sleep(rng.uniform(0.03, 0.1))


# ---- workers --------------------------------------------------------------------------------

class Att:
    def __init__(self, cmd, finish_at, outcome):
        self.attempt_id = cmd["attempt_id"]
        self.lease_version = cmd["lease_version"]
        self.step_id = cmd["step_id"]
        self.finish_at = finish_at
        self.outcome = outcome
        self.cancelled = False
        self.expires = None          # lease_expires_at returned by the last start/renew
        self.renewed = None          # when (monotonic) the last start/renew returned


class Session:
    def __init__(self, spec, start_on_delivery):
        self.node, self.capability, self.versions, self.slots = spec
        self.start_on_delivery = start_on_delivery  # poll_commands(start => true)
        self.worker_id = None
        self.generation = None
        self.held = {}
        self.next_hb = self.next_renew = self.next_poll = 0.0
        self.last_hb = 0.0
        self.dead_until = None
        self.death = None
        self.woken = False


class WorkerClient(Client):
    def __init__(self, name, specs):
        super().__init__(name, "soak_worker")
        # every other session receives and starts its attempts in one call (poll_commands
        # start => true), the others start each one with start_attempt
        self.sessions = [Session(s, i % 2 == 1) for i, s in enumerate(specs)]
        self.by_channel = {}
        self.conn.add_notify_handler(self.on_notify)
        self.hb_every = HEARTBEAT_TTL / 3
        self.renew_every = LEASE_TTL / 3
        for s in self.sessions:
            self.register(s)

    def after_reconnect(self):
        self.conn.add_notify_handler(self.on_notify)
        for s in self.sessions:
            if s.worker_id:
                self.conn.execute(f'LISTEN "sched_worker_{s.worker_id}"')

    def on_notify(self, n):
        s = self.by_channel.get(n.channel)
        if s:
            s.woken = True

    def register(self, s):
        wid, gen = self.call("register_worker",
                             "SELECT worker_id, generation FROM sched.register_worker(%s, %s, %s, %s, worker_id => %s)",
                             (s.node, s.capability, s.versions, s.slots, s.worker_id))[0]
        if s.worker_id is None:
            s.worker_id = wid
            ch = f"sched_worker_{wid}"
            self.by_channel[ch] = s
            self.conn.execute(f'LISTEN "{ch}"')
            with S.lock:
                S.workers.append((wid, s.node, s.capability))
        s.generation = gen
        now = time.monotonic()
        s.last_hb = now
        s.next_hb = now + self.hb_every
        s.next_renew = now + self.renew_every
        s.next_poll = now

    def die(self, s, now):
        s.death = {"worker_id": s.worker_id, "node": s.node, "capability": s.capability,
                   "generation": s.generation, "died_at": elapsed(),
                   "attempts": {a.attempt_id: (a.lease_version, a.expires) for a in s.held.values()}}
        s.dead_until = now + LEASE_TTL + INTERVAL + self.rng.uniform(1.0, 3.0)
        s.held = {}
        with S.lock:
            S.deaths.append(s.death)
        self.stats.events["worker deaths"] += 1
        log(f"{self.name}: worker {s.worker_id} ({s.node}/{s.capability}) gen {s.generation} dies "
            f"holding {len(s.death['attempts'])} attempts")

    def revive(self, s):
        old = s.generation
        death = s.death
        s.dead_until = None
        s.death = None
        try:
            self.register(s)
        except Refused:
            s.dead_until = time.monotonic() + 1.0      # try again (counted as unexpected)
            s.death = death
            return
        self.stats.events["worker re-registrations"] += 1
        # the zombie of the old session: everything it says is refused
        for fn, sql, params in (
                ("heartbeat", "SELECT 1 FROM sched.heartbeat(%s, %s)", (s.worker_id, old)),
                ("poll_commands", "SELECT 1 FROM sched.poll_commands(%s, %s)", (s.worker_id, old))):
            try:
                self.call(fn, sql, params, expect=("55000",), must_fail=True)
            except Refused:
                self.stats.events["zombie calls refused"] += 1
        for attempt_id, (lv, _) in list(death["attempts"].items())[:1]:
            try:
                self.call("renew_lease", "SELECT sched.renew_lease(%s, %s)", (attempt_id, lv),
                          expect=("55000",), must_fail=True)
                death["zombie_renewed"] = attempt_id
            except Refused:
                self.stats.events["zombie calls refused"] += 1
                try:
                    self.call("finish_attempt", "SELECT sched.finish_attempt(%s, %s, 'SUCCEEDED')",
                              (attempt_id, lv), expect=("55000",), must_fail=True)
                    death["zombie_finished"] = attempt_id
                except Refused:
                    self.stats.events["zombie calls refused"] += 1

    def lost(self, s, a, where):
        s.held.pop(a.attempt_id, None)
        self.stats.events[f"leases lost by a live worker ({where})"] += 1

    def finish(self, s, a):
        outcome = "CANCELLED" if a.cancelled else a.outcome
        try:
            got = self.call("finish_attempt", "SELECT sched.finish_attempt(%s, %s, %s, %s)",
                            (a.attempt_id, a.lease_version, outcome,
                             Jsonb({"worker": str(s.worker_id), "node": s.node})),
                            expect=("55000",))[0][0]
        except Refused:
            self.lost(s, a, "finish")
            return
        s.held.pop(a.attempt_id, None)
        self.stats.outcomes[("finish_attempt", got)] += 1
        if got == "SUCCEEDED":
            with S.lock:
                S.succeeded[a.step_id].add(a.attempt_id)
        if self.rng.random() < 0.03:
            # the same report again: harmless, the same status
            try:
                again = self.call("finish_attempt", "SELECT sched.finish_attempt(%s, %s, %s)",
                                  (a.attempt_id, a.lease_version, outcome))[0][0]
                self.stats.events["finish repeated"] += 1
                if again != got:
                    S.anomaly("no_unexpected_errors", f"finish_attempt repeated returned {again}, first {got}")
            except Refused:
                pass

    def poll(self, s, now):
        s.woken = False
        s.next_poll = now + 0.5
        try:
            rows = self.call("poll_commands",
                             "SELECT kind, attempt_id, lease_version, step_id, payload, lease_expires_at"
                             "  FROM sched.poll_commands(%s, %s, max => %s, start => %s)",
                             (s.worker_id, s.generation, s.slots, s.start_on_delivery))
        except Refused:
            return
        for kind, attempt_id, lease_version, step_id, payload, started_until in rows:
            self.stats.outcomes[("poll_commands", kind)] += 1
            if kind == "CANCEL":
                a = s.held.get(attempt_id)
                if a:
                    a.cancelled = True
                    a.finish_at = min(a.finish_at, time.monotonic() + 0.05)
                continue
            with S.lock:
                sub = S.steps.get(step_id)
            expected = sub["payload"] if sub else None
            if "payloads_intact" in BREAK and sub and expected is not None and not S.payload_bad:
                expected = dict(expected, task="broken on purpose")
            if sub is not None and payload != expected:
                with S.lock:
                    S.payload_bad.append((str(step_id), expected, payload))
            work = (payload or {}).get("work_ms")
            secs = work / 1000.0 if work is not None else work_seconds(self.rng)
            outcome = "SUCCEEDED" if self.rng.random() < 0.85 else "FAILED"
            a = Att({"attempt_id": attempt_id, "lease_version": lease_version, "step_id": step_id},
                    time.monotonic() + secs, outcome)
            if s.start_on_delivery:
                if started_until is None:
                    S.anomaly("no_unexpected_errors",
                              f"poll_commands(start => true) returned START {attempt_id} not started")
                    continue
                a.expires = started_until
                a.renewed = time.monotonic()
                self.stats.events["attempts started on delivery"] += 1
            else:
                try:
                    a.expires = self.call("start_attempt", "SELECT sched.start_attempt(%s, %s)",
                                          (attempt_id, lease_version), expect=("55000",))[0][0]
                    a.renewed = time.monotonic()
                except Refused:
                    self.stats.events["leases lost by a live worker (start)"] += 1
                    continue
            s.held[attempt_id] = a
        if len(rows) == s.slots:
            s.next_poll = now            # there may be more

    def drain_notifies(self):
        """Notifications that arrived while idle (those that come with a query's result
        are handled by on_notify)."""
        pg = self.conn.pgconn
        pg.consume_input()
        while True:
            n = pg.notifies()
            if n is None:
                break
            s = self.by_channel.get(n.relname.decode())
            if s:
                s.woken = True

    def run(self):
        # the first death early enough that every worker client has one in a short run
        next_death = time.monotonic() + self.rng.uniform(2.0, max(2.5, min(DEATH_MEAN, (SECONDS - DRAIN) / 2)))
        while not S.stop.is_set():
            now = time.monotonic()
            if S.phase == "load" and now >= next_death:
                next_death = now + self.rng.expovariate(1.0 / DEATH_MEAN)
                alive = [s for s in self.sessions if s.dead_until is None]
                busy = [s for s in alive if s.held]
                if alive:
                    self.die(self.rng.choice(busy or alive), now)
            for s in self.sessions:
                now = time.monotonic()
                if s.dead_until is not None:
                    if now >= s.dead_until:
                        self.revive(s)
                    continue
                if now >= s.next_hb:
                    try:
                        self.call("heartbeat", "SELECT 1 FROM sched.heartbeat(%s, %s)", (s.worker_id, s.generation))
                        t = time.monotonic()
                        self.stats.gaps["heartbeat"].append(t - s.last_hb)
                        s.last_hb = t
                    except Refused:
                        pass
                    s.next_hb = now + self.hb_every
                if now >= s.next_renew:
                    for a in list(s.held.values()):
                        try:
                            a.expires = self.call("renew_lease", "SELECT sched.renew_lease(%s, %s)",
                                                  (a.attempt_id, a.lease_version), expect=("55000",))[0][0]
                            t = time.monotonic()
                            self.stats.gaps["lease renewal"].append(t - a.renewed)
                            a.renewed = t
                        except Refused:
                            self.lost(s, a, "renew")
                    s.next_renew = now + self.renew_every
                if s.woken or now >= s.next_poll:
                    self.poll(s, now)
                for a in list(s.held.values()):
                    if time.monotonic() >= a.finish_at:
                        self.finish(s, a)
            # wait for a notification or the next thing due, at most 0.1 s
            due = [s.next_hb for s in self.sessions if s.dead_until is None]
            due += [a.finish_at for s in self.sessions if s.dead_until is None for a in s.held.values()]
            due += [s.dead_until for s in self.sessions if s.dead_until is not None]
            timeout = max(0.0, min([time.monotonic() + 0.1] + due) - time.monotonic())
            if any(s.woken for s in self.sessions):
                continue
            if timeout > 0:
                r, _, _ = select.select([self.conn.fileno()], [], [], timeout)
                if r:
                    try:
                        self.drain_notifies()
                    except Exception:
                        pass


# ---- the operator ---------------------------------------------------------------------------

def operator(c):
    rng = c.rng
    drained = {}        # node -> restore time
    cordoned = {}       # worker_id -> restore time
    while not S.stop.is_set() and S.phase == "load":
        now = time.monotonic()
        for node, t in list(drained.items()):
            if now >= t:
                try:
                    c.call("upsert_node", "SELECT 1 FROM sched.upsert_node(%s, management_status => 'ACTIVE')", (node,))
                except Refused:
                    pass
                del drained[node]
        for wid, t in list(cordoned.items()):
            if now >= t:
                try:
                    c.call("uncordon_worker", "SELECT 1 FROM sched.uncordon_worker(%s)", (wid,))
                except Refused:
                    pass
                del cordoned[wid]
        r = rng.random()
        try:
            if r < 0.12 and len(drained) < 2:
                node = rng.choice([n for n in NODES if n not in drained])
                c.call("drain_node", "SELECT 1 FROM sched.drain_node(%s)", (node,))
                drained[node] = now + rng.uniform(2.0, 6.0)
            elif r < 0.24 and len(cordoned) < 3:
                with S.lock:
                    workers = [w[0] for w in S.workers]
                wid = rng.choice(workers)
                if wid not in cordoned:
                    c.call("cordon_worker", "SELECT 1 FROM sched.cordon_worker(%s)", (wid,))
                    cordoned[wid] = now + rng.uniform(2.0, 6.0)
            elif r < 0.36:
                with S.lock:
                    recent = [e for e, t in S.executions[-200:]]
                if recent:
                    got = c.call("cancel_execution", "SELECT sched.cancel_execution(%s)", (rng.choice(recent),),
                                 expect=("55000",))[0][0]
                    c.stats.outcomes[("cancel_execution", got)] += 1
            elif r < 0.40:
                c.call("set_tenant_weight", "SELECT 1 FROM sched.set_tenant_weight(%s, %s)",
                       (rng.choice(list(TENANTS)), rng.randint(1, 4)))
            else:
                with S.lock:
                    older = [e for e, t in S.executions if now - t > 3.0][-300:]
                if older:
                    got = c.call("complete_execution", "SELECT sched.complete_execution(%s)", (rng.choice(older),),
                                 expect=("55000",))[0][0]
                    c.stats.outcomes[("complete_execution", got)] += 1
        except Refused:
            pass
        time.sleep(rng.uniform(0.1, 0.4))
    # the drain: the fleet back to what it was
    for node in drained:
        try:
            c.call("upsert_node", "SELECT 1 FROM sched.upsert_node(%s, management_status => 'ACTIVE')", (node,))
        except Refused:
            pass
    for wid in cordoned:
        try:
            c.call("uncordon_worker", "SELECT 1 FROM sched.uncordon_worker(%s)", (wid,))
        except Refused:
            pass


# ---- audits, monitor, breaks -----------------------------------------------------------------

def run_invariants(repeatable=False):
    env = dict(os.environ)
    if repeatable:
        env["PGOPTIONS"] = (env.get("PGOPTIONS", "") + " -c default_transaction_isolation=repeatable\\ read").strip()
    p = subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", INVARIANTS],
                       env=env, capture_output=True, text=True)
    out = (p.stdout + p.stderr).strip()
    return p.returncode == 0, out


def auditor():
    while not S.stop.wait(AUDIT_EVERY):
        ok, out = run_invariants(repeatable=True)
        with S.lock:
            S.audits.append((round(elapsed(), 1), ok, "" if ok else out))
        if not ok:
            log(f"invariants FAILED at {elapsed():.1f} s:\n{out}")


class TickSampler:
    """Watches the maintenance worker in pg_stat_activity every 50 ms.  Between ticks it
    is idle with query_start = the last tick's start and state_change = its end, so each
    tick's start and duration are seen exactly (a tick is about 1 s apart from the next);
    during a tick, what it waits for."""

    def __init__(self):
        self.ticks = {}                  # tick start -> duration (s), server clock
        self.waits = collections.Counter()
        self.active_samples = 0

    def run(self):
        conn = psycopg.connect(autocommit=True, application_name="soak-ticks")
        while not S.stop.is_set():
            row = conn.execute(
                "SELECT state, query_start, extract(epoch FROM state_change - query_start), wait_event_type, wait_event"
                "  FROM pg_stat_activity WHERE backend_type = 'pg_sched maintenance'").fetchone()
            if row:
                state, start, took, wtype, wevent = row
                if state == "idle" and start is not None:
                    self.ticks[start] = float(took)
                elif state == "active":
                    self.active_samples += 1
                    if wtype:
                        self.waits[f"{wtype}/{wevent}"] += 1
            time.sleep(0.05)
        conn.close()


TICKS = TickSampler()


def ticks_between(expired, finished):
    """The maintenance ticks seen between a lease's expiry and the tick that reaped it."""
    around = [t for t in sorted(TICKS.ticks) if expired - TICK_MARGIN <= t <= finished + TICK_MARGIN]
    return (" [ticks around: " + ", ".join(
        f"{(t - expired).total_seconds():+.3f} s (took {TICKS.ticks[t]:.3f} s)" for t in around)
        + " from the lease's expiry]") if around else " [no tick seen around it]"


TICK_MARGIN = __import__("datetime").timedelta(seconds=1.5)


def sample(admin):
    open_, live, pids = admin.execute(
        "SELECT (SELECT count(*) FROM sched.request WHERE state IN ('PENDING', 'CLAIMED')),"
        "       (SELECT count(*) FROM sched.attempt WHERE status IN ('DISPATCHED', 'RUNNING')),"
        "       (SELECT array_agg(pid) FROM pg_stat_activity WHERE backend_type = 'pg_sched maintenance')").fetchone()
    S.open_requests, S.live_attempts = open_, live
    S.load_samples.append((S.phase, open_, live))
    with S.lock:
        for pid in pids or []:
            if pid not in S.maintenance_pids:
                S.maintenance_pids.append(pid)
        if not pids:
            S.maintenance_missing += 1
    return open_, live


def break_deadlock():
    """Two sessions update two rows in opposite orders: one of them gets 40P01."""
    admin = psycopg.connect(autocommit=True, application_name="soak-break")
    admin.execute("CREATE TABLE IF NOT EXISTS public.soak_break (id int PRIMARY KEY)")
    admin.execute("INSERT INTO public.soak_break VALUES (1), (2) ON CONFLICT DO NOTHING")
    admin.close()

    def side(first, second, name):
        c = Client(name, os.environ.get("PGUSER", "postgres"))
        c.conn.autocommit = False
        try:
            c.conn.execute("UPDATE public.soak_break SET id = id WHERE id = %s", (first,))
            time.sleep(0.5)
            c.call("break_deadlock", "UPDATE public.soak_break SET id = id WHERE id = %s", (second,))
        except Refused:
            pass
        finally:
            c.conn.rollback()
            c.conn.close()
    ts = [threading.Thread(target=side, args=(1, 2, "soak-break-a")),
          threading.Thread(target=side, args=(2, 1, "soak-break-b"))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def check_shapes(admin, n=400):
    """Every shape the submitters make must be able to run on the whole fleet: a sample
    of them, ranked on the fleet as it is before the load (every worker fresh and idle)."""
    rng = random.Random(f"{SEED}:shapes")
    for _ in range(n):
        p = step_shape(rng)
        args = {k: v for k, v in p.items()}
        sql = "SELECT count(*) FROM sched.rank_candidates(" + ", ".join(f"{k} => %({k})s" for k in args) + ")"
        if admin.execute(sql, args).fetchone()[0] == 0:
            sys.exit(f"soak.py: a shape the submitters make cannot run on the fleet: "
                     f"{ {k: (v.obj if isinstance(v, Jsonb) else v) for k, v in p.items()} }")


# ---- the run --------------------------------------------------------------------------------

def roles_for(n):
    ops = 1
    subs = max(1, round(n * 0.25))
    disp = max(1, round(n * 0.1875))
    workers = max(1, n - ops - subs - disp)
    return subs, disp, workers, ops


def main():
    global T0
    admin = psycopg.connect(autocommit=True, application_name="soak-monitor")
    dbname = admin.info.dbname
    settings = dict(admin.execute(
        "SELECT name, setting FROM pg_settings WHERE name IN ('sched.lease_ttl', 'sched.heartbeat_ttl',"
        " 'sched.maintenance_interval', 'sched.databases', 'sched.retry_backoff_max',"
        " 'sched.unschedulable_backoff_max')").fetchall())
    lease_ttl = admin.execute("SELECT sched.setting_seconds('sched.lease_ttl')").fetchone()[0]
    interval = admin.execute("SELECT extract(epoch FROM current_setting('sched.maintenance_interval')::interval)"
                             "::float8").fetchone()[0]
    if abs(lease_ttl - LEASE_TTL) > 1e-6 or abs(interval - INTERVAL) > 1e-6:
        sys.exit(f"the database's sched.lease_ttl ({lease_ttl} s) and sched.maintenance_interval "
                 f"({interval} s) are not SOAK_LEASE_TTL ({LEASE_TTL}) and SOAK_MAINTENANCE_INTERVAL ({INTERVAL})")
    specs = setup(admin)
    subs, disp, nworkers, ops = roles_for(CLIENTS)
    log(f"{CLIENTS} clients: {subs} submitters, {disp} dispatchers, {nworkers} worker clients "
        f"({len(specs)} worker sessions), {ops} operator; {SECONDS:.0f} s, the last {DRAIN:.0f} s without new work")

    threads = []
    T0 = time.monotonic()

    def spawn(fn, *args, name):
        def body():
            try:
                fn(*args)
            except Exception:
                S.anomaly("no_unexpected_errors", f"client {name} crashed: {traceback.format_exc()}")
        t = threading.Thread(target=body, name=name, daemon=True)
        t.start()
        threads.append(t)

    kinds = ["next", "claim", "direct"]
    worker_clients = []
    for i in range(nworkers):
        wc = WorkerClient(f"soak-worker-{i + 1}", specs[i::nworkers])
        worker_clients.append(wc)
    check_shapes(admin)
    log_offset = os.path.getsize(SERVER_LOG) if SERVER_LOG and os.path.exists(SERVER_LOG) else 0
    for wc in worker_clients:
        spawn(wc.run, name=wc.name)
    for i in range(subs):
        spawn(submitter, Client(f"soak-submit-{i + 1}", "soak_app"), name=f"soak-submit-{i + 1}")
    for i in range(disp):
        spawn(dispatcher, Client(f"soak-dispatch-{kinds[i % 3]}-{i + 1}", "soak_app"), kinds[i % 3],
              name=f"soak-dispatch-{i + 1}")
    spawn(operator, Client("soak-operator", "soak_ops"), name="soak-operator")
    audit = threading.Thread(target=auditor, daemon=True)
    audit.start()
    ticker = threading.Thread(target=TICKS.run, daemon=True)
    ticker.start()

    if "no_unexpected_errors" in BREAK:
        # a call no client of a correct run makes: a heartbeat of a worker that does not exist
        try:
            Client("soak-break-unexpected", "soak_worker").call(
                "heartbeat", "SELECT 1 FROM sched.heartbeat(%s, 1)", (str(uuid.UUID(int=12, version=4)),))
        except Refused:
            pass
    load_end = SECONDS - DRAIN
    deadlock_broken = False
    while elapsed() < load_end:
        time.sleep(0.5)
        sample(admin)
        if "no_deadlocks" in BREAK and not deadlock_broken and elapsed() > load_end / 2:
            deadlock_broken = True
            threading.Thread(target=break_deadlock, daemon=True).start()
    S.phase = "drain"
    drain_start = elapsed()
    log(f"drain: no new work from {drain_start:.1f} s; open requests {S.open_requests}, live attempts {S.live_attempts}")
    quiet = 0
    while elapsed() < SECONDS + DRAIN_TIMEOUT:
        time.sleep(0.5)
        open_, live = sample(admin)
        dead = sum(1 for wc in worker_clients for s in wc.sessions if s.dead_until is not None)
        quiet = quiet + 1 if (open_ == 0 and live == 0 and dead == 0) else 0
        if quiet >= 2:
            break
    drained_at = elapsed()
    S.stop.set()
    S.phase = "stop"
    for t in threads:
        t.join(timeout=15)
    audit.join(timeout=60)
    log(f"clients stopped at {drained_at:.1f} s: open requests {S.open_requests}, live attempts {S.live_attempts}")

    # ---- the checks ----
    failures = collections.OrderedDict((c, []) for c in CHECKS)
    total = Stats()
    for st in ALL_STATS:
        total.merge(st)

    if "maintenance_clean" in BREAK:
        # the maintenance worker's ticks fail while sched_scheduler may not reap
        admin.execute("REVOKE EXECUTE ON FUNCTION sched.reap_expired(timestamptz) FROM sched_scheduler")
        time.sleep(2.5 * INTERVAL + 0.5)
        admin.execute("GRANT EXECUTE ON FUNCTION sched.reap_expired(timestamptz) TO sched_scheduler")
        time.sleep(INTERVAL)
    if "steps_ended_once" in BREAK or "executions_complete" in BREAK:
        # a new execution whose one step can never run: it stays pending
        c = connect("soak_app", "soak-break-steps")
        eid, step_id = uuid.UUID(int=13, version=4), uuid.UUID(int=14, version=4)
        c.execute("SELECT sched.submit(%s, %s, 'render', '1.0', required_labels => '{\"zone\": \"nowhere\"}')",
                  (eid, step_id))
        c.close()
        with S.lock:
            S.steps[step_id] = {"execution_id": eid, "request_id": None, "payload": None}
            S.exec_steps[eid].append(step_id)
    if "invariants" in BREAK:
        admin.execute("ALTER TABLE sched.worker DROP CONSTRAINT worker_valid")
        admin.execute("UPDATE sched.worker SET live_attempts = live_attempts + 1"
                      " WHERE worker_id = (SELECT min(worker_id::text)::uuid FROM sched.worker)")

    # no_deadlocks, no_unexpected_errors: the clients' errors
    errors_by_state = collections.Counter()
    for (fn, st, expected), n in total.errors.items():
        errors_by_state[(st, expected)] += n
        if st == "40P01":
            failures["no_deadlocks"].append(f"{n} deadlocks (40P01) in {fn}")
        elif not expected:
            failures["no_unexpected_errors"].append(f"{n} x {st} from {fn}")
    for check, text in S.anomalies:
        failures[check].append(text)

    # executions_complete: every open execution can be completed now
    ops = Client("soak-final", "soak_ops")
    open_execs = [r[0] for r in admin.execute(
        "SELECT execution_id FROM sched.execution WHERE status IN ('CREATED', 'QUEUED', 'RUNNING') ORDER BY 1").fetchall()]
    completed = 0
    for eid in open_execs:
        try:
            ops.call("complete_execution (final)", "SELECT sched.complete_execution(%s)", (eid,), expect=("55000",))
            completed += 1
        except Refused as e:
            failures["executions_complete"].append(f"execution {eid}: {e.sqlstate} {e.message}")
    total.merge(ops.stats)

    # invariants: every audit, and now
    ok, out = run_invariants()
    S.audits.append((round(elapsed(), 1), ok, "" if ok else out))
    for t, ok_, text in S.audits:
        if not ok_:
            failures["invariants"].append(f"at {t} s: " + "; ".join(
                l.split("WARNING:", 1)[-1].strip() for l in text.splitlines() if "violated" in l))
    n_audits = len(S.audits)

    # steps_ended_once
    with S.lock:
        steps = dict(S.steps)
        succeeded = {k: set(v) for k, v in S.succeeded.items()}
    rows = admin.execute("""
        WITH s AS (SELECT unnest(%s::uuid[]) AS step_id)
        SELECT s.step_id,
               (SELECT count(*) FROM sched.request r WHERE r.step_id = s.step_id) AS requests,
               (SELECT count(*) FROM sched.request r WHERE r.step_id = s.step_id
                   AND r.state IN ('PENDING', 'CLAIMED')) AS open,
               (SELECT count(*) FROM sched.attempt a WHERE a.step_id = s.step_id
                   AND a.status IN ('DISPATCHED', 'RUNNING')) AS live,
               (SELECT array_agg(a.attempt_id ORDER BY a.attempt_number) FROM sched.attempt a
                 WHERE a.step_id = s.step_id AND a.status = 'SUCCEEDED') AS succeeded,
               (SELECT max(a.attempt_number) FILTER (WHERE a.status = 'SUCCEEDED') = max(r.attempt_number)
                  FROM sched.request r LEFT JOIN sched.attempt a ON a.request_id = r.request_id
                 WHERE r.step_id = s.step_id) AS success_is_last,
               (SELECT e.status FROM sched.request r JOIN sched.execution e USING (execution_id)
                 WHERE r.step_id = s.step_id LIMIT 1) AS execution_status,
               (SELECT string_agg(a.status, ',' ORDER BY a.attempt_number) FROM sched.attempt a
                 WHERE a.step_id = s.step_id) AS attempts
          FROM s""", ([str(k) for k in steps],)).fetchall()
    step_classes = collections.Counter()
    bad_steps = collections.Counter()
    for step_id, requests, open_, live, succ, succ_last, estatus, attempts in rows:
        succ = set(succ or [])
        problems = []
        if requests == 0:
            problems.append("not in sched.request")
        if open_ or live:
            problems.append(f"not ended: {open_} open requests, {live} live attempts")
        if len(succ) > 1:
            problems.append(f"{len(succ)} SUCCEEDED attempts")
        if len(succ) == 1 and not succ_last:
            problems.append("its SUCCEEDED attempt is not its last")
        if not succ and not (open_ or live) and estatus not in ("FAILED", "CANCELLED"):
            problems.append(f"no SUCCEEDED attempt, but its execution is {estatus}")
        reported = succeeded.get(step_id, set())
        if reported != succ:
            problems.append(f"workers were told SUCCEEDED for {len(reported)} attempts, the table has {len(succ)}")
        if problems:
            for p in problems:
                bad_steps[re.sub(r"\d+", "N", p)] += 1
            if open_ and len(failures["steps_ended_once"]) < 10:
                why = admin.execute(
                    "SELECT r.request_id, r.state, round(extract(epoch FROM r.available_at - now())::numeric, 1),"
                    "       r.tries, (SELECT string_agg(DISTINCT x, ', ') FROM sched.qualification_reasons(r.request_id) q,"
                    "                        unnest(q.reasons) x)"
                    "  FROM sched.request r WHERE r.step_id = %s AND r.state IN ('PENDING', 'CLAIMED')",
                    (step_id,)).fetchone()
                problems.append(f"request {why[0]} {why[1]}, ready in {why[2]} s, tries {why[3]}, "
                                f"reasons on the nodes: {why[4]}")
            if len(failures["steps_ended_once"]) < 10:
                failures["steps_ended_once"].append(f"step {step_id} (attempts {attempts}, execution {estatus}): "
                                                    + "; ".join(problems))
        step_classes["not ended" if (open_ or live) else "succeeded" if succ
                     else f"ended without success (execution {estatus})"] += 1
    for k, n in bad_steps.items():
        failures["steps_ended_once"].append(f"{n} steps: {k}")

    # reaped_in_time
    bound = LEASE_TTL + INTERVAL + REAP_SLACK
    if "reaped_in_time" in BREAK:
        bound = LEASE_TTL - 1.0        # below any possible delay: every reaped attempt fails it
    with S.lock:
        deaths = list(S.deaths)
    held = {}
    for d in deaths:
        for aid, (lv, expires) in d["attempts"].items():
            held[aid] = (d, expires)
    death_delays, all_delays = [], []
    if held:
        for aid, status, finished_at, lease_expires_at, delay in admin.execute(
                "SELECT attempt_id, status, finished_at, lease_expires_at,"
                "       extract(epoch FROM finished_at - lease_expires_at) + %s"
                "  FROM sched.attempt WHERE attempt_id = ANY (%s)", (LEASE_TTL, list(held))).fetchall():
            d, expires = held[aid]
            if status != "LOST":
                failures["reaped_in_time"].append(f"attempt {aid} of dead worker {d['worker_id']} is {status}, not LOST")
                continue
            if expires is not None and lease_expires_at != expires:
                failures["reaped_in_time"].append(f"attempt {aid}: its lease was extended to {lease_expires_at} after "
                                                  f"its worker died (last renewal: lease to {expires})")
            death_delays.append(float(delay))
            if float(delay) > bound:
                failures["reaped_in_time"].append(f"attempt {aid} of dead worker {d['worker_id']}: reaped "
                                                  f"{float(delay):.3f} s after its last renewal (bound {bound:.3f} s)"
                                                  + ticks_between(lease_expires_at, finished_at))
    for aid, delay, dispatched, expired, finished in admin.execute(
            "SELECT attempt_id, extract(epoch FROM finished_at - lease_expires_at) + %s, started_at IS NULL,"
            "       lease_expires_at, finished_at"
            "  FROM sched.attempt WHERE status = 'LOST'", (LEASE_TTL,)).fetchall():
        all_delays.append(float(delay))
        if float(delay) > bound and aid not in held:
            failures["reaped_in_time"].append(f"LOST attempt {aid}: reaped {float(delay):.3f} s after its last "
                                              f"{'dispatch' if dispatched else 'renewal'} (bound {bound:.3f} s)"
                                              + ticks_between(expired, finished))
    late = sum(1 for d in all_delays if d > bound)
    if late:
        failures["reaped_in_time"].insert(0, f"{late} of {len(all_delays)} LOST attempts were reaped more than "
                                             f"{bound:.3f} s after their last renewal or dispatch")
    if not deaths:
        failures["reaped_in_time"].append("no worker died: nothing was measured")
    elif not death_delays:
        failures["reaped_in_time"].append("no dead worker held an attempt: nothing was measured")
    for d in deaths:
        for k in ("zombie_renewed", "zombie_finished"):
            if k in d:
                failures["reaped_in_time"].append(f"zombie of worker {d['worker_id']}: {k} {d[k]} (not reaped in time)")

    # payloads_intact
    for step_id, expected, got in S.payload_bad[:5]:
        failures["payloads_intact"].append(f"step {step_id}: submitted {json.dumps(expected)[:80]}, "
                                           f"START carried {json.dumps(got)[:80]}")
    if len(S.payload_bad) > 5:
        failures["payloads_intact"].append(f"... {len(S.payload_bad)} in all")

    # maintenance_clean, and the server log's errors
    log_summary, log_deadlocks, log_background = analyse_log(SERVER_LOG, log_offset)
    for text in log_deadlocks:
        failures["no_deadlocks"].append("server log: " + text)
    for text in log_background:
        failures["maintenance_clean"].append("server log: " + text)
    if S.maintenance_missing:
        failures["maintenance_clean"].append(f"no maintenance worker in {S.maintenance_missing} samples of the monitor")
    if len(S.maintenance_pids) > 1:
        failures["maintenance_clean"].append(f"the maintenance worker was restarted: pids {S.maintenance_pids}")

    # ---- the report ----
    db_counts = admin.execute("""
        SELECT (SELECT count(*) FROM sched.attempt),
               (SELECT string_agg(status || ' ' || n, ', ' ORDER BY status) FROM
                   (SELECT status, count(*) n FROM sched.attempt GROUP BY 1) s),
               (SELECT string_agg(status || ' ' || n, ', ' ORDER BY status) FROM
                   (SELECT status, count(*) n FROM sched.execution GROUP BY 1) s),
               (SELECT string_agg(state || ' ' || n, ', ' ORDER BY state) FROM
                   (SELECT state, count(*) n FROM sched.request GROUP BY 1) s),
               (SELECT count(*) FROM sched.command), (SELECT count(*) FROM sched.timeline)""").fetchone()
    counters = None
    try:
        counters = admin.execute("SELECT * FROM sched._dispatch_counters()").fetchall()
        counters_cols = [d.name for d in admin.execute("SELECT * FROM sched._dispatch_counters() LIMIT 0").description]
    except psycopg.Error:
        counters = None
    dispatched = sum(n for (fn, o), n in total.outcomes.items() if o == "DISPATCHED" and fn.startswith("dispatch"))
    client_seconds = drained_at
    md = []
    w = md.append
    w(f"# pg_sched soak: {CLIENTS} clients, {SECONDS:.0f} s")
    w("")
    w(f"- database `{dbname}`; settings: " + ", ".join(f"`{k}` = {v}" for k, v in sorted(settings.items())))
    w(f"- clients: {subs} submitters, {disp} dispatchers ({', '.join(kinds[i % 3] for i in range(disp))}), "
      f"{nworkers} worker clients running {len(specs)} worker sessions (24 workers, "
      f"{sum(s[3] for s in specs)} slots on {len(NODES)} nodes), 1 operator; seed {SEED}"
      + (f"; **broken on purpose: {', '.join(sorted(BREAK))}**" if BREAK else ""))
    w(f"- durations: load {drain_start:.1f} s, drain {drained_at - drain_start:.1f} s "
      f"({'drained' if quiet >= 2 else 'NOT drained'}), clients ran {client_seconds:.1f} s")
    w(f"- dispatched: {dispatched} ({dispatched / max(client_seconds, 1e-9):.1f}/s over the run, "
      f"{total.events.get('dispatched (load)', 0) / max(drain_start, 1e-9):.1f}/s during the load); "
      f"attempts in the table: {db_counts[0]} ({db_counts[1]})")
    during = [(o, l) for ph, o, l in S.load_samples if ph == "load"]
    if during:
        slots = sum(sp[3] for sp in specs)
        w(f"- during the load (sampled every 0.5 s): open requests mean {statistics.mean(o for o, _ in during):.0f} "
          f"(cap {BACKLOG}), live attempts mean {statistics.mean(l for _, l in during):.1f} of {slots} slots "
          f"(max {max(l for _, l in during)})")
    w(f"- executions: {db_counts[2]}; requests: {db_counts[3]}; commands {db_counts[4]}, milestones {db_counts[5]}")
    w(f"- steps submitted: {len(steps)}: " + ", ".join(f"{k} {v}" for k, v in sorted(step_classes.items())))
    w(f"- final complete_execution: {completed} of {len(open_execs)} open executions completed")
    w(f"- invariants.sql: {n_audits} runs ({n_audits - 1} during the run, 1 at the end), "
      f"{sum(1 for a in S.audits if not a[1])} failed")
    w("")
    w("## Checks")
    w("")
    w("| check | result |")
    w("| --- | --- |")
    for check, probs in failures.items():
        w(f"| {check} | {'ok' if not probs else 'FAILED: ' + '; '.join(probs[:3]).replace('|', '/')} |")
    w("")
    w("## Calls by function")
    w("")
    w("| function | calls | per s | expected refusals | unexpected errors | p50 ms | p95 ms | max ms |")
    w("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for fn in sorted(total.calls, key=lambda f: -total.calls[f]):
        lat = total.latency.get(fn, [])
        exp = sum(n for (f, st, e), n in total.errors.items() if f == fn and e)
        unexp = sum(n for (f, st, e), n in total.errors.items() if f == fn and not e)
        w(f"| {fn} | {total.calls[fn]} | {total.calls[fn] / max(client_seconds, 1e-9):.1f} | {exp} | {unexp} | "
          f"{1000 * pct(lat, 50):.1f} | {1000 * pct(lat, 95):.1f} | {1000 * max(lat):.1f} |")
    w("")
    w("## Outcomes")
    w("")
    w("| function | outcome | count |")
    w("| --- | --- | ---: |")
    for (fn, o), n in sorted(total.outcomes.items()):
        if n:
            w(f"| {fn} | {o} | {n} |")
    w("")
    w("## Errors by SQLSTATE")
    w("")
    if total.errors:
        w("| SQLSTATE | function | kind | count |")
        w("| --- | --- | --- | ---: |")
        for (fn, st, e), n in sorted(total.errors.items(), key=lambda x: (x[0][1], x[0][0])):
            w(f"| {st} | {fn} | {'expected' if e else '**unexpected**'} | {n} |")
    else:
        w("none")
    if total.samples:
        w("")
        w("Unexpected errors (first 20):")
        w("")
        for t, name, fn, st, msg, detail in total.samples[:20]:
            w(f"- at {t} s, {name}, `{fn}`: {st} {msg}" + (f" ({detail})" if detail else ""))
    w("")
    w("## Events")
    w("")
    for k, n in sorted(total.events.items()):
        w(f"- {k}: {n}")
    w("")
    w("## Worker deaths and reaping")
    w("")
    w(f"- deaths: {len(deaths)}, holding {len(held)} attempts; bound lease_ttl + maintenance_interval"
      f"{' + slack' if REAP_SLACK else ''} = {bound:.3f} s")
    for name, v in (("attempts held by dying workers (client-recorded last renewal to finished_at)", death_delays),
                    ("every LOST attempt (lease_expires_at - lease_ttl to finished_at)", all_delays)):
        if v:
            w(f"- {name}: n {len(v)}, min {fmt_s(min(v))} s, median {fmt_s(statistics.median(v))} s, "
              f"p95 {fmt_s(pct(v, 95))} s, max {fmt_s(max(v))} s")
        else:
            w(f"- {name}: none")
    over = [float(r[0]) for r in admin.execute(
        "SELECT extract(epoch FROM finished_at - lease_expires_at) FROM sched.attempt WHERE status = 'LOST'").fetchall()]
    if over:
        w(f"- LOST attempts, reaped after their lease expired by: min {fmt_s(min(over))} s, median "
          f"{fmt_s(statistics.median(over))} s, p95 {fmt_s(pct(over, 95))} s, max {fmt_s(max(over))} s "
          f"(maintenance_interval {INTERVAL:g} s)")
    ticks = [r[0] for r in admin.execute(
        "SELECT DISTINCT finished_at FROM sched.attempt WHERE status = 'LOST' ORDER BY 1").fetchall()]
    tick_gaps = [(b - a).total_seconds() for a, b in zip(ticks, ticks[1:])]
    tick_gaps = [g for g in tick_gaps if g < 1.9 * INTERVAL]   # consecutive ticks only
    if tick_gaps:
        w(f"- reaper ticks that reaped something, start to start (consecutive ticks, from finished_at): "
          f"n {len(tick_gaps)}, min {fmt_s(min(tick_gaps))} s, median {fmt_s(statistics.median(tick_gaps))} s, "
          f"max {fmt_s(max(tick_gaps))} s")
    starts = sorted(TICKS.ticks)
    gaps = [(b - a).total_seconds() for a, b in zip(starts, starts[1:])]
    runs = [TICKS.ticks[t] for t in starts]
    if gaps:
        w(f"- maintenance ticks seen in pg_stat_activity: {len(starts)}; start to start: median "
          f"{fmt_s(statistics.median(gaps))} s, p95 {fmt_s(pct(gaps, 95))} s, max {fmt_s(max(gaps))} s; "
          f"duration: median {fmt_s(statistics.median(runs))} s, p95 {fmt_s(pct(runs, 95))} s, "
          f"max {fmt_s(max(runs))} s; waits seen during ticks ({TICKS.active_samples} samples of a running tick): "
          + (", ".join(f"{k} {n}" for k, n in TICKS.waits.most_common(6)) or "none"))
    w(f"- maintenance worker pids seen: {S.maintenance_pids}")
    for k in ("heartbeat", "lease renewal"):
        v = total.gaps.get(k)
        if v:
            w(f"- live workers' {k} intervals: n {len(v)}, median {fmt_s(statistics.median(v))} s, "
              f"p95 {fmt_s(pct(v, 95))} s, max {fmt_s(max(v))} s (due every "
              f"{(HEARTBEAT_TTL if k == 'heartbeat' else LEASE_TTL) / 3:g} s, TTL "
              f"{HEARTBEAT_TTL if k == 'heartbeat' else LEASE_TTL:g} s)")
    if counters:
        w("")
        w("## sched._dispatch_counters()")
        w("")
        w("| " + " | ".join(counters_cols) + " |")
        w("| " + " | ".join("---" for _ in counters_cols) + " |")
        for r in counters:
            w("| " + " | ".join(str(x) for x in r) + " |")
    w("")
    w("## Server log")
    w("")
    w(log_summary or "no errors")
    failed = [c for c, p in failures.items() if p]
    w("")
    w(f"**{'PASSED' if not failed else 'FAILED CHECKS: ' + ', '.join(failed)}**")
    text = "\n".join(md) + "\n"
    print(text)
    if REPORT:
        with open(REPORT, "w") as f:
            f.write(text)
    if WORK:
        with open(os.path.join(WORK, "failed_checks"), "w") as f:
            f.write("".join(c + "\n" for c in failed))
    return 1 if failed else 0


LOG_LINE = re.compile(r"^(\S+ \S+ \S+) \[(\d+)\] <([^>]*)> \{([^}]*)\} (\S{5}) "
                      r"(ERROR|FATAL|PANIC|WARNING|LOG|DETAIL|STATEMENT|HINT|CONTEXT):\s+(.*)$")


def analyse_log(path, offset=0):
    """The server log's errors, from `offset` on (the soak's own), by backend type and
    SQLSTATE; the deadlocks, with what each process ran; the errors of background
    processes."""
    if not path or not os.path.exists(path):
        return "(no server log)", [], []
    counts = collections.Counter()
    deadlocks, background = [], []
    waits = collections.Counter()
    with open(path, errors="replace") as f:
        f.seek(offset)
        lines = f.read().splitlines()
    i = 0
    while i < len(lines):
        m = LOG_LINE.match(lines[i])
        i += 1
        if not m:
            continue
        _, pid, btype, app, st, level, msg = m.groups()
        if level == "LOG" and "still waiting for" in msg:
            waits[(btype, app.rstrip("0123456789-"), msg.split(" on ")[0].replace(f"process {pid} ", ""))] += 1
            continue
        if level not in ("ERROR", "FATAL", "PANIC", "WARNING"):
            continue
        counts[(btype, st, level, app.rstrip("0123456789-") or "-")] += 1
        # a background process (the maintenance worker: a failed tick, an attempt it
        # could not reap, which it logs as a WARNING) has nothing to warn about here
        if btype != "client backend" and len(background) < 10:
            background.append(f"{btype} {level} {st}: {msg}")
        if st == "40P01":
            block = [f"{btype} {app}: {msg}"]
            while i < len(lines):
                m2 = LOG_LINE.match(lines[i])
                if m2 and (m2.group(2) != pid or m2.group(6) not in ("DETAIL", "HINT", "CONTEXT", "STATEMENT")):
                    break
                block.append(lines[i] if not m2 else f"{m2.group(6)}: {m2.group(7)}")
                i += 1
            deadlocks.append(" / ".join(x.strip() for x in block))
    out = []
    if counts:
        out.append("| backend | client | SQLSTATE | level | count |")
        out.append("| --- | --- | --- | --- | ---: |")
        for (btype, st, level, app), n in sorted(counts.items()):
            out.append(f"| {btype} | {app} | {st} | {level} | {n} |")
    if waits:
        out.append("")
        out.append("Lock waits longer than deadlock_timeout (log_lock_waits):")
        out.append("")
        for (btype, app, what), n in sorted(waits.items()):
            out.append(f"- {btype} {app}: {what}: {n}")
    if deadlocks:
        out.append("")
        out.append("Deadlocks:")
        out.append("")
        for d in deadlocks[:10]:
            out.append(f"- {d}")
    return "\n".join(out), deadlocks, background


if __name__ == "__main__":
    sys.exit(main())
