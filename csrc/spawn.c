/* Exact child runs: clone(CLONE_VM|CLONE_VFORK) + execve with exactly the argv
 * and envp given, per-child ASLR/affinity/priority, a timeout, wait4 rusage and
 * the probe record read back after exit.
 *
 * posix_spawn cannot set personality, so this is posix_spawn's own recipe
 * (glibc and musl both clone with CLONE_VM|CLONE_VFORK) with the extra steps in
 * the child.  The child shares our memory until execve: it only makes system
 * calls and stores errno values into the shared child_args, which is how an
 * exec failure reaches the parent without a pipe.
 *
 * Because of that sharing, Linux carries the parent's address-space high-water mark into
 * the child's rusage at execve: run from perflab, every child "peaks" at perflab's size.
 * So the same code is also linked into a tiny helper (spawner/main.c) that perflab starts
 * once and that spawns from its own small address space; in-process runs stay possible.
 * Each child gets its own process group, so what it leaves running can be killed.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/genetlink.h>
#include <linux/taskstats.h>
#include "perflab.h"
#include "perflab_internal.h"
#include "perflab_probe.h"

#define CHILD_STACK (64 * 1024)
#define STAGE_SETUP 1
#define STAGE_EXEC 2

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif

struct spawn_opts {
    int flags;
    int ncpus;
    const int32_t *cpus;
    int rt_policy;
    int rt_priority;
    int64_t timeout_ns;
    int stdio[3];
    int32_t iterations; /* asked of the probe's repeat loop */
};

/* What the parent prepares once per batch, read by every child. */
struct spawn_ctx {
    const struct spawn_opts *opts;
    cpu_set_t *cpuset;
    size_t cpuset_size;
    int set_persona;
    unsigned long persona;
    int nreset;
    int reset[NSIG];  /* signals whose disposition is not SIG_DFL in the parent */
    char *stack_top;
    struct runq *runq; /* PERFLAB_SPAWN_RUNQ: how the children's run-queue wait is read */
    int parent_above;  /* one priority above the children, on one of their CPUs */
    struct watcher *watch; /* the helper's: children waited for in wait4, not by pidfd */
};

static struct runq *runq_open(int proc_only);
static void runq_close(struct runq *rq);
static int runq_samples(const struct runq *rq);

/* One child's view: the batch context plus what the child reports back. */
struct child_args {
    const struct spawn_ctx *ctx;
    const char *path;
    char *const *argv;
    char *const *envp;
    int probe_fd;
    volatile int err;
    volatile int stage;
    volatile int rt_err;
};

static int64_t mono_ns(void)
{
    return (int64_t)perflab_now_ns(CLOCK_MONOTONIC);
}

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
static int child_main(void *arg)
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
    a->stage = STAGE_EXEC;
    execve(a->path, a->argv, a->envp);
fail:
    a->err = errno;
    _exit(127);
}

/* The spawning thread takes real-time priority while it runs the children, so that it wakes
 * as soon as a child exits instead of queueing behind other work (what `chrt` on a shell
 * loop gives); restored before returning.  One above theirs where it can: on a child's CPU
 * it still preempts a spinning child at its timeout or a stop.  Refusal is the child's to
 * report. */
struct saved_sched {
    int changed;
    int above;
    struct perflab_saved_sched sched;
};

static void parent_rt_enter(const struct spawn_opts *o, struct saved_sched *saved)
{
    struct sched_param above = {.sched_priority = o->rt_priority + 1};
    struct sched_param same = {.sched_priority = o->rt_priority};

    saved->changed = saved->above = 0;
    if (!(o->flags & PERFLAB_SPAWN_RT))
        return;
    if (perflab_sched_save(&saved->sched) != 0)
        return;
    /* RLIMIT_RTPRIO may allow theirs and no more */
    saved->above = sched_setscheduler(0, o->rt_policy, &above) == 0;
    saved->changed = saved->above || sched_setscheduler(0, o->rt_policy, &same) == 0;
}

/* Around the clone the spawning thread steps down to the child's priority: execve ends the
 * vfork wait, and a parent above the child would preempt it there on its CPU, two switches
 * between address spaces per run (15 us of a 480 us run on an AMD Zen 5 guest).  At the
 * same priority it stays queued until the child blocks or exits; a child that spins from
 * execve on is then ended by its RLIMIT_RTTIME at the timeout rather than by this thread.
 * The helper's spawning thread stays at the child's priority through the batch instead (two
 * calls a run less, 5 us): its watcher raises it at a stop or a timeout. */
static void parent_step(const struct spawn_ctx *c, int up)
{
    struct sched_param p = {.sched_priority = c->opts->rt_priority + up};

    if (c->parent_above)
        sched_setscheduler(0, c->opts->rt_policy, &p);
}

/* Whether this thread may run on a CPU of the children: only there does its wake-up at a
 * child's execve preempt the child, so only then does it step down around each clone. */
static int shares_cpu(const struct spawn_ctx *c)
{
    cpu_set_t mine, both;

    if (!c->cpuset || sched_getaffinity(0, sizeof mine, &mine) != 0 ||
        c->cpuset_size > sizeof mine)
        return 1;
    CPU_AND_S(c->cpuset_size, &both, &mine, c->cpuset);
    return CPU_COUNT_S(c->cpuset_size, &both) > 0;
}

static void parent_rt_leave(const struct saved_sched *saved)
{
    if (saved->changed)
        perflab_sched_restore(&saved->sched);
}

static int ctx_init(struct spawn_ctx *c, const struct spawn_opts *o)
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

static void ctx_free(struct spawn_ctx *c)
{
    munmap(c->stack_top - CHILD_STACK, CHILD_STACK);
    runq_close(c->runq);
    if (c->cpuset)
        CPU_FREE(c->cpuset);
}

/* One well-formed record per iteration asked of the repeat loop (a program with a plain BEGIN
 * and END sends one), nothing after them; no record at all is fine.  A child that left the
 * request unread reset the pair as it closed: ECONNRESET comes once, before what it sent. */
static void read_probe(int fd, int32_t asked, struct perflab_run *out)
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

#define WAIT_EXITED 0
#define WAIT_TIMEOUT 1
#define WAIT_STOPPED 2

static int watch_child(pid_t pid, int pidfd, int64_t timeout_ns, int stop_fd, struct runq *rq);
static int runq_wait(struct runq *rq, pid_t pid, int pidfd, int64_t timeout_ns, int stop_fd);
static void runq_reap(struct runq *rq, pid_t pid, int *status, struct rusage *ru,
                      struct perflab_run *out);

/* Wait for the child; SIGKILL it at the deadline or when stop_fd turns readable. */
static int wait_child(pid_t pid, int pidfd, int64_t timeout_ns, int stop_fd, int *status,
                      struct rusage *ru)
{
    int why = watch_child(pid, pidfd, timeout_ns, stop_fd, NULL);

    while (wait4(pid, status, 0, ru) < 0 && errno == EINTR)
        ;
    return why;
}

/* Kill what the child left in its process group.  After the reap the group id stays
 * reserved for as long as a member lives, so this signal cannot reach anyone else. */
