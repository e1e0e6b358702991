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
#define PERFLAB_SPAWN_DIRS 256   /* each program's strings start with the directory it runs in */

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
#define PERFLAB_RUN_STRAYS 8       /* processes it left (its group, a reaper's children) were killed */
#define PERFLAB_RUN_PAGES_KEPT 16  /* its program's pages stayed when its batch read them afresh */

struct perflab_run {
    int64_t env_size;      /* the padding length of a sweep run; -1 for single runs */
    int32_t prog;          /* which program of the batch ran */
    int32_t cpu;           /* a parallel batch's run: the CPU it was pinned to (else 0) */
    int32_t status;        /* PERFLAB_RUN_* */
    int32_t flags;         /* PERFLAB_RUN_* flags */
    int32_t exit_code;     /* -1 when killed */
    int32_t signal;        /* 0 when exited */
    int32_t child_errno;   /* why exec/setup failed */
    int32_t rt_errno;      /* why the real-time request was refused (0: granted or not asked) */
    uint64_t probe_ticks;  /* the probe's end - begin (raw), summed over its iterations */
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
    int64_t runq_ns;       /* PERFLAB_SPAWN_RUNQ: its threads' run-queue wait (runq_source) */
    int64_t runq_cpu_ns;   /* the on-CPU time of the threads that wait covers */
    int32_t runq_source;   /* PERFLAB_RUNQ_* */
    int32_t runq_errno;    /* why taskstats was not the source (0: it was, or not asked) */
    int32_t iterations;    /* probe records received: the repeat loop's iterations (0: none) */
    uint64_t iteration_ticks[64]; /* each record's end - begin (raw), PERFLAB_MAX_ITERATIONS */
};

/* A batch of runs as one flat request, the same bytes whether the core runs it in-process
 * or the spawner helper runs it (see spawn.c): this header, then int32 cpus[ncpus],
 * int32 argc[nprogs], int32 prog[nruns], int64 env_size[nruns] (-1: no padding variable),
 * then strings_len bytes of NUL-terminated strings: each program's path then its argv,
 * the nenv base environment entries, and last the padding variable's name. */
#define PERFLAB_BATCH_MAGIC 0x6c62706eu /* "nplb": its first byte is not PERFLAB_STOP_BYTE */
#define PERFLAB_BATCH_VERSION 2
#define PERFLAB_MAX_ITERATIONS 64       /* a run's probe records: iteration_ticks' length */
#define PERFLAB_STOP_BYTE 83            /* 'S' on the spawner's socket: stop between runs */
#define PERFLAB_KEPT_HEAD 64            /* a batch's memfd: its count of finished runs (int64),
                                           then from this offset its records (spawner/main.c) */

struct perflab_batch {
    uint32_t magic;
    uint32_t version;
    int32_t flags;         /* PERFLAB_SPAWN_* */
    int32_t rt_policy;
    int32_t rt_priority;
    int32_t ncpus;
    int64_t timeout_ns;    /* SIGKILL after this long; 0 = never */
    int32_t nprogs;
    int32_t nenv;
    int32_t nruns;
    int32_t stdio;         /* 1: three fds (stdin, stdout, stderr) come with the request */
    int32_t iterations;    /* asked of the probe's repeat loop (1..PERFLAB_MAX_ITERATIONS) */
    int32_t reserved;
    uint64_t strings_len;
};

/* The spawner's answer: runs done (the rest were not started), and its own peak RSS, which
 * every child's maxrss includes (the floor). */
struct perflab_batch_reply {
    uint32_t magic;
    int32_t error;         /* 0 or -errno for the whole batch */
    int64_t done;
    int64_t floor_kb;
};

/* Run a packed batch in this process; out[0..*done) filled.  stdio: fds dup'd onto the
 * child's 0/1/2 (-1: inherit).  stop_fd (-1: none): readable means stop between runs; a
 * run in flight is killed and not counted.  Returns 0 or -errno for the whole batch. */
int perflab_spawn_batch(const void *req, size_t len, const int stdio[3], int stop_fd,
                        struct perflab_run *out, int64_t *done);

/* The helper's, never perflab's own process (a supervisor, or the spawner): make this
 * process a child subreaper, so that a descendant whose parent dies (a setsid daemon, a
 * double fork) becomes its child instead of init's; from then on each serial run, and each
 * parallel batch once all its lanes are done, ends with its strays killed and reaped.
 * 0 or -errno. */
