# 002_maintenance_worker.pl — the pg_sched maintenance background worker.
#
# Issue 3 item 7: with pg_sched in shared_preload_libraries, one background worker per
# database of sched.databases runs reap_expired (and claim expiry) every
# sched.maintenance_interval, so an expired lease is reaped without any client calling
# reap_expired.  This test runs a node with a 1 s interval and a 2 s lease TTL and checks:
#
#   - one worker per listed database shows in pg_stat_activity with backend_type
#     'pg_sched maintenance', also for a database without the extension ("noext");
#   - an attempt dispatched with real now() times, never renewed, becomes LOST on its own
#     after its lease expired (not before), by the Reaper, and the step is requeued as
#     attempt 2 avoiding the node; the worker slot and node reservations are released;
#   - a lease that has not expired is left alone across several ticks;
#   - an expired claim returns its request to the queue on its own;
#   - the database without the extension is skipped quietly: the workers keep running
#     (same pids, started once) and the server log shows no ERROR/FATAL;
#   - a listed database that does not exist ("nosuchdb") gets one WARNING from the
#     launcher, and no worker (one would fail with FATAL and restart every 10 s).
#
# Run as an unprivileged OS user (test/harness.sh suite_tap does this):
#   PERL5LIB=/usr/lib/postgresql/15/lib/pgxs/src/test/perl PATH=/usr/lib/postgresql/15/bin:$PATH \
#   TESTDIR=<scratch dir> prove -v test/t/002_maintenance_worker.pl

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('sched_maint');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'pg_sched'
sched.databases = 'postgres'
sched.maintenance_interval = '1s'
sched.lease_ttl = '2s'
log_min_messages = warning
});
$node->start;

# A second database, without the extension, listed in sched.databases from the restart on.
$node->safe_psql('postgres', 'CREATE DATABASE noext');
$node->append_conf('postgresql.conf', "sched.databases = 'postgres,noext,nosuchdb'\n");
my $log_offset = -s $node->logfile;
$node->restart;

is($node->safe_psql('postgres', 'SHOW sched.lease_ttl'), '2s', 'sched.lease_ttl is 2s');
is($node->safe_psql('postgres', 'SHOW sched.maintenance_interval'), '1s',
	'sched.maintenance_interval is 1s');

# ---------------------------------------------------------------------------------------
# The workers: one per listed database, visible in pg_stat_activity.
# ---------------------------------------------------------------------------------------
ok( $node->poll_query_until(
		'postgres', q{
SELECT string_agg(datname, ',' ORDER BY datname) FROM pg_stat_activity
 WHERE backend_type = 'pg_sched maintenance'},
		'noext,postgres'),
	'one pg_sched maintenance worker per database of sched.databases');
my $pids_before = $node->safe_psql(
	'postgres', q{
SELECT string_agg(pid::text, ',' ORDER BY datname) FROM pg_stat_activity
 WHERE backend_type = 'pg_sched maintenance'});

# ---------------------------------------------------------------------------------------
# The extension, a fleet and one dispatched attempt, with real times.
# ---------------------------------------------------------------------------------------
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION pg_sched;
SELECT sched.upsert_node('node-a', cpu_millis => 4000, memory_mb => 8192, gpus => 1);
SELECT sched.upsert_node('node-b', cpu_millis => 4000, memory_mb => 8192, gpus => 1);
SELECT sched.register_worker('node-a', 'cap', ARRAY['v1'], 1,
    worker_id => 'aaaaaaaa-0000-0000-0000-00000000000a');
SELECT sched.register_worker('node-b', 'cap', ARRAY['v1'], 1,
    worker_id => 'bbbbbbbb-0000-0000-0000-00000000000b');
SELECT sched.submit('e0000000-0000-0000-0000-000000000001', '50000000-0000-0000-0000-000000000001',
    'cap', 'v1', reserve_cpu_millis => 1000, reserve_memory_mb => 512, reserve_gpus => 1,
    max_attempts => 3);
});

