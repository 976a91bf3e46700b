// C++ operator new/delete on sluice: every variant, alignment, std::bad_alloc,
// the new handler, nothrow, and that they really come from sluice.
#include <cstdint>
#include <cstdio>
#include <new>
#include <vector>

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

    std::printf("cxx_new: %d passed, %d failed\n", pass, fail);
    return fail != 0;
}
