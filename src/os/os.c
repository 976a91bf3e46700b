/* os.c — mmap, munmap, mremap, madvise, futex, write.
 *
 * Invariants: errno is preserved by every call that succeeds (a successful
 * malloc must leave errno alone), and set to ENOMEM by a failed mapping.
 * In test builds (fault.h) mmap, mremap, madvise and mprotect can be made
 * to fail.
 */
#define _GNU_SOURCE
#include "os.h"

#include "fault.h"

#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <fcntl.h>
#include <time.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

/* Pageblocks and huge mappings are MAP_NORESERVE; sluice's own metadata
 * (os_map) is not, so that the kernel never merges a metadata mapping
 * with a neighbouring block or huge mapping into one VMA: smaps would
 * then show the block's hugepages under a mapping that starts outside
 * sluice's memory (stats/thp.c tells sluice's mappings by their start). */
#define MAP_DATA (MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE)
#define MAP_META (MAP_PRIVATE | MAP_ANONYMOUS)

static void *map_once(size_t size, int prot, int flags)
{
    return config_fault && fault_hit(FAULT_MMAP) ? MAP_FAILED : mmap(NULL, size, prot, flags, -1, 0);
}

static void *map(size_t size, int prot, int flags)
{
    int saved = errno;
    void *p = map_once(size, prot, flags);
    if (p == MAP_FAILED) {
        errno = ENOMEM;
        return NULL;
    }
    errno = saved;
    return p;
}

/* The kernel placed an exact-size mapping with no hint off the alignment
 * once: its layout does not favour it here (a sanitizer's reservations, a
 * small address space), so unhinted mappings over-map at once, one mmap
 * instead of two for every one (and a rule that fails every other mmap
 * cannot refuse each of them). */
static _Atomic bool unhinted_misaligned;

static void *map_aligned(size_t size, size_t align, int prot, void *hint)
{
    if (align <= SL_PAGE)
        return map(size, prot, MAP_DATA);
    /* First the exact size, at the hint or (none) where the kernel likes:
     * it fills address space top down, so a size that is a multiple of
     * the alignment mostly lands aligned, in the hole a freed one left or
     * right below the last one. One call instead of three. */
    if (!((uintptr_t)hint & (align - 1)) && (hint || !ld_relaxed(&unhinted_misaligned)) &&
        !(config_fault && fault_hit(FAULT_MMAP))) {
        int saved = errno;
        void *p = mmap(hint, size, prot, MAP_DATA, -1, 0);
        errno = saved;
        if (p != MAP_FAILED && (hint ? p == hint : !((uintptr_t)p & (align - 1))))
            return p;
        if (p != MAP_FAILED && !hint)
            st_relaxed(&unhinted_misaligned, true);
        if (p != MAP_FAILED)
            os_unmap(p, size); /* elsewhere, or misaligned: over-map and trim */
    }
    if (size + align < size) {
        errno = ENOMEM;
        return NULL;
    }
    uint8_t *p = map(size + align, prot, MAP_DATA);
    if (!p)
        return NULL;
    uint8_t *a = (uint8_t *)align_up((uintptr_t)p, align);
    if (a > p)
        os_unmap(p, (size_t)(a - p));
    size_t tail = (size_t)((p + size + align) - (a + size));
    if (tail)
        os_unmap(a + size, tail);
    return a;
}

void *os_map(size_t size) { return map(size, PROT_READ | PROT_WRITE, MAP_META); }
void *os_map_aligned(size_t size, size_t align) { return map_aligned(size, align, PROT_READ | PROT_WRITE, NULL); }
void *os_reserve_aligned(size_t size, size_t align, void *hint) { return map_aligned(size, align, PROT_NONE, hint); }

int os_unmap(void *p, size_t size)
{
    int saved = errno;
    int r = munmap(p, size) ? errno : 0;
    errno = saved;
    return r;
}

void *os_remap(void *p, size_t old_size, size_t new_size, void *fixed)
{
    int saved = errno;
    void *q = config_fault && fault_hit(FAULT_MREMAP) ? MAP_FAILED
              : fixed ? mremap(p, old_size, new_size, MREMAP_MAYMOVE | MREMAP_FIXED, fixed)
                    : mremap(p, old_size, new_size, 0);
    errno = saved;
    return q == MAP_FAILED ? NULL : q;
}

