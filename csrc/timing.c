/* Batches of calls through a function pointer, timed in C for the perf assertions. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include "perflab.h"
#include "perflab_ticks.h"

/* The branch on the pointer kind sits outside the timestamps. */
static uint64_t one_sample(const struct perflab_call *c)
{
    uint64_t t0, t1, i;

    if (c->fn) {
        t0 = perflab_ticks_begin();
        for (i = 0; i < c->calls; i++)
            c->fn();
        t1 = perflab_ticks_end();
    } else {
        t0 = perflab_ticks_begin();
        for (i = 0; i < c->calls; i++)
            c->fn_arg(c->arg);
        t1 = perflab_ticks_end();
    }
    return t1 - t0;
}

static int valid(const struct perflab_call *c)
{
    return c && (c->fn || c->fn_arg) && c->calls > 0;
}

int perflab_time_calls(const struct perflab_call *c, uint64_t *out, size_t n)
{
    if (!valid(c))
        return -EINVAL;
    for (size_t i = 0; i < n; i++)
        out[i] = one_sample(c);
    return 0;
}

int perflab_time_pair(const struct perflab_call *a, const struct perflab_call *b,
                      uint64_t *out_a, uint64_t *out_b, size_t n)
{
    if (!valid(a) || !valid(b))
        return -EINVAL;
    /* Unrecorded, one each: the first sample after the caller's own work found the caches
     * cold (12 % above its median for Python twins), and a, always first, paid it alone. */
    one_sample(a);
    one_sample(b);
    for (size_t i = 0; i < n; i++) {
        if (i & 1) {
            out_b[i] = one_sample(b);
            out_a[i] = one_sample(a);
        } else {
            out_a[i] = one_sample(a);
            out_b[i] = one_sample(b);
        }
    }
    return 0;
}

/* The empty asm keeps the loop (one turn per iteration) from being folded away. */
void perflab_spin(void *iterations)
{
    uint64_t n = *(const uint64_t *)iterations;
    for (uint64_t i = 0; i < n; i++)
        __asm__ volatile("" : "+r"(i));
}

void perflab_noop(void) {}

void perflab_noop_arg(void *arg) { (void)arg; }
