#!/usr/bin/env node
/*
 * A pg_sched worker in Node.js, written against the SQL worker protocol only, with npm's
 * `pg` package (node-postgres) and nothing else.
 *
 *     node worker.js --node node-a --capability demo --versions 1.0 --slots 4
 *
 * The connection comes from the usual PG* environment variables (PGHOST, PGPORT, PGUSER,
 * PGDATABASE, PGPASSWORD) or --dsn postgres://...; its role needs sched_worker, and
 * sched_admin too to declare its node (--cpu, --memory-mb, --gpus or --labels).
 *
 *   1. [upsert_node +] register_worker -> (worker_id, generation): this session is READY;
 *   2. wait_commands, in a loop, on a connection of its own: it returns at once when
 *      there are commands (START: run an attempt, CANCEL: stop one), otherwise sleeps in
 *      the server until one commits, or WAIT_SECONDS;
 *   3. start_attempt, the work, finish_attempt: up to --slots at once, on a pool;
 *   4. on timers, on the pool: heartbeat every heartbeat_ttl / 3, and renew the lease of
 *      every attempt it holds every lease_ttl / 3 (waiting and renewing are not heartbeats);
 *   5. the wait connection lost (server restart, network, pg_terminate_backend): connect
 *      again with a backoff, register again (a new generation) and carry on with the
 *      attempts it holds; one whose lease was lost meanwhile is dropped unreported.  A
 *      start or finish that fails with its connection is repeated (both may be).
 *
 * Pooler-safe: no session state (no LISTEN, no SET, no named prepared statement; every
 * call is a statement of its own in autocommit), so it runs unchanged through pgbouncer
 * in transaction mode.
 *
 * The "work" is driven by the payload given to sched.submit:
 *     {"task": 17, "sleep": 0.2}   sleep 0.2 s, then SUCCEEDED with {"task": 17, ...}
 *     {"fail": true}               FAILED (pg_sched retries it while attempts remain)
 *
 * SIGTERM or Ctrl-C: stop taking work (heartbeat DRAINING), finish what was started,
 * then heartbeat STOPPED and exit 0.  A second one abandons the running attempts: they
 * are reported FAILED, so pg_sched retries them elsewhere (while attempts remain).
 */
'use strict'

const { parseArgs } = require('node:util')
const { setTimeout: sleep } = require('node:timers/promises')
const pg = require('pg')

// The longest wait_commands.  A drain waits for the one in flight (node-postgres has no
// way to cancel it), then looks every DRAIN_WAIT_SECONDS until the last attempt ends.
const WAIT_SECONDS = 5
const DRAIN_WAIT_SECONDS = 0.2
const RETRY_MIN_MS = 100        // reconnecting, and repeating a call: from this,
const RETRY_MAX_MS = 5000       // doubling up to this

const SQL = {
  upsertNode: 'SELECT FROM sched.upsert_node($1, labels => $2, cpu_millis => $3, memory_mb => $4, gpus => $5)',
  register: 'SELECT worker_id, generation FROM sched.register_worker($1, $2, $3, slots => $4)',
  settings: "SELECT extract(epoch FROM current_setting('sched.heartbeat_ttl')::interval)::float8 AS heartbeat," +
            "       extract(epoch FROM current_setting('sched.lease_ttl')::interval)::float8 AS lease",
  wait: 'SELECT kind, attempt_id, lease_version, attempt_number, payload' +
        '  FROM sched.wait_commands($1, $2, $3, make_interval(secs => $4))',
  heartbeat: 'SELECT FROM sched.heartbeat($1, $2, runtime_state => $3)',
  renew: 'SELECT sched.renew_lease($1, $2)',
  start: 'SELECT sched.start_attempt($1, $2)',
  finish: 'SELECT sched.finish_attempt($1, $2, $3, $4)',
}

let args
function log (level, msg) {
  if (level === 'DEBUG' && !args.verbose) return
  process.stderr.write(`${new Date().toISOString()} ${args.node} ${level} ${msg}\n`)
}
const describe = (e) => `${e.message}${e.code ? ` (SQLSTATE ${e.code})` : ''}`

