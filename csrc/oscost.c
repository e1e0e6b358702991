/* What the operating system costs: Rubini's trig (libm calls, cold and warm)
 * and cswitch (pipes between two processes), and FileGuard's syscall timings. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "perflab.h"
#include "perflab_internal.h"
#include "perflab_ticks.h"

typedef double (*libm_fn)(double);

/* glibc's soname first; musl and others keep libm inside libc, which the
 * process has already loaded (dlopen(NULL) searches it). */
static void *libm_handle(void)
{
    static void *handle;
    if (handle == NULL)
        handle = dlopen("libm.so.6", RTLD_NOW);
    if (handle == NULL)
        handle = dlopen("libm.so", RTLD_NOW);
    if (handle == NULL)
        handle = dlopen(NULL, RTLD_NOW);
    return handle;
}

struct code_query {
    uintptr_t addr;
    int found;
};

static int in_code_segment(struct dl_phdr_info *info, size_t size, void *data)
{
    struct code_query *q = data;
    (void)size;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && q->addr >= start &&
            q->addr < start + ph->p_memsz)
            q->found = 1;
    }
    return q->found;
}

/* A symbol of libm that is code (not a variable such as signgam): its
 * address, after any IFUNC resolution, lies in an executable segment. */
static libm_fn libm_resolve(const char *name)
{
    void *h = libm_handle(), *sym;
    struct code_query q = {0, 0};

    if (h == NULL || (sym = dlsym(h, name)) == NULL)
        return NULL;
    q.addr = (uintptr_t)sym;
    dl_iterate_phdr(in_code_segment, &q);
    return q.found ? (libm_fn)sym : NULL;
}

int perflab_libm_lookup(const char *name) { return libm_resolve(name) ? 0 : -ENOENT; }

static int resolve_all(const char **names, size_t ncalls, libm_fn *fns)
{
    for (size_t j = 0; j < ncalls; j++)
        if ((fns[j] = libm_resolve(names[j])) == NULL)
            return -ENOENT;
    return 0;
}

/* One sample per function: calls[j] back-to-back calls between two timestamps
 * (NULL: each call alone, as trig.c does). The argument is read through a
 * volatile so no call can be hoisted out of the region. */
static void time_calls(libm_fn *fns, const double *args, const uint64_t *calls, size_t ncalls,
                       int64_t cost, int64_t *out)
{
    static volatile double sink;
    for (size_t j = 0; j < ncalls; j++) {
        volatile double arg = args[j];
        uint64_t n = calls ? calls[j] : 1;
        uint64_t t0 = perflab_ticks_begin();
        for (uint64_t c = 0; c < n; c++)
            sink = fns[j](arg);
        uint64_t t1 = perflab_ticks_end();
        out[j] = (int64_t)(t1 - t0) - cost;
    }
    (void)sink;
}

int perflab_libm_warm(const char **names, const double *args, const uint64_t *calls,
                      size_t ncalls, size_t repeat, int64_t *out)
{
    libm_fn fns[64];
    int64_t cost = (int64_t)perflab_timer_overhead();
    int rc;

    if (ncalls == 0 || ncalls > 64)
        return -EINVAL;
    for (size_t j = 0; j < ncalls; j++)
        if (calls[j] == 0)
            return -EINVAL;
    if ((rc = resolve_all(names, ncalls, fns)) != 0)
        return rc;
    for (size_t r = 0; r < repeat; r++)
        time_calls(fns, args, calls, ncalls, cost, out + r * ncalls);
    return 0;
}

static int read_full(int fd, void *buf, size_t len)
{
    char *p = buf;
    while (len) {
        ssize_t got = read(fd, p, len);
        if (got < 0)
            return -errno;
        if (got == 0)
            return -EPIPE;
        p += got;
        len -= (size_t)got;
    }
    return 0;
}

