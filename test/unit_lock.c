/* Unit: the lock order (src/base/lock.h). In a debug build (SLUICE_DEBUG)
 * taking a lock of a lower or equal rank than one held aborts with a line
 * that names both; in order is fine, and a try-lock is not checked.  Whether
 * this thread holds any lock of sluice follows every acquire and release.
 * In other builds the order is not checked, and the test says so. */
#define _GNU_SOURCE
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../src/base/lock.h"
#include "t.h"

static SL_LOCK_DEFINE(low, LOCK_HEAPS);
static SL_LOCK_DEFINE(high, LOCK_PAGE_HEAP);

int main(int argc, char **argv)
{
    if (argc > 1) { /* the child: out of order */
        lock_acquire(&high);
        lock_acquire(&low);
        return 0;
    }
    lock_acquire(&low);
    lock_acquire(&high);
    CHECK(lock_any_held());
    lock_release(&high);
    CHECK(lock_any_held());
    lock_release(&low);
    CHECK(!lock_any_held());
    lock_acquire(&high);
    CHECK(lock_try(&low)); /* a try cannot deadlock */
    lock_release(&low);
    lock_release(&high);
    CHECK(!lock_any_held());
    char out[512];
    size_t len;
    int st = t_run_self(argv[0], "out_of_order", "", out, sizeof out, &len);
    if (config_debug) {
        CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
        CHECK(strstr(out, "sluice: lock order: taking LOCK_HEAPS while holding LOCK_PAGE_HEAP") == out);
    } else {
        printf("unit_lock: not a debug build (SLUICE_DEBUG=OFF): the order is not checked\n");
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    return t_done("unit_lock");
}
