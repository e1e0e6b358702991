/* perflab's supervisor: the parent of every process perflab starts (profile's program, perf,
 * strace, a counted command, the spawner helper), so that none outlives perflab or its run.
 *
 * It is a child subreaper: a descendant whose parent dies (a setsid daemon, a double fork)
 * is re-parented to it, never to init.  It watches perflab through a pidfd and the request
 * socket, so it learns of perflab's end however perflab ends, SIGKILL included; then (and on
 * SIGTERM, SIGINT, SIGHUP) it kills every descendant, by its cgroup's cgroup.kill first where
 * it could make one, reaps them, removes its temporary directory and its cgroup, and exits.
 * Each process it starts has PR_SET_PDEATHSIG(SIGKILL) on it, for the one case it cannot
 * handle: its own SIGKILL.
 *
 * What it runs cannot stop it or end it, short of SIGKILL: a program may signal its parent
 * or its parent's process group (this one, or the spawner helper it started), and kill()
 * checks only uids, so under one uid (root above all, CAP_KILL) no process group, session or
 * credential keeps a signal out; a PID namespace would, but makes the program its init (other
 * signal rules) and costs every run its setup and teardown.  So every catchable signal is
 * read here (signalfd) and one sent by a process under this supervisor is dropped; SIGSTOP,
 * which none can catch, is undone: a child stopped by anyone (the helper a program stopped)
 * is resumed at once (SIGCHLD reports it), nothing here doing job control.  Children in
 * perflab's own process group (a counted command, as a shell runs it) are left to perflab,
 * which resumes them when it is not stopped itself (Ctrl-Z stops the group together).  A
 * stopped supervisor perflab resumes (system/supervisor.py); one killed, perflab reports.  It has no parent-death signal itself: that fires when the thread
 * that started it ends, and perflab may start it from a thread that ends long before perflab.
 * The protocol is in perflab.h (PERFLAB_SUP_*).
 *
 * A process it started stays a zombie, readable in /proc, until perflab asks for it (REAP);
 * the strays re-parented to it are reaped as they die, those behind a started one's zombie
 * (the kernel reports the first it finds) once perflab has reaped that one.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "perflab.h"
#include "perflab_internal.h"
#include "wire.h"

#define CHILD_STACK (64 * 1024)
#define MAX_BODY (64u << 20)
#define MAX_CPUS (1 << 16)
#define RMDIR_TRIES 200 /* an emptied cgroup is removable once its last task has fully exited */

struct sup {
    int sock;
    pid_t perflab, perflab_pgrp;
    int parent_fd;     /* perflab's pidfd, readable when it has ended (-1: kernel < 5.3) */
    int sig_fd;
    int cg_procs;      /* the cgroup's cgroup.procs, written "0" by each child (-1: none) */
    int cg_kill;
    int tmp_error, cg_error;
    char tmp[PATH_MAX];
    char cgroup[PATH_MAX];
    char *stack_top;
    pid_t *started;    /* what it started and perflab has not reaped */
    int nstarted, cap;
};

/* What one START hands its child, which runs on our memory until execve. */
struct start_args {
    const struct sup *s;
    const struct perflab_sup_request *h;
    const int *fds;
    cpu_set_t *cpus;
    size_t cpus_size;
    char *path[2];
    char **argv, **envp;
    volatile int err, stage;
};

/* Async-signal-safe only: we run on the supervisor's memory until execve. */
static int child_main(void *arg)
{
    struct start_args *a = arg;
    const struct perflab_sup_request *h = a->h;
    struct sigaction dfl;
    sigset_t none;
    int moved[PERFLAB_SUP_MAX_FDS];

    a->stage = PERFLAB_SUP_SETUP;
    if (h->flags & PERFLAB_SUP_SIGDEF) {
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        for (int sig = 1; sig < NSIG; sig++)
            if (sig != SIGKILL && sig != SIGSTOP)
                sigaction(sig, &dfl, NULL); /* the C library's own ones refuse: harmless */
    }
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
        goto fail;
    if ((h->flags & PERFLAB_SUP_NO_ASLR) &&
        personality((unsigned long)personality(0xffffffff) | ADDR_NO_RANDOMIZE) == -1)
        goto fail;
    if (a->s->cg_procs >= 0 && write(a->s->cg_procs, "0", 1) != 1)
        goto fail;
    if (setpgid(0, h->pid) != 0)
        goto fail;
    if (a->cpus && sched_setaffinity(0, a->cpus_size, a->cpus) != 0)
        goto fail;
    /* Out of the way of the targets first: fd i of the child is the i-th fd attached. */
    for (int i = 0; i < h->nfds; i++)
        if ((moved[i] = fcntl(a->fds[i], F_DUPFD, h->nfds)) < 0)
            goto fail;
    for (int i = 0; i < h->nfds; i++)
        if (dup2(moved[i], i) < 0)
            goto fail;
    syscall(SYS_close_range, (unsigned)h->nfds, ~0u, 0u);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    a->stage = PERFLAB_SUP_EXEC;
    execve(a->path[0], a->argv, a->envp);
fail:
    a->err = errno;
    _exit(127);
}

