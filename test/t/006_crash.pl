#!/usr/bin/perl
#
# 006_crash.pl — acknowledged dispatches survive crashes under load, and the shared
# memory state starts clean (issue 12, item 3).
#
# One node, pg_sched preloaded, a maintenance worker (sched.databases), restart_after_crash
# on, and, by ALTER DATABASE, a 2 s lease (so the reaper is busy all along) and a 1 h
# heartbeat TTL.  Load: psql clients, each in a loop run by bash, that
#   dispatch_next  x3  submit a few requests while the queue is short, then BEGIN;
#                      dispatch_next(3); COMMIT;
#   dispatch_attempt   the same with dispatch_attempt of a random pending request;
#   worker        x2   start a random DISPATCHED attempt, finish a random live one (1 in 5
#                      FAILED, which requeues); attempts near their lease's end, and one
#                      in eight by its id, are left to the reaper (so leases run out
#                      however fast the workers are);
#   mirror             re-weights a random node, then sched._fleet_mirror_check of both
#                      capabilities in its long-lived session (must be 0).
# A dispatcher logs what a transaction dispatched (attempt_id, request_id, node, worker)
# only after its COMMIT returned (psql -v ON_ERROR_STOP=1: \warn runs only if COMMIT
# succeeded; stderr is unbuffered): those are the acknowledged dispatches.
#
# Ten rounds: the clients are paused (no new psql starts; the running ones go on), then
#   odd rounds   kill -9 of a backend that pg_stat_activity shows active in
#                dispatch_next / dispatch_attempt: the postmaster kills every backend
#                and reinitializes shared memory;
#   even rounds  kill -9 of the postmaster while a dispatch is active ($node->kill9; its
#                orphaned backends may still commit and acknowledge until they notice),
#                then $node->start once every old process is gone.
# After each recovery, with no load client connected:
#   * the log shows the crash (a reinitialization, or the restart's crash recovery);
#   * sched._dispatch_counters() is all zeros (the shared counters were recreated);
#   * a new session's sched._fleet_mirror_stats() is that of an unused mirror, and
#     sched._fleet_mirror_check() is 0 for each capability (cap, gpu, probe);
#   * test/pgbench/invariants.sql holds (read through $SCHED_INVARIANTS);
#   * every acknowledged dispatch so far is in sched.attempt exactly once, with its
#     request, node and worker; no (step_id, attempt_number) has two attempts;
#   * the maintenance worker runs again (one per database);
#   * a probe dispatch (capability probe, on three nodes of their own) places on the node
#     select_candidate names in the same transaction, and the counters then read exactly
#     1 call, 1 placement, 0 conflicts, 0 held_passed (no stale reservation in flight);
#   * once resumed, the load acknowledges new dispatches, and the maintenance worker
#     reaps (an attempt LOST since the restart, no live attempt left expired).
# At the end: the load stops, every live attempt's lease runs out and the maintenance
# worker reaps them all (no live attempt, all node and worker counters back to 0), and
# the invariants and the acknowledged dispatches are checked once more; the load clients
# met no error but the crashes', and the server log shows no ERROR, PANIC or assertion
# failure.  diag lines give what was measured (acknowledged dispatches per round,
# recovery times).
#
# Needs test/pgbench/invariants.sql: its path in SCHED_INVARIANTS (test/harness.sh
# suite_tap copies it next to the tests and sets the variable), else invariants.sql next
# to this file, else ../pgbench/invariants.sql from it (a checkout).
# Run as an unprivileged OS user (test/harness.sh suite_tap does this).
use strict;
use warnings;

use File::Basename qw(dirname);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

$PostgreSQL::Test::Utils::timeout_default = 60
  if $PostgreSQL::Test::Utils::timeout_default > 60;

my $ROUNDS = 10;
my $LOAD_SECONDS = 1.0;    # load between the resume and the next crash

# ---------------------------------------------------------------------------------------
# invariants.sql
# ---------------------------------------------------------------------------------------
my ($inv_file) = grep { defined $_ && $_ ne '' && -r $_ } ($ENV{SCHED_INVARIANTS},
	dirname(__FILE__) . '/invariants.sql', dirname(__FILE__) . '/../pgbench/invariants.sql');
