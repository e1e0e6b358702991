/* perf_event counters: which events this machine can count, and counting them. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/perf_event.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "perflab.h"

static int perf_open(struct perf_event_attr *attr, pid_t pid, int cpu, int group)
{
    return (int)syscall(SYS_perf_event_open, attr, pid, cpu, group, 0);
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
