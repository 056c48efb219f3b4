# 008_maintenance_reload.pl — the maintenance workers follow sched.databases at a reload,
# tick at their interval only, and survive errors (issue 12, defects found by probes).
#
#   - sched.databases is empty at the start: no worker.  A database created and listed
#     later gets its worker at the reload (pg_reload_conf), and it reaps there; a
#     database taken off the list loses its worker at the next reload.
#   - wake-ups are not ticks: with sched.maintenance_interval = 1h, reloads (each sets the
#     worker's latch) reap nothing; a reload that shortens the interval to 1 s takes
#     effect at once.
#   - a broken counter (a direct write made worker_live_attempts 0 under a live attempt,
#     so releasing it would break a CHECK constraint) makes the end of that one attempt
#     fail: the worker logs a WARNING naming it, reaps the other expired attempt, and
#     keeps its PID (0.1.0 rolled the whole tick back, exited and was restarted 10 s
#     later, reaping nothing meanwhile).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $node = PostgreSQL::Test::Cluster->new('sched_reload');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'pg_sched'
sched.maintenance_interval = '1s'
log_min_messages = warning
});
$node->start;

my $workers = q{SELECT coalesce(string_agg(datname, ',' ORDER BY datname), '')
                  FROM pg_stat_activity WHERE backend_type = 'pg_sched maintenance'};
is($node->safe_psql('postgres', $workers), '', 'sched.databases is empty: no worker');

# ---------------------------------------------------------------------------------------
# A database created and listed after the start gets its worker at the reload.
# ---------------------------------------------------------------------------------------
$node->safe_psql('postgres', 'CREATE DATABASE later');
$node->safe_psql(
	'later', q{
CREATE EXTENSION pg_sched;
ALTER DATABASE later SET sched.lease_ttl = '2s';
SELECT sched.upsert_node('node-a', cpu_millis => 4000, memory_mb => 8192);
SELECT sched.register_worker('node-a', 'cap', ARRAY['v1'], 4,
    worker_id => 'aaaaaaaa-0000-4000-8000-00000000000a');
});
# $step dispatched now with a 2 s lease, never renewed
sub dispatch_step
{
	my ($step) = @_;
	return $node->safe_psql(
		'later', qq{
WITH s AS (SELECT sched.submit(gen_random_uuid(), '$step', 'cap', 'v1', max_attempts => 1) AS id)
SELECT d.outcome FROM s, sched.dispatch_attempt(s.id) d;
});
}
is(dispatch_step('50000000-0000-4000-8000-000000000001'), 'DISPATCHED', 'step 1 dispatched');

$node->safe_psql('postgres', q{ALTER SYSTEM SET sched.databases = 'later'});
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
ok($node->poll_query_until('postgres', $workers, 'later'),
	'listed at a reload: the database gets its worker');
ok( $node->poll_query_until(
		'later', q{
SELECT status = 'LOST' FROM sched.attempt WHERE step_id = '50000000-0000-4000-8000-000000000001'}),
	'and it reaps there');

# ---------------------------------------------------------------------------------------
# Wake-ups are not ticks.
# ---------------------------------------------------------------------------------------
$node->safe_psql('postgres', q{ALTER SYSTEM SET sched.maintenance_interval = '1h'});
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
ok( $node->poll_query_until(
		'postgres', q{SELECT setting = '3600' FROM pg_settings WHERE name = 'sched.maintenance_interval'}),
	'the interval is 1 h');
usleep(1_500_000);    # the worker has reloaded too (its latch was set by the SIGHUP)
is(dispatch_step('50000000-0000-4000-8000-000000000002'), 'DISPATCHED', 'step 2 dispatched');
usleep(2_500_000);    # step 2's lease expires
for (1 .. 5)
{
	$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
	usleep(200_000);
}
is( $node->safe_psql(
		'later', q{
SELECT status FROM sched.attempt WHERE step_id = '50000000-0000-4000-8000-000000000002'}),
	'DISPATCHED',
	'five reloads (five wake-ups) inside the 1 h interval reaped nothing');
