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

void stats_publish(bool final)
{
    if (!sl_opt.publish)
        return;
    char path[320], tmp[320];
    if (!fmt_path(path, sizeof path, sl_publish_path, "") || !fmt_path(tmp, sizeof tmp, sl_publish_path, ".tmp"))
        return;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return; /* a directory gone (the reader ended): nothing to tell */
    stats_json(fd, final);
    close(fd);
    rename(tmp, path);
}
