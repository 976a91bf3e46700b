/* options.c — parse the SLUICE_* environment once. See options.h.
 *
 * Every option is never silently wrong: a value that does not parse, is out
 * of range or is not one of the accepted words gets one line on stderr
 * naming the variable, the value and what is accepted, and the default is
 * used; an unknown SLUICE_* variable gets one line with the nearest known
 * name. Valid settings print nothing. SLUICE_OPTIONS="check=1,purge=off"
 * sets any of them in one variable (for service managers); a variable of
 * its own wins over it. Nothing here allocates: getenv, environ, a stack
 * buffer and write(2).
 */
#include "options.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../base/fatal.h"
#include "../os/fault.h"
#include "../os/os.h"

struct sl_options sl_opt = {
#define X(field, env, def, shown, parse, rw, text) .field = def,
    SL_OPTION_LIST(X)
#undef X
};

static _Atomic int options_done;

/* Each parser: true and *v set, or false (then the caller reports it with
 * the parser's `accepts` text). */
#define NUM_MAX (1L << 40)

static bool parse_long(const char *s, long *v)
{
    long n = 0;
    if (!*s)
        return false;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return false;
        n = n * 10 + (*s - '0');
        if (n > NUM_MAX)
            return false;
    }
    *v = n;
    return true;
}

/* One of names[0..n) (case-insensitive): its index. */
static bool parse_word(const char *s, const char *const *names, long n, long *v)
{
    for (long i = 0; i < n; i++)
        if (names[i] && !strcasecmp(s, names[i])) {
            *v = i;
            return true;
        }
    return false;
}

/* The same words for every yes-or-no option. */
static bool parse_bool(const char *s, long *v)
{
    static const char *const no[] = { "0", "off", "false", "no" }, *const yes[] = { "1", "on", "true", "yes" };
    long i;
    if (parse_word(s, no, 4, &i)) {
        *v = 0;
        return true;
    }
    if (parse_word(s, yes, 4, &i)) {
        *v = 1;
        return true;
    }
    return false;
}

char sl_publish_path[256];

/* a path: kept (1) */
static bool parse_publish(const char *s, long *v)
{
    size_t n = strlen(s);
    if (!n || n >= sizeof sl_publish_path - 8) /* room for ".tmp" */
        return false;
    memcpy(sl_publish_path, s, n + 1);
    *v = 1;
    return true;
}

char sl_prof_path[256];

/* a path: kept (1) */
static bool parse_prof_path(const char *s, long *v)
{
    size_t n = strlen(s);
    if (!n || n >= sizeof sl_prof_path - 24) /* room for ".N" */
        return false;
    memcpy(sl_prof_path, s, n + 1);
    *v = 1;
    return true;
}

/* "json" or "text", or a yes-or-no word (yes: the text summary) */
static bool parse_stats(const char *s, long *v)
{
    static const char *const names[] = { [STATS_TEXT] = "text", [STATS_JSON] = "json" };
    if (parse_word(s, names, 3, v))
        return true;
    if (!parse_bool(s, v))
        return false;
    *v = *v ? STATS_TEXT : STATS_OFF;
    return true;
}

static bool parse_purge(const char *s, long *v)
{
    static const char *const names[] = { [PURGE_FREE] = "free", [PURGE_DONTNEED] = "dontneed", [PURGE_OFF] = "off" };
    return parse_word(s, names, 3, v);
}

/* A byte count: digits with an optional K, M, G or T suffix (powers of
 * 1024), e.g. "64M". */
static bool parse_bytes(const char *s, long *v)
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
    long num;
    if (!d || d >= sizeof digits)
        return false;
    memcpy(digits, s, d);
    digits[d] = 0;
    if (!parse_long(digits, &num) || num > (LONG_MAX >> shift))
        return false;
    *v = num << shift;
    return true;
}

/* "auto", or a yes-or-no word */
static bool parse_mode(const char *s, long *v)
{
    if (!strcasecmp(s, "auto")) {
        *v = BG_AUTO;
        return true;
    }
    if (!parse_bool(s, v))
        return false;
    *v = *v ? BG_ON : BG_OFF;
    return true;
}
static bool parse_reclaimer(const char *s, long *v) { return parse_mode(s, v); }
static bool parse_teardown(const char *s, long *v) { return parse_mode(s, v); }

static bool parse_thp(const char *s, long *v)
{
    static const char *const names[] = { [THP_NEVER] = "never", [THP_COLLAPSE] = "collapse",
                                         [THP_MADVISE] = "madvise" };
    return parse_word(s, names, 3, v);
}

