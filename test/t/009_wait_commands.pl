# 009_wait_commands.pl — sched.wait_commands sleeps until a command for its worker
# commits, without a snapshot, and can be cancelled (issue 13, part 1).
#
#   - a waiter sleeps in wait event Extension with no backend_xmin and no xid, and vacuum
#     removes rows deleted while it sleeps (control: a session in pg_sleep holds them
#     back: "dead but not yet removable");
#   - a dispatch in an open transaction does not wake it; the commit does: it returns the
#     START command (if the wake-up were lost, it would sleep its 10 minutes and the
#     harness's timeout would fail the test);
#   - with two workers waiting, a command for one wakes only that one;
#   - with start => true the woken wait also starts the attempt it returns;
#   - a heartbeat that changes the state to DRAINING or STOPPED wakes the worker's wait,
#     and so does a new registration (the replaced session's wait is refused, 55000);
#   - pg_cancel_backend and statement_timeout end a wait at once with their errors, and
#     the next wait of the session works;
#   - a streaming standby refuses it (25006), and so does a server without pg_sched in
#     shared_preload_libraries (55000, naming the setting), where poll_commands works.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('sched_wait');
$node->init(allows_streaming => 1);
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'pg_sched'
log_min_messages = warning
});
$node->start;

my $w1 = 'aaaaaaaa-0000-4000-8000-000000000001';
my $w2 = 'aaaaaaaa-0000-4000-8000-000000000002';
$node->safe_psql(
	'postgres', qq{
CREATE EXTENSION pg_sched;
SELECT sched.upsert_node('node-a', cpu_millis => 8000, memory_mb => 8192);
SELECT sched.register_worker('node-a', 'cap', ARRAY['v1'], 8, worker_id => '$w1');
SELECT sched.register_worker('node-a', 'other', ARRAY['v1'], 8, worker_id => '$w2');
CREATE TABLE public.vac (i int) WITH (autovacuum_enabled = off);
});

# a request of capability $cap for step $step; its request_id
sub submit
{
	my ($cap, $step) = @_;
	return $node->safe_psql('postgres',
		"SELECT sched.submit(gen_random_uuid(), '$step', '$cap', 'v1')");
}

# starts a wait in background session $bg: returns once the statement is sent (only for a
# wait that will sleep: a result that came at once would be read, and lost, here)
sub start_wait
{
	my ($bg, $worker, $timeout, $start) = @_;
	$start //= 'false';
	$bg->query_until(qr/started\n/,
		    "\\echo started\n"
		  . "SELECT kind || ' ' || step_id || CASE WHEN lease_expires_at IS NOT NULL THEN ' started' ELSE '' END"
		  . "  FROM sched.wait_commands('$worker', 1, 10, '$timeout', start => $start);\n"
		  . "\\echo done\n");
}

# what the wait started in $bg returned (stdout), once it returned
sub finish_wait
{
	my ($bg) = @_;
	my $out = $bg->query_until(qr/done\n/, '');
	$out =~ s/done\n\z//;
	chomp $out;
	return $out;
}

sub sleeping
{
	my ($pid) = @_;
	return $node->poll_query_until('postgres',
		"SELECT wait_event = 'Extension' FROM pg_stat_activity WHERE pid = $pid");
}

my $bg1 = $node->background_psql('postgres', on_error_stop => 0);
my $bg2 = $node->background_psql('postgres');
my $pid1 = $bg1->query_safe('SELECT pg_backend_pid()');
my $pid2 = $bg2->query_safe('SELECT pg_backend_pid()');

# ---------------------------------------------------------------------------------------
# Asleep without a snapshot: vacuum is not held back
# ---------------------------------------------------------------------------------------
sub vacuum_report
{
	$node->safe_psql('postgres',
		'INSERT INTO public.vac SELECT generate_series(1, 1000); DELETE FROM public.vac');
	my ($out, $err) = ('', '');
	$node->psql('postgres', 'VACUUM (VERBOSE) public.vac', stdout => \$out, stderr => \$err);
	my ($line) = $err =~ /(tuples: \d+ removed, \d+ remain, \d+ are dead but not yet removable)/;
	return $line // "no tuples line in: $err";
}

my $control = $node->background_psql('postgres', on_error_stop => 0);
my $cpid = $control->query_safe('SELECT pg_backend_pid()');
$control->query_until(qr/started\n/, "\\echo started\nSELECT pg_sleep(600);\n");
ok($node->poll_query_until('postgres',
		"SELECT wait_event = 'PgSleep' AND backend_xmin IS NOT NULL FROM pg_stat_activity WHERE pid = $cpid"),
	'control: a session in pg_sleep holds a snapshot');
