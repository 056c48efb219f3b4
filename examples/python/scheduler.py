#!/usr/bin/env python3
"""A pg_sched scheduler loop: place ready requests onto workers, reap lost attempts.

    python3 scheduler.py                      # dispatch every 0.2 s, reap every 1 s
    python3 scheduler.py --no-reap            # the maintenance background worker reaps
    python3 scheduler.py --audit audit.jsonl  # also check every call (used by the tests)
    python3 scheduler.py --pooler             # through pgbouncer, pool_mode = transaction

The connection comes from the PG* environment variables or --dsn; its role needs
sched_scheduler (--audit: the extension's owner).  Several schedulers may run at once:
dispatch_next takes disjoint requests (FOR UPDATE SKIP LOCKED).  A lost connection is
opened again (with a backoff); each call is a transaction of its own, so nothing is
lost with it.  No session state: it works through a pooler in transaction mode
(--pooler turns off psycopg's prepared statements, which such a pooler cannot keep).

A request that waits only because the fleet is full stays ready and keeps its place in
the queue: the first dispatch_next after a slot frees places it.  So the loop needs no
cleverness -- call dispatch_next often, and again at once when a call was full.

--audit FILE: each dispatch_next runs in a transaction that first locks the fleet tables
(no attempt can end and no heartbeat can land while the call and its check run), and
then asks, in the same transaction, whether the call left a ready request that a worker
could take right now.  One JSON line per call is appended to FILE:
    {"ts": ..., "placed": 3, "tried": 3, "left_fitting": 0, "free_slots": 9}
A call that placed fewer than it was allowed while left_fitting > 0 left both a free slot
and a request that fits it: that would be a scheduling bug.  (Auditing serializes the
call with the workers; do not run it in production.  Locking the tables needs their
owner's rights, which no pg_sched role has.)
"""

import argparse
import json
import logging
import signal
import time

import psycopg

log = logging.getLogger("scheduler")

DISPATCH = "SELECT outcome, request_id, node_id, detail FROM sched.dispatch_next(%s)"

# Requests that some node admits now (blocked = 'none'), ready, not claimed.
LEFT_FITTING = """
SELECT count(*) FROM sched.pending
 WHERE blocked = 'none' AND state = 'PENDING' AND next_try_at <= now()"""

# Free slots of the workers dispatch may use now.
FREE_SLOTS = """
SELECT coalesce(sum(w.slots - w.live_attempts), 0)::int
  FROM sched.worker w JOIN sched.node n ON n.node_id = w.node_id
 WHERE n.management_status = 'ACTIVE' AND w.runtime_state = 'READY'
   AND w.scheduling_status = 'ELIGIBLE'
   AND w.last_heartbeat >= now() - current_setting('sched.heartbeat_ttl')::interval"""


def dispatch(conn, batch):
    """One dispatch_next call in its own transaction; returns its rows."""
    return conn.execute(DISPATCH, (batch,)).fetchall()


def dispatch_audited(conn, batch, audit):
    """dispatch_next and its check, in one transaction; appends the check to `audit`."""
    with conn.transaction():
        # EXCLUSIVE on worker: no heartbeat, finish or registration holds (or takes) a
        # worker row lock while we run -- dispatch passes over rows that others hold, and
        # such a pair would look free to the check.  SHARE on node: no finish releases
        # resources meanwhile.  Our own dispatch_next's writes do not conflict with our
        # own locks.  Worker before node: finish_attempt writes them in that order.
        conn.execute("LOCK TABLE sched.worker IN EXCLUSIVE MODE")
        conn.execute("LOCK TABLE sched.node IN SHARE MODE")
        rows = conn.execute(DISPATCH, (batch,)).fetchall()
        left_fitting = conn.execute(LEFT_FITTING).fetchone()[0]
        free_slots = conn.execute(FREE_SLOTS).fetchone()[0]
    placed = sum(1 for r in rows if r[0] == "DISPATCHED")
    rec = {"ts": time.time(), "placed": placed, "tried": len(rows),
           "left_fitting": left_fitting, "free_slots": free_slots}
    if placed < batch and left_fitting > 0:
        rec["violation"] = True
        rec["outcomes"] = [[r[0], r[1], r[3]] for r in rows]
        log.error("dispatch_next(%d) placed %d and left %d fitting requests with %d free slots",
                  batch, placed, left_fitting, free_slots)
    audit.write(json.dumps(rec) + "\n")
    audit.flush()
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dsn", default="", help="libpq conninfo (default: PG* environment)")
    p.add_argument("--batch", type=int, default=100, help="dispatch_next(max_dispatches)")
    p.add_argument("--interval", type=float, default=0.2, help="seconds between calls")
    p.add_argument("--reap-every", type=float, default=1.0, help="seconds between reap_expired")
    p.add_argument("--no-reap", action="store_true", help="a background worker reaps")
    p.add_argument("--audit", metavar="FILE", help="check every call, append JSON lines to FILE")
    p.add_argument("--pooler", action="store_true",
                   help="connected through a pooler in transaction mode (pgbouncer): no prepared statements")
    p.add_argument("-v", "--verbose", action="store_true", help="log every placement")
    args = p.parse_args()
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s scheduler %(levelname)s %(message)s")

    stop = False

    def on_signal(signum, frame):
        nonlocal stop
        stop = True
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    audit = open(args.audit, "a") if args.audit else None
    conn = None
    next_reap = time.monotonic()
    placed_total = 0
    delay = 0.1
    while not stop:
        try:
            if conn is None or conn.closed:
                conn = psycopg.connect(args.dsn, autocommit=True,
                                       prepare_threshold=None if args.pooler else 5,
                                       fallback_application_name="pg_sched scheduler",
                                       keepalives_idle=30, keepalives_interval=10, keepalives_count=3)
            if not args.no_reap and time.monotonic() >= next_reap:
                lost = conn.execute("SELECT sched.reap_expired()").fetchone()[0]
                if lost:
                    log.info("reaped %d attempts whose lease expired", lost)
                next_reap = time.monotonic() + args.reap_every
            rows = dispatch_audited(conn, args.batch, audit) if audit else dispatch(conn, args.batch)
            delay = 0.1
        except psycopg.OperationalError as e:
            # the connection lost (opened again next time round), or a transient error
            log.warning("%s: trying again in %.1f s", str(e).strip().split("\n")[0], delay)
            time.sleep(delay)
            delay = min(delay * 2, 5.0)
            continue
        placed = 0
        for outcome, request_id, node_id, detail in rows:
            if outcome == "DISPATCHED":
                placed += 1
                log.debug("request %s -> %s", request_id, node_id)
            elif outcome != "UNSCHEDULABLE":    # UNSCHEDULABLE: waits, see sched.pending
                log.info("request %s: %s %s", request_id, outcome, detail or "")
        placed_total += placed
        if placed < args.batch:     # a full batch: there may be more, go again at once
            time.sleep(args.interval)
    log.info("stopped after %d placements", placed_total)


if __name__ == "__main__":
    main()
