/* Clock sources: TSC reads by four methods, POSIX clocks, gettimeofday. */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/time.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <x86intrin.h>
#endif
#include "perflab.h"
#include "perflab_internal.h"
#include "perflab_ticks.h"

static const clockid_t posix_ids[] = {
    CLOCK_REALTIME,        CLOCK_REALTIME_COARSE, CLOCK_MONOTONIC,
    CLOCK_MONOTONIC_RAW,   CLOCK_MONOTONIC_COARSE, CLOCK_BOOTTIME,
    CLOCK_PROCESS_CPUTIME_ID, CLOCK_THREAD_CPUTIME_ID,
};

#if defined(__x86_64__) || defined(__i386__)
static int cpu_has(uint32_t leaf, int reg, uint32_t bit)
{
    uint32_t r[4];
    if (!__get_cpuid(leaf, &r[0], &r[1], &r[2], &r[3]))
        return 0;
    return (r[reg] >> bit) & 1u;
}

static inline uint64_t tsc_plain(void) { return __rdtsc(); }
static inline uint64_t tsc_lfence(void) { _mm_lfence(); return __rdtsc(); }
static inline uint64_t tsc_rdtscp(void) { return perflab_rdtscp(); }
static inline uint64_t tsc_cpuid(void)
{
    uint32_t a, b, c, d;
    __cpuid(0, a, b, c, d);
    (void)a; (void)b; (void)c; (void)d;
    return __rdtsc();
}
#else
static inline uint64_t tsc_plain(void) { return perflab_ticks_begin(); }
static inline uint64_t tsc_lfence(void) { return perflab_ticks_begin(); }
static inline uint64_t tsc_rdtscp(void) { return perflab_ticks_end(); }
static inline uint64_t tsc_cpuid(void) { return perflab_ticks_end(); }
#endif

static int probe_source(int source)
{
#if defined(__x86_64__) || defined(__i386__)
    if (source == PERFLAB_TSC_RDTSCP)
        return cpu_has(0x80000001u, 3, 27);
    if (source >= PERFLAB_TSC_RDTSC)
        return cpu_has(1, 3, 4);
#else
    if (source == PERFLAB_TSC_CPUID_RDTSC)
        return 0;
#endif
    return 1;
}

/* Cached: CPUID traps to the hypervisor in a guest, so ask it once per source. */
int perflab_source_available(int source)
{
    static int known[PERFLAB_NSOURCES];
    if (source < 0 || source >= PERFLAB_NSOURCES)
        return 0;
    if (!known[source])
        known[source] = probe_source(source) ? 1 : -1;
    return known[source] > 0;
}

/* Each branch is its own loop so the read is the only work per element. */
int perflab_sample(int source, uint64_t *out, size_t n)
{
    struct timespec ts;
    struct timeval tv;
    size_t i;

    if (!perflab_source_available(source))
        return -EINVAL;
    switch (source) {
    case PERFLAB_GETTIMEOFDAY:
        for (i = 0; i < n; i++) {
            gettimeofday(&tv, NULL);
            out[i] = perflab_tv_ns(&tv);
        }
        return 0;
    case PERFLAB_TSC_RDTSC:
        for (i = 0; i < n; i++)
            out[i] = tsc_plain();
        return 0;
    case PERFLAB_TSC_LFENCE_RDTSC:
        for (i = 0; i < n; i++)
            out[i] = tsc_lfence();
        return 0;
    case PERFLAB_TSC_RDTSCP:
        for (i = 0; i < n; i++)
            out[i] = tsc_rdtscp();
        return 0;
    case PERFLAB_TSC_CPUID_RDTSC:
        for (i = 0; i < n; i++)
            out[i] = tsc_cpuid();
        return 0;
    default:
        for (i = 0; i < n; i++) {
            clock_gettime(posix_ids[source], &ts);
            out[i] = perflab_ts_ns(&ts);
        }
        return 0;
    }
}

int perflab_read(int source, int64_t *sec, int64_t *nsec)
{
    struct timespec ts;
    struct timeval tv;

    if (!perflab_source_available(source))
        return -EINVAL;
    if (source == PERFLAB_GETTIMEOFDAY) {
        gettimeofday(&tv, NULL);
        *sec = tv.tv_sec;
        *nsec = (int64_t)tv.tv_usec * 1000;
    } else if (source >= PERFLAB_TSC_RDTSC) {
        *sec = 0;
        *nsec = (int64_t)tsc_rdtscp();
    } else {
        if (clock_gettime(posix_ids[source], &ts) != 0)
            return -errno;
        *sec = ts.tv_sec;
        *nsec = ts.tv_nsec;
    }
    return 0;
}

int perflab_getres(int source, int64_t *res_ns)
{
    struct timespec ts;

    if (!perflab_source_available(source))
        return -EINVAL;
    if (source == PERFLAB_GETTIMEOFDAY)
        *res_ns = 1000;
    else if (source >= PERFLAB_TSC_RDTSC)
        *res_ns = 1;
    else {
        if (clock_getres(posix_ids[source], &ts) != 0)
            return -errno;
        *res_ns = (int64_t)perflab_ts_ns(&ts);
    }
    return 0;
}

/* Reads folded into one register instead of stored: the cost of the read alone. */
#define BATCH(read_expr)                                                      \
    do {                                                                      \
        for (size_t i = 0; i < n; i++)                                        \
            acc ^= (read_expr);                                               \
    } while (0)

