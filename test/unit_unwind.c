/* unit_unwind.c — the profiler's own unwinder (src/prof/unwind.c) against
 * glibc's backtrace(): the same return addresses for stacks of frames
 * with and without a frame pointer (a variable-length array makes the
 * CFA rbp-based), a 64 KiB frame, in a thread
 * (to the thread's outermost frame), at a depth limit, and from a signal
 * handler, through the signal frame into the interrupted code; and that
 * the second walk of a stack finds every rule in its cache; and that
 * walking through libc's frames (a qsort comparator's stack) leaves no
 * page of libc's unwind tables mapped that was not before: they are read
 * from the file (under SLUICE_FAULT=open:every=1, where no file opens,
 * through the mapping: the walks must still agree); and that a library
 * whose file was replaced after it was loaded is read through its
 * mapping, not from the new file. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <link.h>
#include <stdlib.h>
#include <unistd.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "t.h"
#include "../src/prof/unwind.h"


#define DEPTH 64
static volatile int sink;

/* Both walks from the same frame; frame 0 of each is its own call site in
 * here, so the comparison starts at 1. backtrace() may have a frame more
 * of its own before it (ThreadSanitizer's interceptor): the walks are
 * lined up on prof_unwind's frame 1. cap: prof_unwind's. */
static __attribute__((noinline)) void compare(const char *what, int cap)
{
    void *bt[DEPTH];
    uintptr_t own[DEPTH];
    int nb = backtrace(bt, DEPTH);
    int n = prof_unwind(own, (uint32_t)cap);
    int skip = 0; /* backtrace's frames before the caller's */
    while (skip < 3 && 1 + skip < nb && n > 1 && (uintptr_t)bt[1 + skip] != own[1])
        skip++;
    CHECK_MSG(skip < 3, "%s: prof_unwind's frame 1 %#lx is not among backtrace's first", what,
              (unsigned long)(n > 1 ? own[1] : 0));
    nb -= skip;
    if (nb > cap)
        nb = cap;
    CHECK_MSG(n == nb, "%s: %d frames, backtrace %d", what, n, nb);
    for (int i = 1; i < n && i < nb; i++)
        CHECK_MSG(own[i] == (uintptr_t)bt[i + skip], "%s: frame %d %#lx, backtrace %p", what, i, (unsigned long)own[i],
                  bt[i + skip]);
    sink++;
}

static __attribute__((noinline)) void leaf_plain(const char *what, int cap) { compare(what, cap); sink++; }

static __attribute__((noinline)) void leaf_vla(const char *what, int n) /* CFA from rbp */
{
    volatile char buf[n];
    buf[0] = 1;
    compare(what, DEPTH);
    sink += buf[0];
}

static __attribute__((noinline)) void leaf_big(const char *what) /* a 64 KiB frame (its offset packed whole) */
{
    volatile char buf[65536];
    buf[0] = 1;
    compare(what, DEPTH);
    sink += buf[100];
}

static __attribute__((noinline)) void recurse(int depth, void (*at_bottom)(void))
{
    if (depth)
        recurse(depth - 1, at_bottom);
    else
        at_bottom();
    sink++;
}

static void bottom_plain(void) { leaf_plain("recursion", DEPTH); }
static void bottom_vla(void) { leaf_vla("vla", 40 + sink % 7); }
static void bottom_big(void) { leaf_big("big frame"); }
static void bottom_cap(void) { leaf_plain("cap", 3); }

static void *thread_main(void *arg)
{
    (void)arg;
    recurse(5, bottom_plain);
    recurse(3, bottom_vla);
    return NULL;
}

static void on_signal(int sig)
{
    (void)sig;
    compare("signal handler", DEPTH);
}

/* ---- libc's unwind tables stay out of the resident set ---- */

struct range {
    uintptr_t lo, hi;
};

/* libc's .eh_frame_hdr to the end of the segment that holds it (.eh_frame
 * follows the header there) */
static int libc_tables(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct range *r = arg;
    if (!info->dlpi_name || !strstr(info->dlpi_name, "libc.so"))
        return 0;
    uintptr_t hdr = 0;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_GNU_EH_FRAME)
            hdr = info->dlpi_phdr[i].p_vaddr;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (hdr && ph->p_type == PT_LOAD && hdr >= ph->p_vaddr && hdr < ph->p_vaddr + ph->p_memsz) {
            r->lo = (info->dlpi_addr + hdr) & ~(uintptr_t)4095;
            r->hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
        }
    }
    return 1;
}

