/* table.h — the profile's records (table.c): sites and sampled blocks.
 *
 * A site is a stack (and, for an object cache's samples, the cache): what
 * its samples stand for in total, since the start (alloc_*) and still
 * live (live_*), estimated (sample.h). Sites are never freed; records
 * from sluice's metadata allocator (meta/), found by a hash of the stack.
 * A block is one live sample: its address, its site and its weight, in an
 * open-addressed table (linear probing, deletion by backward shift) in
 * memory of its own from the os layer, doubled when half full.
 * Everything here is under the prof lock (prof_lock_take/_drop).
 */
#ifndef SL_PROF_TABLE_H
#define SL_PROF_TABLE_H

#include "../base/common.h"

#define PROF_DEPTH     64 /* frames kept per stack */
#define PROF_NAME      48 /* an object cache's name, as sl_cache_create keeps it */

struct prof_site {
    struct prof_site *next;            /* the hash chain */
    uint64_t hash;
    double alloc_objects, alloc_bytes; /* every sample taken here, estimated */
    double live_objects, live_bytes;   /* those not freed yet, estimated */
    uint64_t samples, live_samples;    /* sampled blocks, and those live */
    uint64_t live_sampled_bytes;       /* the live sampled blocks' own sizes */
    uint32_t nframes;
    uint16_t cache_id;                 /* 0: the malloc family */
    char cache[PROF_NAME];             /* the object cache's name, or "" */
    uintptr_t frames[PROF_DEPTH];      /* return addresses, innermost first */
};

void prof_lock_take(void);
void prof_lock_drop(void);

/* Record block p (size bytes, weighing objects and bytes) at the site of
 * the stack and cache; false if no memory was to be had for it (then it
 * is not sampled). */
bool prof_table_add(uintptr_t p, size_t size, double objects, double bytes, const uintptr_t *frames,
                    uint32_t nframes, unsigned cache_id, const char *cache);
bool prof_table_remove(uintptr_t p); /* false: p was not sampled */
void prof_table_move(uintptr_t from, uintptr_t to);
void prof_table_forget_cache(unsigned cache_id);
/* Every site, for the writers; the estimated live bytes of all of them. */
void prof_sites_each(void (*fn)(struct prof_site *s, void *arg), void *arg);
double prof_live_bytes(void);
double prof_mean(void); /* prof.c: the mean interval, SLUICE_PROF_SAMPLE */

#endif
