#!/usr/bin/perl
#
# 003_standby.pl — the operator diagnostics answer on a hot standby (issue 4, item 6).
#
# A primary (streaming replication, pg_sched preloaded, maintenance worker configured)
# and a streaming standby made from a base backup taken before CREATE EXTENSION, so the
# extension, the fleet, the queue, the dispatches, starts, finishes and the timeline all
# reach the standby through WAL.  After catch-up:
#   * node_overview(at), pending(at), queue_stats(at), attempt_overview(at),
#     explain(request_id, at) for every request, execution_timeline(execution_id) for
#     every execution, qualification_reasons(request_id, at), rank_candidates and
#     select_candidate return exactly the same text on the standby as on the primary, for
#     a fixed `at` (and the primary's answers are checked for the expected content, so
#     the comparison is not between two empty answers);
#   * the plain views (computed for now()) and explain with its default `at` answer on the
#     standby without error;
#   * writes (dispatch_attempt, dispatch_next, submit, upsert_node, reap_expired,
#     claim_requests) fail on the standby with a read-only error (SQLSTATE 25006), and
#     the maintenance worker does not run there (it starts only once recovery finished).
# All times are fixed, in the future (2030), so the primary's maintenance worker (which
# reaps with now()) has nothing to change while the test compares.
#
# Run as `make test` does (suite_tap of test/harness.sh): as an unprivileged OS user, with
#   PATH=/usr/lib/postgresql/15/bin:$PATH
#   PERL5LIB=/usr/lib/postgresql/15/lib/pgxs/src/test/perl
#   TESTDIR=<a directory that user can write>  prove -v test/t/003_standby.pl
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# ---------------------------------------------------------------------------------------
# Primary and standby
# ---------------------------------------------------------------------------------------
my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
$primary->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'pg_sched'
sched.databases = 'postgres'
sched.maintenance_interval = '1s'
});
$primary->start;

$primary->backup('base');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'base', has_streaming => 1);
$standby->start;

sub p { return $primary->safe_psql('postgres', shift); }

p('CREATE EXTENSION pg_sched');

# ---------------------------------------------------------------------------------------
# Fleet at T = 2030-01-01 12:00 (render@1.0 everywhere; heartbeat TTL 60 s):
#   node-a  tier=fast  w100   4 CPUs  2 live attempts    heartbeat T-10 s
#   node-b  -          w150   8 CPUs                     heartbeat T-10 s
#   node-c  -          w100  16 CPUs                     heartbeat T-90 s
#   node-d  DRAINING   w100   8 CPUs                     heartbeat T-10 s
#   node-g  gpu=a100   w100   8 CPUs  1 GPU, reserved    heartbeat T-10 s (also train@1)
# ---------------------------------------------------------------------------------------
my $T = '2030-01-01 12:00:00+00';
sub at { my $s = shift; return "'$T'::timestamptz + interval '$s seconds'"; }

p(<<"EOSQL");
SELECT sched.upsert_node('node-a', '{"tier":"fast"}', 4000, 8192, 0, 100);
SELECT sched.upsert_node('node-b', '{}', 8000, 16384, 0, 150);
SELECT sched.upsert_node('node-c', '{}', 16000, 32768, 0, 100);
SELECT sched.upsert_node('node-d', '{}', 8000, 16384, 0, 100);
SELECT sched.upsert_node('node-g', '{"gpu":"a100"}', 8000, 65536, 1, 100);
SELECT sched.register_worker('node-a', 'render', '{1.0}', 4, 'aaaaaaaa-0000-4000-8000-000000000001', @{[at(-600)]});
SELECT sched.register_worker('node-b', 'render', '{1.0}', 4, 'bbbbbbbb-0000-4000-8000-000000000001', @{[at(-600)]});
SELECT sched.register_worker('node-c', 'render', '{1.0}', 4, 'cccccccc-0000-4000-8000-000000000001', @{[at(-600)]});
SELECT sched.register_worker('node-d', 'render', '{1.0}', 4, 'dddddddd-0000-4000-8000-000000000001', @{[at(-600)]});
SELECT sched.register_worker('node-g', 'render', '{1.0}', 4, '99999999-0000-4000-8000-000000000001', @{[at(-600)]});
SELECT sched.register_worker('node-g', 'train', '{1}', 2, '99999999-0000-4000-8000-000000000002', @{[at(-600)]});
EOSQL

