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

/* ---- memory.c: memcpy kernels, their sweep, page-fault cost ----------- */

#define PERFLAB_COPY_LIBC 0
#define PERFLAB_COPY_REP_MOVSB 1
#define PERFLAB_COPY_LOOP 2

#define PERFLAB_TOUCH_FIRST 0
#define PERFLAB_TOUCH_AGAIN 1
#define PERFLAB_TOUCH_LOCKED 2

/* Whether a copy kernel exists on this CPU (rep movsb is x86 only). */
int perflab_copy_available(int kernel);
/* mlockall(MCL_CURRENT|MCL_FUTURE) while on, munlockall when off: the
 * article's remedy against page faults during a measurement. */
int perflab_lock_memory(int on);
/* Two page-aligned buffers of `bytes` each, written once so every page is
 * faulted in before anything is timed; free with perflab_buffers_free. */
int perflab_buffers_alloc(size_t bytes, void **src, void **dst);
void perflab_buffers_free(void *src, void *dst, size_t bytes);
/* One untimed copy with a kernel: lets tests check the kernels copy right. */
int perflab_copy_once(int kernel, void *dst, const void *src, size_t n);
/* For each sizes[i]: the minimum over `trials` of the ticks one copy of
 * sizes[i] bytes from src to dst takes, timer overhead subtracted. */
int perflab_copy_sweep(int kernel, void *dst, const void *src, const uint64_t *sizes,
                       size_t n, unsigned trials, int64_t *min_ticks);
/* Ticks to write one byte into each of `pages` pages of a fresh anonymous
 * mapping: out[PERFLAB_TOUCH_FIRST] (page faults), out[PERFLAB_TOUCH_AGAIN]
 * (same pages again), out[PERFLAB_TOUCH_LOCKED] (another mapping mlock'ed
 * first). Overhead subtracted once per region. */
int perflab_touch_pages(size_t pages, int64_t out[3]);

/* ---- oscost.c: libm calls cold and warm, context switches, syscalls ---- */

#define PERFLAB_SYS_GETPID 0
#define PERFLAB_SYS_OPEN_CLOSE 1
#define PERFLAB_SYS_READ 2
#define PERFLAB_SYS_WRITE 3
#define PERFLAB_SYS_STAT 4
#define PERFLAB_SYS_FSTAT 5
#define PERFLAB_SYS_SCHED_YIELD 6
#define PERFLAB_SYS_MMAP_MUNMAP 7
#define PERFLAB_NSYSCALLS 8
#define PERFLAB_SYS_IO_BYTES 4096

/* Resolve a double(double) function of libm by name: 0 or -ENOENT. */
int perflab_libm_lookup(const char *name);
/* `repeat` rounds of calling names[j](args[j]) for j in 0..ncalls, each call
 * timed alone, timer overhead subtracted: out[round * ncalls + j]. */
int perflab_libm_warm(const char **names, const double *args, size_t ncalls,
                      size_t repeat, int64_t *out);
/* The same sequence once, in a freshly forked child whose first calls pay
 * the page faults and cache misses; results come back through a pipe. */
int perflab_libm_cold(const char **names, const double *args, size_t ncalls, int64_t *out);

struct perflab_cswitch {
    int64_t alone_ns;      /* n write+read of one byte through a pipe, one process */
    int64_t pingpong_ns;   /* n round trips parent -> child -> parent, two pipes */
    long parent_nvcsw, parent_nivcsw;  /* rusage deltas over the ping-pong */
    long child_nvcsw, child_nivcsw;    /* the child's whole life (wait4) */
    int child_pid;         /* already reaped when this returns */
    int rt_applied;        /* SCHED_RR obtained (both sides inherit it) */
};
/* Rubini's cswitch. cpu_parent/cpu_child < 0: unpinned. rt_prio > 0 asks for
 * SCHED_RR at that priority, bounded by RLIMIT_RTTIME = rttime_us, and
 * restores policy, affinity and limit before returning. The child is reaped
 * on every path; SIGINT/SIGTERM stop the loops, and are raised again after
 * the child is gone and the settings restored (then -EINTR). */
int perflab_cswitch(size_t n, int cpu_parent, int cpu_child, int rt_prio,
                    long rttime_us, struct perflab_cswitch *out);

/* Time `n` calls of one PERFLAB_SYS_* operation on `path` (open, stat, read
 * and write use a file of at least PERFLAB_SYS_IO_BYTES), each call alone,
 * timer overhead subtracted. */
int perflab_syscall_time(int call, const char *path, int64_t *out, size_t n);
