#!/usr/bin/perl
#
# 001_restart.pl — reservations survive a crash (issue 2; SPEC.md sections 2 and 6).
#
# A node with shared_preload_libraries = 'pg_sched' gets a small fleet and a few
# dispatched, started and finished attempts, one unschedulable request, and one dispatch
# still uncommitted in another session when the server is crashed (pg_ctl stop -m
# immediate: no shutdown checkpoint, WAL replay at the next start).  After the restart:
#   * every row of every sched table is exactly what was committed before the crash
#     (the uncommitted dispatch left nothing: no attempt, no reservation);
#   * node and worker counters equal the sums over live attempts;
#   * a repeated dispatch_attempt of a dispatched request answers EXISTING with the same
#     attempt, node, worker and lease;
#   * START commands that were not yet delivered are delivered after the restart, and
#     those delivered before it are not delivered again;
#   * new dispatches, finishes and submits work, and the counters follow.
# All times are fixed, in the future (2030), so no lease expires during the test even if
# a maintenance worker reaps expired leases with now().
#
# Run as `make test` does (suite_tap of test/harness.sh): as an unprivileged OS user, with
#   PATH=/usr/lib/postgresql/15/bin:$PATH
#   PERL5LIB=/usr/lib/postgresql/15/lib/pgxs/src/test/perl
#   TESTDIR=<a directory that user can write>  prove test/t/001_restart.pl
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('restart');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'pg_sched'\n");
$node->start;

sub sql { return $node->safe_psql('postgres', shift); }

sql('CREATE EXTENSION pg_sched');

# ---------------------------------------------------------------------------------------
# Fleet: n1 (4000 mcpu, 8192 MB, 1 GPU, 2 slots), n2 (2000, 4096, 0 GPU, 1 slot),
#        n3 (1000, 1024, 0 GPU, 1 slot).  Workers registered at T0 = 2030-01-01 00:00.
# ---------------------------------------------------------------------------------------
my $T0 = '2030-01-01 00:00:00+00';
sub at { my $s = shift; return "'$T0'::timestamptz + interval '$s seconds'"; }

sql(<<"EOSQL");
SELECT sched.upsert_node('n1', '{"zone":"a"}', 4000, 8192, 1);
SELECT sched.upsert_node('n2', '{"zone":"b"}', 2000, 4096, 0);
SELECT sched.upsert_node('n3', '{"zone":"c"}', 1000, 1024, 0);
SELECT sched.register_worker('n1', 'build', '{1.0}', 2, '00000000-0000-4000-8000-0000000000a1', '$T0');
SELECT sched.register_worker('n2', 'build', '{1.0}', 1, '00000000-0000-4000-8000-0000000000a2', '$T0');
SELECT sched.register_worker('n3', 'build', '{1.0}', 1, '00000000-0000-4000-8000-0000000000a3', '$T0');
EOSQL

# Requests s1..s6 of one execution; step ids ...c001 .. ...c006.
my $EXEC = '00000000-0000-4000-8000-00000000e001';
sub step { return sprintf('00000000-0000-4000-8000-00000000c%03d', shift); }
sub submit
{
	my ($n, $args) = @_;
	return sql("SELECT sched.submit('$EXEC', '" . step($n)
		  . "', 'build', '1.0', $args, available_at => '$T0')");
}
my %rid;
$rid{1} = submit(1, 'reserve_cpu_millis => 1000, reserve_memory_mb => 1024, reserve_gpus => 1');
$rid{2} = submit(2, 'reserve_cpu_millis => 1500, reserve_memory_mb => 2048');
$rid{3} = submit(3, 'reserve_cpu_millis => 500, reserve_memory_mb => 512');
$rid{4} = submit(4, 'reserve_cpu_millis => 2000, reserve_memory_mb => 2048');
$rid{5} = submit(5, 'reserve_cpu_millis => 8000');
$rid{6} = submit(6, 'reserve_cpu_millis => 100, reserve_memory_mb => 100');

# dispatch_attempt → "outcome|node_id|attempt_id|worker_id|lease_version|score"
sub dispatch
{
	my ($n, $secs) = @_;
	return sql("SELECT outcome, node_id, attempt_id, worker_id, lease_version, score"
		  . " FROM sched.dispatch_attempt($rid{$n}, NULL, " . at($secs) . ")");
}
sub outcome_node { my @f = split /\|/, shift; return "$f[0] $f[1]"; }

