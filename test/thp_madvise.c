/* SLUICE_THP=madvise (page.c block_new): a new pageblock is advised
 * MADV_HUGEPAGE before anything touches it, so the fault that writes its
 * header populates it with a hugepage at once: the program's first block
 * is a hugepage as soon as one object is handed out, with no khugepaged,
 * and filling it takes no more faults. Advised after the header's write
 * (the order before), the block faulted 4 KiB at a time: this test then
 * saw 0 bytes of hugepage and about 300 faults. Skipped where THP is
 * off; where the kernel had no hugepage to give (vmstat's
 * thp_fault_fallback rose meanwhile) it says so and passes. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "sluice.h"
#include "t.h"

/* TSan and ASan fault their shadow of what the test writes: the faults
 * are not the block's then, only its hugepage is checked */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SHADOW_MEMORY 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define SHADOW_MEMORY 1
#endif
#endif
#ifndef SHADOW_MEMORY
#define SHADOW_MEMORY 0
#endif

static void *(*volatile M)(size_t) = sl_malloc;

static long minor_faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

int main(void)
{
    const char *mode = getenv("SLUICE_THP");
    if (!mode || strcmp(mode, "madvise")) {
        fprintf(stderr, "thp_madvise: run with SLUICE_THP=madvise\n");
        return 1;
    }
    if (!proc_thp_enabled()) {
        printf("thp_madvise: transparent hugepages are off here: skipped\n");
        return 0;
    }
    uint64_t fallback = proc_vmstat("thp_fault_fallback");
    enum { N = 1 << 14 }; /* 1 MiB of 64-byte objects: half a pageblock */
    static unsigned char *o[N];
    o[0] = M(64); /* the first pageblock of 64-byte slabs: its header's fault */
    long before = minor_faults();
    for (int i = 1; i < N; i++) {
        o[i] = M(64);
        memset(o[i], i & 0xff, 64);
    }
    long faults = minor_faults() - before;
    uint64_t thp = sl_stat("block_thp_bytes");
    printf("thp_madvise: %llu bytes of pageblock on hugepages, %ld faults filling 1 MiB\n",
           (unsigned long long)thp, faults);
    if (!thp && proc_vmstat("thp_fault_fallback") > fallback) {
        printf("thp_madvise: the kernel had no hugepage to give: not a failure\n");
        return t_done("thp_madvise");
    }
    CHECK(thp >= 2u << 20);
#if !SHADOW_MEMORY
    CHECK(faults < 64); /* one per 4 KiB page would be 256 and more */
#endif
    for (int i = 1; i < N; i++)
        if (o[i][63] != (i & 0xff)) {
            CHECK(!"every object keeps its bytes");
            break;
        }
    for (int i = 0; i < N; i++)
        sl_free(o[i]);
    return t_done("thp_madvise");
}
