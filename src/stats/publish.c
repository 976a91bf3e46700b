/* publish.c — SLUICE_PUBLISH: the statistics written to a file while the
 * program runs, for the sluice command's timeline (tools/sluice).
 *
 * The reclaimer thread writes them every tick (at most every
 * PUBLISH_EVERY_MS), without the smaps gauges (a page-table walk); the
 * library's exit handler writes the final ones with them. Each write goes
 * to "<path>.tmp" and is renamed over <path>, so a reader sees a whole
 * JSON object or the previous one. "%p" in the path is the process id, so
 * the processes a program forks or executes each have their own file.
 * Nothing here allocates: the path is built in a stack buffer. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "../base/fatal.h"
#include "../options/options.h"
#include "stats.h"

/* path with %p replaced by pid; false if it does not fit */
static bool expand(char *out, size_t cap, const char *path, const char *suffix)
{
    size_t n = 0;
    for (const char *s = path; *s; s++) {
        char num[24];
        size_t d = 1;
        const char *piece = s;
        if (s[0] == '%' && s[1] == 'p') {
            d = fmt_u64(num, (uint64_t)getpid());
            piece = num;
            s++;
        }
        if (n + d >= cap)
            return false;
        for (size_t i = 0; i < d; i++)
            out[n++] = piece[i];
    }
    for (; *suffix; suffix++) {
        if (n + 1 >= cap)
            return false;
        out[n++] = *suffix;
    }
    out[n] = 0;
    return true;
}

void stats_publish(bool final)
{
    if (!sl_opt.publish)
        return;
    char path[320], tmp[320];
    if (!expand(path, sizeof path, sl_publish_path, "") || !expand(tmp, sizeof tmp, sl_publish_path, ".tmp"))
        return;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return; /* a directory gone (the reader ended): nothing to tell */
    stats_json(fd, final);
    close(fd);
    rename(tmp, path);
}
