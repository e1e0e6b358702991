/* Rubini's moremem: memcpy time vs size, with other copy kernels beside libc's,
 * and the cost of the page faults that mlockall exists to avoid. */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "perflab.h"
#include "perflab_ticks.h"

typedef void *(*copy_fn)(void *, const void *, size_t);

/* Called through a volatile pointer so gcc can neither inline nor elide it. */
static void *(*volatile libc_memcpy)(void *, const void *, size_t) = memcpy;

static void *copy_libc(void *dst, const void *src, size_t n)
{
    return libc_memcpy(dst, src, n);
}

#if defined(__x86_64__) || defined(__i386__)
static void *copy_rep_movsb(void *dst, const void *src, size_t n)
{
    void *d = dst;
    __asm__ volatile("rep movsb" : "+D"(d), "+S"(src), "+c"(n) : : "memory");
    return dst;
}
#endif

/* The scheme of glibc's i586 memcpy.S that made Rubini's odd sizes dearer:
 * whole words first, then the remaining bytes one at a time. Without loop
 * distribution and vectorisation gcc keeps it a loop instead of calling memcpy. */
__attribute__((noinline, optimize("no-tree-loop-distribute-patterns", "no-tree-vectorize")))
static void *copy_loop(void *dst, const void *src, size_t n)
{
    unsigned char *d = dst;
    const unsigned char *s = src;
    for (; n >= sizeof(uint64_t); n -= sizeof(uint64_t)) {
        uint64_t w;
        __builtin_memcpy(&w, s, sizeof w);
        __builtin_memcpy(d, &w, sizeof w);
        d += sizeof w;
        s += sizeof w;
    }
    while (n--)
        *d++ = *s++;
    return dst;
}

static copy_fn kernel_fn(int kernel)
{
    switch (kernel) {
    case PERFLAB_COPY_LIBC:
        return copy_libc;
#if defined(__x86_64__) || defined(__i386__)
    case PERFLAB_COPY_REP_MOVSB:
        return copy_rep_movsb;
#endif
    case PERFLAB_COPY_LOOP:
        return copy_loop;
    default:
        return NULL;
    }
}

int perflab_copy_available(int kernel) { return kernel_fn(kernel) != NULL; }

int perflab_copy_once(int kernel, void *dst, const void *src, size_t n)
{
    copy_fn fn = kernel_fn(kernel);
    if (fn == NULL)
        return -EINVAL;
    fn(dst, src, n);
    return 0;
}

int perflab_lock_memory(int on)
{
    if (!on)
        return munlockall() == 0 ? 0 : -errno;
#ifdef MCL_ONFAULT
    /* Pages stay locked once touched, but what is only mapped is not faulted in:
     * an interpreter with numpy and pandas maps over a gigabyte it never touches. */
    if (mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT) == 0)
        return 0;
    if (errno != EINVAL)
        return -errno;
#endif
    return mlockall(MCL_CURRENT | MCL_FUTURE) == 0 ? 0 : -errno;
}

int perflab_buffers_alloc(size_t bytes, void **src, void **dst)
{
    if (bytes == 0)
        return -EINVAL;
    *src = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (*src == MAP_FAILED)
        return -errno;
    *dst = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (*dst == MAP_FAILED) {
        int err = errno;
        munmap(*src, bytes);
        return -err;
    }
    /* Distinct non-zero bytes: a fresh anonymous page maps the shared zero
     * page until written, and reading it would flatter the source side. */
    memset(*src, 0x5a, bytes);
    memset(*dst, 0xa5, bytes);
    return 0;
}

void perflab_buffers_free(void *src, void *dst, size_t bytes)
{
    munmap(src, bytes);
    munmap(dst, bytes);
}