static int reap(pid_t pid, int rc, struct rusage *ru)
{
    int status;
    if (rc != 0)
        kill(pid, SIGKILL);
    while (wait4(pid, &status, 0, ru) < 0)
        if (errno != EINTR)
            return rc ? rc : -errno;
    if (rc == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
        return -ECHILD;
    return rc;
}

int perflab_libm_cold(const char **names, const double *args, size_t ncalls, int64_t *out)
{
    libm_fn fns[64];
    int64_t cost = (int64_t)perflab_timer_overhead();
    int fd[2], rc;
    pid_t pid;

    if (ncalls == 0 || ncalls > 64)
        return -EINVAL;
    if ((rc = resolve_all(names, ncalls, fns)) != 0)
        return rc;
    if (pipe(fd) != 0)
        return -errno;
    pid = fork();
    if (pid < 0) {
        rc = -errno;
        close(fd[0]);
        close(fd[1]);
        return rc;
    }
    if (pid == 0) {
        int64_t ticks[64];
        /* The child's page tables hold no entries for libm's text (fork
         * does not copy them for file mappings): the first call faults. */
        time_calls(fns, args, NULL, ncalls, cost, ticks);
        _exit(write(fd[1], ticks, ncalls * sizeof ticks[0]) == (ssize_t)(ncalls * sizeof ticks[0])
                  ? 0
                  : 1);
    }
    close(fd[1]);
    rc = read_full(fd[0], out, ncalls * sizeof out[0]);
    close(fd[0]);
    return reap(pid, rc, NULL);
}

static int pin(int cpu)
{
    cpu_set_t set;
    if (cpu < 0)
        return 0;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof set, &set) == 0 ? 0 : -errno;
}

/* Set by SIGINT/SIGTERM during a cswitch run: the loops stop, the child is
 * reaped, then the signal is raised again for the caller's own handler. */
static volatile sig_atomic_t stop_signal;

static void on_stop(int sig) { stop_signal = sig; }

static int one_byte(int wfd, int rfd)
{
    char c = 'x';
    ssize_t got;
    if (write(wfd, &c, 1) != 1)
        return -errno;
    got = read(rfd, &c, 1);
    return got == 1 ? 0 : got == 0 ? -EPIPE : -errno;
}

/* The child echoes every byte until the parent closes its end. */
static void echo_child(int cpu, int rfd, int wfd)
{
    char c;
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    if (pin(cpu) != 0)
        _exit(2);
    while (read(rfd, &c, 1) == 1)
        if (write(wfd, &c, 1) != 1)
            _exit(1);
    _exit(0);
}

/* The calling thread's CPUs, scheduling and RLIMIT_RTTIME before cswitch changes them. */
struct saved_thread_state {
    cpu_set_t affinity;
    struct perflab_saved_sched sched;
    struct rlimit rttime;
};

static void save_sched(struct saved_thread_state *s)
{
    sched_getaffinity(0, sizeof s->affinity, &s->affinity);
    perflab_sched_save(&s->sched);
    getrlimit(RLIMIT_RTTIME, &s->rttime);
}

static void restore_sched(const struct saved_thread_state *s)
{
    perflab_sched_restore(&s->sched);
    setrlimit(RLIMIT_RTTIME, &s->rttime);
    sched_setaffinity(0, sizeof s->affinity, &s->affinity);
}

/* SCHED_RR with a budget of CPU time without blocking: a runaway real-time
 * process gets SIGXCPU (default action: terminate) instead of freezing the
 * machine. Only the soft limit moves, so it can be restored without
 * CAP_SYS_RESOURCE. */
static int go_realtime(int prio, long rttime_us, const struct rlimit *old)
{
    struct rlimit lim = *old;
    struct sched_param param = {.sched_priority = prio};
    lim.rlim_cur = (rlim_t)rttime_us;
    if (old->rlim_max != RLIM_INFINITY && lim.rlim_cur > old->rlim_max)
        lim.rlim_cur = old->rlim_max;
    if (setrlimit(RLIMIT_RTTIME, &lim) != 0)
        return 0;
    return sched_setscheduler(0, SCHED_RR, &param) == 0;
}

static int pingpong(size_t n, int cpu_child, struct perflab_cswitch *out)
{
    int down[2], up[2], rc = 0;
    struct rusage before, after, child;
    pid_t pid = -1;
    int64_t t0;

    if (pipe(down) != 0)
        return -errno;
    if (pipe(up) != 0) {
        rc = -errno;
        close(down[0]);
        close(down[1]);
        return rc;
    }
    t0 = (int64_t)perflab_now_ns(CLOCK_MONOTONIC);
    for (size_t i = 0; i < n && rc == 0 && !stop_signal; i++)
        rc = one_byte(down[1], down[0]);
    out->alone_ns = (int64_t)perflab_now_ns(CLOCK_MONOTONIC) - t0;
    if (rc == 0 && (pid = fork()) == 0) {
        close(down[1]);
        close(up[0]);
        echo_child(cpu_child, down[0], up[1]);
    }
    if (pid < 0 && rc == 0)
        rc = -errno;
    close(down[0]);
    close(up[1]);
    if (rc == 0) {
        out->child_pid = pid;
        getrusage(RUSAGE_SELF, &before);
        t0 = (int64_t)perflab_now_ns(CLOCK_MONOTONIC);
        for (size_t i = 0; i < n && rc == 0 && !stop_signal; i++)
            rc = one_byte(down[1], up[0]);
        out->pingpong_ns = (int64_t)perflab_now_ns(CLOCK_MONOTONIC) - t0;
        getrusage(RUSAGE_SELF, &after);
    }
    close(down[1]);
    close(up[0]);
    if (pid < 0)
        return rc;
    rc = reap(pid, rc, &child);
    out->parent_nvcsw = after.ru_nvcsw - before.ru_nvcsw;
    out->parent_nivcsw = after.ru_nivcsw - before.ru_nivcsw;
    out->child_nvcsw = child.ru_nvcsw;
    out->child_nivcsw = child.ru_nivcsw;
    return rc;
}