# s1 needs the GPU: n1.  s2 fits n2 and n1; n2 scores higher (n1 has a running attempt).
# s3 fits all but n2 (no free slot); n3 scores higher.  s4 (2000 mcpu) fits only n1.
my %d;
$d{1} = dispatch(1, 1);
$d{2} = dispatch(2, 2);
$d{3} = dispatch(3, 3);
$d{4} = dispatch(4, 4);
is(outcome_node($d{1}), 'DISPATCHED n1', 's1 (1 GPU) dispatched to n1');
is(outcome_node($d{2}), 'DISPATCHED n2', 's2 dispatched to n2');
is(outcome_node($d{3}), 'DISPATCHED n3', 's3 dispatched to n3');
is(outcome_node($d{4}), 'DISPATCHED n1', 's4 (2000 mcpu) dispatched to n1');
# s5 (8000 mcpu) fits nowhere; s6 finds every slot taken
like(dispatch(5, 5), qr/^UNSCHEDULABLE\|\|/, 's5 (8000 mcpu) is UNSCHEDULABLE');
like(dispatch(6, 6), qr/^UNSCHEDULABLE\|\|/, 's6 is UNSCHEDULABLE while every slot is taken');

my ($a2, $a3) = ((split /\|/, $d{2})[2], (split /\|/, $d{3})[2]);
# s2 starts (RUNNING); s3 succeeds, freeing n3
is(sql("SELECT sched.start_attempt('$a2', 1, " . at(10) . ") = " . at(10) . " + interval '5 min'"),
	't', 's2 started: lease until start + 5 min');
is(sql("SELECT sched.finish_attempt('$a3', 1, 'SUCCEEDED', NULL, " . at(11) . ")"),
	'SUCCEEDED', 's3 finished SUCCEEDED');
# n2's worker takes its START command before the crash; n1's leaves its two undelivered
is(sql("SELECT string_agg(kind || ' ' || attempt_id, ',') FROM sched.poll_commands("
	  . "'00000000-0000-4000-8000-0000000000a2', 1, 10, " . at(12) . ")"),
	"START $a2", "n2's worker polled its START command before the crash");

# ---------------------------------------------------------------------------------------
# The committed state: every row of every table, as text, in a fixed order
# ---------------------------------------------------------------------------------------
my $state_sql = <<'EOSQL';
SELECT string_agg(line, E'\n' ORDER BY line) FROM (
    SELECT 'node '      || n::text FROM sched.node n
    UNION ALL SELECT 'worker '    || w::text FROM sched.worker w
    UNION ALL SELECT 'tenant '    || t::text FROM sched.tenant t
    UNION ALL SELECT 'execution ' || e::text FROM sched.execution e
    UNION ALL SELECT 'request '   || r::text FROM sched.request r
    UNION ALL SELECT 'attempt '   || a::text FROM sched.attempt a
    UNION ALL SELECT 'command '   || c::text FROM sched.command c
    UNION ALL SELECT 'timeline '  || l::text FROM sched.timeline l
) AS rows(line)
EOSQL
my $counters_sql = <<'EOSQL';
SELECT (SELECT count(*) FROM sched.node n
          CROSS JOIN LATERAL (
              SELECT coalesce(sum(a.reserve_cpu_millis), 0)::int AS cpu,
                     coalesce(sum(a.reserve_memory_mb), 0)::bigint AS mem,
                     coalesce(sum(a.reserve_gpus), 0)::int AS gpus, count(*)::int AS live
                FROM sched.attempt a
               WHERE a.node_id = n.node_id AND a.status IN ('DISPATCHED', 'RUNNING')) s
         WHERE (n.reserved_cpu_millis, n.reserved_memory_mb, n.reserved_gpus, n.live_attempts)
               IS DISTINCT FROM (s.cpu, s.mem, s.gpus, s.live))
     + (SELECT count(*) FROM sched.worker w
         WHERE w.live_attempts <> (SELECT count(*) FROM sched.attempt a
                                    WHERE a.worker_id = w.worker_id AND a.status IN ('DISPATCHED', 'RUNNING')))
EOSQL
my $reservations_sql =
  "SELECT string_agg(format('%s %s/%s/%s/%s', node_id, reserved_cpu_millis, reserved_memory_mb, "
  . "reserved_gpus, live_attempts), ', ' ORDER BY node_id) FROM sched.node";

is(sql($counters_sql), '0', 'before the crash: counters equal the sums over live attempts');
is(sql($reservations_sql), 'n1 3000/3072/1/2, n2 1500/2048/0/1, n3 0/0/0/0',
	'before the crash: n1 holds s1+s4, n2 holds s2, n3 is free');
my $committed = sql($state_sql);
my %rows;
$rows{$_} = sql("SELECT count(*) FROM sched.$_") for qw(attempt command timeline request);
is("$rows{attempt} $rows{command} $rows{request}", '4 4 6', '4 attempts, 4 START commands, 6 requests');

