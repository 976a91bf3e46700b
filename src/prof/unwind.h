/* unwind.h — a sample's stack from the call frame information, with a
 * cache of what it learned per return address (unwind.c). */
#ifndef SL_PROF_UNWIND_H
#define SL_PROF_UNWIND_H

#include "../base/common.h"

/* At start (the library's constructor): find _dl_find_object. */
void prof_unwind_init(void);
/* The return addresses of the caller's stack, innermost first (the first
 * is in prof_unwind's caller): how many, at most cap; a frame whose rules
 * are beyond this unwinder ends the stack there (unwind.c). -1 if it
 * cannot run here (not x86-64, or a glibc before 2.35): then the caller
 * asks the full unwinder. Allocates nothing, takes no lock. */
int prof_unwind(uintptr_t *frames, uint32_t cap);

/* The cache's counts in the calling thread since it started (for the
 * unit test): frames whose rule was found in the cache, and frames whose
 * rule was worked out. */
void prof_unwind_counts(uint64_t *hits, uint64_t *misses);

#endif
