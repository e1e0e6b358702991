/* Pinned worker threads released together on a barrier, their kernels, and
 * hog processes that perturb them (DjiBee's cputime_core_vs_ht, easyperf). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "perflab.h"
#include "perflab_internal.h"
#include "perflab_ticks.h"

/* Keeps a value alive without a store: the post's loop computes results it
 * never uses, which -O2 would delete. */
#define KEEP(x) __asm__ volatile("" : : "g"(x))

#define HOG_RT_BURST_NS 20000000
#define HOG_RT_REST_NS 5000000
#define HOG_RTTIME_US 200000

struct gate {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int ready;
    int go; /* 0 wait, 1 run, -1 abort */
    pthread_barrier_t barrier;
    uint64_t counter __attribute__((aligned(64)));
};

struct worker {
    pthread_t th;
    volatile pid_t tid; /* for the SIGXCPU handler: set before the worker computes */
    const struct perflab_thread_spec *spec;
    struct perflab_thread_result *res;
    struct gate *gate;
    uint64_t *buf;
    size_t words;
};

/* The post's do_loop, in unsigned arithmetic so the overflowing products are defined. */
static uint64_t do_loop(uint64_t nb)
{
    unsigned long i, r, d, ci, si, vi, ai;
    double c, s, v, a;

    for (i = 0, r = 1; i < nb * PERFLAB_LOOP_FACTOR; i++) {
        r = r + i;
        d = 2 * r;
        ci = d * 314 / 100;
        si = r * r * 314 / 100;
        ai = r * r * 314 * 4 / 100;
        vi = r * r * r * 314 * 4 / 300;
        c = (double)d * 3.14;
        s = (double)(r * r) * 3.14;
        a = (double)(r * r) * 3.14 * 4;
        v = (double)(r * r * r) * 3.14 * 4 / 3;
        KEEP(ci);
        KEEP(si);
        KEEP(ai);
        KEEP(vi);
        KEEP(c);
        KEEP(s);
        KEEP(a);
        KEEP(v);
    }
    return r;
}

/* Read-modify-write of every 8-byte word, pass after pass over the buffer;
 * no carried dependency, so the memory system, not the adder, sets the pace. */
static uint64_t do_stream(uint64_t *buf, size_t words, uint64_t nb)
{
    uint64_t total = nb * PERFLAB_LOOP_FACTOR, done = 0;

    while (done < total) {
        size_t m = total - done < words ? (size_t)(total - done) : words;
        for (size_t j = 0; j < m; j++)
            buf[j] += 1;
        done += m;
    }
    return buf[0];
}

/* Compare-and-swap increments of one shared counter: every failed CAS is a
 * retry, the synchronisation overhead easyperf sees as extra instructions. */
static uint64_t do_spin(uint64_t *counter, uint64_t nb, uint64_t *retries)
{
    uint64_t total = nb * PERFLAB_LOOP_FACTOR, failed = 0, old = 0;

    for (uint64_t i = 0; i < total; i++) {
        old = __atomic_load_n(counter, __ATOMIC_RELAXED);
        while (!__atomic_compare_exchange_n(counter, &old, old + 1, 0, __ATOMIC_SEQ_CST,
                                            __ATOMIC_RELAXED))
            failed++;
    }
    *retries = failed;
    return old;
}

static void set_sched(const struct perflab_thread_spec *spec, struct perflab_thread_result *res)
{
    if (spec->nice && setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), spec->nice) != 0)
        res->sched_status = -errno;
    if (spec->rt_priority) {
        struct sched_param sp = {.sched_priority = spec->rt_priority};
        int rc = pthread_setschedparam(pthread_self(), SCHED_RR, &sp);
        if (rc && !res->sched_status)
            res->sched_status = -rc;
    }
}

static int wait_gate(struct gate *g)
{
    int go;
    pthread_mutex_lock(&g->lock);
    g->ready++;
    pthread_cond_broadcast(&g->cond);
    while (g->go == 0)
        pthread_cond_wait(&g->cond, &g->lock);
    go = g->go;
    pthread_mutex_unlock(&g->lock);
    return go;
}

