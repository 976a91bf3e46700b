/* leaks.c — the leak report at exit (SLUICE_LEAKS=1, and checked mode):
 * the sites whose sampled blocks are still live, biggest first, with the
 * estimated bytes and objects they stand for and their stacks, on stderr
 * with write(2), after the program's own exit handlers (the library's
 * destructor runs last).
 *
 * Each frame is named by dladdr (the nearest exported symbol: functions
 * of a program built with -rdynamic, and of shared libraries), then, for
 * file:line, by addr2line when it is installed: one child per object file
 * (posix_spawn, its output read through a pipe, with at most
 * ADDR2LINE_MAX addresses each), started only here, at exit; a missing or
 * failing addr2line leaves the dladdr names. The report names each
 * object cache's blocks by the cache.
 */
#define _GNU_SOURCE
#include "leaks.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <elf.h>
#include <link.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../base/fatal.h"
#include "../os/os.h"
#include "table.h"

#define REPORT_SITES  30 /* sites printed; the rest are summed in one line */
#define ADDR2LINE_MAX 64 /* addresses per addr2line run */

extern char **environ;

struct line {
    char s[1024];
    size_t n;
};

static void add(struct line *l, const char *s)
{
    while (*s && l->n + 2 < sizeof l->s)
        l->s[l->n++] = *s++;
}
static void add_u64(struct line *l, uint64_t v)
{
    char num[24];
    num[fmt_u64(num, v)] = 0;
    add(l, num);
}
static void add_hex(struct line *l, uint64_t v)
{
    char num[24];
    num[fmt_hex(num, v)] = 0; /* with its 0x */
    add(l, num);
}
static void say(struct line *l)
{
    l->s[l->n++] = '\n';
    os_write_err(l->s, l->n);
    l->n = 0;
}

/* ---- the sites, copied and sorted ---------------------------------------- */

struct leak {
    struct prof_site *site;
    double bytes, objects;
    uint64_t samples;
};

struct collect {
    struct leak *v;
    size_t n, cap;
    double bytes, objects;
    uint64_t samples;
};

static void collect_site(struct prof_site *s, void *arg)
{
    struct collect *c = arg;
    if (!s->live_samples)
        return;
    c->bytes += s->live_bytes;
    c->objects += s->live_objects;
    c->samples += s->live_samples;
    if (c->n < c->cap)
        c->v[c->n++] = (struct leak){ s, s->live_bytes, s->live_objects, s->live_samples };
}

static void sort_by_bytes(struct leak *v, size_t n) /* Shell sort, biggest first */
{
    for (size_t gap = n / 2; gap; gap /= 2)
        for (size_t i = gap; i < n; i++)
            for (size_t j = i; j >= gap && v[j - gap].bytes < v[j].bytes; j -= gap) {
                struct leak t = v[j];
                v[j] = v[j - gap];
                v[j - gap] = t;
            }
}

/* ---- naming frames -------------------------------------------------------- */

/* file:line (and the function) of addresses in one object, by addr2line:
 * names[i] gets "function at file:line" or stays as it was. */