static int kill_strays(pid_t pgid)
{
    return kill(-pgid, SIGKILL) == 0;
}

/* ---- strays outside the group: a helper that is a child subreaper ----
 *
 * A process whose parent dies is re-parented to its nearest ancestor that is a child
 * subreaper (else to init): a setsid daemon a run leaves behind becomes the helper's child.
 * With no run in flight, every child the helper has is such a stray: killed with its
 * descendants, and reaped, so none outlives the run that left it. */

#define STRAYS_FIRST_NS 100000LL
#define STRAYS_MAX_NS 10000000LL
#define STRAYS_GIVE_UP_NS 5000000000LL /* one that will not die (setuid, D state) is left */

static int reaper; /* this process is a child subreaper: perflab_spawn_reaper was called */

int perflab_spawn_reaper(void)
{
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
        return -errno;
    reaper = 1;
    return 0;
}

struct proc_link {
    pid_t pid, ppid;
};

static int by_pid(const void *a, const void *b)
{
    pid_t x = ((const struct proc_link *)a)->pid, y = ((const struct proc_link *)b)->pid;
    return (x > y) - (x < y);
}

/* Every process's parent, from /proc/PID/stat ("pid (comm) state ppid ..."; comm may hold
 * spaces and parentheses: the fields resume after the last ')'), sorted by pid. */
static struct proc_link *proc_links(size_t *n)
{
    struct proc_link *all = NULL, *more;
    size_t cap = 0;
    char path[64], buf[512];
    struct dirent *e;
    DIR *d = opendir("/proc");

    *n = 0;
    if (!d)
        return NULL;
    while ((e = readdir(d))) {
        char *rest, *end;
        long pid = strtol(e->d_name, &rest, 10);
        int fd, ppid;
        ssize_t got;
        if (pid <= 0 || *rest)
            continue;
        snprintf(path, sizeof path, "/proc/%ld/stat", pid);
        if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
            continue;
        got = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (got <= 0)
            continue;
        buf[got] = '\0';
        if (!(end = strrchr(buf, ')')) || sscanf(end + 1, " %*c %d", &ppid) != 1)
            continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 256;
            if (!(more = realloc(all, cap * sizeof *all)))
                break;
            all = more;
        }
        all[(*n)++] = (struct proc_link){(pid_t)pid, (pid_t)ppid};
    }
    closedir(d);
    if (all)
        qsort(all, *n, sizeof *all, by_pid);
    return all;
}

int perflab_kill_descendants(void)
{
    size_t n, i;
    struct proc_link *all = proc_links(&n), key, *parent;
    unsigned char *mine = all ? calloc(n ? n : 1, 1) : NULL;
    pid_t self = getpid();
    int changed = 1, killed = 0;

    if (!mine) {
        free(all);
        return -ENOMEM;
    }
    while (changed) { /* each pass reaches one generation further down */
        changed = 0;
        for (i = 0; i < n; i++) {
            if (mine[i])
                continue;
            key.pid = all[i].ppid;
            parent = all[i].ppid == self ? NULL : bsearch(&key, all, n, sizeof *all, by_pid);
            if (all[i].ppid == self || (parent && mine[parent - all])) {
                mine[i] = 1;
                changed = 1;
            }
        }
    }
    for (i = 0; i < n; i++)
        if (mine[i] && kill(all[i].pid, SIGKILL) == 0)
            killed++;
    free(mine);
    free(all);
    return killed;
}

int perflab_reap_strays(void)
{
    int64_t nap = STRAYS_FIRST_NS, waited = 0;
    int found = 0;

    for (;;) {
        pid_t p = waitpid(-1, NULL, __WALL | WNOHANG);
        if (p > 0 || (p < 0 && errno == EINTR)) {
            found = p > 0 ? 1 : found;
            continue;
        }
        if (p < 0 || waited >= STRAYS_GIVE_UP_NS) /* ECHILD: none left */
            return found;
        found = 1; /* children alive: they and theirs are killed, then reaped as they die */
        perflab_kill_descendants();
        struct timespec ts = {0, nap};
        nanosleep(&ts, NULL);
        waited += nap;
        nap = nap * 2 < STRAYS_MAX_NS ? nap * 2 : STRAYS_MAX_NS;
    }
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
    out->utime_ns = (int64_t)perflab_tv_ns(&ru->ru_utime);
    out->stime_ns = (int64_t)perflab_tv_ns(&ru->ru_stime);
    out->maxrss_kb = ru->ru_maxrss;
    out->minflt = ru->ru_minflt;
    out->majflt = ru->ru_majflt;
    out->nvcsw = ru->ru_nvcsw;
    out->nivcsw = ru->ru_nivcsw;
}

static int stop_pending(int stop_fd)
{
    struct pollfd p = {.fd = stop_fd, .events = POLLIN};

    return stop_fd >= 0 && poll(&p, 1, 0) > 0;
}

/* ---- rests: the kernel's real-time bandwidth spent between runs, not inside one ----
 *
 * Real-time tasks may run sched_rt_runtime_us of every sched_rt_period_us on a CPU (950 ms
 * of each second by default); past that the kernel throttles them for the rest of its
 * period, inside whichever run is going then.  Back-to-back real-time children reach it once
 * a second: on an AMD Zen 5 guest (Linux 6.18) about one 45 ms run in twenty read 40-50 ms
 * more (31 of 640 runs of brotli at 2x; 1 with sched_rt_runtime_us at -1).  So the spawning
 * thread keeps the busy time of every window of one period under the runtime, as the kernel
 * counts it (what it counts in a period is then never over): before each run it adds the run,
 * predicted as the last one plus a margin, to the busy stretches of the last period, and where
 * that would reach the runtime it rests first, just long enough for the oldest busy time to
 * leave the window.  Back-to-back short runs rest 50 ms a second, as the throttle took; 500 ms
 * runs rest 50 ms between runs.  Per CPU, as the kernel counts; none where it does not
 * throttle (-1, or knobs it cannot read), after a run refused real-time priority, or before
 * a run predicted longer than the runtime, which no rest can keep whole. */
#define REST_CPUS CPU_SETSIZE
#define REST_STRETCHES 16
#define REST_GAP_NS 1000000LL   /* idle at least this long between runs ends a busy stretch */
#define REST_SLACK_NS 1000000LL /* from reading the clock to the child's start, and more */

struct rest {
    int64_t start[REST_STRETCHES], end[REST_STRETCHES]; /* past busy stretches, oldest first */
    int n;
    int64_t since; /* the start of the current stretch (0: none) */
    int64_t ended; /* when the last run ended */
    int64_t last;  /* its wall time */
    int rt;        /* whether it ran at real-time priority */
};

static struct rest rests[REST_CPUS];
static int64_t rest_runtime, rest_period; /* ns; 0: the kernel does not throttle */
static pthread_once_t rest_once = PTHREAD_ONCE_INIT;

