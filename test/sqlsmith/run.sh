#!/usr/bin/env bash
# test/sqlsmith/run.sh — random SQL from sqlsmith against pg_sched on a throwaway
# PostgreSQL 15 cluster, then a look at the server log: no server process may die of a
# signal, and no internal error (SQLSTATE XX000) may come from pg_sched's code.
#
#   bash test/sqlsmith/run.sh                 SQLSMITH_SECONDS (default 600) in all
#   SQLSMITH_SECONDS=45 bash test/sqlsmith/run.sh     the short form
#
# What it does: installs Debian's sqlsmith if missing (apt-get, with sudo when not
# root); starts a cluster (as the OS user postgres when run as root; data in mktemp -d;
# 127.0.0.1 on a free port; pg_sched preloaded; log_error_verbosity = verbose so every
# error names the source file and function that raised it; the maintenance worker
# reaping in the test database every second); creates the database smith with the
# extension and a loaded fleet and queue (test/sqlsmith/setup.sql, through pg_sched's
# functions, as superuser); runs sqlsmith against it, the time split between two
# sessions' identities (SQLSMITH_AS=both, the default): the superuser (every function,
# pg_sched's internal ones included) and sqlsmith_admin, a login role that is a member
# of sched_admin only (every public function, through pg_sched's privilege checks).
# sqlsmith runs each statement in a transaction it rolls back, with a 1 s statement
# timeout, so the fleet stays as setup.sql left it; --exclude-catalog keeps it to
# pg_sched's tables and views (it still calls any function).  The cluster is stopped at
# exit, also on failure; nothing the server reads comes from the checkout.
#
# Environment:
#   SQLSMITH_SECONDS   total sqlsmith time (default 600)
#   SQLSMITH_AS        both | superuser | admin (default both)
#   SQLSMITH_SEED      sqlsmith's --seed (default: random; printed, to replay a run)
#   SQLSMITH_CATALOG=1 let sqlsmith query the catalogs too (default --exclude-catalog)
#   SQLSMITH_KEEP=1    keep the temporary directory (kept anyway on failure)
#
# Reports: statements run (sqlsmith's count), errors by SQLSTATE, errors raised in
# pg_sched's code by SQLSTATE, crashes ("terminated by signal" in the server log, with
# the statement the process was running).  Exit status non-zero on a crash, a PANIC, or
# an XX000 raised in pg_sched (each printed with its statement).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
PGBIN=/usr/lib/postgresql/15/bin
# shellcheck source=test/lib/common.sh
source test/lib/common.sh      # RUN_USER (postgres when root), as_run_user, free_port, apt_install_missing
SECONDS_TOTAL=${SQLSMITH_SECONDS:-600}
AS=${SQLSMITH_AS:-both}
SEED=${SQLSMITH_SEED:-$(( (RANDOM << 15) | RANDOM ))}

log() { printf '\n=== %s\n' "$*"; }

apt_install_missing sqlsmith
SO="$($PGBIN/pg_config --pkglibdir)/pg_sched.so"
[ -f "$SO" ] || { echo "run.sh: $SO is not installed (make install first)" >&2; exit 1; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/pg_sched-sqlsmith.XXXXXX")
chmod 755 "$WORK"
DATA="$WORK/data"
SERVER_LOG="$WORK/server.log"
cp test/sqlsmith/setup.sql "$WORK/setup.sql"
[ "$(id -u)" -eq 0 ] && chown -R "$RUN_USER" "$WORK"
status=1
cleanup() {
    if [ -f "$DATA/postmaster.pid" ]; then
        as_run_user "$PGBIN/pg_ctl" -D "$DATA" -m fast -w -t 120 stop >/dev/null 2>&1 || true
    fi
    rm -rf "$DATA"
    if [ $status -eq 0 ] && [ -z "${SQLSMITH_KEEP:-}" ]; then
        rm -rf "$WORK"
    else
        echo "server log, sqlsmith output and the report kept in $WORK"
    fi
}
trap cleanup EXIT

PGPORT=$(free_port)
as_run_user "$PGBIN/initdb" -D "$DATA" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 \
    >"$WORK/initdb.log"
{
    echo "port = $PGPORT"
    echo "listen_addresses = '127.0.0.1'"
    echo "unix_socket_directories = ''"
    echo "shared_preload_libraries = 'pg_sched'"
    echo "max_connections = 60"
    echo "fsync = off"
    echo "log_min_messages = warning"
    echo "log_error_verbosity = verbose"
    echo "log_line_prefix = '%m [%p] %e %u@%d '"
    echo "restart_after_crash = on"
    echo "track_activity_query_size = '32kB'"   # the statement of a crashed process, whole
    echo "sched.databases = 'smith'"
    echo "sched.maintenance_interval = 1"
} | as_run_user tee -a "$DATA/postgresql.conf" >/dev/null
as_run_user "$PGBIN/pg_ctl" -D "$DATA" -l "$SERVER_LOG" -w -t 60 start >/dev/null
export PGHOST=127.0.0.1 PGPORT PGUSER=postgres PGDATABASE=postgres
log "cluster on 127.0.0.1:$PGPORT (data $DATA)"

psql -X -q -v ON_ERROR_STOP=1 -c "CREATE DATABASE smith"
log "fleet and queue (test/sqlsmith/setup.sql)"
psql -X -v ON_ERROR_STOP=1 -d smith -f "$WORK/setup.sql"

case "$AS" in
    both) roles=(postgres sqlsmith_admin) ;;
    superuser) roles=(postgres) ;;
    admin) roles=(sqlsmith_admin) ;;
    *) echo "SQLSMITH_AS must be both, superuser or admin" >&2; exit 2 ;;
