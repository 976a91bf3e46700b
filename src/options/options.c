/* options.c — parse the SLUICE_* environment once. See options.h. */
#include "options.h"

#include <stdlib.h>
#include <string.h>

struct sl_options sl_opt = {
#define X(field, env, def, parse, text) .field = def,
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

static long parse_purge(const char *s, long def)
{
    static const char *const names[] = { [PURGE_FREE] = "free", [PURGE_DONTNEED] = "dontneed", [PURGE_OFF] = "off" };
    for (long i = 0; i < 3; i++)
        if (!strcmp(s, names[i]))
            return i;
    return def;
}

/* "off" | "auto" | "on", or 0 | 1 | 2 */
static long parse_reclaimer(const char *s, long def)
{
    static const char *const names[] = { [RECLAIMER_OFF] = "off", [RECLAIMER_AUTO] = "auto", [RECLAIMER_ON] = "on" };
    for (long i = 0; i < 3; i++)
        if (!strcmp(s, names[i]))
            return i;
    long v = parse_long(s, -1);
    return v >= 0 && v <= 2 ? v : def;
}

void options_init(void)
{
    if (atomic_exchange(&options_done, 1))
        return;
    const char *s;
#define X(field, env, def, parse, text) \
    if ((s = getenv(env)))               \
        sl_opt.field = parse(s, def);
    SL_OPTION_LIST(X)
#undef X
}
