/* checked.c — SLUICE_CHECK=1, the checked mode: the equivalent of glibc's
 * MALLOC_CHECK_, jemalloc's opt.junk and mimalloc's secure mode. It costs
 * time and memory; the default mode pays nothing for it (the dispatch rides
 * on branches the default paths already take: see malloc.c).
 *
 * Every allocation of the malloc family (and the bulk calls, which then go
 * one by one) gets its own block from the normal paths, laid out as
 *   [header 32][user bytes n][tail canary >= 32 up to the block end]
 * the header holding n, the offset from the block start, a state and a
 * check word (a keyed hash of all three and the address). Object caches
 * are not checked.
 *   - free, realloc, free_sized check the pad, the header and the tail
 *     canary: an underflow or an overflow of even one byte is reported
 *     ("heap buffer overflow", "underflow or corrupted header").
 *   - free zeroes the user bytes and puts the block in a quarantine (FIFO,
 *     QUARANTINE_ENTRIES blocks, QUARANTINE_BYTES): freed memory is not
 *     reused at once; when a block leaves the quarantine its bytes must
 *     still be zero, or a write after free is reported. A second free of a
 *     quarantined block is a double free, so is one after (the block's
 *     live bit is gone by then).
 *   - malloc and calloc hand out zeroed memory.
 *   - free_sized checks the size exactly; malloc_usable_size is n.
 *   - allocations of CHECK_MAP_MIN and more get a huge mapping of their
 *     own, the object placed against PROT_NONE guard pages (the rest of the
 *     mapping); a freed one is made PROT_NONE while quarantined, so any
 *     access after free faults. malloc(0) is a zero-size slot in both
 *     modes (zero.h): any access to it faults.
 */
#define _GNU_SOURCE
#include "checked.h"

#include <errno.h>
#include <string.h>
#include <sys/auxv.h>

#include "../base/annotate.h"
#include "../base/drain.h"
#include "../base/events.h"
#include "../base/fatal.h"
#include "../base/lock.h"
#include "../huge/huge.h"
#include "../options/options.h"
#include "../os/os.h"
#include "../prof/prof.h"
#include "../slab/heap_free.h"
#include "../slab/heap_run.h"
#include "sluice.h"

#define FRONT              32 /* pad + header before the user pointer */
#define TAIL_MIN           32 /* an overflow of up to 32 bytes stays in the own canary */
#define CHECK_MAP_MIN      ((size_t)64 << 10)
#define QUARANTINE_ENTRIES 256
#define QUARANTINE_BYTES   ((size_t)16 << 20)

enum { LIVE = 0x4c495645u, FREED = 0x46524545u };

struct chk_hdr {
    uint64_t size;   /* n, as asked */
    uint32_t offset; /* user pointer - block start */
    uint32_t state;  /* LIVE or FREED */
    uint64_t check;  /* keyed hash of the above, spare and the address */
    uint64_t spare;  /* bytes from the user pointer to the end of the tail canary, keyed */
};
_Static_assert(sizeof(struct chk_hdr) == 32, "header is the front");

bool sl_checked;
static uint64_t secret;
static SL_LOCK_DEFINE(quarantine_lock, LOCK_QUARANTINE);
static struct {
    uint8_t *p[QUARANTINE_ENTRIES];
    unsigned head, count;
    size_t bytes;
} q;

void checked_init(void)
{
    const void *r = (const void *)getauxval(AT_RANDOM); /* 16 random bytes, unaligned */
    uint64_t k[2] = { 0x9e3779b97f4a7c15ull, 0 };
    if (r)
        memcpy(k, r, sizeof k);
    secret = (k[0] ^ k[1]) | 1;
    /* under valgrind's memcheck the malloc family runs checked, its blocks
     * told to memcheck (base/annotate.h) */
    if (sl_opt.check || annotate_watch() == WATCH_MEMCHECK) {
        sl_checked = true;
        sl_small_limit = 0;
        sl_events.checked_free = checked_free;
    }
}

sl_lock *checked_fork_lock(void) { return &quarantine_lock; }

static uint8_t canary(uintptr_t a) { return (uint8_t)(mix64((a >> 3) ^ secret) >> (8 * (a & 7))) | 1; }

static struct chk_hdr *hdr_of(uint8_t *p) { return (struct chk_hdr *)(p - FRONT); }
static uint64_t spare_of(uint8_t *p) { return mix64((uintptr_t)p ^ secret ^ 0x5a5a5a5a5a5a5a5aull); }
static uint64_t hdr_check(const struct chk_hdr *h, uint8_t *p)
{
    return mix64(h->size ^ mix64((uint64_t)h->offset << 32 ^ h->state ^ mix64((uintptr_t)p ^ secret ^ h->spare)));
}

