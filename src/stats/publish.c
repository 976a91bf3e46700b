/* publish.c — SLUICE_PUBLISH: the statistics written to a file while the
 * program runs, for the sluice command's timeline (tools/sluice).
 *
 * Each process writes its own file ("%p" in the path is the process id):
 * once at load (the file says the process is watched), at once in a fork
 * child (its own file, not its parent's), on every reclaimer tick (at most
 * every PUBLISH_EVERY_MS, without the smaps gauges: a page-table walk),
 * and the final figures, with them, from the library's exit handler. The
 * file is one JSON object:
 *
 *   {"pid":N,"ppid":N,"comm":"name","since_ns":N,"peak_rss_bytes":N,
 *    "final":false,"inherited":{counter:value,...},
 *    "stats":<sl_stats_json's object>}
 *
 * since_ns: CLOCK_MONOTONIC when this program was loaded into the process
 * (or the process forked), so that a reader can tell whether a program it
 * saw the process run came after the one that wrote the file. "inherited"
 * names the counters a fork child copied from its parent (until it
 * executes another program, which starts from zero). peak_rss_bytes is
 * the kernel's high-water mark (VmHWM), which no sampling misses.
 *
 * Invariants: one writer at a time (publish_lock), and the final write is
 * the last: a tick that comes after it (the reclaimer still runs while the
 * exit handlers do) writes nothing. A write goes to "<path>.<pid>.tmp" and
 * is renamed over <path>, so a reader sees a whole object or the previous
 * one. The lock is the lowest of sluice's and is not taken by fork's
 * prepare handler: a child whose parent's reclaimer was writing resets it.
 * Nothing here allocates (stack buffers) and errno is left as it was. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../base/fatal.h"
#include "../base/lock.h"
#include "../options/options.h"
#include "../os/os.h"
#include "sluice.h"
#include "thp.h"
#include "stats.h"

static SL_LOCK_DEFINE(publish_lock, LOCK_PUBLISH);
static bool final_written;                /* under publish_lock */
static bool forked;                       /* a fork child that has not executed since */
static uint64_t since_ns;                 /* set once at load, again in a fork child */
static uint64_t inherited[STAT_COUNT];    /* its counters at fork; set in the child alone */

/* A small buffer in front of write(2). */
struct wbuf {
    int fd;
    size_t n;
    char b[512];
};

static void w_flush(struct wbuf *w)
{
    ssize_t r = w->n ? write(w->fd, w->b, w->n) : 0;
    (void)r; /* a full disk: the reader keeps the previous file, as after a failed rename */
    w->n = 0;
}

static void w_str(struct wbuf *w, const char *s)
{
    for (; *s; s++) {
        if (w->n == sizeof w->b)
            w_flush(w);
        w->b[w->n++] = *s;
    }
}

static void w_u64(struct wbuf *w, uint64_t v)
{
    char num[24];
    num[fmt_u64(num, v)] = 0;
    w_str(w, num);
}

/* /proc/self/status's VmHWM in bytes; 0 if unread. */
static uint64_t peak_rss(void)
{
    char text[4096];
    if (os_read_file("/proc/self/status", text, sizeof text) <= 0)
        return 0;
    return smaps_kb_field(text, "VmHWM:");
}

/* The object's members before "stats". */
static void write_head(int fd, bool final)
{
    struct wbuf w = { .fd = fd, .n = 0 };
    char comm[32];
    long len = os_read_file("/proc/self/comm", comm, sizeof comm);
    if (len < 0)
        len = 0;
    comm[len] = 0;
    for (long i = 0; i < len; i++) /* a string JSON needs no escape in */
        if (comm[i] == '"' || comm[i] == '\\' || (unsigned char)comm[i] < 0x20)
            comm[i] = comm[i] == '\n' && i == len - 1 ? 0 : '?';
    w_str(&w, "{\"pid\":");
    w_u64(&w, (uint64_t)getpid());
    w_str(&w, ",\"ppid\":");
    w_u64(&w, (uint64_t)getppid());
    w_str(&w, ",\"comm\":\"");
    w_str(&w, comm);
    w_str(&w, "\",\"since_ns\":");
    w_u64(&w, since_ns);
    w_str(&w, ",\"peak_rss_bytes\":");
    w_u64(&w, peak_rss());
    w_str(&w, final ? ",\"final\":true,\"inherited\":{" : ",\"final\":false,\"inherited\":{");
    bool first = true;
    for (size_t i = 0; forked && i < STAT_COUNT; i++)
        if (inherited[i]) {
            w_str(&w, first ? "\"" : ",\"");
            first = false;
            w_str(&w, sl_stat_name(i));
            w_str(&w, "\":");
            w_u64(&w, inherited[i]);
        }
    w_str(&w, "},\"stats\":");
    w_flush(&w);
}

void stats_publish(enum publish_when when)
{
    if (!sl_opt.publish)
        return;
    int saved = errno;
    char path[320], tmp[340], pid[24];
    pid[fmt_u64(pid, (uint64_t)getpid())] = 0;
    if (!fmt_path(path, sizeof path, sl_publish_path, "") || !fmt_path(tmp, sizeof tmp - 32, sl_publish_path, ".")) {
        errno = saved;
        return;
    }
    strcat(strcat(tmp, pid), ".tmp");
    lock_acquire(&publish_lock);
    if (!since_ns)
        since_ns = os_now_ns();
    if (!final_written) {
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd >= 0) { /* else the folder is gone (the reader ended): nothing to tell */
            write_head(fd, when == PUBLISH_FINAL);
            stats_json(fd, when == PUBLISH_FINAL);
            ssize_t r = write(fd, "}\n", 2);
            (void)r; /* as in w_flush */
            close(fd);
            if (rename(tmp, path) == 0 && when == PUBLISH_FINAL)
                final_written = true;
        }
    }
    lock_release(&publish_lock);
    errno = saved;
}

void stats_publish_fork_child(void)
{
    lock_reset(&publish_lock);
    final_written = false;
    if (!sl_opt.publish)
        return;
    forked = true;
    since_ns = os_now_ns();
    stats_counters(inherited);
    stats_publish(PUBLISH_START);
}
