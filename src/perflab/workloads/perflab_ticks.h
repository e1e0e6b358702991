/* Cycle-counter reads shared by perflab's core and the child-side probe.
 *
 * begin: lfence;rdtsc  -- earlier instructions retire before the read.
 * end:   rdtscp;lfence -- the timed region retires before the read, later
 *        instructions wait for it.  No cpuid: it traps in a virtual machine.
 * aarch64 reads the virtual counter cntvct_el0 behind isb barriers; other
 * machines fall back to CLOCK_MONOTONIC_RAW in nanoseconds.
 */
#ifndef PERFLAB_TICKS_H
#define PERFLAB_TICKS_H
#include <stdint.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
static inline uint64_t perflab_ticks_begin(void)
{
    _mm_lfence();
    return __rdtsc();
}
/* rdtscp by inline asm: the intrinsic stores the aux word to memory on every read. */
static inline uint64_t perflab_rdtscp(void)
{
    uint32_t lo, hi, aux;
    __asm__ volatile("rdtscp" : "=a"(lo), "=d"(hi), "=c"(aux));
    (void)aux;
    return ((uint64_t)hi << 32) | lo;
}
static inline uint64_t perflab_ticks_end(void)
{
    uint64_t t = perflab_rdtscp();
    _mm_lfence();
    return t;
}
#elif defined(__aarch64__)
static inline uint64_t perflab_ticks_begin(void)
{
    uint64_t t;
    __asm__ volatile("isb; mrs %0, cntvct_el0" : "=r"(t) :: "memory");
    return t;
}
static inline uint64_t perflab_ticks_end(void)
{
    uint64_t t;
    __asm__ volatile("isb; mrs %0, cntvct_el0; isb" : "=r"(t) :: "memory");
    return t;
}
#else
#include <time.h>
static inline uint64_t perflab_ticks_begin(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
static inline uint64_t perflab_ticks_end(void) { return perflab_ticks_begin(); }
#endif
#endif