/* The real-time watchdog: RLIMIT_RTTIME's soft limit sends SIGXCPU, whose default action
 * would kill perflab with every result of the run. Instead every worker drops to normal
 * priority (a runaway can no longer freeze the machine) and the run reports -ETIME. */
static struct worker *volatile rt_workers;
static volatile int rt_nworkers;
static volatile sig_atomic_t rt_overrun;

static void on_sigxcpu(int sig)
{
    struct sched_param normal = {0};
    int saved = errno;
    (void)sig;
    rt_overrun = 1;
    for (int i = 0; i < rt_nworkers; i++)
        if (rt_workers[i].tid > 0)
            syscall(SYS_sched_setscheduler, rt_workers[i].tid, SCHED_OTHER, &normal);
    errno = saved;
}

static int any_realtime(const struct perflab_thread_spec *specs, int n)
{
    for (int i = 0; i < n; i++)
        if (specs[i].rt_priority > 0)
            return 1;
    return 0;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    const struct perflab_thread_spec *spec = w->spec;
    struct perflab_thread_result *res = w->res;
    struct perflab_counter_set set;
    uint64_t t0, t1, c0, c1, k0, k1;
    int counting = 0;

    w->tid = (pid_t)syscall(SYS_gettid);
    set_sched(spec, res);
    if (spec->kernel == PERFLAB_KERNEL_STREAM)
        memset(w->buf, 1, w->words * sizeof *w->buf); /* page faults before the clock */
    for (int i = 0; i < PERFLAB_NEVENTS; i++)
        res->counts[i] = -ENOENT;
    if (spec->event_mask)
        counting = perflab_counters_open(&set, 0, -1, spec->event_mask, 0) > 0;
    if (wait_gate(w->gate) < 0) {
        if (counting)
            perflab_counters_close(&set);
        w->tid = 0;
        return NULL;
    }
    res->release_ns = perflab_now_ns(CLOCK_MONOTONIC);
    pthread_barrier_wait(&w->gate->barrier);
    if (counting)
        perflab_counters_enable(&set);
    res->cpu_start = sched_getcpu();
    t0 = perflab_now_ns(CLOCK_MONOTONIC);
    c0 = perflab_now_ns(CLOCK_THREAD_CPUTIME_ID);
    k0 = perflab_ticks_begin();
    switch (spec->kernel) {
    case PERFLAB_KERNEL_LOOP:
        res->checksum = do_loop(spec->loops);
        break;
    case PERFLAB_KERNEL_STREAM:
        res->checksum = do_stream(w->buf, w->words, spec->loops);
        break;
    default:
        res->checksum = do_spin(&w->gate->counter, spec->loops, &res->retries);
    }
    k1 = perflab_ticks_end();
    c1 = perflab_now_ns(CLOCK_THREAD_CPUTIME_ID);
    t1 = perflab_now_ns(CLOCK_MONOTONIC);
    if (counting) {
        perflab_counters_disable(&set);
        perflab_counters_read(&set, res->counts);
        perflab_counters_close(&set);
    } else if (spec->event_mask) {
        for (int i = 0; i < PERFLAB_NEVENTS; i++)
            res->counts[i] = set.status[i];
    }
    res->cpu_end = sched_getcpu();
    res->start_ns = t0;
    res->end_ns = t1;

    res->cpu_ns = c1 - c0;
    res->ticks = k1 - k0;
    w->tid = 0; /* a finished thread's tid may be reused: the handler must not touch it */
    return NULL;
}

int perflab_cpu_allowed(int32_t cpu)
{
    cpu_set_t mask;
    if (cpu < 0 || cpu >= CPU_SETSIZE)
        return 0;
    if (sched_getaffinity(0, sizeof mask, &mask) != 0)
        return 0;
    return CPU_ISSET(cpu, &mask);
}

static int check_specs(const struct perflab_thread_spec *specs, int n)
{
    if (n < 1)
        return -EINVAL;
    for (int i = 0; i < n; i++) {
        if (specs[i].kernel < PERFLAB_KERNEL_LOOP || specs[i].kernel > PERFLAB_KERNEL_SPIN)
            return -EINVAL;
        if (specs[i].cpu != -1 && !perflab_cpu_allowed(specs[i].cpu))
            return -EINVAL;
        if (specs[i].kernel == PERFLAB_KERNEL_STREAM && specs[i].bytes < sizeof(uint64_t))
            return -EINVAL;
    }
    return 0;
}

