/* fault.c — the fault-injection rules (test builds only; see fault.h).
 * State is a handful of atomics: any thread's system call may consult it,
 * and a test may change the rule while threads run. */
#include "fault.h"

#include <stdlib.h>
#include <string.h>

enum fault_rule { RULE_NONE, RULE_NTH, RULE_EVERY, RULE_AFTER, RULE_P };

static _Atomic int configured;
static _Atomic unsigned ops_mask;          /* bit op: op is subject to the rule */
static _Atomic int rule;                   /* enum fault_rule */
static _Atomic uint64_t rule_n;            /* N of nth/every/after */
static _Atomic uint64_t rule_p;            /* probability in 1/2^32 */
static _Atomic uint64_t rng;               /* xorshift state */
static _Atomic uint64_t calls[FAULT_NOPS], failed[FAULT_NOPS];

static uint64_t parse_u(const char *s) { return strtoull(s, NULL, 10); }

void fault_config(const char *spec)
{
    unsigned mask = 0;
    int r = RULE_NONE;
    uint64_t n = 0, p = 0, seed = 1;
    if (spec && *spec) {
        char buf[128];
        strncpy(buf, spec, sizeof buf - 1);
        buf[sizeof buf - 1] = 0;
        char *rest = strchr(buf, ':');
        if (rest)
            *rest++ = 0;
        for (char *op = buf; op && *op;) {
            char *next = strchr(op, ',');
            if (next)
                *next++ = 0;
            if (!strcmp(op, "mmap") || !strcmp(op, "all"))
                mask |= 1u << FAULT_MMAP;
            if (!strcmp(op, "mremap") || !strcmp(op, "all"))
                mask |= 1u << FAULT_MREMAP;
            if (!strcmp(op, "madvise") || !strcmp(op, "all"))
                mask |= 1u << FAULT_MADVISE;
            if (!strcmp(op, "mprotect") || !strcmp(op, "all"))
                mask |= 1u << FAULT_MPROTECT;
            if (!strcmp(op, "collapse"))
                mask |= 1u << FAULT_COLLAPSE;
            if (!strcmp(op, "open"))
                mask |= 1u << FAULT_OPEN;
            op = next;
        }
        for (char *kv = rest; kv && *kv;) {
            char *next = strchr(kv, ':');
            if (next)
                *next++ = 0;
            if (!strncmp(kv, "nth=", 4))
                r = RULE_NTH, n = parse_u(kv + 4);
            else if (!strncmp(kv, "every=", 6))
                r = RULE_EVERY, n = parse_u(kv + 6);
            else if (!strncmp(kv, "after=", 6))
                r = RULE_AFTER, n = parse_u(kv + 6);
            else if (!strncmp(kv, "p=", 2))
                r = RULE_P, p = (uint64_t)(strtod(kv + 2, NULL) * 4294967296.0);
            else if (!strncmp(kv, "seed=", 5))
                seed = parse_u(kv + 5);
            kv = next;
        }
    }
    atomic_store(&rule, RULE_NONE); /* no half-set rule is ever seen */
    for (int i = 0; i < FAULT_NOPS; i++) {
        atomic_store(&calls[i], 0);
        atomic_store(&failed[i], 0);
    }
    atomic_store(&ops_mask, mask);
    atomic_store(&rule_n, n ? n : 1);
    atomic_store(&rule_p, p);
    atomic_store(&rng, seed ? seed : 1);
    atomic_store(&configured, 1);
    atomic_store(&rule, r);
}

static uint64_t next_random(void)
{
    uint64_t x = atomic_load(&rng), y;
    do {
        y = x;
        y ^= y << 13;
        y ^= y >> 7;
        y ^= y << 17;
    } while (!atomic_compare_exchange_weak(&rng, &x, y));
    return y;
}

bool fault_hit(enum fault_op op)
{
    if (!atomic_load_explicit(&configured, memory_order_acquire)) {
        static _Atomic int reading;
        if (!atomic_exchange(&reading, 1))
            fault_config(getenv("SLUICE_FAULT"));
        else
            return false; /* another thread is reading the environment */
    }
    uint64_t k = atomic_fetch_add_explicit(&calls[op], 1, memory_order_relaxed) + 1;
    int r = atomic_load_explicit(&rule, memory_order_acquire);
    if (r == RULE_NONE || !(atomic_load_explicit(&ops_mask, memory_order_relaxed) & (1u << op)))
        return false;
    uint64_t n = atomic_load_explicit(&rule_n, memory_order_relaxed);
    bool hit = r == RULE_NTH     ? k == n
               : r == RULE_EVERY ? k % n == 0
               : r == RULE_AFTER ? k > n
                                 : (next_random() >> 32) < atomic_load_explicit(&rule_p, memory_order_relaxed);
    if (hit)
        atomic_fetch_add_explicit(&failed[op], 1, memory_order_relaxed);
    return hit;
}

uint64_t fault_calls(enum fault_op op) { return atomic_load(&calls[op]); }
uint64_t fault_failed(enum fault_op op) { return atomic_load(&failed[op]); }
