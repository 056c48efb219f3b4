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
#   - a waiter lets go of its snapshot (no backend_xmin: it does not hold back vacuum)
#     when its call is a statement of its own, and keeps it when its statement reads a
#     table or a DO block makes the call;
#   - a wait that sees no turn given back for sched.dispatch_wait_max runs over the limit
#     (timed_out) and gives its turn back when done; a waiter behind turns that are given
#     back waits on past it;
#   - once the first waiter has waited sched.dispatch_handoff_after, a turn given back is
#     handed to it (handed); not with -1;
#   - pg_cancel_backend and pg_terminate_backend of a waiter take it off the queue, and
#     an error inside a call (statement_timeout while it holds the turn), also inside a
#     PL/pgSQL exception block, gives the turn back;
#   - a waiter that woke on a CPU where another turn is held moves to the CPU its turn
#     was freed on, and gets back the CPUs it was allowed (Linux with two CPUs and
#     taskset); not with sched.dispatch_move_to_free_cpu off, nor to a CPU it may not
#     use;
#   - the limit 0 turns the gate off; without preloading there is no gate (NULLs) and
#     dispatch works.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);

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

# whether backend $pid holds a snapshot (backend_xmin)
sub xmin_held
{
	my ($pid) = @_;
	return $node->safe_psql('postgres',
		"SELECT backend_xmin IS NOT NULL FROM pg_stat_activity WHERE pid = $pid");
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
is(xmin_held($pid_b), 'f', 'and without a snapshot (a statement of its own: it does not hold back vacuum)');

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
# A waiter keeps its snapshot where it could read with it again
# ---------------------------------------------------------------------------------------
my $rs = submit();
hold($rs);
start($a, "SELECT outcome FROM sched.dispatch_attempt($rs)");
ok(waits_for_lock($pid_a), 'A holds the turn');
my ($rt, $ru) = (submit(), submit());
start($b,
	"SELECT d.outcome FROM sched.request r, LATERAL sched.dispatch_attempt(r.request_id) d WHERE r.request_id = $rt");
ok(waits_at_gate($pid_b), 'B waits, its statement reading sched.request');
is(xmin_held($pid_b), 't', 'B keeps its snapshot: its statement reads a table with it');
start($c, "DO \$\$BEGIN PERFORM sched.dispatch_attempt($ru); END\$\$");
ok(waits_at_gate($pid_c), 'C waits, called from a DO block');
is(xmin_held($pid_c), 't', 'C keeps its snapshot: the block could read with it afterwards');
$holder->query_safe('COMMIT');
is(finish($a), 'DISPATCHED', 'A placed');
is(finish($b), 'DISPATCHED', 'B placed');
finish($c);
is($node->safe_psql('postgres', "SELECT state FROM sched.request WHERE request_id = $ru"), 'DISPATCHED',
	'C placed');
is(gate(), '0 0', 'nothing held or waiting');

# ---------------------------------------------------------------------------------------
# A wait runs over the limit when no turn was given back for sched.dispatch_wait_max,
# counted from the last turn given back
# ---------------------------------------------------------------------------------------
{
	my $holder2 = $node->background_psql('postgres');
	my ($rh, $rb, $rc) = (submit(), submit(), submit());
	hold($rh);
	$holder2->query_safe("BEGIN; SELECT 1 FROM sched.request WHERE request_id = $rb FOR UPDATE");
	$_->query_safe("SET sched.dispatch_wait_max = '6s'") for ($a, $b, $c);
	my $timed_out0 = counter('timed_out');
	start($a, "SELECT outcome FROM sched.dispatch_attempt($rh)");
	ok(waits_for_lock($pid_a), 'A holds the turn, waiting for a row');
	start($b, "SELECT outcome FROM sched.dispatch_attempt($rb)");
	ok(waits_at_gate($pid_b), 'B waits');
	start($c, "SELECT outcome FROM sched.dispatch_attempt($rc)");
	ok(waits_at_gate($pid_c), 'C waits after B');
	sleep(3.5);
	$holder->query_safe('COMMIT');    # A's call ends: its turn goes to B, which waits for its row
	is(finish($a), 'DISPATCHED', 'A placed');
	ok(waits_for_lock($pid_b), 'B holds the turn, waiting for its row');
	sleep(3.5);    # C has waited 7 s, 3.5 s since a turn was given back
	is(gate(), '1 1', 'C waits on past sched.dispatch_wait_max from the start of its wait');
	is(counter('timed_out'), $timed_out0, 'nothing ran over the limit');
	$holder2->query_safe('COMMIT');
	is(finish($b), 'DISPATCHED', 'B placed');
	is(finish($c), 'DISPATCHED', 'C got the turn B gave back');
	is(counter('timed_out'), $timed_out0, 'still nothing over the limit');
	$_->query_safe('RESET sched.dispatch_wait_max') for ($a, $b, $c);
	$holder2->quit;
}

# ---------------------------------------------------------------------------------------
# A turn given back is handed to a waiter that waited sched.dispatch_handoff_after
# ---------------------------------------------------------------------------------------
foreach my $case ([ '0', 1, 'with sched.dispatch_handoff_after = 0 the turn A gave back is handed to B' ],
	[ '-1', 0, 'with -1 it is not: B takes it when it wakes' ])
{
	my ($after, $n, $what) = @$case;
	$_->query_safe("SET sched.dispatch_handoff_after = '$after'") for ($a, $b);
	my ($ra, $rb) = (submit(), submit());
	hold($ra);
	start($a, "SELECT outcome FROM sched.dispatch_attempt($ra)");
	ok(waits_for_lock($pid_a), 'A holds the turn');
	start($b, "SELECT outcome FROM sched.dispatch_attempt($rb)");
	ok(waits_at_gate($pid_b), 'B waits');
	my $handed = counter('handed');
	$holder->query_safe('COMMIT');
	is(finish($a) . ' ' . finish($b), 'DISPATCHED DISPATCHED', 'both placed');
	is(counter('handed') - $handed, $n, $what);
	is(gate(), '0 0', 'nothing held or waiting');
	$_->query_safe('RESET sched.dispatch_handoff_after') for ($a, $b);
}

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

# ---------------------------------------------------------------------------------------
# A woken waiter moves to the CPU its turn was freed on (Linux)
# ---------------------------------------------------------------------------------------
# Two turns: C holds one taken on CPU y, A one taken on CPU x (each pinned there by
# taskset, and each waiting for a row), B waits at the gate, last run on y.  When A's
# call ends on x, B is woken; y is idle (C sleeps), so the kernel wakes B there, where C's
# turn was taken: B moves to x.  B's CPUs are given back after the move.
sub cpus_allowed
{
	my ($pid) = @_;
	open(my $f, '<', "/proc/$pid/status") or return '';
	my ($list) = map { /^Cpus_allowed_list:\s*(\S+)/ ? $1 : () } <$f>;
	close($f);
	return $list // '';
}

sub pin
{
	my ($pid, $cpus) = @_;
	system('taskset', '-pc', $cpus, $pid) == 0 or die "taskset -pc $cpus $pid failed";
	# (taskset prints the masks; the test reads /proc instead)
}

# the CPUs the server may use, as numbers (those of A's backend, which lives on)
my @cpus;
foreach my $part (split /,/, cpus_allowed($pid_a))
{
	if ($part =~ /^(\d+)-(\d+)$/) { push @cpus, $1 .. $2 }
	elsif ($part =~ /^(\d+)$/) { push @cpus, $1 }
}
SKIP:
{
	skip 'moving to the freed CPU needs Linux, taskset and two CPUs', 9
	  unless $^O eq 'linux' && @cpus >= 2 && system('taskset -V >/dev/null 2>&1') == 0;
	my ($x, $y) = @cpus[0, 1];
	my $both = "$x,$y";
	my $holder2 = $node->background_psql('postgres');
	$_->query_safe('SET sched.dispatch_concurrency = 2') for ($a, $b, $c);

	# one round: returns how many moves the gate counted, and B's CPUs afterwards
	my $round = sub {
		my ($b_cpus_while_waiting) = @_;
		my ($ra, $rc, $rb) = (submit(), submit(), submit());
		$holder->query_safe("BEGIN; SELECT 1 FROM sched.request WHERE request_id = $ra FOR UPDATE");
		$holder2->query_safe("BEGIN; SELECT 1 FROM sched.request WHERE request_id = $rc FOR UPDATE");
		pin($pid_c, $y);
		start($c, "SELECT outcome FROM sched.dispatch_attempt($rc)");
		waits_for_lock($pid_c) or die 'C does not wait for its row';
		pin($pid_a, $x);
		start($a, "SELECT outcome FROM sched.dispatch_attempt($ra)");
		waits_for_lock($pid_a) or die 'A does not wait for its row';
		pin($pid_b, $y);
		$b->query_safe('SELECT 1');    # B runs on y
		start($b, "SELECT outcome FROM sched.dispatch_attempt($rb)");
		waits_at_gate($pid_b) or die 'B does not wait at the gate';
		pin($pid_b, $b_cpus_while_waiting);
		my $moved = counter('moved');
		$holder->query_safe('COMMIT');    # A's call ends on x, and wakes B
		my $oa = finish($a);
		my $ob = finish($b);
		$holder2->query_safe('COMMIT');
		my $oc = finish($c);
		die "not all placed: $oa $ob $oc" unless "$oa $ob $oc" eq 'DISPATCHED DISPATCHED DISPATCHED';
		pin($pid_a, $both);
		pin($pid_c, $both);
		return (counter('moved') - $moved, cpus_allowed($pid_b));
	};

	# the kernel wakes B on y when y is idle: a busy machine may wake it on x (then it has
	# nothing to move for), so up to three rounds
	my ($moves, $after) = (0, '');
	for my $try (1 .. 3)
	{
		($moves, $after) = $round->($both);
		last if $moves > 0;
	}
	is($moves, 1, 'B, woken on the CPU where C took its turn, moved to the CPU A freed');
	is($after, cpus_allowed($pid_a), 'and has every CPU it was allowed again');
	is(gate(), '0 0', 'nothing held or waiting');

	$b->query_safe('SET sched.dispatch_move_to_free_cpu = off');
	($moves, $after) = $round->($both);
	is($moves, 0, 'with sched.dispatch_move_to_free_cpu off B stays where it woke');
	is($after, cpus_allowed($pid_a), 'its CPUs untouched');
	$b->query_safe('RESET sched.dispatch_move_to_free_cpu');

	($moves, $after) = $round->($y);
	is($moves, 0, 'B does not move to a CPU it may not use');
	is($after, "$y", 'and keeps the one CPU it was allowed');
	pin($pid_b, $both);
	is(gate(), '0 0', 'nothing held or waiting');
	is($node->safe_psql('postgres', 'SELECT moved <= waited FROM sched._dispatch_gate()'), 't',
		'only waiters move');
	$_->query_safe('RESET sched.dispatch_concurrency') for ($a, $b, $c);
	$holder2->quit;
}

# values out of range are refused, naming the setting (22023)
foreach my $bad ("sched.dispatch_concurrency = -2", "sched.dispatch_concurrency = 10001",
	"sched.dispatch_wait_max = '-1ms'", "sched.dispatch_wait_max = '2h'",
	"sched.dispatch_handoff_after = '-2ms'", "sched.dispatch_handoff_after = '2h'",
	"sched.dispatch_move_to_free_cpu = 'sometimes'")
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
is($plain->safe_psql('postgres', 'SELECT num_nulls(concurrency, running, waiting, entered, waited, timed_out, bypassed, moved, handed) FROM sched._dispatch_gate()'), '9',
	'without preloading the gate reads NULL');
is($plain->safe_psql('postgres',
		"SELECT outcome FROM sched.dispatch_attempt(sched.submit(gen_random_uuid(), gen_random_uuid(), 'cap', 'v1'))"),
	'DISPATCHED', 'and dispatch works');
$plain->stop;

$node->stop;
done_testing();