if (!defined $inv_file)
{
	fail('invariants.sql not found: set SCHED_INVARIANTS to the path of test/pgbench/invariants.sql');
	done_testing();
	exit;
}
my $invariants = slurp_file($inv_file);

# ---------------------------------------------------------------------------------------
# The node
# ---------------------------------------------------------------------------------------
my $node = PostgreSQL::Test::Cluster->new('sched_crash');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'pg_sched'
sched.databases = 'postgres'
sched.maintenance_interval = '1s'
restart_after_crash = on
max_connections = 40
log_statement = none
log_min_messages = warning
});
$node->start;

sub sql { return $node->safe_psql('postgres', shift); }

sql(<<'EOSQL');
CREATE EXTENSION pg_sched;
ALTER DATABASE postgres SET sched.lease_ttl = '2s';
ALTER DATABASE postgres SET sched.heartbeat_ttl = '1h';
EOSQL
# the fleet, in a new session (the database settings apply from the next connection)
sql(<<'EOSQL');
-- n1..n10: cap (3 slots each); n1..n4 also gpu (2 GPUs, 2 slots); p1..p3: probe only
SELECT count(sched.upsert_node('n' || i, '{}', 4000, 8192, CASE WHEN i <= 4 THEN 2 ELSE 0 END,
                               50 + 10 * i)) FROM generate_series(1, 10) i;
SELECT count(sched.register_worker('n' || i, 'cap', ARRAY['1'], 3)) FROM generate_series(1, 10) i;
SELECT count(sched.register_worker('n' || i, 'gpu', ARRAY['1'], 2)) FROM generate_series(1, 4) i;
SELECT count(sched.upsert_node('p' || i, '{}', 100000, 100000, 0, 10 * i)) FROM generate_series(1, 3) i;
SELECT count(sched.register_worker('p' || i, 'probe', ARRAY['1'], 50)) FROM generate_series(1, 3) i;
EOSQL
is(sql("SHOW sched.lease_ttl"), '2s', 'lease TTL 2 s for the database');

# ---------------------------------------------------------------------------------------
# The load clients
# ---------------------------------------------------------------------------------------
my $dir = PostgreSQL::Test::Utils::tempdir;
my $PAUSE = "$dir/pause";
my $STOP = "$dir/stop";
my $connstr = $node->connstr('postgres');

my $ACKS = q{coalesce(string_agg(concat_ws(',', d.attempt_id, d.request_id, d.node_id, d.worker_id), ' '), '-') AS acks};
my $SUBMIT = <<'EOSQL';
SELECT count(sched.submit(gen_random_uuid(), gen_random_uuid(), c.cap, '1',
                          tenant => 't' || (random() * 2)::int, priority => (random() * 3)::int,
                          reserve_cpu_millis => 250, reserve_memory_mb => 128,
                          reserve_gpus => CASE WHEN c.cap = 'gpu' THEN 1 ELSE 0 END))
  FROM (SELECT CASE WHEN random() < 0.25 THEN 'gpu' ELSE 'cap' END AS cap
          FROM generate_series(1, 2)) c
 WHERE (SELECT count(*) FROM sched.request WHERE state = 'PENDING') < 100;
