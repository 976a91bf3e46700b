/* options.h — every SLUICE_* environment option, in one table.
 *
 * Read once, at the first allocation or at library load, whichever comes
 * first; parsing uses no allocation (getenv and a hand-written number
 * parser). A bad value, an out-of-range one or an unknown SLUICE_ name
 * gets one line on stderr and the default (options.c); yes-or-no options
 * take 1/0, on/off, true/false, yes/no; SLUICE_OPTIONS="name=value,..."
 * sets any of them at once.
 *
 * The table is also the documentation: tools/doc_tables.py writes the
 * README's option table and the man page sluice_options(7) from it, and
 * the man_pages test fails when the README's copy differs. So `shown` is
 * the default as a user writes it, and `meaning` is the text users read
 * (Markdown: `code`).
 *
 *   X(field, environment name, default, shown, parser, run-time (1: sl_ctl
 *     may change it while the program runs), meaning)
 */
#ifndef SL_OPTIONS_H
#define SL_OPTIONS_H

#include "../base/common.h"

/* SLUICE_CHECK's default: 0, or 1 in a build made for checking (the Rust
 * crate's `check` feature defines SL_CHECK_DEFAULT=1); the environment
 * still decides when it says. */
#ifndef SL_CHECK_DEFAULT
#define SL_CHECK_DEFAULT 0
#endif
_Static_assert(SL_CHECK_DEFAULT == 0 || SL_CHECK_DEFAULT == 1, "SL_CHECK_DEFAULT is 0 or 1");