is(vacuum_report(), 'tuples: 0 removed, 1000 remain, 1000 are dead but not yet removable',
	'control: vacuum cannot remove what the sleeping snapshot may see');
$node->safe_psql('postgres', "SELECT pg_cancel_backend($cpid)");
$control->quit;
$node->poll_query_until('postgres', "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $cpid");
$node->safe_psql('postgres', 'VACUUM public.vac');

start_wait($bg1, $w1, '10 min');
ok(sleeping($pid1), 'a waiter sleeps in wait event Extension');
is($node->safe_psql('postgres',
		"SELECT backend_xmin IS NULL, backend_xid IS NULL FROM pg_stat_activity WHERE pid = $pid1"),
	't|t', 'while it sleeps it has no backend_xmin and no xid');
is(vacuum_report(), 'tuples: 1000 removed, 0 remain, 0 are dead but not yet removable',
	'vacuum removes rows deleted while it sleeps');

# ---------------------------------------------------------------------------------------
# Woken at commit, not before
# ---------------------------------------------------------------------------------------
my $step1 = '5f000000-0000-4000-8000-000000000001';
my $r1 = submit('cap', $step1);
my $tx = $node->background_psql('postgres');
$tx->query_safe('BEGIN');
is($tx->query_safe("SELECT outcome FROM sched.dispatch_attempt($r1)"), 'DISPATCHED',
	'a dispatch to the waiting worker, in an open transaction');
ok(sleeping($pid1), 'the waiter still sleeps while that transaction is open');
$tx->query_safe('COMMIT');
is(finish_wait($bg1), "START $step1", 'at its commit the waiter returns the START command');
$tx->quit;

# ---------------------------------------------------------------------------------------
# Only the worker the command is for is woken
# ---------------------------------------------------------------------------------------
start_wait($bg1, $w1, '10 min');
start_wait($bg2, $w2, '10 min');
ok(sleeping($pid1) && sleeping($pid2), 'two workers wait');
my $step2 = '5f000000-0000-4000-8000-000000000002';
my $r2 = submit('other', $step2);
is($node->safe_psql('postgres', "SELECT outcome FROM sched.dispatch_attempt($r2)"), 'DISPATCHED',
	"a dispatch to w2 commits");
is(finish_wait($bg2), "START $step2", 'w2 returns its START command');
ok(sleeping($pid1), 'w1 sleeps on');

# ---------------------------------------------------------------------------------------
# Woken by its own state: a drain, a new registration
# ---------------------------------------------------------------------------------------
$node->safe_psql('postgres', "SELECT sched.heartbeat('$w2', 1, runtime_state => 'DRAINING')");
start_wait($bg2, $w2, '10 min');
ok(sleeping($pid2), 'w2 waits while DRAINING already');
$node->safe_psql('postgres', "SELECT sched.heartbeat('$w2', 1, runtime_state => 'DRAINING')");
ok(sleeping($pid2), 'another DRAINING heartbeat does not wake it (no change of state)');
$node->safe_psql('postgres', "SELECT sched.heartbeat('$w2', 1, runtime_state => 'STOPPED')");
is(finish_wait($bg2), '', 'a heartbeat to STOPPED wakes its wait: it returns nothing, at once');
$node->safe_psql('postgres', "SELECT sched.heartbeat('$w2', 1, runtime_state => 'READY')");
my $bg3 = $node->background_psql('postgres', on_error_stop => 0);
my $pid3 = $bg3->query_safe('SELECT pg_backend_pid()');
start_wait($bg3, $w2, '10 min');
ok(sleeping($pid3), 'w2 waits again');
is($node->safe_psql('postgres',
		"SELECT generation FROM sched.register_worker('node-a', 'other', ARRAY['v1'], 8, worker_id => '$w2')"),
	'2', 'w2 registers again (generation 2)');
is(finish_wait($bg3), '', 'the replaced session\'s wait returns at once');
like($bg3->{stderr}, qr/stale generation 1 for worker $w2/, 'refused: stale generation');
$bg3->quit;

# ---------------------------------------------------------------------------------------
# Cancelled at once
# ---------------------------------------------------------------------------------------
$node->safe_psql('postgres', "SELECT pg_cancel_backend($pid1)");
is(finish_wait($bg1), '', 'pg_cancel_backend ends the wait');
like($bg1->{stderr}, qr/canceling statement due to user request/, 'with the cancel error');
$bg1->{stderr} = '';