// The connection broke, or could not be made: node-postgres rejects with a plain Error
// for a broken socket or a failed connect, and with a DatabaseError (the SQLSTATE in
// .code) for what the server said -- class 08, or 57P01 and the like (terminated,
// shutting down, starting up).
function connectionLost (e) {
  return !(e instanceof pg.DatabaseError) || /^(08|57P)/.test(e.code) || e.code === '53300'
}
// Worth repeating: connection problems, deadlocks, serialization failures, lock timeouts.
const transient = (e) => connectionLost(e) || ['40001', '40P01', '55P03'].includes(e.code)
// SQLSTATE 55000: a stale lease_version or an attempt no longer live (from the attempt
// calls), or a stale generation (from heartbeat and wait_commands).
const notInPrerequisiteState = (e) => e instanceof pg.DatabaseError && e.code === '55000'

/* An attempt this worker holds, from its START command until it is finished or lost. */
class Attempt {
  constructor (cmd) {
    this.id = cmd.attempt_id
    this.leaseVersion = cmd.lease_version     // bigint: a string, passed back as it came
    this.attemptNumber = cmd.attempt_number
    this.payload = cmd.payload && typeof cmd.payload === 'object' ? cmd.payload : {}
    this.stopper = new AbortController()      // aborted on CANCEL, abandon, or loss
    this.lost = false         // the lease is gone: report nothing any more
    this.abandoned = false    // the worker is shutting down: report FAILED, have it retried
    this.finishing = false    // finish_attempt is under way
  }

  get stopped () { return this.stopper.signal.aborted }
  stop () { this.stopper.abort() }
}

/* One registration: its wait connection and generation.  Losing that connection ends it. */
class Session {
  constructor (config) {
    this.waiter = new pg.Client(config)       // wait_commands sleeps in its connection
    this.waiter.on('error', (e) => log('DEBUG', `wait connection: ${e.message}`))
    this.closed = false
    this.closer = new AbortController()       // ends the heartbeat timer's sleep
    this.heartbeats = Promise.resolve()       // heartbeats go one after another, in order
    this.drainSent = false    // a DRAINING heartbeat of this session has committed
    this.stoppedSent = false  // the last heartbeat, STOPPED, is under way
    this.ended = new Promise((resolve) => { this.end = resolve })
  }
}

class Worker {
  constructor (a) {
    this.args = a
    this.config = {
      ...(a.dsn ? { connectionString: a.dsn } : {}),    // else the PG* variables
      application_name: `pg_sched worker ${a.node}`,
      keepAlive: true,
      connectionTimeoutMillis: 10000,
    }
    // register, heartbeat, renew, start, finish: short calls, any connection will do
    this.pool = new pg.Pool({ ...this.config, max: a.slots + 2 })
    this.pool.on('error', (e) => log('DEBUG', `idle pool connection closed: ${e.message}`))
    this.held = new Map()     // attempt_id -> Attempt, across sessions
    this.queue = []           // attempts waiting for a free slot
    this.running = 0
    this.session = null
    this.stopping = 0         // SIGTERM / SIGINT received (how many)
    this.waking = new AbortController()       // the second signal ends a reconnection's pause
    this.exiting = new AbortController()      // ends the renewal timer
  }

  // -- calls about attempts (on the pool) ---------------------------------------------------

  // Runs one call about attempt `a`, repeated after a transient error (start_attempt and
  // finish_attempt may be repeated).  Returns true, or false when the lease is lost.
  async call (a, what, sql, params) {
    for (let delay = RETRY_MIN_MS; ; delay = Math.min(2 * delay, RETRY_MAX_MS)) {
      try {
        await this.pool.query(sql, params)
        return true
      } catch (e) {
        if (notInPrerequisiteState(e)) {
          // a stale lease_version or an attempt no longer live: it was lost (its lease
          // expired and it was reaped).  Another attempt may own the step: stop, report
          // nothing more, do not retry.
          log('WARNING', `attempt ${a.id}: lost (${e.message})`)
          a.lost = true
          return false
        }
        if (!transient(e)) throw e
        if (a.lost || this.stopping > 1) return false
        log('WARNING', `attempt ${a.id}: ${what}: ${e.message}: trying again in ${delay} ms`)
        await sleep(delay)
      }
    }
  }