static void release(struct gate *g, int go)
{
    pthread_mutex_lock(&g->lock);
    g->go = go;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
}

static int start_workers(struct worker *w, int n, struct gate *g)
{
    pthread_attr_t attr;
    cpu_set_t mask;
    int rc = 0, started = 0;

    for (; started < n && rc == 0; started++) {
        pthread_attr_init(&attr);
        if (w[started].spec->cpu >= 0) {
            CPU_ZERO(&mask);
            CPU_SET(w[started].spec->cpu, &mask);
            pthread_attr_setaffinity_np(&attr, sizeof mask, &mask);
        }
        rc = -pthread_create(&w[started].th, &attr, worker_main, &w[started]);
        pthread_attr_destroy(&attr);
    }
    if (rc)
        started--;
    pthread_mutex_lock(&g->lock);
    while (g->ready < started)
        pthread_cond_wait(&g->cond, &g->lock);
    pthread_mutex_unlock(&g->lock);
    release(g, rc ? -1 : 1);
    for (int i = 0; i < started; i++)
        pthread_join(w[i].th, NULL);
    return rc;
}

/* The barrier opens when the last worker reaches it: wall time counts from
 * there, so a worker that waits for its CPU (same-CPU placements)
 * is charged for the wait, as a user of the program would be. */
static void wall_from_release(struct perflab_thread_result *out, int n)
{
    uint64_t release = 0;
    for (int i = 0; i < n; i++)
        if (out[i].release_ns > release)
            release = out[i].release_ns;
    for (int i = 0; i < n; i++) {
        out[i].release_ns = release;
        out[i].wall_ns = out[i].end_ns - release;
    }
}

int perflab_run_threads(const struct perflab_thread_spec *specs, int32_t n,
                        struct perflab_thread_result *out)
{
    struct gate *g;
    struct worker *w;
    int rc;

    if ((rc = check_specs(specs, n)) != 0)
        return rc;
    g = aligned_alloc(64, sizeof *g);
    w = calloc((size_t)n, sizeof *w);
    if (!g || !w) {
        free(g);
        free(w);
        return -ENOMEM;
    }
    memset(g, 0, sizeof *g);
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->cond, NULL);
    pthread_barrier_init(&g->barrier, NULL, (unsigned)n);
    memset(out, 0, sizeof *out * (size_t)n);
    for (int i = 0; i < n && rc == 0; i++) {
        w[i].spec = &specs[i];
        w[i].res = &out[i];
        w[i].gate = g;
        if (specs[i].kernel == PERFLAB_KERNEL_STREAM) {
            w[i].words = specs[i].bytes / sizeof(uint64_t);
            w[i].buf = aligned_alloc(64, (w[i].words * sizeof(uint64_t) + 63) / 64 * 64);
            if (!w[i].buf)
                rc = -ENOMEM;
        }
    }
    if (rc == 0) {
        struct sigaction watchdog = {.sa_handler = on_sigxcpu}, old;
        int rt = any_realtime(specs, n);
        if (rt) {
            rt_workers = w;
            rt_nworkers = n;
            rt_overrun = 0;
            sigemptyset(&watchdog.sa_mask);
            sigaction(SIGXCPU, &watchdog, &old);
        }
        rc = start_workers(w, n, g);
        if (rt) {
            sigaction(SIGXCPU, &old, NULL);
            rt_nworkers = 0;
            if (rc == 0 && rt_overrun)
                rc = -ETIME;
        }
    }
    if (rc == 0)
        wall_from_release(out, n);
    for (int i = 0; i < n; i++)
        free(w[i].buf);
    pthread_barrier_destroy(&g->barrier);
    pthread_cond_destroy(&g->cond);
    pthread_mutex_destroy(&g->lock);
    free(w);
    free(g);
    return rc;
}

/* ---- hogs: forked from a threaded process, so the child keeps to
 * async-signal-safe calls (no malloc, no stdio) until it _exits. */

