/* Batches: one thread allocates a batch of small objects (16, 32 or 64
 * bytes, 25 to 1600 of them), writes each, and frees the batch, half in
 * the order of allocation and half in reverse, over and over: the objects
 * of a request, a parse tree or a frame, freed together (mimalloc-bench's
 * glibc-simple has the same loop). What it measures: whether a batch
 * larger than the per-thread cache goes back and forth to the slabs. */
#include <string.h>

#include "common.h"

int main(int argc, char **argv)
{
    static const int batch[] = { 25, 100, 400, 1600 };
    static const size_t size[] = { 16, 32, 64 };
    static char *arr[1600];
    long per_pass = (long)(1000000 * bench_scale(argc, argv)); /* objects per (batch, size) */
    unsigned long long sum = 0;
    double t0 = now();
    for (int z = 0; z < 3; z++)
        for (int b = 0; b < 4; b++) {
            int n = batch[b];
            for (long round = 0; round < per_pass / n; round++) {
                for (int i = 0; i < n; i++) {
                    arr[i] = malloc(size[z]);
                    memset(arr[i], (int)i, size[z]);
                }
                sum += (unsigned char)arr[n / 2][1];
                for (int i = 0; i < n / 2; i++)
                    free(arr[i]);
                for (int i = n - 1; i >= n / 2; i--)
                    free(arr[i]);
            }
        }
    report(now() - t0, sum);
    return 0;
}