  async renewAll () {
    let ok = true
    for (const a of [...this.held.values()]) {
      try {
        await this.pool.query(SQL.renew, [a.id, a.leaseVersion])
      } catch (e) {
        if (notInPrerequisiteState(e)) {
          if (!a.finishing) {           // (a finish racing with us is not a loss)
            log('WARNING', `attempt ${a.id}: lease lost, dropping it`)
            a.lost = true
            a.stop()
          }
        } else {
          log('WARNING', `renew_lease: ${describe(e)}`)
          ok = false
          if (connectionLost(e)) break
        }
      }
    }
    return ok
  }

  async renewLoop () {
    let next = this.renewEvery
    for (;;) {
      try { await sleep(next, undefined, { signal: this.exiting.signal }) } catch { return }
      // after a failure, again soon: a lease lasts only three renewal periods
      next = (await this.renewAll()) ? this.renewEvery : Math.min(1000, this.renewEvery)
    }
  }

  // -- the session --------------------------------------------------------------------------

  async open () {
    const a = this.args
    const s = new Session(this.config)
    try {
      await s.waiter.connect()
      if ([a.labels, a.cpu, a.memoryMb, a.gpus].some((v) => v !== undefined)) {
        // the worker declares its node: that is the fleet's (sched_admin)
        await this.pool.query(SQL.upsertNode, [a.node, a.labels === undefined ? null : JSON.stringify(a.labels),
          a.cpu ?? null, a.memoryMb ?? null, a.gpus ?? null])
      }
      // Attempts of an earlier session that this process holds stay its own: start,
      // renew and finish take the lease_version, not the generation.
      const reg = (await this.pool.query(SQL.register, [a.node, a.capability, a.versions, a.slots])).rows[0]
      s.generation = reg.generation
      this.workerId = reg.worker_id
      // the settings of the database or role, as the server gives them to every session
      const ttl = (await this.pool.query(SQL.settings)).rows[0]
      s.heartbeatEvery = ttl.heartbeat * 1000 / 3
      this.renewEvery = ttl.lease * 1000 / 3
    } catch (e) {
      await this.close(s)
      throw e
    }
    log('INFO', `registered worker ${this.workerId} generation ${s.generation} on node ${a.node} (${a.slots} slots)`)
    return s
  }

  async close (s, why) {
    if (s.closed) return
    s.closed = true
    s.closer.abort()
    s.end(why)
    await s.waiter.end().catch(() => {})
  }

  heartbeat (s, final) {
    // One after another: a READY sent just before a DRAINING must not commit after it,
    // nor anything after the STOPPED.  The state is the one when the call is sent.
    if (final) s.stoppedSent = true
    const p = s.heartbeats.then(async () => {
      if (s.stoppedSent && !final) return
      const state = final ? 'STOPPED' : this.stopping ? 'DRAINING' : 'READY'
      await this.pool.query(SQL.heartbeat, [this.workerId, s.generation, state])
      if (state === 'DRAINING') s.drainSent = true
    })
    s.heartbeats = p.catch(() => {})
    return p
  }

  // A heartbeat's error: a stale generation ends the program (another process
  // registered this worker since, it owns it now), unless this session already ended.
  heartbeatFailed (s, e) {
    if (s.closed) return
    if (notInPrerequisiteState(e)) {
      log('ERROR', `heartbeat: ${e.message}: replaced by a newer session, exiting`)
      this.close(s, 'fatal')
    } else if (transient(e)) {
      log('WARNING', `heartbeat: ${describe(e)}`)
    } else {
      log('ERROR', `heartbeat: ${describe(e)}`)
      this.close(s, 'fatal')
    }
  }

  async heartbeatLoop (s) {
    let next = s.heartbeatEvery       // registering was a heartbeat
    for (;;) {
      try { await sleep(next, undefined, { signal: s.closer.signal }) } catch { return }
      try {
        await this.heartbeat(s)
        next = s.heartbeatEvery
      } catch (e) {
        this.heartbeatFailed(s, e)
        next = Math.min(1000, s.heartbeatEvery)
      }
    }
  }

  // The first signal, or a new session while stopping: no more work once DRAINING has
  // committed (a registration made the worker READY again).
  drain (s) {
    this.heartbeat(s).catch((e) => this.heartbeatFailed(s, e))
  }

  abandonAll () {
    log('INFO', `abandoning ${this.held.size} attempts`)
    for (const a of this.held.values()) {
      a.abandoned = true
      a.stop()
    }
  }

