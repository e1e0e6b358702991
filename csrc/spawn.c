/* Exact child runs: clone(CLONE_VM|CLONE_VFORK) + execve with exactly the argv
 * and envp given, per-child ASLR/affinity/priority, a timeout, wait4 rusage and
 * the probe record read back after exit.
 *
 * posix_spawn cannot set personality, so this is posix_spawn's own recipe
 * (glibc and musl both clone with CLONE_VM|CLONE_VFORK) with the extra steps in
 * the child.  The child shares our memory until execve: it only makes system
 * calls and stores errno values into the shared child_args, which is how an
 * exec failure reaches the parent without a pipe.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "perflab.h"
#include "perflab_probe.h"

#define CHILD_STACK (64 * 1024)
#define STAGE_SETUP 1
#define STAGE_EXEC 2

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif

/* What the parent prepares once per batch, read by every child. */
struct spawn_ctx {
    const char *path;
    char *const *argv;
    const struct perflab_spawn_opts *opts;
    cpu_set_t *cpuset;
    size_t cpuset_size;
    int set_persona;
    unsigned long persona;
    int nreset;
    int reset[NSIG];  /* signals whose disposition is not SIG_DFL in the parent */
    char *stack_top;
};

/* One child's view: the batch context plus what the child reports back. */
struct child_args {
    const struct spawn_ctx *ctx;
    char *const *envp;
    int probe_fd;
    volatile int err;
    volatile int stage;
    volatile int rt_err;
};

static int64_t tv_ns(struct timeval tv)
{
    return (int64_t)tv.tv_sec * 1000000000 + (int64_t)tv.tv_usec * 1000;
}

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int move_fd(int from, int to)
{
    if (from < 0 || from == to)
        return from == to ? fcntl(to, F_SETFD, 0) : 0;
    return dup2(from, to) < 0 ? -1 : 0;
}

/* Real-time priority, capped by RLIMIT_RTTIME so a runaway child is killed by
 * the kernel instead of freezing its CPU (Rubini's warning). */
static int child_rt(const struct perflab_spawn_opts *o)
{
    int64_t us = o->timeout_ns > 0 ? o->timeout_ns / 1000 + 1 : 1000000;
    struct rlimit rl = {(rlim_t)us, (rlim_t)us};
    struct sched_param sp = {.sched_priority = o->rt_priority};

    if (setrlimit(RLIMIT_RTTIME, &rl) != 0)
        return errno;
    return sched_setscheduler(0, o->rt_policy, &sp) != 0 ? errno : 0;
}

/* Async-signal-safe only: we run on the parent's memory until execve. */
static int child_main(void *arg)
{
    struct child_args *a = arg;
    const struct spawn_ctx *c = a->ctx;
    const struct perflab_spawn_opts *o = c->opts;
    struct sigaction dfl;
    sigset_t none;

    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int i = 0; i < c->nreset; i++)
        sigaction(c->reset[i], &dfl, NULL);
    a->stage = STAGE_SETUP;
    if (c->set_persona && personality(c->persona) == -1)
        goto fail;
    if (c->cpuset && sched_setaffinity(0, c->cpuset_size, c->cpuset) != 0)
        goto fail;
    if (o->flags & PERFLAB_SPAWN_RT)
        a->rt_err = child_rt(o);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (move_fd(o->stdin_fd, 0) || move_fd(o->stdout_fd, 1) || move_fd(o->stderr_fd, 2) ||
        move_fd(a->probe_fd, PERFLAB_PROBE_FD))
        goto fail;
    syscall(SYS_close_range, 3u, PERFLAB_PROBE_FD - 1u, 0u);
    syscall(SYS_close_range, PERFLAB_PROBE_FD + 1u, ~0u, 0u);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    a->stage = STAGE_EXEC;
    execve(c->path, c->argv, a->envp);
fail:
    a->err = errno;
    _exit(127);
}

/* The spawning thread takes the children's real-time priority while it runs them, so that
 * it wakes as soon as a child exits instead of queueing behind other work (what `chrt` on
 * a shell loop gives); restored before returning.  Refusal is the child's to report. */
struct saved_sched {
    int changed;
    int policy;
    struct sched_param param;
};

static void parent_rt_enter(const struct perflab_spawn_opts *o, struct saved_sched *saved)
{
    struct sched_param sp = {.sched_priority = o->rt_priority};

    saved->changed = 0;
    if (!(o->flags & PERFLAB_SPAWN_RT))
        return;
    saved->policy = sched_getscheduler(0);
    if (saved->policy < 0 || sched_getparam(0, &saved->param) != 0)
        return;
    saved->changed = sched_setscheduler(0, o->rt_policy, &sp) == 0;
}

static void parent_rt_leave(const struct saved_sched *saved)
{
    if (saved->changed)
        sched_setscheduler(0, saved->policy, &saved->param);
}