static int advise(void *p, size_t size, int advice)
{
    int saved = errno;
    int r = config_fault && fault_hit(FAULT_MADVISE) ? EAGAIN : madvise(p, size, advice) ? errno : 0;
    errno = saved;
    return r;
}


int os_protect(void *p, size_t size, bool rw)
{
    int saved = errno;
    int r = config_fault && fault_hit(FAULT_MPROTECT)       ? ENOMEM
            : mprotect(p, size, rw ? PROT_READ | PROT_WRITE : PROT_NONE) ? errno
                                                                        : 0;
    errno = saved;
    return r;
}

int os_huge(void *p, size_t size) { return advise(p, size, MADV_HUGEPAGE); }
int os_nohuge(void *p, size_t size) { return advise(p, size, MADV_NOHUGEPAGE); }

size_t os_resident(void *p, size_t size)
{
    int saved = errno;
    unsigned char vec[512]; /* one byte a page: 2 MiB a call */
    size_t n = 0;
    for (size_t off = 0; off < size; off += sizeof vec << SL_PAGE_SHIFT) {
        size_t len = size - off < sizeof vec << SL_PAGE_SHIFT ? size - off : sizeof vec << SL_PAGE_SHIFT;
        if (mincore((char *)p + off, len, vec))
            continue; /* unmapped meanwhile: none of it is ours */
        for (size_t i = 0; i < len >> SL_PAGE_SHIFT; i++)
            n += vec[i] & 1;
    }
    errno = saved;
    return n << SL_PAGE_SHIFT;
}

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25 /* Linux 6.1; older headers lack it */
#endif
int os_collapse(void *p, size_t size)
{
    if (config_fault && fault_hit(FAULT_COLLAPSE))
        return EINVAL; /* as a kernel without MADV_COLLAPSE */
    return advise(p, size, MADV_COLLAPSE);
}

static _Atomic int madv_free_refused;

enum os_purge os_purge(void *p, size_t size, enum os_purge how)
{
#ifdef MADV_FREE
    if (how == OS_LAZY && !ld_relaxed(&madv_free_refused)) {
        int r = advise(p, size, MADV_FREE);
        if (r != EINVAL)
            return r ? OS_NONE : OS_LAZY;
        st_relaxed(&madv_free_refused, 1); /* kernel before 4.5, or a mapping it refuses */
    }
#endif
    return advise(p, size, MADV_DONTNEED) ? OS_NONE : OS_CLEAN;
}

/* pidfd for the calling process (Linux 6.15's PIDFD_SELF_PROCESS; 6.14
 * took only a pidfd from pidfd_open, which would cost the program a file
 * descriptor: there process_madvise says EBADF, and ranges go one by one) */
#define PIDFD_SELF_PROCESS (-10001)
static _Atomic int purge_many_refused;

/* The ranges as process_madvise reads them: os_range has iovec's layout. */
_Static_assert(sizeof(struct os_range) == sizeof(struct iovec) &&
                   offsetof(struct os_range, p) == offsetof(struct iovec, iov_base) &&
                   offsetof(struct os_range, size) == offsetof(struct iovec, iov_len),
               "os_range is an iovec");

unsigned os_purge_many(const struct os_range *r, unsigned n, enum os_purge how, enum os_purge *got)
{
    unsigned i = 0;
#if defined(SYS_process_madvise) && defined(MADV_FREE)
    /* injected failures stay per call: the ranges go one by one */
    if (n > 1 && !config_fault && !ld_relaxed(&purge_many_refused) &&
        (how == OS_CLEAN || !ld_relaxed(&madv_free_refused))) {
        int saved = errno;
        long done = syscall(SYS_process_madvise, PIDFD_SELF_PROCESS, (const struct iovec *)r, (size_t)n,
                            how == OS_LAZY ? MADV_FREE : MADV_DONTNEED, 0u);
        if (done < 0 && (errno == ENOSYS || errno == EINVAL || errno == EBADF || errno == EPERM))
            st_relaxed(&purge_many_refused, 1); /* an older kernel, a sandbox: for good */
        errno = saved;
        for (; done > 0 && i < n && (size_t)done >= r[i].size; i++) { /* bytes advised, in order */
            done -= (long)r[i].size;
            got[i] = how;
        }
    }
#endif
    unsigned batched = i;
    for (; i < n; i++)
        got[i] = os_purge(r[i].p, r[i].size, how);
    return batched;
}

