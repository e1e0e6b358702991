/* Parallel batches (PERFLAB_SPAWN_PARALLEL): one lane, a thread and its CPU, per listed CPU,
 * each taking the next run of the batch. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "spawn_internal.h"

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
    struct parent_rt_state saved;
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
        int stopped = run_one(&c, b->argv[b->prog[i]][0], b->dirs ? b->dirs[b->prog[i]] : NULL,
                              b->argv[b->prog[i]] + 1, envp, l->stop_fd, &l->out[i]);
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

int spawn_parallel(const struct batch *b, const int stdio[3], int stop_fd,
                   struct perflab_run *out, int64_t *done)
{
    int n = b->hdr.ncpus, started = 0, rc = 0;
    struct lanes l = {.b = b, .stdio = stdio, .stop_fd = stop_fd, .out = out, .done = done,
                      .done_lock = PTHREAD_MUTEX_INITIALIZER};
    struct spawn_opts o = {.flags = b->hdr.flags, .rt_policy = b->hdr.rt_policy,
                           .rt_priority = b->hdr.rt_priority};
    struct parent_rt_state saved;
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
    /* only now: a daemon one run left may serve a run in flight on another lane */
    reap_own_strays();
    *done = 0;
    if (!rc)
        while (*done < b->hdr.nruns && l.finished[*done])
            ++*done;
    free(lane);
    free(l.finished);
    return rc > 0 ? -rc : rc;
}
