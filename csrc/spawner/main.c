/* perflab's spawner helper: a small process, freshly exec'd, that runs batches of child
 * runs for perflab so that no child's rusage carries perflab's own memory (see spawn.c).
 *
 * perflab passes one end of a stream socket as argv[1].  Each request is a packed
 * struct perflab_batch with the children's stdin/stdout/stderr attached (SCM_RIGHTS);
 * each answer is a struct perflab_batch_reply and the finished runs, in request order.
 * With a stop fd as argv[2] (the read end of a pipe perflab writes to), perflab may queue
 * the next requests while one runs: the stop fd turning readable, or its writer closing,
 * stops the batch in flight and every queued one until perflab drains it.  Without it, a
 * PERFLAB_STOP_BYTE on the socket stops the batch between runs (one arriving while idle
 * is skipped), and end of file (perflab closed the socket or died) stops the batch.
 * It is a child subreaper: what a run leaves outside its process group (a setsid daemon)
 * becomes its child, killed and reaped once no run is in flight (spawn_strays.c).
 *
 * The programs it runs may signal it (their parent, and its process group): every catchable
 * signal but its wake signal is blocked, so none ends it (the children start with an empty
 * mask; a blocked fault's signal still ends it, as the kernel forces it).  Blocked, not
 * ignored: the children's dispositions stay as inherited, nothing to reset per run.  SIGSTOP
 * its supervisor undoes, and SIGKILL perflab reports with the runs the batch had finished:
 * each batch's records are written into a memfd perflab sent with it (the fourth fd), its
 * count of finished runs first, updated as each run ends.
 *
 * `_spawner supervise ...` is the same binary as perflab's supervisor (supervise.c), the
 * parent of every process perflab starts, this helper included.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include "perflab.h"
#include "wire.h"

#define MAX_REQUEST (1ull << 30)

/* The first byte of a request and the fds sent with it; stop bytes before it skipped. */
static int read_start(int sock, unsigned char *first, int fds[4])
{
    union {
        char buf[CMSG_SPACE(4 * sizeof(int))];
        struct cmsghdr align;
    } u;

    for (;;) {
        struct iovec iov = {first, 1};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                           .msg_controllen = sizeof u.buf};
        ssize_t r = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);

        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
            c->cmsg_len == CMSG_LEN(4 * sizeof(int)))
            memcpy(fds, CMSG_DATA(c), 4 * sizeof(int));
        else if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
            for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++)
                close(((int *)CMSG_DATA(c))[i]); /* not perflab's: closed, the batch refused */
        if (*first != PERFLAB_STOP_BYTE)
            return 0;
    }
}

/* This process's own peak RSS (VmHWM): the floor under every child's maxrss. */
static int64_t own_peak_kb(void)
{
    char line[256];
    long long kb = -1;
    FILE *f = fopen("/proc/self/status", "re");

    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %lld kB", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

static int serve(int sock, int stop_fd)
{
    struct perflab_batch h;
    struct perflab_batch_reply reply = {.magic = PERFLAB_BATCH_MAGIC};
    int fds[4] = {-1, -1, -1, -1};
    uint64_t body;
    size_t shared;
    struct stat st;
    char *req, *kept;
    struct perflab_run *out;

    if (read_start(sock, (unsigned char *)&h, fds) || read_full(sock, (char *)&h + 1, sizeof h - 1))
        return -1;
    body = (uint64_t)h.ncpus * 4 + (uint64_t)h.nprogs * 4 + (uint64_t)h.nruns * 12 + h.strings_len;
    if (h.magic != PERFLAB_BATCH_MAGIC || h.ncpus < 0 || h.nprogs < 0 || h.nruns < 0 ||
        body > MAX_REQUEST)
        return -1; /* out of step with perflab: end, perflab sees the socket close */
    /* The records, and the count of finished ones before them, in perflab's memfd. */
    shared = PERFLAB_KEPT_HEAD + (size_t)(h.nruns ? h.nruns : 1) * sizeof *out;
    req = malloc(sizeof h + body);
    kept = fds[3] < 0 || fstat(fds[3], &st) != 0 || (uint64_t)st.st_size < shared
               ? MAP_FAILED /* a short one would fault (SIGBUS) past its end */
               : mmap(NULL, shared, PROT_READ | PROT_WRITE, MAP_SHARED, fds[3], 0);
    if (!req || kept == MAP_FAILED || read_full(sock, req + sizeof h, body)) {
        free(req);
        if (kept != MAP_FAILED)
            munmap(kept, shared);
        return -1; /* a batch without its memfd is out of step too */
    }
    out = (struct perflab_run *)(kept + PERFLAB_KEPT_HEAD);
    memcpy(req, &h, sizeof h);
    reply.floor_kb = own_peak_kb();
    reply.error = perflab_spawn_batch(req, sizeof h + body, fds, stop_fd, out, (int64_t *)kept);
    reply.done = *(int64_t *)kept;
    for (int i = 0; i < 4; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    free(req);
    if (write_full(sock, &reply, sizeof reply) ||
        write_full(sock, out, (size_t)reply.done * sizeof *out)) {
        munmap(kept, shared);
        return -1;
    }
    munmap(kept, shared);
    return 0;
}


int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "supervise") == 0)
        return supervise(atoi(argv[2]), (pid_t)atoi(argv[3]), argv[4]);
    int sock = argc == 2 || argc == 3 ? atoi(argv[1]) : -1;
    int stop_fd = argc == 3 ? atoi(argv[2]) : sock;
    int sndbuf = 8 << 20; /* replies queue up while perflab records earlier ones (capped) */
    sigset_t all;

    if (sock < 3 || stop_fd < 3) {
        fputs("perflab-spawner: started by perflab only\n", stderr);
        return 2;
    }
    sigfillset(&all);
    sigdelset(&all, SIGUSR1); /* the wake signal, below */
    sigprocmask(SIG_BLOCK, &all, NULL);
    signal(SIGPIPE, SIG_IGN);
    perflab_spawn_reaper(); /* refused: strays go to the supervisor above, killed at its end */
    perflab_spawn_wait_signal(SIGUSR1); /* refused: each child's pidfd is polled */
    setsockopt(sock, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    while (serve(sock, stop_fd) == 0)
        ;
    return 0;
}
