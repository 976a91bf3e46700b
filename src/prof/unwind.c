/* unwind.c — a sample's stack from the call frame information
 * (.eh_frame), what glibc's backtrace() finds through libgcc's unwinder,
 * at a small part of its cost once warm (unwind.h).
 *
 * A frame is one step: its rule (cfi.h) says where the CFA (the caller's
 * stack pointer) is, rsp or rbp plus an offset, that the return address
 * is saved at CFA - 8 (or is undefined: the outermost frame), and whether
 * rbp is saved and where. The first time a pc is seen, cfi.c works its
 * rule out from the module's tables; then the rule is kept in a two-way
 * cache whose entries are one word each, the pc and the rule packed
 * together: a reader sees a whole entry or another one, never half of
 * one; two threads filling one slot leave one right entry.
 *
 * A signal handler's return address is glibc's trampoline (__restore_rt):
 * recognised by its code, as libgcc does, the interrupted code's
 * registers are read from the ucontext the kernel left at the handler's
 * CFA, and the walk goes on from there.
 *
 * Where a frame's rule is beyond cfi.c, the stack ends there: never a
 * wrong frame, at worst a shorter stack. -1 only where it cannot run at
 * all (not x86-64, or no _dl_find_object): the caller then asks glibc's
 * backtrace().
 *
 * Invariant: a cached rule is the rule at exactly its key's pc.
 */
#define _GNU_SOURCE
#include "unwind.h"

#include <string.h>
#include <ucontext.h>

#include "cfi.h"

#ifdef CFI_READER

#define PC_BITS 47 /* user-space addresses */
#define SPAN ((uintptr_t)1 << 30) /* a stack is never deeper than this */

/* the calling thread's (plain adds: a shared atomic add a frame cost a
 * locked instruction each, and its line bounced between threads) */
static __thread uint64_t count_hits, count_misses;

/* ---- the cache: CACHE_SETS pairs of slots; a pc's set is its low
 * SET_BITS bits mixed with its higher bits, so an entry keeps only the
 * higher bits (pc >> SET_BITS: with the set, they give the pc back).
 * An entry: bits 0-35 the pc's higher bits; 36 the CFA's register (1:
 * rbp); 37-57 the CFA's offset / 8; 58-62 k, rbp saved at CFA - 8k (0:
 * not saved); 63 the outermost frame (no return address). 0: empty (no
 * code lies below 2 KiB). ---- */

#define SET_BITS 11
#define CACHE_SETS (1u << SET_BITS)
#define HI_BITS (PC_BITS - SET_BITS)
#define HI_MASK (((uint64_t)1 << HI_BITS) - 1)
#define OFF_BITS 21

static _Atomic uint64_t cache[CACHE_SETS][2];

static uint64_t pack(uintptr_t pc, const struct rule *r)
{
    if (pc >> PC_BITS || r->cfa_off < 0 || r->cfa_off % 8 || r->cfa_off / 8 >> OFF_BITS)
        return 0;
    uint64_t k = 0;
    if (r->bp.how == AT) {
        if (r->bp.off >= 0 || r->bp.off % 8 || -r->bp.off / 8 >= 32)
            return 0;
        k = (uint64_t)(-r->bp.off / 8);
    }
    return (pc >> SET_BITS) | (uint64_t)(r->cfa_reg == REG_BP) << HI_BITS | (uint64_t)(r->cfa_off / 8) << 37 |
           k << 58 | (uint64_t)(r->ra.how == UNDEF) << 63;
}

static size_t set_of(uintptr_t pc) { return (pc ^ pc >> SET_BITS ^ pc >> (2 * SET_BITS)) & (CACHE_SETS - 1); }

/* The rule at pc, packed as a cache entry (pack: the walk reads it as it
 * is), from the two slots of its set (a third pc replaces the second
 * one's entry); 0 if beyond us, or a rule the entry cannot hold (a CFA
 * offset not a multiple of 8, or past 16 MiB; rbp saved past 31 words:
 * no compiler makes them), which ends the stack as a rule beyond us does. */