/* Point each of n pointers at the next NUL-terminated string of [*at, end). */
static int split(char **at, const char *end, char **out, int n)
{
    for (int i = 0; i < n; i++) {
        char *nul = *at < end ? memchr(*at, '\0', (size_t)(end - *at)) : NULL;
        if (!nul)
            return -1;
        out[i] = *at;
        *at = nul + 1;
    }
    out[n] = NULL;
    return 0;
}

static void start(struct sup *s, const struct perflab_sup_request *h, const int *fds,
                  char *body, struct perflab_sup_reply *r)
{
    char *strings = body + (size_t)h->ncpus * 4, *end = strings + h->strings_len;
    struct start_args a = {.s = s, .h = h, .fds = fds};
    const int32_t *cpus = (const int32_t *)body;
    pid_t pid;

    r->stage = PERFLAB_SUP_SETUP;
    a.argv = calloc((size_t)h->argc + 1, sizeof *a.argv);
    a.envp = calloc((size_t)h->envc + 1, sizeof *a.envp);
    if (!a.argv || !a.envp) {
        r->error = ENOMEM;
        goto out;
    }
    if (split(&strings, end, a.path, 1) || split(&strings, end, a.argv, h->argc) ||
        split(&strings, end, a.envp, h->envc) || strings != end) {
        r->error = EINVAL;
        goto out;
    }
    if (h->ncpus > 0) {
        int max = 0;
        for (int i = 0; i < h->ncpus; i++) {
            if (cpus[i] < 0 || cpus[i] >= MAX_CPUS) {
                r->error = EINVAL;
                goto out;
            }
            max = cpus[i] > max ? cpus[i] : max;
        }
        if (!(a.cpus = CPU_ALLOC(max + 1))) {
            r->error = ENOMEM;
            goto out;
        }
        a.cpus_size = CPU_ALLOC_SIZE(max + 1);
        CPU_ZERO_S(a.cpus_size, a.cpus);
        for (int i = 0; i < h->ncpus; i++)
            CPU_SET_S(cpus[i], a.cpus_size, a.cpus);
    }
    if (s->nstarted == s->cap) {
        int cap = s->cap ? 2 * s->cap : 16;
        pid_t *more = realloc(s->started, (size_t)cap * sizeof *more);
        if (!more) {
            r->error = ENOMEM;
            goto out;
        }
        s->started = more;
        s->cap = cap;
    }
    pid = clone(child_main, s->stack_top, CLONE_VM | CLONE_VFORK | SIGCHLD, &a);
    if (pid < 0) {
        r->error = errno;
    } else if (a.err) {
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
        r->error = a.err;
        r->stage = a.stage;
    } else {
        r->pid = pid;
        s->started[s->nstarted++] = pid;
    }
out:
    if (a.cpus)
        CPU_FREE(a.cpus);
    free(a.argv);
    free(a.envp);
}

static int started_at(const struct sup *s, pid_t pid)
{
    for (int i = 0; i < s->nstarted; i++)
        if (s->started[i] == pid)
            return i;
    return -1;
}

