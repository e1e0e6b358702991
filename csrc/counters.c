/* perf_event counters: which events this machine can count, and counting them. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/perf_event.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "perflab.h"

_Static_assert(PERFLAB_NEVENTS == 7, "struct perflab_counter_set arrays hold 7 events");

static const struct {
    uint32_t type;
    uint64_t config;
} events[PERFLAB_NEVENTS] = {
    [PERFLAB_EV_CYCLES] = {PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
    [PERFLAB_EV_INSTRUCTIONS] = {PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS},
    [PERFLAB_EV_REF_CYCLES] = {PERF_TYPE_HARDWARE, PERF_COUNT_HW_REF_CPU_CYCLES},
    [PERFLAB_EV_TASK_CLOCK] = {PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK},
    [PERFLAB_EV_CONTEXT_SWITCHES] = {PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES},
    [PERFLAB_EV_CPU_MIGRATIONS] = {PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS},
    [PERFLAB_EV_PAGE_FAULTS] = {PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS},
};

static int perf_open(struct perf_event_attr *attr, pid_t pid, int cpu, int group)
{
    return (int)syscall(SYS_perf_event_open, attr, pid, cpu, group, PERF_FLAG_FD_CLOEXEC);
}

/* Software events happen in the kernel (a fault, a switch): excluding the
 * kernel would count none of them, so they include it where allowed. */
static void fill_attr(struct perf_event_attr *attr, int ev, int leader, int inherit,
                      int user_only)
{
    memset(attr, 0, sizeof *attr);
    attr->size = sizeof *attr;
    attr->type = events[ev].type;
    attr->config = events[ev].config;
    attr->disabled = leader;
    attr->exclude_kernel = user_only || events[ev].type != PERF_TYPE_SOFTWARE;
    attr->exclude_hv = 1;
    attr->inherit = inherit ? 1 : 0;
    attr->read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
}

int perflab_perf_probe(uint32_t type, uint64_t config)
{
    struct perf_event_attr attr;
    int fd;

    memset(&attr, 0, sizeof attr);
    attr.size = sizeof attr;
    attr.type = type;
    attr.config = config;
    attr.disabled = 1;
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    fd = perf_open(&attr, 0, -1, -1);
    if (fd < 0)
        return -errno;
    close(fd);
    return 0;
}

static void reset(struct perflab_counter_set *set)
{
    for (int i = 0; i < PERFLAB_NEVENTS; i++) {
        set->fd[i] = -1;
        set->status[i] = -EINVAL;
    }
    set->grouped = 0;
}

/* A group counts all its events over exactly the same interval, so try that
 * first; one unsupported event (cycles in most VMs) fails the whole group. */
static int open_group(struct perflab_counter_set *set, int pid, int cpu, uint32_t mask,
                      int inherit)
{
    struct perf_event_attr attr;
    int leader = -1;

    /* The kernel refuses inherit on grouped events that are read as a group
     * only; reading each fd on its own keeps inherit legal. */
    for (int i = 0; i < PERFLAB_NEVENTS; i++) {
        if (!(mask & (1u << i)))
            continue;
        fill_attr(&attr, i, leader < 0, inherit, 0);
        int fd = perf_open(&attr, pid, cpu, leader);
        if (fd < 0) {
            int err = -errno;
            perflab_counters_close(set);
            return err;
        }
        if (leader < 0)
            leader = fd;
        set->fd[i] = fd;
        set->status[i] = 0;
    }
    set->grouped = 1;
    return 0;
}

int perflab_counters_open(struct perflab_counter_set *set, int32_t pid, int32_t cpu,
                          uint32_t mask, int32_t inherit)
{
    struct perf_event_attr attr;
    int counting = 0, first_err = -EINVAL;

    reset(set);
    mask &= PERFLAB_EV_ALL;
    if (!mask)
        return -EINVAL;
    if (open_group(set, pid, cpu, mask, inherit) == 0)
        return __builtin_popcount(mask);
    for (int i = 0; i < PERFLAB_NEVENTS; i++) {
        if (!(mask & (1u << i)))
            continue;
        fill_attr(&attr, i, 1, inherit, 0);
        set->fd[i] = perf_open(&attr, pid, cpu, -1);
        if (set->fd[i] < 0 && errno == EACCES) { /* perf_event_paranoid >= 2 */
            fill_attr(&attr, i, 1, inherit, 1);
            set->fd[i] = perf_open(&attr, pid, cpu, -1);
        }
        if (set->fd[i] < 0) {
            set->status[i] = -errno;
            if (counting == 0)
                first_err = set->status[i];
        } else {
            set->status[i] = 0;
            counting++;
        }
    }
    return counting ? counting : first_err;
}