int perflab_spawn_reaper(void);

/* The helper's, never perflab's own process (it takes the signal's handler): from then on a
 * serial batch waits for each child with wait4 and sigtimedwait, woken by sig from a watcher
 * thread at a timeout or a stop, instead of polling a pidfd per child.  0 or -errno. */
int perflab_spawn_wait_signal(int sig);

/* SIGKILL every descendant of this process (their parents read from /proc): how many. */
int perflab_kill_descendants(void);

/* Kill and reap every child this process has and their descendants (no run in flight: all
 * are strays); 1 if there were any.  One that will not die within seconds is left. */
int perflab_reap_strays(void);

/* ---- taskstats.c: every thread's exit record, from the kernel as it exits ---- */

/* One thread's figures at its exit (struct taskstats); read_ns: when perflab read it
 * (CLOCK_MONOTONIC, an upper bound on the exit: netlink gives no kernel time stamp). */
struct perflab_exit_record {
    int32_t tgid, tid, ppid;
    char comm[32];
    uint64_t etime_us, utime_us, stime_us, vcsw, ivcsw, cpu_delay_ns, cpu_ns;
    int64_t read_ns;
};

/* A non-blocking netlink socket registered for the exits on the CPUs of `cpumask` ("0-3");
 * -errno (EPERM without CAP_NET_ADMIN, ENOENT without CONFIG_TASKSTATS). */
int perflab_taskstats_listen(const char *cpumask);

/* The exit records queued on a listener now, at most `max` (*lost set to 1 when the kernel
 * dropped some: ENOBUFS); their count, or -errno. */
int perflab_taskstats_read(int fd, struct perflab_exit_record *out, int max, int *lost);

/* The events of a counter set, in this order; a mask selects some. */
#define PERFLAB_EV_CYCLES 0
#define PERFLAB_EV_INSTRUCTIONS 1
#define PERFLAB_EV_REF_CYCLES 2
#define PERFLAB_EV_TASK_CLOCK 3
#define PERFLAB_EV_CONTEXT_SWITCHES 4
#define PERFLAB_EV_CPU_MIGRATIONS 5
#define PERFLAB_EV_PAGE_FAULTS 6
#define PERFLAB_NEVENTS 7
#define PERFLAB_EV_ALL 127

/* One thread's or process's counters: opened as one group when the kernel
 * accepts all of them, else one by one. status[i] is 0 when event i counts,
 * -errno when it could not be opened (never a zero count in disguise). */
struct perflab_counter_set {
    int32_t fd[7];
    int32_t status[7];
    int32_t grouped;
};

/* Open the events of mask for pid (0 = calling thread) on cpu (-1 = any),
 * disabled; inherit also counts the threads and children pid creates later
 * (added in when they exit). Returns the number of events that count, or
 * -errno when none does. */
int perflab_counters_open(struct perflab_counter_set *set, int32_t pid, int32_t cpu,
                          uint32_t mask, int32_t inherit);
int perflab_counters_enable(struct perflab_counter_set *set);
int perflab_counters_disable(struct perflab_counter_set *set);
/* counts[i]: the count scaled for multiplexing, or status[i] (< 0) when
 * event i did not count; -ENODATA when it was open but never scheduled. */
int perflab_counters_read(struct perflab_counter_set *set, int64_t counts[7]);
void perflab_counters_close(struct perflab_counter_set *set);

/* ---- threads.c: pinned worker threads, their kernels, and hog processes -- */

#define PERFLAB_KERNEL_LOOP 0
#define PERFLAB_KERNEL_STREAM 1
#define PERFLAB_KERNEL_SPIN 2
/* One "loop" of every kernel is LOOP_FACTOR iterations, as in the post. */
#define PERFLAB_LOOP_FACTOR 100000

#define PERFLAB_HOG_CPU 0
#define PERFLAB_HOG_CACHE 1
#define PERFLAB_HOG_RT 2

/* What one worker does and where: cpu -1 leaves placement to the scheduler;
 * nice and rt_priority (SCHED_RR; 0 = leave as is) apply to the worker only. */
struct perflab_thread_spec {
    int32_t kernel;
    int32_t cpu;
    uint64_t loops;
    uint64_t bytes;
    int32_t nice;
    int32_t rt_priority;
    uint32_t event_mask;
};

