/* What the files of exact child runs (spawn.c and spawn_*.c) share, and how they fit together.
 * Not part of the cdef, like perflab_internal.h.  Calls only go down the list, never back:
 *   spawn.c       the batch entry: perflab_spawn_batch, placement, settling the programs
 *   spawn_lanes.c one lane (a thread on its CPU) per listed CPU, each running runs
 *   spawn_run.c   one run: the batch context, the clone, the wait, the record
 *   then the leaves, which call none of the others: spawn_child.c (the child until execve
 *   and the record read after), spawn_rest.c (the parent's real-time priority and rests),
 *   spawn_watch.c (the watcher thread), spawn_runq.c (run-queue wait), spawn_strays.c
 *   (what a run leaves behind), spawn_wire.c (the batch's bytes).
 * Needs _GNU_SOURCE before the first system header, as every spawn*.c defines it. */
#ifndef PERFLAB_SPAWN_INTERNAL_H
#define PERFLAB_SPAWN_INTERNAL_H
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>
#include "perflab.h"
#include "perflab_internal.h"

#define STAGE_SETUP 1
#define STAGE_EXEC 2

/* Why a wait for a child ended. */
#define WAIT_EXITED 0
#define WAIT_TIMEOUT 1
#define WAIT_STOPPED 2

#define WATCH_IDLE 0            /* deadline: no run in flight */
#define WATCH_FOREVER INT64_MAX /* deadline: a run without a timeout */

struct runq;
struct watcher;
struct rest;

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

/* One child's view: the batch context plus what the child reports back. */
struct child_args {
    const struct spawn_ctx *ctx;
    const char *path;
    const char *dir; /* chdir here before execve (NULL or "": stay) */
    char *const *argv;
    char *const *envp;
    int probe_fd;
    volatile int err;
    volatile int stage;
    volatile int rt_err;
};

/* The spawning thread's scheduling before parent_rt_enter, and what that gave it. */
struct parent_rt_state {
    int changed;
    int above;
    struct perflab_saved_sched sched;
};

/* A request unpacked in place: pointers into the caller's bytes plus a few arrays. */
struct batch {
    struct perflab_batch hdr;
    int32_t *cpus;
    int32_t *prog;
    int64_t *sizes;
    char ***argv;  /* argv[p][0] is program p's path, its argv starts at argv[p] + 1 */
    char **dirs;   /* PERFLAB_SPAWN_DIRS: where program p runs ("": where perflab does) */
    char **envp;   /* nenv base entries, a slot for the padding, NULL */
    char *pad;     /* "VAR=aaa...a" as long as the largest size */
    size_t prefix;
};

static inline int64_t mono_ns(void)
{
    return (int64_t)perflab_now_ns(CLOCK_MONOTONIC);
}

static inline int stop_pending(int stop_fd)
{
    struct pollfd p = {.fd = stop_fd, .events = POLLIN};

    return stop_fd >= 0 && poll(&p, 1, 0) > 0;
}

/* Hidden: shared between these files, not exported from the core or called through its PLT. */
#pragma GCC visibility push(hidden)

/* spawn_lanes.c */
int spawn_parallel(const struct batch *b, const int stdio[3], int stop_fd,
                   struct perflab_run *out, int64_t *done);

/* spawn_run.c */
int ctx_init(struct spawn_ctx *c, const struct spawn_opts *o);
void ctx_free(struct spawn_ctx *c);
int run_one(const struct spawn_ctx *c, const char *path, const char *dir, char *const argv[],
            char *const envp[],
            int stop_fd, struct perflab_run *out);

/* spawn_child.c */
int child_main(void *arg);
void read_probe(int fd, int32_t asked, struct perflab_run *out);
void classify(int wstatus, int timed_out, struct perflab_run *out);

/* spawn_rest.c */
void parent_rt_enter(const struct spawn_opts *o, struct parent_rt_state *saved);
void parent_rt_leave(const struct parent_rt_state *saved);
void parent_step(const struct spawn_ctx *c, int up);
int shares_cpu(const struct spawn_ctx *c);
struct rest *rest_of(const struct spawn_opts *o);
int rest_before(struct rest *r, int stop_fd);
void rest_after(struct rest *r, const struct perflab_run *out);

/* spawn_watch.c */
struct watcher *watch_start(int stop_fd, int64_t timeout_ns, int policy);
void watch_end(struct watcher *w);
void watch_boost(struct watcher *w, int priority);
int watch_raised(struct watcher *w);
void watch_arm(struct watcher *w, int64_t deadline);
int wait_woken(struct watcher *w, pid_t pid, int64_t deadline, int stop_fd, int *status,
               struct rusage *ru);

/* spawn_runq.c */
struct runq *runq_open(int proc_only);
void runq_close(struct runq *rq);
int runq_samples(const struct runq *rq);
int watch_child(pid_t pid, int pidfd, int64_t timeout_ns, int stop_fd, struct runq *rq);
int runq_wait(struct runq *rq, pid_t pid, int pidfd, int64_t timeout_ns, int stop_fd);
void runq_reap(struct runq *rq, pid_t pid, int *status, struct rusage *ru,
               struct perflab_run *out);

/* spawn_strays.c */
int kill_strays(pid_t pgid);
int reap_own_strays(void);

/* spawn_wire.c */
int batch_parse(const void *req, size_t len, struct batch *b);
void batch_free(struct batch *b);

#pragma GCC visibility pop
#endif
