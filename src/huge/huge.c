/* huge.c — huge mappings: made, freed (into the cache: huge_cache.c),
 * grown and shrunk in place or moved, checked and counted. See huge.h.
 * live_bytes and live_count are the live mappings' (huge_lock); a mapping
 * is in the pagemap and counted in one step, under huge_lock, so that
 * sl_check and a fork child never see them disagree. */
#include "huge_cache.h"

#include <errno.h>
#include <string.h>

#include "../base/fatal.h"
#include "../meta/meta.h"
#include "../options/options.h"
#include "../os/os.h"
#include "../page/decay.h"
#include "../page/page.h"
#include "../pagemap/pagemap.h"
#include "../stats/stats.h"
#include "../teardown/teardown.h"







static size_t live_bytes, live_count;
static uint32_t origins; /* the last mapping made (struct huge.origin), huge_lock */
static _Atomic uint64_t blocks_seen; /* block_map when huge_growth last looked */

void huge_growth(void)
{
    uint64_t b = atomic_load_explicit(&stats_global[STAT_block_map], memory_order_relaxed), now = 0;
    bool grew = b != ld_relaxed(&blocks_seen);
    if (likely(!grew) && likely(!huge_cache_tick_due(&now)))
        return;
    st_relaxed(&blocks_seen, b);
    if (sl_opt.purge == PURGE_OFF)
        return;
    if (!grew)
        huge_purge_decay(now, false);
    lock_acquire(&huge_lock);
    huge_cache_cap_locked(now ? now : os_now_ms(), live_bytes);
    lock_release(&huge_lock);
}

/* aligned: the program asked for 2 MiB alignment (posix_memalign,
 * aligned_alloc): it wants hugepages, and gets them at any size. reused:
 * hd comes from the cache, where a hinted mapping may be split or
 * gathered for a smaller request; its hint is taken back then
 * (MADV_NOHUGEPAGE), or a few MiB touched sparsely would fault in whole
 * hugepages (where THP is "always", that part keeps small pages). */
static void hint_huge(struct huge *hd, size_t size, bool aligned, bool reused)
{
    size_t whole = align_down(size, SL_BLOCK);
    bool want = whole && (size >= HUGE_THP_MIN || aligned);
    if (want)
        os_huge(hd->base, whole);
    else if (reused && hd->thp)
        os_nohuge(hd->base, hd->map_size);
    hd->thp = want || (hd->thp && !reused);
}

/* A fresh read-write mapping. Wholly free pageblocks stay mapped while they
 * decay: those beyond the number kept go first (measured on bench/sizes,
 * whose 1-2 MiB band maps while the smaller bands' blocks are free: peak
 * RSS 249 MB without this, 178 MB when blocks were unmapped as they came
 * free). A refusal is the caller's to answer (base/drain.h: every cache
 * is drained and the allocation tried once more). */
static uint8_t *map_fresh(size_t size, size_t align)
{
    page_release_free_blocks(false);
    return os_map_aligned(size, align);
}

/* Move len bytes of mapping from src to dst (mremap: the page tables
 * move, not the bytes). A mapping gathered earlier is several of the
 * kernel's VMAs (each moved piece keeps its own), which one mremap moves
 * only from Linux 6.17 on (before, EFAULT); every VMA boundary in a huge
 * mapping lies on a granule (pieces, hints and splits are whole
 * granules), so it then moves a granule at a time. */
static size_t move_pages(uint8_t *src, size_t len, uint8_t *dst)
{
    if (os_remap(src, len, len, dst))
        return len;
    size_t off = 0;
    while (off < len && os_remap(src + off, SL_BLOCK, SL_BLOCK, dst + off))
        off += SL_BLOCK;
    return off; /* the bytes moved: [src, src + off) is no longer ours */
}

