# 004_fleet_mirror_log.pl — the fleet mirror when its shared change log wraps.
#
# The change log holds sched.fleet_change_log_size entries (here the minimum, 16).  A
# reader that falls more than that behind has lost entries, among them possibly those of
# transactions still in progress: it must start over, and keep reloading until every
# transaction older than the loss has ended, so that a change committed after the loss
# is not missed.  Sessions:
#   reader  loads its mirror (capability 'cap', 6 nodes);
#   writer  changes node n1 in an open transaction (its log entry will be lost);
#   other   commits 40 changes to other nodes (the log wraps);
# then the reader reads (loss detected, writer still running: reload mode), the writer
# commits, and the reader must see n1's new weight.  Each read is checked against the
# tables with the same snapshot (sched._fleet_mirror_check = 0), and the counters show
# the loss and the reloads.  Then a rolled back change after a loss, an update of
# counters alone whose updated version VACUUM removed before the reader came back, and a
# loss while the only transaction in progress began after the lost entries (read back
# from the log: no reloads).
#
# Run as an unprivileged OS user (test/harness.sh suite_tap does this).

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('sched_mirror_log');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'pg_sched'
sched.fleet_change_log_size = 16
});
$node->start;

is($node->safe_psql('postgres', 'SHOW sched.fleet_change_log_size'), '16', 'log of 16 entries');

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION pg_sched;
SELECT count(sched.upsert_node('n' || i, cpu_millis => 4000, memory_mb => 4096, weight => 10 * i))
  FROM generate_series(1, 6) i;
SELECT count(sched.register_worker('n' || i, 'cap', ARRAY['1'], 2, at => '2024-01-01 00:00:00+00'))
  FROM generate_series(1, 6) i;
});

my $best = q{SELECT node_id || ' ' || score || ' differ=' || sched._fleet_mirror_check('cap')
  FROM sched.select_candidate('cap', '1', heartbeat_ttl => '1 hour', at => '2024-01-01 00:00:30+00')};
my $stats = q{SELECT losses || ' ' || full_loads FROM sched._fleet_mirror_stats()};

my $reader = $node->background_psql('postgres');
my $writer = $node->background_psql('postgres');

is($reader->query_safe($best), 'n6 60000 differ=0', 'reader: n6 is best (weight 60)');
is($reader->query_safe($best), 'n6 60000 differ=0', 'reader: mirror current');
my ($losses0, $loads0) = split / /, $reader->query_safe($stats);

$writer->query_safe("BEGIN; UPDATE sched.node SET weight = 900 WHERE node_id = 'n1'");
is($reader->query_safe($best), 'n6 60000 differ=0', 'reader: the uncommitted change is not seen');

# 40 committed changes to other nodes: more than the log holds
$node->safe_psql('postgres',
	"UPDATE sched.node SET weight = weight + 1 WHERE node_id = 'n' || (2 + $_ % 5)") for 1 .. 40;

is($reader->query_safe($best), 'n6 68000 differ=0',
	'reader after the log wrapped: the committed changes are seen');
my ($losses1, $loads1) = split / /, $reader->query_safe($stats);
cmp_ok($losses1, '>', $losses0, 'the reader noticed lost entries');

is($reader->query_safe($best), 'n6 68000 differ=0', 'reader: still right while the writer runs');
my ($losses2, $loads2) = split / /, $reader->query_safe($stats);
cmp_ok($loads2, '>', $loads1,
	'while a transaction older than the loss runs, every read reloads the capability');

$writer->query_safe('COMMIT');
is($reader->query_safe($best), 'n1 900000 differ=0',
	'reader: the change whose log entry was lost is seen once committed');
is($reader->query_safe($best), 'n1 900000 differ=0', 'reader: and kept');
my ($losses3, $loads3) = split / /, $reader->query_safe($stats);
is($reader->query_safe($best), 'n1 900000 differ=0', 'reader: steady');
my ($losses4, $loads4) = split / /, $reader->query_safe($stats);
is($loads4, $loads3, 'with no older transaction left, reads are incremental again');

