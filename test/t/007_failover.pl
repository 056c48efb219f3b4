#!/usr/bin/perl
#
# 007_failover.pl — failover to a synchronous standby loses no acknowledged dispatch, and
# scheduling carries on there (issue 12, item 4).
#
# A primary and a streaming standby (base backup taken before CREATE EXTENSION), both
# with pg_sched preloaded and sched.databases = 'postgres'; the primary has
# synchronous_standby_names = 'standby' and synchronous_commit = on, so a COMMIT returns
# only once the standby has flushed its WAL.  A 2 s lease (ALTER DATABASE, replicated).
# Load on the primary, psql clients in bash loops as in 006_crash.pl: dispatch_next x2
# and dispatch_attempt (each submits while the queue is short), two workers that start
# and finish attempts, and leave one attempt in eight (by its id) to the reaper, so that
# leases run out however fast the workers are.  A dispatcher logs what it dispatched
# only after its COMMIT returned: the acknowledged dispatches.
#
# While the load runs:
#   * the standby answers the diagnostics: sched.pending, sched.node_overview,
#     sched.explain(request_id), sched.qualification_reasons(request_id), for requests
#     it has replayed;
#   * the standby runs no maintenance worker (it starts only after recovery), and its
#     log shows none started.
# Then the primary is stopped in immediate mode mid-load and the standby promoted.  On the
# new primary:
#   * every acknowledged dispatch is in sched.attempt exactly once, with its request,
#     node and worker; no (step_id, attempt_number) has two attempts;
#   * test/pgbench/invariants.sql holds (read through $SCHED_INVARIANTS);
#   * the maintenance worker starts (after the promotion) and reaps: every attempt that
#     was live at the failover and whose lease ran out is marked LOST by the Reaper,
#     after the promotion, and its reservation released;
#   * dispatch_next places pending work, and the load, pointed at the new primary,
#     acknowledges new dispatches; the invariants and the acknowledged dispatches are
#     checked once more at the end; the load clients met no error but the failover's, and
#     neither server log shows an ERROR, PANIC or assertion failure.
# diag lines give what was measured (acknowledged dispatches, failover times).
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
# Primary and synchronous standby
# ---------------------------------------------------------------------------------------
my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
$primary->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'pg_sched'
sched.databases = 'postgres'
sched.maintenance_interval = '1s'
max_connections = 40
synchronous_commit = on
log_statement = none
log_min_messages = warning
});
$primary->start;
$primary->backup('base');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'base', has_streaming => 1);
$standby->start;

# synchronous from now on (only in the primary's configuration: once promoted, the
# standby must not wait for a standby of its own)
$primary->append_conf('postgresql.conf', "synchronous_standby_names = 'standby'\n");
$primary->reload;
ok($primary->poll_query_until('postgres',
		q{SELECT sync_state = 'sync' FROM pg_stat_replication WHERE application_name = 'standby'}),
	'the standby replicates synchronously');

sub p { return $primary->safe_psql('postgres', shift); }
sub sb { return $standby->safe_psql('postgres', shift); }

p(<<'EOSQL');
CREATE EXTENSION pg_sched;
ALTER DATABASE postgres SET sched.lease_ttl = '2s';
ALTER DATABASE postgres SET sched.heartbeat_ttl = '1h';
EOSQL
p(<<'EOSQL');
-- n1..n10: cap (3 slots each); n1..n4 also gpu (2 GPUs, 2 slots)
SELECT count(sched.upsert_node('n' || i, '{}', 4000, 8192, CASE WHEN i <= 4 THEN 2 ELSE 0 END,
                               50 + 10 * i)) FROM generate_series(1, 10) i;
SELECT count(sched.register_worker('n' || i, 'cap', ARRAY['1'], 3)) FROM generate_series(1, 10) i;
SELECT count(sched.register_worker('n' || i, 'gpu', ARRAY['1'], 2)) FROM generate_series(1, 4) i;
EOSQL
is(sb("SELECT count(*) FROM sched.worker"), '14', 'the standby has the fleet as soon as the primary committed it');