EOSQL
my %iteration = (
	dispatch_next => $SUBMIT . <<"EOSQL",
BEGIN;
SELECT $ACKS FROM sched.dispatch_next(3) d WHERE d.outcome = 'DISPATCHED' \\gset
COMMIT;
\\warn ACK :acks
EOSQL
	dispatch_attempt => $SUBMIT . <<"EOSQL",
BEGIN;
SELECT $ACKS
  FROM (SELECT r.request_id FROM sched.request r
         WHERE r.state = 'PENDING' AND r.available_at <= now()
         ORDER BY random() LIMIT 1) q
 CROSS JOIN LATERAL sched.dispatch_attempt(q.request_id) d
 WHERE d.outcome = 'DISPATCHED' \\gset
COMMIT;
\\warn ACK :acks
EOSQL
	worker => <<'EOSQL',
SELECT sched.start_attempt(a.attempt_id, a.lease_version)
  FROM (SELECT x.attempt_id, x.lease_version FROM sched.attempt x
         WHERE x.status = 'DISPATCHED' AND x.lease_expires_at > now() + interval '700 ms'
           AND get_byte(uuid_send(x.attempt_id), 15) % 8 <> 0
         ORDER BY random() LIMIT 1 FOR UPDATE SKIP LOCKED) a;
SELECT sched.finish_attempt(a.attempt_id, a.lease_version,
                            CASE WHEN random() < 0.2 THEN 'FAILED' ELSE 'SUCCEEDED' END)
  FROM (SELECT x.attempt_id, x.lease_version FROM sched.attempt x
         WHERE x.status IN ('DISPATCHED', 'RUNNING') AND x.lease_expires_at > now() + interval '700 ms'
           AND get_byte(uuid_send(x.attempt_id), 15) % 8 <> 0
         ORDER BY random() LIMIT 1 FOR UPDATE SKIP LOCKED) a;
EOSQL
	mirror => <<'EOSQL',
SELECT sched.upsert_node('n' || (1 + (random() * 9)::int), weight => 50 + (random() * 100)::int);
SELECT sched._fleet_mirror_check('cap') AS m1, sched._fleet_mirror_check('gpu') AS m2 \gset
\warn MIRROR :m1 :m2
SELECT pg_sleep(0.02);
EOSQL
);
my @clients = (
	[ 'load_dispatch_next_1', 'dispatch_next' ],
	[ 'load_dispatch_next_2', 'dispatch_next' ],
	[ 'load_dispatch_next_3', 'dispatch_next' ],
	[ 'load_dispatch_attempt', 'dispatch_attempt' ],
	[ 'load_worker_1', 'worker' ],
	[ 'load_worker_2', 'worker' ],
	[ 'load_mirror', 'mirror' ],
);

# a psql script of many iterations; bash runs it again and again (also after a crash
# ended it) until $STOP exists, and starts no new psql while $PAUSE exists
my $LOOP = <<'EOSH';
while [ ! -e "$STOP" ]; do
    if [ -e "$PAUSE" ]; then sleep 0.02; continue; fi
    psql -X -q -At -v ON_ERROR_STOP=1 -d "$CONNSTR application_name=$APP" -f "$SCRIPT" \
        >/dev/null 2>>"$LOG"
    echo "EXIT $?" >>"$LOG"
    [ -e "$PAUSE" ] || sleep 0.05
done
EOSH
my @harnesses;
for my $c (@clients)
{
	my ($app, $kind) = @$c;
	my $script = "$dir/$app.sql";
	open my $fh, '>', $script or die "$script: $!";
	print $fh "SET client_min_messages = warning;\n";
	print $fh $iteration{$kind} for 1 .. 300;
	close $fh;
	local $ENV{STOP} = $STOP;
	local $ENV{PAUSE} = $PAUSE;
	local $ENV{CONNSTR} = $connstr;
	local $ENV{APP} = $app;
	local $ENV{SCRIPT} = $script;
	local $ENV{LOG} = "$dir/$app.log";
	push @harnesses, IPC::Run::start([ 'bash', '-c', $LOOP ], '<', \undef, '>', '/dev/null', '2>', "$dir/$app.bash.err");
}

# The clients' logs: acknowledged dispatches, mirror checks, errors.
sub read_logs
{
	my (%acks, @dups, @errors);
	my ($mirror_checks, $mirror_differ) = (0, 0);
	for my $c (@clients)
	{
		my $app = $c->[0];
		my $log = "$dir/$app.log";
		next unless -e $log;
		for my $line (split /\n/, slurp_file($log))
		{
			if ($line =~ /^ACK (.*)$/)
			{
				next if $1 eq '-';
				for my $a (split / /, $1)
				{
					my ($aid) = split /,/, $a;
					push @dups, "$app: $a" if exists $acks{$aid};
					$acks{$aid} = $a;
				}
			}
			elsif ($line =~ /^MIRROR (\S+) (\S+)$/)
			{
				$mirror_checks++;
				$mirror_differ++ if $1 ne '0' || $2 ne '0';
			}
			elsif ($line =~ /ERROR:/ && $line !~ /the database system is (in recovery mode|starting up|shutting down|not yet accepting connections)/)
			{
				push @errors, "$app: $line";
			}
		}
	}
	return { acks => \%acks, dups => \@dups, errors => \@errors,
		mirror_checks => $mirror_checks, mirror_differ => $mirror_differ };
}

