/*
 * grow_array.h — the one way the modules that keep arrays across calls grow them
 * (fleet_mirror.c, inflight.c, batch.c).
 */
#ifndef PG_SCHED_GROW_ARRAY_H
#define PG_SCHED_GROW_ARRAY_H

#include "utils/memutils.h"

/* (*array), of *allocated elements of `elem` bytes in cxt (NULL while none is), with
 * room for at least `need`: grown by doubling (to `least` at first), its contents kept. */
static inline void
sched_grow_array(MemoryContext cxt, void **array, int *allocated, int need, Size elem,
				 int least)
{
	int			n;

	if (need <= *allocated)
		return;
	n = Max(least, *allocated);
	while (n < need)
		n *= 2;
	*array = *array == NULL ? MemoryContextAlloc(cxt, elem * n)
		: repalloc(*array, elem * n);
	*allocated = n;
}

#endif							/* PG_SCHED_GROW_ARRAY_H */
