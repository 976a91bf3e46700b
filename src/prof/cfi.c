/* cfi.c — the call frame information reader (cfi.h): a frame's rule,
 * worked out from its pc. The module's unwind tables are found with
 * _dl_find_object (glibc 2.35; no lock, no allocation; a weak
 * reference), the FDE in .eh_frame_hdr's sorted table, and the CIE's and
 * FDE's instructions run up to the pc. A rule beyond it (a CFA from
 * another register or an expression, as in stack-realigning prologues; a
 * 64-bit .eh_frame; a pointer encoding it does not read; code without
 * tables; an entry longer than the buffer it is read into) is refused:
 * never a wrong rule.
 *
 * The tables are read from the module's file (pread, os_file_*), not
 * through its mapping: a read through the mapping faults the page in,
 * and the kernel maps up to 64 KiB of the file around each fault, all of
 * it then counted in the program's resident set (128 KiB of libc's
 * .eh_frame for a small program's first stacks). The file is used only
 * if its first bytes (ELF header, program headers) read as the mapping's
 * do; otherwise (a file replaced since it was loaded, the vDSO, a file
 * that cannot be opened) the mapping is read.
 */
#define _GNU_SOURCE
#include "cfi.h"

#include <elf.h>
#include <link.h>
#include <string.h>

#include "../os/os.h"

#ifdef CFI_READER

static int (*find_object)(void *, struct dl_find_object *);

/* ---- reading .eh_frame ---- */

struct cursor {
    const uint8_t *p, *end;
    uintptr_t shift; /* the module's address of p is p + shift (read into a buffer) */
    bool bad;
    bool cut;        /* end is the buffer's, not the entry's: running off it is beyond us */
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
    uintptr_t at = (uintptr_t)c->p + c->shift;
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

/* ---- the module's bytes (see the top) ---- */

#define FDE_BYTES  1024 /* an FDE's bytes read at most; also the file's first bytes compared */
#define CIE_BYTES  256

struct module {
    int fd;                   /* -1: read the mapping */
    uintptr_t bias;           /* the load address (l_addr) */
    const ElfW(Phdr) *ph;     /* the program headers, in the mapping's first page */
    unsigned phnum;
};

/* n bytes at the module's address a into buf; the count read (short at
 * the end of a segment's file bytes), 0 if none. */
static size_t mod_read(const struct module *m, uintptr_t a, void *buf, size_t n)
{
    if (m->fd < 0) {
        memcpy(buf, (const void *)a, n);
        return n;
    }
    uintptr_t v = a - m->bias;
    for (unsigned i = 0; i < m->phnum; i++) {
        const ElfW(Phdr) *ph = &m->ph[i];
        if (ph->p_type != PT_LOAD || v < ph->p_vaddr || v - ph->p_vaddr >= ph->p_filesz)
            continue;
        uint64_t left = ph->p_filesz - (v - ph->p_vaddr);
        long got = os_file_pread(m->fd, buf, n < left ? n : (size_t)left, ph->p_offset + (v - ph->p_vaddr));
        return got > 0 ? (size_t)got : 0;
    }
    return 0;
}

/* The module of fo: its file if that reads as its mapping (buf: room for
 * FDE_BYTES), else its mapping. */
static void mod_open(const struct dl_find_object *fo, struct module *m, uint8_t *buf)
{
    const ElfW(Ehdr) *eh = fo->dlfo_map_start;
    *m = (struct module){ .fd = -1 };
    const char *name = fo->dlfo_link_map ? fo->dlfo_link_map->l_name : NULL;
    if (!name || memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_phentsize != sizeof(ElfW(Phdr)) ||
        eh->e_phoff + (size_t)eh->e_phnum * sizeof(ElfW(Phdr)) > FDE_BYTES)
        return;
    int fd = os_file_open(name[0] ? name : "/proc/self/exe");
    if (fd < 0)
        return;
    size_t head = eh->e_phoff + (size_t)eh->e_phnum * sizeof(ElfW(Phdr));
    if (os_file_pread(fd, buf, head, 0) != (long)head || memcmp(buf, eh, head)) {
        os_file_close(fd);
        return;
    }
    m->fd = fd;
    m->bias = fo->dlfo_link_map->l_addr;
    m->ph = (const ElfW(Phdr) *)((const uint8_t *)eh + eh->e_phoff);
    m->phnum = eh->e_phnum;
}

/* The entry (CIE or FDE) at the module's address at into buf, at most
 * cap bytes of it: its length word read first, so that a read through
 * the mapping stays inside the entry. Its full length (length word
 * included), or 0 if it is none (a terminator, a 64-bit entry, no read). */
static size_t entry_read(const struct module *m, uintptr_t at, uint8_t *buf, size_t cap, size_t *got)
{
    uint32_t len;
    *got = 0;
    if (mod_read(m, at, &len, 4) != 4 || len == 0 || len == 0xffffffffu)
        return 0;
    size_t want = (size_t)len + 4 < cap ? (size_t)len + 4 : cap;
    *got = mod_read(m, at, buf, want);
    return *got < want || *got < 8 ? 0 : (size_t)len + 4;
}

static void mod_close(struct module *m)
{
    if (m->fd >= 0)
        os_file_close(m->fd);
}

/* The FDE covering pc in the module whose .eh_frame_hdr is at hdr:
 * its address; 0 if none (or the table is not the sorted kind). */
static uintptr_t fde_find(const struct module *m, uintptr_t hdr, uintptr_t pc)
{
    uint8_t h[4 + 16];
    if (mod_read(m, hdr, h, sizeof h) != sizeof h)
        return 0;
    struct cursor c = { h + 4, h + sizeof h, hdr - (uintptr_t)h, false, false };
    uintptr_t frame, count;
    if (h[0] != 1 || h[3] != 0x3b || !encoded(&c, h[1], hdr, &frame) || !encoded(&c, h[2], hdr, &count) || !count)
        return 0;
    uintptr_t table = (uintptr_t)c.p + c.shift; /* pairs: start, FDE, relative to hdr */
    int32_t e[2];
    size_t lo = 0, hi = count; /* the last entry whose start is <= pc */
    if (mod_read(m, table, e, sizeof e) != sizeof e || pc < hdr + (intptr_t)e[0])
        return 0;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (mod_read(m, table + 8 * mid, e, sizeof e) != sizeof e)
            return 0;
        if (hdr + (intptr_t)e[0] <= pc)
            lo = mid;
        else
            hi = mid;
    }
    if (mod_read(m, table + 8 * lo, e, sizeof e) != sizeof e)
        return 0;
    return hdr + (intptr_t)e[1];
}

