/* huge.c — huge mappings and their cache. See huge.h.
 * huge_lock is a leaf lock except for meta (huge_lock -> meta lock). */
#include "huge.h"

#include <errno.h>
#include <string.h>

#include "../base/drain.h"
#include "../base/fatal.h"
#include "../base/lock.h"
#include "../meta/meta.h"
#include "../options/options.h"
#include "../os/os.h"
#include "../page/decay.h"
#include "../page/page.h"
#include "../pagemap/pagemap.h"
#include "../stats/stats.h"
#include "../teardown/teardown.h"

/* bench/sizes' 1-2 MiB band keeps ~570 mappings live and frees one at
 * random per step: the cache's fill walks at random, and each time it hits
 * full or empty a mapping is unmapped or made (16 entries: 838 made, 64:
 * 606, of which 570 are the band's first fill) */
#define HUGE_CACHE_ENTRIES 64
#define HUGE_CACHE_BYTES   ((size_t)256 << 20)

static SL_LOCK_DEFINE(huge_lock, LOCK_HUGE);
static struct huge *cache;
static size_t cache_bytes, live_bytes, live_count;
static _Atomic size_t cache_count; /* the lock's; read without it by huge_growth */

/* Advise a cached mapping; its new state. huge_lock held (huge frees are
 * rare enough that the call may run under it). Always MADV_DONTNEED, in
 * free mode too: the kernel counts MADV_FREE'd pages in the process's RSS
 * until memory runs short, and a cached mapping serves only the next huge
 * request that fits it, while the program's other memory grows elsewhere.
 * gcc -O2 on sqlite3.c frees 1-9 MiB buffers one after another: with
 * MADV_FREE its cache held 8-12 MiB of lazy pages at cc1's peak, and the
 * peak RSS was that much higher (docs/benchmarks/real-rss.md). A reuse
 * after the dirty decay faults its pages in again, as a fresh mapping
 * would, but makes no mmap; one within the dirty decay finds them
 * resident. */
static void advise_cached(struct huge *hd, uint64_t now)
{
    hd->state = page_advise(hd->base, hd->map_size, PS_CLEAN);
    hd->state_ms = now;
}

/* The cache's dirty mappings are free memory kept resident, as a
 * pageblock's dirty and lazy pages are, and they share the dirty cap with
 * them (decay.h: decay_huge_room): an eighth of the memory in use (the
 * pageblocks' active pages and the live huge mappings), less the
 * pageblocks' resident free pages, newest first, and always the newest;
 * the older ones past it are advised at once rather than after the dirty
 * decay. Held to it when the heap grows (a pageblock mapped, or a huge
 * mapping about to be: huge_growth, huge_alloc) and once per tick
 * (huge_growth), not at every free: a program that cycles through a few
 * big buffers (bench/large) keeps reusing them resident (at every free it
 * advised and faulted them 1,483 times, 5.1 s instead of 0.05 s). gcc -O2
 * on sqlite3.c frees 1-9 MiB buffers one after another while its heap
 * grows: the cache held 12 MiB of them resident at cc1's peak, and with
 * no reclaimer nothing decayed them (docs/benchmarks/gcc-rss.md).
 * huge_lock held. */
static void cap_dirty(uint64_t now)
{
    size_t cap = decay_dirty_cap(page_active_pages() + (live_bytes >> SL_PAGE_SHIFT));
    size_t room = decay_huge_room(cap, page_resident_free_pages()), kept = 0;
    for (struct huge *hd = cache; hd; hd = hd->next) {
        if (hd->state != PS_DIRTY)
            continue;
        if (hd == cache || kept + hd->map_size <= room)
            kept += hd->map_size;
        else
            advise_cached(hd, now);
    }
}

static _Atomic uint64_t blocks_seen; /* block_map when huge_growth last looked */
static _Atomic uint64_t tick_last_ms; /* when huge_growth last ran the tick */

/* The tick's part of huge_growth: at most once per decay tick, while the
 * cache holds anything, the decay (dirty mappings advised after the dirty
 * decay, advised ones unmapped after the lazy decay) and the cap. The
 * reclaimer runs the decay on its own passes too; a single-threaded
 * program has none, and its cache kept every mapping resident. */
static bool tick_due(uint64_t *now)
{
    if (!ld_relaxed(&cache_count))
        return false;
    uint64_t last = ld_relaxed(&tick_last_ms);
    *now = os_now_ms();
    return *now - last >= decay_tick_ms(sl_opt.dirty_decay_ms, sl_opt.lazy_decay_ms) &&
           atomic_compare_exchange_strong_explicit(&tick_last_ms, &last, *now, memory_order_relaxed,
                                                   memory_order_relaxed);
}

void huge_growth(void)
{
    uint64_t b = atomic_load_explicit(&stats_global[STAT_block_map], memory_order_relaxed), now = 0;
    bool grew = b != ld_relaxed(&blocks_seen);
    if (likely(!grew) && likely(!tick_due(&now)))
        return;
    st_relaxed(&blocks_seen, b);
    if (sl_opt.purge == PURGE_OFF)
        return;
    if (!grew)
        huge_purge_decay(now, false);
    lock_acquire(&huge_lock);
    if (cache_count)
        cap_dirty(now ? now : os_now_ms());
    lock_release(&huge_lock);
}