/* Move the gathered mappings side by side into a fresh mapping of
 * map_size (their pages come along: mremap moves page tables), the rest of
 * it fresh pages; its address, or NULL if a call failed: then every piece
 * is gone (unmapped) and every descriptor freed. On success g->hd[0] is
 * left for the caller, the others freed. No lock held.
 * A piece moved in part when a call failed is given back from where its
 * move stopped: the range it moved out of is free address space the
 * moment mremap returns, where another thread's mmap may already have put
 * a pageblock (fault_stress, mremap refused half the time: a segfault in
 * 1 run of 15 when the whole piece was unmapped). */
static uint8_t *gather(struct huge_gather *g, size_t map_size, size_t align, bool *thp)
{
    int saved = errno; /* a failure here is not the program's: the caller maps afresh */
    uint8_t *dst = map_fresh(map_size, align);
    size_t off = 0, part = 0; /* part: the bytes of g->hd[moved] that moved before a call failed */
    unsigned moved = 0;
    for (; dst && moved < g->n; moved++) {
        struct huge *p = g->hd[moved];
        part = move_pages(p->base, p->map_size, dst + off);
        if (part < p->map_size)
            break;
        off += p->map_size;
    }
    bool ok = dst && moved == g->n;
    if (!ok) {
        if (dst)
            os_unmap(dst, map_size); /* the pieces moved go with it */
        for (unsigned i = moved; i < g->n; i++) {
            size_t gone = i == moved ? part : 0;
            if (gone < g->hd[i]->map_size)
                teardown_release(g->hd[i]->base + gone, g->hd[i]->map_size - gone, true);
        }
        stat_add(stats_global, STAT_huge_unmap, g->n);
    }
    *thp = false;
    for (unsigned i = 0; i < g->n; i++)
        *thp |= g->hd[i]->thp;
    for (unsigned i = ok ? 1 : 0; i < g->n; i++)
        meta_free(g->hd[i], sizeof *g->hd[i]);
    errno = saved;
    return ok ? dst : NULL;
}

void *huge_alloc(size_t size, size_t align, bool zero)
{
    if (size > PTRDIFF_MAX - 2 * SL_BLOCK || align > PTRDIFF_MAX / 2) {
        errno = ENOMEM;
        return NULL;
    }
    size_t map_size = align_up(size ? size : 1, SL_BLOCK);
    bool thp_aligned = align >= SL_BLOCK;
    if (align < SL_BLOCK)
        align = SL_BLOCK;
    struct huge_gather g;
    lock_acquire(&huge_lock);
    struct huge *hd = huge_cache_take_locked(map_size, align, &g);
    if (hd) {
        hd->live = true;
        hd->req_size = size;
        live_bytes += hd->map_size;
        purge_drop_grew();
        live_count++;
        stat_add(stats_global, STAT_huge_reuse, 1);
        if (hd->state != PS_DIRTY) /* a drop's advice taken back: its regret */
            purge_taken_back(hd->map_size >> SL_PAGE_SHIFT);
        bool clean = hd->state == PS_CLEAN;
        lock_release(&huge_lock);
        hint_huge(hd, size, thp_aligned, true);
        if (zero && !clean) /* a fresh or DONTNEED'd mapping reads as zero */
            memset(hd->base, 0, size);
        return hd->base;
    }
    lock_release(&huge_lock);
    /* growth: the mapping about to be faulted in is new memory, so the
     * pageblocks' free pages kept resident are held to the dirty cap
     * first, as at a new pageblock. Not the cache's own mappings: a
     * program that cycles through buffers of a few sizes (bench/large)
     * maps when none cached fits, and advising the others then took twice
     * its page faults (4,595 -> 8,134); the tick holds them to the cap. */
    page_purge_growth();
    /* a request none of the cache's resident mappings holds, while
     * advised ones wait in it: the program wants the memory a drop gave
     * back, and reusing them would have counted it taken back (a drop's
     * regret, page.h); gathered pages count too, since a resident page
     * moved here is one the advice then cannot leave resident elsewhere.
     * Counting only the fresh pages, malloc-large regretted too seldom:
     * every huge free was advised while its backoff was off, 20 to 44
     * drop purges a run against the 23-30 of the build before the gather */
    if (g.clean_bytes)
        purge_taken_back((map_size < g.clean_bytes ? map_size : g.clean_bytes) >> SL_PAGE_SHIFT);

    uint8_t *base = NULL;
    bool thp = false;
    if (g.n && (base = gather(&g, map_size, align, &thp)) != NULL) {
        hd = g.hd[0];
        memset(hd, 0, sizeof *hd); /* as meta_alloc's */
        hd->thp = thp; /* the pieces bring their hints along */
        if (zero) /* the pieces' pages are dirty, the rest fresh */
            memset(base, 0, size < g.bytes ? size : g.bytes);
        stat_add(stats_global, STAT_huge_gather, 1);
    } else {
        hd = meta_alloc(sizeof *hd);
        if (!hd)
            return NULL;
        base = map_fresh(map_size, align);
        if (!base) {
            meta_free(hd, sizeof *hd);
            return NULL;
        }
    }
    hd->base = base;
    hd->map_size = map_size;
    hd->req_size = size;
    hd->live = true;
    /* published and counted under the lock in one step, so that a fork
     * never sees a mapping in the pagemap that is not counted */
    lock_acquire(&huge_lock);
    bool ok = pagemap_set((uintptr_t)base, map_size, (uintptr_t)hd | PM_HUGE);
    if (ok) {
        hd->origin = ++origins;
        live_bytes += map_size;
        purge_drop_grew();
        live_count++;
        stat_add(stats_global, STAT_huge_map, 1);
    } else {
        pagemap_set((uintptr_t)base, map_size, 0);
    }
    lock_release(&huge_lock);
    if (!ok) {
        os_unmap(base, map_size);
        meta_free(hd, sizeof *hd);
        errno = ENOMEM;
        return NULL;
    }
    hint_huge(hd, size, thp_aligned, g.n != 0);
    return base;
}