/* What one worker measured of itself between the barrier and its end:
 * wall_ns counts from release_ns (the barrier opening, the same for all)
 * to end_ns; start_ns is when the worker itself began. sched_status: 0, or -errno of the nice/real-time request (the run goes on);
 * counts[i]: perf_event count or -errno (see perflab_counters_read). */
struct perflab_thread_result {
    int32_t cpu_start;
    int32_t cpu_end;
    int32_t sched_status;
    int32_t error;
    uint64_t cpu_ns;
    uint64_t wall_ns;
    uint64_t ticks;
    uint64_t release_ns;
    uint64_t start_ns;
    uint64_t end_ns;
    uint64_t retries;
    uint64_t checksum;
    int64_t counts[7];
};

/* Run n workers together: each pinned before it waits on the barrier, all
 * released at once. A CPU that is offline, absent or outside this process's
 * affinity is refused with -EINVAL before any thread starts. */
int perflab_run_threads(const struct perflab_thread_spec *specs, int32_t n,
                        struct perflab_thread_result *out);
/* Whether this process may run on cpu (online and in its affinity mask). */
int perflab_cpu_allowed(int32_t cpu);

/* Fork a hog process (PERFLAB_HOG_*) pinned to cpu (-1: free) that dies with
 * the calling thread (PR_SET_PDEATHSIG) and exits by itself after max_ns.
 * cache hogs write a bytes-long buffer; rt hogs run SCHED_FIFO in bursts
 * under RLIMIT_RTTIME. *pid is the hog; *sched_status 0 or -errno of its
 * real-time request. Returns 0 once the hog is pinned, or -errno. */
int perflab_hog_start(int32_t kind, int32_t cpu, uint64_t bytes, int64_t max_ns,
                      int32_t rt_priority, int32_t *pid, int32_t *sched_status);

/* ---- memory.c: memcpy kernels, their sweep, page-fault cost ----------- */

#define PERFLAB_COPY_LIBC 0
#define PERFLAB_COPY_REP_MOVSB 1
#define PERFLAB_COPY_LOOP 2
#define PERFLAB_MAX_REPEATS 1048576 /* copies or passes per sample, at most */

#define PERFLAB_TOUCH_FIRST 0
#define PERFLAB_TOUCH_AGAIN 1
#define PERFLAB_TOUCH_LOCKED 2

/* Whether a copy kernel exists on this CPU (rep movsb is x86 only). */
int perflab_copy_available(int kernel);
/* mlockall(MCL_CURRENT|MCL_FUTURE) while on, munlockall when off: the
 * article's remedy against page faults during a measurement. With
 * MCL_ONFAULT (Linux 4.4+) pages are locked as they are touched, so memory
 * mapped but never touched is not faulted in. */
int perflab_lock_memory(int on);
/* Two page-aligned buffers of `bytes` each, written once so every page is
 * faulted in before anything is timed; free with perflab_buffers_free. */
int perflab_buffers_alloc(size_t bytes, void **src, void **dst);
void perflab_buffers_free(void *src, void *dst, size_t bytes);
/* One untimed copy with a kernel: lets tests check the kernels copy right. */
int perflab_copy_once(int kernel, void *dst, const void *src, size_t n);
/* For each sizes[i]: copies[i] back-to-back copies of sizes[i] bytes from src
 * to dst per sample, the fewest (a power of two, at most PERFLAB_MAX_REPEATS)
 * whose shortest of `trials` samples lasts min_sample ticks or more, and
 * min_ticks[i] that shortest sample's ticks, timer overhead subtracted. */
int perflab_copy_sweep(int kernel, void *dst, const void *src, const uint64_t *sizes,
                       size_t n, unsigned trials, int64_t min_sample, uint64_t *copies,
                       int64_t *min_ticks);
/* Ticks to write one byte into each of `pages` pages of a fresh anonymous
 * mapping: out[PERFLAB_TOUCH_FIRST] (page faults, one pass), and of
 * passes[c] passes over mapped pages, enough to last min_sample ticks:
 * out[PERFLAB_TOUCH_AGAIN] (the same pages again), out[PERFLAB_TOUCH_LOCKED]
 * (another mapping mlock'ed first). Overhead subtracted once per sample. */