/* "auto" (the default: the online CPUs, at most 8) or a number */
static bool parse_workers(const char *s, long *v)
{
    if (!strcasecmp(s, "auto")) {
        *v = -1;
        return true;
    }
    return parse_long(s, v) && *v <= 1024;
}

/* What each parser accepts, for the report of a bad value. */
static const char *accepts(bool (*parse)(const char *, long *))
{
    static const struct {
        bool (*parse)(const char *, long *);
        const char *what;
    } table[] = {
        { parse_long, "a whole number from 0 to 1099511627776" },
        { parse_bool, "1, 0, on, off, true, false, yes or no" },
        { parse_publish, "a file path of 1 to 247 characters" },
        { parse_prof_path, "a file path of 1 to 231 characters" },
        { parse_stats, "1, 0, on, off, true, false, yes, no, text or json" },
        { parse_purge, "free, dontneed or off" },
        { parse_bytes, "a byte count, digits with an optional K, M, G or T" },
        { parse_reclaimer, "auto, or 1, 0, on, off, true, false, yes or no" },
        { parse_teardown, "auto, or 1, 0, on, off, true, false, yes or no" },
        { parse_thp, "collapse, madvise or never" },
        { parse_workers, "auto, or a whole number from 0 to 1024" },
    };
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        if (table[i].parse == parse)
            return table[i].what;
    return "a valid value";
}

/* One line on stderr from parts (NULL-ended), truncated to a line. */
static void say(const char *const *parts)
{
    char line[512];
    size_t n = 0;
    for (; *parts; parts++)
        for (const char *c = *parts; *c && n + 2 < sizeof line; c++)
            line[n++] = *c;
    line[n++] = '\n';
    os_write_err(line, n);
}

/* ---- the table ------------------------------------------------------------ */

struct option {
    const char *env;   /* SLUICE_... */
    long *field;
    long def;
    bool (*parse)(const char *, long *);
    bool rw;           /* may change while the program runs (sl_ctl) */
    const char *shown; /* the default as a user writes it (Markdown: `code`) */
};
static const struct option options[] = {
#define X(field, env, def, shown, parse, rw, text) { env, &sl_opt.field, def, parse, rw, shown },
    SL_OPTION_LIST(X)
#undef X
};
#define NOPTIONS (sizeof options / sizeof *options)

/* Set o from value s (from where: its variable, or SLUICE_OPTIONS). */
static void set(const struct option *o, const char *s, const char *where)
{
    long v;
    if (o->parse(s, &v)) {
        *o->field = v;
        return;
    }
    *o->field = o->def;
    char def[64]; /* the table's shown default, without its Markdown */
    size_t n = 0;
    for (const char *c = o->shown; *c && n + 1 < sizeof def; c++)
        if (*c != '`')
            def[n++] = *c;
    def[n] = 0;
    const char *parts[] = { "sluice: ", where, o->env, "=", s, " is not valid (", accepts(o->parse),
                            "); the default (", def, ") is used", NULL };
    say(parts);
}

/* Case-insensitive edit distance of two short names (a stack table). */
static unsigned distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return 99;
    unsigned row[64];
    for (size_t j = 0; j <= lb; j++)
        row[j] = (unsigned)j;
    for (size_t i = 1; i <= la; i++) {
        unsigned diag = row[0];
        row[0] = (unsigned)i;
        for (size_t j = 1; j <= lb; j++) {
            unsigned up = row[j];
            unsigned sub = diag + ((a[i - 1] | 0x20) != (b[j - 1] | 0x20));
            unsigned best = up + 1 < row[j - 1] + 1 ? up + 1 : row[j - 1] + 1;
            row[j] = sub < best ? sub : best;
            diag = up;
        }
    }
    return row[lb];
}

/* The option named name (its variable's name, or the part after SLUICE_
 * in lower case), or NULL. */
static const struct option *find(const char *name, size_t len)
{
    for (size_t i = 0; i < NOPTIONS; i++) {
        const char *e = options[i].env, *short_name = e + 7; /* past "SLUICE_" */
        if ((strlen(e) == len && !strncmp(e, name, len)) ||
            (strlen(short_name) == len && !strncasecmp(short_name, name, len)))
            return &options[i];
    }
    return NULL;
}

