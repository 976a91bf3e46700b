/* hugify.c — hugepage-backed pageblocks (SLUICE_THP, issue 11).
 *
 * A pageblock is 2 MiB, aligned: exactly one transparent hugepage. One
 * that is dense and has stayed dense long enough (the policy: decay.h's
 * hugify_choose) is given one:
 *   - by the reclaimer, with MADV_COLLAPSE (Linux 6.1): the copy runs in
 *     the background thread, as khugepaged's would, so no allocating
 *     thread stalls on compaction;
 *   - with no reclaimer (a single-threaded program), by a slow path at
 *     most once per HUGIFY_EVERY_MS (purge_decay.c), with MADV_HUGEPAGE only:
 *     the call returns at once and khugepaged does the copy later;
 *   - where the kernel refuses MADV_COLLAPSE (older than 6.1, EINVAL),
 *     with MADV_HUGEPAGE as well.
 * A block whose collapse and advice the kernel both refused is tried
 * again once it has stayed dense another DECAY_HUGIFY_AGE_MS, not on every pass.
 * MADV_HUGEPAGE at map time (SLUICE_THP=madvise, page.c block_new) is
 * the other mechanism: every fault in a block may then stall on direct
 * compaction in the faulting thread (defrag=madvise), and a sparse block
 * costs 2 MiB of RSS for a few objects.
 *
 * Invariants (page heap lock):
 *   - thp set: the block is collapsed, or advised and left to khugepaged.
 *     Its free pages are never purged while it is dense (purge.c asks
 *     hugify_may_purge): a purge of part of a hugepage splits it. They
 *     stay resident and count as dirty (a collapse made every free page
 *     resident: pages_all_dirty), in page_heap.thp_dirty_pages as well, which
 *     the dirty cap leaves out. A block that turns sparse (more than half
 *     free) loses the flag, and purges may split it; so does every block
 *     before a purge of everything (sl_purge, malloc_trim, memory
 *     pressure: hugify_split_all), which promises every free page clean.
 *   - pinned: hugify is collapsing the block outside the lock: it is not
 *     unmapped meanwhile, even if it comes wholly free. It has thp set
 *     (so counts in thp_blocks) until the kernel's answer comes.
 * A picked block whose pages are mostly not resident (mincore: runs and
 * slabs handed out but never touched) is left plain, counted in
 * thp_untouched, and looked at again once dense another
 * DECAY_HUGIFY_AGE_MS: a collapse would make them all resident
 * (decay.h, hugify_resident_enough).
 * Placement already favours the fullest block (page.c), so blocks tend to
 * end up dense (hugepage) or empty (unmapped or purged whole).
 */
#include <errno.h>

#include "../options/options.h"
#include "../os/os.h"
#include "decay.h"
#include "page_heap.h"

#define HUGIFY_BATCH    32   /* blocks collapsed per pass (a boost cuts a pass short) */

static _Atomic int hugify_busy;      /* one pass at a time (reset in a fork child) */
static _Atomic int collapse_refused; /* the kernel has no MADV_COLLAPSE */

void block_set_thp(struct block *b, bool on)
{
    if (b->thp == on)
        return;
    b->thp = on;
    page_heap.thp_blocks += on ? 1 : (size_t)-1;
    size_t d = ld_relaxed(&page_heap.thp_dirty_pages);
    st_relaxed(&page_heap.thp_dirty_pages, on ? d + b->ndirty : d - b->ndirty);
}

bool hugify_may_purge(struct block *b)
{
    if (!b->thp)
        return true;
    if (!hugify_sparse(b->free_pages))
        return false;
    block_set_thp(b, false); /* sparse: not worth 2 MiB of RSS */
    stat_add(stats_global, STAT_thp_split, 1);
    return true;
}

void hugify_split_all(void)
{
    lock_acquire(&page_heap.lock);
    for (struct block *b = page_heap.all_blocks; b; b = b->anext)
        if (b->thp && !b->pinned) {
            block_set_thp(b, false);
            b->dense_ms = 0; /* seen dense again from the next pass on */
            stat_add(stats_global, STAT_thp_split, 1);
        }
    page_heap_unlock();
}

/* Pick up to max blocks dense for DECAY_HUGIFY_AGE_MS; mark them thp
 * and pinned, committed whole. Lock held. */
static unsigned pick(uint64_t now, struct block **todo, unsigned max)
{
    unsigned k = 0;
    for (struct block *b = page_heap.all_blocks; b; b = b->anext) {
        if (b->thp)
            continue;
        enum hugify_pick c = hugify_choose(b->free_pages, b->dense_ms, now);
        if (c == HUGIFY_NOT_DENSE)
            b->dense_ms = 0;
        else if (c == HUGIFY_DENSE_NOW)
            b->dense_ms = now;
        if (c != HUGIFY_PICK || k == max || !block_commit(b, SL_BLOCK_PAGES))
            continue;
        block_set_thp(b, true);
        b->pinned = true;
        todo[k++] = b;
    }
    return k;
}

void hugify(uint64_t now, bool background, unsigned max, bool (*go_on)(void))
{
    if (sl_opt.thp == THP_NEVER || atomic_exchange(&hugify_busy, 1))
        return;
    struct block *todo[HUGIFY_BATCH];
    lock_acquire(&page_heap.lock);
    unsigned k = pick(now ? now : 1, todo, max < HUGIFY_BATCH ? max : HUGIFY_BATCH);
    page_heap_unlock();
    for (unsigned i = 0; i < k; i++) {
        struct block *b = todo[i];
        int r = EINVAL;
        /* a boost came (winning blocks back goes first), or the CPUs
         * turned busy: the rest wait for a later pass */
        bool collapsed = false, skipped = background && i && (page_boost_deficit(NULL) || (go_on && !go_on()));
        bool untouched = false;
        if (skipped)
            r = EAGAIN;
        else if (!hugify_resident_enough(SL_BLOCK_PAGES - (os_resident(b, SL_BLOCK) >> SL_PAGE_SHIFT)))
            untouched = true, r = EAGAIN;
        else if (background && !ld_relaxed(&collapse_refused)) {
            r = os_collapse(b, SL_BLOCK);
            collapsed = !r;
            if (r == EINVAL) /* no MADV_COLLAPSE here: leave it to khugepaged */
                st_relaxed(&collapse_refused, 1);
        }
        if (r == EINVAL)
            r = os_huge(b, SL_BLOCK);
        if (!skipped)
            stat_add_shared(untouched ? STAT_thp_untouched
                            : r       ? STAT_thp_failed
                            : collapsed ? STAT_thp_collapse
                                        : STAT_thp_advise,
                            1);
        lock_acquire(&page_heap.lock);
        b->pinned = false;
        if (r) {
            block_set_thp(b, false);
            if (!skipped) /* refused, or untouched: tried again once it has been dense DECAY_HUGIFY_AGE_MS more */
                b->dense_ms = now ? now : 1;
        } else if (collapsed)
            pages_all_dirty(b);
        page_heap_unlock();
    }
    st_relaxed(&hugify_busy, 0);
}

/* A fork child: the pass that was running is gone with its thread. */
void hugify_fork_child(void)
{
    if (!ld_relaxed(&hugify_busy))
        return;
    for (struct block *b = page_heap.all_blocks; b; b = b->anext)
        if (b->pinned) {
            b->pinned = false;
            block_set_thp(b, false);
        }
    st_relaxed(&hugify_busy, 0);
}

void page_hugify(uint64_t now, unsigned max, bool (*go_on)(void)) { hugify(now, true, max, go_on); }
