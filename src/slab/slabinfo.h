/* slabinfo.h — the per-cache figures (slabinfo.c): a struct sl_cache_stats
 * row for each malloc size class and each open object cache. */
#ifndef SL_SLABINFO_H
#define SL_SLABINFO_H

#include "../base/common.h"

struct sl_cache_stats;
/* The row of cache id (a malloc class, or a user cache's id); false if
 * the id is no open cache. */
bool slabinfo_row(unsigned id, struct sl_cache_stats *row);
/* emit each row, in id order: every open object cache and every malloc
 * class that has been used. 0, or ENOMEM (no room for the table). */
int slabinfo_each(void (*emit)(const struct sl_cache_stats *row, void *arg), void *arg);
/* The id of the cache called name (len bytes; "malloc-N" for a class;
 * the first open cache of that name), or -1. */
int slabinfo_find(const char *name, size_t len);

#endif