/* Ticks of `copies` back-to-back copies, timer overhead subtracted. */
static int64_t time_copies(copy_fn fn, void *dst, const void *src, size_t n, uint64_t copies,
                           int64_t cost)
{
    uint64_t t0 = perflab_ticks_begin();
    for (uint64_t c = 0; c < copies; c++)
        fn(dst, src, n);
    uint64_t t1 = perflab_ticks_end();
    return (int64_t)(t1 - t0) - cost;
}

static int64_t min_of(copy_fn fn, void *dst, const void *src, size_t n, uint64_t copies,
                      unsigned trials, int64_t cost)
{
    int64_t best = INT64_MAX;
    for (unsigned j = 0; j < trials; j++) {
        int64_t t = time_copies(fn, dst, src, n, copies, cost);
        if (t < best)
            best = t;
    }
    return best;
}

int perflab_copy_sweep(int kernel, void *dst, const void *src, const uint64_t *sizes,
                       size_t n, unsigned trials, int64_t min_sample, uint64_t *copies,
                       int64_t *min_ticks)
{
    copy_fn fn = kernel_fn(kernel);
    int64_t cost = (int64_t)perflab_timer_overhead();

    if (fn == NULL || trials == 0)
        return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        size_t size = (size_t)sizes[i];
        uint64_t k = 1;
        int64_t best;
        /* Double until one sample spans min_sample (the probes warm the caches), then
         * again whenever the minimum of the trials falls short of it. */
        while (k < PERFLAB_MAX_REPEATS && time_copies(fn, dst, src, size, k, cost) < min_sample)
            k <<= 1;
        while ((best = min_of(fn, dst, src, size, k, trials, cost)) < min_sample &&
               k < PERFLAB_MAX_REPEATS)
            k <<= 1;
        copies[i] = k;
        min_ticks[i] = best;
    }
    return 0;
}

/* Ticks to write one byte into each page, `passes` times over. */
static int64_t touch(volatile unsigned char *p, size_t pages, size_t page, uint64_t passes,
                     int64_t cost)
{
    uint64_t t0 = perflab_ticks_begin();
    for (uint64_t k = 0; k < passes; k++)
        for (size_t i = 0; i < pages; i++)
            p[i * page] = 1;
    uint64_t t1 = perflab_ticks_end();
    return (int64_t)(t1 - t0) - cost;
}

/* Pages already mapped: as many passes (a power of two) as make one sample last
 * min_sample ticks; the earlier, shorter samples are the warm-up. */
static int64_t touch_mapped(volatile unsigned char *p, size_t pages, size_t page,
                            int64_t min_sample, int64_t cost, uint64_t *passes)
{
    int64_t t;
    *passes = 1;
    while ((t = touch(p, pages, page, *passes, cost)) < min_sample &&
           *passes < PERFLAB_MAX_REPEATS)
        *passes <<= 1;
    return t;
}

int perflab_touch_pages(size_t pages, int64_t min_sample, int64_t out[3], uint64_t passes[3])
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), len = pages * page;
    int64_t cost = (int64_t)perflab_timer_overhead();
    unsigned char *p;
    int rc = 0;

    if (pages == 0)
        return -EINVAL;
    p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return -errno;
    /* No huge pages: one fault per 4 KiB page is what is being measured. */
    madvise(p, len, MADV_NOHUGEPAGE);
    passes[PERFLAB_TOUCH_FIRST] = 1;
    out[PERFLAB_TOUCH_FIRST] = touch(p, pages, page, 1, cost);
    out[PERFLAB_TOUCH_AGAIN] =
        touch_mapped(p, pages, page, min_sample, cost, &passes[PERFLAB_TOUCH_AGAIN]);
    munmap(p, len);

    p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return -errno;
    madvise(p, len, MADV_NOHUGEPAGE);
    if (mlock(p, len) != 0)
        rc = -errno;
    else
        out[PERFLAB_TOUCH_LOCKED] =
            touch_mapped(p, pages, page, min_sample, cost, &passes[PERFLAB_TOUCH_LOCKED]);
    munmap(p, len);
    return rc;
}
