/* thp.c — hugepage coverage: how much of sluice's resident memory the
 * kernel backs with transparent hugepages, from its own account
 * (/proc/self/smaps: Rss and AnonHugePages of every mapping). A mapping
 * is sluice's when the 2 MiB granule it starts in is in the pagemap: a
 * pageblock (PM_BLOCK) or a huge mapping (PM_HUGE); the kernel merges
 * neighbouring mappings only when they are alike, so a mapping that starts
 * in sluice's memory is sluice's. The file is streamed through a stack
 * buffer, a line at a time: no allocation, however many mappings. Costly
 * (the kernel walks every page table), so it is read only for these
 * gauges, never for the others.
 */
#include "thp.h"

#include <string.h>

#include "../os/os.h"
#include "../pagemap/pagemap.h"

uint64_t smaps_kb_field(const char *text, const char *key)
{
    size_t kl = strlen(key);
    for (const char *p = text; (p = strstr(p, key)); p += kl) {
        if (p != text && p[-1] != '\n')
            continue;
        uint64_t v = 0;
        for (p += kl; *p == ' ' || *p == '\t'; p++)
            ;
        for (; *p >= '0' && *p <= '9'; p++)
            v = v * 10 + (uint64_t)(*p - '0');
        return v << 10;
    }
    return 0;
}

/* One line of smaps; *kind: whose mapping the fields that follow are of. */
static void smaps_line(const char *line, uintptr_t *kind, struct thp_usage *u)
{
    const char *s = line;
    uint64_t start = os_parse_hex(&s);
    if (*s == '-' && s != line) { /* a mapping's first line: "start-end perms ..." */
        *kind = pagemap_get((uintptr_t)align_down(start, SL_BLOCK)) & (PM_BLOCK | PM_HUGE);
        return;
    }
    if (!*kind)
        return;
    bool block = *kind & PM_BLOCK;
    if (!strncmp(line, "Rss:", 4))
        *(block ? &u->block_rss : &u->huge_rss) += smaps_kb_field(line, "Rss:");
    else if (!strncmp(line, "AnonHugePages:", 14))
        *(block ? &u->block_thp : &u->huge_thp) += smaps_kb_field(line, "AnonHugePages:");
}

bool thp_usage(struct thp_usage *u)
{
    memset(u, 0, sizeof *u);
    int fd = os_open_read("/proc/self/smaps");
    if (fd < 0)
        return false;
    char buf[8192];
    size_t have = 0;
    uintptr_t kind = 0;
    bool skipping = false; /* in a line longer than the buffer (a long path): drop it */
    for (;;) {
        long n = os_read(fd, buf + have, sizeof buf - 1 - have);
        if (n <= 0)
            break;
        have += (size_t)n;
        buf[have] = 0;
        char *line = buf, *nl;
        while ((nl = strchr(line, '\n'))) {
            *nl = 0;
            if (!skipping)
                smaps_line(line, &kind, u);
            skipping = false;
            line = nl + 1;
        }
        have = (size_t)(buf + have - line);
        if (have == sizeof buf - 1) {
            have = 0;
            skipping = true;
        }
        memmove(buf, line, have);
    }
    os_close(fd);
    return true;
}
