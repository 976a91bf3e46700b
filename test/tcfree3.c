/* glibc's tst-tcfree3, as glibc builds it (-fno-builtin-malloc
 * -fno-builtin-free, so the compiler keeps every call): the bytes of a
 * freed block copied into a live one must not make the live one's free a
 * double free (the free-path contract, src/slab/free_state.c: the mark a
 * freed block carries is a hint, confirmed before anything is reported).
 * Then the same with the live block freed by another thread, and a real
 * double free after it, which must still be reported (in a child). */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

static void *victim;
static void *free_victim(void *arg)
{
    (void)arg;
    free(victim);
    return NULL;
}

int main(void)
{
    for (size_t size = 16; size <= 1024; size *= 2) {
        char *a = malloc(size), *b = malloc(size);
        memset(a, 'a', size);
        memset(b, 'b', size);
        free(a);
        memcpy(b, a, size); /* glibc's test: the freed block's bytes, key included */
        free(b);
        char *c = malloc(size), *d = malloc(size);
        CHECK(c && d && c != d);
        free(c);
        free(d);
        /* the live copy freed by another thread */
        a = malloc(size);
        b = malloc(size);
        free(a);
        memcpy(b, a, size);
        victim = b;
        pthread_t t;
        pthread_create(&t, NULL, free_victim, NULL);
        pthread_join(t, NULL);
    }
    /* and a real double free after a copy: still reported */
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        char *a = malloc(32), *b = malloc(32);
        free(a);
        memcpy(b, a, 32);
        free(b);
        free(b);
        _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
    return t_done("tcfree3");
}
