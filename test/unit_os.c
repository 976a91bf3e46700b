/* Unit: the os layer's mappings. A 2 MiB-aligned mapping comes out aligned
 * whether the kernel's first choice (the exact size) is aligned or not (a
 * 64 KiB one rarely is: then the over-map and trim), and a reservation at a
 * free aligned hint lands there. Pageblocks' and huge mappings' memory is
 * MAP_NORESERVE and sluice's metadata is not, so that the kernel never
 * merges the two into one mapping (VmFlags "nr" in /proc/self/smaps;
 * stats/thp.c relies on it). */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "../src/os/os.h"
#include "t.h"

/* 1 if the mapping holding p is VM_NORESERVE, 0 if not, -1 if not found. */
static int noreserve(const void *p)
{
    char line[512];
    return proc_mapping_line(p, "VmFlags:", line, sizeof line) ? strstr(line, " nr") != NULL : -1;
}

int main(void)
{
    for (int i = 0; i < 8; i++) {
        uint8_t *p = os_map_aligned(64 << 10, SL_BLOCK);
        CHECK(p && !((uintptr_t)p & (SL_BLOCK - 1)));
        if (!p)
            continue;
        memset(p, 1, 64 << 10); /* read-write */
        CHECK_EQ(noreserve(p), 1);
        os_unmap(p, 64 << 10);
    }
    uint8_t *r = os_reserve_aligned(SL_BLOCK, SL_BLOCK, (void *)(uintptr_t)4096); /* a misaligned hint: not used */
    CHECK(r && !((uintptr_t)r & (SL_BLOCK - 1)));
    uint8_t *below = os_reserve_aligned(SL_BLOCK, SL_BLOCK, r - SL_BLOCK);
    CHECK(below && !((uintptr_t)below & (SL_BLOCK - 1)));
    CHECK_EQ(noreserve(below), 1);
    os_unmap(below, SL_BLOCK);
    os_unmap(r, SL_BLOCK);
    void *m = os_map(1 << 20); /* metadata */
    CHECK(m != NULL);
    memset(m, 1, 1 << 20);
    CHECK_EQ(noreserve(m), 0);
    os_unmap(m, 1 << 20);
    return t_done("unit_os");
}
