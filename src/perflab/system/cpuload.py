"""What each CPU is doing now: its busy share over a short window (/proc/stat) and the tasks
that used it then, with their scheduling policy (/proc/PID/task/TID/stat and schedstat).

Read before a measurement chooses its CPU: a real-time task busy on a CPU delays every run
pinned there, and /proc/stat alone cannot say who it is. Nothing here needs root: every
task's stat and schedstat are readable by all.
"""

import os
import time
from dataclasses import dataclass

from perflab.system import proctasks

# sched(7)'s policy numbers, as /proc/PID/stat field 41 gives them
POLICIES = {0: "SCHED_OTHER", 1: "SCHED_FIFO", 2: "SCHED_RR", 3: "SCHED_BATCH", 5: "SCHED_IDLE",
            6: "SCHED_DEADLINE"}  # fmt: skip
REALTIME = frozenset({1, 2, 6})
# /proc/stat's per-CPU fields: user nice system idle iowait irq softirq steal; busy is all but
# idle and iowait, steal included (the hypervisor ran someone else: time this CPU did not get)
_BUSY_FIELDS = (0, 1, 2, 5, 6, 7)
_ALL_FIELDS = 8
_PF_KTHREAD = 0x00200000  # stat field 9's flag of a kernel thread (include/linux/sched.h)


@dataclass(frozen=True)
class Task:
    """One thread that ran during the window: who, where it last ran, how, and how much."""

    pid: int
    tid: int
    comm: str
    cpu: int  # stat field 39: the CPU it last ran on
    policy: int  # stat field 41
    rt_priority: int  # stat field 40
    share: float  # of the window it spent on a CPU (schedstat's on-CPU ns)

    @property
    def realtime(self) -> bool:
        return self.policy in REALTIME

    def describe(self) -> str:
        """'pid 1234 (hog) SCHED_FIFO 50', the name escaped for a terminal."""
        policy = POLICIES.get(self.policy, f"policy {self.policy}")
        prio = f" {self.rt_priority}" if self.realtime else ""
        return f"pid {self.pid} ({self.comm.encode('unicode_escape').decode()}) {policy}{prio}"


@dataclass(frozen=True)
class Load:
    """One reading: per CPU its busy share of the window; the tasks that ran in it."""

    window_s: float
    busy: dict[int, float]
    tasks: tuple[Task, ...]
    step: float  # the busy shares' resolution: one /proc/stat step (USER_HZ) of the window


def cpu_times() -> dict[int, tuple[int, int]]:
    """Per CPU: (busy, total) /proc/stat steps since boot."""
    out = {}
    with open("/proc/stat") as f:
        for line in f:
            name, *fields = line.split()
            if not name.startswith("cpu"):
                break
            if name == "cpu":
                continue
            counts = [int(x) for x in fields[:_ALL_FIELDS]]
            busy = sum(counts[i] for i in _BUSY_FIELDS if i < len(counts))
            out[int(name[3:])] = (busy, sum(counts))
    return out


def steal_ns() -> int:
    """The ns the hypervisor has taken from this machine's CPUs since boot, summed over them
    (/proc/stat's steal, in clock ticks): a thread it stopped while running lost that time on
    CPU without the guest's kernel counting it as run or as waiting to run."""
    with open("/proc/stat") as f:
        fields = f.readline().split()
    steal = int(fields[8]) if fields[0] == "cpu" and len(fields) > 8 else 0
    return steal * 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def _on_cpu_ns() -> dict[tuple[int, int], int]:
    """Every thread's on-CPU time so far (schedstat's first field), by (pid, tid)."""
    out = {}
    for pid in proctasks.pids():
        for tid in proctasks.threads(pid):
            text = proctasks.read_small(f"/proc/{pid}/task/{tid}/schedstat")
            if text:
                out[(pid, tid)] = int(text.split()[0])
    return out


def _task(pid: int, tid: int, share: float) -> Task | None:
    """The thread's name, last CPU and policy now, None when it has exited."""
    text = proctasks.read_small(f"/proc/{pid}/task/{tid}/stat")
    if not text:
        return None
    comm, f = proctasks.stat_fields(text)
    # stat(5) field numbers less 3: f[0] is field 3 (state)
    return Task(pid, tid, comm, cpu=int(f[36]), rt_priority=int(f[37]), policy=int(f[38]),
                share=share)  # fmt: skip


def realtime_there(cpus: set[int]) -> bool:
    """Whether a user-space real-time thread last ran on one of `cpus`: one that spins there may
    look idle to a short window, held off by the kernel's throttle (50 ms of each second by
    default) or asleep for a moment (kernel threads such as migration/N, real-time everywhere and
    asleep, are left out)."""
    for pid in proctasks.pids():
        for tid in proctasks.threads(pid):
            text = proctasks.read_small(f"/proc/{pid}/task/{tid}/stat")
            if not text:
                continue
            _, f = proctasks.stat_fields(text)
            kernel = int(f[6]) & _PF_KTHREAD
            if not kernel and int(f[38]) in REALTIME and int(f[36]) in cpus:
                return True
    return False


def read(window_s: float = 0.1) -> Load:
    """Each CPU's busy share and the threads that ran over the next window_s seconds (perflab's
    own threads left out: they sleep here, and will not run beside the children)."""
    mine = os.getpid()
    times0, tasks0, t0 = cpu_times(), _on_cpu_ns(), time.monotonic()
    time.sleep(window_s)
    times1, tasks1, t1 = cpu_times(), _on_cpu_ns(), time.monotonic()
    busy = {}
    for cpu, (b1, all1) in times1.items():
        b0, all0 = times0.get(cpu, (b1, all1))
        busy[cpu] = (b1 - b0) / (all1 - all0) if all1 > all0 else 0.0
    span_ns = (t1 - t0) * 1e9
    ran = []
    for key, ns in tasks1.items():
        used = ns - tasks0.get(key, 0)  # a thread born in the window: all of it
        if used > 0 and key[0] != mine:
            task = _task(*key, used / span_ns)
            if task is not None:
                ran.append(task)
    step = 1 / (os.sysconf("SC_CLK_TCK") * (t1 - t0))
    return Load(t1 - t0, busy, tuple(sorted(ran, key=lambda t: -t.share)), step)
