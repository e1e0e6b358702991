/* Prints one time per iteration (ns of thread CPU time): the first 20 iterations do ten
   times the work of the rest, as a cache filled or a table built on first use would. */
#include <stdio.h>
#include <time.h>

static void work(long n) {
    volatile long s = 0;
    for (long i = 0; i < n; i++) s += i;
}

int main(void) {
    for (int it = 0; it < 200; it++) {
        struct timespec a, b;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
        work(it < 20 ? 2000000L : 200000L);
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
        printf("%lld\n", (b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec));
    }
    return 0;
}