void huge_check(struct huge *hd, const void *p, const char *op)
{
    bool is_realloc = op[0] == 'r';
    /* not live first: a cached mapping may have been joined to its
     * neighbours (huge_cache.c: coalesce_locked), and a freed pointer
     * is then inside it, not at its base */
    if (!hd->live)
        sl_fatal(is_realloc ? "realloc of freed memory at" : "double free of", p, "huge mapping of bytes",
                 hd->map_size);
    if ((const uint8_t *)p != hd->base)
        sl_fatal(is_realloc ? "realloc of an interior pointer" : "free of an interior pointer", p,
                 "huge mapping at offset", (size_t)((const uint8_t *)p - hd->base));
}

void huge_free(struct huge *hd, void *p)
{
    struct huge_releases rel = { .n = 0 };
    lock_acquire(&huge_lock);
    huge_check(hd, p, "free");
    hd->live = false;
    live_bytes -= hd->map_size;
    live_count--;
    huge_cache_put_locked(hd, &rel);
    lock_release(&huge_lock);
    huge_release_now(&rel);
}

/* Under huge_lock throughout: the mapping, its pagemap entries and the
 * counts change together (mremap moves page tables, not bytes: short), so
 * sl_check and a fork child never see them disagree. On failure p is as
 * it was. */
