/* The helper's wait for a child without a pidfd: wait4 and sigtimedwait, woken by a watcher
 * thread at a stop or the run's deadline. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "spawn_internal.h"

/* ---- waiting without a pidfd: wait4 and sigtimedwait, and a watcher (the helper) ----
 *
 * A pidfd for each child, polled with the stop fd, cost 7 us of a 500 us run on an AMD Zen 5
 * guest (the pidfd's file, the ppoll, the close).  The helper's spawning thread keeps SIGCHLD
 * and wake_sig blocked through a batch instead, and waits for its child with wait4(WNOHANG)
 * and sigtimedwait until the deadline: a signal that comes early stays pending, so no
 * wake-up is lost, and a child that is already a zombie (the usual case: at its priority the
 * spawning thread runs once the child is done) costs one wait4.  A watcher thread sleeps on
 * the stop fd and until the deadline of the run in flight, and sends wake_sig at a stop or
 * the deadline; first it raises the spawning thread above the child where the batch may, so
 * that a real-time child spinning on the CPU they share cannot keep it from either.  The
 * spawning thread then decides, and kills its own child, which it has not reaped (its pid
 * cannot have been reused).  In-process runs, whose process owns its signals, keep the
 * pidfd. */

#define WATCH_REPEAT_NS 1000000LL

static int wake_sig;

struct watcher {
    pthread_t thread, spawner;
    int stop_fd, end[2];
    int64_t timeout_ns;
    int policy;
    atomic_int boost;      /* the spawning thread's priority at a stop or deadline; 0: none */
    atomic_int raised;     /* it was raised: it steps down before its next clone */
    atomic_llong deadline;
    sigset_t wake, saved;  /* what the spawning thread waits for; its mask before the batch */
};

static void on_wake(int sig)
{
    (void)sig;
}

int perflab_spawn_wait_signal(int sig)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_wake; /* one left pending after a batch must not end the helper */
    sigemptyset(&sa.sa_mask);
    if (sigaction(sig, &sa, NULL) != 0)
        return -errno;
    wake_sig = sig;
    return 0;
}

static void watch_wake(struct watcher *w)
{
    struct sched_param p = {.sched_priority = atomic_load(&w->boost)};

    if (p.sched_priority > 0 && pthread_setschedparam(w->spawner, w->policy, &p) == 0)
        atomic_store(&w->raised, 1); /* after the raise: the step down cannot precede it */
    pthread_kill(w->spawner, wake_sig);
}

static void *watch_main(void *arg)
{
    struct watcher *w = arg;
    struct pollfd p[2] = {{.fd = w->end[0], .events = POLLIN},
                          {.fd = w->stop_fd, .events = POLLIN}};

    for (;;) {
        int64_t d = atomic_load(&w->deadline), now = mono_ns(), until = WATCH_FOREVER;
        int in_flight = d != WATCH_IDLE, stop = stop_pending(w->stop_fd);

        if (in_flight && (stop || now >= d))
            watch_wake(w);
        if (stop || (in_flight && now >= d))
            until = now + WATCH_REPEAT_NS; /* until the run ends, or the batch does */
        else if (in_flight)
            until = d;
        else if (w->timeout_ns > 0)
            until = now + w->timeout_ns; /* no run that starts after now ends before */
        int64_t left = until - now;
        struct timespec ts = {left / 1000000000, left % 1000000000};
        int n = stop || w->stop_fd < 0 ? 1 : 2;
        if (ppoll(p, (nfds_t)n, until == WATCH_FOREVER ? NULL : &ts, NULL) > 0 && p[0].revents)
            return NULL;
    }
}

/* A watcher for one batch, at the calling thread's priority, signals blocked, and the calling
 * thread's SIGCHLD and wake_sig blocked until watch_end; 0 if the process has no wake_sig or
 * the thread cannot start (the pidfd is then polled). */
struct watcher *watch_start(int stop_fd, int64_t timeout_ns, int policy)
{
    struct watcher *w = wake_sig ? calloc(1, sizeof *w) : NULL;
    sigset_t all, old;

    if (!w)
        return NULL;
    *w = (struct watcher){.spawner = pthread_self(), .stop_fd = stop_fd, .timeout_ns = timeout_ns,
                          .policy = policy};
    atomic_init(&w->deadline, WATCH_IDLE);
    atomic_init(&w->boost, 0);
    atomic_init(&w->raised, 0);
    sigemptyset(&w->wake);
    sigaddset(&w->wake, SIGCHLD);
    sigaddset(&w->wake, wake_sig);
    if (pipe2(w->end, O_CLOEXEC) != 0) {
        free(w);
        return NULL;
    }
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int rc = pthread_create(&w->thread, NULL, watch_main, w);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        close(w->end[0]);
        close(w->end[1]);
        free(w);
        return NULL;
    }
    pthread_sigmask(SIG_BLOCK, &w->wake, &w->saved);
    return w;
}

/* The spawning thread's priority the watcher raises it to at a stop or a deadline. */
void watch_boost(struct watcher *w, int priority)
{
    atomic_store(&w->boost, priority);
}

/* Whether the watcher raised the spawning thread since the last call (it steps down then). */
int watch_raised(struct watcher *w)
{
    return atomic_exchange(&w->raised, 0);
}

/* The deadline of the run in flight (WATCH_IDLE: none). */
void watch_arm(struct watcher *w, int64_t deadline)
{
    atomic_store(&w->deadline, deadline);
}

void watch_end(struct watcher *w)
{
    if (!w)
        return;
    close(w->end[1]);
    pthread_join(w->thread, NULL);
    close(w->end[0]);
    pthread_sigmask(SIG_SETMASK, &w->saved, NULL);
    free(w);
}

/* Wait for the child, SIGKILLing it at the deadline or at a stop; returns why the wait
 * ended, having reaped the child. */
int wait_woken(struct watcher *w, pid_t pid, int64_t deadline, int stop_fd, int *status,
               struct rusage *ru)
{
    int why = WAIT_EXITED;

    for (;;) {
        pid_t r = wait4(pid, status, WNOHANG, ru);
        if (r == pid || (r < 0 && errno != EINTR))
            break;
        if (r < 0)
            continue;
        int64_t now = mono_ns();
        if (why == WAIT_EXITED && stop_pending(stop_fd))
            why = WAIT_STOPPED;
        else if (why == WAIT_EXITED && deadline != WATCH_FOREVER && now >= deadline)
            why = WAIT_TIMEOUT;
        if (why != WAIT_EXITED && kill(pid, SIGKILL) == 0)
            deadline = WATCH_FOREVER; /* now its end, however long the kill takes */
        int64_t left = deadline == WATCH_FOREVER ? -1 : deadline - now;
        struct timespec ts = {left / 1000000000, left % 1000000000};
        sigtimedwait(&w->wake, NULL, left >= 0 ? &ts : NULL);
    }
    atomic_store(&w->deadline, WATCH_IDLE);
    return why;
}
