/* slabinfo.c — the per-cache figures, the kernel's /proc/slabinfo: a row
 * for each malloc size class and each open object cache (struct
 * sl_cache_stats, sluice.h), for sl_cache_stats, sl_ctl's "cache.*" and
 * the statistics' table (stats.h: STAT_CACHE_SOURCE).
 *
 * Two sources, read when asked and never kept:
 *   - the counts: allocations, frees, remote and bulk frees, each thread
 *     heap's by cache id (heap.h: struct heap_counts), summed under
 *     heaps_lock;
 *   - the slabs: a walk of every pageblock's descriptors (page_walk_runs,
 *     under the page heap lock, so no block goes away meanwhile): each
 *     slab with an owner is counted, with its room and its objects used.
 * A slab's used objects include the free ones on their way back that it
 * cannot see: objects in their owner's magazine, in another thread's
 * remote batch, or with a remote-free bit not yet taken. Those are taken
 * off (the heaps' magazines and batches, the slab's remote-free bitmap),
 * so objects_active is what the program holds, found without the counts:
 * in a program whose threads are quiet it equals allocations - frees
 * (test/slabinfo.c checks it). While threads run, every figure is a racy
 * read of a moving state (owner-written fields, read relaxed); none is
 * followed as a pointer, so a reader never faults.
 *
 * A table of every id is too large for a stack of sluice's own threads
 * (the reclaimer publishes the statistics): it is mapped for the call.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "../base/fatal.h"
#include "../os/os.h"
#include "heap_lists.h"
#include "slabinfo.h"
#include "sluice.h"
#include "heap_free.h"

/* What the walk and the heaps add up for one cache id. */
struct acc {
    uint64_t slabs, slabs_active, room, used, on_way; /* on_way: free, counted as used */
    uint64_t alloc, free, remote, bulk;
};

struct walk {
    struct acc *acc;
    unsigned first, n; /* the ids [first, first + n) */
};

/* Objects of s with a remote-free bit not taken by its owner yet. */
static unsigned remote_pending(struct slab *s)
{
    if (!(ld_relaxed(slab_remote(s)) & (SLAB_REMOTE_GROUPS | SLAB_REMOTE_LOCK)))
        return 0;
    uintptr_t base = (uintptr_t)slab_base(s), end = base + ((uintptr_t)s->h.npages << SL_PAGE_SHIFT);
    unsigned n = 0;
    for (uintptr_t w = base; w < end; w += 64 * SL_GRAIN)
        n += popcount64(ld_relaxed(rbitmap_word(w)));
    return n;
}

static void visit(struct page *head, void *arg)
{
    struct walk *w = arg;
    if (head->h.kind != PG_SLAB)
        return;
    struct slab *s = slab_of_page(head);
    unsigned id = __atomic_load_n(&s->cls, __ATOMIC_RELAXED);
    if (!atomic_load_explicit(&s->owner, memory_order_acquire) || id - w->first >= w->n)
        return; /* parked in a page cache, or not asked for */
    struct acc *a = &w->acc[id - w->first];
    unsigned used = __atomic_load_n(&s->used, __ATOMIC_RELAXED), pending = remote_pending(s);
    a->slabs++;
    a->slabs_active += used > pending;
    a->room += __atomic_load_n(&s->capacity, __ATOMIC_RELAXED);
    a->used += used;
    a->on_way += pending;
}

/* The counts of h, and the objects its magazines and remote batch hold. */
static void add_heap(struct walk *w, struct heap *h)
{
    for (unsigned i = 0; i < w->n && w->first + i < heap_ids_hi; i++) {
        unsigned id = w->first + i;
        struct acc *a = &w->acc[i];
        a->alloc += heap_count_alloc(h, id);
        a->free += heap_count_free(h, id);
        a->remote += ld_relaxed(&h->counts.remote[id]);
        a->bulk += ld_relaxed(&h->counts.bulk[id]);
        if (id < SL_NCLASSES && h != &heap_empty)
            a->on_way += mag_count(h, id);
    }
    unsigned n = __atomic_load_n(&h->rbatch_n, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; i < n && i < RBATCH_CAP; i++)
        if (h->rbatch_cls[i] - w->first < w->n)
            w->acc[h->rbatch_cls[i] - w->first].on_way++;
}

/* Is id a row: a malloc class, or an open cache? (heaps_lock) */
static bool id_open(unsigned id) { return id < SL_NCLASSES || slab_geom[id].key; }

