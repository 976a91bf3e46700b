/* stack.h — the allocating thread's stack, taken without allocating and
 * without a lock malloc could need (stack.c). */
#ifndef SL_PROF_STACK_H
#define SL_PROF_STACK_H

#include "../base/common.h"

/* At start, before the first sample: load and warm the unwinder (it may
 * allocate on its first use) and find sluice's own code. */
void prof_stack_init(void);
/* The caller's return addresses, innermost first, sluice's own frames
 * left out: how many (at most cap). */
uint32_t prof_stack(uintptr_t *frames, uint32_t cap);
/* Is address a inside sluice's own code (when that is known)? */
bool prof_stack_in_sluice(uintptr_t a);

#endif