int perflab_touch_pages(size_t pages, int64_t min_sample, int64_t out[3], uint64_t passes[3]);

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
/* `repeat` rounds of one sample per j in 0..ncalls: the ticks of calls[j]
 * back-to-back calls of names[j](args[j]), timer overhead subtracted:
 * out[round * ncalls + j]. */
int perflab_libm_warm(const char **names, const double *args, const uint64_t *calls,
                      size_t ncalls, size_t repeat, int64_t *out);
/* The sequence once, each call alone, in a freshly forked child whose first
 * calls pay the page faults and cache misses; results come back through a pipe. */
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

/* Time `n` samples of one PERFLAB_SYS_* operation on `path` (open, stat, read
 * and write use a file of at least PERFLAB_SYS_IO_BYTES), each sample
 * `calls` calls back to back, timer overhead subtracted. */
int perflab_syscall_time(int call, const char *path, uint64_t calls, int64_t *out, size_t n);

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

/* ---- alias.c: 4K aliasing, a store and a load that match modulo 4096 ------------- */

#define PERFLAB_ALIAS_STORE_LOAD 0 /* store, then an independent load */
#define PERFLAB_ALIAS_LOOP 1       /* the paper's loop: i, j, k at st; inc, g at ld */
#define PERFLAB_ALIAS_STORE_OFFSET 64 /* where the store lands in the buffer's first page */
/* `trials` interleaved pairs of n iterations of one kernel, the load `aliased` bytes
 * after the store (a multiple of 4096: same low 12 bits) and `distinct` bytes after it;
 * ticks of each trial in out_aliased[t], out_distinct[t]. 0 or -EINVAL. */
int perflab_alias_time(int kernel, size_t aliased, size_t distinct, size_t n, size_t trials,
                       uint64_t *out_aliased, uint64_t *out_distinct);

/* ---- spawn_lanes.c: parallel batches ---------------------------------- */

/* A batch flag: one child per listed CPU at a time, each pinned to its own CPU (the run's
 * cpu field says which), each CPU taking the next run as soon as its child is reaped.
 * perflab_spawn_batch then keeps out[0..*done) the finished runs before the first one a
 * stop cut short; each lane's spawner thread waits on its own CPU. */
#define PERFLAB_SPAWN_PARALLEL 16

/* ---- counters.c: the events of exec'd children, counted as perf stat counts a command ---- */

#define PERFLAB_PERF_TYPE_HARDWARE 0 /* perf_event_attr.type: generic cycles, instructions */
#define PERFLAB_PERF_TYPE_RAW 4      /* perf_event_attr.type: a model-specific event code */
/* Open n events (types[i], configs[i]) on the calling thread, disabled and inherited by the
 * children it starts: fds[i] an fd, or -errno for an event that cannot count here. Returns
 * how many opened. */
int perflab_exec_counters_open(int32_t n, const uint32_t *types, const uint64_t *configs,
                               int32_t *fds);
/* counts[i]: what the exited children counted so far (scaled for multiplexing), or fds[i]
 * (< 0) for an event that did not open, -ENODATA for one never scheduled. 0 or -errno. */
int perflab_exec_counters_read(int32_t n, const int32_t *fds, int64_t *counts);
/* perflab_spawn_batch with the events on only while it runs (so they count its children and
 * its own few instructions, not the caller's), then the counts so far as _read gives them. */
int perflab_exec_counters_run(int32_t n, const int32_t *fds, const void *req, size_t len,
                              const int stdio[3], int stop_fd, struct perflab_run *out,
                              int64_t *done, int64_t *counts);
void perflab_exec_counters_close(int32_t n, int32_t *fds);

/* ---- spawn.c: programs read afresh ------------------------------------------ */

/* A batch flag: before its first run, each program's file is dropped from the page cache
 * (written back first, then POSIX_FADV_DONTNEED) and read back, so its pages sit in physical
 * memory where this read puts them, not where whoever first read the file left them (two
 * byte-identical copies of a program differ by up to 1 % on an AMD Zen 5 guest: one copy's
 * pages in large contiguous folios, the other's scattered).  A program whose pages stay (a
 * process maps it, its filesystem keeps them, or it cannot be read) sets
 * PERFLAB_RUN_PAGES_KEPT on its first run in the batch. */
#define PERFLAB_SPAWN_SETTLE 128

/* ---- spawn_runq.c: the run-queue wait of all a child's threads ----------- */