# Every acknowledged dispatch is in sched.attempt exactly once, as acknowledged.
sub check_acks
{
	my ($label, $logs) = @_;
	my @rows = values %{ $logs->{acks} };
	my $copy = join("\n", map { join(',', split /,/) } @rows);
	my $res = sql(<<"EOSQL");
CREATE TEMP TABLE ack (attempt_id uuid, request_id bigint, node_id text, worker_id uuid);
COPY ack FROM STDIN WITH (FORMAT csv);
$copy
\\.
SELECT count(*) || ' ' || count(*) FILTER (WHERE n = 0) || ' ' || count(*) FILTER (WHERE n > 1)
       || ' ' || count(*) FILTER (WHERE n = 1 AND NOT same) || ' '
       || coalesce(string_agg(format('%s (request %s on %s/%s): %s rows%s', attempt_id, request_id,
                                     node_id, worker_id, n, CASE WHEN same THEN '' ELSE ', differs' END), '; ')
                   FILTER (WHERE n <> 1 OR NOT same), '-')
  FROM (SELECT k.*, (SELECT count(*) FROM sched.attempt a WHERE a.attempt_id = k.attempt_id) AS n,
               EXISTS (SELECT 1 FROM sched.attempt a
                        WHERE a.attempt_id = k.attempt_id AND a.request_id = k.request_id
                          AND a.node_id = k.node_id AND a.worker_id = k.worker_id) AS same
          FROM ack k) s;
EOSQL
	my ($n, $missing, $dup, $differ, $detail) = split / /, $res, 5;
	is($n, scalar(@rows), "$label: $n acknowledged dispatches checked");
	is("$missing $dup $differ", '0 0 0',
		"$label: every acknowledged dispatch is in sched.attempt exactly once, with its request, node and worker")
	  or diag("acknowledged but missing, duplicated or different: $detail");
	is(scalar(@{ $logs->{dups} }), 0, "$label: no attempt_id was acknowledged twice")
	  or diag(join("\n", @{ $logs->{dups} }[0 .. 4]));
	is(sql("SELECT count(*) FROM (SELECT 1 FROM sched.attempt GROUP BY step_id, attempt_number"
		  . " HAVING count(*) > 1) d"),
		'0', "$label: no (step_id, attempt_number) has two attempts");
	return scalar(@rows);
}

sub check_invariants
{
	my $label = shift;
	my ($out, $err) = ('', '');
	my $rc = $node->psql('postgres', $invariants, stdout => \$out, stderr => \$err,
		on_error_stop => 1);
	is($rc, 0, "$label: invariants.sql holds") or diag($err);
}