# The dispatch and its checks in one transaction: the 2 s lease cannot be reaped before
# they have looked at it (the worker does not see the attempt until the commit).
my @dispatch = split /\n/, $node->safe_psql(
	'postgres', q{
BEGIN;
SELECT outcome || ' ' || node_id FROM sched.dispatch_attempt(
    (SELECT request_id FROM sched.request
      WHERE step_id = '50000000-0000-0000-0000-000000000001' AND attempt_number = 1));
SELECT status, lease_expires_at - dispatched_at FROM sched.attempt
 WHERE step_id = '50000000-0000-0000-0000-000000000001' AND attempt_number = 1;
SELECT w.live_attempts, n.live_attempts, n.reserved_cpu_millis, n.reserved_memory_mb, n.reserved_gpus
  FROM sched.worker w JOIN sched.node n USING (node_id) WHERE node_id = 'node-a';
COMMIT;
});
is($dispatch[0], 'DISPATCHED node-a', 'attempt 1 dispatched on node-a');
is($dispatch[1], 'DISPATCHED|00:00:02', 'attempt 1 is live with a 2 s lease');
is($dispatch[2], '1|1|1000|512|1',
	'attempt 1 holds the slot and the reservations of node-a');

# ---------------------------------------------------------------------------------------
# Nobody calls reap_expired: the background worker marks the attempt LOST and requeues.
# ---------------------------------------------------------------------------------------
ok( $node->poll_query_until(
		'postgres', q{
SELECT a.status = 'LOST'
       AND EXISTS (SELECT 1 FROM sched.request r
                    WHERE r.step_id = a.step_id AND r.attempt_number = 2)
  FROM sched.attempt a
 WHERE a.step_id = '50000000-0000-0000-0000-000000000001' AND a.attempt_number = 1}),
	'the background worker reaped the expired lease: attempt 1 LOST, attempt 2 queued');

is( $node->safe_psql(
		'postgres', q{
SELECT finished_at >= lease_expires_at FROM sched.attempt
 WHERE step_id = '50000000-0000-0000-0000-000000000001' AND attempt_number = 1}),
	't',
	'attempt 1 was reaped only after its lease expired');
is( $node->safe_psql(
		'postgres', q{
SELECT component, state FROM sched.timeline
 WHERE milestone_key LIKE 'step.attempt.lost:50000000-0000-0000-0000-000000000001:1'}),
	'Reaper|LOST',
	'one LOST milestone by the Reaper');
is( $node->safe_psql(
		'postgres', q{
SELECT string_agg(format('%s %s %s', attempt_number, state, coalesce(avoid_node_id, '-')),
                  ', ' ORDER BY attempt_number)
  FROM sched.request WHERE step_id = '50000000-0000-0000-0000-000000000001'}),
	'1 DISPATCHED -, 2 PENDING node-a',
	'the step is requeued once, as attempt 2, avoiding node-a');
is( $node->safe_psql(
		'postgres', q{
SELECT string_agg(format('%s %s %s %s %s %s', n.node_id, w.live_attempts, n.live_attempts,
                         n.reserved_cpu_millis, n.reserved_memory_mb, n.reserved_gpus),
                  ', ' ORDER BY n.node_id)
  FROM sched.worker w JOIN sched.node n USING (node_id)}),
	'node-a 0 0 0 0 0, node-b 0 0 0 0 0',
	'the slot and the reservations are released, once');
is( $node->safe_psql(
		'postgres', q{
SELECT status FROM sched.execution WHERE execution_id = 'e0000000-0000-0000-0000-000000000001'}),
	'QUEUED',
	'the execution is still open (attempts remain)');

# ---------------------------------------------------------------------------------------
# A lease that has not expired survives several ticks.
# ---------------------------------------------------------------------------------------
# Attempt 2 becomes ready 1 s after the reaping (retry backoff); dispatch it with a 1 h lease.
ok( $node->poll_query_until(
		'postgres', q{
SELECT available_at <= now() FROM sched.request
 WHERE step_id = '50000000-0000-0000-0000-000000000001' AND attempt_number = 2}),
	'attempt 2 becomes ready after the retry backoff');
