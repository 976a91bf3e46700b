/* free_pages.c — run under valgrind's lackey by free_pages.py: mallocs a
 * buffer of GiB (touching its two ends only), frees it, three times; the
 * loads of marker_a and marker_b bracket each free() in the trace, so the
 * script can count the distinct pages of code and data that free() itself
 * touches (the caller's stack included). Prints the markers' addresses. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

volatile char marker_a, marker_b;

static void *nothing(void *arg) { return arg; }

int main(int argc, char **argv)
{
    size_t n = (size_t)(argc > 1 ? atoi(argv[1]) : 8) << 30;
    pthread_t t; /* a program with threads: sluice's workers may be used */
    pthread_create(&t, NULL, nothing, NULL);
    pthread_join(t, NULL);
    for (int r = 0; r < 3; r++) {
        char *p = malloc(n);
        if (!p)
            return 1;
        p[0] = 1;
        p[n - 1] = 1;
        (void)marker_a;
        free(p);
        (void)marker_b;
    }
    printf("markers %p %p\n", (void *)&marker_a, (void *)&marker_b);
    return 0;
}
