/* unwind.c — a sample's stack from the call frame information
 * (.eh_frame), what glibc's backtrace() finds through libgcc's unwinder,
 * at a small part of its cost once warm (unwind.h).
 *
 * A frame is one step: its rule, worked out from its pc, says where the
 * CFA (the caller's stack pointer) is, rsp or rbp plus an offset, that the
 * return address is saved at CFA - 8 (or is undefined: the outermost
 * frame), and whether rbp is saved and where. The first time a pc is
 * seen, its rule is worked out: the module's unwind tables are found with
 * _dl_find_object (glibc 2.35; no lock, no allocation; a weak
 * reference), the FDE in .eh_frame_hdr's sorted table, and the CIE's and
 * FDE's instructions run up to the pc. Then the rule is kept in a
 * two-way cache whose entries are one word each, the pc and the
 * rule packed together: a reader sees a whole entry or another one, never
 * half of one; two threads filling one slot leave one right entry.
 *
 * A signal handler's return address is glibc's trampoline (__restore_rt):
 * recognised by its code, as libgcc does, the interrupted code's
 * registers are read from the ucontext the kernel left at the handler's
 * CFA, and the walk goes on from there.
 *
 * Where a frame's rule is beyond it (a CFA from another register or an
 * expression, as in stack-realigning prologues; a 64-bit .eh_frame; a
 * pointer encoding it does not read; code without tables), the stack
 * ends there: never a wrong frame, at worst a shorter stack. -1 only
 * where it cannot run at all (not x86-64, or no _dl_find_object): the
 * caller then asks glibc's backtrace().
 *
 * Invariant: a cached rule is the rule at exactly its key's pc.
 */
#define _GNU_SOURCE
#include "unwind.h"

#include <dlfcn.h>
#include <string.h>
#include <ucontext.h>

#if defined(__x86_64__) && defined(DLFO_STRUCT_HAS_EH_DBASE)

enum { REG_BP = 6, REG_SP = 7, REG_RA = 16 };
enum how { SAME, UNDEF, AT, BAD }; /* a register's rule: unchanged, none, saved at CFA + off, beyond us */

struct reg_rule {
    enum how how;
    int64_t off;
};

struct rule {
    unsigned cfa_reg; /* REG_SP or REG_BP; anything else is beyond us */
    int64_t cfa_off;
    bool cfa_bad;     /* an expression */
    struct reg_rule bp, ra;
};

#define PC_BITS 47 /* user-space addresses */
#define SPAN ((uintptr_t)1 << 30) /* a stack is never deeper than this */

/* the calling thread's (plain adds: a shared atomic add a frame cost a
 * locked instruction each, and its line bounced between threads) */
static __thread uint64_t count_hits, count_misses;
static int (*find_object)(void *, struct dl_find_object *);

/* ---- reading .eh_frame ---- */

struct cursor {
    const uint8_t *p, *end;
    bool bad;
};

static uint64_t fixed(struct cursor *c, unsigned n)
{
    if ((size_t)(c->end - c->p) < n) {
        c->bad = true;
        return 0;
    }
    uint64_t v = 0;
    memcpy(&v, c->p, n); /* little-endian */
    c->p += n;
    return v;
}

static void skip(struct cursor *c, uint64_t n)
{
    if (n > (uint64_t)(c->end - c->p))
        c->bad = true;
    else
        c->p += n;
}

static uint64_t uleb(struct cursor *c)
{
    uint64_t v = 0;
    for (unsigned shift = 0; c->p < c->end && shift < 64; shift += 7) {
        uint8_t b = *c->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return v;
    }
    c->bad = true;
    return 0;
}

static int64_t sleb(struct cursor *c)
{
    uint64_t v = 0;
    for (unsigned shift = 0; c->p < c->end && shift < 64;) {
        uint8_t b = *c->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
        if (!(b & 0x80)) {
            if (shift < 64 && (b & 0x40))
                v |= ~(uint64_t)0 << shift;
            return (int64_t)v;
        }
    }
    c->bad = true;
    return 0;
}

/* A pointer in encoding enc (DW_EH_PE_*); datarel: the base of
 * DW_EH_PE_datarel (0 where there is none). An indirect one's value is
 * the address it is read from (only the personality is: it is skipped). */
