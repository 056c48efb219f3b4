/*
 * spread.c — the spread term (README, "Spread"): a node already running live attempts
 * of a request's spread_key scores 100,000 lower per attempt (placement.h,
 * SCHED_SCORE_PER_SPREAD_MATCH), so that the steps of one execution or service spread
 * over the nodes.  A preference, not a rule: concurrent dispatchers of one key may still
 * meet on a node (a gang's distinct_nodes is the rule).  Fleet rows do not know keys, so
 * the counts are read per request that has a key (attempt_live_spread_idx) and kept
 * beside the fleet, which stays untouched; a request without a key costs nothing.
 */
#include "postgres.h"

#include "spread.h"
#include "spi_util.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"

static SchedStatement live_per_node = {
	"SELECT a.node_id, pg_catalog.count(*)::pg_catalog.int4 FROM sched.attempt a "
	" WHERE a.spread_key OPERATOR(pg_catalog.=) $1 AND a.spread_key IS NOT NULL "
	"   AND a.finished_at IS NULL "
	"   AND a.status OPERATOR(pg_catalog.=) ANY ('{DISPATCHED,RUNNING}'::pg_catalog.text[]) "
	" GROUP BY a.node_id",
	1, {TEXTOID},
	.keyed = true
};

void
sched_spread_count(const char *spread_key, bool latest, const SchedFleet *fleet,
				   SchedSpread *out)
{
	Datum		arg = CStringGetTextDatum(spread_key);
	uint64		found;
	uint64		k;
	int			i;

	out->nrows = fleet->count;
	out->per_row = NULL;
	if (latest)
		sched_spi_exec_latest(&live_per_node, &arg, NULL, SPI_OK_SELECT);
	else
		sched_spi_exec(&live_per_node, &arg, NULL, true, 0, SPI_OK_SELECT);
	found = SPI_processed;
	if (found == 0)
		return;
	out->per_row = palloc0(sizeof(int32) * Max(fleet->count, 1));
	/* the nodes with attempts of one key are few: a scan of the fleet per node */
	for (k = 0; k < found; k++)
	{
		char	   *node_id = sched_spi_text((int) k, 1);
		uint32		hash = sched_node_hash(node_id);
		int32		n = (int32) sched_spi_int64((int) k, 2);

		for (i = 0; i < fleet->count; i++)
			if (fleet->rows[i].node_hash == hash && strcmp(fleet->rows[i].c.node_id, node_id) == 0)
				out->per_row[i] = n;
	}
}

int32
sched_spread_of(const SchedSpread *s, int row)
{
	if (s == NULL || s->per_row == NULL || row < 0 || row >= s->nrows)
		return 0;
	return s->per_row[row];
}

void
sched_spread_score(const SchedSpread *s, SchedRanked *ranked, int n)
{
	int			i;

	if (s == NULL || s->per_row == NULL)
		return;
	for (i = 0; i < n; i++)
		sched_score_add_spread(&ranked[i], sched_spread_of(s, ranked[i].index));
}