/* Batch flags: fill each run's runq_* fields, waiting on the zombie before reaping it (see
 * spawn_runq.c); _PROC reads /proc even where taskstats would answer. Unasked, nothing changes. */
#define PERFLAB_SPAWN_RUNQ 32
#define PERFLAB_SPAWN_RUNQ_PROC 64

#define PERFLAB_RUNQ_NONE 0      /* not asked, or no source answered */
#define PERFLAB_RUNQ_TASKSTATS 1 /* the kernel's per-process sum at exit: every thread, exact */
#define PERFLAB_RUNQ_PROC 2      /* /proc during the run; threads gone before the leader as of their last reading */

/* ---- spawner/supervise.c: the supervisor every process perflab starts runs under ----
 *
 * `_spawner supervise SOCK PERFLAB_PID TMPPARENT`: a child subreaper that starts processes
 * on perflab's requests on the stream socket SOCK and reaps them when asked; when perflab
 * closes SOCK or dies (its pidfd), or on SIGTERM, SIGINT or SIGHUP, it kills every descendant
 * (by its cgroup first, where it could make one), reaps them, removes its temporary directory
 * (made in TMPPARENT, "" for none) and its cgroup, and exits.  It first answers a reply whose
 * pid is its own, error why the directory could not be made, cgroup_error why it has no
 * cgroup (0: it has), then text_len bytes: the directory and the cgroup path, each ending
 * in a NUL.  Each request is this header, the fds of a START attached (SCM_RIGHTS), then
 * int32 cpus[ncpus] and NUL-terminated strings (strings_len bytes): the file to execute,
 * argc of argv and envc of the environment. */
#define PERFLAB_SUP_MAGIC 0x70757370u /* "psup" */
#define PERFLAB_SUP_START 1           /* start a file with argv, envp: reply pid (or error) */
#define PERFLAB_SUP_REAP 2            /* reap child pid: reply its wait status, rusage */
#define PERFLAB_SUP_SIGDEF 1          /* START flag: every signal at its default action */
#define PERFLAB_SUP_NO_ASLR 2         /* START flag: personality(ADDR_NO_RANDOMIZE) for it */
#define PERFLAB_SUP_MAX_FDS 16
#define PERFLAB_SUP_SETUP 1           /* reply stage: the child failed before execve */
#define PERFLAB_SUP_EXEC 2            /* reply stage: execve failed */

struct perflab_sup_request {
    uint32_t magic;
    int32_t op;            /* PERFLAB_SUP_* */
    int32_t pid;           /* REAP: the child; START: the process group to join (0: its own) */
    int32_t flags;         /* START: PERFLAB_SUP_SIGDEF, PERFLAB_SUP_NO_ASLR */
    int32_t nfds;          /* START: fds attached, the child's 0 .. nfds-1 */
    int32_t ncpus;         /* START: the CPUs it may run on (0: the supervisor's) */
    int32_t argc;
    int32_t envc;
    uint64_t strings_len;
};

struct perflab_sup_reply {
    uint32_t magic;
    int32_t error;         /* 0, or the errno of what failed (REAP: EAGAIN, not exited yet) */
    int32_t stage;         /* a START that failed: PERFLAB_SUP_SETUP or _EXEC */
    int32_t pid;
    int32_t status;        /* REAP: the wait status */
    int32_t cgroup_error;  /* the first reply: why there is no cgroup (0: there is) */
    uint32_t text_len;     /* the first reply: the bytes of text that follow */
    int32_t reserved;
    int64_t utime_ns;      /* REAP: its rusage, its waited-for children's included */
    int64_t stime_ns;
    int64_t maxrss_kb;
    int64_t minflt;
    int64_t majflt;
    int64_t nvcsw;
    int64_t nivcsw;
};

/* ---- pelt.c: change points in mean and variance (R changepoint's PELT) ------------- */

/* The segmentation of y[0..n) least in cpt.meanvar's normal cost (twice the negative
 * log-likelihood, each segment's variance at least `floor`) plus `pen` per change point,
 * segments of minseg values or more, the earliest of equal optima as R picks it: each
 * segment's end (exclusive, the last is n) in ends[], which holds n / minseg + 1. Returns
 * how many, or -EINVAL, -ENOMEM. */
int perflab_pelt_meanvar(const double *y, size_t n, double pen, double floor, size_t minseg,
                         size_t *ends);