static bool encoded(struct cursor *c, uint8_t enc, uintptr_t datarel, uintptr_t *out)
{
    if (enc == 0xff) { /* omitted */
        *out = 0;
        return true;
    }
    uintptr_t at = (uintptr_t)c->p;
    uint64_t v;
    switch (enc & 0x0f) {
    case 0x00: v = fixed(c, 8); break;
    case 0x01: v = uleb(c); break;
    case 0x02: v = fixed(c, 2); break;
    case 0x03: v = fixed(c, 4); break;
    case 0x04: v = fixed(c, 8); break;
    case 0x09: v = (uint64_t)sleb(c); break;
    case 0x0a: v = (uint64_t)(int64_t)(int16_t)fixed(c, 2); break;
    case 0x0b: v = (uint64_t)(int64_t)(int32_t)fixed(c, 4); break;
    case 0x0c: v = fixed(c, 8); break;
    default: return false;
    }
    switch (enc & 0x70) {
    case 0x00: break;
    case 0x10: v += at; break; /* pcrel */
    case 0x30:                 /* datarel */
        if (!datarel)
            return false;
        v += datarel;
        break;
    default: return false;
    }
    *out = (uintptr_t)v;
    return !c->bad;
}

/* The FDE covering pc in the module whose .eh_frame_hdr is at hdr:
 * its start; NULL if none (or the table is not the sorted kind). */
static const uint8_t *fde_find(const uint8_t *hdr, uintptr_t pc)
{
    struct cursor c = { hdr + 4, hdr + 4 + 16, false };
    uintptr_t frame, count;
    if (hdr[0] != 1 || hdr[3] != 0x3b || !encoded(&c, hdr[1], (uintptr_t)hdr, &frame) ||
        !encoded(&c, hdr[2], (uintptr_t)hdr, &count) || !count)
        return NULL;
    const int32_t *table = (const int32_t *)c.p; /* pairs: start, FDE, relative to hdr */
    uintptr_t base = (uintptr_t)hdr;
    size_t lo = 0, hi = count; /* the last entry whose start is <= pc */
    if (pc < base + (intptr_t)table[0])
        return NULL;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (base + (intptr_t)table[2 * mid] <= pc)
            lo = mid;
        else
            hi = mid;
    }
    return (const uint8_t *)(base + (intptr_t)table[2 * lo + 1]);
}

struct cie {
    uint64_t code_align;
    int64_t data_align;
    uint8_t fde_enc;
    bool z;
    const uint8_t *insn, *end;
};

static bool cie_read(const uint8_t *at, struct cie *ci)
{
    uint32_t len;
    memcpy(&len, at, 4);
    if (len == 0 || len == 0xffffffffu)
        return false;
    struct cursor c = { at + 4, at + 4 + len, false };
    if (fixed(&c, 4) != 0) /* a CIE's id */
        return false;
    uint8_t version = (uint8_t)fixed(&c, 1);
    if (version != 1 && version != 3)
        return false;
    const char *aug = (const char *)c.p;
    size_t aug_len = strnlen(aug, (size_t)(c.end - c.p));
    c.p += aug_len + 1;
    ci->code_align = uleb(&c);
    ci->data_align = sleb(&c);
    uint64_t ra = version == 1 ? fixed(&c, 1) : uleb(&c);
    if (ra != REG_RA)
        return false;
    ci->fde_enc = 0; /* absptr */
    ci->z = aug[0] == 'z';
    if (aug[0] && !ci->z)
        return false;
    if (ci->z) {
        uint64_t n = uleb(&c);
        const uint8_t *data_end = c.p + n;
        for (const char *a = aug + 1; *a; a++) {
            uintptr_t skip;
            switch (*a) {
            case 'R': ci->fde_enc = (uint8_t)fixed(&c, 1); break;
            case 'L': fixed(&c, 1); break;
            case 'P':
                if (!encoded(&c, (uint8_t)fixed(&c, 1) & 0x7f, 0, &skip)) /* the personality: skipped */
                    return false;
                break;
            default: return false; /* 'S' (a signal frame) and anything unknown */
            }
        }
        if (c.bad || data_end > c.end)
            return false;
        c.p = data_end;
    }
    ci->insn = c.p;
    ci->end = c.end;
    return !c.bad;
}

/* ---- running the instructions ---- */

#define STATES 8 /* DW_CFA_remember_state's depth */

static void set_reg(struct rule *r, uint64_t reg, enum how how, int64_t off)
{
    struct reg_rule *rr = reg == REG_BP ? &r->bp : reg == REG_RA ? &r->ra : NULL;
    if (rr) {
        rr->how = how;
        rr->off = off;
    }
}