int perflab_cswitch(size_t n, int cpu_parent, int cpu_child, int rt_prio, long rttime_us,
                    struct perflab_cswitch *out)
{
    struct sigaction stop = {.sa_handler = on_stop}, old_int, old_term;
    struct saved_thread_state saved;
    int rc;

    if (n == 0)
        return -EINVAL;
    memset(out, 0, sizeof *out);
    stop_signal = 0;
    sigemptyset(&stop.sa_mask);
    sigaction(SIGINT, &stop, &old_int);
    sigaction(SIGTERM, &stop, &old_term);
    save_sched(&saved);
    if (rt_prio > 0)
        out->rt_applied = go_realtime(rt_prio, rttime_us, &saved.rttime);
    rc = pin(cpu_parent);
    if (rc == 0)
        rc = pingpong(n, cpu_child, out);
    restore_sched(&saved);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    if (stop_signal) {
        raise(stop_signal);
        return -EINTR;
    }
    return rc;
}

static int one_syscall(int call, const char *path, int rfd, int wfd, char *buf)
{
    struct stat st;
    void *p;
    int fd;

    switch (call) {
    case PERFLAB_SYS_GETPID:
        return syscall(SYS_getpid) > 0 ? 0 : -errno;
    case PERFLAB_SYS_OPEN_CLOSE:
        if ((fd = open(path, O_RDONLY)) < 0)
            return -errno;
        return close(fd) == 0 ? 0 : -errno;
    case PERFLAB_SYS_READ:
        return pread(rfd, buf, PERFLAB_SYS_IO_BYTES, 0) == PERFLAB_SYS_IO_BYTES ? 0 : -EIO;
    case PERFLAB_SYS_WRITE:
        return pwrite(wfd, buf, PERFLAB_SYS_IO_BYTES, 0) == PERFLAB_SYS_IO_BYTES ? 0 : -EIO;
    case PERFLAB_SYS_STAT:
        return stat(path, &st) == 0 ? 0 : -errno;
    case PERFLAB_SYS_FSTAT:
        return fstat(rfd, &st) == 0 ? 0 : -errno;
    case PERFLAB_SYS_SCHED_YIELD:
        return sched_yield() == 0 ? 0 : -errno;
    case PERFLAB_SYS_MMAP_MUNMAP:
        p = mmap(NULL, PERFLAB_SYS_IO_BYTES, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return -errno;
        return munmap(p, PERFLAB_SYS_IO_BYTES) == 0 ? 0 : -errno;
    default:
        return -EINVAL;
    }
}

int perflab_syscall_time(int call, const char *path, uint64_t calls, int64_t *out, size_t n)
{
    static char buf[PERFLAB_SYS_IO_BYTES];
    int64_t cost = (int64_t)perflab_timer_overhead();
    int rfd, wfd, rc = 0;

    if (call < 0 || call >= PERFLAB_NSYSCALLS || calls == 0)
        return -EINVAL;
    if ((rfd = open(path, O_RDONLY)) < 0)
        return -errno;
    if ((wfd = open(path, O_WRONLY)) < 0) {
        rc = -errno;
        close(rfd);
        return rc;
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        uint64_t t0 = perflab_ticks_begin();
        for (uint64_t c = 0; c < calls && rc == 0; c++)
            rc = one_syscall(call, path, rfd, wfd, buf);
        uint64_t t1 = perflab_ticks_end();
        out[i] = (int64_t)(t1 - t0) - cost;
    }
    close(rfd);
    close(wfd);
    return rc;
}
