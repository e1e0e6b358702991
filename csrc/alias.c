/* 4K aliasing: does this CPU hold a load behind an older store to another address
 * that matches the load's only in its low 12 bits?  With ASLR off the env size moves
 * the stack in 16-byte steps, so once per 4096 bytes a stack slot of the paper's -O0
 * loop meets a static counter modulo 4096; this check says whether that can cost
 * anything here, apart from the loop.
 */
#include <stddef.h>
#include <stdint.h>
#include "perflab.h"
#include "perflab_ticks.h"

/* Three pages and a margin, so both loads stay inside whatever distance is asked. */
static int alias_buf[4 * 4096 / sizeof(int)] __attribute__((aligned(4096)));

/* A store, then an independent load: only a (false) dependence can slow the load. */
__attribute__((noinline)) static int store_then_load(volatile int *st, volatile int *ld,
                                                     size_t n)
{
    int sum = 0;
    for (size_t i = 0; i < n; i++) {
        *st = (int)i;
        sum += *ld;
    }
    return sum;
}

/* The paper's -O0 loop with its five variables behind pointers: the statics i, j, k
 * side by side from st, the stack slots inc and g side by side from ld (as gcc lays
 * them out: inc at rbp-8, g at rbp-4), every access a load or a store of memory. */
__attribute__((noinline)) static int paper_loop(volatile int *st, volatile int *ld, size_t n)
{
    volatile int *i = st, *j = st + 1, *k = st + 2, *inc = ld, *g = ld + 1;

    *inc = 1;
    for (*g = 0; (size_t)*g < n; *g += 1) {
        *i += *inc;
        *j += *inc;
        *k += *inc;
    }
    return *i + *j + *k;
}

static uint64_t alias_once(int kernel, size_t apart, size_t n)
{
    volatile int *st = alias_buf + PERFLAB_ALIAS_STORE_OFFSET / sizeof(int);
    volatile int *ld = st + apart / sizeof(int);
    uint64_t t0 = perflab_ticks_begin();
    int sink = kernel == PERFLAB_ALIAS_LOOP ? paper_loop(st, ld, n)
                                           : store_then_load(st, ld, n);
    uint64_t t1 = perflab_ticks_end();
    *st = sink;
    return t1 - t0;
}

int perflab_alias_time(int kernel, size_t aliased, size_t distinct, size_t n, size_t trials,
                       uint64_t *out_aliased, uint64_t *out_distinct)
{
    size_t room = sizeof alias_buf - PERFLAB_ALIAS_STORE_OFFSET - 3 * sizeof(int);
    if ((kernel != PERFLAB_ALIAS_STORE_LOAD && kernel != PERFLAB_ALIAS_LOOP) ||
        aliased > room || distinct > room || aliased % sizeof(int) || distinct % sizeof(int))
        return -22; /* -EINVAL */
    for (size_t t = 0; t < trials; t++) {
        /* Alternate which comes first, so drift and warm-up hit both alike. */
        if (t % 2) {
            out_distinct[t] = alias_once(kernel, distinct, n);
            out_aliased[t] = alias_once(kernel, aliased, n);
        } else {
            out_aliased[t] = alias_once(kernel, aliased, n);
            out_distinct[t] = alias_once(kernel, distinct, n);
        }
    }
    return 0;
}