# a rolled back change whose entry is lost
$writer->query_safe("BEGIN; UPDATE sched.node SET weight = 5000 WHERE node_id = 'n2'");
$node->safe_psql('postgres',
	"UPDATE sched.node SET weight = weight + 1 WHERE node_id = 'n' || (3 + $_ % 3)") for 1 .. 40;
is($reader->query_safe($best), 'n1 900000 differ=0', 'reader: uncommitted change not seen after a loss');
$writer->query_safe('ROLLBACK');
is($reader->query_safe($best), 'n1 900000 differ=0', 'reader: rolled back change never seen');
is( $reader->query_safe(q{SELECT weight FROM sched.node WHERE node_id = 'n2'}),
	$reader->query_safe(
		q{SELECT weight FROM sched.rank_candidates('cap', '1', heartbeat_ttl => '1 hour', at => '2024-01-01 00:00:30+00') WHERE node_id = 'n2'}),
	'reader: n2 has its committed weight');

# An update of counters alone is taken from the row version it wrote.  When the version
# it updated is gone (VACUUM pruned it before the reader came back), the reader cannot
# show which version that change wrote, and re-reads the node instead.  The pruning
# needs no snapshot older than the update (the maintenance worker may hold one): tried
# until it happens.
my $patch = q{SELECT rows_patched || ' ' || rows_reread FROM sched._fleet_mirror_stats()};
is($reader->query_safe($best), 'n1 900000 differ=0', 'reader: before a counters update');
my ($p0, $r0) = split / /, $reader->query_safe($patch);
$node->safe_psql('postgres', "UPDATE sched.node SET live_attempts = 1 WHERE node_id = 'n3'");
is($reader->query_safe($best), 'n1 900000 differ=0', 'reader: after a counters update');
my ($p1, $r1) = split / /, $reader->query_safe($patch);
is(($p1 - $p0) . ' ' . ($r1 - $r0), '1 0', 'the update is patched in, nothing re-read');
my ($fell_back, $right) = (0, 1);
for my $try (1 .. 20)
{
	$node->safe_psql('postgres',
		"UPDATE sched.node SET live_attempts = live_attempts + 1 WHERE node_id = 'n3'");
	$node->safe_psql('postgres', 'VACUUM sched.node');
	my ($pa, $ra) = split / /, $reader->query_safe($patch);
	$right &&= $reader->query_safe($best) eq 'n1 900000 differ=0';
	my ($pb, $rb) = split / /, $reader->query_safe($patch);
	if ($rb > $ra)
	{
		$fell_back = $try;
		last;
	}
}
ok($fell_back, "the version updated was vacuumed away: the node re-read (try $fell_back)");
ok($right, 'reader: every read after a vacuum equals the tables');

# A loss while the only transaction in progress began after the lost entries: the reader
# reads the log back to that transaction's first entry (src/fleet_mirror.c, window_start)
# and keeps its change pending, so it loads the capability once, not at every read until
# that transaction ends.
$node->safe_psql('postgres',
	"UPDATE sched.node SET weight = weight + 1 WHERE node_id = 'n' || (3 + $_ % 3)") for 1 .. 40;
$writer->query_safe("BEGIN; UPDATE sched.node SET weight = 2000 WHERE node_id = 'n2'");
my ($losses5, $loads5) = split / /, $reader->query_safe($stats);
is($reader->query_safe($best), 'n1 900000 differ=0',
	'reader after a loss: a change begun after the lost entries is not seen while in progress');
is($reader->query_safe($best), 'n1 900000 differ=0', 'reader: nor at the next read');
my ($losses6, $loads6) = split / /, $reader->query_safe($stats);
cmp_ok($losses6, '>', $losses5, 'the reader noticed lost entries');
is($loads6 - $loads5, 1, 'the capability loaded once after the loss, not at every read');
$writer->query_safe('COMMIT');
is($reader->query_safe($best), 'n2 2000000 differ=0', 'reader: the change is seen once committed');
my ($losses7, $loads7) = split / /, $reader->query_safe($stats);
is($loads7, $loads6, 'the committed change re-read from the pending entry, not reloaded');

$reader->quit;
$writer->quit;
$node->stop;
done_testing();