static int each(struct perflab_counter_set *set, unsigned long request)
{
    for (int i = 0; i < PERFLAB_NEVENTS; i++) {
        if (set->fd[i] < 0)
            continue;
        if (set->grouped) {
            if (ioctl(set->fd[i], request, PERF_IOC_FLAG_GROUP) != 0)
                return -errno;
            return 0;
        }
        if (ioctl(set->fd[i], request, 0) != 0)
            return -errno;
    }
    return 0;
}

int perflab_counters_enable(struct perflab_counter_set *set)
{
    int rc = each(set, PERF_EVENT_IOC_RESET);
    return rc ? rc : each(set, PERF_EVENT_IOC_ENABLE);
}

int perflab_counters_disable(struct perflab_counter_set *set)
{
    return each(set, PERF_EVENT_IOC_DISABLE);
}

/* A count read with TOTAL_TIME_ENABLED and _RUNNING, scaled for the time it was multiplexed
 * off the PMU; -ENODATA when it never ran there (unknown, not zero). */
static int64_t scaled(const uint64_t v[3])
{
    if (v[2] == 0)
        return -ENODATA;
    if (v[2] < v[1])
        return (int64_t)((double)v[0] * (double)v[1] / (double)v[2]);
    return (int64_t)v[0];
}

int perflab_counters_read(struct perflab_counter_set *set, int64_t counts[7])
{
    uint64_t v[3];

    for (int i = 0; i < PERFLAB_NEVENTS; i++) {
        counts[i] = set->status[i];
        if (set->fd[i] < 0)
            continue;
        if (read(set->fd[i], v, sizeof v) != (ssize_t)sizeof v)
            return -errno;
        counts[i] = scaled(v);
    }
    return 0;
}

void perflab_counters_close(struct perflab_counter_set *set)
{
    for (int i = 0; i < PERFLAB_NEVENTS; i++) {
        if (set->fd[i] >= 0)
            close(set->fd[i]);
        set->fd[i] = -1;
    }
}

_Static_assert(PERFLAB_PERF_TYPE_HARDWARE == PERF_TYPE_HARDWARE, "perf type numbers");
_Static_assert(PERFLAB_PERF_TYPE_RAW == PERF_TYPE_RAW, "perf type numbers");

/* A child's whole run, counted as perf stat counts a command: the events sit
 * disabled on the calling thread, inherited by every child it starts, and are
 * on only while perflab_exec_counters_run spawns, so the caller's own work
 * between runs is never counted. (enable_on_exec would leave the caller out
 * entirely, but an inherited copy stops being enabled after a few children.)
 * Events are opened one by one: one the PMU lacks fails alone. */
int perflab_exec_counters_open(int32_t n, const uint32_t *types, const uint64_t *configs,
                               int32_t *fds)
{
    struct perf_event_attr attr;
    int opened = 0;

    for (int32_t i = 0; i < n; i++) {
        memset(&attr, 0, sizeof attr);
        attr.size = sizeof attr;
        attr.type = types[i];
        attr.config = configs[i];
        attr.disabled = 1;
        attr.inherit = 1;
        attr.exclude_kernel = 1;
        attr.exclude_hv = 1;
        attr.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
        fds[i] = perf_open(&attr, 0, -1, -1);
        if (fds[i] < 0)
            fds[i] = -errno;
        else
            opened++;
    }
    return opened;
}

int perflab_exec_counters_read(int32_t n, const int32_t *fds, int64_t *counts)
{
    uint64_t v[3];

    for (int32_t i = 0; i < n; i++) {
        counts[i] = fds[i];
        if (fds[i] < 0)
            continue;
        if (read(fds[i], v, sizeof v) != (ssize_t)sizeof v)
            return -errno;
        counts[i] = v[1] == 0 ? 0 : scaled(v); /* 0: never enabled yet */
    }
    return 0;
}

static void switch_all(int32_t n, const int32_t *fds, unsigned long request)
{
    for (int32_t i = 0; i < n; i++)
        if (fds[i] >= 0)
            ioctl(fds[i], request, 0);
}

int perflab_exec_counters_run(int32_t n, const int32_t *fds, const void *req, size_t len,
                              const int stdio[3], int stop_fd, struct perflab_run *out,
                              int64_t *done, int64_t *counts)
{
    int rc;

    switch_all(n, fds, PERF_EVENT_IOC_ENABLE);
    rc = perflab_spawn_batch(req, len, stdio, stop_fd, out, done);
    switch_all(n, fds, PERF_EVENT_IOC_DISABLE);
    return rc ? rc : perflab_exec_counters_read(n, fds, counts);
}

void perflab_exec_counters_close(int32_t n, int32_t *fds)
{
    for (int32_t i = 0; i < n; i++) {
        if (fds[i] >= 0)
            close(fds[i]);
        fds[i] = -1;
    }
}