# ---------------------------------------------------------------------------------------
# The load clients (see 006_crash.pl)
# ---------------------------------------------------------------------------------------
my $dir = PostgreSQL::Test::Utils::tempdir;
my $PAUSE = "$dir/pause";

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
);
my @kinds = qw(dispatch_next dispatch_next dispatch_attempt worker worker);

my $LOOP = <<'EOSH';
while [ ! -e "$STOP" ]; do
    if [ -e "$PAUSE" ]; then sleep 0.02; continue; fi
    psql -X -q -At -v ON_ERROR_STOP=1 -d "$CONNSTR application_name=$APP" -f "$SCRIPT" \
        >/dev/null 2>>"$LOG"
    echo "EXIT $?" >>"$LOG"
    [ -e "$PAUSE" ] || sleep 0.05
done
EOSH
my @logs;

# starts the load against $node; returns (stop file, harnesses)
sub start_load
{
	my ($node, $phase) = @_;
	my $stop = "$dir/stop_$phase";
	my @h;
	my $i = 0;
	for my $kind (@kinds)
	{
		my $app = sprintf('load_%s_%s_%d', $phase, $kind, ++$i);
		my $script = "$dir/$app.sql";
		open my $fh, '>', $script or die "$script: $!";
		print $fh "SET client_min_messages = warning;\n";
		print $fh $iteration{$kind} for 1 .. 300;
		close $fh;
		local $ENV{STOP} = $stop;
		local $ENV{PAUSE} = $PAUSE;
		local $ENV{CONNSTR} = $node->connstr('postgres');
		local $ENV{APP} = $app;
		local $ENV{SCRIPT} = $script;
		local $ENV{LOG} = "$dir/$app.log";
		push @logs, [ $app, "$dir/$app.log" ];
		push @h, IPC::Run::start([ 'bash', '-c', $LOOP ], '<', \undef, '>', '/dev/null', '2>', "$dir/$app.bash.err");
	}
	return ($stop, @h);
}

sub stop_load
{
	my ($node, $stop, @h) = @_;
	for my $f ($PAUSE, $stop) { open my $fh, '>', $f or die; close $fh; }
	$node->safe_psql('postgres',
		"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name LIKE 'load_%'")
	  if defined $node;
	$_->finish for @h;
	unlink $PAUSE;
}

sub read_logs
{
	my (%acks, @dups, @errors);
	for my $l (@logs)
	{
		my ($app, $log) = @$l;
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
			elsif ($line =~ /ERROR:/)
			{
				push @errors, "$app: $line";
			}
		}
	}
	return { acks => \%acks, dups => \@dups, errors => \@errors };
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

sub check_acks
{
	my ($node, $label, $logs) = @_;
	my @rows = values %{ $logs->{acks} };
	my $copy = join("\n", @rows);
	my $res = $node->safe_psql('postgres', <<"EOSQL");
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
	is($node->safe_psql('postgres', "SELECT count(*) FROM (SELECT 1 FROM sched.attempt"
		  . " GROUP BY step_id, attempt_number HAVING count(*) > 1) d"),
		'0', "$label: no (step_id, attempt_number) has two attempts");
	return scalar(@rows);
}

sub check_invariants
{
	my ($node, $label) = @_;
	my ($out, $err) = ('', '');
	my $rc = $node->psql('postgres', $invariants, stdout => \$out, stderr => \$err,
		on_error_stop => 1);
	is($rc, 0, "$label: invariants.sql holds") or diag($err);
}

# ---------------------------------------------------------------------------------------
# Load on the primary; the standby answers the diagnostics
# ---------------------------------------------------------------------------------------
my ($stop1, @load1) = start_load($primary, 'p');
my $t0 = time;
usleep(100_000) while ack_count() < 50 && time < $t0 + 60;
cmp_ok(ack_count(), '>=', 50, 'the load acknowledges dispatches on the primary');