/* An unknown name: one line with the nearest known one. */
static void unknown(const char *name, size_t len, const char *where)
{
    char n[64];
    if (len >= sizeof n)
        len = sizeof n - 1;
    memcpy(n, name, len);
    n[len] = 0;
    const char *best = NULL;
    unsigned bd = 99;
    for (size_t i = 0; i < NOPTIONS; i++) {
        const char *e = options[i].env;
        unsigned d = strncmp(n, "SLUICE_", 7) ? distance(n, e + 7) : distance(n, e);
        if (d < bd) {
            bd = d;
            best = e;
        }
    }
    char short_name[64] = ""; /* in SLUICE_OPTIONS, the name there: lower case, no SLUICE_ */
    if (*where && best)
        for (size_t i = 0; best[7 + i] && i + 1 < sizeof short_name; i++)
            short_name[i] = (char)(best[7 + i] | 0x20), short_name[i + 1] = 0;
    const char *parts[] = { "sluice: unknown option ", where, n, bd <= 4 ? " (did you mean " : "",
                            bd <= 4 ? (*where ? short_name : best) : "", bd <= 4 ? "?)" : "", "; it is ignored",
                            NULL };
    say(parts);
}

/* SLUICE_OPTIONS: name=value pairs separated by commas (or spaces). */
static void parse_options_list(const char *s)
{
    while (*s) {
        size_t len = strcspn(s, ", ");
        if (len) {
            const char *eq = memchr(s, '=', len);
            char value[256];
            if (!eq) {
                unknown(s, len, "in SLUICE_OPTIONS: ");
            } else {
                const struct option *o = find(s, (size_t)(eq - s));
                size_t vl = len - (size_t)(eq - s) - 1;
                if (vl >= sizeof value)
                    vl = sizeof value - 1;
                memcpy(value, eq + 1, vl);
                value[vl] = 0;
                if (o)
                    set(o, value, "in SLUICE_OPTIONS: ");
                else
                    unknown(s, (size_t)(eq - s), "in SLUICE_OPTIONS: ");
            }
        }
        s += len;
        s += strspn(s, ", ");
    }
}

/* The values a parser can produce, for a value set as a number (sl_ctl). */
static bool in_range(bool (*parse)(const char *, long *), long v)
{
    if (parse == parse_bool)
        return v == 0 || v == 1;
    if (parse == parse_stats)
        return v >= STATS_OFF && v <= STATS_JSON;
    if (parse == parse_purge || parse == parse_thp || parse == parse_reclaimer || parse == parse_teardown)
        return v >= 0 && v <= 2;
    if (parse == parse_workers)
        return v >= -1 && v <= 1024;
    if (parse == parse_bytes)
        return v >= 0;
    if (parse == parse_long)
        return v >= 0 && v <= NUM_MAX;
    return false; /* a path: not as a number */
}

const char *options_name(size_t i) { return i < NOPTIONS ? options[i].env + 7 : NULL; }

int options_get(const char *name, long *v)
{
    const struct option *o = find(name, strlen(name));
    if (!o)
        return ENOENT;
    *v = __atomic_load_n(o->field, __ATOMIC_RELAXED);
    return 0;
}

bool options_runtime(const char *name)
{
    const struct option *o = find(name, strlen(name));
    return o && o->rw;
}

int options_set(const char *name, long v)
{
    const struct option *o = find(name, strlen(name));
    if (!o)
        return ENOENT;
    if (!o->rw)
        return EPERM;
    if (!in_range(o->parse, v))
        return EINVAL;
    __atomic_store_n(o->field, v, __ATOMIC_RELAXED);
    return 0;
}

extern char **environ;

/* SLUICE_ variables that are no option: the fault injection of test
 * builds (os/fault.c; a release build knows nothing of it: the test
 * release_has_no_fault_injection looks for the name in the library). */
static bool options_ignored(const char *name, size_t len)
{
    return config_fault && len == 12 && !strncmp(name, "SLUICE_FAULT", 12);
}

void options_init(void)
{
    if (atomic_exchange(&options_done, 1))
        return;
    const char *s = getenv("SLUICE_OPTIONS");
    if (s)
        parse_options_list(s);
    for (size_t i = 0; i < NOPTIONS; i++)
        if ((s = getenv(options[i].env)))
            set(&options[i], s, "");
    /* a SLUICE_ variable that names no option: probably a misspelling */
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "SLUICE_", 7))
            continue;
        size_t len = 0; /* to its '=' (not strcspn: libc's SSE4.2 copy sits on a page of its own, which
                         * the kernel maps in with 40 KiB of libc around it) */
        while ((*e)[len] && (*e)[len] != '=')
            len++;
        if (!find(*e, len) && !(len == 14 && !strncmp(*e, "SLUICE_OPTIONS", 14)) && !options_ignored(*e, len))
            unknown(*e, len, "");
    }
}
