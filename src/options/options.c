/* options.c — parse the SLUICE_* environment once. See options.h. */
#include "options.h"

#include <stdlib.h>

struct sl_options sl_opt = {
#define X(field, env, def, text) .field = def,
    SL_OPTION_LIST(X)
#undef X
};

static _Atomic int options_done;

static long parse_long(const char *s, long def)
{
    long v = 0;
    if (!*s)
        return def;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return def;
        v = v * 10 + (*s - '0');
        if (v > (1L << 40))
            return def;
    }
    return v;
}

void options_init(void)
{
    if (atomic_exchange(&options_done, 1))
        return;
    const char *s;
#define X(field, env, def, text)  \
    if ((s = getenv(env)))        \
        sl_opt.field = parse_long(s, def);
    SL_OPTION_LIST(X)
#undef X
}