my ($diag_rounds, $diag_ok) = (0, 0);
for my $i (1 .. 5)
{
	$diag_rounds++;
	my $rid = sb(q{SELECT max(request_id) FROM sched.request});
	my $pending_rid = sb(q{SELECT coalesce(min(request_id), 0) FROM sched.pending});
	my @res;
	for my $q (
		[ 'sched.pending', q{SELECT count(*) >= 0 FROM sched.pending}, qr/^t$/ ],
		[ 'sched.node_overview', q{SELECT count(*) FROM sched.node_overview}, qr/^10$/ ],
		[ "sched.explain($rid)", "SELECT sched.explain($rid)", qr/^request $rid: (cap|gpu)\@1 for tenant t\d/ ],
		[ "sched.qualification_reasons($rid)", "SELECT count(*) FROM sched.qualification_reasons($rid)", qr/^10$/ ],
		[ "sched.explain($pending_rid) (pending)", "SELECT sched.explain($pending_rid)", qr/^request $pending_rid: .*state (PENDING|CLAIMED)/s ],
	  )
	{
		my ($name, $sql, $want) = @$q;
		next if $name =~ /\(0\)/;    # no pending request right now
		my ($rc, $out, $err) = $standby->psql('postgres', $sql);
		push @res, [ $name, $rc == 0 && $out =~ $want, $rc == 0 ? $out : $err ];
	}
	my @bad = grep { !$_->[1] } @res;
	$diag_ok++ unless @bad;
	diag("standby diagnostics, pass $i: $_->[0]: $_->[2]") for @bad;
	usleep(300_000);
}
is($diag_ok, $diag_rounds,
	"the standby answered sched.pending, node_overview, explain and qualification_reasons in all $diag_rounds passes under load");
is(sb('SELECT pg_is_in_recovery()'), 't', 'the standby is in recovery');
is(sb("SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'pg_sched maintenance%'"), '0',
	'no pg_sched maintenance worker runs on the standby');
ok($primary->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'pg_sched maintenance'"),
	'the maintenance worker runs on the primary');
ok($standby->poll_query_until('postgres', q{SELECT count(*) > 0 FROM sched.attempt WHERE status = 'LOST'}),
	"the primary's reaper is busy (its LOST attempts are replayed on the standby)");
unlike(slurp_file($standby->logfile), qr/pg_sched maintenance worker started/,
	'standby log: no maintenance worker started while in recovery');