static void fill_canary(uint8_t *from, uint8_t *to)
{
    for (uint8_t *a = from; a < to; a++)
        *a = canary((uintptr_t)a);
}

static uint8_t *first_bad_canary(uint8_t *from, uint8_t *to)
{
    for (uint8_t *a = from; a < to; a++)
        if (*a != canary((uintptr_t)a))
            return a;
    return NULL;
}

/* ---- allocation ---------------------------------------------------------- */

void *checked_alloc(size_t n, size_t align)
{
    if (align < SL_GRAIN)
        align = SL_GRAIN;
    size_t offset = align_up(FRONT, align), need;
    if (__builtin_add_overflow(offset, n, &need) || __builtin_add_overflow(need, TAIL_MIN + SL_PAGE, &need) ||
        need > PTRDIFF_MAX / 2) {
        errno = ENOMEM;
        return NULL;
    }
    uint8_t *base = NULL, *p, *end;
    if (n >= CHECK_MAP_MIN || align > SL_PAGE) {
        /* the object ends where the guard starts (every page of the mapping
         * past the data, at least one): no tail, the first byte past faults */
        size_t data = align_up(offset + n, SL_PAGE);
        base = huge_alloc(data + SL_PAGE, align > SL_BLOCK ? align : SL_BLOCK, false);
        size_t map = base ? ((struct huge *)pagemap_region(pagemap_get((uintptr_t)base)))->map_size : 0;
        if (base && os_protect(base + data, map - data, false)) { /* no more mappings to split */
            sl_free(base);
            base = NULL;
        }
        if (!base) {
            errno = ENOMEM;
            return NULL;
        }
        end = base + data;
        annotate_reuse(base, data);
        p = (uint8_t *)align_down((uintptr_t)(end - n), align);
        if (p < base + offset)
            p = base + offset;
    }
    if (!base) {
        size_t inner = offset + n + TAIL_MIN;
        base = malloc_block_raw(inner, align);
        if (!base)
            return NULL;
        p = base + offset;
        end = base + heap_usable_size(base);
        annotate_reuse(base, (size_t)(end - base)); /* it may hold a block memcheck saw freed */
    }
    struct chk_hdr *h = hdr_of(p);
    fill_canary(base, (uint8_t *)h);
    h->size = n;
    h->offset = (uint32_t)(p - base);
    h->state = LIVE;
    h->spare = (uint64_t)(end - p) ^ spare_of(p); /* where the tail canary ends */
    h->check = hdr_check(h, p);
    memset(p, 0, n);
    fill_canary(p + n, end);
    annotate_malloc(p, n, false); /* calloc says it is zeroed (malloc.c) */
    return p;
}

/* ---- validation ---------------------------------------------------------- */

/* The header of a live checked allocation at p, after every check; aborts
 * (naming op) otherwise. *hd: its huge descriptor, or NULL. */
static struct chk_hdr *validate(uint8_t *p, const char *op, struct huge **hdp)
{
    uintptr_t e = pagemap_get((uintptr_t)p);
    struct huge *hd = NULL;
    if (e & PM_HUGE) {
        hd = pagemap_region(e);
        if (!hd->live || hd->quarantined)
            sl_fatal("double free of", p, "checked mode, huge mapping of bytes", hd->map_size);
        if (p < hd->base + FRONT || p >= hd->base + hd->map_size)
            heap_bad_free(p, e, op);
    } else if (!(e & PM_BLOCK) || ((uintptr_t)p & (SL_GRAIN - 1)) || page_index(p) < BLOCK_HEADER_PAGES) {
        heap_bad_free(p, e, op);
    }
    struct chk_hdr *h = hdr_of(p);
    uint8_t *base = p - h->offset;
    bool placed = hd ? base == hd->base
                     : h->offset >= FRONT && h->offset <= SL_BLOCK / 2 &&
                           (uintptr_t)base >> SL_BLOCK_SHIFT == (uintptr_t)p >> SL_BLOCK_SHIFT &&
                           block_live((uintptr_t)base);
    if (!placed) /* not a checked allocation's start, or one already released */
        sl_fatal(h->state == FREED ? "double free of" : "free of a pointer not returned by malloc, or a corrupted header, at",
                 p, "checked mode", (size_t)-1);
    if (h->check != hdr_check(h, p))
        sl_fatal("heap buffer underflow or corrupted header before", p, "checked mode", (size_t)-1);
    if (h->state != LIVE)
        sl_fatal("double free of", p, "checked mode, size", h->size);
    if (first_bad_canary(base, (uint8_t *)h))
        sl_fatal("heap buffer underflow before", p, "size", h->size);
    uint8_t *end = p + (h->spare ^ spare_of(p));
    uint8_t *bad = first_bad_canary(p + h->size, end);
    if (bad)
        sl_fatal("heap buffer overflow past", p, "size, first bad byte at offset", (size_t)(bad - p));
    *hdp = hd;
    return h;
}

