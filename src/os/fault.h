/* fault.h — fault injection for the os layer, the user-space twin of the
 * kernel's failslab / fail_page_alloc. Test builds only: the library is
 * compiled with SL_FAULT_INJECT=1 into its own test archive
 * (libsluice_fault.a); the release libraries are built without this file
 * and os.c's checks fold away (config_fault is a constant false), so no
 * path of theirs has any trace of it.
 *
 * SLUICE_FAULT (read at the first system call a test build makes) or
 * fault_config() set which calls fail and when:
 *   SLUICE_FAULT=OPS:RULE[:seed=S]
 *   OPS   mmap, mremap, madvise, mprotect, or several joined by ','
 *         ("all": the four); or collapse: MADV_COLLAPSE alone fails
 *         with EINVAL, as on a kernel older than 6.1; or open: opening
 *         a file to read (/proc, the cgroup files) fails with EACCES,
 *         as in a sandbox
 *   RULE  nth=N     only the Nth call (counted per kind, from 1)
 *         every=N   every Nth call
 *         after=N   every call after the first N (the address space is gone)
 *         p=F       each call with probability F (0..1) from a seeded
 *                   generator (seed=S, default 1): the same seed fails the
 *                   same calls in a single-threaded run
 * A failed mmap and mremap return MAP_FAILED with ENOMEM, a failed madvise
 * -1 with EAGAIN, a failed mprotect -1 with ENOMEM (as the kernel does when
 * it cannot allocate), before the real call is made.
 */
#ifndef SL_FAULT_H
#define SL_FAULT_H

#include "../base/common.h"

#ifndef SL_FAULT_INJECT
#define SL_FAULT_INJECT 0
#endif
static const bool config_fault = SL_FAULT_INJECT;

enum fault_op { FAULT_MMAP, FAULT_MREMAP, FAULT_MADVISE, FAULT_MPROTECT, FAULT_COLLAPSE, FAULT_OPEN, FAULT_NOPS };

#if SL_FAULT_INJECT
/* Should this call of op fail? Counts the call. */
bool fault_hit(enum fault_op op);
/* Replace the rule (a SLUICE_FAULT string; NULL or "" turns injection off). */
void fault_config(const char *spec);
/* Calls of op seen and failed since the last fault_config. */
uint64_t fault_calls(enum fault_op op);
uint64_t fault_failed(enum fault_op op);
#else
sl_inline bool fault_hit(enum fault_op op)
{
    (void)op;
    return false;
}
#endif

#endif