void *huge_realloc(struct huge *hd, void *p, size_t size)
{
    if (size > PTRDIFF_MAX - 2 * SL_BLOCK)
        return NULL;
    size_t new_map = align_up(size, SL_BLOCK);
    lock_acquire(&huge_lock);
    huge_check(hd, p, "realloc");
    size_t old_map = hd->map_size;
    uint8_t *unmap = NULL;
    if (new_map < old_map) { /* shrink: give back whole granules */
        pagemap_set((uintptr_t)hd->base + new_map, old_map - new_map, 0);
        unmap = hd->base + new_map;
    } else if (new_map > old_map && os_remap(hd->base, old_map, new_map, NULL)) {
        if (!pagemap_set((uintptr_t)hd->base + old_map, new_map - old_map, (uintptr_t)hd | PM_HUGE)) {
            pagemap_set((uintptr_t)hd->base + old_map, new_map - old_map, 0);
            os_unmap(hd->base + old_map, new_map - old_map); /* back to the old length */
            lock_release(&huge_lock);
            return NULL;
        }
    } else if (new_map > old_map) { /* move the pages, not the bytes: mremap onto a fresh aligned range */
        uint8_t *dst = map_fresh(new_map, SL_BLOCK);
        bool ok = dst && pagemap_set((uintptr_t)dst, new_map, (uintptr_t)hd | PM_HUGE);
        /* The old range's entries go before the kernel unmaps it: the
         * moment mremap returns, another thread may map a pageblock there
         * (under the page heap lock, not ours) and publish its entries,
         * which a clear after the move would wipe out. */
        if (ok)
            pagemap_set((uintptr_t)hd->base, old_map, 0);
        if (ok && !os_remap(hd->base, old_map, new_map, dst)) {
            pagemap_set((uintptr_t)hd->base, old_map, (uintptr_t)hd | PM_HUGE); /* leaves exist: cannot fail */
            ok = false;
        }
        if (!ok) {
            if (dst) {
                pagemap_set((uintptr_t)dst, new_map, 0);
                os_unmap(dst, new_map);
            }
            lock_release(&huge_lock);
            return NULL;
        }
        hd->base = dst;
    }
    live_bytes = live_bytes - old_map + new_map;
    hd->map_size = new_map;
    hd->req_size = size;
    lock_release(&huge_lock);
    if (unmap)
        teardown_release(unmap, old_map - new_map, true);
    hint_huge(hd, size, false, false);
    return hd->base;
}



void huge_gauges(struct huge_gauges *g)
{
    lock_acquire(&huge_lock);
    g->live_bytes = live_bytes;
    g->count = live_count;
    huge_cache_gauges_locked(g);
    lock_release(&huge_lock);
}

/* sl_check's part: every cached mapping is not live, whole granules, and
 * owns its pagemap entries; every huge pagemap entry lies inside its
 * descriptor's mapping; the live and cached byte counts add up. */
struct huge_walk {
    size_t live_bytes, cached_granules;
};

static void huge_visit(uintptr_t granule, uintptr_t e, void *arg)
{
    struct huge_walk *w = arg;
    if (!(e & PM_HUGE))
        return;
    struct huge *hd = pagemap_region(e);
    if (granule < (uintptr_t)hd->base || granule >= (uintptr_t)hd->base + hd->map_size)
        sl_fatal("sl_check: huge pagemap entry outside its mapping: granule", (void *)granule, NULL, 0);
    if (hd->live)
        w->live_bytes += SL_BLOCK;
    else
        w->cached_granules++;
}

void huge_check_all(void)
{
    lock_acquire(&huge_lock);
    size_t cached = huge_cache_check_locked();
    struct huge_walk w = { 0, 0 };
    pagemap_walk(huge_visit, &w);
    if (w.live_bytes != live_bytes || w.cached_granules * SL_BLOCK != cached)
        sl_fatal("sl_check: huge live bytes wrong: the pagemap has", NULL, "bytes", w.live_bytes);
    lock_release(&huge_lock);
}

struct sl_lock *huge_fork_lock(void) { return &huge_lock; }


/* The huge layer's report to the statistics (stats.h). */
static void huge_report(uint64_t c[STAT_COUNT], uint64_t g[GAUGE_COUNT])
{
    (void)c;
    struct huge_gauges hg;
    huge_gauges(&hg);
    g[GAUGE_dirty_bytes] += hg.dirty_bytes;
    g[GAUGE_lazy_bytes] += hg.lazy_bytes;
    g[GAUGE_clean_bytes] += hg.cached_bytes - hg.dirty_bytes - hg.lazy_bytes;
    g[GAUGE_huge_live_bytes] = hg.live_bytes;
    g[GAUGE_huge_cached_bytes] = hg.cached_bytes;
    g[GAUGE_huge_count] = hg.count;
    g[GAUGE_mapped_bytes] += hg.live_bytes + hg.cached_bytes;
}
STAT_SOURCE(huge_source, huge_report);
