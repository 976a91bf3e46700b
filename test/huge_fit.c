/* The huge cache's reuse (src/huge/huge_fit.h, huge_cache.c, huge.c), with
 * SLUICE_PURGE=off so that no freed mapping is advised and every cached one
 * stays resident:
 *   split: a cached 20 MiB mapping serves a 6 MiB request with its head;
 *     its 14 MiB tail stays cached (resident) and serves the next request
 *     (before: the whole 20 MiB was handed out and held resident);
 *   coalesce: the head freed again joins its cached tail, and a request
 *     of the whole takes it with no gather;
 *   gather: two cached mappings, 4 and 6 MiB, serve a 10 MiB request
 *     moved side by side (mremap): its pages are resident before it is
 *     touched, no fresh page is faulted, the cache is empty after; it
 *     grows and shrinks by realloc; a calloc so gathered reads zero;
 *   hint: a 64 MiB mapping (advised MADV_HUGEPAGE) split for an 8 MiB
 *     request loses its hint;
 *   regret (argument "regret", default purging): see regret() below.
 * Built against the fault-injection library too (huge_fit_fault): every
 * mremap refused, the gather falls back to a fresh mapping, the pieces are
 * unmapped, errno is as it was, and sl_check agrees; a piece's mremap
 * refused once, it is moved a granule at a time. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sluice.h"
#include "t.h"
#if SL_FAULT_INJECT
#include "../src/os/fault.h"
#endif

#define MIB ((size_t)1 << 20)

static char *dirty(size_t n, int c)
{
    char *p = sl_malloc(n);
    CHECK(p != NULL);
    memset(p, c, n);
    return p;
}

static void split(void)
{
    sl_purge();
    char *big = dirty(20 * MIB, 1);
    sl_free(big);
    uint64_t splits = sl_stat("huge_split");
    char *head = sl_malloc(6 * MIB);
    CHECK(head == big);
    CHECK_EQ(sl_stat("huge_split"), splits + 1);
    CHECK_EQ(sl_stat("huge_cached_bytes"), 14 * MIB);
    CHECK_EQ(sl_stat("huge_live_bytes"), 6 * MIB);
    CHECK_EQ(t_resident_pages(big + 6 * MIB, 14 * MIB), 14 * MIB / 4096); /* kept resident, for reuse */
    char *tail = sl_malloc(13 * MIB);
    CHECK(tail == big + 6 * MIB);
    CHECK_EQ(sl_stat("huge_cached_bytes"), 0);
    CHECK_EQ(sl_check(), 0);
    sl_free(head);
    sl_free(tail);
    CHECK_EQ(sl_check(), 0);
    sl_purge();
}

/* A split's head freed again joins its cached tail: one mapping, which a
 * request of the whole takes with no gather. */
static void coalesce(void)
{
    sl_purge();
    char *big = dirty(20 * MIB, 1);
    sl_free(big);
    char *head = sl_malloc(6 * MIB);
    CHECK(head == big);
    uint64_t joins = sl_stat("huge_coalesce"), gathers = sl_stat("huge_gather");
    sl_free(head);
    CHECK_EQ(sl_stat("huge_coalesce"), joins + 1);
    CHECK_EQ(sl_stat("huge_cached_bytes"), 20 * MIB);
    CHECK_EQ(sl_check(), 0);
    char *again = sl_malloc(18 * MIB);
    CHECK(again == big);
    CHECK_EQ(sl_stat("huge_gather"), gathers);
    CHECK_EQ(t_resident_pages(again, 18 * MIB), 18 * MIB / 4096);
    sl_free(again);
    CHECK_EQ(sl_check(), 0);
    sl_purge();
}

/* Two dirty mappings with a live one between them (neighbours would join:
 * coalesce above), freed. *spacer is to be freed by the caller. */
static void two_apart(char **a, size_t na, char **b, size_t nb, char **spacer)
{
    *a = dirty(na, 1);
    *spacer = sl_malloc(2 * MIB);
    *b = dirty(nb, 2);
    sl_free(*a);
    sl_free(*b);
}