  // Serves one session until the drain is over, its connection is lost, or it fails.
  async serve (s) {
    this.session = s
    this.heartbeatLoop(s)
    if (this.stopping) this.drain(s)
    this.renewAll()                   // renewals may have been missed meanwhile
    while (!s.closed) {
      const draining = s.drainSent    // committed before this wait starts
      let cmds
      try {
        cmds = (await s.waiter.query(SQL.wait, [this.workerId, s.generation, this.args.slots,
          this.stopping ? DRAIN_WAIT_SECONDS : WAIT_SECONDS])).rows
      } catch (e) {
        if (s.closed) break
        if (connectionLost(e)) {
          log('WARNING', `wait connection lost (${e.message}): connecting again`)
          this.close(s, 'lost')
        } else if (notInPrerequisiteState(e)) {
          // a stale generation (another process registered this worker), or
          // wait_commands cannot work here (pg_sched not preloaded)
          log('ERROR', `wait_commands: ${e.message}: the worker session ended, exiting`)
          this.close(s, 'fatal')
        } else if (transient(e)) {
          log('WARNING', `wait_commands: ${describe(e)}: trying again`)
          await sleep(1000)
        } else {
          log('ERROR', `wait_commands: ${describe(e)}`)
          this.close(s, 'fatal')
        }
        continue
      }
      for (const cmd of cmds) {
        if (cmd.kind === 'START') {
          this.take(new Attempt(cmd))
        } else if (cmd.kind === 'CANCEL') {
          const a = this.held.get(cmd.attempt_id)
          if (a) {                    // (one this process does not hold: ignored)
            log('INFO', `attempt ${a.id}: cancel requested`)
            a.stop()
          }
        }
      }
      // Nothing can be dispatched to us once DRAINING has committed: a wait begun after
      // that which brought nothing, with nothing held, means we are done.
      if (draining && cmds.length === 0 && this.held.size === 0) {
        try {
          await this.heartbeat(s, true)
        } catch (e) {
          log('WARNING', `could not report STOPPED: ${describe(e)}`)
        }
        log('INFO', 'stopped')
        await this.close(s, 'stopped')
      }
    }
    return s.ended
  }

  // -- attempts -------------------------------------------------------------------------------

  take (a) {
    if (this.stopping > 1) {    // dispatched before we drained, but we are leaving
      a.abandoned = true
      a.stop()
    }
    this.held.set(a.id, a)
    this.queue.push(a)
    this.startQueued()
  }

  // Runs queued attempts while slots are free.  (Dispatch never gives a worker more
  // attempts than its slots: the queue is only a safety net.)
  startQueued () {
    while (this.running < this.args.slots && this.queue.length > 0) {
      const a = this.queue.shift()
      this.running++
      this.runAttempt(a).finally(() => {
        this.running--
        this.held.delete(a.id)
        this.startQueued()
      })
    }
  }

  async runAttempt (a) {
    try {
      let outcome, detail
      if (!a.stopped) {
        if (!await this.call(a, 'start_attempt', SQL.start, [a.id, a.leaseVersion])) return
        [outcome, detail] = await this.work(a)
      } else {
        [outcome, detail] = ['CANCELLED', {}]   // cancelled before it started
      }
      if (a.lost) return
      if (a.abandoned) {
        [outcome, detail] = ['FAILED', { error: 'the worker shut down before the task ended' }]
      } else if (a.stopped && outcome === 'SUCCEEDED') {
        outcome = 'CANCELLED'
      }
      a.finishing = true
      Object.assign(detail, {
        task: a.payload.task ?? null, node: this.args.node, worker: this.workerId, attempt_number: a.attemptNumber,
      })
      if (await this.call(a, 'finish_attempt', SQL.finish, [a.id, a.leaseVersion, outcome, JSON.stringify(detail)])) {
        log('DEBUG', `attempt ${a.id} (task ${a.payload.task}, try ${a.attemptNumber}): ${outcome}`)
      }
    } catch (e) {
      log('ERROR', `attempt ${a.id}: ${describe(e)}`)
    }
  }

