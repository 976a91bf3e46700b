/* unwind.h — a sample's stack from the call frame information, with a
 * cache of what it learned per return address (unwind.c). */
#ifndef SL_PROF_UNWIND_H
#define SL_PROF_UNWIND_H

#include "../base/common.h"

/* At start (the library's constructor): find _dl_find_object. */
void prof_unwind_init(void);
/* The return addresses of the caller's stack, innermost first (the first
 * is in prof_unwind's caller): how many, at most cap; or -1 if a frame's
 * rules were beyond this unwinder (no tables for the code, a rule it does
 * not follow, a signal frame) or it is not built for this machine: then
 * the caller asks the full unwinder. Allocates nothing, takes no lock. */
int prof_unwind(uintptr_t *frames, uint32_t cap);

/* The cache's counts since the start (for the unit test): frames whose
 * rule was found in the cache, and frames whose rule was worked out. */
void prof_unwind_counts(uint64_t *hits, uint64_t *misses);

#endif
