/* check.c — sl_check: walk every structure of sluice and check every
 * invariant (the slab and page layers in slab/heap_check.c and
 * page/page_check.c, huge mappings in huge/huge.c, zero-size zones in
 * zero/zero.c, the teardown queue in teardown/teardown.c). Exported from every
 * build: it costs nothing until called. It reads state that threads own,
 * so call it while the other threads are not allocating or freeing (the
 * tests call it between phases). Returns 0, or reports the first broken
 * invariant in one line ("sluice: sl_check: ...") and aborts.
 */
#include "../huge/huge.h"
#include "../slab/heap.h"
#include "../teardown/teardown.h"
#include "../zero/zero.h"
#include "sluice.h"

int sl_check(void)
{
    heap_get(); /* a heap first: nothing below may need one under a lock */
    heap_check_all();
    huge_check_all();
    zero_check_all();
    teardown_check();
    return 0;
}