/* aligned: the program asked for 2 MiB alignment (posix_memalign,
 * aligned_alloc): it wants hugepages, and gets them at any size. */
static void hint_huge(struct huge *hd, size_t size, bool aligned)
{
    size_t whole = align_down(size, SL_BLOCK);
    if (whole && (size >= HUGE_THP_MIN || aligned))
        os_huge(hd->base, whole);
}

/* Ranges taken out of the pagemap under huge_lock, handed to the teardown
 * layer once it is dropped (teardown may start a worker, and a big range
 * is not unmapped with a lock held). At most one per cache entry, the
 * mapping being freed and a trimmed tail. */
struct releases {
    unsigned n;
    struct {
        void *base;
        size_t len;
    } r[HUGE_CACHE_ENTRIES + 2];
};

static void release_later(struct releases *rel, void *base, size_t len)
{
    rel->r[rel->n].base = base;
    rel->r[rel->n].len = len;
    rel->n++;
}

static void release_now(struct releases *rel)
{
    for (unsigned i = 0; i < rel->n; i++)
        teardown_release(rel->r[i].base, rel->r[i].len, true);
    rel->n = 0;
}

/* hd's mapping leaves the pagemap and the counts (huge_lock); it is
 * unmapped by release_now. */
static void retire_locked(struct huge *hd, struct releases *rel)
{
    pagemap_set((uintptr_t)hd->base, hd->map_size, 0);
    release_later(rel, hd->base, hd->map_size);
    stat_add(stats_global, STAT_huge_unmap, 1);
    meta_free(hd, sizeof *hd);
}

/* Best fit among cached mappings of the right alignment. One more than 4x
 * the request is trimmed to it (its tail granules unmapped); a smaller
 * excess is handed out whole, so the pages it has faulted in serve again
 * when a bigger request takes it next. Measured on mimalloc-bench's
 * malloc-large (5-25 MiB buffers, 20 live): trimming above 1.25x cost
 * 547k page faults and 1.9 s (tcmalloc: 184k, 1.07 s); above 2x, 232k and
 * 1.3 s; above 4x, 146k and 1.05 s, peak RSS 586 MB (tcmalloc 574 MB).
 * Growing a smaller cached mapping by mremap instead was worse (1.59M
 * faults: the grown part faults, and later trims throw pages away). */
static struct huge *cache_take(size_t map_size, size_t align, struct releases *rel)
{
    struct huge **best = NULL;
    for (struct huge **it = &cache; *it; it = &(*it)->next) {
        struct huge *c = *it;
        if (c->map_size < map_size || ((uintptr_t)c->base & (align - 1)))
            continue;
        if (!best || c->map_size < (*best)->map_size)
            best = it;
        if (c->map_size == map_size)
            break; /* nothing fits better */
    }
    if (!best)
        return NULL;
    struct huge *hd = *best;
    *best = hd->next;
    cache_bytes -= hd->map_size;
    cache_count--;
    if (hd->map_size > 4 * map_size) {
        pagemap_set((uintptr_t)hd->base + map_size, hd->map_size - map_size, 0);
        release_later(rel, hd->base + map_size, hd->map_size - map_size);
        hd->map_size = map_size;
    }
    return hd;
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
    struct releases rel = { .n = 0 };
    lock_acquire(&huge_lock);
    struct huge *hd = cache_take(map_size, align, &rel);
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
        release_now(&rel);
        hint_huge(hd, size, thp_aligned);
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

