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

/* ---- spawn.c: exact child runs ----------------------------------------- */

/* Spawn flags. */
#define PERFLAB_SPAWN_NO_ASLR 1  /* personality(ADDR_NO_RANDOMIZE) for the child only */
#define PERFLAB_SPAWN_ASLR 2     /* clear ADDR_NO_RANDOMIZE (undo a setarch -R parent) */
#define PERFLAB_SPAWN_RT 4       /* rt_policy/rt_priority, bounded by RLIMIT_RTTIME */
#define PERFLAB_SPAWN_MLOCK 8    /* ask the child's probe to mlockall (see perflab_probe.h) */

/* Run status. */
#define PERFLAB_RUN_OK 0
#define PERFLAB_RUN_EXIT 1         /* exited with a non-zero code */
#define PERFLAB_RUN_CRASH 2        /* killed by a signal */
#define PERFLAB_RUN_TIMEOUT 3      /* killed by perflab after timeout_ns */
#define PERFLAB_RUN_BAD_PROBE 4    /* short, malformed or extra probe record */
#define PERFLAB_RUN_EXEC_FAILED 5  /* execve failed: child_errno says why */
#define PERFLAB_RUN_SETUP_FAILED 6 /* affinity or fd setup failed in the child */
#define PERFLAB_RUN_SPAWN_FAILED 7 /* clone/socketpair failed in the parent */

/* Run flags. */
#define PERFLAB_RUN_HAS_PROBE 1    /* probe_ticks came from a valid record */
#define PERFLAB_RUN_HAS_COUNTERS 2 /* cycles and instructions are valid */
#define PERFLAB_RUN_MLOCKED 4      /* the child's probe locked its memory */

struct perflab_spawn_opts {
    int flags;             /* PERFLAB_SPAWN_* */
    int ncpus;             /* CPUs in cpus[]; 0 = no pinning */
    const int *cpus;
    int rt_policy;         /* SCHED_FIFO (1) or SCHED_RR (2) */
    int rt_priority;
    int64_t timeout_ns;    /* SIGKILL after this long; 0 = never */
    int stdin_fd;          /* dup2'd onto 0/1/2 in the child; -1 = inherit */
    int stdout_fd;
    int stderr_fd;
};

struct perflab_run {
    int64_t env_size;      /* the padding length of a sweep run; -1 for single runs */
    int32_t status;        /* PERFLAB_RUN_* */
    int32_t flags;         /* PERFLAB_RUN_* flags */
    int32_t exit_code;     /* -1 when killed */
    int32_t signal;        /* 0 when exited */
    int32_t child_errno;   /* why exec/setup failed */
    int32_t rt_errno;      /* why the real-time request was refused (0: granted or not asked) */
    uint64_t probe_ticks;  /* the probe's end - begin (raw) */
    uint64_t cycles;
    uint64_t instructions;
    uint64_t outer_ticks;  /* parent: before clone to after wait4 */
    int64_t wall_ns;       /* CLOCK_MONOTONIC over the same span */
    int64_t utime_ns;
    int64_t stime_ns;
    int64_t maxrss_kb;
    int64_t minflt;
    int64_t majflt;
    int64_t nvcsw;
    int64_t nivcsw;
};

/* One run of path with exactly argv and envp (NULL-terminated): nothing inherited. */
int perflab_spawn(const char *path, char *const argv[], char *const envp[],
                  const struct perflab_spawn_opts *opts, struct perflab_run *out);
/* The env-size sweep's chunk: run i gets envp base + "VAR=" followed by sizes[i]
 * pad characters; results in out[0..n).  Returns 0 or -errno for the batch. */
int perflab_spawn_env_sizes(const char *path, char *const argv[], char *const base_envp[],
                            const char *var, const int64_t *sizes, size_t n,
                            const struct perflab_spawn_opts *opts, struct perflab_run *out);
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