# one execution through dispatch, start and finish (on node-b, the heaviest weight)
my $EXEC_DONE = 'e0000000-0000-4000-8000-000000000001';
my $done = p("SELECT sched.submit('$EXEC_DONE', '50000000-0000-4000-8000-000000000001',"
	  . " 'render', '1.0', tenant => 'acme', available_at => " . at(-600) . ")");
is(p("SELECT outcome || ' ' || node_id FROM sched.dispatch_attempt($done, at => " . at(-590) . ")"),
	'DISPATCHED node-b', 'primary: the first execution is dispatched to node-b');
my $done_attempt = p("SELECT attempt_id FROM sched.attempt WHERE request_id = $done");
p("SELECT sched.start_attempt('$done_attempt', 1, " . at(-589) . ")");
p("SELECT sched.finish_attempt('$done_attempt', 1, 'SUCCEEDED', '{\"exit_code\":0}', " . at(-560) . ")");
p("SELECT sched.complete_execution('$EXEC_DONE', " . at(-559) . ")");

# live attempts: a training run holding node-g's GPU, two pinned attempts on node-a
p("SELECT sched.heartbeat('99999999-0000-4000-8000-000000000002', 1, " . at(-120) . ")");
my $EXEC_TRAIN = 'e0000000-0000-4000-8000-000000000002';
my $train = p("SELECT sched.submit('$EXEC_TRAIN', '50000000-0000-4000-8000-000000000002',"
	  . " 'train', '1', tenant => 'globex', reserve_gpus => 1, reserve_cpu_millis => 2000,"
	  . " available_at => " . at(-180) . ")");
is(p("SELECT outcome || ' ' || node_id FROM sched.dispatch_attempt($train, at => " . at(-120) . ")"),
	'DISPATCHED node-g', 'primary: the training run is dispatched to node-g');
my $train_attempt = p("SELECT attempt_id FROM sched.attempt WHERE request_id = $train");
p("SELECT sched.start_attempt('$train_attempt', 1, " . at(-118) . ")");

p("SELECT sched.heartbeat('aaaaaaaa-0000-4000-8000-000000000001', 1, " . at(-60) . ")");
my $EXEC_PIN = 'e0000000-0000-4000-8000-000000000003';
for my $i (1 .. 2)
{
	my $r = p("SELECT sched.submit('$EXEC_PIN', '50000000-0000-4000-8000-00000000010$i',"
		  . " 'render', '1.0', tenant => 'acme', node_id => 'node-a',"
		  . " reserve_cpu_millis => 1000, available_at => " . at(-70 - 10 * $i) . ")");
	is(p("SELECT outcome || ' ' || node_id FROM sched.dispatch_attempt($r, at => " . at(-60) . ")"),
		'DISPATCHED node-a', "primary: pinned request $i is dispatched to node-a");
}

# last heartbeats; node-d drained
p(<<"EOSQL");
SELECT sched.heartbeat('cccccccc-0000-4000-8000-000000000001', 1, @{[at(-90)]});
SELECT sched.heartbeat('aaaaaaaa-0000-4000-8000-000000000001', 1, @{[at(-10)]});
SELECT sched.heartbeat('bbbbbbbb-0000-4000-8000-000000000001', 1, @{[at(-10)]});
SELECT sched.heartbeat('dddddddd-0000-4000-8000-000000000001', 1, @{[at(-10)]});
SELECT sched.heartbeat('99999999-0000-4000-8000-000000000001', 1, @{[at(-10)]});
SELECT sched.heartbeat('99999999-0000-4000-8000-000000000002', 1, @{[at(-10)]});
SELECT sched.drain_node('node-d');
EOSQL

# the queue: the worked example, 32 CPUs, 12 CPUs (only node-c, stale), a GPU (transient),
# and a claimed one
my %req;
my $EXEC_Q = 'e0000000-0000-4000-8000-000000000004';
sub submit_q
{
	my ($name, $n, $args) = @_;
	# one execution per tenant: every request of an execution has the execution's tenant
	my ($tenant) = $args =~ /tenant => '(\w+)'/;
	my $exec = $EXEC_Q;
	$exec =~ s/4$/5/ if $tenant eq 'globex';
	$exec =~ s/4$/6/ if $tenant eq 'initech';
	$req{$name} = p("SELECT sched.submit('$exec', '50000000-0000-4000-8000-00000000020$n', $args)");
}
submit_q('example', 1, "'render', '1.0', tenant => 'acme', preferred_labels => '{\"tier\":\"fast\"}',"
	  . " min_cpu_millis => 2000, available_at => " . at(-60));
