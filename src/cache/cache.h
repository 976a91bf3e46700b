/* cache.h — the object-cache layer's entry points for the bulk layer. */
#ifndef SL_CACHE_H
#define SL_CACHE_H

#include "../slab/slab.h"

/* Free p to cache id, validating everything; reports and aborts on misuse. */
void cache_free_id(unsigned id, void *p);
/* Report that p (live; of slab s, or NULL if not a slab object) was freed
 * to cache id it does not belong to, and abort. */
_Noreturn void cache_wrong_free(unsigned id, struct slab *s, const void *p);

#endif
