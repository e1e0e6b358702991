/* Slowdown: each iteration appends 400 entries to a history, then looks 16 keys up in it by
   linear search (none is there: every search reads it all). The history keeps the newest
   20,000 entries (160 KB, the oldest overwritten), so it grows for the first 50 iterations
   and holds its size after: each search is longer than the last until then, and the same
   from there on. Prints one time per iteration, ns of thread CPU time. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#define ITERATIONS 200
#define GROW 400
#define KEEP (50 * GROW)
#define LOOKUPS 16

static long history[KEEP];

static long long now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(void)
{
    long size = 0, head = 0, found = 0;
    memset(history, 0, sizeof history); /* its pages faulted in before the first iteration */
    for (int it = 0; it < ITERATIONS; it++) {
        long long start = now();
        for (long k = 0; k < GROW; k++) {
            history[head] = it * GROW + k;
            head = head + 1 == KEEP ? 0 : head + 1;
        }
        if (size < KEEP)
            size += GROW;
        for (long q = 0; q < LOOKUPS; q++) {
            long key = -1 - q;
            for (long k = 0; k < size; k++)
                found += history[k] == key;
            __asm__ volatile("" : "+r"(found));
        }
        printf("%lld\n", now() - start);
    }
    return found != 0;
}
