/* checked.h — SLUICE_CHECK=1, the checked mode (checked.c). The malloc
 * family diverts here only from paths it takes anyway in checked mode: a
 * small request when sl_small_limit is 0, a free or realloc whose pointer
 * has no live bit (checked pointers sit past a front area, never at a
 * block start), a huge free of an interior pointer. */
#ifndef SL_CHECKED_H
#define SL_CHECKED_H

#include "../base/common.h"

/* Set in checked mode; then sl_small_limit (size_class.h) is 0. */
extern bool sl_checked;

void checked_init(void); /* at load, after the options: sets the two above */
void *checked_alloc(size_t n, size_t align); /* always zeroed */
void checked_free(void *p);
void checked_flush(void); /* release the whole quarantine (sl_purge) */
void *checked_realloc(void *p, size_t n);
size_t checked_usable(const void *p, const char *op);
void checked_free_sized(void *p, size_t size);
struct sl_lock *checked_fork_lock(void);

/* malloc.c: under memcheck, the names valgrind may have left to sluice
 * call the ones it replaces (malloc.c). */
bool memcheck_names(void);

/* malloc.c: a block of n bytes aligned to align from the slab or page
 * layer (never a huge mapping, never checked). */
void *malloc_block_raw(size_t n, size_t align);

#endif