/* Reap the strays that have died, never a process perflab started (its zombie is its own). */
static void reap_dead_strays(const struct sup *s)
{
    siginfo_t si;

    for (;;) {
        memset(&si, 0, sizeof si);
        if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid == 0 ||
            started_at(s, si.si_pid) >= 0)
            return;
        while (waitpid(si.si_pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
}

static void reap(struct sup *s, const struct perflab_sup_request *h, struct perflab_sup_reply *r)
{
    int status, at = started_at(s, h->pid);
    struct rusage ru;
    pid_t p = -1;

    errno = ECHILD;
    while (at >= 0 && (p = wait4(h->pid, &status, WNOHANG, &ru)) < 0 && errno == EINTR)
        ;
    if (p <= 0) {
        r->error = p == 0 ? EAGAIN : errno;
        return;
    }
    s->started[at] = s->started[--s->nstarted];
    reap_dead_strays(s);
    r->pid = p;
    r->status = status;
    PERFLAB_COPY_RUSAGE(r, &ru);
}

/* One request and its reply; -1 when perflab is gone or out of step (the end). */
static int serve(struct sup *s)
{
    struct perflab_sup_request h;
    struct perflab_sup_reply r = {.magic = PERFLAB_SUP_MAGIC};
    union {
        char buf[CMSG_SPACE(PERFLAB_SUP_MAX_FDS * sizeof(int))];
        struct cmsghdr align;
    } u;
    struct iovec iov = {&h, sizeof h};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                       .msg_controllen = sizeof u.buf};
    int fds[PERFLAB_SUP_MAX_FDS], nfds = 0, rc = -1;
    struct cmsghdr *c;
    uint64_t body_len;
    char *body = NULL;
    ssize_t got;

    while ((got = recvmsg(s->sock, &m, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
        ;
    if (got <= 0)
        return -1;
    for (c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            int more = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            if (more > PERFLAB_SUP_MAX_FDS - nfds)
                more = PERFLAB_SUP_MAX_FDS - nfds;
            memcpy(fds + nfds, CMSG_DATA(c), (size_t)more * sizeof(int));
            nfds += more;
        }
    if (read_full(s->sock, (char *)&h + got, sizeof h - (size_t)got) || h.magic != PERFLAB_SUP_MAGIC)
        goto done;
    body_len = (uint64_t)(h.op == PERFLAB_SUP_START ? h.ncpus : 0) * 4 + h.strings_len;
    if (h.op == PERFLAB_SUP_START &&
        (h.nfds != nfds || h.ncpus < 0 || h.ncpus > MAX_CPUS || h.argc < 1 || h.envc < 0 ||
         h.argc > (1 << 20) || h.envc > (1 << 20)))
        goto done;
    if (body_len > MAX_BODY || !(body = malloc(body_len + 1)) || read_full(s->sock, body, body_len))
        goto done;
    if (h.op == PERFLAB_SUP_START)
        start(s, &h, fds, body, &r);
    else if (h.op == PERFLAB_SUP_REAP)
        reap(s, &h, &r);
    else
        goto done;
    rc = write_full(s->sock, &r, sizeof r);
done:
    for (int i = 0; i < nfds; i++) /* a pipe's write end must close here for its reader's EOF */
        close(fds[i]);
    free(body);
    return rc;
}

/* Whether pid is this process's descendant: its parents, read from /proc, lead here.  A
 * sender that is gone already (reaped) cannot be placed: it counts as from outside. */
static int below(pid_t pid)
{
    pid_t self = getpid();

    for (int depth = 0; pid > 1 && depth < 4096; depth++) {
        char path[64], buf[512], *end;
        int fd, ppid;
        ssize_t got;

        if (pid == self)
            return depth > 0;
        snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
        if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
            return 0;
        got = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (got <= 0)
            return 0;
        buf[got] = '\0';
        if (!(end = strrchr(buf, ')')) || sscanf(end + 1, " %*c %d", &ppid) != 1)
            return 0;
        pid = ppid;
    }
    return 0;
}

/* Whether a signal's default action ends a process (the ones this supervisor obeys). */
static int ends(int sig)
{
    return sig != SIGCHLD && sig != SIGCONT && sig != SIGURG && sig != SIGWINCH &&
           sig != SIGTSTP && sig != SIGTTIN && sig != SIGTTOU;
}

/* Every child stopped since the last look resumed, unless it is in perflab's process group. */
static void resume_stopped(const struct sup *s)
{
    siginfo_t si;

    for (;;) {
        memset(&si, 0, sizeof si);
        if (waitid(P_ALL, 0, &si, WSTOPPED | WNOHANG) != 0 || si.si_pid == 0)
            return;
        if (s->perflab_pgrp <= 0 || getpgid(si.si_pid) != s->perflab_pgrp)
            kill(si.si_pid, SIGCONT); /* a child, not reaped: its pid cannot be reused */
    }
}

/* The strays that died reaped, stopped children resumed; 1 on a signal that ends the
 * supervisor: one whose default action ends a process, from outside what it runs. */
static int on_signals(const struct sup *s)
{
    struct signalfd_siginfo si;
    int stop = 0;

    while (read(s->sig_fd, &si, sizeof si) == (ssize_t)sizeof si)
        if (ends((int)si.ssi_signo) && !below((pid_t)si.ssi_pid))
            stop = 1;
    resume_stopped(s);
    reap_dead_strays(s);
    return stop;
}

static int first_line(const char *path, char *buf, size_t size)
{
    FILE *f = fopen(path, "re");
    int ok = f && fgets(buf, (int)size, f);

    if (f)
        fclose(f);
    if (!ok)
        return -1;
    buf[strcspn(buf, "\n")] = '\0';
    return 0;
}

/* Where the cgroup v2 this process runs in is, as a directory: 0 or -errno. */
static int own_cgroup(char *dir, size_t size)
{
    char line[4096], root[PATH_MAX] = "", mnt[PATH_MAX] = "", own[PATH_MAX] = "";
    const char *rel;
    FILE *f = fopen("/proc/self/mountinfo", "re");

    if (!f)
        return -errno;
    while (!*mnt && fgets(line, sizeof line, f))
        if (strstr(line, " - cgroup2 ") && sscanf(line, "%*d %*d %*s %4095s %4095s", root, mnt) != 2)
            *mnt = '\0';
    fclose(f);
    if (!(f = fopen("/proc/self/cgroup", "re")))
        return -errno;
    while (!*own && fgets(line, sizeof line, f))
        if (strncmp(line, "0::", 3) == 0)
            snprintf(own, sizeof own, "%.*s", (int)strcspn(line + 3, "\n"), line + 3);
    fclose(f);
    if (!*mnt || *own != '/')
        return -ENOENT; /* no cgroup v2 mounted, or this process is not in it */
    rel = own;
    if (strcmp(root, "/") != 0) { /* a mount of a subtree: our path is below its root */
        size_t n = strlen(root);
        if (strncmp(own, root, n) != 0 || (own[n] != '/' && own[n] != '\0'))
            return -ENOENT;
        rel = own + n;
    }
    if ((size_t)snprintf(dir, size, "%s%s", mnt, strcmp(rel, "/") == 0 ? "" : rel) >= size)
        return -ENAMETOOLONG;
    return 0;
}

/* A cgroup v2 of the supervisor's own, under the one it runs in, that every child joins:
 * cgroup.kill then ends every process of the run at once, wherever it went in the tree, a
 * setuid one too.  Only where controllers would not govern it (its parent hands none down),
 * so that the run is scheduled as it would be without.  0, or why not (errno). */
static int cgroup_make(struct sup *s)
{
    char dir[PATH_MAX], path[PATH_MAX + 32], controllers[256] = "";
    int rc = own_cgroup(dir, sizeof dir), status;
    pid_t probe;

    if (rc)
        return -rc;
    snprintf(path, sizeof path, "%s/cgroup.subtree_control", dir);
    if (first_line(path, controllers, sizeof controllers) == 0 && controllers[0])
        return EBUSY;
    if ((size_t)snprintf(s->cgroup, sizeof s->cgroup, "%s/perflab-%d", dir, (int)getpid()) >=
        sizeof s->cgroup)
        return ENAMETOOLONG;
    if (mkdir(s->cgroup, 0755) != 0) {
        rc = errno;
        s->cgroup[0] = '\0';
        return rc;
    }
    snprintf(path, sizeof path, "%s/cgroup.kill", s->cgroup);
    s->cg_kill = open(path, O_WRONLY | O_CLOEXEC);
    rc = s->cg_kill < 0 ? ENOSYS : 0; /* cgroup.kill: Linux 5.14 */
    snprintf(path, sizeof path, "%s/cgroup.procs", s->cgroup);
    if (!rc && (s->cg_procs = open(path, O_WRONLY | O_CLOEXEC)) < 0)
        rc = errno;
    if (!rc) { /* moving a process needs more rights than making the directory: try one */
        probe = fork();
        if (probe == 0)
            _exit(write(s->cg_procs, "0", 1) == 1 ? 0 : errno & 0xff);
        if (probe < 0)
            rc = errno;
        while (probe > 0 && waitpid(probe, &status, 0) < 0 && errno == EINTR)
            ;
        if (probe > 0)
            rc = WIFEXITED(status) ? WEXITSTATUS(status) : EIO;
    }
    if (rc) {
        if (s->cg_kill >= 0)
            close(s->cg_kill);
        if (s->cg_procs >= 0)
            close(s->cg_procs);
        s->cg_kill = s->cg_procs = -1;
        rmdir(s->cgroup);
        s->cgroup[0] = '\0';
    }
    return rc;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if (flag == FTW_DP)
        rmdir(path);
    else
        unlink(path);
    return 0;
}

/* Everything left killed and reaped, then the cgroup and the directory removed. */
static void finish(struct sup *s)
{
    struct timespec nap = {0, 5000000};

    if (s->cg_kill >= 0)
        write(s->cg_kill, "1", 1);
    perflab_reap_strays();
    if (s->cgroup[0])
        for (int i = 0; i < RMDIR_TRIES && rmdir(s->cgroup) != 0 && errno == EBUSY; i++)
            nanosleep(&nap, NULL);
    if (s->tmp[0])
        nftw(s->tmp, remove_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

static int hello(struct sup *s)
{
    struct perflab_sup_reply r = {.magic = PERFLAB_SUP_MAGIC, .pid = getpid(),
                                  .error = s->tmp_error, .cgroup_error = s->cg_error};
    size_t a = strlen(s->tmp) + 1, b = strlen(s->cgroup) + 1;

    r.text_len = (uint32_t)(a + b);
    return write_full(s->sock, &r, sizeof r) || write_full(s->sock, s->tmp, a) ||
           write_full(s->sock, s->cgroup, b);
}

int supervise(int sock, pid_t perflab, const char *tmp_parent)
{
    struct sup s = {.sock = sock, .perflab = perflab, .parent_fd = -1, .sig_fd = -1,
                    .cg_procs = -1, .cg_kill = -1};
    sigset_t mask;
    void *stack;

    /* Every signal read, none acted on by default (see the top): an ignored one (nohup) stays
     * ignored; a fault's own signal, blocked, still ends the process as the kernel forces it. */
    sigfillset(&mask);
    sigdelset(&mask, SIGKILL);
    sigdelset(&mask, SIGSTOP);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    s.perflab_pgrp = getpgid(perflab);
    fcntl(sock, F_SETFD, FD_CLOEXEC);
    s.sig_fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    stack = mmap(NULL, CHILD_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (s.sig_fd < 0 || stack == MAP_FAILED || perflab_spawn_reaper() != 0) {
        perror("perflab-spawner supervise");
        return 1;
    }
    s.stack_top = (char *)stack + CHILD_STACK;
    s.parent_fd = (int)syscall(SYS_pidfd_open, perflab, 0);
    if (getppid() == perflab) { /* else perflab is gone already: nothing to start */
        if (tmp_parent[0]) {
            if ((size_t)snprintf(s.tmp, sizeof s.tmp, "%s/perflab-XXXXXX", tmp_parent) >= sizeof s.tmp)
                s.tmp_error = ENAMETOOLONG;
            else if (!mkdtemp(s.tmp))
                s.tmp_error = errno;
            if (s.tmp_error)
                s.tmp[0] = '\0';
        }
        s.cg_error = cgroup_make(&s);
        if (hello(&s) == 0 && !s.tmp_error)
            for (;;) {
                struct pollfd p[3] = {{.fd = sock, .events = POLLIN},
                                      {.fd = s.sig_fd, .events = POLLIN},
                                      {.fd = s.parent_fd, .events = POLLIN}};
                if (poll(p, s.parent_fd >= 0 ? 3 : 2, -1) < 0) {
                    if (errno == EINTR)
                        continue;
                    break;
                }
                if (s.parent_fd >= 0 && p[2].revents)
                    break;
                if (p[1].revents && on_signals(&s))
                    break;
                if (p[0].revents && serve(&s) != 0)
                    break;
            }
    }
    finish(&s);
    return 0;
}
