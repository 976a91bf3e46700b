/* options.h — every SLUICE_* environment option, in one table.
 *
 * Read once, at the first allocation or at library load, whichever comes
 * first; parsing uses no allocation (getenv and a hand-written number
 * parser). A bad value, an out-of-range one or an unknown SLUICE_ name
 * gets one line on stderr and the default (options.c); yes-or-no options
 * take 1/0, on/off, true/false, yes/no; SLUICE_OPTIONS="name=value,..."
 * sets any of them at once. The README's option table is this list.
 *
 *   X(field, environment name, default, parser, run-time (1: sl_ctl may
 *     change it while the program runs), meaning)
 */
#ifndef SL_OPTIONS_H
#define SL_OPTIONS_H

#include "../base/common.h"

#define SL_OPTION_LIST(X)                                                                         \
    X(stats, "SLUICE_STATS", STATS_OFF, parse_stats, 0,                                              \
      "1: print statistics to stderr at exit; json: print them as one JSON object")               \
    X(publish, "SLUICE_PUBLISH", 0, parse_publish, 0,                                                \
      "a file path (%p: the process id): the reclaimer writes the statistics there as JSON every " \
      "tick, and the final ones at exit (the sluice command's timeline; turns the reclaimer on)")   \
    X(check, "SLUICE_CHECK", 0, parse_bool, 0,                                                         \
      "1 (or on, true, yes): checked mode: canaries, zero fill, quarantine, guard pages (api/checked.c)")             \
    X(purge, "SLUICE_PURGE", PURGE_FREE, parse_purge, 1, "free | dontneed | off: how free memory goes back") \
    X(dirty_decay_ms, "SLUICE_DIRTY_DECAY_MS", 1000, parse_long, 1,                                    \
      "ms freed memory stays dirty (resident) before it is purged; 0: at once")                   \
    X(lazy_decay_ms, "SLUICE_LAZY_DECAY_MS", 10000, parse_long, 1,                                     \
      "ms lazily freed (MADV_FREE) memory stays lazy before it is made clean")                     \
    X(reclaimer, "SLUICE_RECLAIMER", BG_AUTO, parse_reclaimer, 0,                               \
      "auto | on | off: the background reclaimer thread starts once the program has threads of its "  \
      "own (auto), whenever there is memory to decay (on), or never (off)")                      \
    X(heap_limit, "SLUICE_HEAP_LIMIT", 0, parse_bytes, 1,                                             \
      "bytes of pageblocks (K, M, G, T suffixes) past which a type short of room takes a piece of " \
      "another type's block before a new one is mapped; default the cgroup's memory.high or "      \
      "memory.max, else none")                                                                      \
    X(boost, "SLUICE_BOOST", 1, parse_bool, 1,                                                        \
      "1: under a heap budget, an external fragmentation event boosts the watermarks and wakes the " \
      "reclaimer to win whole free pageblocks back (reclaim/boost.c); 0: no boost (the baseline)")   \
    X(antifrag, "SLUICE_ANTIFRAG", 1, parse_bool, 0,                                                  \
      "1: pageblocks are grouped by type (SLAB, RECLAIM, RUN); 0: one type for all")               \
    X(thp, "SLUICE_THP", THP_COLLAPSE, parse_thp, 1,                                                  \
      "collapse | madvise | never: dense, long-lived pageblocks are collapsed into transparent "   \
      "hugepages in the background (collapse); or every pageblock is MADV_HUGEPAGE from the start " \
      "(madvise); or neither")                                                                     \
    X(teardown, "SLUICE_TEARDOWN", BG_AUTO, parse_teardown, 0,                                          \
      "auto | on | off (or 1 | 0): free of a big range returns at once and teardown workers release " \
      "it, once the program has threads of its own (auto), always (on), or never: the caller does")  \
    X(teardown_min, "SLUICE_TEARDOWN_MIN", 64L << 20, parse_bytes, 1,                                 \
      "bytes (K, M, G suffixes): smaller ranges are released by the caller")                        \
    X(teardown_workers, "SLUICE_TEARDOWN_WORKERS", -1, parse_workers, 0,                                   \
      "most teardown workers; default the online CPUs, at most 8; 0: none, the queue is released " \
      "by freeing threads over the bound, by failed allocations and by sl_flush")                   \
    X(teardown_max_pending, "SLUICE_TEARDOWN_MAX_PENDING", 0, parse_bytes, 1,                           \
      "bytes queued at most before a freeing thread releases a batch itself; default 1/8 of RAM")  \
    X(teardown_idle_ms, "SLUICE_TEARDOWN_IDLE_MS", 30000, parse_long, 1,                                \
      "ms an idle teardown worker waits for work before it exits")                                 \
    X(prof, "SLUICE_PROF", 0, parse_prof_path, 0,                                                   \
      "a file path (%p: the process id): sample allocations and write the live-memory profile "   \
      "there at exit, in pprof's format (go tool pprof reads it; src/prof)")                       \
    X(prof_sample, "SLUICE_PROF_SAMPLE", 512L << 10, parse_bytes, 0,                                \
      "mean bytes allocated between two samples (K, M, G suffixes); 1: every allocation, exact")   \
    X(prof_gdump, "SLUICE_PROF_GDUMP", 0, parse_bool, 0,                                            \
      "1: with SLUICE_PROF, also write PATH.N each time the sampled live bytes reach a new high "  \
      "(an eighth above the last one written)")                                                     \
    X(leaks, "SLUICE_LEAKS", 0, parse_bool, 0,                                                      \
      "1: sample allocations and report the sites still holding memory at exit on stderr, biggest " \
      "first (on in checked mode)")

/* SLUICE_STATS: nothing, the text summary, or one JSON object (sl_stats_json). */
enum stats_mode { STATS_OFF, STATS_TEXT, STATS_JSON };
/* SLUICE_PURGE: MADV_FREE then, after the lazy decay, MADV_DONTNEED; or
 * MADV_DONTNEED at once; or nothing (free pageblocks are still unmapped). */
enum purge_mode { PURGE_FREE, PURGE_DONTNEED, PURGE_OFF };
/* SLUICE_RECLAIMER and SLUICE_TEARDOWN: a drop-in malloc must not make a
 * single-threaded program multi-threaded, so by default a background
 * thread waits for the program's own second thread; until then the
 * program's own calls do the work (slow paths run the decay, a free
 * releases its range itself). */
enum bg_mode { BG_OFF, BG_AUTO, BG_ON };
/* SLUICE_THP (page/hugify.c). */
enum thp_mode { THP_NEVER, THP_COLLAPSE, THP_MADVISE };

struct sl_options {
#define X(field, env, def, parse, rw, text) long field;
    SL_OPTION_LIST(X)
#undef X
};

extern struct sl_options sl_opt;
extern char sl_publish_path[256]; /* SLUICE_PUBLISH's value when sl_opt.publish */
extern char sl_prof_path[256];    /* SLUICE_PROF's value when sl_opt.prof */
void options_init(void); /* idempotent */
/* sl_ctl's part (api/ctl.c), by the name after SLUICE_ in any case: the
 * i-th option's name (NULL past the end); an option's value; a new value
 * for one that may change at run time: 0, or ENOENT (no such option),
 * EPERM (fixed at start), EINVAL (out of its range). */
const char *options_name(size_t i);
int options_get(const char *name, long *v);
int options_set(const char *name, long v);
bool options_runtime(const char *name); /* may it change at run time? */

#endif