static int64_t read_knob(const char *path)
{
    FILE *f = fopen(path, "re");
    long long v = -1;

    if (f) {
        if (fscanf(f, "%lld", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

static void rest_budget(void)
{
    int64_t runtime = read_knob("/proc/sys/kernel/sched_rt_runtime_us");
    int64_t period = read_knob("/proc/sys/kernel/sched_rt_period_us");

    if (runtime > 0 && period > runtime) {
        rest_runtime = runtime * 1000;
        rest_period = period * 1000;
    }
}

/* The rest state of the CPU a batch's children run on (the first listed, else CPU 0). */
static struct rest *rest_of(const struct spawn_opts *o)
{
    int32_t cpu = o->ncpus > 0 ? o->cpus[0] : 0;

    pthread_once(&rest_once, rest_budget);
    return rest_runtime && (o->flags & PERFLAB_SPAWN_RT) && cpu < REST_CPUS ? &rests[cpu] : NULL;
}

/* The current stretch joins the past ones, ending at `at` (the oldest two merge when full:
 * counted busy, never less). */
static void rest_close(struct rest *r, int64_t at)
{
    if (r->n == REST_STRETCHES) {
        r->end[0] = r->end[1];
        memmove(&r->start[1], &r->start[2], (REST_STRETCHES - 2) * sizeof r->start[0]);
        memmove(&r->end[1], &r->end[2], (REST_STRETCHES - 2) * sizeof r->end[0]);
        r->n--;
    }
    r->start[r->n] = r->since;
    r->end[r->n++] = at;
    r->since = 0;
}

/* Before a run: rest first if the window of one period that ends with it would hold more than
 * the runtime.  1 if a stop came during the rest (no run then). */
static int rest_before(struct rest *r, int stop_fd)
{
    int64_t now, run, need, x, wait;
    int k = 0;

    if (!r)
        return 0;
    now = mono_ns();
    if (!r->rt) {
        r->n = 0;
        r->since = 0;
    }
    if (r->since && now - r->ended >= REST_GAP_NS)
        rest_close(r, r->ended);
    while (k < r->n && r->end[k] <= now - rest_period)
        k++;
    memmove(r->start, r->start + k, (size_t)(r->n - k) * sizeof r->start[0]);
    memmove(r->end, r->end + k, (size_t)(r->n - k) * sizeof r->end[0]);
    r->n -= k;
    if (!r->since)
        r->since = now;
    run = r->last + (r->last / 4 < (rest_period - rest_runtime) / 2 ? r->last / 4
                                                                    : (rest_period - rest_runtime) / 2);
    run += REST_SLACK_NS;
    if (run >= rest_runtime)
        return 0;
    /* The latest x for which the busy time in [x, now] reaches the runtime less the run. */
    need = rest_runtime - run;
    x = INT64_MIN;
    for (int i = r->n; i >= 0 && x == INT64_MIN; i--) {
        int64_t s = i == r->n ? r->since : r->start[i], e = i == r->n ? now : r->end[i];
        if (e - s > need)
            x = e - need;
        need -= e - s;
    }
    wait = x == INT64_MIN ? 0 : x - (now + run - rest_period);
    if (wait > 0) {
        struct pollfd p = {.fd = stop_fd, .events = POLLIN};
        struct timespec ts = {wait / 1000000000, wait % 1000000000};
        rest_close(r, now);
        if (ppoll(&p, 1, &ts, NULL) > 0)
            return 1;
        r->since = mono_ns();
    }
    return 0;
}

static void rest_after(struct rest *r, const struct perflab_run *out)
{
    if (r) {
        r->ended = mono_ns();
        r->last = out->wall_ns;
        r->rt = out->rt_errno == 0;
    }
}

/* ---- waiting without a pidfd: wait4 and sigtimedwait, and a watcher (the helper) ----
 *
 * A pidfd for each child, polled with the stop fd, cost 7 us of a 500 us run on an AMD Zen 5
 * guest (the pidfd's file, the ppoll, the close).  The helper's spawning thread keeps SIGCHLD
 * and wake_sig blocked through a batch instead, and waits for its child with wait4(WNOHANG)
 * and sigtimedwait until the deadline: a signal that comes early stays pending, so no
 * wake-up is lost, and a child that is already a zombie (the usual case: at its priority the
 * spawning thread runs once the child is done) costs one wait4.  A watcher thread sleeps on
 * the stop fd and until the deadline of the run in flight, and sends wake_sig at a stop or
 * the deadline; first it raises the spawning thread above the child where the batch may, so
 * that a real-time child spinning on the CPU they share cannot keep it from either.  The
 * spawning thread then decides, and kills its own child, which it has not reaped (its pid
 * cannot have been reused).  In-process runs, whose process owns its signals, keep the
 * pidfd. */

#define WATCH_REPEAT_NS 1000000LL
#define WATCH_IDLE 0                /* deadline: no run in flight */
#define WATCH_FOREVER INT64_MAX     /* deadline: a run without a timeout */

static int wake_sig;

struct watcher {
    pthread_t thread, spawner;
    int stop_fd, end[2];
    int64_t timeout_ns;
    int policy;
    atomic_int boost;      /* the spawning thread's priority at a stop or deadline; 0: none */
    atomic_int raised;     /* it was raised: it steps down before its next clone */
    atomic_llong deadline;
    sigset_t wake, saved;  /* what the spawning thread waits for; its mask before the batch */
};

static void on_wake(int sig)
{
    (void)sig;
}

int perflab_spawn_wait_signal(int sig)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_wake; /* one left pending after a batch must not end the helper */
    sigemptyset(&sa.sa_mask);
    if (sigaction(sig, &sa, NULL) != 0)
        return -errno;
    wake_sig = sig;
    return 0;
}

static void watch_wake(struct watcher *w)
{
    struct sched_param p = {.sched_priority = atomic_load(&w->boost)};

    if (p.sched_priority > 0 && pthread_setschedparam(w->spawner, w->policy, &p) == 0)
        atomic_store(&w->raised, 1); /* after the raise: the step down cannot precede it */
    pthread_kill(w->spawner, wake_sig);
}

static void *watch_main(void *arg)
{
    struct watcher *w = arg;
    struct pollfd p[2] = {{.fd = w->end[0], .events = POLLIN},
                          {.fd = w->stop_fd, .events = POLLIN}};

    for (;;) {
        int64_t d = atomic_load(&w->deadline), now = mono_ns(), until = WATCH_FOREVER;
        int in_flight = d != WATCH_IDLE, stop = stop_pending(w->stop_fd);

        if (in_flight && (stop || now >= d))
            watch_wake(w);
        if (stop || (in_flight && now >= d))
            until = now + WATCH_REPEAT_NS; /* until the run ends, or the batch does */
        else if (in_flight)
            until = d;
        else if (w->timeout_ns > 0)
            until = now + w->timeout_ns; /* no run that starts after now ends before */
        int64_t left = until - now;
        struct timespec ts = {left / 1000000000, left % 1000000000};
        int n = stop || w->stop_fd < 0 ? 1 : 2;
        if (ppoll(p, (nfds_t)n, until == WATCH_FOREVER ? NULL : &ts, NULL) > 0 && p[0].revents)
            return NULL;
    }
}

/* A watcher for one batch, at the calling thread's priority, signals blocked, and the calling
 * thread's SIGCHLD and wake_sig blocked until watch_end; 0 if the process has no wake_sig or
 * the thread cannot start (the pidfd is then polled). */
static struct watcher *watch_start(int stop_fd, int64_t timeout_ns, int policy)
{
    struct watcher *w = wake_sig ? calloc(1, sizeof *w) : NULL;
    sigset_t all, old;

    if (!w)
        return NULL;
    *w = (struct watcher){.spawner = pthread_self(), .stop_fd = stop_fd, .timeout_ns = timeout_ns,
                          .policy = policy};
    atomic_init(&w->deadline, WATCH_IDLE);
    atomic_init(&w->boost, 0);
    atomic_init(&w->raised, 0);
    sigemptyset(&w->wake);
    sigaddset(&w->wake, SIGCHLD);
    sigaddset(&w->wake, wake_sig);
    if (pipe2(w->end, O_CLOEXEC) != 0) {
        free(w);
        return NULL;
    }
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int rc = pthread_create(&w->thread, NULL, watch_main, w);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        close(w->end[0]);
        close(w->end[1]);
        free(w);
        return NULL;
    }
    pthread_sigmask(SIG_BLOCK, &w->wake, &w->saved);
    return w;
}

static void watch_end(struct watcher *w)
{
    if (!w)
        return;
    close(w->end[1]);
    pthread_join(w->thread, NULL);
    close(w->end[0]);
    pthread_sigmask(SIG_SETMASK, &w->saved, NULL);
    free(w);
}

/* Wait for the child, SIGKILLing it at the deadline or at a stop; returns why the wait
 * ended, having reaped the child. */
static int wait_woken(struct watcher *w, pid_t pid, int64_t deadline, int stop_fd, int *status,
                      struct rusage *ru)
{
    int why = WAIT_EXITED;

    for (;;) {
        pid_t r = wait4(pid, status, WNOHANG, ru);
        if (r == pid || (r < 0 && errno != EINTR))
            break;
        if (r < 0)
            continue;
        int64_t now = mono_ns();
        if (why == WAIT_EXITED && stop_pending(stop_fd))
            why = WAIT_STOPPED;
        else if (why == WAIT_EXITED && deadline != WATCH_FOREVER && now >= deadline)
            why = WAIT_TIMEOUT;
        if (why != WAIT_EXITED && kill(pid, SIGKILL) == 0)
            deadline = WATCH_FOREVER; /* now its end, however long the kill takes */
        int64_t left = deadline == WATCH_FOREVER ? -1 : deadline - now;
        struct timespec ts = {left / 1000000000, left % 1000000000};
        sigtimedwait(&w->wake, NULL, left >= 0 ? &ts : NULL);
    }
    atomic_store(&w->deadline, WATCH_IDLE);
    return why;
}

/* One run; 1 if stop_fd stopped it (the record is then not a finished run). */
static int run_one(const struct spawn_ctx *c, const char *path, char *const argv[],
                   char *const envp[], int stop_fd, struct perflab_run *out)
{
    const struct spawn_opts *o = c->opts;
    struct child_args a = {.ctx = c, .path = path, .argv = argv, .envp = envp};
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
    if (!c->watch || atomic_exchange(&c->watch->raised, 0))
        parent_step(c, 0);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    w0 = mono_ns();
    if (c->watch) {
        deadline = timeout_ns > 0 ? w0 + timeout_ns : WATCH_FOREVER;
        atomic_store(&c->watch->deadline, deadline);
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
            atomic_store(&c->watch->deadline, WATCH_IDLE);
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
    fill_rusage(&ru, out);
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

/* A request unpacked in place: pointers into the caller's bytes plus a few arrays. */
struct batch {
    struct perflab_batch hdr;
    int32_t *cpus;
    int32_t *prog;
    int64_t *sizes;
    char ***argv;  /* argv[p][0] is program p's path, its argv starts at argv[p] + 1 */
    char **envp;   /* nenv base entries, a slot for the padding, NULL */
    char *pad;     /* "VAR=aaa...a" as long as the largest size */
    size_t prefix;
};

static void batch_free(struct batch *b)
{
    if (b->argv)
        for (int i = 0; i < b->hdr.nprogs; i++)
            free(b->argv[i]);
    free(b->argv);
    free(b->cpus);
    free(b->prog);
    free(b->sizes);
    free(b->envp);
    free(b->pad);
}

/* The next NUL-terminated string at *at, or NULL if the bytes end first. */
static char *next_string(char **at, const char *end)
{
    char *s = *at, *nul = s < end ? memchr(s, '\0', (size_t)(end - s)) : NULL;

    if (!nul)
        return NULL;
    *at = nul + 1;
    return s;
}

static void *take(const char **at, const char *end, size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);

    if (p && (size_t)(end - *at) >= bytes) {
        memcpy(p, *at, bytes);
        *at += bytes;
        return p;
    }
    free(p);
    return NULL;
}

static int batch_parse(const void *req, size_t len, struct batch *b)
{
    const char *at = req, *end = at + len;
    const struct perflab_batch *h = req;
    int32_t *argc = NULL;
    int64_t max = -1;
    char *s, *strings;

    memset(b, 0, sizeof *b);
    if (len < sizeof *h || h->magic != PERFLAB_BATCH_MAGIC || h->version != PERFLAB_BATCH_VERSION)
        return -EPROTO;
    b->hdr = *h;
    at += sizeof *h;
    if (h->iterations < 1 || h->iterations > PERFLAB_MAX_ITERATIONS)
        return -EINVAL;
    if (h->ncpus < 0 || h->nprogs < 1 || h->nenv < 0 || h->nruns < 0 || h->ncpus > (1 << 20) ||
        h->nprogs > (1 << 20) || h->nenv > (1 << 24) || h->nruns > (1 << 26))
        return -EINVAL;
    if (!(b->cpus = take(&at, end, (size_t)h->ncpus * 4)) ||
        !(argc = take(&at, end, (size_t)h->nprogs * 4)) ||
        !(b->prog = take(&at, end, (size_t)h->nruns * 4)) ||
        !(b->sizes = take(&at, end, (size_t)h->nruns * 8)) ||
        (uint64_t)(end - at) != h->strings_len || !(b->argv = calloc((size_t)h->nprogs, sizeof *b->argv)) ||
        !(b->envp = calloc((size_t)h->nenv + 2, sizeof *b->envp)))
        goto bad;
    strings = (char *)at;
    for (int p = 0; p < h->nprogs; p++) {
        if (argc[p] < 1 || argc[p] > (1 << 20) || !(b->argv[p] = calloc((size_t)argc[p] + 2, sizeof(char *))))
            goto bad;
        for (int i = 0; i <= argc[p]; i++)
            if (!(b->argv[p][i] = next_string(&strings, end)))
                goto bad;
    }
    for (int i = 0; i < h->nenv; i++)
        if (!(b->envp[i] = next_string(&strings, end)))
            goto bad;
    if (!(s = next_string(&strings, end)) || strings != end)
        goto bad;
    for (int i = 0; i < h->ncpus; i++)
        if (b->cpus[i] < 0)
            goto bad;
    for (int i = 0; i < h->nruns; i++) {
        if (b->prog[i] < 0 || b->prog[i] >= h->nprogs || b->sizes[i] < -1)
            goto bad;
        max = b->sizes[i] > max ? b->sizes[i] : max;
    }
    if (max >= 0) {
        b->prefix = strlen(s) + 1;
        if (b->prefix == 1 || strchr(s, '=') || !(b->pad = malloc(b->prefix + (size_t)max + 1)))
            goto bad;
        memcpy(b->pad, s, b->prefix - 1);
        b->pad[b->prefix - 1] = '=';
        memset(b->pad + b->prefix, 'a', (size_t)max);
        b->pad[b->prefix + max] = '\0';
    }
    free(argc);
    return 0;
bad:
    free(argc);
    batch_free(b);
    return -EINVAL;
}

/* The spawning thread on the children's CPUs: each child starts where it will run (no
 * migration when it sets its affinity) and its exit wakes the thread there (no cross-CPU
 * wakeup), as in a shell loop under taskset; it sleeps while a child runs.  A thread that
 * samples /proc during each run waits off them instead, when others remain. */
static int place_enter(const struct batch *b, int sampling, cpu_set_t *saved)
{
    cpu_set_t set;

    if (b->hdr.ncpus == 0 || sched_getaffinity(0, sizeof *saved, saved) != 0)
        return 0;
    if (sampling) {
        set = *saved;
        for (int i = 0; i < b->hdr.ncpus; i++)
            if (b->cpus[i] < CPU_SETSIZE)
                CPU_CLR(b->cpus[i], &set);
    } else {
        CPU_ZERO(&set);
        for (int i = 0; i < b->hdr.ncpus; i++)
            if (b->cpus[i] < CPU_SETSIZE)
                CPU_SET(b->cpus[i], &set);
    }
    return CPU_COUNT(&set) > 0 && !CPU_EQUAL(&set, saved) &&
           sched_setaffinity(0, sizeof set, &set) == 0;
}

static int spawn_parallel(const struct batch *b, const int stdio[3], int stop_fd,
                          struct perflab_run *out, int64_t *done);

/* How many of fd's pages are in the page cache (0 for an empty file); -1 if unknown. */
static int64_t resident_pages(int fd, off_t size)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), n = ((size_t)size + page - 1) / page;
    unsigned char *vec = malloc(n ? n : 1);
    void *map = size > 0 ? mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0) : NULL;
    int64_t count = -1;

    if (vec && map != MAP_FAILED && (!map || mincore(map, (size_t)size, vec) == 0)) {
        count = 0;
        for (size_t i = 0; map && i < n; i++)
            count += vec[i] & 1;
    }
    if (map && map != MAP_FAILED)
        munmap(map, (size_t)size);
    free(vec);
    return count;
}