static uint64_t rule_at(uintptr_t pc)
{
    _Atomic uint64_t *pair = cache[set_of(pc)];
    for (int i = 0; i < 2; i++) {
        uint64_t w = atomic_load_explicit(&pair[i], memory_order_relaxed);
        if (w && (w & HI_MASK) == pc >> SET_BITS && !(pc >> PC_BITS)) {
            count_hits++;
            return w;
        }
    }
    count_misses++;
    struct rule r;
    if (!cfi_rule_find(pc, &r))
        return 0;
    uint64_t w = pack(pc, &r);
    if (w) /* the empty slot, else the second */
        atomic_store_explicit(&pair[atomic_load_explicit(&pair[0], memory_order_relaxed) != 0], w,
                              memory_order_relaxed);
    return w;
}

void prof_unwind_init(void) { cfi_init(); }

/* Is pc glibc's signal trampoline (__restore_rt: mov $15, %rax;
 * syscall), the return address the kernel gives a signal handler? Its
 * caller's registers are then in the ucontext at the handler's CFA. */
static bool sigreturn_at(uintptr_t pc)
{
    static const uint8_t code[9] = { 0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05 };
    const uint8_t *at = (const uint8_t *)pc;
    /* byte by byte, so that no read goes past the first difference (a
     * return address may end its mapping); the first three inline, as
     * most return addresses differ there: no call a frame */
    return at[0] == code[0] && at[1] == code[1] && at[2] == code[2] && !memcmp(at + 3, code + 3, sizeof code - 3);
}

sl_noinline int prof_unwind(uintptr_t *frames, uint32_t cap)
{
    if (!cfi_on())
        return -1;
    uintptr_t pc, sp, bp;
    __asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2" : "=r"(pc), "=r"(sp), "=r"(bp));
    uintptr_t top = sp, lookup = pc; /* this frame's pc is not a return address: no - 1 */
    uint32_t n = 0;
    while (n < cap) {
        uint64_t w = rule_at(lookup); /* read as pack wrote it: no unpacking */
        if (!w || w >> 63)
            break; /* beyond us (the stack so far), or the outermost frame */
        uintptr_t cfa = (w >> HI_BITS & 1 ? bp : sp) + ((w >> 37 & (((uint64_t)1 << OFF_BITS) - 1)) << 3);
        if (cfa <= sp || cfa - top > SPAN || cfa & 7)
            break;
        uintptr_t ra = *(const uintptr_t *)(cfa - 8);
        uint64_t k = w >> 58 & 31; /* rbp saved at CFA - 8k */
        if (k)
            bp = *(const uintptr_t *)(cfa - 8 * k);
        sp = cfa;
        if (!ra)
            break;
        frames[n++] = ra;
        lookup = ra - 1; /* in the call instruction */
        if (sigreturn_at(ra)) { /* a signal handler's frame: on to the interrupted code */
            const mcontext_t *m = &((const ucontext_t *)cfa)->uc_mcontext;
            uintptr_t ip = (uintptr_t)m->gregs[REG_RIP];
            sp = (uintptr_t)m->gregs[REG_RSP];
            bp = (uintptr_t)m->gregs[REG_RBP];
            if (n == cap || !ip)
                break;
            frames[n++] = ip;
            lookup = ip; /* the interrupted instruction itself */
            top = sp < top ? sp : top; /* on the thread's stack, below an alternate signal stack or above */
        }
    }
    return (int)n;
}

#else /* not x86-64 with glibc 2.35's _dl_find_object: the full unwinder */

void prof_unwind_init(void) {}

int prof_unwind(uintptr_t *frames, uint32_t cap)
{
    (void)frames, (void)cap;
    return -1;
}
static __thread uint64_t count_hits, count_misses;

#endif

void prof_unwind_counts(uint64_t *hits, uint64_t *misses)
{
    *hits = count_hits;
    *misses = count_misses;
}