esac
per_role=$(( SECONDS_TOTAL / ${#roles[@]} ))
[ "$per_role" -ge 1 ] || per_role=1
catalog_opt=(--exclude-catalog)
[ "${SQLSMITH_CATALOG:-}" = 1 ] && catalog_opt=()

declare -A ran
for role in "${roles[@]}"; do
    log "sqlsmith as $role for $per_role s (seed $SEED)"
    t0=$(date +%s)
    rc=0
    timeout --signal=INT --kill-after=15 "$per_role" \
        sqlsmith --target="host=127.0.0.1 port=$PGPORT dbname=smith user=$role application_name=sqlsmith" \
                 "${catalog_opt[@]}" --seed="$SEED" --verbose \
        >"$WORK/sqlsmith-$role.out" 2>"$WORK/sqlsmith-$role.err" || rc=$?
    t1=$(date +%s)
    # sqlsmith counts its statements ("queries: N" every 800 and when it stops); the
    # server's pg_stat_database would not do: a crash resets the statistics
    n=$(grep -aE '^queries: [0-9]+' "$WORK/sqlsmith-$role.err" | tail -n 1 | tr -dc '0-9')
    ran[$role]=${n:-0}
    echo "sqlsmith as $role: exit $rc after $(( t1 - t0 )) s, ${ran[$role]} statements" \
         "($(( ${ran[$role]} / ( t1 - t0 > 0 ? t1 - t0 : 1 ) ))/s)"
    if [ $rc -ne 124 ] && [ $rc -ne 0 ] && [ $rc -ne 130 ]; then
        echo "sqlsmith ended early; the end of its output:"; tail -n 20 "$WORK/sqlsmith-$role.err"
    fi
done

log "server log"
nm --defined-only "$SO" | awk '$2 ~ /^[tTwW]$/ { print $3 }' >"$WORK/pg_sched.symbols"
ls src/*.c include/*.h | xargs -n1 basename >"$WORK/pg_sched.files"
total_ran=0
for role in "${roles[@]}"; do total_ran=$(( total_ran + ${ran[$role]} )); done
scan_rc=0
python3 - "$SERVER_LOG" "$WORK/pg_sched.symbols" "$WORK/pg_sched.files" "$WORK/report.txt" "$total_ran" \
    <<'PY' || scan_rc=$?
import collections, os, re, sys

logfile, symfile, filesfile, report, total_ran = sys.argv[1:6]
syms = set(l.strip() for l in open(symfile) if l.strip())
files = set(l.strip() for l in open(filesfile) if l.strip())
# "%m [%p] %e %u@%d LEVEL:  SQLSTATE: message" (verbose puts the SQLSTATE after the level)
head = re.compile(r'^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ \S+ \[(\d+)\] (\w{5}) (\S*) (ERROR|FATAL|PANIC|WARNING|LOG):  (?:\w{5}: )?(.*)$')
loc = re.compile(r'^\d{4}-\d\d-\d\d \S+ \S+ \[\d+\] \w{5} \S* LOCATION:  (\S+), (\S+):(\d+)')
more = re.compile(r'^\d{4}-\d\d-\d\d \S+ \S+ \[\d+\] \w{5} \S* (STATEMENT|DETAIL):  (.*)$')

# events: ERROR/FATAL/PANIC/WARNING/LOG lines, each with its LOCATION, STATEMENT and
# DETAIL (a crash's DETAIL is "Failed process was running: <statement>"); the lines of
# a multi-line statement or detail follow without the prefix
events = []
cur = None
field = None
stamp = re.compile(r'^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d')
for line in open(logfile, errors='replace'):
    if not stamp.match(line):
        if field is not None and cur is not None and len(cur[field]) < 20000:
            cur[field] += '\n' + line.rstrip('\n')
        continue
    field = None
    m = head.match(line)
    if m:
        cur = {'pid': m.group(1), 'state': m.group(2), 'who': m.group(3), 'level': m.group(4),
               'msg': m.group(5), 'loc': None, 'stmt': None, 'detail': None}
        events.append(cur)
        continue
    m = loc.match(line)
    if m and cur is not None and cur['loc'] is None:
        cur['loc'] = (m.group(1), os.path.basename(m.group(2)), m.group(3))
        continue
    m = more.match(line)
    if m and cur is not None:
        f = 'stmt' if m.group(1) == 'STATEMENT' else 'detail'
        if cur[f] is None:
            cur[f] = m.group(2)
            field = f

def ours(e):
    return e['loc'] is not None and e['loc'][1] in files and e['loc'][0] in syms

errors = [e for e in events if e['level'] == 'ERROR']
by_state = collections.Counter(e['state'] for e in errors)
ours_by_state = collections.Counter(e['state'] for e in errors if ours(e))
crashes = [e for e in events if e['level'] == 'LOG' and 'terminated by signal' in e['msg']]
panics = [e for e in events if e['level'] == 'PANIC']
fatals = collections.Counter(e['msg'][:80] for e in events if e['level'] == 'FATAL')
xx_ours = [e for e in errors if e['state'] == 'XX000' and ours(e)]
xx_other = [e for e in errors if e['state'] == 'XX000' and not ours(e)]

out = []
out.append('statements run by sqlsmith: %s' % total_ran)
out.append('errors (ERROR), total:      %d' % len(errors))
for s, n in by_state.most_common():
    out.append('    %6d  %s' % (n, s))
out.append('errors raised in pg_sched code (LOCATION in src/*.c): %d' % sum(ours_by_state.values()))
for s, n in ours_by_state.most_common():
    sample = next(e for e in errors if ours(e) and e['state'] == s)
    out.append('    %6d  %s  e.g. %s (%s:%s): %s' % (n, s, sample['loc'][0], sample['loc'][1],
                                                    sample['loc'][2], sample['msg'][:100]))
out.append('XX000 in pg_sched:          %d' % len(xx_ours))
out.append('XX000 elsewhere:            %d' % len(xx_other))
for m, n in collections.Counter('%s (%s:%s): %s' % (e['loc'] + (e['msg'][:90],)) if e['loc'] else e['msg'][:120]
                                for e in xx_other).most_common(10):
    out.append('    %6d  %s' % (n, m))
out.append('FATAL:                      %d' % sum(fatals.values()))
for m, n in fatals.most_common(5):
    out.append('    %6d  %s' % (n, m))
out.append('PANIC:                      %d' % len(panics))
out.append('crashes (terminated by signal): %d' % len(crashes))
for e in crashes[:10]:
    out.append('    ' + e['msg'][:300])
    out.append('    ' + (e['detail'] or '?')[:3000].replace('\n', '\n    '))
for e in xx_ours[:20]:
    out.append('\nXX000 in pg_sched: %s at %s (%s:%s)\n  statement: %s' % (e['msg'], e['loc'][0], e['loc'][1],
                                                                          e['loc'][2], (e['stmt'] or '?')[:2000]))
text = '\n'.join(out)
open(report, 'w').write(text + '\n')
print(text)
sys.exit(3 if (xx_ours or crashes or panics) else 0)
PY

for role in "${roles[@]}"; do
    echo "sqlsmith as $role: ${ran[$role]} statements," \
         "$(grep -aE '^error rate: ' "$WORK/sqlsmith-$role.err" | tail -n 1)"
done
echo "seed: $SEED (SQLSMITH_SEED=$SEED replays the query stream, given the same fleet)"
if [ $scan_rc -ne 0 ]; then
    [ $scan_rc -eq 3 ] && echo "run.sh: a crash, a PANIC or an internal error in pg_sched (see above)"
    [ $scan_rc -ne 3 ] && echo "run.sh: the log scan failed (exit $scan_rc)"
    exit 1
fi
status=0
echo "run.sh: no crash, no internal error in pg_sched"
