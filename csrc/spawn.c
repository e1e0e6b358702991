/* Exact child runs: clone(CLONE_VM|CLONE_VFORK) + execve with exactly the argv
 * and envp given, per-child ASLR/affinity/priority, a timeout, wait4 rusage and
 * the probe record read back after exit.
 *
 * posix_spawn cannot set personality, so this is posix_spawn's own recipe
 * (glibc and musl both clone with CLONE_VM|CLONE_VFORK) with the extra steps in
 * the child.  The child shares our memory until execve: it only makes system
 * calls and stores errno values into the shared child_args, which is how an
 * exec failure reaches the parent without a pipe.
 *
 * Because of that sharing, Linux carries the parent's address-space high-water mark into
 * the child's rusage at execve: run from perflab, every child "peaks" at perflab's size.
 * So the same code is also linked into a tiny helper (spawner/main.c) that perflab starts
 * once and that spawns from its own small address space; in-process runs stay possible.
 * Each child gets its own process group, so what it leaves running can be killed.
 *
 * This file is the batch's entry (perflab_spawn_batch); the rest is in spawn_*.c, one concern
 * each, listed in spawn_internal.h.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "spawn_internal.h"

/* The spawning thread on the children's CPUs: each child starts where it will run (no
 * migration when it sets its affinity) and its exit wakes the thread there (no cross-CPU
 * wakeup), as in a shell loop under taskset; it sleeps while a child runs.  A thread that
 * samples /proc during each run waits off them instead, when others remain. */
static int place_enter(const struct batch *b, int sampling, cpu_set_t *saved)
{
    cpu_set_t set;

    if (b->hdr.ncpus == 0 || sched_getaffinity(0, sizeof *saved, saved) != 0)
        return 0;
    if (sampling) {
        set = *saved;
        for (int i = 0; i < b->hdr.ncpus; i++)
            if (b->cpus[i] < CPU_SETSIZE)
                CPU_CLR(b->cpus[i], &set);
    } else {
        CPU_ZERO(&set);
        for (int i = 0; i < b->hdr.ncpus; i++)
            if (b->cpus[i] < CPU_SETSIZE)
                CPU_SET(b->cpus[i], &set);
    }
    return CPU_COUNT(&set) > 0 && !CPU_EQUAL(&set, saved) &&
           sched_setaffinity(0, sizeof set, &set) == 0;
}

/* How many of fd's pages are in the page cache (0 for an empty file); -1 if unknown. */
static int64_t resident_pages(int fd, off_t size)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), n = ((size_t)size + page - 1) / page;
    unsigned char *vec = malloc(n ? n : 1);
    void *map = size > 0 ? mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0) : NULL;
    int64_t count = -1;

    if (vec && map != MAP_FAILED && (!map || mincore(map, (size_t)size, vec) == 0)) {
        count = 0;
        for (size_t i = 0; map && i < n; i++)
            count += vec[i] & 1;
    }
    if (map && map != MAP_FAILED)
        munmap(map, (size_t)size);
    free(vec);
    return count;
}

/* One program's file out of the page cache and back in (PERFLAB_SPAWN_SETTLE); 0 if every
 * page was dropped first, 1 if some stayed or the file could not be read. */
static int settle_file(const char *path)
{
    enum { CHUNK = 1 << 20 };
    int fd = open(path, O_RDONLY | O_CLOEXEC), kept = 1;
    char *buf = malloc(CHUNK);
    struct stat st;

    if (fd >= 0 && buf && fstat(fd, &st) == 0) {
        fdatasync(fd); /* dirty pages (a program just linked) are not dropped */
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        kept = resident_pages(fd, st.st_size) != 0;
        while (read(fd, buf, CHUNK) > 0)
            ;
    }
    free(buf);
    if (fd >= 0)
        close(fd);
    return kept;
}

/* The programs the batch runs, in the order it first runs them (a side drawn to go first in a
 * layout is read first there); those it does not run are left alone.  The result: per
 * program, 1 if read afresh, 2 if some of its pages stayed (NULL: out of memory). */
