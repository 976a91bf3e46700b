/* lib_rss — the resident pages of libsluice.so itself in a small program
 * (docs/benchmarks/small-rss.md): the kernel maps a file's pages by 64
 * KiB windows around a fault (fault-around), so what counts is which
 * windows a program touches, not which pages.
 *   - text: the functions small programs run come first, at a 64 KiB
 *     boundary (cmake/hot-text.ld): one window, two if the library is
 *     mapped at a base that is not 64 KiB aligned; all 172 KiB without.
 *   - .eh_frame, alone in its read-only mapping after the text: never
 *     read here (the RELRO page follows: 8 KiB); 56 KiB of rodata and
 *     .eh_frame were resident before.
 *   - .data: heap_empty (slab/heap.h) is a struct heap without its room
 *     (page cache and magazines): 28 KiB; 171 KiB before, of which a read
 *     mapped 64 KiB.
 *   - .bss: its arrays of a page or more after the small variables (the
 *     same script), which share a few pages: 28 KiB here, 44 before.
 * The program: small, medium and aligned allocations, calloc and realloc
 * in the main thread and a second one, as the small benchmarks do. Only
 * the normal build (test/CMakeLists.txt): a debug build's text is larger. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>

#include "t.h"

static void work(void)
{
    void *keep[64];
    for (int round = 0; round < 50; round++) {
        for (int i = 0; i < 64; i++)
            keep[i] = malloc((size_t)(16 << (i % 7)));
        keep[0] = realloc(keep[0], 3000);
        free(calloc(10, 100));
        void *a = NULL;
        CHECK(posix_memalign(&a, 256, 200) == 0);
        free(a);
        free(malloc(100000));
        for (int i = 0; i < 64; i++)
            free(keep[i]);
    }
}

static void *thread_main(void *arg)
{
    (void)arg;
    work();
    return NULL;
}

struct lib_rss {
    long text, rodata, data, bss, total; /* KiB; total: the file's mappings */
};

/* libsluice's mappings in /proc/self/smaps: the executable one, the
 * read-only ones between it and the writable one (.eh_frame's, the RELRO
 * page), and the file-backed writable one (.data). */
static struct lib_rss measure(void)
{
    static char buf[1 << 19];
    struct lib_rss r = { 0, 0, 0, 0, 0 };
    CHECK(proc_read("/proc/self/smaps", buf, sizeof buf) > 0);
    bool ours = false, bss = false, after_text = false, after_data = false;
    unsigned long data_end = 0;
    char perms[5] = "";
    for (char *line = buf; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
        char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        unsigned long lo, hi;
        char p[5];
        if (sscanf(line, "%lx-%lx %4s", &lo, &hi, p) == 3) {
            char *path = memchr(line, '/', len);
            ours = path && memmem(path, len - (size_t)(path - line), "libsluice", 9);
            /* .bss past the file's last page: the nameless mapping that
             * begins where the file's writable one ends */
            bss = !path && !memchr(line, '[', len) && lo == data_end && data_end;
            if (ours && !strcmp(p, "rw-p"))
                data_end = hi;
            memcpy(perms, p, sizeof perms);
            continue;
        }
        if (bss && !strncmp(line, "Rss:", 4))
            r.bss += strtol(line + 4, NULL, 10);
        if (!ours || strncmp(line, "Rss:", 4))
            continue;
        long kib = strtol(line + 4, NULL, 10);
        r.total += kib;
        if (!strcmp(perms, "r-xp")) {
            r.text += kib;
            after_text = true;
        } else if (!strcmp(perms, "rw-p")) {
            r.data += kib;
            after_data = true;
        } else if (!strcmp(perms, "r--p") && after_text && !after_data) {
            r.rodata += kib;
        }
    }
    return r;
}

int main(void)
{
    work();
    pthread_t t;
    CHECK(pthread_create(&t, NULL, thread_main, NULL) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    struct lib_rss r = measure();
    printf("libsluice resident: text %ld KiB, read-only after it %ld KiB, .data %ld KiB, the file's %ld KiB; "
           ".bss %ld KiB\n",
           r.text, r.rodata, r.data, r.total, r.bss);
    CHECK_MSG(r.text > 0, "no libsluice mapping found");
    CHECK_MSG(r.text <= 128, "text: %ld KiB resident (at most two 64 KiB windows)", r.text);
    CHECK_MSG(r.rodata <= 16, ".eh_frame's mapping and RELRO: %ld KiB resident", r.rodata);
    CHECK_MSG(r.data <= 40, ".data: %ld KiB resident (heap_empty is 28 KiB)", r.data);
    CHECK_MSG(r.total <= 232, "libsluice: %ld KiB resident", r.total);
    CHECK_MSG(r.bss <= 36, ".bss: %ld KiB resident", r.bss);
    return t_done("lib_rss");
}
