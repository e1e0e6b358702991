/* N worker threads share a fixed amount of work that must be done under one lock (easyperf's
 * multithreaded analysis, seed 003): with "mutex" the waiters sleep in futex, with "spin" they
 * spin on a shared atomic word. Either way the work is serial: more threads do not finish it
 * sooner, while "spin" keeps every thread busy (utilisation high, useful work flat).
 *
 * usage: contention mutex|spin THREADS ITERATIONS WORK
 * ITERATIONS critical sections in all, split over the threads; WORK steps of a random-number
 * recurrence in each (about 1 ns a step), on state the lock protects. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static atomic_int spin_word;
static unsigned long long shared_state = 1;
static long work;
static int spinning;

/* The useful work: only one thread at a time may advance the shared state. */
__attribute__((noinline)) static void shared_work(void)
{
    unsigned long long x = shared_state;
    for (long i = 0; i < work; i++)
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    shared_state = x;
}

/* Test and test-and-set: waiters read the word until it looks free, then try to take it. */
__attribute__((noinline)) static void spin_lock(void)
{
    for (;;) {
        if (!atomic_exchange_explicit(&spin_word, 1, memory_order_acquire))
            return;
        while (atomic_load_explicit(&spin_word, memory_order_relaxed))
            ;
    }
}

static void spin_unlock(void)
{
    atomic_store_explicit(&spin_word, 0, memory_order_release);
}

struct share {
    int index;
    long sections;
};

static void *worker(void *arg)
{
    const struct share *mine = arg;
    char name[24]; /* "worker-4095" fits the 16 bytes a thread name may have */
    snprintf(name, sizeof name, "worker-%d", mine->index);
    pthread_setname_np(pthread_self(), name); /* by itself: it may end before main could */
    for (long i = 0; i < mine->sections; i++) {
        if (spinning) {
            spin_lock();
            shared_work();
            spin_unlock();
        } else {
            pthread_mutex_lock(&mutex);
            shared_work();
            pthread_mutex_unlock(&mutex);
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 5 || (strcmp(argv[1], "mutex") && strcmp(argv[1], "spin"))) {
        fprintf(stderr, "usage: %s mutex|spin THREADS ITERATIONS WORK\n", argv[0]);
        return 2;
    }
    pthread_setname_np(pthread_self(), "contention"); /* not the cached binary's hashed name */
    spinning = !strcmp(argv[1], "spin");
    int threads = atoi(argv[2]);
    long iterations = atol(argv[3]);
    work = atol(argv[4]);
    if (threads < 1 || threads > 4096 || iterations < 0 || work < 0) {
        fprintf(stderr, "%s: THREADS must be 1..4096, ITERATIONS and WORK >= 0\n", argv[0]);
        return 2;
    }
    pthread_t *ids = calloc(threads, sizeof *ids);
    struct share *share = calloc(threads, sizeof *share);
    if (!ids || !share)
        return 1;
    for (int t = 0; t < threads; t++) {
        share[t].index = t;
        share[t].sections = iterations / threads + (t < iterations % threads);
        if (pthread_create(&ids[t], 0, worker, &share[t])) {
            fprintf(stderr, "%s: cannot create thread %d\n", argv[0], t);
            return 1;
        }
    }
    for (int t = 0; t < threads; t++)
        pthread_join(ids[t], 0);
    printf("%s: %d threads, %ld critical sections of %ld steps, state %llx\n", argv[1], threads,
           iterations, work, shared_state);
    free(ids);
    free(share);
    return 0;
}
