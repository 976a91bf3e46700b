/* cache.h — the object-cache layer's entry points for the bulk and api layers. */
#ifndef SL_CACHE_H
#define SL_CACHE_H

#include "../slab/slab.h"

/* Ask every cache's shrinker (sl_cache_set_reclaim) to free objects
 * worth `bytes` (SIZE_MAX: all it can: sl_purge); returns the objects
 * they said they freed. */
size_t cache_reclaim_all(size_t bytes);
void cache_fork_child(void); /* no shrinker call is running in the child */

#endif