    hd = meta_alloc(sizeof *hd);
    if (!hd)
        return NULL;
    uint8_t *base = map_fresh(map_size, align);
    if (!base) {
        meta_free(hd, sizeof *hd);
        return NULL;
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
    hint_huge(hd, size, thp_aligned);
    return base;
}

void huge_check(struct huge *hd, const void *p, const char *op)
{
    bool is_realloc = op[0] == 'r';
    if ((const uint8_t *)p != hd->base)
        sl_fatal(is_realloc ? "realloc of an interior pointer" : "free of an interior pointer", p,
                 "huge mapping at offset", (size_t)((const uint8_t *)p - hd->base));
    if (!hd->live)
        sl_fatal(is_realloc ? "realloc of freed memory at" : "double free of", p, "huge mapping of bytes",
                 hd->map_size);
}

void huge_free(struct huge *hd, void *p)
{
    struct releases rel = { .n = 0 };
    lock_acquire(&huge_lock);
    huge_check(hd, p, "free");
    hd->live = false;
    live_bytes -= hd->map_size;
    live_count--;
    if (hd->map_size <= HUGE_CACHE_BYTES / 2 && !hd->quarantined) { /* a PROT_NONE one is not reused */
        hd->state = PS_DIRTY;
        hd->state_ms = os_now_ms();
        /* decay 0, or a drop with no reclaimer to decay the cache later
         * (the program's last free, maybe): advised at once */
        if (sl_opt.purge != PURGE_OFF &&
            (sl_opt.dirty_decay_ms == 0 || purge_drop_free())) {
            advise_cached(hd, hd->state_ms);
            purge_drop_advised(hd->map_size >> SL_PAGE_SHIFT);
        }
        hd->next = cache;
        cache = hd;
        cache_bytes += hd->map_size;
        cache_count++;
        hd = NULL;
        /* evict the oldest (the tail) while over budget */
        while (cache_count > HUGE_CACHE_ENTRIES || cache_bytes > HUGE_CACHE_BYTES) {
            struct huge **it = &cache;
            while ((*it)->next)
                it = &(*it)->next;
            struct huge *victim = *it;
            *it = NULL;
            cache_bytes -= victim->map_size;
            cache_count--;
            retire_locked(victim, &rel);
        }
    }
    if (hd)
        retire_locked(hd, &rel);
    lock_release(&huge_lock);
    release_now(&rel);
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
    hint_huge(hd, size, false);
    return hd->base;
}

void huge_trim(void)
{
    struct releases rel = { .n = 0 };
    lock_acquire(&huge_lock);
    while (cache) {
        struct huge *hd = cache;
        cache = hd->next;
        retire_locked(hd, &rel);
    }
    cache_bytes = 0;
    cache_count = 0;
    lock_release(&huge_lock);
    release_now(&rel);
}

void huge_purge_decay(uint64_t now, bool force)
{
    if (sl_opt.purge == PURGE_OFF)
        return;
    uint64_t dd = (uint64_t)sl_opt.dirty_decay_ms, ld = (uint64_t)sl_opt.lazy_decay_ms;
    struct releases rel = { .n = 0 };
    lock_acquire(&huge_lock);
    for (struct huge **it = &cache; *it;) {
        struct huge *hd = *it;
        enum decay_action due = decay_of(hd->state, hd->state_ms, now, force, dd, ld);
        if (due == DECAY_ADVISE)
            advise_cached(hd, now);
        else if (due == DECAY_EXPIRE) { /* decayed: not worth keeping */
            *it = hd->next;
            cache_bytes -= hd->map_size;
            cache_count--;
            retire_locked(hd, &rel);
            continue;
        }
        it = &hd->next;
    }
    lock_release(&huge_lock);
    release_now(&rel);
}

void huge_gauges(struct huge_gauges *g)
{
    lock_acquire(&huge_lock);
    g->live_bytes = live_bytes;
    g->cached_bytes = cache_bytes;
    g->count = live_count;
    g->dirty_bytes = g->lazy_bytes = 0;
    for (struct huge *hd = cache; hd; hd = hd->next) {
        if (hd->state == PS_DIRTY)
            g->dirty_bytes += hd->map_size;
        else if (hd->state == PS_LAZY)
            g->lazy_bytes += hd->map_size;
    }
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
    size_t bytes = 0, count = 0;
    for (struct huge *hd = cache; hd; hd = hd->next) {
        if (hd->live || !hd->map_size || (hd->map_size & (SL_BLOCK - 1)) || hd->state > PS_CLEAN ||
            ++count > cache_count)
            sl_fatal("sl_check: huge cache entry broken:", hd->base, "bytes", hd->map_size);
        for (size_t off = 0; off < hd->map_size; off += SL_BLOCK)
            if (pagemap_get((uintptr_t)hd->base + off) != ((uintptr_t)hd | PM_HUGE))
                sl_fatal("sl_check: cached huge mapping lost its pagemap entry:", hd->base + off, NULL, 0);
        bytes += hd->map_size;
    }
    if (count != cache_count || bytes != cache_bytes)
        sl_fatal("sl_check: huge cache counts wrong: counted", NULL, "bytes", bytes);
    struct huge_walk w = { 0, 0 };
    pagemap_walk(huge_visit, &w);
    if (w.live_bytes != live_bytes || w.cached_granules * SL_BLOCK != cache_bytes)
        sl_fatal("sl_check: huge live bytes wrong: the pagemap has", NULL, "bytes", w.live_bytes);
    lock_release(&huge_lock);
}

struct sl_lock *huge_fork_lock(void) { return &huge_lock; }

/* The reclaim registry's entry (base/drain.h): the cache of huge mappings
 * is emptied (sl_purge, a failed allocation). */
static void drain_huge_cache(enum drain_depth depth, size_t want)
{
    (void)depth, (void)want;
    huge_trim();
}
static size_t huge_cache_held(void)
{
    lock_acquire(&huge_lock);
    size_t n = cache_bytes;
    lock_release(&huge_lock);
    return n;
}
DRAIN_REGISTER(huge_cache_drain, .name = "huge_cache", .order = DRAIN_HUGE_CACHE,
               .depths = DRAIN_PURGE | DRAIN_ENOMEM, .run = drain_huge_cache, .held = huge_cache_held);

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
