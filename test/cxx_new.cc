// C++ operator new/delete on sluice: every variant, alignment, std::bad_alloc,
// the new handler, nothrow, and that they really come from sluice.
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "sluice.h"

static int pass, fail;
#define CHECK(c) ((c) ? pass++ : (fail++, std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c)))

struct alignas(256) Wide {
    char bytes[300];
};

// Does new char[2^62] throw std::bad_alloc? (The pointer escapes through a
// volatile so that the new/delete pair is not elided.)
static char *volatile sink;
static bool giant_new_throws()
{
    try {
        volatile size_t n = size_t(1) << 62;
        sink = new char[n];
        delete[] sink;
    } catch (const std::bad_alloc &) {
        return true;
    }
    return false;
}

// Does fn, run in a child, abort with a line on stderr that holds want?
static bool dies_saying(void (*fn)(), const char *want)
{
    int fds[2];
    if (pipe(fds))
        return false;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        fn();
        _exit(0);
    }
    close(fds[1]);
    char buf[512] = {0};
    size_t got = 0;
    ssize_t r;
    while (got < sizeof buf - 1 && (r = read(fds[0], buf + got, sizeof buf - 1 - got)) > 0)
        got += size_t(r);
    close(fds[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && std::strstr(buf, want);
}

struct Obj {
    long words[6]; // 48 bytes
};
static Obj *volatile obj_sink;
static void delete_twice()
{
    obj_sink = new Obj;
    delete obj_sink;
    delete obj_sink; // sized delete (48) of an object in the magazine
}
static void delete_wrong_size()
{
    void *p = ::operator new(48);
    ::operator delete(p, 4000);
}
static void delete_foreign()
{
    static long not_ours[8];
    void *volatile q = &not_ours[2]; // (hidden from the compiler's own check)
    ::operator delete(q);
}

static int handler_calls;
static void handler()
{
    handler_calls++;
    std::set_new_handler(nullptr); // next failure throws
}

int main()
{
    uint64_t before = sl_stat("alloc_small");
    int *a = new int(5);
    int *arr = new int[100];
    CHECK(sl_stat("alloc_small") >= before + 2); // served by sluice
    CHECK(sl_usable_size(a) >= sizeof(int));
    delete a;
    delete[] arr;

    Wide *w = new Wide;
    CHECK(reinterpret_cast<uintptr_t>(w) % 256 == 0);
    delete w;
    Wide *wa = new Wide[7];
    CHECK(reinterpret_cast<uintptr_t>(wa) % 256 == 0);
    delete[] wa;

    std::vector<std::vector<int>> v;
    for (int i = 0; i < 10000; i++)
        v.emplace_back(i % 100, i);
    CHECK(v[9999].size() == 99);
    v.clear();

    CHECK(giant_new_throws());

    char *q = new (std::nothrow) char[size_t(1) << 62];
    CHECK(q == nullptr);

    std::set_new_handler(handler);
    CHECK(giant_new_throws() && handler_calls == 1);

    void *al = ::operator new(100, std::align_val_t(4096));
    CHECK(reinterpret_cast<uintptr_t>(al) % 4096 == 0);
    ::operator delete(al, 100, std::align_val_t(4096));
    void *sz = ::operator new(48);
    ::operator delete(sz, 48);

    // misuse through delete: one line on stderr and an abort
    CHECK(dies_saying(delete_twice, "double free"));
    CHECK(dies_saying(delete_wrong_size, "sized free with the wrong size"));
    CHECK(dies_saying(delete_foreign, "a pointer sluice did not allocate"));

    std::printf("cxx_new: %d passed, %d failed\n", pass, fail);
    return fail != 0;
}
