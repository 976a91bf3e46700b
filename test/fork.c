/* fork: while other threads allocate (never a deadlock, the child's heap
 * works), and from a signal handler that interrupted an allocation. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sluice.h"
#include "t.h"

static _Atomic int stop;

static void *allocator(void *arg)
{
    (void)arg;
    unsigned long long seed = 12345;
    void *held[128] = { 0 };
    while (!stop) {
        int i = (int)(t_rand(&seed) % 128);
        sl_free(held[i]);
        size_t n = t_rand(&seed) % 8 == 0 ? t_rand(&seed) % (3u << 20) : t_rand(&seed) % 512;
        held[i] = sl_malloc(n);
    }
    for (int i = 0; i < 128; i++)
        sl_free(held[i]);
    return NULL;
}

/* In the child: allocate in every regime, free, exit 0 if contents hold. */
static int child_work(void)
{
    for (int i = 0; i < 2000; i++) {
        size_t n = (size_t)(i * 37) % 3000 + (i % 100 == 0 ? (2u << 20) : 0);
        unsigned char *p = sl_malloc(n + 1);
        if (!p)
            return 1;
        memset(p, 3, n + 1);
        if (p[n] != 3)
            return 1;
        sl_free(p);
    }
    return 0;
}

static int wait_child(pid_t pid)
{
    int status = 0;
    for (int i = 0; i < 1000; i++) { /* 10 s */
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1; /* deadlock */
}

static void test_fork_with_threads(void)
{
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, allocator, NULL);
    int failures = 0;
    for (int k = 0; k < 100; k++) {
        pid_t pid = fork();
        if (pid == 0)
            _exit(child_work());
        if (wait_child(pid) != 0)
            failures++;
    }
    stop = 1;
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    CHECK_EQ(failures, 0);
}

#define SIGNAL_FORKS 60
static volatile sig_atomic_t forks_done;
static pid_t fork_pids[SIGNAL_FORKS];

/* Fork from whatever the main loop was doing (often inside malloc or
 * free); the children are reaped by the main loop afterwards. */
static void on_alarm(int sig)
{
    (void)sig;
    if (forks_done >= SIGNAL_FORKS)
        return;
    pid_t pid = fork();
    if (pid == 0)
        _exit(child_work());
    fork_pids[forks_done++] = pid;
}

static void test_fork_in_signal_handler(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = { { 0, 3000 }, { 0, 3000 } };
    setitimer(ITIMER_REAL, &it, NULL);
    unsigned long long seed = 99;
    void *held[256] = { 0 };
    while (forks_done < SIGNAL_FORKS) { /* the handler lands inside malloc/free often */
        int i = (int)(t_rand(&seed) % 256);
        sl_free(held[i]);
        held[i] = sl_malloc(t_rand(&seed) % 4 == 0 ? 30000 : 64);
    }
    struct itimerval off = { { 0, 0 }, { 0, 0 } };
    setitimer(ITIMER_REAL, &off, NULL);
    for (int i = 0; i < 256; i++)
        sl_free(held[i]);
    int failures = 0;
    for (int i = 0; i < SIGNAL_FORKS; i++)
        { int rc = wait_child(fork_pids[i]); if (rc) fprintf(stderr, "signal fork child %d: status %d\n", i, rc); failures += rc != 0; }
    CHECK_EQ(failures, 0);
}

int main(void)
{
    test_fork_with_threads();
    test_fork_in_signal_handler();
    return t_done("fork");
}
