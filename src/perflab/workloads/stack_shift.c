/* The shift engine's driver: linked with a built-in loop's object, the same object its exec'd
 * binary is linked from, it calls the loop's main again and again with main's frame where an
 * exec'd child's would be for each environment size.
 *
 * perflab links it with -Wl,--wrap=main, so that _start calls __wrap_main instead of main, and
 * with its one section (perflab_shift) at an address of its own below the loop's binary
 * (ADDRESS in running/shift.py): every symbol of that binary keeps its address, main its
 * bytes, and the heap its start (perflab checks the first two before it measures).  It is
 * compiled without unwind tables and uses no C library function, no static and no read-only
 * data, so that it adds nothing anywhere else: it makes its own system calls.
 *
 * Protocol on fd 3, a stream socket to perflab: perflab sends a setup (flags, and the ranges
 * of the loop's statics, which the driver saves now and puts back before every call, as a
 * fresh exec would give them), the driver answers a hello; then each batch is a header and
 * one frame address per point, and the driver answers one record per point as soon as it is
 * done.  main's probe reports on PERFLAB_PROBE_FD as in an exec'd run, to a socket whose
 * other end the driver holds: it reads the record back and passes it on, for perflab to check
 * as the spawner checks a child's.
 */
#include <stdint.h>
#include <sys/syscall.h>
/* the experiments measure this frame as the paper laid it out: no valgrind client request in it */
#define PERFLAB_PROBE_NO_VALGRIND
#include "perflab_probe.h"

#define SHIFT __attribute__((section("perflab_shift"), noinline))
#define SHIFT_MAGIC 0x54464853u /* "SHFT" */
#define SHIFT_VERSION 1
#define SHIFT_MLOCK 1u          /* setup flag: ask main's probe to mlockall before each point */
#define SHIFT_CTL 3             /* perflab's socket */
#define SHIFT_STACK (256 * 1024)
#define SHIFT_RANGES 16         /* statics saved and put back, at most */
#define SHIFT_SAVED 4096        /* their bytes, at most */
#define SHIFT_FRAMES 512        /* frames read from a batch at a time */
#define SHIFT_EINTR 4
#define SHIFT_MSG_DONTWAIT 0x40
#define SHIFT_MSG_TRUNC 0x20
#define SHIFT_MSG_NOSIGNAL 0x4000
#define SHIFT_PROBE_NONE 0      /* no record: main has no probe */
#define SHIFT_PROBE_OK 1        /* exactly one well-formed record */
#define SHIFT_PROBE_BAD 2       /* short, malformed or more than one */
#define SHIFT_COUNTERS 1u
#define SHIFT_MLOCKED 2u

int __real_main(void);

struct shift_setup {
    uint32_t magic, version, flags, nranges;
    uint64_t range[SHIFT_RANGES][2]; /* address, bytes */
};

struct shift_hello {
    uint32_t magic, version, record_bytes, error; /* error: why the setup was refused */
    uint64_t entry_frame; /* where main's frame would be for this exec: the driver's own */
};

struct shift_batch {
    uint32_t magic, points;
};

/* One point: what a spawned run's record holds that a call can measure. */
struct shift_record {
    uint32_t magic;
    int32_t exit_code;    /* main's return value */
    int32_t probe;        /* SHIFT_PROBE_*: main's probe record, checked as the spawner does */
    uint32_t probe_flags; /* SHIFT_COUNTERS, SHIFT_MLOCKED: what the record says */
    uint64_t probe_ticks, cycles, instructions;
    uint64_t outer_ticks; /* the call, stack switch included */
    int64_t wall_ns;      /* CLOCK_MONOTONIC over the same span */
    int64_t utime_ns, stime_ns, minflt, majflt, nvcsw, nivcsw; /* getrusage over the call */
    uint64_t frame; /* main's frame, seen in what its prologue pushed; 0: not there */
};

struct shift_rusage {
    int64_t utime_s, utime_us, stime_s, stime_us;
    int64_t maxrss, ixrss, idrss, isrss, minflt, majflt, nswap, inblock, oublock, msgsnd,
        msgrcv, nsignals, nvcsw, nivcsw;
};

struct shift_time {
    int64_t s, ns;
};

SHIFT static long shift_syscall(long n, long a, long b, long c, long d, long e, long f)
{
    long ret;
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;

    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return ret;
}

/* shift_call(sp, fn, seen): fn() on a stack whose top is sp (16-aligned), so that fn's frame
 * is sp - 16; *seen = 1 when what fn's prologue pushed there is this frame's rbp.  Returns
 * fn's value.  shift_enter(sp, fn, arg): fn(arg) on the stack at sp, never returning. */