static void hog_loop(int kind, uint64_t *buf, size_t words, uint64_t deadline)
{
    struct timespec rest = {0, HOG_RT_REST_NS};
    uint64_t x = 0;

    while (perflab_now_ns(CLOCK_MONOTONIC) < deadline) {
        if (kind == PERFLAB_HOG_CACHE) {
            for (size_t j = 0; j < words; j += 8)
                buf[j] = x++; /* one store per 64-byte line: every line evicted */
        } else if (kind == PERFLAB_HOG_RT) {
            uint64_t until = perflab_now_ns(CLOCK_MONOTONIC) + HOG_RT_BURST_NS;
            while (perflab_now_ns(CLOCK_MONOTONIC) < until)
                x += do_loop(1) & 1;
            nanosleep(&rest, NULL); /* blocking resets RLIMIT_RTTIME's count */
        } else {
            x += do_loop(1) & 1;
        }
    }
    KEEP(x);
}

static int hog_setup(int kind, int cpu, int prio, int *sched_status)
{
    cpu_set_t mask;
    *sched_status = 0;
    if (cpu >= 0) {
        CPU_ZERO(&mask);
        CPU_SET(cpu, &mask);
        if (sched_setaffinity(0, sizeof mask, &mask) != 0)
            return -errno;
    }
    if (kind == PERFLAB_HOG_RT) {
        /* The kernel kills a real-time task that spins this long without blocking. */
        struct rlimit rl = {HOG_RTTIME_US, HOG_RTTIME_US};
        struct sched_param sp = {.sched_priority = prio};
        if (setrlimit(RLIMIT_RTTIME, &rl) != 0)
            return -errno;
        if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0)
            *sched_status = -errno;
    }
    return 0;
}

static void hog_child(int kind, int cpu, uint64_t bytes, int64_t max_ns, int prio, int wfd,
                      pid_t parent)
{
    uint64_t deadline = perflab_now_ns(CLOCK_MONOTONIC) + (uint64_t)max_ns;
    int status[2];
    uint64_t *buf = NULL;
    size_t words = 0;
    sigset_t none;

    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(0);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    int devnull = open("/dev/null", O_RDWR);
    for (int fd = 0; fd < 3 && devnull >= 0; fd++)
        dup2(devnull, fd);
    status[0] = hog_setup(kind, cpu, prio, &status[1]);
    if (status[0] == 0 && kind == PERFLAB_HOG_CACHE) {
        words = bytes / sizeof(uint64_t);
        buf = mmap(NULL, words * sizeof(uint64_t), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (buf == MAP_FAILED)
            status[0] = -errno;
    }
    if (write(wfd, status, sizeof status) != (ssize_t)sizeof status || status[0] != 0)
        _exit(1);
    close(wfd);
    syscall(SYS_close_range, 3, ~0u, 0);
    hog_loop(kind, buf, words, deadline);
    _exit(0);
}

int perflab_hog_start(int32_t kind, int32_t cpu, uint64_t bytes, int64_t max_ns,
                      int32_t rt_priority, int32_t *pid, int32_t *sched_status)
{
    int fds[2], status[2];
    pid_t parent = getpid(), child;
    ssize_t got;

    if (kind < PERFLAB_HOG_CPU || kind > PERFLAB_HOG_RT || max_ns <= 0)
        return -EINVAL;
    if (cpu != -1 && !perflab_cpu_allowed(cpu))
        return -EINVAL;
    if (kind == PERFLAB_HOG_CACHE && bytes < 64)
        return -EINVAL;
    if (pipe2(fds, O_CLOEXEC) != 0)
        return -errno;
    child = fork();
    if (child < 0) {
        int err = -errno;
        close(fds[0]);
        close(fds[1]);
        return err;
    }
    if (child == 0)
        hog_child(kind, cpu, bytes, max_ns, rt_priority, fds[1], parent);
    close(fds[1]);
    do
        got = read(fds[0], status, sizeof status);
    while (got < 0 && errno == EINTR);
    close(fds[0]);
    if (got != (ssize_t)sizeof status || status[0] != 0) {
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
        return got == (ssize_t)sizeof status ? status[0] : -ECHILD;
    }
    *pid = child;
    *sched_status = status[1];
    return 0;
}
