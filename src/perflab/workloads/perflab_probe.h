/* perflab's child-side probe: bracket a region of interest, report it to perflab.
 *
 *     #include "perflab_probe.h"
 *     PERFLAB_PROBE_BEGIN();
 *     ... region ...
 *     PERFLAB_PROBE_END();
 *
 * or, to let perflab measure iterations within one process as a level of their own:
 *
 *     PERFLAB_PROBE_LOOP() {
 *         ... region ...
 *     }
 *
 * which runs the region as many times as perflab asks (once outside perflab, or where it asks
 * for one), each iteration timed and reported by a record of its own.
 *
 * The record goes to file descriptor PERFLAB_PROBE_FD, which perflab opens in
 * the child before execve.  Its number is fixed by convention, never passed in
 * the environment: the environment is what perflab studies.  When the fd is
 * not open (the program runs outside perflab) the probe does nothing.
 *
 * The fd is one end of an AF_UNIX SOCK_SEQPACKET pair, so the parent can also
 * leave a request there before the run: PERFLAB_PROBE_REQ_MLOCK asks the child
 * to mlockall(), since mlockall does not survive execve and only the child can
 * lock its own pages, and the request says how many iterations the loop runs.
 * BEGIN and LOOP read that request (outside the timed region).
 *
 * Cycles and instructions come from perf_event where the machine counts them;
 * otherwise the record's flags say they are unavailable.
 *
 * Where valgrind's headers are installed when the program is built, BEGIN and END (and each
 * iteration of LOOP) also toggle callgrind's collection, outside the timed region: perflab's
 * `--metric instructions-exact` then counts the region's instructions alone, without the
 * loader's start-up, which the environment's size moves.  Run natively, a toggle is a few
 * instructions that do nothing, though its arguments take a few words of the caller's stack
 * frame: define PERFLAB_PROBE_NO_VALGRIND before including this header to keep the frame as
 * it was (perflab's own workloads do: the experiments measure their frames).
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
#if defined(__has_include) && !defined(PERFLAB_PROBE_NO_VALGRIND)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define PERFLAB_PROBE_VG_TOGGLE_() CALLGRIND_TOGGLE_COLLECT
#endif
#endif
#ifndef PERFLAB_PROBE_VG_TOGGLE_
#define PERFLAB_PROBE_VG_TOGGLE_() ((void)0)
#endif

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
    uint32_t left; /* the repeat loop's iterations still to run */
    int timing;    /* an iteration of the loop is running (timed where active) */
    uint64_t t0;
};

/* What the parent may leave on the fd: a program built with an older header reads flags only
 * (SOCK_SEQPACKET drops the rest of the message). */
struct perflab_probe_request {
    uint32_t flags;      /* PERFLAB_PROBE_REQ_* */
    uint32_t iterations; /* the repeat loop's count (0: one) */
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

/* Once a process: the request (mlock, iterations) and the counters, all before any tick. */
static inline void perflab_probe_setup_(struct perflab_probe_state *s)
{
    struct perflab_probe_request req = {0, 0};

    s->active = fcntl(PERFLAB_PROBE_FD, F_GETFD) != -1;
    s->left = 1;
    if (!s->active)
        return;
    s->flags = 0;
    if (recv(PERFLAB_PROBE_FD, &req, sizeof req, MSG_DONTWAIT) >= (ssize_t)sizeof req.flags) {
        if (req.flags & PERFLAB_PROBE_REQ_MLOCK)
            s->flags |= mlockall(MCL_CURRENT | MCL_FUTURE) == 0 ? PERFLAB_PROBE_MLOCKED
                                                                 : PERFLAB_PROBE_MLOCK_FAILED;
        if (req.iterations > 1)
            s->left = req.iterations;
    }
    perflab_probe_open_counters_(s);
}

static inline void perflab_probe_start_(struct perflab_probe_state *s)
{
    if (s->fds[0] >= 0) {
        ioctl(s->fds[0], PERF_EVENT_IOC_RESET, PERF_IOC_FLAG_GROUP);
        ioctl(s->fds[0], PERF_EVENT_IOC_ENABLE, PERF_IOC_FLAG_GROUP);
    }
    s->t0 = perflab_ticks_begin();
}

/* t1 is read first: the record, the counters' reads and the send fall outside the region. */
static inline void perflab_probe_stop_(struct perflab_probe_state *s)
{
    uint64_t t1 = perflab_ticks_end();
    struct perflab_probe_record rec;
    uint64_t cycles, instructions;

    memset(&rec, 0, sizeof rec);
    rec.flags = s->flags;
    if (s->fds[0] >= 0) {
        ioctl(s->fds[0], PERF_EVENT_IOC_DISABLE, PERF_IOC_FLAG_GROUP);
        if (read(s->fds[0], &cycles, sizeof cycles) == (ssize_t)sizeof cycles &&
            read(s->fds[1], &instructions, sizeof instructions) == (ssize_t)sizeof instructions) {
            rec.cycles = cycles;
            rec.instructions = instructions;
            rec.flags |= PERFLAB_PROBE_COUNTERS;
        }
    }
    rec.magic = PERFLAB_PROBE_MAGIC;
    rec.version = PERFLAB_PROBE_VERSION;
    rec.ticks = t1 - s->t0;
    send(PERFLAB_PROBE_FD, &rec, sizeof rec, MSG_NOSIGNAL);
}

static inline void perflab_probe_close_(struct perflab_probe_state *s)
{
    if (s->fds[0] >= 0) {
        close(s->fds[0]);
        close(s->fds[1]);
    }
    s->active = 0;
}

/* Everything that costs (request, mlock, perf setup) happens before the first tick. */
static inline void perflab_probe_begin(void)
{
    perflab_probe_setup_(&perflab_probe_state_);
    PERFLAB_PROBE_VG_TOGGLE_();
    if (perflab_probe_state_.active)
        perflab_probe_start_(&perflab_probe_state_);
}

static inline void perflab_probe_end(void)
{
    struct perflab_probe_state *s = &perflab_probe_state_;

    if (s->active) {
        perflab_probe_stop_(s);
        perflab_probe_close_(s);
    }
    PERFLAB_PROBE_VG_TOGGLE_();
}

/* The repeat loop's step: end the iteration timed (its record sent), then start the next while
 * perflab asks for more; 0 when done.  Outside perflab the body runs once, untimed. */
static inline int perflab_probe_next_(void)
{
    struct perflab_probe_state *s = &perflab_probe_state_;

    if (s->timing) {
        if (s->active)
            perflab_probe_stop_(s);
        PERFLAB_PROBE_VG_TOGGLE_();
        s->timing = 0;
    }
    if (s->left == 0) {
        if (s->active)
            perflab_probe_close_(s);
        return 0;
    }
    s->left--;
    PERFLAB_PROBE_VG_TOGGLE_();
    s->timing = 1;
    if (s->active)
        perflab_probe_start_(s);
    return 1;
}

#define PERFLAB_PROBE_BEGIN() perflab_probe_begin()
#define PERFLAB_PROBE_END() perflab_probe_end()
#define PERFLAB_PROBE_LOOP() \
    for (perflab_probe_setup_(&perflab_probe_state_); perflab_probe_next_();)
#endif
