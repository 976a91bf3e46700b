/* resident.h — how much of sluice's own memory is resident (resident.c). */
#ifndef SL_RESIDENT_H
#define SL_RESIDENT_H

#include "../base/common.h"

/* Bytes resident in every granule of the pagemap: pageblocks, huge
 * mappings and zero-size zones. */
uint64_t resident_bytes(void);

#endif
