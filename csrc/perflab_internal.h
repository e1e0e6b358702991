/* Helpers shared by the core's C files.  Not part of the cdef: csrc/build.py hands cffi
 * perflab.h alone, so this header may include system headers and define functions. */
#ifndef PERFLAB_INTERNAL_H
#define PERFLAB_INTERNAL_H
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

/* Nanoseconds on one clock (CLOCK_MONOTONIC, a CPU-time clock...). */
static inline uint64_t perflab_now_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return perflab_ts_ns(&ts);
}
#endif