struct cie {
    uint64_t code_align;
    int64_t data_align;
    uint8_t fde_enc;
    bool z;
    const uint8_t *insn, *end; /* in the caller's buffer */
    bool cut;                  /* the buffer holds only part of it */
};

/* The CIE at the module's address at, read into buf (CIE_BYTES). */
static bool cie_read(const struct module *m, uintptr_t at, uint8_t *buf, struct cie *ci)
{
    size_t got, whole = entry_read(m, at, buf, CIE_BYTES, &got);
    if (!whole)
        return false;
    bool cut = whole > got;
    struct cursor c = { buf + 4, buf + got, at - (uintptr_t)buf, false, cut };
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
    ci->cut = cut;
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
    return !c->bad && !c->cut; /* ran off a buffer that held part of the entry: beyond us */
}

/* The rule at pc from the module's open tables. */
static bool rule_find(const struct module *m, const struct dl_find_object *fo, uintptr_t pc, uint8_t *buf,
                      struct rule *r)
{
    uintptr_t fde = fde_find(m, (uintptr_t)fo->dlfo_eh_frame, pc);
    uint8_t cbuf[CIE_BYTES];
    size_t got, whole = fde ? entry_read(m, fde, buf, FDE_BYTES, &got) : 0;
    uint32_t cie_off;
    if (!whole)
        return false;
    memcpy(&cie_off, buf + 4, 4);
    if (!cie_off)
        return false;
    struct cie ci;
    if (!cie_read(m, fde + 4 - cie_off, cbuf, &ci))
        return false;
    bool cut = whole > got;
    struct cursor c = { buf + 8, buf + got, fde - (uintptr_t)buf, false, cut };
    uintptr_t begin, range;
    if (!encoded(&c, ci.fde_enc, 0, &begin) || !encoded(&c, ci.fde_enc & 0x0f, 0, &range))
        return false;
    if (pc < begin || pc - begin >= range)
        return false;
    if (ci.z)
        skip(&c, uleb(&c));
    *r = (struct rule){ .cfa_reg = REG_SP, .bp = { SAME, 0 }, .ra = { SAME, 0 } };
    struct cursor cc = { ci.insn, ci.end, 0, false, ci.cut };
    if (!run(&cc, &ci, begin, pc, r, r))
        return false;
    struct rule init = *r;
    return run(&c, &ci, begin, pc, r, &init) && !r->cfa_bad && (r->cfa_reg == REG_SP || r->cfa_reg == REG_BP) &&
           r->bp.how != BAD && r->bp.how != UNDEF && (r->ra.how == UNDEF || (r->ra.how == AT && r->ra.off == -8));
}

/* The rule at pc: false if beyond us. */
bool cfi_rule_find(uintptr_t pc, struct rule *r)
{
    struct dl_find_object fo;
    if (!find_object || find_object((void *)pc, &fo) != 0 || !fo.dlfo_eh_frame)
        return false;
    struct module m;
    uint8_t buf[FDE_BYTES]; /* the file's first bytes, then the FDE */
    mod_open(&fo, &m, buf);
    bool ok = rule_find(&m, &fo, pc, buf, r);
    mod_close(&m);
    return ok;
}

/* Weak: a glibc without it leaves it null (and this unwinder off).
 * Not dlsym: its first call pulls 64 KiB of libc's code into memory.
 * (A build on glibc 2.35 or later runs on those: it needs GLIBC_2.34
 * already; on an older one the header lacks it and this file is off.) */
#pragma weak _dl_find_object

void cfi_init(void) { find_object = _dl_find_object; }
bool cfi_on(void) { return find_object != NULL; }

#endif
