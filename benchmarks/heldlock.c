/* Blocked time known by construction: each round the main thread takes a write lock, waits
 * until all N waiters have announced they are about to read-lock it (so they block on it), holds
 * it for HOLD_US of clock_gettime-timed spinning and releases it, waking every waiter at once.
 * Between rounds the waiters and the holder wait by sched_yield (runnable, never asleep), so a
 * waiter sleeps only inside the read lock: its known blocked time is the sum over rounds of
 * (release - its announcement), printed per waiter as "TID NS" (and the rounds' hold total).
 *
 * usage: heldlock [WAITERS] [ROUNDS] [HOLD_US]   (defaults 3 100 5000)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static pthread_rwlock_t lock = PTHREAD_RWLOCK_INITIALIZER;
static atomic_long round_no, announced, passed;
static long rounds, waiters;
static long long released_ns; /* written under the write lock, read under the read lock */

struct waiter {
    pthread_t thread;
    pid_t tid;
    long long blocked_ns;
};

static long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void *wait_on_lock(void *arg)
{
    struct waiter *w = arg;
    w->tid = (pid_t)syscall(SYS_gettid);
    pthread_setname_np(pthread_self(), "waiter");
    for (long r = 1; r <= rounds; r++) {
        while (atomic_load(&round_no) < r)
            sched_yield();
        long long asked = now_ns();
        atomic_fetch_add(&announced, 1);
        pthread_rwlock_rdlock(&lock); /* the holder has it: a futex wait until its release */
        w->blocked_ns += released_ns - asked;
        pthread_rwlock_unlock(&lock);
        atomic_fetch_add(&passed, 1);
    }
    return 0;
}

int main(int argc, char **argv)
{
    waiters = argc > 1 ? atol(argv[1]) : 3;
    rounds = argc > 2 ? atol(argv[2]) : 100;
    long long hold_ns = (argc > 3 ? atoll(argv[3]) : 5000) * 1000;
    if (waiters < 1 || rounds < 1 || hold_ns < 0) {
        fprintf(stderr, "usage: heldlock [WAITERS>0] [ROUNDS>0] [HOLD_US>=0]\n");
        return 2;
    }
    struct waiter *w = calloc((size_t)waiters, sizeof *w);
    for (long i = 0; i < waiters; i++)
        pthread_create(&w[i].thread, 0, wait_on_lock, &w[i]);
    long long held = 0;
    for (long r = 1; r <= rounds; r++) {
        while (atomic_load(&passed) < waiters * (r - 1))
            sched_yield();
        pthread_rwlock_wrlock(&lock);
        atomic_store(&round_no, r);
        while (atomic_load(&announced) < waiters * r)
            sched_yield();
        long long start = now_ns(), t;
        while ((t = now_ns()) - start < hold_ns)
            ;
        held += t - start;
        released_ns = now_ns();
        pthread_rwlock_unlock(&lock);
    }
    for (long i = 0; i < waiters; i++)
        pthread_join(w[i].thread, 0);
    printf("held %lld\n", held);
    for (long i = 0; i < waiters; i++)
        printf("%d %lld\n", w[i].tid, w[i].blocked_ns);
    free(w);
    return 0;
}
