/* drain.h — the reclaim registry: one list of every structure in sluice
 * that can hold memory the program has freed, or address space it no
 * longer uses (the kernel's shrinker list, in user space).
 *
 * Each such structure registers one drain beside its own code
 * (DRAIN_REGISTER): a function that gives back what it holds, at the
 * depths it serves, and one that says how many bytes it holds now. One
 * call, drain_all, runs them in the order of enum drain_order below:
 * upstream first (a drain that frees into another structure runs before
 * that structure's), and otherwise cheapest first. Whoever needs memory
 * back calls drain_all with the depth it needs, and nothing else:
 *
 *   DRAIN_THREAD  an owner answering a request: this thread's own caches
 *   DRAIN_BOOST   the watermark boost: what lets whole pageblocks come free
 *   DRAIN_PURGE   sl_purge, malloc_trim(0): everything, dirty pages purged
 *   DRAIN_PRESSURE the reclaimer saw memory pressure (cgroup headroom, PSI):
 *                 what still counts against the limit and can go now
 *   DRAIN_ENOMEM  an allocation failed (drain_after_enomem): everything
 *                 that holds address space, the teardown queue waited for,
 *                 before the allocation is tried once more; not the
 *                 shrinkers (the failing thread may hold its cache's lock,
 *                 which a shrinker takes)
 *
 * A drain of a per-thread structure gives back the calling thread's, and
 * at DRAIN_BOOST, DRAIN_PURGE and DRAIN_ENOMEM asks every other thread to
 * give back its own on its next allocation slow path (its owner is the
 * only one who may touch it); exited threads' are drained at once.
 *
 * Invariants: a drain runs with no lock of sluice held by its thread
 * (lock_any_held: drain_all checks); each order has at most one drain;
 * held() is process-wide and may be approximate (relaxed reads).
 * The entries are in one linker section, so adding one is a line beside
 * the structure it drains, and the table, the statistics (held.NAME,
 * enomem_held.NAME) and sl_check all see it.
 */
#ifndef SL_DRAIN_H
#define SL_DRAIN_H

#include <errno.h>

#include "common.h"

enum drain_depth {
    DRAIN_THREAD = 1,
    DRAIN_BOOST = 2,
    DRAIN_PURGE = 4,
    DRAIN_ENOMEM = 8,
    DRAIN_PRESSURE = 16,
};
#define DRAIN_ALL_DEPTHS (DRAIN_THREAD | DRAIN_BOOST | DRAIN_PURGE | DRAIN_ENOMEM | DRAIN_PRESSURE)

/* The order drains run in; one drain each. */
enum drain_order {
    DRAIN_QUARANTINE,     /* checked mode's freed blocks (api/checked.c) */
    DRAIN_SHRINKERS,      /* object caches' reclaim callbacks (cache/cache.c) */
    DRAIN_REMOTE_BATCHES, /* frees of other threads' objects, batched (slab/remote_batch.c) */
    DRAIN_MAGAZINES,      /* thread magazines of free objects (slab/heaps.c) */
    DRAIN_GATHER,         /* opens the gathering of the pageblocks freed below (page/purge.c) */
    DRAIN_SLABS,          /* empty and spare slabs, exited threads' heaps (slab/heaps.c) */
    DRAIN_PAGE_CACHES,    /* per-thread page caches (slab/heaps.c) */
    DRAIN_RUN_CACHE,      /* medium runs parked whole (page/runcache.c) */
    DRAIN_FREE_BLOCKS,    /* free pages purged, wholly free pageblocks unmapped (page/purge.c) */
    DRAIN_HUGE_CACHE,     /* cached huge mappings (huge/huge_cache.c) */
    DRAIN_TEARDOWN,       /* ranges queued for the teardown workers (teardown/teardown.c) */
    DRAIN_ZERO_ZONES,     /* zero-size zones with no live slot (zero/zero.c) */
    DRAIN_COUNT
};

struct drain {
    const char *name;                     /* short, for the statistics */
    enum drain_order order;
    unsigned depths;                      /* enum drain_depth bits it runs at */
    void (*run)(enum drain_depth depth, size_t want); /* give back; no lock held */
    size_t (*held)(void);                 /* bytes held now, process-wide */
};

#define DRAIN_REGISTER(var, ...) sl_section_entry("sl_drain") static const struct drain var = { __VA_ARGS__ }

/* The drain of each order, or NULL where none is linked in (a static link
 * takes only the objects a program uses). */
const struct drain *drain_of(enum drain_order order);
/* Run every drain that serves depth, in order. want: the bytes asked of
 * the object caches' shrinkers (SIZE_MAX: all they can give; 0: none);
 * the other drains give back all they hold. False (nothing run) if this
 * thread holds a lock of sluice. */
bool drain_all(enum drain_depth depth, size_t want);
/* After an allocation failed, with no lock of sluice held: record what
 * each drain holds (enomem_held), drain everything (DRAIN_ENOMEM) and
 * return true, so the caller tries once more; false if it cannot (a lock
 * is held, or this thread is draining already). errno is kept. */
bool drain_after_enomem(void);
/* p = expr, an allocation; if it fails, drain_after_enomem and expr once
 * more, errno as it was before the first try if that one succeeds (a
 * successful malloc leaves errno alone). For slow paths: errno is read. */
#define DRAIN_RETRY(p, expr)                            \
    do {                                                \
        int drain_errno_ = errno;                       \
        (p) = (expr);                                   \
        if (!(p) && drain_after_enomem()) {             \
            errno = drain_errno_;                       \
            (p) = (expr);                               \
        }                                               \
    } while (0)
/* Bytes drain order o held when the last allocation failed. */
size_t drain_enomem_held(enum drain_order o);
/* Allocations that failed and drained (and each was retried). */
uint64_t drain_enomem_count(void);
/* The registry is complete: a drain for every order (sl_check, tests). */
bool drain_complete(void);

#endif