/* pages of [lo, hi) mapped in this process (/proc/self/pagemap's present bit) */
static long mapped_pages(struct range r)
{
    int fd = open("/proc/self/pagemap", O_RDONLY);
    if (fd < 0)
        return -1;
    long n = 0;
    for (uintptr_t a = r.lo; a < r.hi; a += 4096) {
        uint64_t e = 0;
        if (pread(fd, &e, 8, (off_t)(a / 4096 * 8)) == 8 && (e >> 63))
            n++;
    }
    close(fd);
    return n;
}

static int walked;
static uintptr_t walk[DEPTH];
static int by_walk(const void *a, const void *b)
{
    if (!walked)
        walked = prof_unwind(walk, DEPTH);
    return *(const int *)a - *(const int *)b;
}

static void tables_stay_out(void)
{
    struct range r = { 0, 0 };
    dl_iterate_phdr(libc_tables, &r);
    const char *fault = getenv("SLUICE_FAULT");
    if (!r.lo || (fault && strstr(fault, "open"))) {
        printf("unit_unwind: %s: libc's tables not checked\n", r.lo ? "no file opens" : "no libc found");
        return;
    }
    long before = mapped_pages(r);
    int v[64];
    for (int i = 0; i < 64; i++)
        v[i] = (i * 37) % 64;
    qsort(v, 64, sizeof v[0], by_walk);
    long after = mapped_pages(r);
    CHECK_MSG(walked > 3, "a walk from qsort's comparator found %d frames", walked);
    CHECK_MSG(before >= 0 && after == before, "libc's unwind tables: %ld pages mapped before the walk, %ld after",
              before, after);
    printf("unit_unwind: %d frames through qsort; libc's unwind tables: %ld of %lu pages mapped before and after\n",
           walked, after, (unsigned long)((r.hi - r.lo) / 4096));
}

/* ---- a library replaced on disk after it was loaded ---- */

static void through_library(void) { compare("through the replaced library", DEPTH); }

static void copy_file(const char *from, const char *to)
{
    int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0755);
    CHECK(in >= 0 && out >= 0);
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0)
        CHECK(write(out, buf, (size_t)n) == n);
    close(in);
    close(out);
}

/* unwind_cb's library, loaded from a copy; then the copy's path is given
 * another ELF file (this program's), as a package upgrade replaces a
 * library under a running program. The walk from the library's callback
 * must still agree with backtrace(): the file's first bytes are not the
 * mapping's, so the tables are read through the mapping. Read from the
 * new file at the old one's offsets, they are another file's bytes (the
 * walk stopped at the library's frame when the check was taken out). */
static void replaced_library(void)
{
    char dir[] = "/tmp/unit_unwind.XXXXXX", lib[64], next[64];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(lib, sizeof lib, "%s/libcb.so", dir);
    snprintf(next, sizeof next, "%s/next", dir);
    copy_file(UNWIND_CB_LIB, lib);
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    CHECK_MSG(h != NULL, "dlopen %s: %s", lib, dlerror());
    void (*cb_call)(void (*)(void)) = (void (*)(void (*)(void)))dlsym(h, "cb_call");
    CHECK(cb_call != NULL);
    copy_file("/proc/self/exe", next);
    CHECK(rename(next, lib) == 0);
    cb_call(through_library);
    unlink(lib);
    rmdir(dir);
}

int main(void)
{
    prof_unwind_init();
    tables_stay_out(); /* first: backtrace() below reads libc's tables through the mapping */
    void *warm[4];
    backtrace(warm, 4); /* loads libgcc_s */
    prof_unwind_init();
    uintptr_t probe[4];
    if (prof_unwind(probe, 4) < 0) {
        printf("unit_unwind: no _dl_find_object here (glibc < 2.35 or not x86-64): the full unwinder is used; skipped\n");
        return 0;
    }
    replaced_library(); /* before any walk has its rules in the cache */
    uint64_t h[3], m[3];
    for (volatile int i = 0; i < 2; i++) { /* the same stack twice (volatile: one call site, not unrolled) */
        prof_unwind_counts(&h[i], &m[i]);
        recurse(10, bottom_plain);
    }
    prof_unwind_counts(&h[2], &m[2]);
    CHECK_MSG(m[1] > m[0], "the first walk found everything in the cache");
    CHECK_MSG(m[2] == m[1], "a second walk of the same stack worked out %lu rules again", (unsigned long)(m[2] - m[1]));
    CHECK_MSG(h[2] - h[1] >= 12, "a second walk found only %lu rules in the cache", (unsigned long)(h[2] - h[1]));
    recurse(2, bottom_vla);
    recurse(1, bottom_big);
    recurse(20, bottom_cap);

    pthread_t t;
    pthread_create(&t, NULL, thread_main, NULL);
    pthread_join(t, NULL);

    signal(SIGUSR1, on_signal);
    raise(SIGUSR1);

    return t_done("unit_unwind");
}
