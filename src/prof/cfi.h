/* cfi.h — the call frame information reader (cfi.c): the rule of one
 * frame from its pc, worked out from the module's .eh_frame. The
 * unwinder (unwind.c) caches what it returns.
 */
#ifndef SL_PROF_CFI_H
#define SL_PROF_CFI_H

#include <dlfcn.h> /* with _GNU_SOURCE, defined by the includer: _dl_find_object */

#include "../base/common.h"

#if defined(__x86_64__) && defined(DLFO_STRUCT_HAS_EH_DBASE)
#define CFI_READER 1

enum { REG_BP = 6, REG_SP = 7, REG_RA = 16 };
enum how { SAME, UNDEF, AT, BAD }; /* a register's rule: unchanged, none, saved at CFA + off, beyond us */

struct reg_rule {
    enum how how;
    int64_t off;
};

struct rule {
    unsigned cfa_reg; /* REG_SP or REG_BP; anything else is beyond us */
    int64_t cfa_off;
    bool cfa_bad;     /* an expression */
    struct reg_rule bp, ra;
};

/* At start: find _dl_find_object (a weak reference; a glibc without it
 * leaves the reader off). Is it on? */
void cfi_init(void);
bool cfi_on(void);
/* The rule at pc: false if beyond us (no tables, or rules this reader
 * does not follow). Allocates nothing, takes no lock. */
bool cfi_rule_find(uintptr_t pc, struct rule *r);

#endif
#endif