/* Run [c) on r until the location passes target; init: the CIE's rule
 * (DW_CFA_restore's). false: an instruction beyond us. */
static bool run(struct cursor *c, const struct cie *ci, uintptr_t loc, uintptr_t target, struct rule *r,
                const struct rule *init)
{
    struct rule saved[STATES];
    unsigned depth = 0;
    while (c->p < c->end && !c->bad) {
        uint8_t op = *c->p++;
        uint64_t reg, delta = 0;
        int64_t off;
        switch (op & 0xc0) {
        case 0x40: delta = op & 0x3f; goto advance;
        case 0x80: set_reg(r, op & 0x3f, AT, (int64_t)uleb(c) * ci->data_align); continue;
        case 0xc0:
            if ((op & 0x3f) == REG_BP)
                r->bp = init->bp;
            else if ((op & 0x3f) == REG_RA)
                r->ra = init->ra;
            continue;
        }
        switch (op) {
        case 0x00: continue; /* nop */
        case 0x01: {         /* set_loc */
            uintptr_t to;
            if (!encoded(c, ci->fde_enc, 0, &to))
                return false;
            if (to > target)
                return true;
            loc = to;
            continue;
        }
        case 0x02: delta = fixed(c, 1); goto advance;
        case 0x03: delta = fixed(c, 2); goto advance;
        case 0x04: delta = fixed(c, 4); goto advance;
        case 0x05: reg = uleb(c); set_reg(r, reg, AT, (int64_t)uleb(c) * ci->data_align); continue;
        case 0x06:
            reg = uleb(c);
            if (reg == REG_BP)
                r->bp = init->bp;
            else if (reg == REG_RA)
                r->ra = init->ra;
            continue;
        case 0x07: set_reg(r, uleb(c), UNDEF, 0); continue;
        case 0x08: set_reg(r, uleb(c), SAME, 0); continue;
        case 0x09: reg = uleb(c); uleb(c); set_reg(r, reg, BAD, 0); continue; /* in another register */
        case 0x0a:
            if (depth == STATES)
                return false;
            saved[depth++] = *r;
            continue;
        case 0x0b:
            if (!depth)
                return false;
            *r = saved[--depth];
            continue;
        case 0x0c: r->cfa_reg = (unsigned)uleb(c); r->cfa_off = (int64_t)uleb(c); r->cfa_bad = false; continue;
        case 0x0d: r->cfa_reg = (unsigned)uleb(c); r->cfa_bad = false; continue;
        case 0x0e: r->cfa_off = (int64_t)uleb(c); continue;
        case 0x0f: skip(c, uleb(c)); r->cfa_bad = true; continue; /* an expression */
        case 0x10:
        case 0x16: reg = uleb(c); skip(c, uleb(c)); set_reg(r, reg, BAD, 0); continue;
        case 0x11: reg = uleb(c); set_reg(r, reg, AT, sleb(c) * ci->data_align); continue;
        case 0x12:
            r->cfa_reg = (unsigned)uleb(c);
            r->cfa_off = sleb(c) * ci->data_align;
            r->cfa_bad = false;
            continue;
        case 0x13: r->cfa_off = sleb(c) * ci->data_align; continue;
        case 0x14: reg = uleb(c); uleb(c); set_reg(r, reg, BAD, 0); continue; /* a value, not a place */
        case 0x15: reg = uleb(c); sleb(c); set_reg(r, reg, BAD, 0); continue;
        case 0x2e: uleb(c); continue; /* GNU_args_size */
        case 0x2f: reg = uleb(c); off = -(int64_t)uleb(c) * ci->data_align; set_reg(r, reg, AT, off); continue;
        default: return false;
        }
    advance:
        loc += delta * ci->code_align;
        if (loc > target)
            return true;
    }
    return !c->bad;
}