__asm__(".pushsection perflab_shift,\"ax\",@progbits\n"
        ".type shift_call, @function\n"
        "shift_call:\n"
        "  push %rbp\n"
        "  mov %rsp, %rbp\n"
        "  push %rbx\n"
        "  push %r12\n"
        "  mov %rdi, %rbx\n"
        "  mov %rdx, %r12\n"
        "  mov %rdi, %rsp\n"
        "  call *%rsi\n"
        "  xor %ecx, %ecx\n"
        "  cmp -16(%rbx), %rbp\n"
        "  sete %cl\n"
        "  mov %ecx, (%r12)\n"
        "  lea -16(%rbp), %rsp\n"
        "  pop %r12\n"
        "  pop %rbx\n"
        "  pop %rbp\n"
        "  ret\n"
        ".size shift_call, .-shift_call\n"
        ".type shift_enter, @function\n"
        "shift_enter:\n"
        "  mov %rdi, %rsp\n"
        "  mov %rdx, %rdi\n"
        "  call *%rsi\n"
        "  ud2\n"
        ".size shift_enter, .-shift_enter\n"
        ".popsection\n");
int shift_call(char *sp, int (*fn)(void), int *seen);
void shift_enter(char *sp, void (*fn)(uint64_t), uint64_t arg);

/* perflab_ticks.h's reads again, here in the driver's section: its static inline copies, left
 * out of line at -O0, would land in .text and move the loop binary's addresses. */
SHIFT static uint64_t shift_ticks_begin(void)
{
    uint32_t lo, hi;

    __asm__ volatile("lfence; rdtsc" : "=a"(lo), "=d"(hi));
    return ((uint64_t)hi << 32) | lo;
}

SHIFT static uint64_t shift_ticks_end(void)
{
    uint32_t lo, hi, aux;

    __asm__ volatile("rdtscp; lfence" : "=a"(lo), "=d"(hi), "=c"(aux));
    (void)aux;
    return ((uint64_t)hi << 32) | lo;
}

SHIFT static int64_t shift_now_ns(void)
{
    struct shift_time t;

    shift_syscall(SYS_clock_gettime, 1 /* CLOCK_MONOTONIC */, (long)&t, 0, 0, 0, 0);
    return t.s * 1000000000 + t.ns;
}

SHIFT static void shift_exit(int code)
{
    for (;;)
        shift_syscall(SYS_exit_group, code, 0, 0, 0, 0, 0);
}

/* All of n bytes, or the end: perflab ended or closed the socket. */
SHIFT static void shift_read(void *buf, long n)
{
    for (long got = 0; got < n;) {
        long r = shift_syscall(SYS_read, SHIFT_CTL, (long)buf + got, n - got, 0, 0, 0);
        if (r == -SHIFT_EINTR)
            continue;
        if (r <= 0)
            shift_exit(0);
        got += r;
    }
}

SHIFT static void shift_write(const void *buf, long n)
{
    for (long put = 0; put < n;) {
        long r = shift_syscall(SYS_sendto, SHIFT_CTL, (long)buf + put, n - put,
                               SHIFT_MSG_NOSIGNAL, 0, 0);
        if (r == -SHIFT_EINTR)
            continue;
        if (r <= 0)
            shift_exit(0);
        put += r;
    }
}

/* Byte by byte through volatile pointers: the compiler may not make this a memcpy call. */
SHIFT static void shift_copy(volatile char *to, const volatile char *from, uint64_t n)
{
    for (uint64_t b = 0; b < n; b++)
        to[b] = from[b];
}

SHIFT static int64_t shift_tv_ns(int64_t s, int64_t us)
{
    return s * 1000000000 + us * 1000;
}

