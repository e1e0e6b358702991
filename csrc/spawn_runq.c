/* The run-queue wait of every thread of a child, from taskstats over netlink or from /proc,
 * and the pidfd wait of an in-process run. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "spawn_internal.h"
#include "taskstats.h"

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
    struct ts_client ts; /* its socket -1: /proc */
    int why;         /* errno: why taskstats is not used (0: it is, or /proc was asked) */
    struct runq_thread *seen;
    int nseen, cap, hint;
    int64_t retired_cpu_ns, retired_runq_ns; /* earlier threads whose tid came back */
};

/* A taskstats client that may query (our own process as the test), or why not (errno). */
static int ts_open(struct runq *rq)
{
    struct taskstats ts;
    int rc = ts_client_open(&rq->ts, RUNQ_TIMEOUT_S);

    if (!rc && (rc = ts_client_query(&rq->ts, TASKSTATS_CMD_ATTR_TGID, getpid(), &ts)))
        ts_client_close(&rq->ts);
    return -rc;
}

struct runq *runq_open(int proc_only)
{
    struct runq *rq = calloc(1, sizeof *rq);

    if (!rq)
        return NULL;
    rq->ts.sock = -1;
    if (!proc_only)
        rq->why = ts_open(rq);
    return rq;
}

void runq_close(struct runq *rq)
{
    if (!rq)
        return;
    ts_client_close(&rq->ts);
    free(rq->seen);
    free(rq);
}

/* Whether the spawning thread reads /proc while each child runs (no taskstats socket). */
int runq_samples(const struct runq *rq)
{
    return rq && rq->ts.sock < 0;
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
int watch_child(pid_t pid, int pidfd, int64_t timeout_ns, int stop_fd, struct runq *rq)
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
int runq_wait(struct runq *rq, pid_t pid, int pidfd, int64_t timeout_ns, int stop_fd)
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

void runq_reap(struct runq *rq, pid_t pid, int *status, struct rusage *ru,
               struct perflab_run *out)
{
    struct taskstats ts;
    int rc = -1;

    out->runq_errno = rq->why;
    if (rq->ts.sock >= 0) {
        rc = ts_client_query(&rq->ts, TASKSTATS_CMD_ATTR_TGID, pid, &ts);
        if (rc == 0 && ts.cpu_count == 0 && ts.cpu_run_virtual_total == 0)
            rc = ts_client_query(&rq->ts, TASKSTATS_CMD_ATTR_PID, pid, &ts);
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
