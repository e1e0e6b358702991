/* perflab's one taskstats client (generic netlink): the spawner's per-process query at a
 * child's exit (spawn_runq.c) and the profile's listener for every thread's exit record
 * (perflab_taskstats_* in perflab.h).  Internal: not part of the cdef. */
#ifndef PERFLAB_TASKSTATS_H
#define PERFLAB_TASKSTATS_H
#include <stdint.h>
#include <sys/types.h>
#include <linux/taskstats.h>

struct ts_client {
    int sock;
    uint16_t family;
    uint32_t seq;
};

/* A bound socket that knows the TASKSTATS family, replies awaited at most timeout_s; -errno. */
int ts_client_open(struct ts_client *c, int timeout_s);
void ts_client_close(struct ts_client *c);
/* The kernel's figures for one thread (TASKSTATS_CMD_ATTR_PID) or thread group (_TGID). */
int ts_client_query(struct ts_client *c, uint16_t attr, pid_t pid, struct taskstats *ts);
/* Register for every exit on the CPUs of `cpumask` ("0-3"); the kernel's ack or -errno. */
int ts_client_register(struct ts_client *c, const char *cpumask);
#endif
