/* thp.h — hugepage coverage of sluice's memory (thp.c). */
#ifndef SL_THP_H
#define SL_THP_H

#include "../base/common.h"

struct thp_usage {
    uint64_t block_rss, block_thp; /* pageblocks: resident, of it in hugepages */
    uint64_t huge_rss, huge_thp;   /* huge mappings: the same */
};
/* Read /proc/self/smaps; false (all zero) if it cannot be read. */
bool thp_usage(struct thp_usage *u);

/* The figure of the line of text that starts with key ("Rss:", "VmHWM:":
 * /proc's "Key:   N kB"), in bytes; 0 if no line does. */
uint64_t smaps_kb_field(const char *text, const char *key);

#endif
