/* perflab's native core: the only declarations Python may call.
 *
 * Declarations only (no #include, no guards): csrc/build.py hands this file to
 * cffi's cdef verbatim, and every C file in csrc includes it after its system headers.
 * Times are uint64_t ticks of the cycle counter (TSC on x86-64, cntvct_el0 on
 * aarch64) or nanoseconds for POSIX clocks; functions return 0 or -errno.
 */

/* ---- clock.c: clock sources, their reads and their cost ---------------- */

#define PERFLAB_CLOCK_REALTIME 0
#define PERFLAB_CLOCK_REALTIME_COARSE 1
#define PERFLAB_CLOCK_MONOTONIC 2
#define PERFLAB_CLOCK_MONOTONIC_RAW 3
#define PERFLAB_CLOCK_MONOTONIC_COARSE 4
#define PERFLAB_CLOCK_BOOTTIME 5
#define PERFLAB_CLOCK_PROCESS_CPUTIME_ID 6
#define PERFLAB_CLOCK_THREAD_CPUTIME_ID 7
#define PERFLAB_GETTIMEOFDAY 8
#define PERFLAB_TSC_RDTSC 9
#define PERFLAB_TSC_LFENCE_RDTSC 10
#define PERFLAB_TSC_RDTSCP 11
#define PERFLAB_TSC_CPUID_RDTSC 12
#define PERFLAB_NSOURCES 13

#define PERFLAB_HZ_CPUID_15 1
#define PERFLAB_HZ_CPUID_16 2
#define PERFLAB_HZ_CALIBRATED 3
#define PERFLAB_HZ_CNTFRQ 4

/* Which sources this CPU and kernel can read (x86 TSC methods need flags). */
int perflab_source_available(int source);
/* Fill out[0..n) with back-to-back reads of one source (ns or ticks). */
int perflab_sample(int source, uint64_t *out, size_t n);
/* One read: seconds and nanoseconds (clocks) or ticks in *nsec (counters). */
int perflab_read(int source, int64_t *sec, int64_t *nsec);
/* clock_getres of a POSIX clock, gettimeofday's 1000 ns, 1 for counters. */
int perflab_getres(int source, int64_t *res_ns);
/* Ticks of n back-to-back reads of a source, timed as one batch by rdtscp. */
int perflab_batch_ticks(int source, size_t n, uint64_t *ticks);

/* Region timing: begin = lfence;rdtsc, end = rdtscp;lfence (no cpuid: it
 * traps to the hypervisor in a guest). */
uint64_t perflab_region_begin(void);
uint64_t perflab_region_end(void);
/* Minimum end-begin of many empty regions: the timer's own cost. */
uint64_t perflab_timer_overhead(void);
/* Fill out[0..n) with empty-region timings, overhead subtracted (signed). */
void perflab_time_empty(int64_t *out, size_t n);

/* Counter frequency and how it was obtained (PERFLAB_HZ_*). calibrate_ns
 * bounds the calibration against CLOCK_MONOTONIC_RAW when CPUID is silent. */
int perflab_tsc_hz(int64_t calibrate_ns, double *hz, int *how);
/* Counter frequency measured against a POSIX clock over interval_ns. */
int perflab_calibrate_hz(int source, int64_t interval_ns, double *hz);
/* CPUID, for the flags /proc/cpuinfo does not show; -ENOSYS off x86. */
int perflab_cpuid(uint32_t leaf, uint32_t subleaf, uint32_t regs[4]);
/* sha256-like digest of the C sources this module was built from. */
const char *perflab_core_digest(void);

/* ---- counters.c: perf_event counters ----------------------------------- */

/* Open and close one counting event for this thread: 0 if the machine
 * supports it, -errno (ENOENT, EOPNOTSUPP, EACCES, ...) if not. */
int perflab_perf_probe(uint32_t type, uint64_t config);

/* ---- timing.c: calls of a function pointer, timed in batches --------------- */

/* What one sample times: `calls` back-to-back calls of fn() or, when fn is
 * NULL, of fn_arg(arg). A Python callable arrives as a cffi callback in fn. */
struct perflab_call {
    void (*fn)(void);
    void (*fn_arg)(void *);
    void *arg;
    uint64_t calls;
};

/* Fill out[0..n) with the ticks of n samples of one call batch. */
int perflab_time_calls(const struct perflab_call *c, uint64_t *out, size_t n);
/* n samples of a and of b interleaved a b, b a, a b, ... so drift and the
 * position in a pair hit both alike; out_a[i] and out_b[i] are pair i. */
int perflab_time_pair(const struct perflab_call *a, const struct perflab_call *b,
                      uint64_t *out_a, uint64_t *out_b, size_t n);
/* Workloads with known cost: spin *(uint64_t *)iterations loop turns; do nothing. */
void perflab_spin(void *iterations);
void perflab_noop(void);
void perflab_noop_arg(void *arg);