# the server log: no ERROR (a deadlock, a failed tick), PANIC or assertion failure
sub check_server_log
{
	my ($node, $label) = @_;
	my @bad = grep { /\b(ERROR|PANIC):|TRAP:|tick failed/ } split /\n/, slurp_file($node->logfile);
	is(scalar(@bad), 0, "$label: the server log shows no ERROR, PANIC, assertion failure or failed tick")
	  or diag(join("\n", @bad[0 .. ($#bad > 9 ? 9 : $#bad)]));
}

sub ack_count { return scalar(keys %{ read_logs()->{acks} }); }

# pids of the postmaster's children (before it is killed: they outlive it a moment)
sub children_of
{
	my $ppid = shift;
	my @kids;
	opendir my $d, '/proc' or die "/proc: $!";
	for my $p (grep { /^\d+$/ } readdir $d)
	{
		open my $fh, '<', "/proc/$p/stat" or next;
		my $stat = <$fh>;
		close $fh;
		push @kids, $p if defined $stat && $stat =~ /^\d+ \(.*\) \S (\d+) / && $1 == $ppid;
	}
	closedir $d;
	return @kids;
}

# waits (up to $tries x 10 ms, 60 s by default) until the log, from $offset on, matches $re
sub wait_for_log
{
	my ($re, $offset, $tries) = @_;
	for (1 .. ($tries // 6000))
	{
		return 1 if slurp_file($node->logfile, $offset) =~ $re;
		usleep(10_000);
	}
	return 0;
}

# a backend active in a dispatch: "pid app wait_event query"
sub find_dispatching_backend
{
	my $mon = $node->background_psql('postgres');
	my $found = '';
	my $deadline = time + 20;
	my $lifted = time;
	while (time < $deadline)
	{
		# the paused clients may all have been between scripts (their scripts, started
		# together after the last restart, end together): let them start new ones
		if (time - $lifted >= 1)
		{
			unlink $PAUSE;
			usleep(200_000);
			open my $p, '>', $PAUSE or die;
			close $p;
			$lifted = time;
		}
		$found = $mon->query_safe(q{
SELECT pid || ' ' || application_name || ' ' || coalesce(wait_event_type || ':' || wait_event, 'cpu')
       || ' ' || left(regexp_replace(query, '\s+', ' ', 'g'), 70)
  FROM pg_stat_activity
 WHERE state = 'active' AND backend_type = 'client backend' AND pid <> pg_backend_pid()
   AND application_name LIKE 'load_dispatch%' AND query LIKE '%sched.dispatch_%'
 ORDER BY random() LIMIT 1});
		last if $found ne '';
		usleep(2_000);
	}
	return ($mon, $found);
}

my $COUNTERS = q{SELECT calls || ' ' || placements || ' ' || conflicts || ' ' || held_passed FROM sched._dispatch_counters()};
my $STATS = q{SELECT format('usable=%s caps=%s rows=%s pending=%s refreshes=%s full_loads=%s losses=%s',
  usable, capabilities, rows_held, pending, refreshes, full_loads, losses) FROM sched._fleet_mirror_stats()};

# ---------------------------------------------------------------------------------------
# Warm-up, then the rounds
# ---------------------------------------------------------------------------------------
my $t_warm = time;
usleep(100_000) while ack_count() < 50 && time < $t_warm + 60;
cmp_ok(ack_count(), '>=', 50, 'warm-up: the load acknowledges dispatches')
  or diag(sql(q{SELECT state || ' ' || count(*) FROM sched.request GROUP BY state;
SELECT request_id || ' ' || explanation || ' ' || blocked FROM sched.pending LIMIT 3;}));
usleep($LOAD_SECONDS * 1e6);

my (@measure, $last_restart);
for my $round (1 .. $ROUNDS)
{
	my $postmaster = $round % 2 == 0;
	my $label = "round $round (" . ($postmaster ? 'kill -9 postmaster' : 'kill -9 backend') . ')';
	my $acks_before = ack_count();

	# pause (no new psql), find a dispatch in progress, crash
	open my $p, '>', $PAUSE or die;
	close $p;
	usleep(100_000);
	my $offset = -s $node->logfile;
	my $pm_pid = $node->{_pid};
	my @old = children_of($pm_pid);
	my ($mon, $target, $pid, $t_kill);
	for my $try (1 .. 5)
	{
		($mon, $target) = find_dispatching_backend();
		($pid) = split / /, $target;
		last if $postmaster || $target eq '';
		$t_kill = time;
		# kill succeeds on a process that is already exiting: a backend whose session ended
		# between the look and the kill exits normally and crashes nothing (seen once, in
		# a fresh-clone CI run): then another one
		last if kill('KILL', $pid)
		  && wait_for_log(qr/server process \(PID $pid\) was terminated by signal 9/, $offset, 1000);
		eval { $mon->quit; };    # that session ended in the meantime: another one
		$target = '';
	}
	ok($target ne '', "$label: a backend is active in a dispatch: $target");
	if (!$postmaster && $target ne '')
	{
		ok(wait_for_log(qr/server process \(PID $pid\) was terminated by signal 9.*all server processes terminated; reinitializing.*database system is ready to accept connections/s, $offset),
			"$label: the postmaster reinitialized after the backend's death");
	}
	elsif ($postmaster)
	{
		$t_kill = time;
		$node->kill9;
		my $gone = 0;
		for (1 .. 3000)
		{
			last if ($gone = !grep { kill 0, $_ } @old);
			usleep(10_000);
		}
		ok($gone, "$label: every process of the killed postmaster has exited");
		$node->start;
		ok(wait_for_log(qr/database system was interrupted; last known up at.*database system is ready to accept connections/s, $offset),
			"$label: the restart went through crash recovery");
	}
	eval { $mon->quit; };
	$node->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()');
	my $recovery_ms = int((time - $t_kill) * 1000);
	$last_restart = sql('SELECT now()');

	# shared memory starts clean
	is(sql("SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'load_%'"), '0',
		"$label: no load client is connected while the state is checked");
	is(sql($COUNTERS),
		'0 0 0 0', "$label: sched._dispatch_counters() restarted from zero");
	# A backend's first use of its mirror counts as a loss of the change log's entries
	# before it: until every transaction older than that is settled, each refresh reloads
	# the capability it reads and drops the others (src/fleet_mirror.c).  Right after a
	# restart the maintenance worker may be in such a transaction (reaping the leases that
	# ran out), so the checks are repeated, each a refresh on a later snapshot, until the
	# mirror holds all three (at most 10 s); it must take no second loss to get there.
	my @mirror = split /\n/, sql(join(";\n", $STATS,
		"SELECT sched._fleet_mirror_check('cap') || ' ' || sched._fleet_mirror_check('gpu') || ' ' || sched._fleet_mirror_check('probe')",
		q{DO $$
		  BEGIN
		    FOR i IN 1 .. 200 LOOP
		      EXIT WHEN (SELECT capabilities FROM sched._fleet_mirror_stats()) = 3;
		      PERFORM pg_sleep(0.05);
		      IF sched._fleet_mirror_check('cap') + sched._fleet_mirror_check('gpu')
		         + sched._fleet_mirror_check('probe') <> 0 THEN
		        RAISE EXCEPTION 'the fleet mirror differs from the tables';
		      END IF;
		    END LOOP;
		  END $$},
		q{SELECT capabilities || ' ' || losses FROM sched._fleet_mirror_stats()}));
	is($mirror[0], 'usable=t caps=0 rows=0 pending=0 refreshes=0 full_loads=0 losses=0',
		"$label: a new session's fleet mirror is unused");
	is($mirror[1], '0 0 0', "$label: the fleet mirror matches the tables for cap, gpu and probe");
	is($mirror[2], '3 1', "$label: the mirror holds the 3 capabilities after one initial load, once older transactions settled");

	# the tables: invariants, acknowledged dispatches
	check_invariants($label);
	my $logs = read_logs();
	check_acks($label, $logs);

	# the maintenance worker is back
	ok($node->poll_query_until('postgres',
			"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'pg_sched maintenance'"),
		"$label: the maintenance worker runs again");

	# a probe dispatch: placed where select_candidate says, nothing held in flight
	my $probe = sql(<<'EOSQL');
BEGIN;
SELECT sched.submit(gen_random_uuid(), gen_random_uuid(), 'probe', '1') AS rid \gset
SELECT (SELECT node_id FROM sched.select_candidate('probe', '1')) || ' '
       || d.outcome || ' ' || d.node_id || ' ' || d.attempt_id
  FROM sched.dispatch_attempt(:rid) d;
COMMIT;
EOSQL
	my ($chosen, $outcome, $placed, $probe_attempt) = split / /, $probe;
	is("$outcome $placed", "DISPATCHED $chosen",
		"$label: a probe dispatch after the restart lands on select_candidate's node");
	is(sql($COUNTERS),
		'1 1 0 0', "$label: the counters count the probe alone (1 call, 1 placement, no conflict, nothing held)");
	sql("SELECT sched.finish_attempt('$probe_attempt', 1, 'SUCCEEDED')") if $probe_attempt;

	# resume: work continues
	unlink $PAUSE;
	my $acks_at_resume = ack_count();
	my $t_resume = time;
	usleep(50_000) while ack_count() < $acks_at_resume + 10 && time < $t_resume + 30;
	my $resume_ms = int((time - $t_resume) * 1000);
	cmp_ok(ack_count(), '>=', $acks_at_resume + 10, "$label: the load acknowledges new dispatches after the restart");
	usleep($LOAD_SECONDS * 1e6);

	# reaping continues: an attempt was reaped since the restart, none is left expired
	ok($node->poll_query_until('postgres', qq{
SELECT EXISTS (SELECT 1 FROM sched.attempt WHERE status = 'LOST' AND finished_at >= '$last_restart')
   AND NOT EXISTS (SELECT 1 FROM sched.attempt
                    WHERE status IN ('DISPATCHED', 'RUNNING') AND lease_expires_at < now() - interval '3 s')}),
		"$label: the maintenance worker reaps expired leases after the restart");
	my $reaped = sql("SELECT count(*) FROM sched.attempt WHERE status = 'LOST' AND finished_at >= '$last_restart'");
	push @measure, sprintf('%-28s acks before %5d, recovery %5d ms, 10 new acks after resume in %4d ms, %3d reaped since; killed in dispatch: %s',
		$label, $acks_before, $recovery_ms, $resume_ms, $reaped, join(' ', (split / /, $target)[0 .. 2]));
}

# ---------------------------------------------------------------------------------------
# The end: stop the load, let every lease run out, the reaper takes them all
# ---------------------------------------------------------------------------------------
for my $f ($PAUSE, $STOP) { open my $fh, '>', $f or die; close $fh; }
sql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name LIKE 'load_%'");
$_->finish for @harnesses;

my $logs = read_logs();
check_invariants('after the load');
my $total = check_acks('after the load', $logs);
is(scalar(@{ $logs->{errors} }), 0, 'the load clients met no error but the crashes')
  or diag(join("\n", @{ $logs->{errors} }[0 .. (@{ $logs->{errors} } > 9 ? 9 : $#{ $logs->{errors} })]));
cmp_ok($logs->{mirror_checks}, '>', 0, "the mirror client checked the fleet mirror $logs->{mirror_checks} times");
is($logs->{mirror_differ}, 0, 'the fleet mirror never differed from the tables under load, across the crashes');

ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 0 FROM sched.attempt WHERE status IN ('DISPATCHED', 'RUNNING')}),
	'every live attempt is reaped once its lease ran out (the maintenance worker reaps after the crashes)');
is(sql(q{SELECT count(*) FROM sched.node WHERE (reserved_cpu_millis, reserved_memory_mb, reserved_gpus, live_attempts) <> (0, 0, 0, 0)})
	  . ' ' . sql('SELECT count(*) FROM sched.worker WHERE live_attempts <> 0'),
	'0 0', 'every reservation and slot is released');
check_invariants('after the reaping');
my $stats = sql(<<"EOSQL");
SELECT sum(n) || ' attempts: ' || string_agg(n || ' ' || status, ', ' ORDER BY status)
  FROM (SELECT status, count(*) AS n FROM sched.attempt GROUP BY status) s;
SELECT count(*) FROM sched.attempt WHERE status = 'LOST' AND finished_at > '$last_restart';
EOSQL
my ($by_status, $reaped_after) = split /\n/, $stats;
cmp_ok($reaped_after, '>', 0, "the reaper marked $reaped_after attempts LOST after the last restart");

check_server_log($node, 'after the rounds');

diag("006_crash: $ROUNDS rounds (5 backend kills, 5 postmaster kills), $total acknowledged dispatches, all found exactly once");
diag("006_crash: $_") for @measure;
diag("006_crash: $by_status; $reaped_after LOST after the last restart; $logs->{mirror_checks} mirror checks under load, $logs->{mirror_differ} differed");

$node->stop;
done_testing();