int perflab_batch_ticks(int source, size_t n, uint64_t *ticks)
{
    struct timespec ts;
    struct timeval tv;
    uint64_t t0, t1, acc = 0;

    if (!perflab_source_available(source))
        return -EINVAL;
    t0 = perflab_ticks_begin();
    switch (source) {
    case PERFLAB_GETTIMEOFDAY:
        BATCH((uint64_t)(gettimeofday(&tv, NULL), tv.tv_usec));
        break;
    case PERFLAB_TSC_RDTSC:
        BATCH(tsc_plain());
        break;
    case PERFLAB_TSC_LFENCE_RDTSC:
        BATCH(tsc_lfence());
        break;
    case PERFLAB_TSC_RDTSCP:
        BATCH(tsc_rdtscp());
        break;
    case PERFLAB_TSC_CPUID_RDTSC:
        BATCH(tsc_cpuid());
        break;
    default:
        BATCH((uint64_t)(clock_gettime(posix_ids[source], &ts), ts.tv_nsec));
    }
    t1 = perflab_ticks_end();
    __asm__ volatile("" : : "r"(acc)); /* keep the reads */
    *ticks = t1 - t0;
    return 0;
}

uint64_t perflab_region_begin(void) { return perflab_ticks_begin(); }
uint64_t perflab_region_end(void) { return perflab_ticks_end(); }

uint64_t perflab_timer_overhead(void)
{
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 10000; i++) {
        uint64_t t0 = perflab_ticks_begin();
        uint64_t t1 = perflab_ticks_end();
        if (t1 - t0 < best)
            best = t1 - t0;
    }
    return best;
}

void perflab_time_empty(int64_t *out, size_t n)
{
    int64_t cost = (int64_t)perflab_timer_overhead();
    for (size_t i = 0; i < n; i++) {
        uint64_t t0 = perflab_ticks_begin();
        uint64_t t1 = perflab_ticks_end();
        out[i] = (int64_t)(t1 - t0) - cost;
    }
}

/* One (counter, clock) pair taken with the narrowest counter bracket of a few
 * tries, so an interrupt between the reads cannot skew the pair. */
static int paired_read(clockid_t id, uint64_t *ticks, uint64_t *ns)
{
    uint64_t best = UINT64_MAX;
    struct timespec ts;
    for (int i = 0; i < 16; i++) {
        uint64_t a = perflab_ticks_end();
        if (clock_gettime(id, &ts) != 0)
            return -errno;
        uint64_t b = perflab_ticks_end();
        if (b - a < best) {
            best = b - a;
            *ticks = a + (b - a) / 2;
            *ns = perflab_ts_ns(&ts);
        }
    }
    return 0;
}

int perflab_calibrate_hz(int source, int64_t interval_ns, double *hz)
{
    uint64_t t0, t1, n0, n1;
    struct timespec pause;
    int rc;

    if (source < 0 || source > PERFLAB_CLOCK_BOOTTIME || interval_ns <= 0)
        return -EINVAL;
    if ((rc = paired_read(posix_ids[source], &t0, &n0)) != 0)
        return rc;
    pause.tv_sec = interval_ns / 1000000000;
    pause.tv_nsec = interval_ns % 1000000000;
    while (nanosleep(&pause, &pause) != 0 && errno == EINTR)
        ;
    if ((rc = paired_read(posix_ids[source], &t1, &n1)) != 0)
        return rc;
    *hz = (double)(t1 - t0) * 1e9 / (double)(n1 - n0);
    return 0;
}

int perflab_tsc_hz(int64_t calibrate_ns, double *hz, int *how)
{
#if defined(__x86_64__) || defined(__i386__)
    uint32_t a, b, c, d;
    if (__get_cpuid_max(0, NULL) >= 0x15) {
        __cpuid(0x15, a, b, c, d);
        if (a && b && c) {
            *hz = (double)c * b / a;
            *how = PERFLAB_HZ_CPUID_15;
            return 0;
        }
    }
    if (__get_cpuid_max(0, NULL) >= 0x16) {
        __cpuid(0x16, a, b, c, d);
        /* Leaf 0x16 gives the base frequency in MHz: the TSC's on Intel. */
        if (a & 0xffff) {
            *hz = (double)(a & 0xffff) * 1e6;
            *how = PERFLAB_HZ_CPUID_16;
            return 0;
        }
    }
    (void)d;
#elif defined(__aarch64__)
    uint64_t f;
    __asm__ volatile("mrs %0, cntfrq_el0" : "=r"(f));
    if (f) {
        *hz = (double)f;
        *how = PERFLAB_HZ_CNTFRQ;
        return 0;
    }
#endif
    *how = PERFLAB_HZ_CALIBRATED;
    return perflab_calibrate_hz(PERFLAB_CLOCK_MONOTONIC_RAW, calibrate_ns, hz);
}

int perflab_cpuid(uint32_t leaf, uint32_t subleaf, uint32_t regs[4])
{
#if defined(__x86_64__) || defined(__i386__)
    __cpuid_count(leaf, subleaf, regs[0], regs[1], regs[2], regs[3]);
    return 0;
#else
    (void)leaf; (void)subleaf; (void)regs;
    return -ENOSYS;
#endif
}

const char *perflab_core_digest(void) { return PERFLAB_CORE_DIGEST; }