static void gather(void)
{
    sl_purge();
    char *a, *b, *sp;
    two_apart(&a, 4 * MIB, &b, 6 * MIB, &sp);
    uint64_t gathers = sl_stat("huge_gather");
    char *c = sl_malloc(10 * MIB);
    CHECK(c != NULL);
    CHECK_EQ(sl_stat("huge_gather"), gathers + 1);
    CHECK_EQ(sl_stat("huge_cached_bytes"), 0);
    CHECK_EQ(t_resident_pages(c, 10 * MIB), 10 * MIB / 4096); /* the pages came along */
    /* newest first: b's bytes, then a's */
    CHECK(c[0] == 2 && c[6 * MIB - 1] == 2 && c[6 * MIB] == 1 && c[10 * MIB - 1] == 1);
    memset(c, 3, 10 * MIB);
    CHECK_EQ(sl_check(), 0);
    /* a gathered mapping is several VMAs: a realloc grows or moves it all
     * the same (mremap, or a copy where the kernel refuses) */
    c = sl_realloc(c, 20 * MIB);
    CHECK(c != NULL);
    CHECK(c[0] == 3 && c[6 * MIB] == 3 && c[10 * MIB - 1] == 3);
    memset(c, 4, 20 * MIB);
    c = sl_realloc(c, 3 * MIB);
    CHECK(c != NULL && c[0] == 4 && c[3 * MIB - 1] == 4);
    CHECK_EQ(sl_check(), 0);
    sl_free(c);

    /* calloc: gathered pages read zero; the part no piece covers is fresh */
    sl_free(sp);
    sl_purge();
    two_apart(&a, 2 * MIB, &b, 4 * MIB, &sp);
    gathers = sl_stat("huge_gather");
    unsigned char *z = sl_calloc(1, 9 * MIB);
    CHECK(z != NULL);
    CHECK_EQ(sl_stat("huge_gather"), gathers + 1);
    size_t nonzero = 0;
    for (size_t i = 0; i < 9 * MIB; i++)
        nonzero += z[i] != 0;
    CHECK_EQ(nonzero, 0);
    CHECK_EQ(sl_check(), 0);
    sl_free(z);
    sl_free(sp);
    sl_purge();
}

/* Is p's mapping advised MADV_HUGEPAGE ("hg" in smaps' VmFlags)? */
static int thp_hinted(const void *p)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    CHECK(f != NULL);
    char line[512];
    int in = 0, hg = -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
            in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
        else if (in && !strncmp(line, "VmFlags:", 8)) {
            hg = strstr(line, " hg") != NULL;
            break;
        }
    }
    fclose(f);
    return hg;
}

static void hint(void)
{
    sl_purge();
    char *big = dirty(64 * MIB, 1);
    CHECK_EQ(thp_hinted(big), 1);
    sl_free(big);
    char *small = sl_malloc(8 * MIB);
    CHECK(small == big);
    CHECK_EQ(thp_hinted(small), 0);
    sl_free(small);
    sl_purge();
}