/* One program's file out of the page cache and back in (PERFLAB_SPAWN_SETTLE); 0 if every
 * page was dropped first, 1 if some stayed or the file could not be read. */
static int settle_file(const char *path)
{
    enum { CHUNK = 1 << 20 };
    int fd = open(path, O_RDONLY | O_CLOEXEC), kept = 1;
    char *buf = malloc(CHUNK);
    struct stat st;

    if (fd >= 0 && buf && fstat(fd, &st) == 0) {
        fdatasync(fd); /* dirty pages (a program just linked) are not dropped */
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        kept = resident_pages(fd, st.st_size) != 0;
        while (read(fd, buf, CHUNK) > 0)
            ;
    }
    free(buf);
    if (fd >= 0)
        close(fd);
    return kept;
}

/* The programs the batch runs, in the order it first runs them (a side drawn to go first in a
 * layout is read first there); those it does not run are left alone.  The result: per
 * program, 1 if read afresh, 2 if some of its pages stayed (NULL: out of memory). */
static unsigned char *settle_programs(const struct batch *b)
{
    unsigned char *state = calloc((size_t)b->hdr.nprogs, 1);

    for (int i = 0; state && i < b->hdr.nruns; i++)
        if (!state[b->prog[i]])
            state[b->prog[i]] = 1 + settle_file(b->argv[b->prog[i]][0]);
    return state;
}