# ---------------------------------------------------------------------------------------
# A dispatch in flight: s6 reserved n3 in an open transaction when the server crashes
# ---------------------------------------------------------------------------------------
my $inflight = $node->background_psql('postgres');
$inflight->query_safe('BEGIN');
is($inflight->query_safe(
		"SELECT outcome || ' ' || node_id FROM sched.dispatch_attempt($rid{6}, NULL, " . at(20) . ")"),
	'DISPATCHED n3', 'in flight: s6 reserved n3 in a transaction that will never commit');

$node->stop('immediate');
eval { $inflight->quit; };    # its server is gone
$node->start;
ok($node->log_contains('database system was not properly shut down; automatic recovery in progress'),
	'the restart went through crash recovery');

# ---------------------------------------------------------------------------------------
# After the crash: exactly the committed state
# ---------------------------------------------------------------------------------------
is(sql($state_sql), $committed,
	'every node, worker, execution, request, attempt, command and timeline row is as committed');
is(sql($counters_sql), '0', 'after the crash: counters equal the sums over live attempts');
is(sql($reservations_sql), 'n1 3000/3072/1/2, n2 1500/2048/0/1, n3 0/0/0/0',
	'after the crash: the same reservations; the uncommitted one on n3 is gone');
is(sql("SELECT count(*) FROM sched.$_"), $rows{$_}, "after the crash: $rows{$_} $_ rows")
  for qw(attempt command timeline request);
is(sql("SELECT state || ' ' || (attempt_id IS NULL) FROM sched.request WHERE request_id = $rid{6}"),
	'PENDING true', 'the request of the uncommitted dispatch is PENDING, without attempt');
is(sql("SELECT string_agg(status, ',' ORDER BY step_id) FROM sched.attempt"),
	'DISPATCHED,RUNNING,SUCCEEDED,DISPATCHED', 'attempt states s1..s4 survived');

# a repeated dispatch of a dispatched request answers EXISTING: the same attempt
for my $n (1, 2, 4)
{
	my @before = split /\|/, $d{$n};
	my @again = split /\|/, dispatch($n, 30);
	is(join('|', @again[0 .. 5]), join('|', 'EXISTING', @before[1 .. 5]),
		"s$n dispatched again after the crash: EXISTING, same attempt, node, worker, lease, score");
}
is(sql("SELECT count(*) FROM sched.attempt"), $rows{attempt}, 'EXISTING created no attempt');
is(sql($counters_sql), '0', 'EXISTING reserved nothing');

# commands: delivered once, across the crash
my $a1 = (split /\|/, $d{1})[2];
my $a4 = (split /\|/, $d{4})[2];
is(sql("SELECT string_agg(kind || ' ' || attempt_id, ',' ORDER BY command_id) FROM sched.poll_commands("
	  . "'00000000-0000-4000-8000-0000000000a1', 1, 10, " . at(31) . ")"),
	"START $a1,START $a4", "n1's worker receives its two START commands after the crash");
is(sql("SELECT count(*) FROM sched.poll_commands('00000000-0000-4000-8000-0000000000a2', 1, 10, "
	  . at(31) . ")"),
	'0', "n2's START command, delivered before the crash, is not delivered again");

# ---------------------------------------------------------------------------------------
# New work after the crash
# ---------------------------------------------------------------------------------------
my $d6 = dispatch(6, 32);
is(outcome_node($d6), 'DISPATCHED n3', 's6 dispatched after the crash, on the free n3');
is(sql("SELECT sched.finish_attempt('$a1', 1, 'SUCCEEDED', NULL, " . at(33) . ")"),
	'SUCCEEDED', 's1 finished after the crash');
$rid{7} = submit(7, 'reserve_cpu_millis => 500, reserve_gpus => 1');
ok($rid{7} > $rid{6}, 'a new submit after the crash gets a new request id');
is(outcome_node(dispatch(7, 34)), 'DISPATCHED n1', 's7 takes the GPU and the slot s1 released');
is(sql($reservations_sql), 'n1 2500/2048/1/2, n2 1500/2048/0/1, n3 100/100/0/1',
	'reservations follow: n1 s4+s7, n2 s2, n3 s6');
is(sql($counters_sql), '0', 'after new work: counters equal the sums over live attempts');
is(sql("SELECT count(*) FROM (SELECT step_id, attempt_number FROM sched.attempt"
	  . " GROUP BY 1, 2 HAVING count(*) > 1) d"),
	'0', 'still one attempt per (step, attempt number)');

$node->stop;
done_testing();
