# 010_dispatch_gate.pl — at most sched.dispatch_concurrency placement calls run at once;
# the others wait their turn, in order, and never longer than sched.dispatch_wait_max
# (issue 16).
#
#   - with the limit 1, a dispatch_attempt that holds the turn while it waits for a
#     request row keeps a dispatch_next waiting at the gate (wait event Extension,
#     running 1, waiting 1); when the row is free, the turn passes to the waiter, which
#     places its request; nothing is left held;
#   - a call whose transaction has an xid, or made a placement call before, does not
#     wait (bypassed): it could hold what the running call waits for;
#   - waiters are woken in the order they came (two waiters: the first runs first), and a
#     waiter that takes a turn wakes the next one only when another turn is free;
#   - a wait that reaches sched.dispatch_wait_max runs over the limit (timed_out) and
#     gives its turn back when done;
#   - pg_cancel_backend and pg_terminate_backend of a waiter take it off the queue, and
#     an error inside a call (statement_timeout while it holds the turn), also inside a
#     PL/pgSQL exception block, gives the turn back;
#   - the limit 0 turns the gate off; without preloading there is no gate (NULLs) and
#     dispatch works.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('sched_gate');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'pg_sched'
sched.dispatch_concurrency = 1
sched.dispatch_wait_max = '10min'
log_min_messages = warning
});
$node->start;

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION pg_sched;
-- four nodes: a turn is given back when the call returns, before its transaction
-- commits, so the next call may find the pair the last one reserved still locked and
-- place on another (with one node it would report contention)
SELECT sched.upsert_node('node-' || i, cpu_millis => 64000, memory_mb => 65536) FROM generate_series(1, 4) i;
SELECT sched.register_worker('node-' || i, 'cap', ARRAY['v1'], 64) FROM generate_series(1, 4) i;
});

my $holder = $node->background_psql('postgres');    # holds request rows in an open transaction

sub submit
{
	return $node->safe_psql('postgres',
		"SELECT sched.submit(gen_random_uuid(), gen_random_uuid(), 'cap', 'v1')");
}

sub gate
{
	return $node->safe_psql('postgres',
		'SELECT running || \' \' || waiting FROM sched._dispatch_gate()');
}

sub counter
{
	my ($name) = @_;
	return $node->safe_psql('postgres', "SELECT $name FROM sched._dispatch_gate()");
}

sub waits_at_gate
{
	my ($pid) = @_;
	return $node->poll_query_until('postgres',
		"SELECT wait_event_type = 'Extension' AND wait_event = 'Extension' FROM pg_stat_activity WHERE pid = $pid");
}

sub waits_for_lock
{
	my ($pid) = @_;
	return $node->poll_query_until('postgres',
		"SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $pid");
}

# starts $sql in background session $bg; returns once it is sent
sub start
{
	my ($bg, $sql) = @_;
	$bg->query_until(qr/started\n/, "\\echo started\n$sql;\n\\echo done\n");
}

# the holder's open transaction locks request $r (as a superuser may): a placement call
# that takes it waits for the row
sub hold
{
	my ($r) = @_;
	$holder->query_safe("BEGIN; SELECT 1 FROM sched.request WHERE request_id = $r FOR UPDATE");
}

# what the statement started in $bg printed, once it returned
sub finish
{
	my ($bg) = @_;
	my $out = $bg->query_until(qr/done\n/, '');
	$out =~ s/done\n\z//;
	chomp $out;
	return $out;
}

my $a = $node->background_psql('postgres', on_error_stop => 0);    # holds the turn, waiting for a row
my $b = $node->background_psql('postgres', on_error_stop => 0);    # waits at the gate
my $c = $node->background_psql('postgres', on_error_stop => 0);
my $pid_a = $a->query_safe('SELECT pg_backend_pid()');
my $pid_b = $b->query_safe('SELECT pg_backend_pid()');
my $pid_c = $c->query_safe('SELECT pg_backend_pid()');

is(gate(), '0 0', 'nothing runs or waits');
is($node->safe_psql('postgres', 'SELECT concurrency FROM sched._dispatch_gate()'), '1',
	'the limit in force is the setting');

# C's transaction makes a placement call that writes nothing (no xid) while the gate is free
my $c_tx = $c->query_safe('BEGIN; SELECT count(*) FROM sched.dispatch_next(1, \'no-such-capability\')');
is($c_tx, '0', 'C\'s first placement call of its transaction places nothing');

# A holds the turn while it waits for request r1, which the holder's transaction locks
my $r1 = submit();
hold($r1);
my $entered = counter('entered');
start($a, "SELECT outcome FROM sched.dispatch_attempt($r1)");
ok(waits_for_lock($pid_a), 'A waits for r1, holding the turn');
is(gate(), '1 0', 'one turn held');

