/* huge_cache.c — the cache of freed huge mappings (huge_cache.h, the
 * policy in huge.h): best-fit reuse, the decay of cached mappings, their
 * share of the dirty cap, the drain; and huge_lock, which the cache and
 * huge.c share.
 *
 * Invariants (huge_lock): every cached mapping is not live, a whole number
 * of granules, and keeps its pagemap entries (so a double free of it is
 * named as one); cache_count and cache_bytes are the list's length and
 * bytes, at most HUGE_CACHE_ENTRIES and HUGE_CACHE_BYTES.
 */
#include "huge_cache.h"

#include "../base/drain.h"
#include "../base/fatal.h"
#include "../meta/meta.h"
#include "../options/options.h"
#include "../os/os.h"
#include "../page/decay.h"
#include "../page/page.h"
#include "../pagemap/pagemap.h"
#include "../stats/stats.h"
#include "../teardown/teardown.h"
#include "huge_fit.h"

SL_LOCK_DEFINE(huge_lock, LOCK_HUGE);
static struct huge *cache;
static size_t cache_bytes;
static _Atomic size_t cache_count; /* the lock's; read without it by huge_cache_tick_due */

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
void huge_cache_cap_locked(uint64_t now, size_t live_bytes)
{
    if (!cache)
        return;
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

static _Atomic uint64_t tick_last_ms; /* when the cache's tick last ran */

/* The tick's part of huge_growth: at most once per decay tick, while the
 * cache holds anything, the decay (dirty mappings advised after the dirty
 * decay, advised ones unmapped after the lazy decay) and the cap. The
 * reclaimer runs the decay on its own passes too; a single-threaded
 * program has none, and its cache kept every mapping resident. */
bool huge_cache_tick_due(uint64_t *now)
{
    if (!ld_relaxed(&cache_count))
        return false;
    uint64_t last = ld_relaxed(&tick_last_ms);
    *now = os_now_ms();
    return *now - last >= decay_tick_ms(sl_opt.dirty_decay_ms, sl_opt.lazy_decay_ms) &&
           atomic_compare_exchange_strong_explicit(&tick_last_ms, &last, *now, memory_order_relaxed,
                                                   memory_order_relaxed);
}

static void release_later(struct huge_releases *rel, void *base, size_t len)
{
    rel->r[rel->n].base = base;
    rel->r[rel->n].len = len;
    rel->n++;
}

void huge_release_now(struct huge_releases *rel)
{
    for (unsigned i = 0; i < rel->n; i++)
        teardown_release(rel->r[i].base, rel->r[i].len, true);
    rel->n = 0;
}

void huge_retire_locked(struct huge *hd, struct huge_releases *rel)
{
    pagemap_set((uintptr_t)hd->base, hd->map_size, 0);
    release_later(rel, hd->base, hd->map_size);
    stat_add(stats_global, STAT_huge_unmap, 1);
    meta_free(hd, sizeof *hd);
}

/* Take *at out of the cache; if it is longer than keep, split it: the
 * tail stays cached in its place (its state and age) under a new
 * descriptor, and the head goes. With no descriptor to be had the whole
 * mapping goes, unless must_fit (then NULL, and the cache is as it was). */
static struct huge *take_at_locked(struct huge **at, size_t keep, bool must_fit)
{
    struct huge *hd = *at, *tail = hd->map_size > keep ? meta_alloc(sizeof *tail) : NULL;
    if (hd->map_size > keep && !tail && must_fit)
        return NULL;
    if (tail) {
        *tail = *hd;
        tail->base = hd->base + keep;
        tail->map_size = hd->map_size - keep;
        tail->req_size = 0;
        pagemap_set((uintptr_t)tail->base, tail->map_size, (uintptr_t)tail | PM_HUGE); /* leaves exist: cannot fail */
        hd->map_size = keep;
        *at = tail;
        stat_add(stats_global, STAT_huge_split, 1);
    } else {
        *at = hd->next;
        cache_count--;
    }
    cache_bytes -= hd->map_size;
    hd->next = NULL;
    return hd;
}

/* huge_fit.h's choice, carried out. Pieces are taken last first: taking
 * one out of the list changes the link of the one after it only. */
struct huge *huge_cache_take_locked(size_t map_size, size_t align, struct huge_gather *g)
{
    _Static_assert(HUGE_CACHE_ENTRIES <= 255, "huge_fit.piece holds an index below 256");
    struct huge **at[HUGE_CACHE_ENTRIES];
    struct huge_fit_in in[HUGE_CACHE_ENTRIES];
    unsigned n = 0;
    g->n = 0;
    g->bytes = 0;
    /* up to the first resident aligned mapping of the request's length:
     * the choice is that one whatever follows (bench/sizes' 1-2 MiB band
     * finds it first; a walk of the whole cache cost 216 instructions a
     * replacement, callgrind) */
    for (struct huge **it = &cache; *it && n < HUGE_CACHE_ENTRIES; it = &(*it)->next) {
        at[n] = it;
        in[n] = (struct huge_fit_in){ .bytes = (*it)->map_size,
                                      .resident = (*it)->state == PS_DIRTY,
                                      .aligned = !((uintptr_t)(*it)->base & (align - 1)) };
        if (in[n++].bytes == map_size && in[n - 1].resident && in[n - 1].aligned)
            break;
    }
    struct huge_fit f = huge_fit_choose(in, n, map_size);
    if (f.single >= 0)
        return take_at_locked(at[f.single], map_size, false);
    g->clean_bytes = 0; /* no early stop above: in[] holds the whole cache */
    for (unsigned i = 0; i < n; i++)
        g->clean_bytes += in[i].resident ? 0 : in[i].bytes;
    /* piece k starts where the pieces before it end; only the last may
     * bring less than its length (it is split) */
    size_t off[HUGE_GATHER_MAX], sum = 0;
    for (unsigned k = 0; k < f.npieces; k++) {
        off[k] = sum;
        size_t b = in[f.piece[k]].bytes;
        sum += b < map_size - sum ? b : map_size - sum;
    }
    struct huge *taken[HUGE_GATHER_MAX];
    for (unsigned k = f.npieces; k-- > 0;)
        taken[k] = take_at_locked(at[f.piece[k]], k + 1 < f.npieces ? in[f.piece[k]].bytes : map_size - off[k], true);
    /* in order; a last piece that could not be split stays cached */
    for (unsigned k = 0; k < f.npieces; k++) {
        struct huge *hd = taken[k];
        if (!hd)
            continue;
        pagemap_set((uintptr_t)hd->base, hd->map_size, 0);
        g->hd[g->n++] = hd;
        g->bytes += hd->map_size;
    }
    return NULL;
}

/* The cached mapping whose granule holds addr, or NULL. A descriptor in
 * the pagemap that is not live is cached: a retired or gathered mapping
 * leaves the pagemap first, and a quarantined one is not cached. */
static struct huge *cached_at(uintptr_t addr)
{
    uintptr_t e = pagemap_get(addr);
    struct huge *c = (e & PM_HUGE) ? pagemap_region(e) : NULL;
    return c && !c->live && !c->quarantined ? c : NULL;
}

/* Take c out of the cache list (locked). */
static void unlink_locked(struct huge *c)
{
    struct huge **it = &cache;
    while (*it != c)
        it = &(*it)->next;
    *it = c->next;
    cache_bytes -= c->map_size;
    cache_count--;
}

/* hd, just freed and not yet in the list, takes back the cached parts of
 * the mapping it was split from (the same origin), right before and after
 * it, if they are in its state (dirty with dirty, advised with advised):
 * a split's head and tail freed again are one mapping again, and a later
 * request that fits the whole needs no gather. bench/large (4 live
 * buffers of 2-32 MiB, each freed before the next is allocated) gathered
 * at most requests without this (0.056 s against 0.016 before the split;
 * 0.024 with it): splits cut its few mappings into tails that no request
 * fitted. Not mappings of other origins: the cap keeps the newest cached
 * mapping resident whatever its length (huge_cache_cap_locked), and
 * joined with its neighbours the newest would carry them along. A part's
 * own descriptor is freed; its granules point at hd. */
static void coalesce_locked(struct huge *hd)
{
    for (int side = 0; side < 2; side++) {
        struct huge *c = cached_at(side ? (uintptr_t)hd->base - SL_BLOCK : (uintptr_t)hd->base + hd->map_size);
        if (!c || c->origin != hd->origin || c->state != hd->state ||
            c->map_size + hd->map_size > HUGE_CACHE_BYTES / 2 ||
            (side ? c->base + c->map_size != hd->base : c->base != hd->base + hd->map_size))
            continue;
        unlink_locked(c);
        pagemap_set((uintptr_t)c->base, c->map_size, (uintptr_t)hd | PM_HUGE); /* leaves exist: cannot fail */
        if (side)
            hd->base = c->base;
        hd->map_size += c->map_size;
        hd->thp |= c->thp;
        if (c->state_ms > hd->state_ms)
            hd->state_ms = c->state_ms;
        stat_add(stats_global, STAT_huge_coalesce, 1);
        meta_free(c, sizeof *c);
    }
}

void huge_cache_put_locked(struct huge *hd, struct huge_releases *rel)
{
    if (hd->map_size > HUGE_CACHE_BYTES / 2 || hd->quarantined) { /* a PROT_NONE one is not reused */
        huge_retire_locked(hd, rel);
        return;
    }
    hd->state = PS_DIRTY;
    hd->state_ms = os_now_ms();
    /* decay 0, or a drop with no reclaimer to decay the cache later
     * (the program's last free, maybe): advised at once */
    if (sl_opt.purge != PURGE_OFF && (sl_opt.dirty_decay_ms == 0 || purge_drop_free())) {
        advise_cached(hd, hd->state_ms);
        purge_drop_advised(hd->map_size >> SL_PAGE_SHIFT);
    }
    coalesce_locked(hd);
    hd->next = cache;
    cache = hd;
    cache_bytes += hd->map_size;
    cache_count++;
    /* evict the oldest (the tail) while over budget */
    while (cache_count > HUGE_CACHE_ENTRIES || cache_bytes > HUGE_CACHE_BYTES) {
        struct huge **it = &cache;
        while ((*it)->next)
            it = &(*it)->next;
        struct huge *victim = *it;
        *it = NULL;
        cache_bytes -= victim->map_size;
        cache_count--;
        huge_retire_locked(victim, rel);
    }
}

void huge_trim(void)
{
    struct huge_releases rel = { .n = 0 };
    lock_acquire(&huge_lock);
    while (cache) {
        struct huge *hd = cache;
        cache = hd->next;
        huge_retire_locked(hd, &rel);
    }
    cache_bytes = 0;
    cache_count = 0;
    lock_release(&huge_lock);
    huge_release_now(&rel);
}

void huge_purge_decay(uint64_t now, bool force)
{
    if (sl_opt.purge == PURGE_OFF)
        return;
    uint64_t dd = (uint64_t)sl_opt.dirty_decay_ms, ld = (uint64_t)sl_opt.lazy_decay_ms;
    struct huge_releases rel = { .n = 0 };
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
            huge_retire_locked(hd, &rel);
            continue;
        }
        it = &hd->next;
    }
    lock_release(&huge_lock);
    huge_release_now(&rel);
}

void huge_cache_gauges_locked(struct huge_gauges *g)
{
    g->cached_bytes = cache_bytes;
    g->dirty_bytes = g->lazy_bytes = 0;
    for (struct huge *hd = cache; hd; hd = hd->next) {
        if (hd->state == PS_DIRTY)
            g->dirty_bytes += hd->map_size;
        else if (hd->state == PS_LAZY)
            g->lazy_bytes += hd->map_size;
    }
}

size_t huge_cache_check_locked(void)
{
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
    return bytes;
}

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
