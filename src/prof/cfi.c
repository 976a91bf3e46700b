/* cfi.c — the call frame information reader (cfi.h): a frame's rule,
 * worked out from its pc. The module's unwind tables are found with
 * _dl_find_object (glibc 2.35; no lock, no allocation; a weak
 * reference), the FDE in .eh_frame_hdr's sorted table, and the CIE's and
 * FDE's instructions run up to the pc. A rule beyond it (a CFA from
 * another register or an expression, as in stack-realigning prologues; a
 * 64-bit .eh_frame; a pointer encoding it does not read; code without
 * tables) is refused: never a wrong rule.
 */
#define _GNU_SOURCE
#include "cfi.h"

#include <string.h>

#ifdef CFI_READER

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
bool cfi_rule_find(uintptr_t pc, struct rule *r)
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

/* Weak: a glibc without it leaves it null (and this unwinder off).
 * Not dlsym: its first call pulls 64 KiB of libc's code into memory.
 * (A build on glibc 2.35 or later runs on those: it needs GLIBC_2.34
 * already; on an older one the header lacks it and this file is off.) */
#pragma weak _dl_find_object

void cfi_init(void) { find_object = _dl_find_object; }
bool cfi_on(void) { return find_object != NULL; }

#endif