  /* The task itself: returns [outcome, detail].  Replace this with real work. */
  async work (a) {
    try {
      const seconds = Number(a.payload.sleep ?? 0)
      if (!(seconds >= 0)) throw new Error(`bad "sleep" in the payload: ${JSON.stringify(a.payload.sleep)}`)
      try {
        await sleep(seconds * 1000, undefined, { signal: a.stopper.signal })
      } catch {
        return ['CANCELLED', {}]
      }
      if (a.payload.fail) return ['FAILED', { error: 'the payload asked to fail' }]
      return ['SUCCEEDED', {}]
    } catch (e) {   // a bad payload is the task's failure, not ours
      return ['FAILED', { error: String(e) }]
    }
  }

  // -- the whole life ---------------------------------------------------------------------------

  onSignal (name) {
    this.stopping++
    const s = this.session && !this.session.closed ? this.session : null
    if (this.stopping === 1) {
      log('INFO', `${name}: draining ${this.held.size} attempts`)
      if (s) this.drain(s)
    } else if (this.stopping === 2) {
      this.abandonAll()
      this.waking.abort()
    }
  }

  async run () {
    let delay = 0
    for (;;) {
      if (delay > 0) {
        try { await sleep(delay, undefined, { signal: this.waking.signal }) } catch { }
      }
      if (this.stopping > 1) {
        log('ERROR', 'abandoned while the database was unreachable')
        return 1
      }
      let s
      try {
        s = await this.open()
      } catch (e) {
        if (!transient(e)) {
          log('ERROR', `cannot register: ${describe(e)}`)
          return 1
        }
        delay = Math.min(Math.max(2 * delay, RETRY_MIN_MS), RETRY_MAX_MS)
        log('WARNING', `cannot register (${e.message}): trying again in ${delay} ms`)
        continue
      }
      if (!this.renewing) {
        this.renewing = true
        this.renewLoop()
      }
      delay = 0
      const why = await this.serve(s)
      if (why === 'stopped') {
        this.exiting.abort()
        await this.pool.end().catch(() => {})
        return 0
      }
      if (why !== 'lost') return 1
      delay = RETRY_MIN_MS
    }
  }
}

function parseInteger (name, v, min) {
  if (v === undefined) return undefined
  const n = Number(v)
  if (!Number.isInteger(n) || n < min) usage(`--${name} must be an integer >= ${min}`)
  return n
}

function usage (error) {
  process.stderr.write(`${error ? `worker.js: ${error}\n` : ''}` +
`usage: node worker.js --node NODE [--capability demo] [--versions 1.0[,2.0...]] [--slots 4]
                      [--cpu MILLIS] [--memory-mb MB] [--gpus N] [--labels JSON]
                      [--dsn postgres://...] [-v]

A pg_sched worker.  --node: the node id (created or updated when a capacity or --labels is
given; that needs sched_admin).  --slots: attempts run concurrently.  -v: log every attempt.
The connection: --dsn, else the PG* environment variables.
`)
  process.exit(error ? 2 : 0)
}

function main () {
  let v
  try {
    v = parseArgs({
      options: {
        dsn: { type: 'string' },
        node: { type: 'string' },
        capability: { type: 'string', default: 'demo' },
        versions: { type: 'string', default: '1.0' },
        slots: { type: 'string', default: '4' },
        cpu: { type: 'string' },
        'memory-mb': { type: 'string' },
        gpus: { type: 'string' },
        labels: { type: 'string' },
        verbose: { type: 'boolean', short: 'v', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
    }).values
  } catch (e) {
    usage(e.message)
  }
  if (v.help) usage()
  args = {
    dsn: v.dsn,
    node: v.node,
    capability: v.capability,
    versions: v.versions.split(','),
    slots: parseInteger('slots', v.slots, 1),
    cpu: parseInteger('cpu', v.cpu, 0),
    memoryMb: parseInteger('memory-mb', v['memory-mb'], 0),
    gpus: parseInteger('gpus', v.gpus, 0),
    labels: undefined,
    verbose: v.verbose,
  }
  if (!args.node) usage('--node is required')
  if (v.labels !== undefined) {
    try { args.labels = JSON.parse(v.labels) } catch (e) { usage(`--labels: ${e.message}`) }
  }

  const w = new Worker(args)
  process.on('SIGTERM', () => w.onSignal('SIGTERM'))
  process.on('SIGINT', () => w.onSignal('SIGINT'))
  w.run().then((code) => process.exit(code), (e) => {
    log('ERROR', e.stack)
    process.exit(1)
  })
}

main()