# B waits at the gate
my $r2 = submit();
start($b, 'SELECT outcome FROM sched.dispatch_next(1)');
ok(waits_at_gate($pid_b), 'B waits at the gate in wait event Extension');
is(gate(), '1 1', 'one turn held, one call waiting');
is($node->safe_psql('postgres', "SELECT backend_xid IS NULL FROM pg_stat_activity WHERE pid = $pid_b"),
	't', 'B waits without an xid');

# a transaction that made a placement call, or has an xid, is not held back
my $r3 = submit();
my $bypassed = counter('bypassed');
is($node->safe_psql('postgres', "SELECT backend_xid IS NULL FROM pg_stat_activity WHERE pid = $pid_c"),
	't', 'C has no xid');
is($c->query_safe("SELECT outcome FROM sched.dispatch_attempt($r3)"), 'DISPATCHED',
	'a second placement call of a transaction runs at once (the first may hold step locks)');
$c->query_safe('ROLLBACK');
$c->query_safe('BEGIN');
$c->query_safe('SELECT pg_current_xact_id()');
is($c->query_safe("SELECT outcome FROM sched.dispatch_attempt($r3)"), 'DISPATCHED',
	'a call whose transaction has an xid runs at once');
$c->query_safe('ROLLBACK');
is(counter('bypassed'), $bypassed + 2, 'both counted as bypassed');
is(gate(), '1 1', 'B still waits');

# the holder commits: A places r1 and leaves, its turn goes to B
$holder->query_safe('COMMIT');
is(finish($a), 'DISPATCHED', 'A places r1 once the row is free');
is(finish($b), 'DISPATCHED', 'B got the turn and placed its request');
is(gate(), '0 0', 'nothing held or waiting afterwards');
is(counter('entered'), $entered + 2, 'A\'s and B\'s turns were counted');
ok(counter('waited') >= 1, 'B counted as waited');

# ---------------------------------------------------------------------------------------
# Two waiters are woken in the order they came
# ---------------------------------------------------------------------------------------
my $r4 = submit();
hold($r4);
start($a, "SELECT outcome FROM sched.dispatch_attempt($r4)");
ok(waits_for_lock($pid_a), 'A holds the turn again');
my $r5 = submit();
my $r6 = submit();
start($b, "SELECT outcome FROM sched.dispatch_attempt($r5)");
ok(waits_at_gate($pid_b), 'B waits');
start($c, "SELECT outcome FROM sched.dispatch_attempt($r6)");
ok(waits_at_gate($pid_c), 'C waits after B');
is(gate(), '1 2', 'two waiting');
$holder->query_safe('COMMIT');
finish($a);
my $ob = finish($b);
my $oc = finish($c);
is("$ob $oc", 'DISPATCHED DISPATCHED', 'both placed');
# the START command is written inside the call, so its id (a sequence) orders the turns
is($node->safe_psql('postgres',
		"SELECT (SELECT command_id FROM sched.command WHERE request_id = $r5)"
		  . " < (SELECT command_id FROM sched.command WHERE request_id = $r6)"),
	't', 'B (first to wait) placed before C');
is(gate(), '0 0', 'nothing held or waiting');

# ---------------------------------------------------------------------------------------
# A wait that reaches sched.dispatch_wait_max runs over the limit
# ---------------------------------------------------------------------------------------
my $r7 = submit();
hold($r7);
start($a, "SELECT outcome FROM sched.dispatch_attempt($r7)");
ok(waits_for_lock($pid_a), 'A holds the turn');
my $timed_out = counter('timed_out');
my $r8 = submit();
$b->query_safe("SET sched.dispatch_wait_max = '300ms'");
is($b->query_safe("SELECT outcome FROM sched.dispatch_attempt($r8)"), 'DISPATCHED',
	'a call that waited sched.dispatch_wait_max runs over the limit');
is(counter('timed_out'), $timed_out + 1, 'counted as timed out');
is(gate(), '1 0', 'and gave its turn back: A\'s is the one held');
$b->query_safe('RESET sched.dispatch_wait_max');

# ---------------------------------------------------------------------------------------
# A cancelled or terminated waiter leaves the queue; an error gives the turn back
# ---------------------------------------------------------------------------------------
start($b, 'SELECT outcome FROM sched.dispatch_next(1)');
ok(waits_at_gate($pid_b), 'B waits');
$node->safe_psql('postgres', "SELECT pg_cancel_backend($pid_b)");
is(finish($b), '', 'pg_cancel_backend ends the wait');
like($b->{stderr}, qr/canceling statement due to user request/, 'with the cancel error');
$b->{stderr} = '';
is(gate(), '1 0', 'B left the queue');

