/* fork: while another thread holds objects in its magazine (the child
 * gets them back); while other threads allocate (never a deadlock, the
 * child's heap works); while other threads hold stdio locks and allocate under them
 * (getline) and fflush(NULL) waits for those locks; from a signal handler
 * that interrupted an allocation; and, in a single-threaded process, from a
 * signal handler that interrupted fork itself (which stays possible only
 * while sluice starts no thread of its own). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
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
            /* the other threads' heaps (their magazines and slabs, maybe
             * caught mid-operation) are orphaned and repaired: the check
             * passes (not in a child forked from a signal handler, whose
             * own heap may be caught mid-operation) */
            _exit(child_work() || sl_check());
        if (wait_child(pid) != 0)
            failures++;
    }
    stop = 1;
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    CHECK_EQ(failures, 0);
}

#define SIGNAL_FORKS 60
/* The objects in another thread's magazine when the process forks: in
 * the child they are free, but live in the bitmap (a magazine's objects
 * keep their bits) and held by a magazine no thread of the child will pop.
 * The child clears their bits and cookies when it orphans the heap, so the
 * slab repair puts them back on their slab's free list, and a thread of
 * the child that adopts the slab allocates them again. A fork orphan is
 * never taken over whole, and only its partial slabs are adopted (an
 * empty one is released): so the holder puts 62 objects of its first slab
 * (one page of 64 objects of 64 bytes) in its magazine, fills the
 * magazine, frees the slab's first object past it, which makes the slab
 * partial, and keeps its last one. */
#define MAG_OBJS  62
#define MAG_CAP64 256 /* a magazine's room for 64-byte objects (size_class.h) */
static char *mag_held[64 + MAG_CAP64];
static _Atomic int mag_layout_ok;
static sem_t mag_ready, mag_release;

static void *magazine_holder(void *arg)
{
    (void)arg;
    int n = 64 + MAG_CAP64;
    for (int i = 0; i < n; i++)
        mag_held[i] = sl_malloc(64);
    int ok = 1;
    for (int i = 1; i < 64; i++)
        ok &= ((uintptr_t)mag_held[i] >> 12) == ((uintptr_t)mag_held[0] >> 12);
    mag_layout_ok = ok && ((uintptr_t)mag_held[64] >> 12) != ((uintptr_t)mag_held[0] >> 12);
    for (int i = 1; i <= MAG_OBJS; i++)
        sl_free(mag_held[i]); /* the first slab's 62 */
    for (int i = 64; i < 64 + MAG_CAP64 - MAG_OBJS; i++)
        sl_free(mag_held[i]); /* others: the magazine is full */
    sl_free(mag_held[0]);     /* past the magazine: the first slab is partial */
    sem_post(&mag_ready);
    sem_wait(&mag_release); /* alive across the fork */
    sl_free(mag_held[63]);
    for (int i = 64 + MAG_CAP64 - MAG_OBJS; i < n; i++)
        sl_free(mag_held[i]);
    return NULL;
}

static void *magazine_taker(void *arg)
{
    int *found = arg;
    for (int k = 0; k < 2 * MAG_OBJS; k++) {
        char *p = sl_malloc(64);
        for (int i = 1; i <= MAG_OBJS; i++)
            *found += p == mag_held[i];
    }
    return NULL;
}

static void test_fork_magazine_returns(void)
{
    if (getenv("SLUICE_PROF")) { /* a sampled object is a page run of its own */
        printf("fork with a magazine held: skipped, profiling changes which objects a malloc returns\n");
        return;
    }
    sem_init(&mag_ready, 0, 0);
    sem_init(&mag_release, 0, 0);
    pthread_t t;
    pthread_create(&t, NULL, magazine_holder, NULL);
    sem_wait(&mag_ready);
    CHECK(mag_layout_ok); /* the first 64 objects were one slab, the 65th another */
    pid_t pid = fork();
    if (pid == 0) {
        int found = 0;
        pthread_t c; /* a new heap: adopts the orphan's partial slab */
        pthread_create(&c, NULL, magazine_taker, &found);
        pthread_join(c, NULL);
        if (found != MAG_OBJS)
            fprintf(stderr, "child: %d of the %d objects of the magazine came back\n", found, MAG_OBJS);
        _exit(found != MAG_OBJS || sl_check());
    }
    int rc = wait_child(pid);
    sem_post(&mag_release);
    pthread_join(t, NULL);
    CHECK_EQ(rc, 0);
}

/* Forks while another thread takes and gives up slabs of 4000-byte
 * objects without pause: a child often inherits a slab whose page tags
 * that thread was writing (slab_set_owner writes them before the owner
 * word), and sl_check in the child must accept it (it failed in 5-8
 * children of 300 before heap_check.c knew of it). */