static unsigned char *settle_programs(const struct batch *b)
{
    unsigned char *state = calloc((size_t)b->hdr.nprogs, 1);

    for (int i = 0; state && i < b->hdr.nruns; i++)
        if (!state[b->prog[i]])
            state[b->prog[i]] = 1 + settle_file(b->argv[b->prog[i]][0]);
    return state;
}

/* PERFLAB_RUN_PAGES_KEPT on the first finished run of each program whose pages stayed. */
static void mark_kept(const unsigned char *state, const struct batch *b, struct perflab_run *out,
                      int64_t done)
{
    for (int p = 0; state && p < b->hdr.nprogs; p++)
        for (int64_t i = 0; state[p] == 2 && i < done; i++)
            if (out[i].prog == p) {
                out[i].flags |= PERFLAB_RUN_PAGES_KEPT;
                break;
            }
}

int perflab_spawn_batch(const void *req, size_t len, const int stdio[3], int stop_fd,
                        struct perflab_run *out, int64_t *done)
{
    struct batch b;
    struct spawn_ctx c;
    struct spawn_opts o;
    struct parent_rt_state saved;
    cpu_set_t before;
    int rc = batch_parse(req, len, &b), moved;
    unsigned char *settled = NULL;
    struct rest *rest;

    *done = 0;
    if (rc)
        return rc;
    if (b.hdr.flags & PERFLAB_SPAWN_SETTLE)
        settled = settle_programs(&b);
    if (b.hdr.flags & PERFLAB_SPAWN_PARALLEL) {
        rc = spawn_parallel(&b, stdio, stop_fd, out, done);
        mark_kept(settled, &b, out, *done);
        free(settled);
        batch_free(&b);
        return rc;
    }
    o = (struct spawn_opts){b.hdr.flags, b.hdr.ncpus, b.cpus, b.hdr.rt_policy, b.hdr.rt_priority,
                            b.hdr.timeout_ns, {stdio[0], stdio[1], stdio[2]}, b.hdr.iterations};
    rc = ctx_init(&c, &o);
    if (rc) {
        free(settled);
        batch_free(&b);
        return rc;
    }
    parent_rt_enter(&o, &saved);
    c.watch = c.runq ? NULL : watch_start(stop_fd, o.timeout_ns, o.rt_policy); /* before it moves */
    moved = place_enter(&b, runq_samples(c.runq), &before);
    c.parent_above = saved.above && shares_cpu(&c);
    rest = rest_of(&o);
    if (c.watch && c.parent_above) { /* at the children's priority, raised by the watcher */
        watch_boost(c.watch, o.rt_priority + 1);
        parent_step(&c, 0);
    }
    for (int i = 0; i < b.hdr.nruns && !stop_pending(stop_fd); i++) {
        int64_t size = b.sizes[i];
        char **argv = b.argv[b.prog[i]];
        memset(&out[i], 0, sizeof out[i]);
        out[i].env_size = size;
        out[i].prog = b.prog[i];
        b.envp[b.hdr.nenv] = size >= 0 ? b.pad : NULL;
        if (size >= 0)
            b.pad[b.prefix + size] = '\0';
        if (rest_before(rest, stop_fd))
            break;
        rc = run_one(&c, argv[0], b.dirs ? b.dirs[b.prog[i]] : NULL, argv + 1, b.envp, stop_fd,
                     &out[i]);
        rest_after(rest, &out[i]);
        if (reap_own_strays())
            out[i].flags |= PERFLAB_RUN_STRAYS;
        if (size >= 0)
            b.pad[b.prefix + size] = 'a';
        if (rc)
            break;
        /* after the record: a helper killed now leaves both in perflab's memfd */
        __atomic_store_n(done, (int64_t)i + 1, __ATOMIC_RELEASE);
    }
    watch_end(c.watch);
    parent_rt_leave(&saved);
    if (moved)
        sched_setaffinity(0, sizeof before, &before);
    mark_kept(settled, &b, out, *done);
    free(settled);
    ctx_free(&c);
    batch_free(&b);
    return 0;
}