/* ---- free and the quarantine ------------------------------------------- */

static void release(uint8_t *p)
{
    struct chk_hdr *h = hdr_of(p);
    uintptr_t e = pagemap_get((uintptr_t)p);
    if (e & PM_HUGE) {
        struct huge *hd = pagemap_region(e);
        if (!os_protect(hd->base, hd->map_size, true))
            hd->quarantined = false; /* else still PROT_NONE: huge_free unmaps it */
        huge_free(hd, hd->base);
        return;
    }
    annotate_defined(p, h->size); /* no access since its free, for memcheck: read here */
    for (size_t i = 0; i < h->size; i++)
        if (p[i])
            sl_fatal("write after free to", p + i, "checked mode, in a block of size", h->size);
    /* not through a magazine: its cookie would land on the header, whose
     * FREED state names a later free of p a double free */
    heap_free_block_now(p - h->offset);
}

/* The oldest quarantined block, off the ring (quarantine_lock held). */
static uint8_t *quarantine_pop_locked(void)
{
    uint8_t *old = q.p[q.head];
    q.head = (q.head + 1) % QUARANTINE_ENTRIES;
    q.count--;
    uintptr_t e = pagemap_get((uintptr_t)old);
    q.bytes -= e & PM_HUGE ? ((struct huge *)pagemap_region(e))->req_size : hdr_of(old)->size;
    return old;
}

void checked_free(void *ptr)
{
    uint8_t *p = ptr;
    struct huge *hd;
    struct chk_hdr *h = validate(p, "free", &hd);
    if (unlikely(prof_on)) /* a checked block has no mark: the sampler looks it up */
        prof_free(p);
    h->state = FREED;
    h->check = hdr_check(h, p);
    size_t bytes = hd ? hd->req_size : h->size; /* as quarantine_pop_locked counts it */
    if (hd) {
        hd->quarantined = true;
        os_protect(hd->base, hd->map_size, false); /* any touch now faults (if refused: it stays readable) */
    } else {
        memset(p, 0, h->size);
    }
    annotate_free(p);
    uint8_t *evict[QUARANTINE_ENTRIES];
    unsigned k = 0;
    lock_acquire(&quarantine_lock);
    q.p[(q.head + q.count) % QUARANTINE_ENTRIES] = p;
    q.count++;
    q.bytes += bytes;
    while (q.count == QUARANTINE_ENTRIES || (q.bytes > QUARANTINE_BYTES && q.count > 1))
        evict[k++] = quarantine_pop_locked();
    lock_release(&quarantine_lock);
    for (unsigned i = 0; i < k; i++)
        release(evict[i]);
}

void checked_flush(void)
{
    for (;;) { /* a batch at a time: release() runs outside the lock */
        uint8_t *evict[64];
        unsigned k = 0;
        lock_acquire(&quarantine_lock);
        while (q.count && k < 64)
            evict[k++] = quarantine_pop_locked();
        lock_release(&quarantine_lock);
        if (!k)
            return;
        for (unsigned i = 0; i < k; i++)
            release(evict[i]);
    }
}

size_t checked_usable(const void *p, const char *op)
{
    struct huge *hd;
    return validate((uint8_t *)p, op, &hd)->size;
}

void checked_free_sized(void *p, size_t size)
{
    struct huge *hd;
    struct chk_hdr *h = validate(p, "free", &hd);
    if ((h->size ? h->size : 1) != (size ? size : 1)) /* 0 and 1 alike, as the default mode */
        sl_fatal("sized free with the wrong size:", p, "size given", size);
    checked_free(p);
}

void *checked_realloc(void *p, size_t n)
{
    struct huge *hd;
    struct chk_hdr *h = validate(p, "realloc", &hd);
    void *moved = checked_alloc(n, SL_GRAIN);
    if (!moved)
        return NULL; /* p stays valid */
    memcpy(moved, p, h->size < n ? h->size : n);
    checked_free(p);
    return moved;
}

/* The reclaim registry's entry (base/drain.h): the quarantine is released
 * whole (sl_purge, a failed allocation), first of all, since its blocks
 * go back to the structures drained after it. */
static void drain_quarantine(enum drain_depth depth, size_t want)
{
    (void)depth, (void)want;
    if (sl_checked)
        checked_flush();
}
static size_t quarantine_held(void)
{
    lock_acquire(&quarantine_lock);
    size_t n = q.bytes;
    lock_release(&quarantine_lock);
    return n;
}
DRAIN_REGISTER(quarantine_drain, .name = "quarantine", .order = DRAIN_QUARANTINE,
               .depths = DRAIN_PURGE | DRAIN_ENOMEM, .run = drain_quarantine, .held = quarantine_held);