/* The rule at pc: false if beyond us. */
static bool rule_find(uintptr_t pc, struct rule *r)
{
    struct dl_find_object fo;
    if (!find_object || find_object((void *)pc, &fo) != 0 || !fo.dlfo_eh_frame)
        return false;
    const uint8_t *fde = fde_find(fo.dlfo_eh_frame, pc);
    if (!fde)
        return false;
    uint32_t len, cie_off;
    memcpy(&len, fde, 4);
    memcpy(&cie_off, fde + 4, 4);
    if (len == 0 || len == 0xffffffffu || !cie_off)
        return false;
    struct cie ci;
    if (!cie_read(fde + 4 - cie_off, &ci))
        return false;
    struct cursor c = { fde + 8, fde + 4 + len, false };
    uintptr_t begin, range;
    if (!encoded(&c, ci.fde_enc, 0, &begin) || !encoded(&c, ci.fde_enc & 0x0f, 0, &range))
        return false;
    if (pc < begin || pc - begin >= range)
        return false;
    if (ci.z)
        skip(&c, uleb(&c));
    *r = (struct rule){ .cfa_reg = REG_SP, .bp = { SAME, 0 }, .ra = { SAME, 0 } };
    struct cursor cc = { ci.insn, ci.end, false };
    if (!run(&cc, &ci, begin, pc, r, r))
        return false;
    struct rule init = *r;
    return run(&c, &ci, begin, pc, r, &init) && !r->cfa_bad && (r->cfa_reg == REG_SP || r->cfa_reg == REG_BP) &&
           r->bp.how != BAD && r->bp.how != UNDEF && (r->ra.how == UNDEF || (r->ra.how == AT && r->ra.off == -8));
}

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

static void unpack(uint64_t w, struct rule *r)
{
    r->cfa_reg = w >> HI_BITS & 1 ? REG_BP : REG_SP;
    r->cfa_off = (int64_t)(w >> 37 & (((uint64_t)1 << OFF_BITS) - 1)) * 8;
    uint64_t k = w >> 58 & 31;
    r->bp = k ? (struct reg_rule){ AT, -(int64_t)k * 8 } : (struct reg_rule){ SAME, 0 };
    r->ra = w >> 63 ? (struct reg_rule){ UNDEF, 0 } : (struct reg_rule){ AT, -8 };
}

static size_t set_of(uintptr_t pc) { return (pc ^ pc >> SET_BITS ^ pc >> (2 * SET_BITS)) & (CACHE_SETS - 1); }

/* The two slots of a set: a third pc replaces the second one's entry. */
static bool rule_at(uintptr_t pc, struct rule *r)
{
    _Atomic uint64_t *pair = cache[set_of(pc)];
    for (int i = 0; i < 2; i++) {
        uint64_t w = atomic_load_explicit(&pair[i], memory_order_relaxed);
        if (w && (w & HI_MASK) == pc >> SET_BITS && !(pc >> PC_BITS)) {
            count_hits++;
            unpack(w, r);
            return true;
        }
    }
    count_misses++;
    if (!rule_find(pc, r))
        return false;
    uint64_t w = pack(pc, r);
    if (w) /* the empty slot, else the second */
        atomic_store_explicit(&pair[atomic_load_explicit(&pair[0], memory_order_relaxed) != 0], w,
                              memory_order_relaxed);
    return true;
}

/* Weak: a glibc without it leaves it null (and this unwinder off).
 * Not dlsym: its first call pulls 64 KiB of libc's code into memory.
 * (A build on glibc 2.35 or later runs on those: it needs GLIBC_2.34
 * already; on an older one the header lacks it and this file is off.) */
#pragma weak _dl_find_object

void prof_unwind_init(void) { find_object = _dl_find_object; }

/* Is pc glibc's signal trampoline (__restore_rt: mov $15, %rax;
 * syscall), the return address the kernel gives a signal handler? Its
 * caller's registers are then in the ucontext at the handler's CFA. */
static bool sigreturn_at(uintptr_t pc)
{
    static const uint8_t code[9] = { 0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05 };
    return !memcmp((const void *)pc, code, sizeof code);
}

sl_noinline int prof_unwind(uintptr_t *frames, uint32_t cap)
{
    if (!find_object)
        return -1;
    uintptr_t pc, sp, bp;
    __asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2" : "=r"(pc), "=r"(sp), "=r"(bp));
    uintptr_t top = sp, lookup = pc; /* this frame's pc is not a return address: no - 1 */
    uint32_t n = 0;
    while (n < cap) {
        struct rule r;
        if (!rule_at(lookup, &r))
            break; /* beyond us: the stack so far */
        if (r.ra.how == UNDEF)
            break; /* the outermost frame */
        uintptr_t cfa = (r.cfa_reg == REG_SP ? sp : bp) + (uintptr_t)r.cfa_off;
        if (cfa <= sp || cfa - top > SPAN || cfa & 7)
            break;
        uintptr_t ra = *(const uintptr_t *)(cfa - 8);
        if (r.bp.how == AT)
            bp = *(const uintptr_t *)(cfa + (uintptr_t)r.bp.off);
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
