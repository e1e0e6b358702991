/* Warm-up: each iteration writes one byte in every page of one 2 MiB chunk of a buffer, the
   chunks taken in turn, and runs a fixed chain of multiplies. The first pass over the 20
   chunks faults every page in (the kernel zeroes and maps it: kernel time, counted in the
   thread's CPU time); from iteration 20 on the pages are mapped and only the writes are left.
   Prints one time per iteration, ns of thread CPU time. */
#include <stdio.h>
#include <sys/mman.h>
#include <time.h>

#define ITERATIONS 200
#define CHUNKS 20
#define CHUNK (2L << 20)
#define PAGE 4096

static long long now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void chain(unsigned long n)
{
    unsigned long x = n;
    for (unsigned long i = 0; i < n; i++) {
        x = x * 6364136223846793005UL + 1442695040888963407UL;
        __asm__ volatile("" : "+r"(x));
    }
    __asm__ volatile("" : : "r"(x));
}

int main(void)
{
    char *buf = mmap(NULL, CHUNKS * CHUNK, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED)
        return 1;
    /* 4 KiB pages whatever the THP setting: one fault per page, the same on every machine */
    madvise(buf, CHUNKS * CHUNK, MADV_NOHUGEPAGE);
    for (int it = 0; it < ITERATIONS; it++) {
        long long start = now();
        char *chunk = buf + (it % CHUNKS) * CHUNK;
        for (long p = 0; p < CHUNK; p += PAGE)
            chunk[p]++;
        chain(100000);
        printf("%lld\n", now() - start);
    }
    return 0;
}
