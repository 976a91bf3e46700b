/* options.c — parse the SLUICE_* environment once. See options.h. */
#include "options.h"

#include <limits.h>
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

char sl_publish_path[256];

/* a path: kept (1), or too long or empty (0) */
static long parse_publish(const char *s, long def)
{
    size_t n = strlen(s);
    if (!n || n >= sizeof sl_publish_path - 8) /* room for ".tmp" */
        return def;
    memcpy(sl_publish_path, s, n + 1);
    return 1;
}

/* "json", or a number (1: the text summary) */
static long parse_stats(const char *s, long def)
{
    return !strcmp(s, "json") ? STATS_JSON : parse_long(s, def);
}

static long parse_purge(const char *s, long def)
{
    static const char *const names[] = { [PURGE_FREE] = "free", [PURGE_DONTNEED] = "dontneed", [PURGE_OFF] = "off" };
    for (long i = 0; i < 3; i++)
        if (!strcmp(s, names[i]))
            return i;
    return def;
}

/* A byte count: digits with an optional K, M, G or T suffix (powers of
 * 1024), e.g. "64M". */
static long parse_bytes(const char *s, long def)
{
    static const char suffixes[] = "KMGT";
    size_t n = strlen(s), d = n;
    int shift = 0;
    const char *at = n ? strchr(suffixes, s[n - 1] & ~0x20) : NULL;
    if (at && *at) {
        shift = 10 * (int)(at - suffixes + 1);
        d = n - 1;
    }
    char digits[24];
    if (!d || d >= sizeof digits)
        return def;
    memcpy(digits, s, d);
    digits[d] = 0;
    long v = parse_long(digits, -1);
    if (v < 0 || v > (LONG_MAX >> shift))
        return def;
    return v << shift;
}

static long parse_mode(const char *s, long def)
{
    static const char *const names[] = { [BG_OFF] = "off", [BG_AUTO] = "auto", [BG_ON] = "on" };
    for (long i = 0; i < 3; i++)
        if (!strcmp(s, names[i]))
            return i;
    return def;
}

/* "off" | "auto" | "on", or 0 | 1 | 2 */
static long parse_reclaimer(const char *s, long def)
{
    long v = parse_mode(s, -1);
    if (v >= 0)
        return v;
    v = parse_long(s, -1);
    return v >= 0 && v <= 2 ? v : def;
}

static long parse_thp(const char *s, long def)
{
    static const char *const names[] = { [THP_NEVER] = "never", [THP_COLLAPSE] = "collapse",
                                         [THP_MADVISE] = "madvise" };
    for (long i = 0; i < 3; i++)
        if (!strcmp(s, names[i]))
            return i;
    return def;
}

/* "off" | "auto" | "on", or 0 (off) | 1 (on) */
static long parse_teardown(const char *s, long def)
{
    if (!strcmp(s, "0"))
        return BG_OFF;
    if (!strcmp(s, "1"))
        return BG_ON;
    return parse_mode(s, def);
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