SHIFT static void shift_point(char *frame, uint32_t flags, int sv, struct shift_record *r)
{
    struct shift_rusage u0, u1;
    struct perflab_probe_record probe, extra;
    long got;
    uint32_t req = PERFLAB_PROBE_REQ_MLOCK;
    int seen = 0;
    int64_t w0;
    uint64_t t0;

    if (flags & SHIFT_MLOCK)
        shift_syscall(SYS_sendto, sv, (long)&req, sizeof req, SHIFT_MSG_NOSIGNAL, 0, 0);
    shift_syscall(SYS_getrusage, 0 /* RUSAGE_SELF */, (long)&u0, 0, 0, 0, 0);
    w0 = shift_now_ns();
    t0 = shift_ticks_begin();
    r->exit_code = shift_call(frame + 16, __real_main, &seen);
    r->outer_ticks = shift_ticks_end() - t0;
    r->wall_ns = shift_now_ns() - w0;
    shift_syscall(SYS_getrusage, 0, (long)&u1, 0, 0, 0, 0);
    r->magic = SHIFT_MAGIC;
    r->frame = seen ? (uint64_t)frame : 0;
    r->utime_ns = shift_tv_ns(u1.utime_s, u1.utime_us) - shift_tv_ns(u0.utime_s, u0.utime_us);
    r->stime_ns = shift_tv_ns(u1.stime_s, u1.stime_us) - shift_tv_ns(u0.stime_s, u0.stime_us);
    r->minflt = u1.minflt - u0.minflt;
    r->majflt = u1.majflt - u0.majflt;
    r->nvcsw = u1.nvcsw - u0.nvcsw;
    r->nivcsw = u1.nivcsw - u0.nivcsw;
    got = shift_syscall(SYS_recvfrom, sv, (long)&probe, sizeof probe,
                        SHIFT_MSG_DONTWAIT | SHIFT_MSG_TRUNC, 0, 0);
    r->probe = got <= 0 ? SHIFT_PROBE_NONE : SHIFT_PROBE_OK;
    if (got > 0 && (got != sizeof probe || probe.magic != PERFLAB_PROBE_MAGIC ||
                    probe.version != PERFLAB_PROBE_VERSION))
        r->probe = SHIFT_PROBE_BAD;
    while (shift_syscall(SYS_recvfrom, sv, (long)&extra, sizeof extra, SHIFT_MSG_DONTWAIT, 0,
                         0) >= 0)
        r->probe = SHIFT_PROBE_BAD;
    r->probe_flags = 0;
    r->probe_ticks = r->cycles = r->instructions = 0;
    if (r->probe == SHIFT_PROBE_OK) {
        r->probe_ticks = probe.ticks;
        if (probe.flags & PERFLAB_PROBE_COUNTERS) {
            r->probe_flags |= SHIFT_COUNTERS;
            r->cycles = probe.cycles;
            r->instructions = probe.instructions;
        }
        if (probe.flags & PERFLAB_PROBE_MLOCKED)
            r->probe_flags |= SHIFT_MLOCKED;
    }
    /* a request main's probe did not take must not reach the next point */
    while ((flags & SHIFT_MLOCK) && shift_syscall(SYS_recvfrom, PERFLAB_PROBE_FD, (long)&req,
                                                  sizeof req, SHIFT_MSG_DONTWAIT, 0, 0) >= 0)
        ;
}

SHIFT static void shift_serve(uint64_t entry_frame)
{
    struct shift_setup setup;
    struct shift_hello hello;
    struct shift_batch batch;
    struct shift_record rec;
    uint64_t frames[SHIFT_FRAMES], total = 0;
    char saved[SHIFT_SAVED];
    int sv[2];

    if (shift_syscall(SYS_socketpair, 1 /* AF_UNIX */, 5 /* SOCK_SEQPACKET */, 0, (long)sv, 0,
                      0) != 0 ||
        shift_syscall(SYS_dup2, sv[1], PERFLAB_PROBE_FD, 0, 0, 0, 0) != PERFLAB_PROBE_FD)
        shift_exit(126);
    shift_syscall(SYS_close, sv[1], 0, 0, 0, 0, 0);
    shift_read(&setup, sizeof setup);
    hello.magic = SHIFT_MAGIC;
    hello.version = SHIFT_VERSION;
    hello.record_bytes = sizeof rec;
    hello.error = setup.magic != SHIFT_MAGIC || setup.version != SHIFT_VERSION ||
                  setup.nranges > SHIFT_RANGES;
    for (uint32_t r = 0; !hello.error && r < setup.nranges; r++)
        hello.error = (total += setup.range[r][1]) > SHIFT_SAVED;
    hello.entry_frame = entry_frame;
    shift_write(&hello, sizeof hello);
    if (hello.error)
        shift_exit(125);
    total = 0;
    for (uint32_t r = 0; r < setup.nranges; total += setup.range[r++][1])
        shift_copy(saved + total, (char *)setup.range[r][0], setup.range[r][1]);
    for (;;) {
        shift_read(&batch, sizeof batch);
        if (batch.magic != SHIFT_MAGIC)
            shift_exit(125);
        for (uint32_t done = 0; done < batch.points;) {
            uint32_t n = batch.points - done < SHIFT_FRAMES ? batch.points - done : SHIFT_FRAMES;
            shift_read(frames, (long)n * 8);
            for (uint32_t p = 0; p < n; p++) {
                total = 0;
                for (uint32_t r = 0; r < setup.nranges; total += setup.range[r++][1])
                    shift_copy((char *)setup.range[r][0], saved + total, setup.range[r][1]);
                shift_point((char *)frames[p], setup.flags, sv[0], &rec);
                shift_write(&rec, sizeof rec);
            }
            done += n;
        }
    }
}

/* _start calls this instead of main (--wrap=main), at the depth main would be called. */
SHIFT int __wrap_main(void)
{
    char *stack = (char *)shift_syscall(SYS_mmap, 0, SHIFT_STACK, 3 /* PROT_READ|WRITE */,
                                        0x22 /* MAP_PRIVATE|MAP_ANONYMOUS */, -1, 0);

    if ((unsigned long)stack > -4096UL)
        shift_exit(126);
    shift_enter(stack + SHIFT_STACK, shift_serve, (uint64_t)__builtin_frame_address(0));
    return 0;
}