$node->safe_psql('postgres', q{ALTER SYSTEM SET sched.maintenance_interval = '1s'});
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
ok( $node->poll_query_until(
		'later', q{
SELECT status = 'LOST' FROM sched.attempt WHERE step_id = '50000000-0000-4000-8000-000000000002'}),
	'a reload that shortens the interval takes effect at once');

# ---------------------------------------------------------------------------------------
# One attempt whose end fails does not stop the reaping of the others, nor the worker.
# ---------------------------------------------------------------------------------------
$node->safe_psql(
	'later', q{
SELECT sched.upsert_node('node-b', cpu_millis => 4000, memory_mb => 8192);
SELECT sched.register_worker('node-b', 'cap', ARRAY['v1'], 4,
    worker_id => 'bbbbbbbb-0000-4000-8000-00000000000b');
});
my $pid = $node->safe_psql('postgres',
	q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'pg_sched maintenance'});
my $log_offset = -s $node->logfile;
# both dispatched and broken in one transaction, so no tick sees one without the other
$node->safe_psql(
	'later', q{
BEGIN;
SELECT sched.submit(gen_random_uuid(), '50000000-0000-4000-8000-000000000003', 'cap', 'v1',
    node_id => 'node-a', max_attempts => 1);
SELECT sched.submit(gen_random_uuid(), '50000000-0000-4000-8000-000000000004', 'cap', 'v1',
    node_id => 'node-b', max_attempts => 1);
SELECT d.outcome FROM sched.request r, sched.dispatch_attempt(r.request_id) d
 WHERE r.step_id IN ('50000000-0000-4000-8000-000000000003', '50000000-0000-4000-8000-000000000004');
-- the counter of node-a's worker, broken by a direct write (as the owner can)
UPDATE sched.worker SET live_attempts = 0 WHERE worker_id = 'aaaaaaaa-0000-4000-8000-00000000000a';
COMMIT;
});
ok( $node->poll_query_until(
		'later', q{
SELECT status = 'LOST' FROM sched.attempt WHERE step_id = '50000000-0000-4000-8000-000000000004'}),
	'the healthy expired attempt (node-b) is reaped');
my $log = '';
for (my $i = 0; $i < 300; $i++)
{
	$log = slurp_file($node->logfile, $log_offset);
	last if $log =~ /WARNING:  pg_sched: could not reap attempt/;
	usleep(100_000);
}
like($log, qr/WARNING:  pg_sched: could not reap attempt [0-9a-f-]+: .*worker_live_attempts_within_slots/,
	'the broken one is named in a WARNING, with the constraint it would break');
is( $node->safe_psql(
		'later', q{
SELECT status FROM sched.attempt WHERE step_id = '50000000-0000-4000-8000-000000000003'}),
	'DISPATCHED', 'and left live');
is($node->safe_psql('postgres',
		q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'pg_sched maintenance'}),
	$pid, 'the worker did not exit');
unlike($log, qr/background worker "pg_sched maintenance" \(PID \d+\) exited/,
	'no worker exit in the log');
# repaired, it is reaped at a later tick
$node->safe_psql('later',
	q{UPDATE sched.worker SET live_attempts = 1 WHERE worker_id = 'aaaaaaaa-0000-4000-8000-00000000000a'});
ok( $node->poll_query_until(
		'later', q{
SELECT status = 'LOST' FROM sched.attempt WHERE step_id = '50000000-0000-4000-8000-000000000003'}),
	'once the counter is repaired, a later tick reaps it');

# ---------------------------------------------------------------------------------------
# Taken off the list: the worker stops at the reload.
# ---------------------------------------------------------------------------------------
$node->safe_psql('postgres', q{ALTER SYSTEM SET sched.databases = ''});
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
ok($node->poll_query_until('postgres', $workers, ''),
	'taken off sched.databases: the worker stops at the reload');

$node->stop;
done_testing();
