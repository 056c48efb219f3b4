# 011_fleet_mirror_cancel.pl — a fleet mirror load cut short by an error leaves nothing.
#
# The mirror loads a capability whole the first time a session places on it, into the
# mirror's long-lived memory context (src/fleet_mirror.c, load_cap): the load's rows
# array is allocated there from the start, so that the capability takes it without a
# copy.  A cancel during the load (statement_timeout here) must leave nothing behind:
# not the array (megabytes for a large fleet, for as long as the session lives), and not
# the few bytes of the capability's own (its name).  One session calls select_candidate
# on a capability of 30,000 nodes under ever longer statement timeouts until a call gets
# through.  A call counts as cancelled in the load when the mirror's refresh before it
# completed (refreshes grew) and the load did not (full_loads did not).  After every such
# cancel the memory in use in the mirror's context must be the same as after the one
# before: each cancel drops what the mirror held, so from the second on there is nothing
# else to free.  Then the mirror, once loaded, answers as the tables do.
#
# Run as an unprivileged OS user (test/harness.sh suite_tap does this).

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $nodes = 30000;

my $node = PostgreSQL::Test::Cluster->new('sched_mirror_cancel');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'pg_sched'\n");
$node->start;

$node->safe_psql(
	'postgres', qq{
CREATE EXTENSION pg_sched;
SELECT count(sched.upsert_node('n' || i, labels => jsonb_build_object('zone', 'z' || (i % 7)),
                                cpu_millis => 4000, memory_mb => 4096, weight => i % 100))
  FROM generate_series(1, $nodes) i;
SELECT count(sched.register_worker('n' || i, 'cap', ARRAY['1'], 2, at => '2024-01-01 00:00:00+00'))
  FROM generate_series(1, $nodes) i;
});

my $call = q{SELECT node_id FROM sched.select_candidate('cap', '1', heartbeat_ttl => '1 hour',
  at => '2024-01-01 00:00:30+00')};
# memory in use (not only held) in the mirror's contexts (its own, and each loaded
# capability's rows): a leaked name shows
my $mirror_used = q{SELECT coalesce(sum(total_bytes - free_bytes), 0) FROM pg_backend_memory_contexts
  WHERE name IN ('pg_sched fleet mirror', 'pg_sched mirror rows')};
my $stats = q{SELECT refreshes || ' ' || full_loads FROM sched._fleet_mirror_stats()};

my $s = $node->background_psql('postgres', on_error_stop => 0);
# the mirror's context made, by a capability no worker offers (loaded: no rows)
$s->query_safe(q{SELECT node_id FROM sched.select_candidate('none', '1')});
my ($refreshes, $loads) = split / /, $s->query_safe($stats);
cmp_ok($loads, '>=', 1, "the mirror is in use ($loads loads)");

my ($in_load, $other, $done) = (0, 0, 0);
my @used;
my $ms = 5;
while ($ms < 60000)
{
	$s->query("SET statement_timeout = $ms; $call");
	my $err = $s->{stderr};
	$s->{stderr} = '';
	$s->query_safe('SET statement_timeout = 0');
	my ($r, $l) = split / /, $s->query_safe($stats);
	die "unexpected error: $err"
	  unless $err eq '' || $err =~ /canceling statement due to statement timeout/;
	# through the load (a cancel after it, while scoring, ends the ladder too)
	if ($l != $loads)
	{
		$done = 1;
		last;
	}
	die "a call completed without loading the capability" if $err eq '';
	if ($r > $refreshes)
	{
		$in_load++;
		push @used, $s->query_safe($mirror_used);
	}
	else
	{
		$other++;				# before the mirror's refresh had completed
	}
	$refreshes = $r;
	$ms = int($ms * 1.4) + 1;
}
note("cancelled in the load $in_load times, before it $other times; "
	  . "in use in the mirror after each: @used");

ok($done, "a call with a long enough timeout ($ms ms) got through the load");
cmp_ok($in_load, '>=', 3, 'calls cancelled during the load, after the refresh');
my $grew = 0;
for my $i (2 .. $#used)
{
	$grew++ if $used[$i] != $used[ $i - 1 ];
}
is($grew, 0, 'each cancelled load left the mirror holding what it held before (from the second on)');

my ($r1, $l1) = split / /, $s->query_safe($stats);
is($l1, $loads + 1, 'the capability was loaded once, by the call that got through');
cmp_ok($s->query_safe($mirror_used), '>', $used[-1] + 1000000, 'the loaded mirror holds the fleet');
is($s->query_safe("SELECT sched._fleet_mirror_check('cap')"), '0', 'the mirror answers as the tables');

$s->quit;
$node->stop;
done_testing();
