/* meta.h — memory for sluice's own records (thread heaps, huge descriptors,
 * cache descriptors). No layer allocates with malloc; they come here.
 *
 * A bump arena carved from 2 MiB os mappings, with one free list per record
 * size so records are reused. Records are zeroed on return, 64-byte aligned,
 * and never given back to the OS (they are few and small). One leaf lock.
 */
#ifndef SL_META_H
#define SL_META_H

#include "../base/common.h"

void *meta_alloc(size_t size);   /* NULL + ENOMEM */
void  meta_free(void *p, size_t size);
size_t meta_bytes(void);         /* mapped for records, for the stats */
struct sl_lock *meta_fork_lock(void); /* for fork's handlers */

#endif
