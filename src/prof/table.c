/* table.c — the profile's sites and sampled blocks (table.h), under the
 * prof lock. Memory: sites from meta_alloc, the site hash's buckets and
 * the block table from os_map, never from malloc. */
#include "table.h"

#include <string.h>

#include "../base/lock.h"
#include "../meta/meta.h"
#include "../os/os.h"

#define SITE_BUCKETS 1024 /* a power of two: 8 KiB, two pages */
#define BLOCKS_MIN   64   /* the block table's first capacity (a power of two): a page */

struct prof_block {
    uintptr_t addr; /* 0: an empty slot */
    struct prof_site *site;
    double objects, bytes;
    uint64_t size;
};

static SL_LOCK_DEFINE(prof_lock, LOCK_PROF);
static struct prof_site **buckets;   /* SITE_BUCKETS chains, mapped at the first site */
static struct prof_block *blocks;    /* cap slots */
static size_t cap, count;
static double live_bytes;

sl_lock *prof_fork_lock(void) { return &prof_lock; }
void prof_lock_take(void) { lock_acquire(&prof_lock); }
void prof_lock_drop(void) { lock_release(&prof_lock); }

static uint64_t stack_hash(const uintptr_t *frames, uint32_t n, unsigned cache_id)
{
    uint64_t h = mix64(cache_id + 0x9e3779b97f4a7c15ull * (n + 1));
    for (uint32_t i = 0; i < n; i++)
        h = mix64(h ^ frames[i]);
    return h;
}

static struct prof_site *site_get(const uintptr_t *frames, uint32_t n, unsigned cache_id, const char *cache)
{
    if (!buckets && !(buckets = os_map(SITE_BUCKETS * sizeof *buckets)))
        return NULL;
    uint64_t h = stack_hash(frames, n, cache_id);
    struct prof_site **b = &buckets[h & (SITE_BUCKETS - 1)];
    for (struct prof_site *s = *b; s; s = s->next)
        if (s->hash == h && s->nframes == n && s->cache_id == cache_id &&
            !memcmp(s->frames, frames, n * sizeof *frames) && (!cache || !strncmp(s->cache, cache, PROF_NAME)))
            return s;
    struct prof_site *s = meta_alloc(sizeof *s); /* zeroed */
    if (!s)
        return NULL;
    s->hash = h;
    s->nframes = n;
    s->cache_id = (uint16_t)cache_id;
    if (cache)
        strncpy(s->cache, cache, PROF_NAME - 1);
    memcpy(s->frames, frames, n * sizeof *frames);
    s->next = *b;
    *b = s;
    return s;
}

static size_t slot_of(uintptr_t p) { return (size_t)mix64(p) & (cap - 1); }

/* The slot holding p, or the empty slot where it would go. */
static struct prof_block *find(uintptr_t p)
{
    size_t i = slot_of(p);
    while (blocks[i].addr && blocks[i].addr != p)
        i = (i + 1) & (cap - 1);
    return &blocks[i];
}

/* Double the table (or make the first one); false if no memory. */
static bool grow(void)
{
    size_t old_cap = cap, new_cap = cap ? cap * 2 : BLOCKS_MIN;
    struct prof_block *old = blocks, *fresh = os_map(new_cap * sizeof *fresh);
    if (!fresh)
        return false;
    blocks = fresh;
    cap = new_cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].addr)
            *find(old[i].addr) = old[i];
    if (old)
        os_unmap(old, old_cap * sizeof *old);
    return true;
}

/* Empty slot i, shifting back the entries of its probe run that would no
 * longer be found past the hole (no tombstones). */
static void take_out(size_t i)
{
    size_t j = i;
    for (;;) {
        blocks[i].addr = 0;
        for (;;) {
            j = (j + 1) & (cap - 1);
            if (!blocks[j].addr)
                return;
            size_t home = slot_of(blocks[j].addr);
            /* j's entry may move to the hole at i unless its home lies in (i, j] */
            if (i <= j ? (home <= i || home > j) : (home <= i && home > j))
                break;
        }
        blocks[i] = blocks[j];
        i = j;
    }
}

static void unaccount(struct prof_block *b)
{
    struct prof_site *s = b->site;
    s->live_objects -= b->objects;
    s->live_bytes -= b->bytes;
    s->live_samples--;
    s->live_sampled_bytes -= b->size;
    live_bytes -= b->bytes;
}

bool prof_table_add(uintptr_t p, size_t size, double objects, double bytes, const uintptr_t *frames,
                    uint32_t nframes, unsigned cache_id, const char *cache)
{
    if ((count + 1) * 2 > cap && !grow())
        return false;
    struct prof_site *s = site_get(frames, nframes, cache_id, cache);
    if (!s)
        return false;
    struct prof_block *b = find(p);
    if (b->addr) /* a block freed with its sample missed (a deferred free dropped): it is gone */
        unaccount(b);
    else
        count++;
    *b = (struct prof_block){ .addr = p, .site = s, .objects = objects, .bytes = bytes, .size = size };
    s->alloc_objects += objects;
    s->alloc_bytes += bytes;
    s->live_objects += objects;
    s->live_bytes += bytes;
    s->samples++;
    s->live_samples++;
    s->live_sampled_bytes += size;
    live_bytes += bytes;
    return true;
}

bool prof_table_remove(uintptr_t p)
{
    if (!cap)
        return false;
    struct prof_block *b = find(p);
    if (!b->addr)
        return false;
    unaccount(b);
    take_out((size_t)(b - blocks));
    count--;
    return true;
}

void prof_table_move(uintptr_t from, uintptr_t to)
{
    if (!cap)
        return;
    struct prof_block *b = find(from);
    if (!b->addr)
        return;
    struct prof_block moved = *b;
    take_out((size_t)(b - blocks));
    moved.addr = to;
    struct prof_block *dst = find(to);
    if (dst->addr) { /* cannot be: to was not live */
        unaccount(dst);
        count--;
    }
    *dst = moved;
}

void prof_table_forget_cache(unsigned cache_id)
{
    for (size_t i = 0; i < cap;) {
        if (blocks[i].addr && blocks[i].site->cache_id == cache_id) {
            unaccount(&blocks[i]);
            take_out(i); /* slot i holds the next entry now: look at it again */
            count--;
        } else {
            i++;
        }
    }
}

void prof_sites_each(void (*fn)(struct prof_site *s, void *arg), void *arg)
{
    if (!buckets)
        return;
    for (size_t i = 0; i < SITE_BUCKETS; i++)
        for (struct prof_site *s = buckets[i]; s; s = s->next)
            fn(s, arg);
}

double prof_live_bytes(void) { return live_bytes; }

