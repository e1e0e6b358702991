/* perflab's child-side probe: bracket a region of interest, report it to perflab.
 *
 *     #include "perflab_probe.h"
 *     PERFLAB_PROBE_BEGIN();
 *     ... region ...
 *     PERFLAB_PROBE_END();
 *
 * The record goes to file descriptor PERFLAB_PROBE_FD, which perflab opens in
 * the child before execve.  Its number is fixed by convention, never passed in
 * the environment: the environment is what perflab studies.  When the fd is
 * not open (the program runs outside perflab) the probe does nothing.
 *
 * The fd is one end of an AF_UNIX SOCK_SEQPACKET pair, so the parent can also
 * leave a request there before the run: PERFLAB_PROBE_REQ_MLOCK asks the child
 * to mlockall(), since mlockall does not survive execve and only the child can
 * lock its own pages.  BEGIN reads that request (outside the timed region).
 *
 * Cycles and instructions come from perf_event where the machine counts them;
 * otherwise the record's flags say they are unavailable.
 */
#ifndef PERFLAB_PROBE_H
#define PERFLAB_PROBE_H
#include <stdint.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <linux/perf_event.h>
#include "perflab_ticks.h"

#define PERFLAB_PROBE_FD 1021
#define PERFLAB_PROBE_MAGIC 0x50524c46u /* "FLRP" little-endian */
#define PERFLAB_PROBE_VERSION 1

/* Record flags. */
#define PERFLAB_PROBE_COUNTERS 1u     /* cycles and instructions are valid */
#define PERFLAB_PROBE_MLOCKED 2u      /* mlockall was requested and succeeded */
#define PERFLAB_PROBE_MLOCK_FAILED 4u /* mlockall was requested and refused */

/* Requests the parent may leave on the fd before the run. */
#define PERFLAB_PROBE_REQ_MLOCK 1u

struct perflab_probe_record {
    uint32_t magic;
    uint16_t version;
    uint16_t flags;
    uint64_t ticks;        /* end - begin, the timer's own cost not subtracted */
    uint64_t cycles;       /* user-mode core cycles, when COUNTERS */
    uint64_t instructions; /* user-mode instructions retired, when COUNTERS */
};

struct perflab_probe_state {
    int active;
    int fds[2];
    uint16_t flags;
    uint64_t t0;
};

static struct perflab_probe_state perflab_probe_state_;

static inline int perflab_probe_counter_(uint64_t config, int group)
{
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_HARDWARE;
    attr.config = config;
    attr.disabled = group < 0;
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    return (int)syscall(SYS_perf_event_open, &attr, 0, -1, group, 0);
}

static inline void perflab_probe_open_counters_(struct perflab_probe_state *s)
{
    s->fds[0] = perflab_probe_counter_(PERF_COUNT_HW_CPU_CYCLES, -1);
    s->fds[1] = s->fds[0] < 0 ? -1
                              : perflab_probe_counter_(PERF_COUNT_HW_INSTRUCTIONS, s->fds[0]);
    if (s->fds[1] < 0 && s->fds[0] >= 0) {
        close(s->fds[0]);
        s->fds[0] = -1;
    }
}

/* Everything that costs (request, mlock, perf setup) happens before the first tick. */
static inline void perflab_probe_begin(void)
{
    struct perflab_probe_state *s = &perflab_probe_state_;
    uint32_t req = 0;

    s->active = fcntl(PERFLAB_PROBE_FD, F_GETFD) != -1;
    if (!s->active)
        return;
    s->flags = 0;
    if (recv(PERFLAB_PROBE_FD, &req, sizeof req, MSG_DONTWAIT) == (ssize_t)sizeof req &&
        (req & PERFLAB_PROBE_REQ_MLOCK))
        s->flags |= mlockall(MCL_CURRENT | MCL_FUTURE) == 0 ? PERFLAB_PROBE_MLOCKED
                                                             : PERFLAB_PROBE_MLOCK_FAILED;
    perflab_probe_open_counters_(s);
    if (s->fds[0] >= 0) {
        ioctl(s->fds[0], PERF_EVENT_IOC_RESET, PERF_IOC_FLAG_GROUP);
        ioctl(s->fds[0], PERF_EVENT_IOC_ENABLE, PERF_IOC_FLAG_GROUP);
    }
    s->t0 = perflab_ticks_begin();
}

static inline void perflab_probe_end(void)
{
    uint64_t t1 = perflab_ticks_end();
    struct perflab_probe_state *s = &perflab_probe_state_;
    struct perflab_probe_record rec;
    uint64_t cycles, instructions;

    if (!s->active)
        return;
    memset(&rec, 0, sizeof rec);
    if (s->fds[0] >= 0) {
        ioctl(s->fds[0], PERF_EVENT_IOC_DISABLE, PERF_IOC_FLAG_GROUP);
        if (read(s->fds[0], &cycles, sizeof cycles) == (ssize_t)sizeof cycles &&
            read(s->fds[1], &instructions, sizeof instructions) == (ssize_t)sizeof instructions) {
            rec.cycles = cycles;
            rec.instructions = instructions;
            s->flags |= PERFLAB_PROBE_COUNTERS;
        }
        close(s->fds[0]);
        close(s->fds[1]);
    }
    rec.magic = PERFLAB_PROBE_MAGIC;
    rec.version = PERFLAB_PROBE_VERSION;
    rec.flags = s->flags;
    rec.ticks = t1 - s->t0;
    send(PERFLAB_PROBE_FD, &rec, sizeof rec, MSG_NOSIGNAL);
    s->active = 0;
}

#define PERFLAB_PROBE_BEGIN() perflab_probe_begin()
#define PERFLAB_PROBE_END() perflab_probe_end()
#endif