/* PERFLAB_RUN_PAGES_KEPT on the first finished run of each program whose pages stayed. */
static void mark_kept(const unsigned char *state, const struct batch *b, struct perflab_run *out,
                      int64_t done)
{
    for (int p = 0; state && p < b->hdr.nprogs; p++)
        for (int64_t i = 0; state[p] == 2 && i < done; i++)
            if (out[i].prog == p) {
                out[i].flags |= PERFLAB_RUN_PAGES_KEPT;
                break;
            }
}

int perflab_spawn_batch(const void *req, size_t len, const int stdio[3], int stop_fd,
                        struct perflab_run *out, int64_t *done)
{
    struct batch b;
    struct spawn_ctx c;
    struct spawn_opts o;
    struct saved_sched saved;
    cpu_set_t before;
    int rc = batch_parse(req, len, &b), moved;
    unsigned char *settled = NULL;
    struct rest *rest;

    *done = 0;
    if (rc)
        return rc;
    if (b.hdr.flags & PERFLAB_SPAWN_SETTLE)
        settled = settle_programs(&b);
    if (b.hdr.flags & PERFLAB_SPAWN_PARALLEL) {
        rc = spawn_parallel(&b, stdio, stop_fd, out, done);
        mark_kept(settled, &b, out, *done);
        free(settled);
        batch_free(&b);
        return rc;
    }
    o = (struct spawn_opts){b.hdr.flags, b.hdr.ncpus, b.cpus, b.hdr.rt_policy, b.hdr.rt_priority,
                            b.hdr.timeout_ns, {stdio[0], stdio[1], stdio[2]}, b.hdr.iterations};
    rc = ctx_init(&c, &o);
    if (rc) {
        free(settled);
        batch_free(&b);
        return rc;
    }
    parent_rt_enter(&o, &saved);
    c.watch = c.runq ? NULL : watch_start(stop_fd, o.timeout_ns, o.rt_policy); /* before it moves */
    moved = place_enter(&b, runq_samples(c.runq), &before);
    c.parent_above = saved.above && shares_cpu(&c);
    rest = rest_of(&o);
    if (c.watch && c.parent_above) { /* at the children's priority, raised by the watcher */
        atomic_store(&c.watch->boost, o.rt_priority + 1);
        parent_step(&c, 0);
    }
    for (int i = 0; i < b.hdr.nruns && !stop_pending(stop_fd); i++) {
        int64_t size = b.sizes[i];
        char **argv = b.argv[b.prog[i]];
        memset(&out[i], 0, sizeof out[i]);
        out[i].env_size = size;
        out[i].prog = b.prog[i];
        b.envp[b.hdr.nenv] = size >= 0 ? b.pad : NULL;
        if (size >= 0)
            b.pad[b.prefix + size] = '\0';
        if (rest_before(rest, stop_fd))
            break;
        rc = run_one(&c, argv[0], argv + 1, b.envp, stop_fd, &out[i]);
        rest_after(rest, &out[i]);
        if (reaper && perflab_reap_strays())
            out[i].flags |= PERFLAB_RUN_STRAYS;
        if (size >= 0)
            b.pad[b.prefix + size] = 'a';
        if (rc)
            break;
        /* after the record: a helper killed now leaves both in perflab's memfd */
        __atomic_store_n(done, (int64_t)i + 1, __ATOMIC_RELEASE);
    }
    watch_end(c.watch);
    parent_rt_leave(&saved);
    if (moved)
        sched_setaffinity(0, sizeof before, &before);
    mark_kept(settled, &b, out, *done);
    free(settled);
    ctx_free(&c);
    batch_free(&b);
    return 0;
}

