/* options.h — every SLUICE_* environment option, in one table.
 *
 * Read once, at the first allocation or at library load, whichever comes
 * first; parsing uses no allocation (getenv and a hand-written number
 * parser). The README's option table is this list.
 *
 *   X(field, environment name, default, meaning)
 */
#ifndef SL_OPTIONS_H
#define SL_OPTIONS_H

#include "../base/common.h"

#define SL_OPTION_LIST(X)                                                                         \
    X(stats, "SLUICE_STATS", 0, parse_long, "1: print statistics to stderr at exit")                \
    X(check, "SLUICE_CHECK", 0, parse_long,                                                         \
      "1: checked mode: canaries, zero fill, quarantine, guard pages (api/checked.c)")             \
    X(purge, "SLUICE_PURGE", PURGE_FREE, parse_purge, "free | dontneed | off: how free memory goes back") \
    X(dirty_decay_ms, "SLUICE_DIRTY_DECAY_MS", 1000, parse_long,                                    \
      "ms freed memory stays dirty (resident) before it is purged; 0: at once")                   \
    X(lazy_decay_ms, "SLUICE_LAZY_DECAY_MS", 10000, parse_long,                                     \
      "ms lazily freed (MADV_FREE) memory stays lazy before it is made clean")                     \
    X(reclaimer, "SLUICE_RECLAIMER", RECLAIMER_AUTO, parse_reclaimer,                               \
      "auto | on | off: the background reclaimer thread starts once the program has threads of its "  \
      "own (auto), whenever there is memory to decay (on), or never (off)")

/* SLUICE_PURGE: MADV_FREE then, after the lazy decay, MADV_DONTNEED; or
 * MADV_DONTNEED at once; or nothing (free pageblocks are still unmapped). */
enum purge_mode { PURGE_FREE, PURGE_DONTNEED, PURGE_OFF };
/* SLUICE_RECLAIMER: a drop-in malloc must not make a single-threaded
 * program multi-threaded, so by default the thread waits for the
 * program's own second thread; slow paths run the decay until then. */
enum reclaimer_mode { RECLAIMER_OFF, RECLAIMER_AUTO, RECLAIMER_ON };

struct sl_options {
#define X(field, env, def, parse, text) long field;
    SL_OPTION_LIST(X)
#undef X
};

extern struct sl_options sl_opt;
void options_init(void); /* idempotent */

#endif
