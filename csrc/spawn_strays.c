/* What a run leaves running: its process group killed after each run, and, in a helper that
 * is a child subreaper, the strays outside it found through /proc, killed and reaped. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "spawn_internal.h"

/* Kill what the child left in its process group.  After the reap the group id stays
 * reserved for as long as a member lives, so this signal cannot reach anyone else. */
int kill_strays(pid_t pgid)
{
    return kill(-pgid, SIGKILL) == 0;
}

/* ---- strays outside the group: a helper that is a child subreaper ----
 *
 * A process whose parent dies is re-parented to its nearest ancestor that is a child
 * subreaper (else to init): a setsid daemon a run leaves behind becomes the helper's child.
 * With no run in flight, every child the helper has is such a stray: killed with its
 * descendants, and reaped, so none outlives the run that left it. */

#define STRAYS_FIRST_NS 100000LL
#define STRAYS_MAX_NS 10000000LL
#define STRAYS_GIVE_UP_NS 5000000000LL /* one that will not die (setuid, D state) is left */

static int reaper; /* this process is a child subreaper: perflab_spawn_reaper was called */

int perflab_spawn_reaper(void)
{
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
        return -errno;
    reaper = 1;
    return 0;
}

struct proc_link {
    pid_t pid, ppid;
};

static int by_pid(const void *a, const void *b)
{
    pid_t x = ((const struct proc_link *)a)->pid, y = ((const struct proc_link *)b)->pid;
    return (x > y) - (x < y);
}

/* Every process's parent, from /proc/PID/stat ("pid (comm) state ppid ..."; comm may hold
 * spaces and parentheses: the fields resume after the last ')'), sorted by pid. */
static struct proc_link *proc_links(size_t *n)
{
    struct proc_link *all = NULL, *more;
    size_t cap = 0;
    char path[64], buf[512];
    struct dirent *e;
    DIR *d = opendir("/proc");

    *n = 0;
    if (!d)
        return NULL;
    while ((e = readdir(d))) {
        char *rest, *end;
        long pid = strtol(e->d_name, &rest, 10);
        int fd, ppid;
        ssize_t got;
        if (pid <= 0 || *rest)
            continue;
        snprintf(path, sizeof path, "/proc/%ld/stat", pid);
        if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
            continue;
        got = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (got <= 0)
            continue;
        buf[got] = '\0';
        if (!(end = strrchr(buf, ')')) || sscanf(end + 1, " %*c %d", &ppid) != 1)
            continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 256;
            if (!(more = realloc(all, cap * sizeof *all)))
                break;
            all = more;
        }
        all[(*n)++] = (struct proc_link){(pid_t)pid, (pid_t)ppid};
    }
    closedir(d);
    if (all)
        qsort(all, *n, sizeof *all, by_pid);
    return all;
}

int perflab_kill_descendants(void)
{
    size_t n, i;
    struct proc_link *all = proc_links(&n), key, *parent;
    unsigned char *mine = all ? calloc(n ? n : 1, 1) : NULL;
    pid_t self = getpid();
    int changed = 1, killed = 0;

    if (!mine) {
        free(all);
        return -ENOMEM;
    }
    while (changed) { /* each pass reaches one generation further down */
        changed = 0;
        for (i = 0; i < n; i++) {
            if (mine[i])
                continue;
            key.pid = all[i].ppid;
            parent = all[i].ppid == self ? NULL : bsearch(&key, all, n, sizeof *all, by_pid);
            if (all[i].ppid == self || (parent && mine[parent - all])) {
                mine[i] = 1;
                changed = 1;
            }
        }
    }
    for (i = 0; i < n; i++)
        if (mine[i] && kill(all[i].pid, SIGKILL) == 0)
            killed++;
    free(mine);
    free(all);
    return killed;
}

int perflab_reap_strays(void)
{
    int64_t nap = STRAYS_FIRST_NS, waited = 0;
    int found = 0;

    for (;;) {
        pid_t p = waitpid(-1, NULL, __WALL | WNOHANG);
        if (p > 0 || (p < 0 && errno == EINTR)) {
            found = p > 0 ? 1 : found;
            continue;
        }
        if (p < 0 || waited >= STRAYS_GIVE_UP_NS) /* ECHILD: none left */
            return found;
        found = 1; /* children alive: they and theirs are killed, then reaped as they die */
        perflab_kill_descendants();
        struct timespec ts = {0, nap};
        nanosleep(&ts, NULL);
        waited += nap;
        nap = nap * 2 < STRAYS_MAX_NS ? nap * 2 : STRAYS_MAX_NS;
    }
}

/* After a run: this process's strays, when it is a child subreaper (else none, 0). */
int reap_own_strays(void)
{
    return reaper ? perflab_reap_strays() : 0;
}