is( $node->safe_psql(
		'postgres', q{
SET sched.lease_ttl = '1h';
SELECT outcome || ' ' || node_id FROM sched.dispatch_attempt(
    (SELECT request_id FROM sched.request
      WHERE step_id = '50000000-0000-0000-0000-000000000001' AND attempt_number = 2))}),
	'DISPATCHED node-b',
	'attempt 2 dispatched on node-b (the retry avoids node-a)');
my $t0 = $node->safe_psql('postgres', 'SELECT now()');
ok( $node->poll_query_until(
		'postgres', qq{
SELECT count(*) > 0 FROM pg_stat_activity
 WHERE backend_type = 'pg_sched maintenance' AND datname = 'postgres'
   AND state = 'idle' AND state_change > '$t0'::timestamptz + interval '3 s'}),
	'the worker ticked more than 3 s after attempt 2 was dispatched');
is( $node->safe_psql(
		'postgres', q{
SELECT status FROM sched.attempt
 WHERE step_id = '50000000-0000-0000-0000-000000000001' AND attempt_number = 2}),
	'DISPATCHED',
	'attempt 2 (lease not expired) is left alone');

# ---------------------------------------------------------------------------------------
# Claim expiry: a claim of 1 s returns its request to the queue without any client.
# ---------------------------------------------------------------------------------------
$node->safe_psql(
	'postgres', q{
SELECT sched.submit('e0000000-0000-0000-0000-000000000002', '50000000-0000-0000-0000-000000000002',
    'claimonly', 'v1');
});
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM sched.claim_requests(1, '1 s', capability => 'claimonly')}),
	'1',
	'the claimonly request is claimed for 1 s');
is( $node->safe_psql(
		'postgres', q{
SELECT state FROM sched.request WHERE step_id = '50000000-0000-0000-0000-000000000002'}),
	'CLAIMED',
	'it is CLAIMED');
ok( $node->poll_query_until(
		'postgres', q{
SELECT state = 'PENDING' AND claim_id IS NULL AND claimed_until IS NULL FROM sched.request
 WHERE step_id = '50000000-0000-0000-0000-000000000002'}),
	'the background worker returned the expired claim to the queue');

# ---------------------------------------------------------------------------------------
# The database without the extension: skipped quietly, nothing crashed or restarted.
# ---------------------------------------------------------------------------------------
is( $node->safe_psql(
		'postgres', q{
SELECT string_agg(pid::text, ',' ORDER BY datname) FROM pg_stat_activity
 WHERE backend_type = 'pg_sched maintenance'}),
	$pids_before,
	'the same two workers are still running (no restart)');
is($node->safe_psql('noext', q{SELECT count(*) FROM pg_extension WHERE extname = 'pg_sched'}),
	'0', 'noext has no pg_sched extension');

# the log of the restarted server only (the shutdown before it stops the first worker)
my $log = slurp_file($node->logfile, $log_offset);
ok($log =~ s/\A.*database system is shut down\n//s, 'the log shows the restart');
my @started_noext = ($log =~ /pg_sched maintenance worker started for database "noext"/g);
my @started_postgres = ($log =~ /pg_sched maintenance worker started for database "postgres"/g);
is(scalar @started_noext, 1, 'the noext worker started once');
is(scalar @started_postgres, 1, 'the postgres worker started once');
unlike($log, qr/\b(ERROR|FATAL|PANIC):/, 'no ERROR, FATAL or PANIC in the server log');
unlike($log, qr/background worker "pg_sched maintenance [^"]*" \(PID \d+\) exited/,
	'no maintenance worker exited');
my @missing = ($log =~ /WARNING:  database "nosuchdb" named in "sched.databases" does not exist/g);
is(scalar @missing, 1, 'one WARNING for the database that does not exist');
unlike($log, qr/maintenance worker started for database "nosuchdb"/, 'no worker for it');

$node->stop;
done_testing();
