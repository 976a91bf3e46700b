/* Out of memory (run under `ulimit -v`, see CMakeLists.txt): every regime
 * fails with NULL and ENOMEM, never a crash, and works again after frees. */
#include <errno.h>
#include <string.h>
#include <sys/resource.h>

#include "sluice.h"
#include "t.h"

static size_t fill(size_t size, void **held, size_t cap)
{
    size_t n = 0;
    for (; n < cap; n++) {
        errno = 0;
        held[n] = sl_malloc(size);
        if (!held[n]) {
            CHECK_EQ(errno, ENOMEM);
            break;
        }
        memset(held[n], 1, size < 4096 ? size : 4096);
    }
    return n;
}

int main(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (2ull << 30)) {
        fprintf(stderr, "oom: run under ulimit -v (at most 2 GiB); it fills the address space\n");
        return 1;
    }
    static void *held[1 << 20];
    size_t sizes[] = { 3u << 20, 200000, 8000, 100 };
    size_t count[4];
    for (int round = 0; round < 2; round++) {
        size_t total = 0;
        for (int k = 0; k < 4; k++) {
            count[k] = fill(sizes[k], held + total, (sizeof held / sizeof *held) - total);
            total += count[k];
        }
        CHECK(total > 0);
        CHECK(count[0] > 0 && count[0] < (1u << 20)); /* huge hit the limit */
        errno = 0;
        CHECK(sl_malloc((size_t)1 << 40) == NULL && errno == ENOMEM);
        errno = 0;
        CHECK(sl_calloc(1, (size_t)1 << 36) == NULL && errno == ENOMEM);
        for (size_t i = 0; i < total; i++)
            sl_free(held[i]);
        sl_purge();
    }
    void *p = sl_malloc(50u << 20);
    CHECK(p != NULL); /* memory came back */
    sl_free(p);
    return t_done("oom");
}