enum { CHURN_FORKS = 300 };
static void *slab_churner(void *arg)
{
    (void)arg;
    void *p[64];
    while (!stop) {
        for (int i = 0; i < 64; i++)
            p[i] = sl_malloc(4000);
        for (int i = 0; i < 64; i++)
            sl_free(p[i]);
    }
    return NULL;
}

static void test_fork_mid_slab_owner(void)
{
    stop = 0;
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, slab_churner, NULL), 0);
    int bad = 0;
    for (int i = 0; i < CHURN_FORKS; i++) {
        usleep(1000);
        pid_t pid = fork();
        if (pid == 0) {
            void *p = sl_malloc(4000); /* the child's own heap works */
            sl_free(p);
            _exit(sl_check() != 0);
        }
        bad += wait_child(pid) != 0;
    }
    stop = 1;
    pthread_join(t, NULL);
    CHECK_EQ(bad, 0);
}

/* Forks while another thread frees this thread's objects in bulk: a
 * child often inherits a slab whose remote lock that thread held (slab.h).
 * The child allocates through the slabs of the class, which collects the
 * remote frees of each: had fork left the lock held, it would spin for
 * ever there (2 s alarm). */
enum { REMOTE_FORKS = 200, REMOTE_RING = 64, REMOTE_BATCH = 256 };
static void **remote_ring[REMOTE_RING];
static _Atomic unsigned remote_head, remote_tail;

static void *bulk_remote_freer(void *arg)
{
    (void)arg;
    while (!stop) {
        unsigned t = atomic_load(&remote_tail);
        if (t == atomic_load(&remote_head)) {
            sched_yield();
            continue;
        }
        sl_free_bulk(remote_ring[t % REMOTE_RING], REMOTE_BATCH);
        free(remote_ring[t % REMOTE_RING]);
        atomic_store(&remote_tail, t + 1);
    }
    return NULL;
}

static void test_fork_remote_lock_held(void)
{
    stop = 0;
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, bulk_remote_freer, NULL), 0);
    int bad = 0;
    void **batches[REMOTE_RING];
    for (int i = 0; i < REMOTE_FORKS; i++) {
        /* the ring filled at once after the freer has emptied it, so that
         * fork lands while it frees */
        while (atomic_load(&remote_tail) != atomic_load(&remote_head))
            sched_yield();
        /* runs of 4 objects side by side dealt round the batches, so a
         * slab gets frees from many batches: after the first one it is
         * on its owner's notify stack, which the child takes */
        for (int k = 0; k < REMOTE_RING; k++)
            batches[k] = malloc(REMOTE_BATCH * sizeof **batches);
        for (int j = 0; j < REMOTE_RING * REMOTE_BATCH; j++)
            batches[j / 4 % REMOTE_RING][j / (4 * REMOTE_RING) * 4 + j % 4] = sl_malloc(200);
        unsigned head = atomic_load(&remote_head);
        for (int k = 0; k < REMOTE_RING; k++)
            remote_ring[(head + (unsigned)k) % REMOTE_RING] = batches[k];
        atomic_store(&remote_head, head + REMOTE_RING);
        while (atomic_load(&remote_tail) == head) /* it has started */
            ;
        pid_t pid = fork();
        if (pid == 0) {
            alarm(9); /* a deadlock ends the child before wait_child's 10 s */
            static void *p[40000];
            for (int j = 0; j < 40000; j++)
                if (!(p[j] = sl_malloc(200)))
                    _exit(3);
            for (int j = 0; j < 40000; j++)
                sl_free(p[j]);
            _exit(sl_check() != 0);
        }
        int rc = wait_child(pid);
        if (rc)
            fprintf(stderr, "remote-lock fork child %d: status %d\n", i, rc);
        bad += rc != 0;
    }
    stop = 1;
    pthread_join(t, NULL);
    for (unsigned k = atomic_load(&remote_tail); k != atomic_load(&remote_head); k++) {
        sl_free_bulk(remote_ring[k % REMOTE_RING], REMOTE_BATCH);
        free(remote_ring[k % REMOTE_RING]);
    }
    CHECK_EQ(bad, 0);
}

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
        held[i] = sl_malloc(t_rand(&seed) % 4 == 0 ? 40000 : 64);
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

/* ---- fork against stdio ------------------------------------------------
 * glibc's fork takes the stdio list lock after the atfork handlers ran.
 * A getline thread holds its FILE's lock and reallocates its buffer; a
 * fflush(NULL) thread holds the list lock and waits for that FILE. Had
 * sluice's prepare handler taken its own locks and then waited in fork for
 * the list lock, the three would wait on each other for ever. */

static char lines_path[64];
static _Atomic int stdio_stop;

static void *getline_thread(void *arg)
{
    (void)arg;
    while (!stdio_stop) {
        FILE *f = fopen(lines_path, "r");
        if (!f)
            return NULL;
        char *line = NULL;
        size_t cap = 0;
        while (getline(&line, &cap, f) > 0) { /* each line grows the buffer again */
            free(line);
            line = NULL;
            cap = 0;
        }
        free(line);
        fclose(f);
    }
    return NULL;
}