uint64_t os_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t os_cpu_ns(bool process)
{
    struct timespec ts;
    if (clock_gettime(process ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_THREAD_CPUTIME_ID, &ts))
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t os_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* open for reading; injected failures as a sandbox without /proc (EACCES) */
static int open_read(const char *path)
{
    if (config_fault && fault_hit(FAULT_OPEN)) {
        errno = EACCES;
        return -1;
    }
    return open(path, O_RDONLY | O_CLOEXEC);
}

int os_open_high(const char *path)
{
    int saved = errno;
    int fd = open_read(path);
    if (fd >= 0 && fd < OS_HIGH_FD) {
        int high = fcntl(fd, F_DUPFD_CLOEXEC, OS_HIGH_FD);
        if (high >= 0) {
            close(fd);
            fd = high;
        }
    }
    errno = saved;
    return fd;
}

long os_pread_file(int fd, char *buf, size_t cap)
{
    int saved = errno;
    long n = 0;
    ssize_t r = 0;
    while ((size_t)n < cap - 1 && (r = pread(fd, buf + n, cap - 1 - (size_t)n, n)) > 0)
        n += r;
    buf[n] = 0;
    if (n == 0 && r < 0)
        n = -1;
    errno = saved;
    return n;
}

int os_open_read(const char *path)
{
    int saved = errno;
    int fd = open_read(path);
    errno = saved;
    return fd;
}

long os_read(int fd, char *buf, size_t cap)
{
    int saved = errno;
    ssize_t r;
    while ((r = read(fd, buf, cap)) < 0 && errno == EINTR)
        ;
    errno = saved;
    return r;
}

void os_close(int fd)
{
    int saved = errno;
    close(fd);
    errno = saved;
}

#ifdef __x86_64__
static long raw_syscall(long nr, long a, long b, long c, long d)
{
    long ret;
    register long r10 __asm__("r10") = d;
    __asm__ volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10) : "rcx", "r11", "memory");
    return ret; /* -errno on failure */
}
#else
static long raw_syscall(long nr, long a, long b, long c, long d)
{
    int saved = errno;
    long ret = syscall(nr, a, b, c, d);
    if (ret < 0)
        ret = -errno;
    errno = saved;
    return ret;
}
#endif

int os_file_open(const char *path)
{
    if (config_fault && fault_hit(FAULT_OPEN))
        return -1;
    long fd = raw_syscall(SYS_openat, AT_FDCWD, (long)path, O_RDONLY | O_CLOEXEC, 0);
    return fd < 0 ? -1 : (int)fd;
}

long os_file_pread(int fd, void *buf, size_t n, uint64_t off)
{
    size_t got = 0;
    while (got < n) {
        long r = raw_syscall(SYS_pread64, fd, (long)((char *)buf + got), (long)(n - got), (long)(off + got));
        if (r == -EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (long)got;
}

void os_file_close(int fd) { raw_syscall(SYS_close, fd, 0, 0, 0); }

long os_read_file(const char *path, char *buf, size_t cap)
{
    int saved = errno;
    int fd = open_read(path);
    long n = -1;
    if (fd >= 0) {
        n = 0;
        ssize_t r;
        while ((size_t)n < cap - 1 && (r = read(fd, buf + n, cap - 1 - (size_t)n)) > 0)
            n += r;
        buf[n] = 0;
        close(fd);
    }
    errno = saved;
    return n;
}

void os_futex_wait(_Atomic int *addr, int val)
{
    int saved = errno;
    syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
    errno = saved;
}

void os_futex_wait_ms(_Atomic int *addr, int val, uint64_t ms)
{
    int saved = errno;
    struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000 };
    syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, &ts, NULL, 0);
    errno = saved;
}

void os_futex_wake(_Atomic int *addr, int n)
{
    int saved = errno;
    syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
    errno = saved;
}

void os_yield(void)
{
    int saved = errno;
    sched_yield();
    errno = saved;
}

void os_write_err(const char *s, size_t n)
{
    int saved = errno;
    while (n) {
        ssize_t w = write(2, s, n);
        if (w <= 0) {
            if (w < 0 && errno == EINTR)
                continue;
            break;
        }
        s += w;
        n -= (size_t)w;
    }
    errno = saved;
}

bool os_thread_start(void *(*fn)(void *), void *arg)
{
    int saved = errno;
    sigset_t all, old;
    sigfillset(&all);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 64 << 10);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t t;
    bool ok = pthread_create(&t, &attr, fn, arg) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    errno = saved;
    return ok;
}
