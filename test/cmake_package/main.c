/* Linked to sluice by find_package: the header is found, sl_ names link,
 * and plain malloc is sluice's (its counter moves). */
#include <stdio.h>
#include <stdlib.h>

#include <sluice.h>

int main(void)
{
    uint64_t before = sl_stat("alloc_small");
    void *volatile p = malloc(100);
    void *q = sl_malloc(200);
    int ok = p && q && sl_stat("alloc_small") >= before + 2 && sl_usable_size(q) >= 200;
    free(p);
    sl_free(q);
    printf("%s\n", ok ? "sluice serves malloc" : "malloc is not sluice's");
    return ok ? 0 : 1;
}
