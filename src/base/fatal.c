/* fatal.c — report misuse in one line and abort. See fatal.h. */
#include "fatal.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../os/os.h"

size_t fmt_u64(char *buf, uint64_t v)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        buf[i] = tmp[n - 1 - i];
    return n;
}

bool fmt_path(char *out, size_t cap, const char *path, const char *suffix)
{
    size_t n = 0;
    for (const char *s = path; *s; s++) {
        char num[24];
        size_t d = 1;
        const char *piece = s;
        if (s[0] == '%' && s[1] == 'p') {
            d = fmt_u64(num, (uint64_t)getpid());
            piece = num;
            s++;
        }
        if (n + d >= cap)
            return false;
        for (size_t i = 0; i < d; i++)
            out[n++] = piece[i];
    }
    for (; *suffix; suffix++) {
        if (n + 1 >= cap)
            return false;
        out[n++] = *suffix;
    }
    out[n] = 0;
    return true;
}

size_t fmt_hex(char *buf, uint64_t v)
{
    static const char digits[] = "0123456789abcdef";
    char tmp[16];
    size_t n = 0;
    do {
        tmp[n++] = digits[v & 15];
        v >>= 4;
    } while (v);
    buf[0] = '0';
    buf[1] = 'x';
    for (size_t i = 0; i < n; i++)
        buf[2 + i] = tmp[n - 1 - i];
    return n + 2;
}

static size_t put(char *buf, size_t at, size_t cap, const char *s)
{
    size_t n = strlen(s);
    if (at + n > cap)
        n = cap - at;
    memcpy(buf + at, s, n);
    return at + n;
}

_Noreturn void sl_fatal(const char *what, const void *p, const char *detail, size_t num)
{
    char line[256];
    size_t cap = sizeof line - 2, n = 0;
    char num_buf[24];
    n = put(line, n, cap, "sluice: ");
    n = put(line, n, cap, what);
    if (p) {
        char hex[24];
        hex[fmt_hex(hex, (uintptr_t)p)] = 0;
        n = put(line, n, cap, " ");
        n = put(line, n, cap, hex);
    }
    if (detail) {
        n = put(line, n, cap, " (");
        n = put(line, n, cap, detail);
        if (num != (size_t)-1) {
            num_buf[fmt_u64(num_buf, num)] = 0;
            n = put(line, n, cap, " ");
            n = put(line, n, cap, num_buf);
        }
        n = put(line, n, cap, ")");
    }
    line[n++] = '\n';
    os_write_err(line, n);
    abort();
}

void sl_assert_fail(const char *cond, const char *file, int line)
{
    char what[256];
    size_t n = 0;
    const char *parts[] = { "internal invariant broken: ", cond, " at ", file, ":" };
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
        for (const char *c = parts[i]; *c && n + 1 < sizeof what; c++)
            what[n++] = *c;
    what[n] = 0;
    sl_fatal(what, NULL, "line", (size_t)line);
}
