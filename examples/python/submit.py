#!/usr/bin/env python3
"""Submit N tasks to pg_sched: one execution with one step each, carrying a payload.

    python3 submit.py --count 200 --sleep 0.1 --sleep-max 0.3
    python3 submit.py --count 5 --fail      # payloads that make worker.py report FAILED

The worker receives the payload in its START command (also for retries), e.g.
{"task": 17, "sleep": 0.23}.  Prints one line per task: task, execution_id, step_id,
request_id.
"""

import argparse
import random
import uuid

import psycopg
from psycopg.types.json import Jsonb


def submit_tasks(conn, count, capability="demo", version="1.0", first_task=1,
                 sleep=(0.1, 0.3), fail=False, **placement):
    """Submits `count` tasks in one transaction; returns [(task, execution_id, step_id, request_id)].

    `placement` passes any other sched.submit parameter by name (priority, tenant,
    required_labels, min_cpu_millis, max_attempts, ...)."""
    extra = "".join(f", {name} => %({name})s" for name in placement)
    sql = ("SELECT sched.submit(%(execution_id)s, %(step_id)s, %(capability)s, %(version)s,"
           f" payload => %(payload)s{extra})")
    out = []
    with conn.transaction():
        for task in range(first_task, first_task + count):
            payload = {"task": task, "sleep": round(random.uniform(*sleep), 3)}
            if fail:
                payload["fail"] = True
            params = {k: Jsonb(v) if isinstance(v, dict) else v for k, v in placement.items()}
            params.update(execution_id=uuid.uuid4(), step_id=uuid.uuid4(), capability=capability,
                          version=version, payload=Jsonb(payload))
            request_id = conn.execute(sql, params).fetchone()[0]
            out.append((task, params["execution_id"], params["step_id"], request_id))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dsn", default="", help="libpq conninfo (default: PG* environment)")
    p.add_argument("--count", type=int, default=10)
    p.add_argument("--first-task", type=int, default=1, help="number of the first task")
    p.add_argument("--capability", default="demo")
    p.add_argument("--version", default="1.0")
    p.add_argument("--sleep", type=float, default=0.1, help="shortest task, seconds")
    p.add_argument("--sleep-max", type=float, default=None, help="longest task (default: --sleep)")
    p.add_argument("--fail", action="store_true", help="tasks that always fail")
    p.add_argument("--max-attempts", type=int, default=3)
    p.add_argument("--pooler", action="store_true",
                   help="connected through a pooler in transaction mode (pgbouncer): no prepared statements")
    p.add_argument("-q", "--quiet", action="store_true", help="print only the count")
    args = p.parse_args()

    # one transaction for all: a pooler in transaction mode keeps it on one server
    # connection; psycopg would prepare the repeated statement, which such a pooler
    # cannot keep (the next client of that server connection would collide with it)
    with psycopg.connect(args.dsn, prepare_threshold=None if args.pooler else 5,
                         fallback_application_name="pg_sched submit") as conn:
        tasks = submit_tasks(conn, args.count, args.capability, args.version, args.first_task,
                             (args.sleep, args.sleep_max or args.sleep), args.fail,
                             max_attempts=args.max_attempts)
    if args.quiet:
        print(f"submitted {len(tasks)} tasks")
    else:
        for task, execution_id, step_id, request_id in tasks:
            print(task, execution_id, step_id, request_id)


if __name__ == "__main__":
    main()
