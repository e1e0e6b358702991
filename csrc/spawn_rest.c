/* The spawning thread's real-time priority through a batch, and its rests between runs that
 * keep the kernel's real-time throttle out of them. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "spawn_internal.h"

/* The spawning thread takes real-time priority while it runs the children, so that it wakes
 * as soon as a child exits instead of queueing behind other work (what `chrt` on a shell
 * loop gives); restored before returning.  One above theirs where it can: on a child's CPU
 * it still preempts a spinning child at its timeout or a stop.  Refusal is the child's to
 * report. */
void parent_rt_enter(const struct spawn_opts *o, struct parent_rt_state *saved)
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
void parent_step(const struct spawn_ctx *c, int up)
{
    struct sched_param p = {.sched_priority = c->opts->rt_priority + up};

    if (c->parent_above)
        sched_setscheduler(0, c->opts->rt_policy, &p);
}

/* Whether this thread may run on a CPU of the children: only there does its wake-up at a
 * child's execve preempt the child, so only then does it step down around each clone. */
int shares_cpu(const struct spawn_ctx *c)
{
    cpu_set_t mine, both;

    if (!c->cpuset || sched_getaffinity(0, sizeof mine, &mine) != 0 ||
        c->cpuset_size > sizeof mine)
        return 1;
    CPU_AND_S(c->cpuset_size, &both, &mine, c->cpuset);
    return CPU_COUNT_S(c->cpuset_size, &both) > 0;
}

/* The scheduling parent_rt_enter found, back. */
void parent_rt_leave(const struct parent_rt_state *saved)
{
    if (saved->changed)
        perflab_sched_restore(&saved->sched);
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
struct rest *rest_of(const struct spawn_opts *o)
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
int rest_before(struct rest *r, int stop_fd)
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

void rest_after(struct rest *r, const struct perflab_run *out)
{
    if (r) {
        r->ended = mono_ns();
        r->last = out->wall_ns;
        r->rt = out->rt_errno == 0;
    }
}