$bg1->query_safe("SET statement_timeout = '300ms'");
start_wait($bg1, $w1, '10 min');
is(finish_wait($bg1), '', 'statement_timeout ends the wait');
like($bg1->{stderr}, qr/canceling statement due to statement timeout/, 'with the timeout error');
$bg1->{stderr} = '';
$bg1->query_safe('RESET statement_timeout');

my $step3 = '5f000000-0000-4000-8000-000000000003';
my $r3 = submit('cap', $step3);
is($node->safe_psql('postgres', "SELECT outcome FROM sched.dispatch_attempt($r3)"), 'DISPATCHED',
	'a command for w1 is there before it waits');
# it returns at once: one round trip (start_wait would race with the result)
is($bg1->query_safe(
		"SELECT kind || ' ' || step_id FROM sched.wait_commands('$w1', 1, 10, '10 min')"),
	"START $step3", 'the next wait of the session works, and returns at once what is there');
is($node->safe_psql('postgres', 'SELECT count(*) FROM sched.command WHERE delivered_at IS NULL'), '0',
	'every command was delivered once');

# ---------------------------------------------------------------------------------------
# Woken, and the attempt started in the same call (start => true)
# ---------------------------------------------------------------------------------------
start_wait($bg1, $w1, '10 min', 'true');
ok(sleeping($pid1), 'w1 waits to start what it receives');
my $step4 = '5f000000-0000-4000-8000-000000000004';
my $r4 = submit('cap', $step4);
is($node->safe_psql('postgres', "SELECT outcome FROM sched.dispatch_attempt($r4)"), 'DISPATCHED',
	'a dispatch to w1 commits');
is(finish_wait($bg1), "START $step4 started", 'w1 returns the START command, its attempt started');
is($node->safe_psql('postgres',
		"SELECT a.status || ' ' || (a.started_at IS NOT NULL) || ' ' || e.status"
	  . "  FROM sched.attempt a JOIN sched.execution e USING (execution_id) WHERE a.request_id = $r4"),
	'RUNNING true RUNNING', 'the attempt and its execution are RUNNING');
$bg1->quit;
$bg2->quit;

# ---------------------------------------------------------------------------------------
# A standby refuses it
# ---------------------------------------------------------------------------------------
$node->backup('base');
my $standby = PostgreSQL::Test::Cluster->new('sched_wait_standby');
$standby->init_from_backup($node, 'base', has_streaming => 1);
$standby->start;
$node->wait_for_catchup($standby);
my ($out, $err) = ('', '');
$standby->psql('postgres',
	"SELECT * FROM sched.wait_commands('$w1', 1, 10, '1 s');\n\\echo :LAST_ERROR_SQLSTATE",
	stdout => \$out, stderr => \$err, on_error_stop => 0);
is($out, '25006', 'on a standby: SQLSTATE 25006');
like($err, qr/sched.wait_commands cannot run on a standby/, 'saying why');
$standby->stop;

# ---------------------------------------------------------------------------------------
# A server without pg_sched in shared_preload_libraries refuses it; poll_commands works
# ---------------------------------------------------------------------------------------
my $plain = PostgreSQL::Test::Cluster->new('sched_wait_plain');
$plain->init;
$plain->start;
$plain->safe_psql(
	'postgres', qq{
CREATE EXTENSION pg_sched;
SELECT sched.upsert_node('node-a', cpu_millis => 8000, memory_mb => 8192);
SELECT sched.register_worker('node-a', 'cap', ARRAY['v1'], 8, worker_id => '$w1');
});
($out, $err) = ('', '');
$plain->psql('postgres',
	"SELECT * FROM sched.wait_commands('$w1', 1, 10, '1 s');\n\\echo :LAST_ERROR_SQLSTATE",
	stdout => \$out, stderr => \$err, on_error_stop => 0);
is($out, '55000', 'without preloading: SQLSTATE 55000');
like($err, qr/needs pg_sched in shared_preload_libraries.*\n.*\n.*HINT:.*sched.poll_commands/,
	'naming the setting, and poll_commands as the alternative');
$plain->safe_psql('postgres',
	"SELECT sched.dispatch_attempt(sched.submit(gen_random_uuid(), '$step1', 'cap', 'v1'))");
is($plain->safe_psql('postgres',
		"SELECT kind || ' ' || step_id FROM sched.poll_commands('$w1', 1)"),
	"START $step1", 'poll_commands delivers there');
$plain->stop;

$node->stop;
done_testing();
