/* os.h — the only layer that calls the kernel (mechanism, no policy).
 *
 * Every function returns 0 or an errno value (or NULL with errno set for the
 * mapping calls); none allocates, none uses stdio.
 */
#ifndef SL_OS_H
#define SL_OS_H

#include "../base/common.h"

void *os_map(size_t size);                          /* read-write anonymous */
void *os_map_aligned(size_t size, size_t align);    /* align: power of two */
/* The same, PROT_NONE (address space only), at hint if that is free and
 * aligned (NULL: anywhere). */
void *os_reserve_aligned(size_t size, size_t align, void *hint);
int   os_unmap(void *p, size_t size);
void *os_remap(void *p, size_t old_size, size_t new_size, void *fixed); /* NULL fixed: in place only */
int   os_huge(void *p, size_t size);                /* MADV_HUGEPAGE */
int   os_nohuge(void *p, size_t size);              /* MADV_NOHUGEPAGE */
int   os_collapse(void *p, size_t size);            /* MADV_COLLAPSE (Linux 6.1): errno, or 0 */
int   os_protect(void *p, size_t size, bool rw);    /* PROT_READ|PROT_WRITE or PROT_NONE; 0 or errno */
/* Bytes of [p, p + size) (page aligned) that are resident, by mincore(2):
 * a page the kernel has in memory, lazily freed (MADV_FREE) ones included
 * until it takes them, as smaps' Rss counts them. 0 where the range is
 * not mapped (ENOMEM). A walk of page tables, no text: cheap. */
size_t os_resident(void *p, size_t size);
/* Give pages back: MADV_FREE (lazy: the kernel takes them when it needs
 * them; falls back to MADV_DONTNEED, for good, where the kernel refuses it)
 * or MADV_DONTNEED (clean: they read as zero). Returns the advice that
 * took effect: OS_LAZY or OS_CLEAN, or OS_NONE if the kernel refused (the
 * pages are as they were: dirty, and must not be counted clean). */
enum os_purge { OS_NONE = 0, OS_LAZY = 1, OS_CLEAN = 2 };
enum os_purge os_purge(void *p, size_t size, enum os_purge how);
/* os_purge of n ranges (page aligned, n <= OS_PURGE_MANY) in one system
 * call where the kernel takes it: process_madvise(2) on the calling
 * process, any advice since Linux 6.14, which also flushes the TLB once
 * for all of them. Elsewhere (an older kernel, a refusal: asked once)
 * and for what a call left undone, os_purge one range at a time.
 * got[i]: what took effect on range i, as os_purge says. Returns how
 * many ranges the one process_madvise call advised (0: each went alone). */
#define OS_PURGE_MANY 64
struct os_range {
    void *p;
    size_t size;
};
unsigned os_purge_many(const struct os_range *r, unsigned n, enum os_purge how, enum os_purge *got);
uint64_t os_now_ms(void);                          /* monotonic, coarse */
uint64_t os_now_ns(void);                          /* monotonic, fine */
uint64_t os_cpu_ns(bool process); /* CPU time used by the whole process (exited threads too), or by this thread */
/* Has the program never created a thread? glibc's flag (2.32+), true
 * until the process first creates a thread (pthread_create clears it
 * before the thread starts), as glibc's malloc and libstdc++'s shared_ptr
 * read it to skip their atomics. Weak, so that a libc without it counts
 * as multi-threaded. Inline: a free's fast path reads it. */
extern char __libc_single_threaded __attribute__((weak));
sl_inline bool os_single_threaded(void) { return &__libc_single_threaded && __libc_single_threaded; }
/* A detached background thread with every signal blocked and a 64 KiB
 * stack; false if pthread_create refused. */
bool os_thread_start(void *(*fn)(void *), void *arg);
/* Read a small file whole into buf (NUL-terminated); length, or -1. */
long os_read_file(const char *path, char *buf, size_t cap);
/* For files read again and again (by a background thread): open once, on
 * a descriptor moved above OS_HIGH_FD so that it never takes a low number
 * a program expects from its own next open(); -1 on failure. Then read it
 * whole from offset 0, as os_read_file does. */
#define OS_HIGH_FD 1000
int os_open_high(const char *path);
long os_pread_file(int fd, char *buf, size_t cap);
void os_close(int fd);
/* A file read in pieces at offsets, by code that must stay out of libc
 * (the profiler's unwinder reads unwind tables this way: a libc function
 * it has not run yet would fault a page of libc's code in, and the
 * kernel maps 64 KiB around each such fault). Raw system calls on
 * x86-64; errno untouched everywhere. os_file_open: read-only,
 * close-on-exec, -1 on failure; os_file_pread: the bytes read (short
 * only at the file's end), -1 on failure. */
int os_file_open(const char *path);
long os_file_pread(int fd, void *buf, size_t n, uint64_t off);
void os_file_close(int fd);
/* A file read as a stream (smaps): open read-only, read up to cap bytes
 * (the count, 0 at the end, -1 on error). */
int os_open_read(const char *path);
long os_read(int fd, char *buf, size_t cap);
void  os_futex_wait(_Atomic int *addr, int val);
void  os_futex_wait_ms(_Atomic int *addr, int val, uint64_t ms); /* or until ms pass */
void  os_futex_wake(_Atomic int *addr, int n);
void  os_yield(void);                              /* sched_yield, errno kept */
void  os_write_err(const char *s, size_t n);        /* write(2) to stderr, all of it */

/* The lowercase hex number at *s (a /proc/self/maps address), *s left
 * after it. */
sl_inline uint64_t os_parse_hex(const char **s)
{
    uint64_t v = 0;
    for (;; (*s)++) {
        char c = **s;
        unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0') : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10) : 16;
        if (d == 16)
            return v;
        v = v << 4 | d;
    }
}

#endif