static void addr2line(const char *file, const uintptr_t *rel, size_t n, char (*names)[256])
{
    static const char tool[] = "/usr/bin/addr2line";
    if (access(tool, X_OK))
        return;
    char args[ADDR2LINE_MAX][24];
    char *argv[ADDR2LINE_MAX + 8];
    size_t a = 0;
    argv[a++] = (char *)"addr2line";
    argv[a++] = (char *)"-f";
    argv[a++] = (char *)"-C";
    argv[a++] = (char *)"-e";
    argv[a++] = (char *)file;
    for (size_t i = 0; i < n; i++) {
        args[i][fmt_hex(args[i], rel[i])] = 0;
        argv[a++] = args[i];
    }
    argv[a] = NULL;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC))
        return;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    /* the child's environment without sluice: its own exit would report
     * (and spawn addr2line) again */
    char *env[256];
    size_t ne = 0;
    for (char **e = environ; e && *e && ne + 1 < sizeof env / sizeof *env; e++)
        if (strncmp(*e, "LD_PRELOAD=", 11) && strncmp(*e, "SLUICE_", 7))
            env[ne++] = *e;
    env[ne] = NULL;
    pid_t pid;
    int err = posix_spawn(&pid, tool, &fa, NULL, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (err) {
        close(fds[0]);
        return;
    }
    /* two lines an address: the function, then file:line */
    char out[16384];
    size_t got = 0;
    for (;;) {
        ssize_t r = read(fds[0], out + got, sizeof out - 1 - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
        if (got == sizeof out - 1)
            break;
    }
    close(fds[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    out[got] = 0;
    char *s = out;
    for (size_t i = 0; i < n && *s; i++) {
        char *fn = s, *nl = strchr(s, '\n');
        if (!nl)
            break;
        *nl = 0;
        char *where = nl + 1;
        nl = strchr(where, '\n');
        if (!nl)
            break;
        *nl = 0;
        s = nl + 1;
        if (!strcmp(fn, "??"))
            continue;
        struct line l = { .n = 0 };
        add(&l, fn);
        if (strncmp(where, "??", 2)) {
            add(&l, " at ");
            const char *base = strrchr(where, '/');
            add(&l, base ? base + 1 : where);
        }
        l.s[l.n < 255 ? l.n : 255] = 0;
        memcpy(names[i], l.s, 256);
    }
}

/* Is the object loaded at base a position-independent one (its addresses
 * in the file are relative to base)? */
static bool relative_object(const void *base)
{
    const ElfW(Ehdr) *eh = base;
    return eh && !memcmp(eh->e_ident, ELFMAG, SELFMAG) && eh->e_type == ET_DYN;
}

/* Name the frames of every reported site: dladdr, then addr2line per file. */
static void name_frames(struct leak *v, size_t n, char (*names)[256])
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        for (uint32_t f = 0; f < v[i].site->nframes; f++, k++) {
            uintptr_t pc = v[i].site->frames[f] - 1;
            Dl_info info;
            names[k][0] = 0;
            if (dladdr((void *)pc, &info) && info.dli_sname) {
                struct line l = { .n = 0 };
                add(&l, info.dli_sname);
                add(&l, "+");
                add_hex(&l, pc - (uintptr_t)info.dli_saddr);
                l.s[l.n < 255 ? l.n : 255] = 0;
                memcpy(names[k], l.s, 256);
            }
        }
    /* addr2line, one object file at a time: the frames not yet asked */
    size_t total = k;
    static bool asked[REPORT_SITES * PROF_DEPTH];
    memset(asked, 0, sizeof asked);
    for (size_t start = 0; start < total; start++) {
        if (asked[start])
            continue;
        uintptr_t rel[ADDR2LINE_MAX];
        size_t idx[ADDR2LINE_MAX], m = 0;
        Dl_info first;
        uintptr_t pc0 = 0;
        for (size_t i = 0, kk = 0; i < n; i++)
            for (uint32_t f = 0; f < v[i].site->nframes; f++, kk++)
                if (kk == start)
                    pc0 = v[i].site->frames[f] - 1;
        if (!dladdr((void *)pc0, &first) || !first.dli_fname) {
            asked[start] = true;
            continue;
        }
        bool rel_obj = relative_object(first.dli_fbase);
        for (size_t i = 0, kk = 0; i < n; i++)
            for (uint32_t f = 0; f < v[i].site->nframes; f++, kk++) {
                if (kk < start || asked[kk] || m == ADDR2LINE_MAX)
                    continue;
                uintptr_t pc = v[i].site->frames[f] - 1;
                Dl_info info;
                if (dladdr((void *)pc, &info) && info.dli_fbase == first.dli_fbase) {
                    asked[kk] = true;
                    rel[m] = rel_obj ? pc - (uintptr_t)info.dli_fbase : pc;
                    idx[m++] = kk;
                }
            }
        const char *file = first.dli_fname;
        char exe[4096];
        if (!file[0] || !strchr(file, '/')) { /* the main program */
            ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
            if (len <= 0)
                continue;
            exe[len] = 0;
            file = exe;
        }
        char got[ADDR2LINE_MAX][256];
        for (size_t j = 0; j < m; j++)
            memcpy(got[j], names[idx[j]], 256);
        addr2line(file, rel, m, got);
        for (size_t j = 0; j < m; j++)
            memcpy(names[idx[j]], got[j], 256);
    }
}

/* ---- the report ----------------------------------------------------------- */

void prof_leak_report(void)
{
    size_t cap = 1 << 16;
    struct collect c = { .v = os_map(cap * sizeof(struct leak)), .cap = cap };
    if (!c.v)
        return;
    prof_lock_take();
    prof_sites_each(collect_site, &c);
    prof_lock_drop();
    struct line l = { .n = 0 };
    double mean = prof_mean();
    if (!c.samples) {
        os_unmap(c.v, cap * sizeof(struct leak));
        return;
    }
    sort_by_bytes(c.v, c.n);
    add(&l, "sluice: leak report: ");
    add_u64(&l, (uint64_t)(c.bytes + 0.5));
    add(&l, " bytes in ");
    add_u64(&l, (uint64_t)(c.objects + 0.5));
    add(&l, " objects still allocated at exit, from ");
    add_u64(&l, c.n);
    add(&l, c.n == 1 ? " site" : " sites");
    say(&l);
    if (mean <= 1) {
        add(&l, "sluice: every allocation was recorded (SLUICE_PROF_SAMPLE=1): the figures are exact");
    } else {
        add(&l, "sluice: sampled, one sample per ");
        add_u64(&l, (uint64_t)mean);
        add(&l, " bytes allocated on average: the figures are estimates (");
        add_u64(&l, c.samples);
        add(&l, " samples; SLUICE_PROF_SAMPLE=1 makes them exact)");
    }
    say(&l);
    size_t shown = c.n < REPORT_SITES ? c.n : REPORT_SITES;
    size_t names_size = REPORT_SITES * PROF_DEPTH * 256;
    char (*names)[256] = os_map(names_size);
    if (!names) {
        os_unmap(c.v, cap * sizeof(struct leak));
        return;
    }
    name_frames(c.v, shown, names);
    size_t k = 0;
    for (size_t i = 0; i < shown; i++) {
        struct prof_site *s = c.v[i].site;
        add(&l, "sluice: leak #");
        add_u64(&l, i + 1);
        add(&l, ": ");
        add_u64(&l, (uint64_t)(c.v[i].bytes + 0.5));
        add(&l, " bytes in ");
        add_u64(&l, (uint64_t)(c.v[i].objects + 0.5));
        add(&l, " objects (");
        add_u64(&l, c.v[i].samples);
        add(&l, c.v[i].samples == 1 ? " sample" : " samples");
        add(&l, ")");
        if (s->cache[0]) {
            add(&l, " of object cache '");
            add(&l, s->cache);
            add(&l, "'");
        }
        add(&l, ", allocated at:");
        say(&l);
        for (uint32_t f = 0; f < s->nframes; f++, k++) {
            add(&l, "    #");
            add_u64(&l, f);
            add(&l, " ");
            add_hex(&l, s->frames[f] - 1);
            if (names[k][0]) {
                add(&l, " ");
                add(&l, names[k]);
            }
            say(&l);
        }
    }
    if (c.n > shown) {
        double bytes = 0;
        for (size_t i = shown; i < c.n; i++)
            bytes += c.v[i].bytes;
        add(&l, "sluice: and ");
        add_u64(&l, c.n - shown);
        add(&l, " more sites holding ");
        add_u64(&l, (uint64_t)(bytes + 0.5));
        add(&l, " bytes");
        say(&l);
    }
    os_unmap(names, names_size);
    os_unmap(c.v, cap * sizeof(struct leak));
}