/* ---- parallel batches: one lane (a thread and its CPU) per listed CPU ---- */

#define LANE_STACK (256 * 1024)

struct lanes {
    const struct batch *b;
    const int *stdio;
    int stop_fd;
    atomic_llong next; /* the next run a free lane takes */
    unsigned char *finished;
    struct perflab_run *out;
    int64_t *done;     /* the finished runs before the first unfinished one, as they end */
    pthread_mutex_t done_lock;
};

struct lane {
    pthread_t thread;
    struct lanes *all;
    int k;
    int rc;
};

/* A lane's own padding buffer and environment: the batch's are rewritten per run. */
static int lane_env(const struct batch *b, char ***envp, char **pad)
{
    size_t n = (size_t)b->hdr.nenv + 2, len = b->pad ? strlen(b->pad) + 1 : 0;

    *envp = calloc(n, sizeof **envp);
    *pad = len ? malloc(len) : NULL;
    if (!*envp || (len && !*pad))
        return -ENOMEM;
    memcpy(*envp, b->envp, n * sizeof **envp);
    if (len)
        memcpy(*pad, b->pad, len);
    return 0;
}

/* Each lane waits on its own CPU, as a sequential batch's spawner does (place_enter). */
static void lane_place(int32_t cpu)
{
    cpu_set_t own;

    if (cpu < CPU_SETSIZE) {
        CPU_ZERO(&own);
        CPU_SET(cpu, &own);
        sched_setaffinity(0, sizeof own, &own);
    }
}

static void *lane_main(void *arg)
{
    struct lane *me = arg;
    struct lanes *l = me->all;
    const struct batch *b = l->b;
    int32_t cpu = b->cpus[me->k];
    struct spawn_opts o = {b->hdr.flags, 1, &b->cpus[me->k], b->hdr.rt_policy,
                           b->hdr.rt_priority, b->hdr.timeout_ns,
                           {l->stdio[0], l->stdio[1], l->stdio[2]}, b->hdr.iterations};
    struct saved_sched saved;
    struct spawn_ctx c;
    struct rest *rest;
    char **envp = NULL, *pad = NULL;

    me->rc = lane_env(b, &envp, &pad);
    if (!me->rc)
        me->rc = ctx_init(&c, &o);
    if (me->rc) {
        atomic_store(&l->next, b->hdr.nruns); /* the batch fails: no lane starts another run */
        free(envp);
        free(pad);
        return NULL;
    }
    lane_place(cpu);
    parent_rt_enter(&o, &saved);
    c.parent_above = saved.above && shares_cpu(&c);
    rest = rest_of(&o);
    while (!stop_pending(l->stop_fd)) {
        int64_t i = atomic_fetch_add(&l->next, 1), size;
        if (i >= b->hdr.nruns)
            break;
        size = b->sizes[i];
        memset(&l->out[i], 0, sizeof l->out[i]);
        l->out[i].env_size = size;
        l->out[i].prog = b->prog[i];
        l->out[i].cpu = cpu;
        envp[b->hdr.nenv] = size >= 0 ? pad : NULL;
        if (size >= 0)
            pad[b->prefix + size] = '\0';
        if (rest_before(rest, l->stop_fd))
            break;
        int stopped = run_one(&c, b->argv[b->prog[i]][0], b->argv[b->prog[i]] + 1, envp,
                              l->stop_fd, &l->out[i]);
        rest_after(rest, &l->out[i]);
        if (size >= 0)
            pad[b->prefix + size] = 'a';
        if (stopped)
            break;
        pthread_mutex_lock(&l->done_lock);
        l->finished[i] = 1;
        for (int64_t d = *l->done; d < b->hdr.nruns && l->finished[d]; d++)
            __atomic_store_n(l->done, d + 1, __ATOMIC_RELEASE); /* as a serial batch's */
        pthread_mutex_unlock(&l->done_lock);
    }
    parent_rt_leave(&saved);
    ctx_free(&c);
    free(envp);
    free(pad);
    return NULL;
}

static int spawn_parallel(const struct batch *b, const int stdio[3], int stop_fd,
                          struct perflab_run *out, int64_t *done)
{
    int n = b->hdr.ncpus, started = 0, rc = 0;
    struct lanes l = {.b = b, .stdio = stdio, .stop_fd = stop_fd, .out = out, .done = done,
                      .done_lock = PTHREAD_MUTEX_INITIALIZER};
    struct spawn_opts o = {.flags = b->hdr.flags, .rt_policy = b->hdr.rt_policy,
                           .rt_priority = b->hdr.rt_priority};
    struct saved_sched saved;
    struct lane *lane = calloc(n > 0 ? (size_t)n : 1, sizeof *lane);
    pthread_attr_t attr;
    sigset_t all, old;

    l.finished = calloc(b->hdr.nruns ? (size_t)b->hdr.nruns : 1, 1);
    if (n < 1 || !lane || !l.finished) {
        free(lane);
        free(l.finished);
        return n < 1 ? -EINVAL : -ENOMEM;
    }
    atomic_init(&l.next, 0);
    /* As a serial batch's spawner: woken the moment the last lane ends, not behind other
     * work, so that the next queued batch starts without a gap. */
    parent_rt_enter(&o, &saved);
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, LANE_STACK);
    /* Signals stay with the caller's thread: a lane only sees the stop fd. */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    for (int k = 0; k < n; k++) {
        lane[k] = (struct lane){.all = &l, .k = k};
        rc = pthread_create(&lane[k].thread, &attr, lane_main, &lane[k]);
        if (rc)
            break;
        started++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (rc) /* fewer lanes than asked would pose as the parallel sweep asked for */
        atomic_store(&l.next, b->hdr.nruns);
    for (int k = 0; k < started; k++) {
        pthread_join(lane[k].thread, NULL);
        if (!rc && lane[k].rc)
            rc = lane[k].rc;
    }
    parent_rt_leave(&saved);
    if (reaper) /* only now: a daemon one run left may serve a run in flight on another lane */
        perflab_reap_strays();
    *done = 0;
    if (!rc)
        while (*done < b->hdr.nruns && l.finished[*done])
            ++*done;
    free(lane);
    free(l.finished);
    return rc > 0 ? -rc : rc;
}