#if SL_FAULT_INJECT
static void gather_refused(void)
{
    sl_purge();
    char *a, *b, *sp;
    two_apart(&a, 4 * MIB, &b, 6 * MIB, &sp);
    uint64_t gathers = sl_stat("huge_gather"), unmaps = sl_stat("huge_unmap");
    fault_config("mremap:every=1");
    errno = 1234;
    char *c = sl_malloc(10 * MIB);
    int err = errno;
    fault_config(NULL);
    CHECK(c != NULL);
    CHECK_EQ(err, 1234);
    CHECK_EQ(sl_stat("huge_gather"), gathers);
    CHECK_EQ(sl_stat("huge_unmap"), unmaps + 2);
    CHECK_EQ(sl_stat("huge_cached_bytes"), 0);
    CHECK_EQ(sl_stat("huge_live_bytes"), 12 * MIB); /* and the spacer */
    memset(c, 3, 10 * MIB);
    CHECK_EQ(sl_check(), 0);
    sl_free(c);
    CHECK_EQ(sl_check(), 0);
    sl_free(sp);
    sl_purge();

    /* the first mremap of each piece refused (as a kernel before 6.17
     * refuses a range of several VMAs): it moves a granule at a time */
    two_apart(&a, 4 * MIB, &b, 6 * MIB, &sp);
    gathers = sl_stat("huge_gather");
    fault_config("mremap:nth=1");
    c = sl_malloc(10 * MIB);
    CHECK_EQ(fault_failed(FAULT_MREMAP), 1);
    CHECK_EQ(fault_calls(FAULT_MREMAP), 2 + 3); /* b whole (refused), b by granules, a whole */
    fault_config(NULL);
    CHECK(c != NULL);
    CHECK_EQ(sl_stat("huge_gather"), gathers + 1);
    CHECK_EQ(t_resident_pages(c, 10 * MIB), 10 * MIB / 4096);
    CHECK(c[0] == 2 && c[6 * MIB - 1] == 2 && c[6 * MIB] == 1 && c[10 * MIB - 1] == 1);
    CHECK_EQ(sl_check(), 0);
    sl_free(c);
    sl_free(sp);
    sl_purge();

    /* every second mremap refused: b moves whole, a's whole move is
     * refused, its first granule moves and its second is refused. The
     * gather fails with a moved in part: what moved goes with the fresh
     * mapping, a is given back from its second granule on (its first
     * granule's range is no longer ours), and the request maps afresh */
    two_apart(&a, 4 * MIB, &b, 6 * MIB, &sp);
    gathers = sl_stat("huge_gather");
    unmaps = sl_stat("huge_unmap");
    fault_config("mremap:every=2");
    errno = 1234;
    c = sl_malloc(10 * MIB);
    err = errno;
    CHECK_EQ(fault_calls(FAULT_MREMAP), 4); /* b whole, a whole (refused), a's granules 0 and 1 (refused) */
    CHECK_EQ(fault_failed(FAULT_MREMAP), 2);
    fault_config(NULL);
    CHECK(c != NULL);
    CHECK_EQ(err, 1234);
    CHECK_EQ(sl_stat("huge_gather"), gathers);
    CHECK_EQ(sl_stat("huge_unmap"), unmaps + 2);
    CHECK_EQ(sl_stat("huge_cached_bytes"), 0);
    memset(c, 5, 10 * MIB);
    CHECK_EQ(sl_check(), 0);
    sl_free(c);
    sl_free(sp);
    sl_purge();
}
#endif

/* regret (default purging, no reclaimer: a huge free is advised at once
 * unless the last drop purge was regretted): a freed mapping is advised;
 * a bigger request, which no cached mapping holds, is served fresh while
 * the advised one waits in the cache: the program wants back the memory
 * the advice gave, as a reuse of that mapping would have told, so the
 * next huge free is a regret and stays resident. Before, only a reuse of
 * the advised mapping itself counted, and gathering served most requests:
 * every huge free was advised. */
static void regret(void)
{
    char *a = dirty(8 * MIB, 1);
    uint64_t dontneed = sl_stat("madv_dontneed_calls"), regrets = sl_stat("drop_regret");
    sl_free(a);
    CHECK_EQ(sl_stat("madv_dontneed_calls"), dontneed + 1); /* advised as it was cached */
    char *b = dirty(12 * MIB, 2);
    sl_free(b);
    CHECK_EQ(sl_stat("drop_regret"), regrets + 1);
    CHECK_EQ(sl_stat("madv_dontneed_calls"), dontneed + 1); /* b kept resident */
    CHECK_EQ(t_resident_pages(b, 12 * MIB), 12 * MIB / 4096);
    sl_purge();
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "regret")) {
        regret();
        return t_done("huge_fit regret");
    }
    split();
    coalesce();
    gather();
    if (access("/sys/kernel/mm/transparent_hugepage/enabled", R_OK) == 0)
        hint();
    else
        printf("huge_fit: no transparent hugepages in this kernel: the hint not tested\n");
#if SL_FAULT_INJECT
    gather_refused();
#endif
    return t_done("huge_fit");
}
