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
    X(stats, "SLUICE_STATS", 0, "1: print statistics to stderr at exit")

struct sl_options {
#define X(field, env, def, text) long field;
    SL_OPTION_LIST(X)
#undef X
};

extern struct sl_options sl_opt;
void options_init(void); /* idempotent */

#endif