#define SL_OPTION_LIST(X) \
    X(stats, "SLUICE_STATS", STATS_OFF, "`0`", parse_stats, 0, \
      "`1` (or `text`): at exit, print every counter and gauge to stderr, then a reconciliation " \
      "of the kernel's Rss, LazyFree and AnonHugePages (`/proc/self/smaps_rollup`) with " \
      "sluice's own in-use, dirty, lazy and clean bytes, then the reclaim registry; `json`: the " \
      "same as one JSON object on one line (`sl_stats_json`)") \
    X(publish, "SLUICE_PUBLISH", 0, "unset", parse_publish, 0, \
      "a file path (`%p`: the process id): the process writes its figures there as one JSON " \
      "object (`pid`, `ppid`, `comm`, `peak_rss_bytes`, `final`, the counters a fork child " \
      "`inherited`, and `stats`, `sl_stats_json`'s object) at load, at once in a fork child, " \
      "on every reclaimer tick (at most 100 ms apart) and at exit, each write replacing the " \
      "file whole, one writer at a time; it starts the reclaimer thread even in a " \
      "single-threaded program. `sluice run` sets it, one file per process") \
    X(check, "SLUICE_CHECK", SL_CHECK_DEFAULT, "`0`", parse_bool, 0, \
      "`1`: the checked mode: canaries, zero fill, a quarantine of freed blocks, guard pages. " \
      "Slower and bigger; for finding bugs") \
    X(purge, "SLUICE_PURGE", PURGE_FREE, "`free`", parse_purge, 1, \
      "how free memory goes back: `free`: `MADV_FREE` (lazy), then `MADV_DONTNEED` after the " \
      "lazy decay; `dontneed`: `MADV_DONTNEED` at once; `off`: no `madvise` at all (wholly free " \
      "pageblocks beyond the number kept are still unmapped)") \
    X(purge_batch, "SLUICE_PURGE_BATCH", 1, "`1`", parse_bool, 1, \
      "`1`: a purge's ranges go to the kernel together, one `process_madvise(2)` call on the " \
      "process itself for up to 64 of them (one TLB flush), where the kernel takes it (Linux " \
      "6.15); a kernel or sandbox that answers with an error is asked once, then every range " \
      "gets its own `madvise`. `0`: one `madvise` a range, never `process_madvise` (for a " \
      "seccomp sandbox that kills a process on a system call it does not list)") \
    X(dirty_decay_ms, "SLUICE_DIRTY_DECAY_MS", 1000, "`1000`", parse_long, 1, \
      "milliseconds freed memory stays dirty (resident, reused with no page fault) before it is " \
      "purged; `0`: purged as it is freed") \
    X(lazy_decay_ms, "SLUICE_LAZY_DECAY_MS", 10000, "`10000`", parse_long, 1, \
      "milliseconds lazily freed (`MADV_FREE`) memory stays lazy before it is made clean " \
      "(`MADV_DONTNEED`, or unmapped for a wholly free pageblock or a cached huge mapping)") \
    X(reclaimer, "SLUICE_RECLAIMER", BG_AUTO, "`auto`", parse_reclaimer, 0, \
      "the background reclaimer thread (decay, memory pressure, hugepage collapse, watermark " \
      "boost): `auto` starts it once the program has a thread of its own, so a single-threaded " \
      "program stays single-threaded; `on` (or `1`) whenever there is memory to decay; `off` " \
      "(or `0`) never. Without it the allocation and free slow paths run the decay") \
    X(heap_limit, "SLUICE_HEAP_LIMIT", 0, "the cgroup's limit, else none", parse_bytes, 1, \
      "the heap budget, in bytes of pageblocks (`K`, `M`, `G`, `T` suffixes): past it, a type " \
      "short of room takes a piece of another type's pageblock (an extfrag event) before it " \
      "maps a new one, and maps one only when no piece is left. Unset (or `0`), the lower of " \
      "the cgroup's `memory.high` and `memory.max` (v1: the soft and hard limits), read once at " \
      "start; `sl_stat(\"budget_bytes\")` says which is in force") \
    X(boost, "SLUICE_BOOST", 1, "`1`", parse_bool, 1, \
      "`1`: under a heap budget, each extfrag event raises a watermark boost (one pageblock, up " \
      "to an eighth of the budget, lapsing 1 s after the last event) and wakes the reclaimer, " \
      "which asks the caches' shrinkers and every thread heap for memory until the free " \
      "pageblocks plus the room left in the budget reach the high watermark plus the boost; " \
      "`0`: no boost (the baseline of `bench/fragment`)") \
    X(antifrag, "SLUICE_ANTIFRAG", 1, "`1`", parse_bool, 0, \
      "`1`: pageblocks are grouped by type (`SLAB`, `BUF`, `RECLAIM`, `RUN`); `0`: one type for all, " \
      "the baseline that shows what grouping buys") \
    X(thp, "SLUICE_THP", THP_COLLAPSE, "`collapse`", parse_thp, 1, \
      "`collapse`: a pageblock dense (at most 5/16 of it free) for a second is collapsed into a " \
      "transparent hugepage by the reclaimer (`MADV_COLLAPSE`, Linux 6.1), or advised " \
      "`MADV_HUGEPAGE` for khugepaged by a slow path when there is no reclaimer, and is not " \
      "purged while it stays at least half full (but by `sl_purge`, `malloc_trim` and memory " \
      "pressure); `madvise`: every pageblock is `MADV_HUGEPAGE` " \
      "and committed whole from the start; `never`: neither") \
    X(teardown, "SLUICE_TEARDOWN", BG_AUTO, "`auto`", parse_teardown, 0, \
      "a free (or shrinking `realloc`, or `sl_purge`) of a range of `SLUICE_TEARDOWN_MIN` or " \
      "more returns at once and worker threads give the range back: `auto` once the program has " \
      "a thread of its own, `on` (or `1`) always; `off` (or `0`) never: the freeing thread " \
      "unmaps it") \
    X(teardown_min, "SLUICE_TEARDOWN_MIN", 64L << 20, "`64M`", parse_bytes, 1, \
      "the smallest range handed to the teardown workers, in bytes (`K`, `M`, `G`, `T` " \
      "suffixes)") \
    X(teardown_workers, "SLUICE_TEARDOWN_WORKERS", -1, "`auto`", parse_workers, 0, \
      "the most teardown worker threads; `auto`: the online CPUs, at most 8; `0`: none, and the " \
      "queue is released by freeing threads once it is past its bound, by a mapping that fails " \
      "and by `sl_flush()`") \
    X(teardown_max_pending, "SLUICE_TEARDOWN_MAX_PENDING", 0, "an eighth of RAM", parse_bytes, 1, \
      "bytes queued for teardown before a freeing thread releases batches itself (the queue " \
      "then holds at most this plus one range); unset or `0`: an eighth of the machine's RAM") \
    X(teardown_idle_ms, "SLUICE_TEARDOWN_IDLE_MS", 30000, "`30000`", parse_long, 1, \
      "milliseconds an idle teardown worker waits for work before it exits") \
    X(prof, "SLUICE_PROF", 0, "unset", parse_prof_path, 0, \
      "a file path (`%p`: the process id): sample allocations and write the live-memory " \
      "profile there at exit, in pprof's format (`go tool pprof` reads it; `src/prof`)") \
    X(prof_sample, "SLUICE_PROF_SAMPLE", 512L << 10, "`512K`", parse_bytes, 0, \
      "mean bytes allocated between two samples (`K`, `M`, `G` suffixes); `1`: every " \
      "allocation, and every figure exact") \
    X(prof_gdump, "SLUICE_PROF_GDUMP", 0, "`0`", parse_bool, 0, \
      "`1`: with `SLUICE_PROF`, also write PATH.N each time the sampled live bytes reach a new " \
      "high (an eighth above the last one written)") \
    X(leaks, "SLUICE_LEAKS", 0, "`0`", parse_bool, 0, \
      "`1`: sample allocations and report the sites still holding memory at exit on stderr, " \
      "biggest first (on in the checked mode)")

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
#define X(field, env, def, shown, parse, rw, text) long field;
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