/* ---- run-queue wait of every thread of a child (PERFLAB_SPAWN_RUNQ) ----
 *
 * The child is waited for with waitid(WNOWAIT): it stays a zombie, and so readable, until
 * runq_reap has read it and reaps it with wait4.  Two sources:
 *  - taskstats (CAP_NET_ADMIN): a TGID query on the zombie answers the kernel's per-process
 *    sum, which every exiting thread of a multi-threaded process adds itself to
 *    (taskstats_exit -> fill_tgid_exit, whether or not anyone listens): every thread, exact.
 *    A process that never had a second thread has no such sum: its leader's PID query is it.
 *  - /proc: each thread's schedstat read while the child runs, every RUNQ_FIRST_NS doubling to
 *    RUNQ_MAX_NS, and the zombie leader's own at exit.  A thread that exits before the leader
 *    vanishes from /proc: it counts as of its last reading (runq_cpu_ns says how much CPU
 *    time the counted threads account for, against the rusage total).
 */

#define RUNQ_FIRST_NS 1000000LL
#define RUNQ_MAX_NS 16000000LL
#define RUNQ_TIMEOUT_S 2

struct runq_thread {
    int32_t tid;
    int64_t cpu_ns;
    int64_t runq_ns;
};

struct runq {
    int sock;        /* taskstats netlink socket; -1: /proc */
    uint16_t family;
    uint32_t seq;
    int why;         /* errno: why taskstats is not used (0: it is, or /proc was asked) */
    struct runq_thread *seen;
    int nseen, cap, hint;
    int64_t retired_cpu_ns, retired_runq_ns; /* earlier threads whose tid came back */
};

struct ts_msg {
    struct nlmsghdr n;
    struct genlmsghdr g;
    char attrs[64];
};

static int ts_send(struct runq *rq, uint16_t type, uint8_t cmd, uint16_t attr, const void *val,
                   uint16_t len)
{
    struct ts_msg m;
    struct nlattr *a = (struct nlattr *)m.attrs;

    memset(&m, 0, sizeof m);
    a->nla_type = attr;
    a->nla_len = (uint16_t)(NLA_HDRLEN + len);
    memcpy((char *)a + NLA_HDRLEN, val, len);
    m.n.nlmsg_len = (uint32_t)(NLMSG_LENGTH(GENL_HDRLEN) + NLA_ALIGN(a->nla_len));
    m.n.nlmsg_type = type;
    m.n.nlmsg_flags = NLM_F_REQUEST;
    m.n.nlmsg_seq = ++rq->seq;
    m.g.cmd = cmd;
    m.g.version = 1;
    return send(rq->sock, &m, m.n.nlmsg_len, 0) < 0 ? -errno : 0;
}

/* The first attribute of `type` among [at, end), or NULL. */
static struct nlattr *nla_find(char *at, char *end, uint16_t type)
{
    while (at + NLA_HDRLEN <= end) {
        struct nlattr *a = (struct nlattr *)at;
        if (a->nla_len < NLA_HDRLEN || at + a->nla_len > end)
            return NULL;
        if ((a->nla_type & NLA_TYPE_MASK) == type)
            return a;
        at += NLA_ALIGN(a->nla_len);
    }
    return NULL;
}

/* The attributes of the reply to our last request (skipping stale ones), or -errno. */
static int ts_reply(struct runq *rq, char *buf, size_t size, char **attrs, char **end)
{
    for (;;) {
        ssize_t n = recv(rq->sock, buf, size, 0);
        struct nlmsghdr *h = (struct nlmsghdr *)buf;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (!NLMSG_OK(h, (size_t)n) || h->nlmsg_seq != rq->seq)
            continue;
        if (h->nlmsg_type == NLMSG_ERROR) {
            struct nlmsgerr *e = NLMSG_DATA(h);
            return e->error ? e->error : -EPROTO;
        }
        *attrs = (char *)NLMSG_DATA(h) + GENL_HDRLEN;
        *end = (char *)h + h->nlmsg_len;
        return *attrs <= *end ? 0 : -EPROTO;
    }
}

static int ts_family(struct runq *rq)
{
    char buf[4096], *at, *end;
    struct nlattr *id;
    int rc = ts_send(rq, GENL_ID_CTRL, CTRL_CMD_GETFAMILY, CTRL_ATTR_FAMILY_NAME,
                     TASKSTATS_GENL_NAME, sizeof TASKSTATS_GENL_NAME);

    if (rc || (rc = ts_reply(rq, buf, sizeof buf, &at, &end)))
        return rc;
    if (!(id = nla_find(at, end, CTRL_ATTR_FAMILY_ID)))
        return -ENOENT;
    memcpy(&rq->family, (char *)id + NLA_HDRLEN, sizeof rq->family);
    return 0;
}

/* The kernel's figures for one thread (TASKSTATS_CMD_ATTR_PID) or thread group (_TGID). */
static int ts_query(struct runq *rq, uint16_t attr, pid_t pid, struct taskstats *ts)
{
    char buf[4096], *at, *end;
    uint32_t id = (uint32_t)pid;
    uint16_t aggr = attr == TASKSTATS_CMD_ATTR_PID ? TASKSTATS_TYPE_AGGR_PID
                                                   : TASKSTATS_TYPE_AGGR_TGID;
    struct nlattr *outer, *stats;
    int rc = ts_send(rq, rq->family, TASKSTATS_CMD_GET, attr, &id, sizeof id);

    if (rc || (rc = ts_reply(rq, buf, sizeof buf, &at, &end)))
        return rc;
    if (!(outer = nla_find(at, end, aggr)) ||
        !(stats = nla_find((char *)outer + NLA_HDRLEN, (char *)outer + outer->nla_len,
                           TASKSTATS_TYPE_STATS)))
        return -EPROTO;
    memset(ts, 0, sizeof *ts);
    /* a kernel's struct may be older (shorter) or newer (longer) than this header's */
    size_t len = stats->nla_len - NLA_HDRLEN;
    memcpy(ts, (char *)stats + NLA_HDRLEN, len < sizeof *ts ? len : sizeof *ts);
    return 0;
}

