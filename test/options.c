/* Options are never silently wrong (src/options/options.c), for every
 * option of the table (SL_OPTION_LIST): a value that does not parse and an
 * out-of-range one each give exactly one line on stderr naming the
 * variable and the value, and the program runs; a valid value prints
 * nothing and takes effect; an unknown SLUICE_ name gets one line with the
 * nearest known name; SLUICE_OPTIONS sets several at once, and a variable
 * of its own wins over it; yes-or-no options take the same words. Each
 * case is a fresh process (options are read once, at start). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../src/options/options.h"
#include "t.h"

/* Per parser: a value it refuses, one out of its range (or refused too),
 * and one it takes. */
struct values {
    const char *parse, *bad, *out_of_range, *good;
    long good_is;
};
static char publish_path[64], prof_path[64];
static const struct values values[] = {
    { "parse_long", "12ms", "99999999999999999", "5", 5 },
    { "parse_bool", "maybe", "2", "yes", 1 },
    { "parse_publish", "", NULL, publish_path, 1 },
    { "parse_prof_path", "", NULL, prof_path, 1 },
    { "parse_stats", "verbose", "-1", "off", STATS_OFF },
    { "parse_purge", "lazy", "", "dontneed", PURGE_DONTNEED },
    { "parse_bytes", "12Q", "99999999999T", "64M", 64L << 20 },
    { "parse_reclaimer", "sometimes", "3", "auto", BG_AUTO },
    { "parse_teardown", "sometimes", "3", "off", BG_OFF },
    { "parse_thp", "always", "", "never", THP_NEVER },
    { "parse_workers", "many", "100000", "2", 2 },
};

static const struct {
    const char *env, *parse;
    size_t offset;
} table[] = {
#define X(field, env, def, shown, parse, rw, text) { env, #parse, offsetof(struct sl_options, field) },
    SL_OPTION_LIST(X)
#undef X
};

static const struct values *values_of(const char *parse)
{
    for (size_t i = 0; i < sizeof values / sizeof *values; i++)
        if (!strcmp(values[i].parse, parse))
            return &values[i];
    return NULL;
}

/* Run this program again with env added; its stderr in out. */
static int run(const char *argv0, const char *arg, const char *env, char *out, size_t cap)
{
    size_t len;
    return t_run_self(argv0, arg, env, out, cap, &len);
}

/* The value of option env in a fresh process with the variables of set
 * (name, value pairs, NULL-ended); -12345 if none came. */
static long shown(const char *argv0, const char *const *set, const char *env)
{
    int fds[2];
    if (pipe(fds))
        abort();
    pid_t pid = fork();
    if (!pid) {
        dup2(fds[1], 1);
        for (; *set; set += 2)
            setenv(set[0], set[1], 1);
        execl("/proc/self/exe", argv0, "show", env, (char *)NULL);
        _exit(3);
    }
    close(fds[1]);
    char got[64] = { 0 };
    ssize_t n = read(fds[0], got, sizeof got - 1);
    close(fds[0]);
    waitpid(pid, NULL, 0);
    return n > 0 ? atol(got) : -12345;
}

static int lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

int main(int argc, char **argv)
{
    snprintf(publish_path, sizeof publish_path, "/tmp/sluice-options-%d", (int)getpid());
    snprintf(prof_path, sizeof prof_path, "/tmp/sluice-options-prof-%d", (int)getpid());
    if (argc > 1)
        options_init(); /* what the library's constructor does (a static link may not bring it) */
    if (argc > 2 && !strcmp(argv[1], "show")) { /* the child: print one option's value */
        for (size_t i = 0; i < sizeof table / sizeof *table; i++)
            if (!strcmp(table[i].env, argv[2]))
                printf("%ld\n", *(long *)((char *)&sl_opt + table[i].offset));
        free(malloc(100)); /* the program runs */
        return 0;
    }
    if (argc > 1)
        return 0;
    char out[2048], env[512], arg[128];
    for (size_t i = 0; i < sizeof table / sizeof *table; i++) {
        const struct values *v = values_of(table[i].parse);
        CHECK(v != NULL); /* every parser has its cases here */
        if (!v)
            continue;
        const char *cases[2] = { v->bad, v->out_of_range };
        for (int c = 0; c < 2; c++) {
            if (!cases[c] || (c == 1 && !*cases[c]))
                continue;
            snprintf(env, sizeof env, "%s=%s", table[i].env, cases[c]);
            snprintf(arg, sizeof arg, "show");
            int st = run(argv[0], "child", env, out, sizeof out);
            bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0 && lines(out) == 1 && strstr(out, env) &&
                      strstr(out, "is not valid");
            if (!ok)
                printf("%s: status %d, stderr: %s\n", env, st, out);
            CHECK(ok);
        }
        /* a valid value: nothing printed, and it takes effect */
        snprintf(env, sizeof env, "%s=%s", table[i].env, v->good);
        const char *set[] = { table[i].env, v->good, NULL };
        CHECK_EQ(shown(argv[0], set, table[i].env), v->good_is);
        int st = run(argv[0], "child", env, out, sizeof out);
        if (out[0])
            printf("%s printed: %s\n", env, out);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && !out[0]);
    }
    /* an unknown name: one line, the nearest known one */
    run(argv[0], "child", "SLUICE_DIRTYDECAY_MS=5", out, sizeof out);
    CHECK(lines(out) == 1 && strstr(out, "unknown option SLUICE_DIRTYDECAY_MS (did you mean SLUICE_DIRTY_DECAY_MS?)"));
    run(argv[0], "child", "SLUICE_NOTHING_LIKE_IT=1", out, sizeof out);
    CHECK(lines(out) == 1 && strstr(out, "unknown option SLUICE_NOTHING_LIKE_IT; it is ignored"));
    /* SLUICE_OPTIONS: several at once, its own errors, and a variable wins */
    run(argv[0], "child", "SLUICE_OPTIONS=check=on,dirty_decay_ms=500", out, sizeof out);
    CHECK(!out[0]);
    run(argv[0], "child", "SLUICE_OPTIONS=check=on,purgee=off,lazy_decay_ms=soon", out, sizeof out);
    CHECK(lines(out) == 2 && strstr(out, "purgee (did you mean purge?)") && strstr(out, "SLUICE_LAZY_DECAY_MS=soon"));
    /* a variable of its own wins over SLUICE_OPTIONS */
    const char *both[] = { "SLUICE_OPTIONS", "dirty_decay_ms=500,lazy_decay_ms=700", "SLUICE_DIRTY_DECAY_MS", "300", NULL };
    CHECK_EQ(shown(argv[0], both, "SLUICE_DIRTY_DECAY_MS"), 300);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -f %s %s.tmp %s", publish_path, publish_path, prof_path);
    if (system(cmd))
        printf("options: could not remove %s\n", publish_path);
    return t_done("options");
}