# ---------------------------------------------------------------------------------------
# Failover mid-load
# ---------------------------------------------------------------------------------------
usleep(1_000_000);
open my $pf, '>', $PAUSE or die;
close $pf;
my $acks_at_stop = ack_count();
my $t_stop = time;
$primary->stop('immediate');
my $standby_log_offset = -s $standby->logfile;
my $before_promotion = sb('SELECT now()');
my $t_promote = time;
$standby->promote;
ok($standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()'), 'the standby is promoted');
my $promote_ms = int((time - $t_promote) * 1000);
my $live_at_failover = sb(<<"EOSQL");
SELECT count(*) FROM sched.attempt
 WHERE status IN ('DISPATCHED', 'RUNNING') OR (status = 'LOST' AND finished_at >= '$before_promotion')
EOSQL
stop_load(undef, $stop1, @load1);    # the clients of the old primary end
my $logs = read_logs();
my $acked_p = scalar(keys %{ $logs->{acks} });
my $cut = grep { -e $_->[1] && slurp_file($_->[1]) =~ /connection to server was lost|server closed the connection unexpectedly/ } @logs;
my $failover_ms = int((time - $t_stop) * 1000);

check_acks($standby, 'after the failover', $logs);
check_invariants($standby, 'after the failover');

# the maintenance worker starts after the promotion and reaps what was live
ok($standby->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'pg_sched maintenance'"),
	'the maintenance worker runs on the new primary');
like(slurp_file($standby->logfile, $standby_log_offset),
	qr/pg_sched maintenance worker started for database "postgres"/,
	'its log shows the maintenance worker started after the promotion');
cmp_ok($live_at_failover, '>', 0, "$live_at_failover attempts were live at the failover");
my $t_reap = time;
ok($standby->poll_query_until('postgres',
		q{SELECT count(*) = 0 FROM sched.attempt WHERE status IN ('DISPATCHED', 'RUNNING')}),
	'every attempt live at the failover is reaped once its lease ran out');
my $reap_ms = int((time - $t_reap) * 1000);
is(sb(<<"EOSQL"), "$live_at_failover 0",
SELECT count(*) FILTER (WHERE a.status = 'LOST' AND t.component = 'Reaper') || ' '
       || count(*) FILTER (WHERE a.status <> 'LOST' OR t.component IS DISTINCT FROM 'Reaper')
  FROM sched.attempt a
  LEFT JOIN sched.timeline t ON t.execution_id = a.execution_id
   AND t.milestone_key = format('step.attempt.lost:%s:%s', a.step_id, a.attempt_number)
 WHERE a.finished_at >= '$before_promotion'
EOSQL
	"the Reaper of the new primary marked the $live_at_failover attempts LOST, and nothing else ended them");
is(sb(q{SELECT count(*) FROM sched.node WHERE (reserved_cpu_millis, reserved_memory_mb, reserved_gpus, live_attempts) <> (0, 0, 0, 0)})
	  . ' ' . sb('SELECT count(*) FROM sched.worker WHERE live_attempts <> 0'),
	'0 0', 'their reservations and slots are released');
check_invariants($standby, 'after the reaping on the new primary');

# dispatching continues: dispatch_next places pending work (requeued work included, once
# its retry backoff has passed)
ok($standby->poll_query_until('postgres',
		q{SELECT count(*) > 0 FROM sched.request WHERE state = 'PENDING' AND available_at <= now()}),
	'pending work is ready on the new primary');
my @placed = split /\n/, sb(q{SELECT outcome || ' ' || request_id || ' ' || node_id FROM sched.dispatch_next(5)
  WHERE outcome = 'DISPATCHED'});
cmp_ok(scalar(@placed), '>', 0, 'dispatch_next places pending work on the new primary: ' . join(', ', @placed));

# and the load, pointed at the new primary, goes on
my $acks_before = ack_count();
my ($stop2, @load2) = start_load($standby, 's');
my $t_resume = time;
usleep(100_000) while ack_count() < $acks_before + 50 && time < $t_resume + 60;
my $resume_ms = int((time - $t_resume) * 1000);
cmp_ok(ack_count(), '>=', $acks_before + 50, 'the load acknowledges new dispatches on the new primary');
usleep(2_000_000);
stop_load($standby, $stop2, @load2);

$logs = read_logs();
my $total = check_acks($standby, 'at the end', $logs);
check_invariants($standby, 'at the end');
is(scalar(@{ $logs->{errors} }), 0, 'the load clients met no error but the failover')
  or diag(join("\n", @{ $logs->{errors} }[0 .. (@{ $logs->{errors} } > 9 ? 9 : $#{ $logs->{errors} })]));

check_server_log($primary, 'the old primary');
check_server_log($standby, 'the standby, then new primary');

diag("007_failover: $acked_p dispatches acknowledged on the primary (synchronous commit), all on the promoted standby exactly once; "
	  . ($total - $acked_p) . " more acknowledged on the new primary");
diag("007_failover: stop immediate to promoted in $failover_ms ms (promotion $promote_ms ms); "
	  . "$live_at_failover attempts live at the failover, all reaped LOST by the new primary's maintenance worker within $reap_ms ms; "
	  . "50 new acks $resume_ms ms after the load was pointed at the new primary");
diag("007_failover: the immediate stop cut $cut of " . scalar(@kinds) . " load clients off mid-session");
diag("007_failover: the standby answered the diagnostics in $diag_ok of $diag_rounds passes under load");

$standby->stop;
done_testing();