/* A taskstats socket that may query (our own process as the test), or why not. */
static int ts_open(struct runq *rq)
{
    struct timeval tv = {RUNQ_TIMEOUT_S, 0};
    struct sockaddr_nl addr = {.nl_family = AF_NETLINK};
    struct taskstats ts;
    int rc;

    rq->sock = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
    if (rq->sock < 0)
        return errno;
    if (bind(rq->sock, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        setsockopt(rq->sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0)
        rc = -errno;
    else if (!(rc = ts_family(rq)))
        rc = ts_query(rq, TASKSTATS_CMD_ATTR_TGID, getpid(), &ts);
    if (rc) {
        close(rq->sock);
        rq->sock = -1;
    }
    return -rc;
}

static struct runq *runq_open(int proc_only)
{
    struct runq *rq = calloc(1, sizeof *rq);

    if (!rq)
        return NULL;
    rq->sock = -1;
    if (!proc_only)
        rq->why = ts_open(rq);
    return rq;
}

static void runq_close(struct runq *rq)
{
    if (!rq)
        return;
    if (rq->sock >= 0)
        close(rq->sock);
    free(rq->seen);
    free(rq);
}

/* Whether the spawning thread reads /proc while each child runs (no taskstats socket). */
static int runq_samples(const struct runq *rq)
{
    return rq && rq->sock < 0;
}

/* "cpu_ns runq_ns slices" of one schedstat file under dirfd; 0 or -1. */
static int read_schedstat(int dirfd, const char *path, int64_t *cpu, int64_t *runq)
{
    char buf[96];
    int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
    ssize_t n;
    long long a, b;

    if (fd < 0)
        return -1;
    n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    if (sscanf(buf, "%lld %lld", &a, &b) != 2)
        return -1;
    *cpu = a;
    *runq = b;
    return 0;
}

static void runq_note(struct runq *rq, int32_t tid, int64_t cpu, int64_t runq)
{
    int i = rq->hint < rq->nseen ? rq->hint : 0;

    /* /proc lists a process's threads in the same order each time: the hint is usually it */
    for (int k = 0; k < rq->nseen; k++, i = i + 1 < rq->nseen ? i + 1 : 0)
        if (rq->seen[i].tid == tid)
            break;
    if (rq->nseen == 0 || rq->seen[i].tid != tid) {
        if (rq->nseen == rq->cap) {
            int cap = rq->cap ? 2 * rq->cap : 16;
            struct runq_thread *more = realloc(rq->seen, (size_t)cap * sizeof *more);
            if (!more)
                return;
            rq->seen = more;
            rq->cap = cap;
        }
        i = rq->nseen++;
        rq->seen[i] = (struct runq_thread){tid, 0, 0};
    } else if (cpu < rq->seen[i].cpu_ns) { /* a new thread under an old tid */
        rq->retired_cpu_ns += rq->seen[i].cpu_ns;
        rq->retired_runq_ns += rq->seen[i].runq_ns;
    }
    rq->seen[i].cpu_ns = cpu;
    rq->seen[i].runq_ns = runq;
    rq->hint = i + 1;
}

static void runq_sample(struct runq *rq, pid_t pid)
{
    char path[48];
    struct dirent *e;
    int64_t cpu, runq;
    DIR *d;

    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    if (!(d = opendir(path)))
        return;
    while ((e = readdir(d))) {
        char *rest;
        long tid = strtol(e->d_name, &rest, 10);
        if (tid <= 0 || *rest)
            continue;
        snprintf(path, sizeof path, "%ld/schedstat", tid);
        if (read_schedstat(dirfd(d), path, &cpu, &runq) == 0)
            runq_note(rq, (int32_t)tid, cpu, runq);
    }
    closedir(d);
}

/* Poll the child's pidfd until it ends, SIGKILLing it at the deadline or when stop_fd turns
 * readable; with rq sampling /proc (no taskstats socket), read its threads' schedstat between,
 * every RUNQ_FIRST_NS doubling up to RUNQ_MAX_NS.  Returns why the wait ended; reaps nothing. */
static int watch_child(pid_t pid, int pidfd, int64_t timeout_ns, int stop_fd, struct runq *rq)
{
    int sampling = runq_samples(rq), why = WAIT_EXITED;
    int64_t start = mono_ns(), deadline = start + timeout_ns, every = RUNQ_FIRST_NS;
    int64_t next = start + every;

    if (pidfd < 0 || !(timeout_ns > 0 || stop_fd >= 0 || sampling))
        return why;
    struct pollfd p[2] = {{.fd = pidfd, .events = POLLIN}, {.fd = stop_fd, .events = POLLIN}};
    for (;;) {
        int64_t until = sampling ? next : deadline, left;
        if (timeout_ns > 0 && deadline < until)
            until = deadline;
        left = until - mono_ns();
        struct timespec ts = {left > 0 ? left / 1000000000 : 0, left > 0 ? left % 1000000000 : 0};
        int r = ppoll(p, stop_fd >= 0 ? 2 : 1, sampling || timeout_ns > 0 ? &ts : NULL, NULL);
        if (r < 0 && errno == EINTR)
            continue;
        if (r > 0 && p[0].revents)
            break;
        if (r < 0)
            break;
        if (r == 0 && sampling && !(timeout_ns > 0 && mono_ns() >= deadline)) {
            runq_sample(rq, pid);
            every = every * 2 < RUNQ_MAX_NS ? every * 2 : RUNQ_MAX_NS;
            next = mono_ns() + every;
            continue;
        }
        why = r == 0 ? WAIT_TIMEOUT : WAIT_STOPPED;
        syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
        break;
    }
    return why;
}

/* wait_child's wait with the /proc readings between, ending on the zombie, not reaping it. */
static int runq_wait(struct runq *rq, pid_t pid, int pidfd, int64_t timeout_ns, int stop_fd)
{
    siginfo_t si;
    int why;

    rq->nseen = rq->hint = 0;
    rq->retired_cpu_ns = rq->retired_runq_ns = 0;
    why = watch_child(pid, pidfd, timeout_ns, stop_fd, rq);
    while (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT) < 0 && errno == EINTR)
        ;
    return why;
}

/* The zombie's figures from /proc: its leader's final schedstat and the others' last. */
static void runq_from_proc(struct runq *rq, pid_t pid, struct perflab_run *out)
{
    char path[32];
    int64_t cpu, runq;

    snprintf(path, sizeof path, "/proc/%d/schedstat", (int)pid);
    if (read_schedstat(AT_FDCWD, path, &cpu, &runq) != 0)
        return;
    runq_note(rq, (int32_t)pid, cpu, runq);
    out->runq_ns = rq->retired_runq_ns;
    out->runq_cpu_ns = rq->retired_cpu_ns;
    for (int i = 0; i < rq->nseen; i++) {
        out->runq_ns += rq->seen[i].runq_ns;
        out->runq_cpu_ns += rq->seen[i].cpu_ns;
    }
    out->runq_source = PERFLAB_RUNQ_PROC;
}

static void runq_reap(struct runq *rq, pid_t pid, int *status, struct rusage *ru,
                      struct perflab_run *out)
{
    struct taskstats ts;
    int rc = -1;

    out->runq_errno = rq->why;
    if (rq->sock >= 0) {
        rc = ts_query(rq, TASKSTATS_CMD_ATTR_TGID, pid, &ts);
        if (rc == 0 && ts.cpu_count == 0 && ts.cpu_run_virtual_total == 0)
            rc = ts_query(rq, TASKSTATS_CMD_ATTR_PID, pid, &ts);
        if (rc == 0) {
            out->runq_ns = (int64_t)ts.cpu_delay_total;
            out->runq_cpu_ns = (int64_t)ts.cpu_run_virtual_total;
            out->runq_source = PERFLAB_RUNQ_TASKSTATS;
        } else {
            out->runq_errno = -rc;
        }
    }
    if (rc != 0)
        runq_from_proc(rq, pid, out);
    while (wait4(pid, status, 0, ru) < 0 && errno == EINTR)
        ;
}
