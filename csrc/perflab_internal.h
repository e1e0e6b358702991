/* Helpers shared by the core's C files.  Not part of the cdef: csrc/build.py hands cffi
 * perflab.h alone, so this header may include system headers and define functions. */
#ifndef PERFLAB_INTERNAL_H
#define PERFLAB_INTERNAL_H
#include <sched.h>
#include <stdint.h>
#include <sys/time.h>
#include <time.h>

static inline uint64_t perflab_ts_ns(const struct timespec *ts)
{
    return (uint64_t)ts->tv_sec * 1000000000u + (uint64_t)ts->tv_nsec;
}

static inline uint64_t perflab_tv_ns(const struct timeval *tv)
{
    return (uint64_t)tv->tv_sec * 1000000000u + (uint64_t)tv->tv_usec * 1000u;
}

/* A wait4 rusage into the seven usage fields that struct perflab_run and the supervisor's
 * reply (struct perflab_sup_reply) both carry under the same names. */
#define PERFLAB_COPY_RUSAGE(out, ru)                                                        \
    do {                                                                                    \
        (out)->utime_ns = (int64_t)perflab_tv_ns(&(ru)->ru_utime);                          \
        (out)->stime_ns = (int64_t)perflab_tv_ns(&(ru)->ru_stime);                          \
        (out)->maxrss_kb = (ru)->ru_maxrss;                                                 \
        (out)->minflt = (ru)->ru_minflt;                                                    \
        (out)->majflt = (ru)->ru_majflt;                                                    \
        (out)->nvcsw = (ru)->ru_nvcsw;                                                      \
        (out)->nivcsw = (ru)->ru_nivcsw;                                                    \
    } while (0)

/* Nanoseconds on one clock (CLOCK_MONOTONIC, a CPU-time clock...). */
static inline uint64_t perflab_now_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return perflab_ts_ns(&ts);
}

/* The calling thread's scheduling policy and priority, to put back after a real-time spell. */
struct perflab_saved_sched {
    int policy;
    struct sched_param param;
};

/* 0, or -1 when the scheduler would not say (nothing to restore then). */
static inline int perflab_sched_save(struct perflab_saved_sched *s)
{
    s->policy = sched_getscheduler(0);
    return s->policy < 0 || sched_getparam(0, &s->param) != 0 ? -1 : 0;
}

static inline void perflab_sched_restore(const struct perflab_saved_sched *s)
{
    sched_setscheduler(0, s->policy, &s->param);
}
#endif