static void *fflush_thread(void *arg)
{
    (void)arg;
    while (!stdio_stop)
        fflush(NULL);
    return NULL;
}

static _Atomic int stdio_failures, stdio_forks;

static void *fork_thread(void *arg)
{
    (void)arg;
    while (!stdio_stop) {
        pid_t pid = fork();
        if (pid == 0)
            _exit(0);
        if (pid < 0 || wait_child(pid) != 0)
            stdio_failures++;
        stdio_forks++;
    }
    return NULL;
}

static void test_fork_against_stdio(void)
{
    strcpy(lines_path, "/tmp/sluice-fork-XXXXXX");
    int fd = mkstemp(lines_path);
    FILE *f = fdopen(fd, "w");
    for (int i = 0; i < 32; i++) { /* long lines: getline reallocates into page runs (locks) */
        for (int k = 0; k < 20000 + i * 4000; k++)
            fputc('a' + k % 26, f);
        fputc('\n', f);
    }
    fclose(f);
    pthread_t t[6];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, getline_thread, NULL);
    pthread_create(&t[2], NULL, fflush_thread, NULL);
    for (int i = 3; i < 6; i++)
        pthread_create(&t[i], NULL, fork_thread, NULL);
    signal(SIGALRM, SIG_DFL);
    alarm(100); /* a deadlock fails here, not in ctest's timeout */
    sleep(3);
    stdio_stop = 1;
    for (int i = 0; i < 6; i++)
        pthread_join(t[i], NULL);
    alarm(0);
    unlink(lines_path);
    printf("fork against stdio: %d forks\n", (int)stdio_forks);
    CHECK(stdio_forks > 10);
    CHECK_EQ(stdio_failures, 0);
}

/* ---- a single-threaded program forks in a signal handler during fork ----
 * glibc skips its atfork lock while the process is single-threaded, which
 * makes this work; a background thread started by the allocator would make
 * the process multi-threaded and the nested fork hang. Run in a fresh
 * process (re-executed), which frees enough for the decay to have work. */

static volatile sig_atomic_t nested_forks;

static void fork_in_handler(int sig)
{
    (void)sig;
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    if (pid > 0) {
        waitpid(pid, NULL, 0);
        nested_forks++;
    }
}

static int single_threaded_main(void)
{
    for (int round = 0; round < 20; round++) { /* memory to decay: the reclaimer would be wanted */
        void *p[64];
        for (int i = 0; i < 64; i++)
            memset(p[i] = sl_malloc(200000), 1, 200000);
        for (int i = 0; i < 64; i++)
            sl_free(p[i]);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fork_in_handler;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    /* a period longer than a fork: a fork that a signal interrupts is
     * restarted by the kernel, and a shorter period would starve it */
    struct itimerval it = { { 0, 3000 }, { 0, 3000 } };
    setitimer(ITIMER_REAL, &it, NULL);
    int forks = 0;
    time_t end = time(NULL) + 2;
    while (time(NULL) < end) {
        pid_t pid = fork();
        if (pid == 0)
            _exit(0);
        if (pid > 0)
            while (waitpid(pid, NULL, 0) < 0)
                ;
        forks++;
        sl_free(sl_malloc(100000));
    }
    struct itimerval off = { { 0, 0 }, { 0, 0 } };
    setitimer(ITIMER_REAL, &off, NULL);
    int threads = proc_threads();
    printf("single-threaded: %d forks, %d from the signal handler, %d thread(s)\n", forks, (int)nested_forks,
           threads);
    return threads == 1 && nested_forks > 0 ? 0 : 1;
}

static void test_single_threaded_nested_fork(const char *self)
{
    pid_t pid = fork();
    if (pid == 0) {
        execl(self, self, "single", (char *)NULL);
        _exit(127);
    }
    int rc = 0, status;
    for (int i = 0; i < 3000; i++) { /* 30 s: a hang is a failure */
        if (waitpid(pid, &status, WNOHANG) == pid) {
            rc = WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
            break;
        }
        usleep(10000);
        rc = -1;
    }
    if (rc == -1) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    CHECK_EQ(rc, 0);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "single"))
        return single_threaded_main();
    setvbuf(stdout, NULL, _IONBF, 0); /* progress shows where a hang was */
    test_single_threaded_nested_fork("/proc/self/exe");
    test_fork_magazine_returns(); /* first: no other orphans yet */
    printf("fork with a magazine held: done\n");
    test_fork_with_threads();
    printf("fork with threads: done\n");
    test_fork_mid_slab_owner();
    printf("fork while a thread takes and gives up slabs: done\n");
    test_fork_remote_lock_held();
    printf("fork while a thread frees remotely in bulk: done\n");
    test_fork_in_signal_handler();
    printf("fork in a signal handler: done\n");
    test_fork_against_stdio();
    return t_done("fork");
}
