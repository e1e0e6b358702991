/* The child of one run, from clone to execve, and what the parent reads of it after it ends:
 * its probe records, its exit status and its rusage. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "spawn_internal.h"
#include "perflab_probe.h"

static int move_fd(int from, int to)
{
    if (from < 0 || from == to)
        return from == to ? fcntl(to, F_SETFD, 0) : 0;
    return dup2(from, to) < 0 ? -1 : 0;
}

/* Real-time priority, capped by RLIMIT_RTTIME so a runaway child is killed by
 * the kernel instead of freezing its CPU (Rubini's warning). */
static int child_rt(const struct spawn_opts *o)
{
    int64_t us = o->timeout_ns > 0 ? o->timeout_ns / 1000 + 1 : 1000000;
    struct rlimit rl = {(rlim_t)us, (rlim_t)us};
    struct sched_param sp = {.sched_priority = o->rt_priority};

    if (setrlimit(RLIMIT_RTTIME, &rl) != 0)
        return errno;
    return sched_setscheduler(0, o->rt_policy, &sp) != 0 ? errno : 0;
}

/* Async-signal-safe only: we run on the parent's memory until execve. */
int child_main(void *arg)
{
    struct child_args *a = arg;
    const struct spawn_ctx *c = a->ctx;
    const struct spawn_opts *o = c->opts;
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
    if (setpgid(0, 0) != 0)
        goto fail;
    if (move_fd(o->stdio[0], 0) || move_fd(o->stdio[1], 1) || move_fd(o->stdio[2], 2) ||
        move_fd(a->probe_fd, PERFLAB_PROBE_FD))
        goto fail;
    syscall(SYS_close_range, 3u, PERFLAB_PROBE_FD - 1u, 0u);
    syscall(SYS_close_range, PERFLAB_PROBE_FD + 1u, ~0u, 0u);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (a->dir && a->dir[0] && chdir(a->dir) != 0)
        goto fail;
    a->stage = STAGE_EXEC;
    execve(a->path, a->argv, a->envp);
fail:
    a->err = errno;
    _exit(127);
}

/* One well-formed record per iteration asked of the repeat loop (a program with a plain BEGIN
 * and END sends one), nothing after them; no record at all is fine.  A child that left the
 * request unread reset the pair as it closed: ECONNRESET comes once, before what it sent. */
void read_probe(int fd, int32_t asked, struct perflab_run *out)
{
    struct perflab_probe_record rec[2];
    int32_t most = asked > 1 ? asked : 1;
    ssize_t n;

    out->probe_ticks = out->cycles = out->instructions = 0;
    out->iterations = 0;
    for (;;) {
        n = recv(fd, rec, sizeof rec, MSG_DONTWAIT | MSG_TRUNC);
        if (n < 0 && errno == ECONNRESET && out->iterations == 0)
            n = recv(fd, rec, sizeof rec, MSG_DONTWAIT | MSG_TRUNC);
        if (n <= 0) /* EOF: the child closed its end, all records read */
            break;
        if (n != (ssize_t)sizeof rec[0] || rec[0].magic != PERFLAB_PROBE_MAGIC ||
            rec[0].version != PERFLAB_PROBE_VERSION || out->iterations == most) {
            out->status = PERFLAB_RUN_BAD_PROBE;
            out->flags &= ~(PERFLAB_RUN_HAS_PROBE | PERFLAB_RUN_HAS_COUNTERS);
            return;
        }
        if (out->iterations == 0) {
            out->flags |= PERFLAB_RUN_HAS_PROBE;
            if (rec[0].flags & PERFLAB_PROBE_COUNTERS)
                out->flags |= PERFLAB_RUN_HAS_COUNTERS;
            if (rec[0].flags & PERFLAB_PROBE_MLOCKED)
                out->flags |= PERFLAB_RUN_MLOCKED;
        }
        if (!(rec[0].flags & PERFLAB_PROBE_COUNTERS))
            out->flags &= ~PERFLAB_RUN_HAS_COUNTERS;
        out->iteration_ticks[out->iterations++] = rec[0].ticks;
        out->probe_ticks += rec[0].ticks;
        out->cycles += rec[0].cycles;
        out->instructions += rec[0].instructions;
    }
}

void classify(int wstatus, int timed_out, struct perflab_run *out)
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
