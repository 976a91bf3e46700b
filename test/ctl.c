/* sl_ctl (src/api/ctl.c): every option reads as an int64_t; each run-time
 * option takes a new value in range and refuses one out of it (EINVAL),
 * each start-time one refuses any (EPERM); every statistic reads as a
 * uint64_t, agrees with sl_stat and refuses a write (EPERM); a wrong size
 * is EINVAL and an unknown name ENOENT, and an error changes nothing; the
 * actions run; a new decay and a new heap limit take effect. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "../src/options/options.h"
#include "sluice.h"
#include "t.h"

int main(void)
{
    char name[96];
    for (size_t i = 0; options_name(i); i++) {
        snprintf(name, sizeof name, "opt.%s", options_name(i));
        int64_t v = -7;
        size_t len = sizeof v;
        CHECK_EQ(sl_ctl(name, &v, &len, NULL, 0), 0);
        CHECK_EQ(len, sizeof v);
        long direct;
        CHECK_EQ(options_get(options_name(i), &direct), 0);
        CHECK_EQ(v, direct);
        /* the same value back: accepted where the option may change */
        int err = sl_ctl(name, NULL, NULL, &v, sizeof v);
        bool rw = err == 0;
        CHECK(err == 0 || err == EPERM);
        int64_t huge = (int64_t)1 << 62, after;
        len = sizeof after;
        err = sl_ctl(name, NULL, NULL, &huge, sizeof huge);
        bool bytes = strcasestr(name, "limit") || strcasestr(name, "teardown_min") || strcasestr(name, "pending");
        if (err != (rw ? (bytes ? 0 : EINVAL) : EPERM))
            printf("ctl: %s = 2^62: %d\n", name, err);
        CHECK_EQ(err, rw ? (bytes ? 0 : EINVAL) : EPERM);
        if (err == 0) /* a byte count may be that large: put it back */
            CHECK_EQ(sl_ctl(name, NULL, NULL, &v, sizeof v), 0);
        CHECK_EQ(sl_ctl(name, &after, &len, NULL, 0), 0);
        CHECK_EQ(after, v); /* an error changed nothing */
        int32_t small = 1;
        CHECK_EQ(sl_ctl(name, NULL, NULL, &small, sizeof small), rw ? EINVAL : EPERM); /* wrong size */
        char tiny[4];
        len = sizeof tiny;
        CHECK_EQ(sl_ctl(name, tiny, &len, NULL, 0), EINVAL); /* no room */
    }
    /* a run-time option takes effect: the dirty decay */
    int64_t d = 123, back = 0;
    size_t len = sizeof back;
    CHECK_EQ(sl_ctl("opt.dirty_decay_ms", NULL, NULL, &d, sizeof d), 0);
    CHECK_EQ(sl_ctl("opt.DIRTY_DECAY_MS", &back, &len, NULL, 0), 0);
    CHECK_EQ(back, 123);
    CHECK_EQ(sl_opt.dirty_decay_ms, 123);
    int64_t bad = -5;
    CHECK_EQ(sl_ctl("opt.dirty_decay_ms", NULL, NULL, &bad, sizeof bad), EINVAL);
    CHECK_EQ(sl_opt.dirty_decay_ms, 123);
    /* the heap limit reaches the page layer's budget */
    int64_t limit = (int64_t)64 << 20;
    CHECK_EQ(sl_ctl("opt.heap_limit", NULL, NULL, &limit, sizeof limit), 0);
    CHECK_EQ(sl_stat("budget_bytes"), limit);
    /* every statistic */
    for (size_t i = 0; sl_stat_name(i); i++) {
        snprintf(name, sizeof name, "stat.%s", sl_stat_name(i));
        uint64_t v;
        len = sizeof v;
        CHECK_EQ(sl_ctl(name, &v, &len, NULL, 0), 0);
        CHECK_EQ(sl_ctl(name, NULL, NULL, &v, sizeof v), EPERM);
    }
    uint64_t held;
    len = sizeof held;
    CHECK_EQ(sl_ctl("stat.held.magazines", &held, &len, NULL, 0), 0);
    CHECK_EQ(sl_ctl("stat.enomem_drains", &held, &len, NULL, 0), 0);
    CHECK_EQ(sl_ctl("stat.no_such_thing", &held, &len, NULL, 0), ENOENT);
    CHECK_EQ(sl_ctl("opt.no_such_thing", &held, &len, NULL, 0), ENOENT);
    CHECK_EQ(sl_ctl("nothing", NULL, NULL, NULL, 0), ENOENT);
    CHECK_EQ(sl_ctl(NULL, NULL, NULL, NULL, 0), EINVAL);
    /* the actions */
    void *p = sl_malloc(100);
    sl_free(p);
    CHECK_EQ(sl_ctl("purge", NULL, NULL, NULL, 0), 0);
    CHECK_EQ(sl_stat("held.magazines"), 0);
    CHECK_EQ(sl_ctl("flush", NULL, NULL, NULL, 0), 0);
    CHECK_EQ(sl_ctl("check", NULL, NULL, NULL, 0), 0);
    CHECK_EQ(sl_ctl("purge", &held, &len, NULL, 0), EINVAL);
    int fd = open("/dev/null", O_WRONLY);
    CHECK_EQ(sl_ctl("stats.json", NULL, NULL, &fd, sizeof fd), 0);
    CHECK_EQ(sl_ctl("stats.print", NULL, NULL, &fd, sizeof fd), 0);
    CHECK_EQ(sl_ctl("stats.print", NULL, NULL, NULL, 0), EINVAL);
    close(fd);
    /* prof.dump: profiling is off here (test/prof_pprof.sh has it on) */
    const char *path = "/dev/null";
    errno = 0;
    CHECK_EQ(sl_ctl("prof.dump", NULL, NULL, &path, sizeof path), ENOTSUP);
    CHECK_EQ(sl_prof_dump(NULL), ENOTSUP);
    CHECK_EQ(errno, 0);
    CHECK_EQ(sl_ctl("prof.dump", NULL, NULL, &path, sizeof path - 1), EINVAL);
    CHECK_EQ(sl_ctl("prof.dump", &held, &len, NULL, 0), EINVAL);
    return t_done("ctl");
}
