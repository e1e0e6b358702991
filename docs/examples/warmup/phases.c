/* No steady state: the work alternates between two sizes every 25 iterations, as a program
   whose input alternates between short and long records would, to the last iteration.
   Prints one time per iteration, ns of thread CPU time. */
#include <stdio.h>
#include <time.h>

#define ITERATIONS 200
#define PHASE 25

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
    for (int it = 0; it < ITERATIONS; it++) {
        long long start = now();
        chain(it / PHASE % 2 ? 300000 : 100000);
        printf("%lld\n", now() - start);
    }
    return 0;
}
