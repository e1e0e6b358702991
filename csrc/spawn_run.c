/* One run: the context a batch prepares for its children, the clone, the wait by the way the
 * batch chose (run-queue sampling, the watcher, a pidfd) and the record filled in. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include "spawn_internal.h"
#include "perflab_probe.h"

#define CHILD_STACK (64 * 1024)

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif

int ctx_init(struct spawn_ctx *c, const struct spawn_opts *o)
{
    struct sigaction sa;
    unsigned long cur;
    void *stack;

    memset(c, 0, sizeof *c);
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
    if ((o->flags & PERFLAB_SPAWN_RUNQ) &&
        !(c->runq = runq_open(o->flags & PERFLAB_SPAWN_RUNQ_PROC))) {
        munmap(stack, CHILD_STACK);
        CPU_FREE(c->cpuset);
        return -ENOMEM;
    }
    return 0;
}

void ctx_free(struct spawn_ctx *c)
{
    munmap(c->stack_top - CHILD_STACK, CHILD_STACK);
    runq_close(c->runq);
    if (c->cpuset)
        CPU_FREE(c->cpuset);
}

/* Wait for the child; SIGKILL it at the deadline or when stop_fd turns readable. */
static int wait_child(pid_t pid, int pidfd, int64_t timeout_ns, int stop_fd, int *status,
                      struct rusage *ru)
{
    int why = watch_child(pid, pidfd, timeout_ns, stop_fd, NULL);

    while (wait4(pid, status, 0, ru) < 0 && errno == EINTR)
        ;
    return why;
}

/* One run; 1 if stop_fd stopped it (the record is then not a finished run). */
int run_one(const struct spawn_ctx *c, const char *path, const char *dir, char *const argv[],
            char *const envp[], int stop_fd, struct perflab_run *out)
{
    const struct spawn_opts *o = c->opts;
    struct child_args a = {.ctx = c, .path = path, .dir = dir, .argv = argv, .envp = envp};
    sigset_t all, old;
    struct rusage ru;
    int sv[2], pidfd = -1, wstatus = 0, why;
    struct perflab_probe_request req = {o->flags & PERFLAB_SPAWN_MLOCK ? PERFLAB_PROBE_REQ_MLOCK : 0,
                                        (uint32_t)o->iterations};
    uint64_t t0, t1;
    int64_t w0, timeout_ns = o->timeout_ns, deadline = WATCH_FOREVER;
    pid_t pid;

    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
        out->status = PERFLAB_RUN_SPAWN_FAILED;
        out->child_errno = errno;
        return 0;
    }
    if (req.flags || req.iterations > 1)
        send(sv[0], &req, sizeof req, MSG_NOSIGNAL);
    a.probe_fd = sv[1];
    /* No handler of ours may run on the shared stack before execve. */
    sigfillset(&all);
    if (!c->watch || watch_raised(c->watch))
        parent_step(c, 0);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    w0 = mono_ns();
    if (c->watch) {
        deadline = timeout_ns > 0 ? w0 + timeout_ns : WATCH_FOREVER;
        watch_arm(c->watch, deadline);
    }
    t0 = perflab_ticks_begin();
    pid = clone(child_main, c->stack_top,
                CLONE_VM | CLONE_VFORK | (c->watch ? 0 : CLONE_PIDFD) | SIGCHLD, &a, &pidfd);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!c->watch)
        parent_step(c, 1);
    close(sv[1]);
    if (pid < 0) {
        if (c->watch)
            watch_arm(c->watch, WATCH_IDLE);
        out->status = PERFLAB_RUN_SPAWN_FAILED;
        out->child_errno = errno;
        close(sv[0]);
        return 0;
    }
    if (timeout_ns > 0) { /* counted from the clone: this thread may resume late (parent_step) */
        int64_t spent = mono_ns() - w0;
        timeout_ns = spent < timeout_ns ? timeout_ns - spent : 1;
    }
    if (c->runq)
        why = runq_wait(c->runq, pid, pidfd, timeout_ns, stop_fd);
    else if (c->watch)
        why = wait_woken(c->watch, pid, deadline, stop_fd, &wstatus, &ru);
    else
        why = wait_child(pid, pidfd, timeout_ns, stop_fd, &wstatus, &ru);
    t1 = perflab_ticks_end();
    out->wall_ns = mono_ns() - w0;
    out->outer_ticks = t1 - t0;
    if (c->runq) /* the child is a zombie until this reaps it: its threads' figures are read */
        runq_reap(c->runq, pid, &wstatus, &ru, out);
    if (pidfd >= 0)
        close(pidfd);
    if (kill_strays(pid))
        out->flags |= PERFLAB_RUN_STRAYS;
    PERFLAB_COPY_RUSAGE(out, &ru);
    out->rt_errno = a.rt_err;
    if (a.err) {
        out->status = a.stage == STAGE_EXEC ? PERFLAB_RUN_EXEC_FAILED : PERFLAB_RUN_SETUP_FAILED;
        out->child_errno = a.err;
        out->exit_code = 127;
        close(sv[0]);
        return 0;
    }
    read_probe(sv[0], o->iterations, out);
    close(sv[0]);
    /* SIGKILL past the timeout with no kill of ours: its RLIMIT_RTTIME, set at the timeout */
    classify(wstatus,
             why == WAIT_TIMEOUT ||
                 (why == WAIT_EXITED && (o->flags & PERFLAB_SPAWN_RT) && o->timeout_ns > 0 &&
                  WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL &&
                  out->wall_ns >= o->timeout_ns),
             out);
    return why == WAIT_STOPPED;
}
