/* stack.c — stack capture for the profile's samples.
 *
 * Three ways, each allocation-free once warmed, the first that can run:
 *   - sluice's own unwinder (unwind.c): the call frame information, each
 *     return address's rule cached; x86-64 with glibc 2.35 or later. Then
 *     libgcc_s is never loaded (its pages and the loader's cost ~400 KiB
 *     of resident memory).
 *   - glibc's backtrace(), over libgcc_s's _Unwind_Backtrace. backtrace
 *     loads libgcc_s on its first call, with malloc: prof_stack_init
 *     calls it once from the library's constructor, before any sample.
 *   - frame pointers, where neither could be loaded (a static program
 *     without libgcc_eh): the rbp chain, each frame pointer checked to
 *     lie above the last one, within 8 MiB of the stack pointer and
 *     aligned, so a chain through code built without frame pointers ends
 *     instead of faulting.
 * Each stops at PROF_DEPTH frames (table.h).
 *
 * Sluice's own frames (the sampling path, the malloc entry point) are left
 * out: in the shared library they are the addresses of its own executable
 * segment, found once with dladdr and dl_iterate_phdr. Linked statically,
 * sluice's code is the program's: then nothing is cut here, and the
 * profile names sluice's functions for pprof to drop (pprof.c).
 */
#define _GNU_SOURCE
#include "stack.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>

#include "table.h"
#include "unwind.h"

#define FP_SPAN ((uintptr_t)8 << 20) /* a frame pointer chain stays within this of the stack pointer */

static bool use_unwinder;
static uintptr_t own_lo, own_hi; /* sluice's executable segment; empty if unknown */

bool prof_stack_in_sluice(uintptr_t a) { return a >= own_lo && a < own_hi; }

struct own_find {
    uintptr_t base;
};

static int own_segment(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct own_find *f = arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && f->base >= lo - ph->p_vaddr &&
            (uintptr_t)&own_segment >= lo && (uintptr_t)&own_segment < lo + ph->p_memsz) {
            if (!info->dlpi_name || !info->dlpi_name[0])
                return 1; /* the main program: sluice is linked in statically */
            own_lo = lo;
            own_hi = lo + ph->p_memsz;
            return 1;
        }
    }
    return 0;
}

void prof_stack_init(void)
{
    prof_unwind_init();
    uintptr_t probe[1];
    if (prof_unwind(probe, 1) < 0) { /* glibc's then: loaded now, as it allocates on its first use */
        void *warm[8];
        use_unwinder = backtrace(warm, 8) > 0;
    }
    Dl_info info;
    if (dladdr((void *)&own_segment, &info) && info.dli_fbase) {
        struct own_find f = { (uintptr_t)info.dli_fbase };
        dl_iterate_phdr(own_segment, &f);
    }
}

/* The rbp chain from this function's frame (see the top). */
static sl_noinline uint32_t fp_walk(uintptr_t *frames, uint32_t cap)
{
    uintptr_t sp = (uintptr_t)__builtin_frame_address(0), lo = sp, hi = sp + FP_SPAN;
    const uintptr_t *fp = __builtin_frame_address(0);
    uint32_t n = 0;
    while (n < cap && (uintptr_t)fp >= lo && (uintptr_t)fp + 2 * sizeof(uintptr_t) <= hi &&
           !((uintptr_t)fp & (sizeof(uintptr_t) - 1))) {
        uintptr_t ret = fp[1];
        if (!ret)
            break;
        frames[n++] = ret;
        const uintptr_t *next = (const uintptr_t *)fp[0];
        if (next <= fp)
            break;
        lo = (uintptr_t)fp + 2 * sizeof(uintptr_t);
        fp = next;
    }
    return n;
}

uint32_t prof_stack(uintptr_t *frames, uint32_t cap)
{
    uintptr_t raw[PROF_DEPTH + 16];
    uint32_t want = cap + 16 < PROF_DEPTH + 16 ? cap + 16 : PROF_DEPTH + 16, n;
    int own = prof_unwind(raw, want);
    if (own >= 0)
        n = (uint32_t)own;
    else if (use_unwinder)
        n = (uint32_t)backtrace((void **)raw, (int)want);
    else
        n = fp_walk(raw, want);
    /* leave out sluice's frames: the innermost run of them (and what is
     * inside it: the unwinder's own); a callback into the program from
     * sluice (an object cache's constructor) keeps its callers */
    uint32_t first = 0;
    while (first < n && first < 4 && !prof_stack_in_sluice(raw[first]))
        first++;
    if (first == 4 || first == n)
        first = 0; /* no sluice frame near the top: sluice's code is not known */
    while (first < n && prof_stack_in_sluice(raw[first]))
        first++;
    uint32_t k = 0;
    for (uint32_t i = first; i < n && k < cap; i++)
        frames[k++] = raw[i];
    return k;
}
