/* meta.c — bump arena + per-size free lists for internal records. */
#include "meta.h"

#include <string.h>

#include "../base/lock.h"
#include "../os/os.h"
#include "../stats/stats.h"

#define META_CHUNK   SL_BLOCK
#define META_CLASSES 64 /* free lists for record sizes 64, 128, ..., 4096 */

static SL_LOCK_DEFINE(meta_lock, LOCK_META);
static uint8_t *bump, *bump_end;
static void *free_lists[META_CLASSES];
static _Atomic size_t mapped;

static size_t meta_round(size_t size) { return align_up(size, SL_CACHELINE); }

void *meta_alloc(size_t size)
{
    size = meta_round(size);
    size_t cls = size / SL_CACHELINE - 1;
    void *p = NULL;
    bool reused = false;
    lock_acquire(&meta_lock);
    if (cls < META_CLASSES && free_lists[cls]) {
        p = free_lists[cls];
        free_lists[cls] = *(void **)p;
        reused = true;
    } else {
        if ((size_t)(bump_end - bump) < size) {
            size_t chunk = size > META_CHUNK ? align_up(size, SL_PAGE) : META_CHUNK;
            uint8_t *c = os_map(chunk);
            if (!c) {
                lock_release(&meta_lock);
                return NULL;
            }
            st_relaxed(&mapped, ld_relaxed(&mapped) + chunk);
            bump = c;
            bump_end = c + chunk;
        }
        p = bump;
        bump += size;
    }
    lock_release(&meta_lock);
    if (reused) /* fresh bump memory is zero from mmap: leave it untouched */
        memset(p, 0, size);
    return p;
}

void meta_free(void *p, size_t size)
{
    size = meta_round(size);
    size_t cls = size / SL_CACHELINE - 1;
    if (cls >= META_CLASSES)
        return; /* large records are rare (none today); keep them mapped */
    lock_acquire(&meta_lock);
    *(void **)p = free_lists[cls];
    free_lists[cls] = p;
    lock_release(&meta_lock);
}

size_t meta_bytes(void) { return ld_relaxed(&mapped); }

/* The records' report to the statistics (stats.h). */
static void meta_report(uint64_t c[STAT_COUNT], uint64_t g[GAUGE_COUNT])
{
    (void)c;
    g[GAUGE_meta_bytes] = meta_bytes();
    g[GAUGE_mapped_bytes] += meta_bytes();
}
STAT_SOURCE(meta_source, meta_report);
struct sl_lock *meta_fork_lock(void) { return &meta_lock; }
