/* Unit: the os layer's mappings. A 2 MiB-aligned mapping comes out aligned
 * whether the kernel's first choice (the exact size) is aligned or not (a
 * 64 KiB one rarely is: then the over-map and trim), and a reservation at a
 * free aligned hint lands there. Pageblocks' and huge mappings' memory is
 * MAP_NORESERVE and sluice's metadata is not, so that the kernel never
 * merges the two into one mapping (VmFlags "nr" in /proc/self/smaps;
 * stats/thp.c relies on it). os_purge_many advises ranges in one call
 * where the kernel takes it, and a call that stops at a range it refuses
 * leaves the rest to os_purge one by one: the refused range says so, the
 * ranges after it are advised, errno is as it was. */
#define _GNU_SOURCE
#include <errno.h>
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

/* three runs of 4 pages, the middle one unmapped: process_madvise
 * advises the first and stops at the second (ENOMEM); the second and
 * third then go one by one */
static void purge_many_partial(void)
{
    size_t run = 4 * 4096;
    uint8_t *p = os_map(3 * run);
    CHECK(p != NULL);
    if (!p)
        return;
    memset(p, 1, 3 * run);
    os_unmap(p + run, run);
    struct os_range r[3] = { { p, run }, { p + run, run }, { p + 2 * run, run } };
    enum os_purge got[3];
    errno = 1234;
    unsigned batched = os_purge_many(r, 3, OS_CLEAN, got);
    CHECK_EQ(errno, 1234);
    printf("purge_many_partial: %u of 3 ranges in the one call\n", batched);
    CHECK(batched <= 1); /* the call stops at the unmapped range */
    CHECK_EQ(got[0], OS_CLEAN);
    CHECK_EQ(got[1], OS_NONE);
    CHECK_EQ(got[2], OS_CLEAN);
    CHECK_EQ(os_resident(p, run) + os_resident(p + 2 * run, run), 0);
    os_unmap(p, run);
    os_unmap(p + 2 * run, run);
}

int main(void)
{
    purge_many_partial();
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
