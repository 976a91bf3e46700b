/* proc.h — the process as the kernel sees it, for the tests (t.h includes
 * it) and the benchmark programs (bench/common.h): fields of
 * /proc/self/smaps_rollup, /proc/self/status and /proc/vmstat, and whether
 * transparent hugepages are on. Nothing here allocates (a read into a
 * buffer on the stack), so a reading does not move what it measures.
 * A "Key: N" field is found only at the start of a line. */
#ifndef PROC_H
#define PROC_H

#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A /proc, /sys or cgroup file into buf (at most size - 1 bytes, then a
 * NUL): its length, or -1 (buf empty) if it cannot be opened. */
static inline long proc_read(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    size_t n = 0;
    ssize_t r;
    while (fd >= 0 && n < size - 1 && (r = read(fd, buf + n, size - 1 - n)) > 0)
        n += (size_t)r;
    if (fd >= 0)
        close(fd);
    buf[n] = 0;
    return fd >= 0 ? (long)n : -1;
}

/* The number after key and sep at the start of a line of buf; -1 if
 * there is none. */
static inline long long proc_field(const char *buf, const char *key, char sep)
{
    size_t kl = strlen(key);
    for (const char *p = buf; (p = strstr(p, key)); p += kl)
        if ((p == buf || p[-1] == '\n') && p[kl] == sep)
            return strtoll(p + kl + 1, NULL, 10);
    return -1;
}

/* A field of /proc/self/smaps_rollup in bytes (key "Rss", "LazyFree",
 * "AnonHugePages", ...); 0 if unread. */
static inline uint64_t proc_smaps(const char *key)
{
    char buf[4096];
    proc_read("/proc/self/smaps_rollup", buf, sizeof buf);
    long long kib = proc_field(buf, key, ':');
    return kib > 0 ? (uint64_t)kib * 1024 : 0;
}

/* What the process costs the machine: Rss - LazyFree, in bytes. */
static inline uint64_t proc_held(void) { return proc_smaps("Rss") - proc_smaps("LazyFree"); }

/* A field of /proc/self/status as it is written ("Threads" a count,
 * "VmHWM" in KiB), or -1. */
static inline long proc_status(const char *key)
{
    char buf[4096];
    proc_read("/proc/self/status", buf, sizeof buf);
    return (long)proc_field(buf, key, ':');
}

/* The process's threads, or -1. */
static inline int proc_threads(void) { return (int)proc_status("Threads"); }

/* A counter of /proc/vmstat ("thp_fault_fallback", ...); 0 if unread. */
static inline uint64_t proc_vmstat(const char *key)
{
    char buf[16384];
    proc_read("/proc/vmstat", buf, sizeof buf);
    long long v = proc_field(buf, key, ' ');
    return v > 0 ? (uint64_t)v : 0;
}

/* The line (without its newline) that starts with key in the entry of
 * /proc/self/smaps for the mapping holding p ("VmFlags:", "Rss:", ...),
 * copied to out; false if /proc/self/smaps cannot say. */
static inline bool proc_mapping_line(const void *p, const char *key, char *out, size_t cap)
{
    int fd = open("/proc/self/smaps", O_RDONLY | O_CLOEXEC);
    char buf[8192];
    size_t have = 0, kl = strlen(key);
    bool in = false, found = false;
    ssize_t r;
    while (fd >= 0 && !found && (r = read(fd, buf + have, sizeof buf - 1 - have)) > 0) {
        have += (size_t)r;
        buf[have] = 0;
        char *line = buf, *nl;
        for (; !found && (nl = strchr(line, '\n')); line = nl + 1) {
            *nl = 0;
            unsigned long lo, hi;
            char *dash = strchr(line, '-'), *space = strchr(line, ' ');
            if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && dash && space && dash < space)
                in = (uintptr_t)p >= lo && (uintptr_t)p < hi; /* a mapping's first line */
            else if (in && !strncmp(line, key, kl))
                found = snprintf(out, cap, "%s", line) > 0;
        }
        have = (size_t)(buf + have - line);
        memmove(buf, line, have);
    }
    if (fd >= 0)
        close(fd);
    return found;
}

/* Transparent hugepages are not "[never]" (an unreadable setting: off). */
static inline bool proc_thp_enabled(void)
{
    char buf[128];
    proc_read("/sys/kernel/mm/transparent_hugepage/enabled", buf, sizeof buf);
    return buf[0] && !strstr(buf, "[never]");
}

#endif