submit_q('big', 2, "'render', '1.0', tenant => 'globex', priority => 5, min_cpu_millis => 32000,"
	  . " available_at => " . at(-480));
submit_q('stale', 3, "'render', '1.0', tenant => 'initech', min_cpu_millis => 12000,"
	  . " available_at => " . at(-1200));
submit_q('gpu', 4, "'train', '1', tenant => 'acme', reserve_gpus => 1, available_at => " . at(-120));
submit_q('claimed', 5, "'train', '1', tenant => 'initech', available_at => " . at(-15));
is(p("SELECT count(*) FROM sched.claim_requests(1, '30 s', capability => 'train', tenant => 'initech',"
	  . " at => " . at(-10) . ")"), '1', 'primary: one request claimed');
like(p("SELECT outcome || ': ' || detail FROM sched.dispatch_attempt($req{big}, at => " . at(-5) . ")"),
	qr/^UNSCHEDULABLE: 0\/5 nodes eligible: /, 'primary: the 32-CPU request is unschedulable');
like(p("SELECT outcome || ': ' || detail FROM sched.dispatch_attempt($req{gpu}, at => " . at(-3) . ")"),
	qr/^UNSCHEDULABLE: .*1 gpus_exhausted/, 'primary: the GPU request waits for the GPU');

# ---------------------------------------------------------------------------------------
# Catch-up, then the same answers on both
# ---------------------------------------------------------------------------------------
$primary->wait_for_catchup($standby, 'replay', $primary->lsn('insert'));
is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'), 't', 'the standby is in recovery');

my $at = "'$T'::timestamptz";
my @queries = (
	[ 'node_overview(at)', "SELECT * FROM sched.node_overview($at)" ],
	[ 'pending(at)', "SELECT * FROM sched.pending($at)" ],
	[ 'queue_stats(at)', "SELECT * FROM sched.queue_stats($at)" ],
	[ 'attempt_overview(at)', "SELECT * FROM sched.attempt_overview($at)" ],
	[ 'rank_candidates', "SELECT * FROM sched.rank_candidates('render', '1.0',"
		  . " preferred_labels => '{\"tier\":\"fast\"}', min_cpu_millis => 2000, at => $at)" ],
	[ 'select_candidate', "SELECT * FROM sched.select_candidate('render', '1.0',"
		  . " preferred_labels => '{\"tier\":\"fast\"}', min_cpu_millis => 2000, at => $at)" ],
	[ 'qualification_reasons(<placement>)', "SELECT * FROM sched.qualification_reasons('render', '1.0',"
		  . " min_cpu_millis => 12000, heartbeat_ttl => '120 s', at => $at) ORDER BY node_id COLLATE \"C\"" ],
);
for my $name (sort keys %req)
{
	push @queries, [ "explain($name)", "SELECT sched.explain($req{$name}, $at)" ];
	push @queries, [ "qualification_reasons($name)",
		"SELECT * FROM sched.qualification_reasons($req{$name}, $at) ORDER BY node_id COLLATE \"C\"" ];
}
for my $e ($EXEC_DONE, $EXEC_TRAIN, $EXEC_PIN, $EXEC_Q)
{
	push @queries, [ "execution_timeline($e)", "SELECT * FROM sched.execution_timeline('$e')" ];
}

my %on_primary;
for my $q (@queries)
{
	my ($name, $sql) = @$q;
	my $want = p($sql);
	$on_primary{$name} = $want;
	my $got = $standby->safe_psql('postgres', $sql);
	is($got, $want, "standby answers $name exactly like the primary");
}

# the primary's answers have the expected content (so the comparison above is not vacuous)
is(scalar(split /\n/, $on_primary{'node_overview(at)'}), 5, 'node_overview lists the 5 nodes');
is(join(',', map { (split /\|/)[0] . ':' . (split /\|/)[10] } split /\n/, $on_primary{'pending(at)'}),
	"$req{stale}:static,$req{big}:static,$req{gpu}:transient,$req{example}:none,$req{claimed}:none",
	'pending lists the 5 open requests, oldest first, with their blocked kind');
like($on_primary{'pending(at)'},
	qr/\|0\/5 nodes eligible: 4 capability_missing, 1 gpus_exhausted, 4 insufficient_gpus, 1 node_not_active\|transient\|/,
	'pending explains the GPU request in the aggregated form');