static void name_of(unsigned id, char name[48])
{
    if (id < SL_NCLASSES) {
        memcpy(name, "malloc-", 7);
        name[7 + fmt_u64(name + 7, class_size[id])] = 0;
        return;
    }
    size_t l = strnlen(slab_geom[id].name, 47);
    memcpy(name, slab_geom[id].name, l);
    name[l] = 0;
}

/* The rows of ids [first, first + n) into rows (n of them); *open[i]
 * says whether id first + i is a row. */
static void gather(struct sl_cache_stats *rows, bool *open, unsigned first, unsigned n, struct acc *acc)
{
    memset(acc, 0, n * sizeof *acc);
    struct walk w = { acc, first, n };
    page_walk_runs(visit, &w);
    heaps_lock_for_check();
    for (struct heap *h = heaps_all(); h; h = h->all_next)
        add_heap(&w, h);
    add_heap(&w, &heap_empty);
    for (unsigned i = 0; i < n; i++) {
        unsigned id = first + i;
        struct sl_cache_stats *r = &rows[i];
        struct acc *a = &acc[i];
        memset(r, 0, sizeof *r);
        if (!(open[i] = id_open(id)))
            continue;
        r->size = sizeof *r;
        name_of(id, r->name);
        r->object_size = slab_geom[id].size;
        r->pages_per_slab = slab_geom[id].pages;
        r->pageblock_type = slab_geom[id].type == PB_RECLAIM ? SL_PAGEBLOCK_RECLAIM
                            : slab_geom[id].type == PB_BUF   ? SL_PAGEBLOCK_BUF
                                                             : SL_PAGEBLOCK_SLAB;
        r->objects_active = a->used > a->on_way ? a->used - a->on_way : 0;
        r->objects_total = a->room;
        r->slabs_active = a->slabs_active;
        r->slabs_total = a->slabs;
        r->allocations = a->alloc;
        r->frees = a->free;
        r->remote_frees = a->remote;
        r->bulk_frees = a->bulk;
    }
    heaps_unlock_for_check();
}

bool slabinfo_row(unsigned id, struct sl_cache_stats *row)
{
    struct acc acc;
    bool open;
    gather(row, &open, id, 1, &acc);
    return open;
}

/* A malloc class's row is shown once it has been used. */
static bool shown(unsigned id, const struct sl_cache_stats *r)
{
    return id >= SL_NCLASSES || r->slabs_total || r->allocations;
}

int slabinfo_each(void (*emit)(const struct sl_cache_stats *row, void *arg), void *arg)
{
    if (!slab_geom[0].size)
        return 0; /* no heap yet: nothing to show */
    unsigned n = SL_NIDS; /* heap_ids_hi may grow meanwhile: room for all */
    size_t bytes = align_up(n * (sizeof(struct sl_cache_stats) + sizeof(struct acc) + sizeof(bool)), SL_PAGE);
    uint8_t *map = os_map(bytes);
    if (!map)
        return ENOMEM;
    struct sl_cache_stats *rows = (void *)map;
    struct acc *acc = (void *)(map + n * sizeof *rows);
    bool *open = (bool *)(map + n * (sizeof *rows + sizeof *acc));
    gather(rows, open, 0, n, acc);
    for (unsigned id = 0; id < n; id++)
        if (open[id] && shown(id, &rows[id]))
            emit(&rows[id], arg);
    os_unmap(map, bytes);
    return 0;
}

static void emit_stats(stat_cache_emit *emit, void *arg) { slabinfo_each(emit, arg); }
STAT_CACHE_SOURCE(slabinfo_source, emit_stats);

int slabinfo_find(const char *name, size_t len)
{
    if (len > 7 && !memcmp(name, "malloc-", 7)) {
        uint64_t size = 0;
        for (size_t i = 7; i < len; i++) {
            if (name[i] < '0' || name[i] > '9' || size > SL_SMALL_MAX)
                return -1;
            size = size * 10 + (uint64_t)(name[i] - '0');
        }
        for (unsigned c = 0; c < SL_NCLASSES; c++)
            if (class_size[c] == size)
                return (int)c;
        return -1;
    }
    int id = -1;
    heaps_lock_for_check();
    for (unsigned i = SL_NCLASSES; i < heap_ids_hi && id < 0; i++)
        if (slab_geom[i].key && strlen(slab_geom[i].name) == len && !memcmp(slab_geom[i].name, name, len))
            id = (int)i;
    heaps_unlock_for_check();
    return id;
}