my $d = $node->background_psql('postgres', on_error_stop => 0);
my $pid_d = $d->query_safe('SELECT pg_backend_pid()');
start($d, 'SELECT outcome FROM sched.dispatch_next(1)');
ok(waits_at_gate($pid_d), 'D waits');
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid_d)");
$node->poll_query_until('postgres', "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $pid_d");
is(gate(), '1 0', 'a terminated waiter left the queue');

$holder->query_safe('COMMIT');
is(finish($a), 'DISPATCHED', 'A returns');
is(gate(), '0 0', 'nothing held');

# the call errors while it holds the turn (statement_timeout as it waits for a row)
my $r9 = submit();
hold($r9);
$a->query_safe("SET statement_timeout = '300ms'");
is(scalar $a->query("SELECT outcome FROM sched.dispatch_attempt($r9)"), '',
	'a call cancelled while it holds the turn');
like($a->{stderr}, qr/canceling statement due to statement timeout/, 'by statement_timeout');
$a->{stderr} = '';
is(gate(), '0 0', 'gave the turn back');
is($a->query_safe(
		"DO \$\$DECLARE n int; BEGIN"
		  . "  BEGIN PERFORM sched.dispatch_attempt($r9); EXCEPTION WHEN query_canceled THEN NULL; END;"
		  . '  SELECT running INTO n FROM sched._dispatch_gate();'
		  . "  IF n <> 0 THEN RAISE EXCEPTION 'the turn is still held after the error'; END IF;"
		  . "END\$\$; SELECT 'released'"), 'released',
	'also when the error is caught by a PL/pgSQL exception block: given back at once, inside the transaction');
$a->query_safe('RESET statement_timeout');
$holder->query_safe('COMMIT');

# ---------------------------------------------------------------------------------------
# The limit 0: no gate
# ---------------------------------------------------------------------------------------
my $r10 = submit();
hold($r10);
start($a, "SELECT outcome FROM sched.dispatch_attempt($r10)");
ok(waits_for_lock($pid_a), 'A holds the turn');
my $r11 = submit();
$b->query_safe('SET sched.dispatch_concurrency = 0');
is($b->query_safe("SELECT outcome FROM sched.dispatch_attempt($r11)"), 'DISPATCHED',
	'with sched.dispatch_concurrency = 0 a call does not wait');
is($b->query_safe('SELECT concurrency FROM sched._dispatch_gate()'), '0', 'the limit in force: none');
$holder->query_safe('COMMIT');
finish($a);
is(gate(), '0 0', 'nothing held');

# values out of range are refused, naming the setting (22023)
foreach my $bad ("sched.dispatch_concurrency = -2", "sched.dispatch_concurrency = 10001",
	"sched.dispatch_wait_max = '-1ms'", "sched.dispatch_wait_max = '2h'")
{
	my ($o, $e) = ('', '');
	my ($name) = $bad =~ /^(\S+)/;
	$node->psql('postgres', "SET $bad;\n\\echo :LAST_ERROR_SQLSTATE",
		stdout => \$o, stderr => \$e, on_error_stop => 0);
	is($o, '22023', "SET $bad: 22023");
	like($e, qr/\Q$name\E/, "... naming $name");
}

# a role other than a superuser cannot change the limit (it bounds what a caller gets)
$node->safe_psql('postgres', 'CREATE ROLE gate_app LOGIN; GRANT sched_scheduler TO gate_app');
my ($out, $err) = ('', '');
$node->psql('postgres', "SET sched.dispatch_concurrency = 0;\n\\echo :LAST_ERROR_SQLSTATE",
	stdout => \$out, stderr => \$err, on_error_stop => 0, extra_params => ['-U', 'gate_app']);
is($out, '42501', 'a scheduler role cannot set sched.dispatch_concurrency (42501)');

$_->quit for ($holder, $a, $b, $c);    # (D was terminated)

# ---------------------------------------------------------------------------------------
# Without preloading: no gate
# ---------------------------------------------------------------------------------------
my $plain = PostgreSQL::Test::Cluster->new('sched_gate_plain');
$plain->init;
$plain->start;
$plain->safe_psql(
	'postgres', q{
CREATE EXTENSION pg_sched;
SELECT sched.upsert_node('node-a', cpu_millis => 8000, memory_mb => 8192);
SELECT sched.register_worker('node-a', 'cap', ARRAY['v1'], 8);
});
is($plain->safe_psql('postgres', 'SELECT num_nulls(concurrency, running, waiting, entered, waited, timed_out, bypassed) FROM sched._dispatch_gate()'), '7',
	'without preloading the gate reads NULL');
is($plain->safe_psql('postgres',
		"SELECT outcome FROM sched.dispatch_attempt(sched.submit(gen_random_uuid(), gen_random_uuid(), 'cap', 'v1'))"),
	'DISPATCHED', 'and dispatch works');
$plain->stop;

$node->stop;
done_testing();