static int ctx_init(struct spawn_ctx *c, const char *path, char *const argv[],
                    const struct perflab_spawn_opts *o)
{
    struct sigaction sa;
    unsigned long cur;
    void *stack;

    memset(c, 0, sizeof *c);
    c->path = path;
    c->argv = argv;
    c->opts = o;
    if (o->flags & (PERFLAB_SPAWN_NO_ASLR | PERFLAB_SPAWN_ASLR)) {
        cur = (unsigned long)personality(0xffffffff);
        c->persona = o->flags & PERFLAB_SPAWN_NO_ASLR ? cur | ADDR_NO_RANDOMIZE
                                                       : cur & ~(unsigned long)ADDR_NO_RANDOMIZE;
        c->set_persona = 1;
    }
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP && sigaction(sig, NULL, &sa) == 0 &&
            sa.sa_handler != SIG_DFL)
            c->reset[c->nreset++] = sig;
    if (o->ncpus > 0) {
        int max = 0;
        for (int i = 0; i < o->ncpus; i++) {
            if (o->cpus[i] < 0)
                return -EINVAL;
            max = o->cpus[i] > max ? o->cpus[i] : max;
        }
        c->cpuset = CPU_ALLOC(max + 1);
        if (!c->cpuset)
            return -ENOMEM;
        c->cpuset_size = CPU_ALLOC_SIZE(max + 1);
        CPU_ZERO_S(c->cpuset_size, c->cpuset);
        for (int i = 0; i < o->ncpus; i++)
            CPU_SET_S(o->cpus[i], c->cpuset_size, c->cpuset);
    }
    stack = mmap(NULL, CHILD_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (stack == MAP_FAILED) {
        CPU_FREE(c->cpuset);
        return -errno;
    }
    c->stack_top = (char *)stack + CHILD_STACK;
    return 0;
}

static void ctx_free(struct spawn_ctx *c)
{
    munmap(c->stack_top - CHILD_STACK, CHILD_STACK);
    if (c->cpuset)
        CPU_FREE(c->cpuset);
}

/* Exactly one well-formed record, nothing after it; no record at all is fine. */
static void read_probe(int fd, struct perflab_run *out)
{
    struct perflab_probe_record rec[2];
    ssize_t n = recv(fd, rec, sizeof rec, MSG_DONTWAIT | MSG_TRUNC);

    if (n <= 0) /* EOF: the child closed its end without a record */
        return;
    if (n != (ssize_t)sizeof rec[0] || rec[0].magic != PERFLAB_PROBE_MAGIC ||
        rec[0].version != PERFLAB_PROBE_VERSION ||
        recv(fd, &rec[1], sizeof rec[1], MSG_DONTWAIT) > 0) {
        out->status = PERFLAB_RUN_BAD_PROBE;
        return;
    }
    out->flags |= PERFLAB_RUN_HAS_PROBE;
    out->probe_ticks = rec[0].ticks;
    if (rec[0].flags & PERFLAB_PROBE_COUNTERS) {
        out->flags |= PERFLAB_RUN_HAS_COUNTERS;
        out->cycles = rec[0].cycles;
        out->instructions = rec[0].instructions;
    }
    if (rec[0].flags & PERFLAB_PROBE_MLOCKED)
        out->flags |= PERFLAB_RUN_MLOCKED;
}

/* Wait for the child, SIGKILL it at the deadline; 1 if it was killed for time. */
static int wait_child(pid_t pid, int pidfd, int64_t timeout_ns, int *status, struct rusage *ru)
{
    int timed_out = 0;

    if (pidfd >= 0 && timeout_ns > 0) {
        struct pollfd p = {.fd = pidfd, .events = POLLIN};
        int64_t deadline = mono_ns() + timeout_ns;
        for (;;) {
            int64_t left = deadline - mono_ns();
            struct timespec ts = {left > 0 ? left / 1000000000 : 0, left > 0 ? left % 1000000000 : 0};
            int r = ppoll(&p, 1, &ts, NULL);
            if (r > 0)
                break;
            if (r == 0 || left <= 0) {
                syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
                timed_out = 1;
                break;
            }
        }
    }
    while (wait4(pid, status, 0, ru) < 0 && errno == EINTR)
        ;
    return timed_out;
}

static void classify(int wstatus, int timed_out, struct perflab_run *out)
{
    out->exit_code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1;
    out->signal = WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0;
    if (timed_out)
        out->status = PERFLAB_RUN_TIMEOUT;
    else if (out->signal)
        out->status = PERFLAB_RUN_CRASH;
    else if (out->exit_code)
        out->status = PERFLAB_RUN_EXIT;
}