like($on_primary{'explain(example)'},
	qr/1\. node-a +1080000 = 1 x 1,000,000 \+ 100 x 1,000 - 2 x 10,000/,
	'explain ranks node-a first with 1,080,000, as in the worked example');
like($on_primary{'explain(big)'}, qr/no node has 32 CPUs; the largest has 16/,
	'explain: no node has 32 CPUs');
like($on_primary{'explain(stale)'}, qr/node-c would qualify with a heartbeat TTL of 90 s/,
	'explain: node-c would qualify with a heartbeat TTL of 90 s');
like($on_primary{'explain(gpu)'}, qr/node-g would qualify when its free GPUs reach 1 \(now 0\)/,
	'explain: node-g would qualify once its GPU is released');
is(scalar(split /\n/, $on_primary{'attempt_overview(at)'}), 4, 'attempt_overview lists the 4 attempts');
is(scalar(split /\n/, $on_primary{"execution_timeline($EXEC_DONE)"}), 5,
	'the finished execution has 5 milestones (queued, selected, started, succeeded, completed)');
like($on_primary{'queue_stats(at)'}, qr/^initech\|render\|1\|1\|00:20:00\|0\|\|\|1\|0$/m,
	'queue_stats: initech has one starving render request');

# ---------------------------------------------------------------------------------------
# The plain views (now()) and the default `at` answer on the standby
# ---------------------------------------------------------------------------------------
for my $view (qw(node_overview pending queue_stats attempt_overview))
{
	my ($rc, $out, $err) = $standby->psql('postgres', "SELECT count(*) FROM sched.$view");
	is($rc, 0, "standby: the view sched.$view answers") or diag($err);
}
is($standby->safe_psql('postgres', 'SELECT count(*) FROM sched.pending'), '5',
	'standby: sched.pending lists the 5 open requests');
like($standby->safe_psql('postgres', "SELECT sched.explain($req{big})"),
	qr/^request $req{big}: render\@1\.0 for tenant globex/, 'standby: explain(request_id) with the default at');
is($standby->safe_psql('postgres', "SELECT count(*) FROM sched.qualification_reasons($req{example})"),
	'5', 'standby: qualification_reasons(request_id) with the default at');

# ---------------------------------------------------------------------------------------
# Writes fail on the standby: read-only transaction (25006)
# ---------------------------------------------------------------------------------------
my @writes = (
	[ 'dispatch_attempt', "SELECT * FROM sched.dispatch_attempt($req{example}, at => $at)" ],
	[ 'dispatch_next', "SELECT * FROM sched.dispatch_next(at => $at)" ],
	[ 'claim_requests', "SELECT * FROM sched.claim_requests(at => $at)" ],
	[ 'submit', "SELECT sched.submit('$EXEC_Q', '50000000-0000-4000-8000-000000000299', 'render', '1.0', tenant => 'acme')" ],
	[ 'upsert_node', "SELECT sched.upsert_node('node-z')" ],
	[ 'reap_expired', "SELECT sched.reap_expired($at + interval '1 day')" ],
);
for my $w (@writes)
{
	my ($name, $sql) = @$w;
	my ($rc, $out, $err) = $standby->psql('postgres', "\\set VERBOSITY verbose\n$sql");
	isnt($rc, 0, "standby: $name fails");
	like($err, qr/25006|read-only transaction/, "standby: $name fails with a read-only error")
	  or diag($err);
	note("standby: $name: " . ((grep { /ERROR/ } split /\n/, $err)[0] // ''));
}
# nothing changed: the standby still answers like the primary
is($standby->safe_psql('postgres', "SELECT * FROM sched.pending($at)"), $on_primary{'pending(at)'},
	'standby: pending(at) unchanged after the refused writes');
is(p("SELECT * FROM sched.pending($at)"), $on_primary{'pending(at)'},
	'primary: pending(at) unchanged');

# the maintenance worker runs on the primary, not on the standby
ok( $primary->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'pg_sched maintenance'"),
	'primary: the maintenance worker runs');
is($standby->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pg_sched maintenance'"),
	'0', 'standby: no maintenance worker');
my $standby_log = slurp_file($standby->logfile);
unlike($standby_log, qr/pg_sched maintenance worker started/, 'standby log: no maintenance worker started');
unlike($standby_log, qr/PANIC|TRAP:|pg_sched: /, 'standby log: no PANIC, no assertion failure, no pg_sched internal error');

$standby->stop;
$primary->stop;
done_testing();
