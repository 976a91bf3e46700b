/* zero.h — allocations of 0 bytes: unique addresses that no access may use.
 *
 * malloc(0), calloc(n, 0) and realloc(NULL, 0) return a 16-byte slot in a
 * zone: one 2 MiB granule reserved PROT_NONE, so a read or a write through
 * the pointer, before or after its free, faults at once. Nothing is behind
 * a slot, so it costs address space only.
 *
 * A zone's pagemap entry is its descriptor | PM_ZERO; the descriptor holds
 * the live bit of every slot, so a double free, or a free of a zone address
 * that was never handed out, is reported like any other bad free.
 * Slots are handed out next-fit from a cursor that goes round all zones, so
 * a freed slot comes back only after every other free slot has: a stale
 * zero-size pointer meets a fault, not someone else's live zero-size block.
 * Aligned requests of 0 bytes (aligned_alloc(a, 0) ...) are not zone slots:
 * they get a block of 1 byte, as before.
 *
 * Zones are made as needed and kept (each 2 MiB of address space and a
 * 16 KiB descriptor from meta). One leaf lock, zero_lock (-> meta lock).
 */
#ifndef SL_ZERO_H
#define SL_ZERO_H

#include "../base/common.h"

struct zero_zone;

void *zero_alloc(void); /* NULL + ENOMEM */
/* Free slot p of zone z; op names the caller in a report of a bad pointer. */
void zero_free(struct zero_zone *z, void *p, const char *op);
/* Abort with a report unless p is a live slot of z. */
void zero_check(struct zero_zone *z, const void *p, const char *op);
void zero_check_all(void);   /* sl_check's part */
struct sl_lock *zero_fork_lock(void);

#endif