static void fill_rusage(const struct rusage *ru, struct perflab_run *out)
{
    out->utime_ns = tv_ns(ru->ru_utime);
    out->stime_ns = tv_ns(ru->ru_stime);
    out->maxrss_kb = ru->ru_maxrss;
    out->minflt = ru->ru_minflt;
    out->majflt = ru->ru_majflt;
    out->nvcsw = ru->ru_nvcsw;
    out->nivcsw = ru->ru_nivcsw;
}

static int run_one(const struct spawn_ctx *c, char *const envp[], struct perflab_run *out)
{
    const struct perflab_spawn_opts *o = c->opts;
    struct child_args a = {.ctx = c, .envp = envp};
    sigset_t all, old;
    struct rusage ru;
    int sv[2], pidfd = -1, wstatus = 0, timed_out;
    uint32_t req = PERFLAB_PROBE_REQ_MLOCK;
    uint64_t t0, t1;
    int64_t w0;
    pid_t pid;

    int64_t size = out->env_size;
    memset(out, 0, sizeof *out);
    out->env_size = size;
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
        out->status = PERFLAB_RUN_SPAWN_FAILED;
        out->child_errno = errno;
        return 0;
    }
    if (o->flags & PERFLAB_SPAWN_MLOCK)
        send(sv[0], &req, sizeof req, MSG_NOSIGNAL);
    a.probe_fd = sv[1];
    /* No handler of ours may run on the shared stack before execve. */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    w0 = mono_ns();
    t0 = perflab_ticks_begin();
    pid = clone(child_main, c->stack_top, CLONE_VM | CLONE_VFORK | CLONE_PIDFD | SIGCHLD, &a,
                &pidfd);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    close(sv[1]);
    if (pid < 0) {
        out->status = PERFLAB_RUN_SPAWN_FAILED;
        out->child_errno = errno;
        close(sv[0]);
        return 0;
    }
    timed_out = wait_child(pid, pidfd, o->timeout_ns, &wstatus, &ru);
    t1 = perflab_ticks_end();
    out->wall_ns = mono_ns() - w0;
    out->outer_ticks = t1 - t0;
    close(pidfd);
    fill_rusage(&ru, out);
    out->rt_errno = a.rt_err;
    if (a.err) {
        out->status = a.stage == STAGE_EXEC ? PERFLAB_RUN_EXEC_FAILED : PERFLAB_RUN_SETUP_FAILED;
        out->child_errno = a.err;
        out->exit_code = 127;
        close(sv[0]);
        return 0;
    }
    read_probe(sv[0], out);
    close(sv[0]);
    classify(wstatus, timed_out, out);
    return 0;
}

int perflab_spawn(const char *path, char *const argv[], char *const envp[],
                  const struct perflab_spawn_opts *opts, struct perflab_run *out)
{
    struct spawn_ctx c;
    struct saved_sched saved;
    int rc = ctx_init(&c, path, argv, opts);

    if (rc)
        return rc;
    out->env_size = -1;
    parent_rt_enter(opts, &saved);
    run_one(&c, envp, out);
    parent_rt_leave(&saved);
    ctx_free(&c);
    return 0;
}

/* One padding buffer "VAR=aaa...a" cut to length by a moving NUL: no copy per run. */
int perflab_spawn_env_sizes(const char *path, char *const argv[], char *const base_envp[],
                            const char *var, const int64_t *sizes, size_t n,
                            const struct perflab_spawn_opts *opts, struct perflab_run *out)
{
    struct spawn_ctx c;
    struct saved_sched saved;
    size_t nbase = 0, prefix = strlen(var) + 1;
    int64_t max = 0;
    char **envp, *pad;
    int rc;

    for (size_t i = 0; i < n; i++) {
        if (sizes[i] < 0)
            return -EINVAL;
        max = sizes[i] > max ? sizes[i] : max;
    }
    while (base_envp && base_envp[nbase])
        nbase++;
    envp = calloc(nbase + 2, sizeof *envp);
    pad = malloc(prefix + (size_t)max + 1);
    if (!envp || !pad) {
        free(envp);
        free(pad);
        return -ENOMEM;
    }
    memcpy(envp, base_envp, nbase * sizeof *envp);
    envp[nbase] = pad;
    memcpy(pad, var, prefix - 1);
    pad[prefix - 1] = '=';
    memset(pad + prefix, 'a', (size_t)max);
    pad[prefix + max] = '\0';
    rc = ctx_init(&c, path, argv, opts);
    if (rc == 0) {
        parent_rt_enter(opts, &saved);
        for (size_t i = 0; i < n; i++) {
            pad[prefix + sizes[i]] = '\0';
            out[i].env_size = sizes[i];
            run_one(&c, envp, &out[i]);
            pad[prefix + sizes[i]] = 'a';
        }
        parent_rt_leave(&saved);
        ctx_free(&c);
    }
    free(envp);
    free(pad);
    return rc;
}
