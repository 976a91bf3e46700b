/* prof.h — sampled heap profiling (jemalloc's prof, tcmalloc's sampling):
 * the interface the layers above use.
 *
 * Off unless SLUICE_PROF (a profile at exit), SLUICE_LEAKS or SLUICE_CHECK
 * (a leak report at exit) asks for it; the choice is made once, in the
 * library's constructor (prof_init). Off, nothing of this runs: a small
 * malloc's count of its class (slab/heap.h, struct heap: mag_pops and
 * slab_pops), which it keeps anyway, never reaches 0, and every other
 * allocation tests prof_on on its way out of line.
 *
 * On: a small malloc's count is biased to reach 0 at its class's next
 * sample point, in mallocs (prof_class_tick draws it), and stays inline
 * until it does; every other allocation counts its bytes
 * down a per-thread countdown (prof_tick). Both are the same Poisson
 * process over bytes (sample.h). One that reaches a sample point is *sampled*:
 * the api layer gives it memory whose free path checks a mark (a small
 * malloc is served by a page run of its own, so its free is a run's free,
 * which checks run.sampled; a huge mapping has huge.sampled; an object
 * cache's slab has its head's prof byte, page_hdr.prof), records it
 * (prof_record: its stack, its size, its cache) and the free of a marked
 * block forgets it (prof_free). The tables (table.c) give the profile
 * (pprof.c) and the leak report (leaks.c).
 *
 * Safe from a signal handler: a thread inside prof_record or prof_free
 * takes no sample (its busy flag) and defers a free of a sampled block to
 * the end of the call it interrupted. Locks: one, the prof lock (rank
 * LOCK_PROF, before every other: nothing of sluice is held when it is
 * taken; meta's lock is taken under it), held across fork by init.c's
 * handlers.
 */
#ifndef SL_PROF_H
#define SL_PROF_H

#include "../base/lock.h"

/* Is profiling on? Set once, in the constructor, before any sampling. */
extern bool prof_on sl_hidden;

/* The per-thread countdown: bytes to the next sample point. 0 in a thread
 * that has not allocated yet (prof_tick_slow draws its first gap). */
extern __thread int64_t prof_left sl_hidden;
/* Count n bytes allocated (prof_on only): false if they reach the next
 * sample point; then prof_tick_slow says whether the allocation is
 * sampled (and draws the next point). */
sl_inline bool prof_count(size_t n)
{
    int64_t left = prof_left - (int64_t)n;
    prof_left = left;
    return left > 0;
}
bool prof_tick_slow(size_t n);
/* Count n bytes allocated (prof_on only): is this allocation sampled? */
sl_inline bool prof_tick(size_t n) { return unlikely(!prof_count(n)) && prof_tick_slow(n); }
/* The small malloc's per-class countdowns (slab/heap.h): a malloc of a
 * class of size bytes reached its countdown's end; first: the countdown
 * was the 1 that arming set, not a drawn one. Sets *left to the mallocs
 * of the class to its next sample point (0, never, if profiling is off)
 * and says whether this malloc is sampled. A geometric countdown per
 * class samples each malloc with the probability the byte countdown
 * gives it (p(size), sample.h), independently: the same Poisson process. */
bool prof_class_tick(size_t size, bool first, uint64_t *left);
/* A bulk allocation of count objects of size bytes: the indices of the
 * objects sampled, ascending, into idx (at most cap); how many. */
size_t prof_tick_bulk(size_t size, size_t count, size_t *idx, size_t cap);

/* Record a sampled block p of size bytes, sampled on counted bytes (its
 * size, or what a realloc added: its weight is size / p(counted)); cache:
 * the object cache's id and name, or 0 and NULL for the malloc family.
 * The stack is taken here. No lock of sluice may be held. */
void prof_record(void *p, size_t size, size_t counted, unsigned cache_id, const char *cache_name);
/* p, a marked block, is being freed: forget its sample (if it has one). */
void prof_free(void *p);
/* A sampled block moved from old to new (realloc by mremap). */
void prof_move(void *old_p, void *new_p);
/* The object cache id is destroyed with its objects: forget their samples. */
void prof_forget_cache(unsigned cache_id);

/* Write the profile (pprof's profile.proto) to path (%p: the process id);
 * NULL: the next of SLUICE_PROF's numbered files (PATH.N). 0 or an errno:
 * ENOTSUP profiling is off, EINVAL no path, or open's and write's. */
int prof_dump(const char *path);

void prof_init(void); /* the constructor: options, the unwinder warmed */
void prof_fini(void); /* exit: the profile and the leak report */
sl_lock *prof_fork_lock(void);

#endif
