/* fatal.h — the one fatal path: one line on stderr via write(2), then abort.
 * Cold, noreturn, allocates nothing. Message form:
 *   sluice: double free of 0x7f12a4c01040 (size class 64)
 */
#ifndef SL_FATAL_H
#define SL_FATAL_H

#include "common.h"

/* what: "double free", "free of a pointer sluice did not allocate", ...
 * detail: NULL or a short parenthesised remark ("size class 64"). */
_Noreturn sl_cold void sl_fatal(const char *what, const void *p, const char *detail, size_t num);

/* Formatting helpers that never allocate: write into buf, return length. */
size_t fmt_u64(char *buf, uint64_t v);
size_t fmt_hex(char *buf, uint64_t v);
/* path with each "%p" replaced by the process id, then suffix, into out
 * (cap bytes); false if it does not fit. */
bool fmt_path(char *out, size_t cap, const char *path, const char *suffix);

#endif
