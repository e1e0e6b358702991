"""The profiled run: the program started under a supervisor, its threads read from /proc every
jittered interval, their exit records taken, and one row per thread built from both."""

from __future__ import annotations

import contextlib
import os
import random
import select
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from perflab.core import bindings, constants
from perflab.core.lazy import pd
from perflab.errors import Interrupted, PerflabError
from perflab.lab.profile import ProfilePlan
from perflab.lab.profile import workload as reproduction
from perflab.plan import controls
from perflab.running import spawn
from perflab.store import results
from perflab.system import (
    blockcause,
    counters,
    cpuload,
    machine,
    perfsamples,
    proctasks,
    provenance,
    stracelog,
    supervisor,
    taskstats,
)

JITTER = 0.5  # each gap between readings is the interval times 1 +- up to this
SCAN_EVERY = 10  # readings between two scans of /proc for processes the program forked
BETWEEN = "(between readings)"
EXIT_SPREAD_NS = 1_000_000  # exit_group ends a process's threads within this of each other
DRAIN_MOST = 64  # exit records taken between two readings (the rest wait in the socket)
COLUMNS = [
    "pid", "tid", "comm", "start_ns", "last_ns", "lifetime_ns", "cpu_ns", "user_ns",
    "system_ns", "runq_ns", "cpu_pending_ns", "blocked_ns", *blockcause.COLUMNS, "cause_exact_ns",
    "cause_shared_ns", "asleep_readings", "utilisation", "vcsw", "ivcsw", "readings",
    "seen_once", "exited_early", "final", "source",
]  # fmt: skip
# What a profile reports as it samples: seconds elapsed, readings taken (a verb draws its bar)
OnSampled = Callable[[float, int], None]


class _Sampler:
    """The last reading of every thread seen, and the cumulative figures at each reading."""

    def __init__(self, root: int, boot0_ns: int, t0_ns: int, traced: bool = False):
        self.root, self.boot0_ns, self.t0_ns, self.traced = root, boot0_ns, t0_ns, traced
        self.pids: set[int] = {root}
        # Older processes (lower ids, already there at the spawn) are not the program's children.
        self.examined = {p for p in proctasks.pids() if p < root}
        self.last: dict[tuple[int, int], proctasks.Reading] = {}
        self.first_ns: dict[tuple[int, int], int] = {}
        self.last_ns: dict[tuple[int, int], int] = {}
        self.count: dict[tuple[int, int], int] = {}
        self.timeline: list[tuple[int, int, int, int, int, int, str | None]] = []
        self.n = self.now = 0
        self.running_ns = 0  # the last reading taken while the program still ran

    def sample(self, scan: bool = False) -> None:
        if scan or (self.traced and len(self.pids) < 2):  # strace's child is the program
            self.pids.update(proctasks.group_members(self.root, self.examined))
        now = self.now = time.monotonic_ns() - self.t0_ns
        for pid in list(self.pids):
            for tid in proctasks.threads(pid):
                # this thread's own time in the timeline: perflab may be preempted mid-sweep
                at = time.monotonic_ns() - self.t0_ns
                r = proctasks.read(pid, tid)
                if r is None or (r.pgrp != self.root and pid != self.root):
                    continue
                key = (pid, tid)
                self.last[key] = r
                self.first_ns.setdefault(key, now)
                self.last_ns[key] = now
                self.count[key] = self.count.get(key, 0) + 1
                cause = blockcause.classify(r.state, r.syscall)
                self.timeline.append((at, pid, tid, r.cpu_ns, r.runq_ns, r.vcsw, cause))
        self.n += 1

    def tracer_pids(self, records: Sequence[taskstats.Record] = ()) -> set[int]:
        """strace and what it forked before the program's exec (named strace): not the program."""
        if not self.traced:
            return set()
        named = [(p, t, r.comm) for (p, t), r in self.last.items()]
        named += [(x.tgid, x.tid, x.comm) for x in records]
        return {self.root} | {p for p, t, comm in named if p == t and comm == "strace"}

    def start_ns(self, r: proctasks.Reading) -> int:
        """Start relative to the spawn: stat's start time has clock-tick resolution."""
        return r.start_ticks * proctasks.TICK_NS - self.boot0_ns


def _wait(
    child: supervisor.Child,
    sampler: _Sampler,
    interval: float,
    timeout: float | None,
    progress: OnSampled | None,
    listener: taskstats.Listener | None,
    interrupted: int | None,
) -> tuple[bool, int | None, int]:
    """Read the threads every interval, and exit records as they come, until the program ends
    (or is killed at the timeout, or at Ctrl-C or SIGTERM: its own process group did not get
    it): (timed out, the signal that interrupted perflab, wall ns from spawn to exit).
    `interrupted`: a signal that came as the program started; it is killed at once."""
    pidfd = child.pidfd
    fds: list[Any] = [pidfd, listener] if listener else [pidfd]
    timed_out, due = False, 0
    if interrupted:
        child.kill_group()
    while True:
        try:
            now = time.monotonic_ns() - sampler.t0_ns
            if now >= due:
                sampler.sample(scan=sampler.n % SCAN_EVERY == 1)
                # jittered: readings at a fixed period alias with a program's own period
                # (a lock held 5 ms a round, read every 10 ms, was seen awake each time)
                step = interval * 1e9 * random.uniform(1 - JITTER, 1 + JITTER)
                sampler.running_ns, due = sampler.now, now + round(step)
                if progress:
                    progress(now / 1e9, len(sampler.last_ns))
            ready = select.select(fds, [], [], max(due - now, 0) / 1e9)[0]
            if listener is not None and listener in ready:
                listener.drain(most=DRAIN_MOST)
            if pidfd in ready:
                break
            if timeout is not None and now > timeout * 1e9 and not timed_out:
                timed_out = True
                child.kill_group()
        except KeyboardInterrupt as exc:
            interrupted = interrupted or int(getattr(exc, "signum", signal.SIGINT))
            child.kill_group()  # then read it as it ends, as at a timeout
    wall = time.monotonic_ns() - sampler.t0_ns
    sampler.sample()  # the leader is a zombie until it is reaped: its figures are final now
    if listener:
        listener.drain()  # every thread's record was queued before the pidfd turned readable
    return timed_out, interrupted, wall


def _thread_rows(
    sampler: _Sampler,
    wall_ns: int,
    exclude: set[int],
    records: Sequence[taskstats.Record] = (),
    *,
    interval_ns: float,
) -> list[dict[str, Any]]:
    """One row per thread read or reported at exit; an exit record's figures are final and
    replace a reading's (tick-sampled user/system time only splits the on-CPU ns)."""
    exits = {(x.tgid, x.tid): x for x in records}
    # A thread exited early if its process was seen running after it: by a later reading, or
    # by exit records more than EXIT_SPREAD_NS later (exit_group ends the rest all at once).
    seen_after: dict[int, int] = {}
    for (pid, _), t in sampler.last_ns.items():
        if t <= sampler.running_ns:
            seen_after[pid] = max(seen_after.get(pid, 0), t)
    for x in records:
        end = x.exit_ns - sampler.t0_ns - EXIT_SPREAD_NS
        seen_after[x.tgid] = max(seen_after.get(x.tgid, 0), end)
    points: dict[tuple[int, int], list] = {}
    for t, pid, tid, *figures in sampler.timeline:
        points.setdefault((pid, tid), []).append((t, *figures))
    rows = []
    for key in {*sampler.last, *exits}:
        if key[0] in exclude:
            continue
        reading, record = sampler.last.get(key), exits.get(key)
        row = _from_reading(sampler, key, reading, wall_ns) if reading else {}
        if record:
            row |= _from_record(sampler, record, row)
        row["exited_early"] = row["last_ns"] < seen_after.get(key[0], 0)
        row["lifetime_ns"] = lifetime = max(row["last_ns"] - row["start_ns"], 0)
        row["seen_once"] = row["readings"] == 1 and row["source"] == "readings"
        seen = [p for p in points.get(key, []) if p[0] <= row["last_ns"] or not row["final"]]
        cut = life_intervals(seen, row)
        rest = max(lifetime - row["cpu_ns"] - row["runq_ns"], 0)
        row["cpu_pending_ns"] = min(float(cut.pending.sum()), rest)
        row["blocked_ns"] = rest - row["cpu_pending_ns"]
        row["utilisation"] = _utilisation(row, interval_ns)
        row |= _causes(seen, cut, row)
        share = row.pop("user_share")
        row["user_ns"], row["system_ns"] = row["cpu_ns"] * share, row["cpu_ns"] * (1 - share)
        rows.append(row)
    rows.sort(key=lambda x: (x["pid"] != sampler.root, x["pid"], x["start_ns"], x["tid"]))
    return rows


def _utilisation(row: dict[str, Any], interval_ns: float) -> float:
    """CPU over lifetime, NaN where the lifetime is not known well enough to divide by: a
    thread seen in one reading only (it began at a clock tick of /proc's start time and ended
    somewhere before the next reading), or one that lived less than a reading interval (the
    start time's tick is as long as the life)."""
    if row["seen_once"] or row["lifetime_ns"] < interval_ns:
        return np.nan
    return float(row["cpu_ns"] / row["lifetime_ns"])


def life_intervals(points: list, row: dict[str, Any]) -> blockcause.Intervals:
    """The row's life cut at its readings (not the zombie's: its figures are the row's end)."""
    end = (row["last_ns"], row["cpu_ns"], row["runq_ns"], row["vcsw"] if row["final"] else None)
    return blockcause.intervals(points, row["start_ns"], end)


def _causes(seen: list, cut: blockcause.Intervals, row: dict[str, Any]) -> dict[str, Any]:
    """The row's blocked ns by the call it slept in, as the readings saw it (blockcause)."""
    shares, exact = blockcause.share(cut.blocked, cut.ends, cut.unbroken)
    counts = Counter(p[-1] for p in seen if p[-1] not in (None, "unseen"))
    by_cause, exact_ns, shared_ns = blockcause.scale(shares, exact, row["blocked_ns"], counts)
    out: dict[str, Any] = dict(zip(blockcause.COLUMNS, by_cause.tolist(), strict=True))
    out["cause_exact_ns"], out["cause_shared_ns"] = exact_ns, shared_ns
    out["asleep_readings"] = sum(counts.values())
    return out


def _from_reading(
    sampler: _Sampler, key: tuple[int, int], r: proctasks.Reading, wall_ns: int
) -> dict[str, Any]:
    final = sampler.last_ns[key] > sampler.running_ns  # read after the program ended
    ticks = r.utime_ticks + r.stime_ticks
    return {
        "pid": r.pid,
        "tid": r.tid,
        "comm": r.comm,
        "start_ns": min(max(sampler.start_ns(r), 0), sampler.first_ns[key]),
        "last_ns": wall_ns if final else sampler.last_ns[key],
        "cpu_ns": r.cpu_ns,
        "user_share": r.utime_ticks / ticks if ticks else np.nan,
        "runq_ns": r.runq_ns,
        "vcsw": r.vcsw,
        "ivcsw": r.ivcsw,
        "readings": sampler.count[key],
        "final": final,
        "source": "readings",
    }


def _from_record(sampler: _Sampler, x: taskstats.Record, read: dict[str, Any]) -> dict[str, Any]:
    last = x.exit_ns - sampler.t0_ns
    ticks = x.utime_us + x.stime_us
    return {
        "pid": x.tgid,
        "tid": x.tid,
        "comm": x.comm or read.get("comm", ""),  # its name at exit: renamed after a reading
        "start_ns": last - x.etime_us * 1000,
        "last_ns": last,
        # on-CPU ns only grows: the record's is final, a reading's stands if the record has none
        "cpu_ns": max(x.cpu_ns, read.get("cpu_ns", 0)) or ticks * 1000,
        "user_share": x.utime_us / ticks if ticks else read.get("user_share", np.nan),
        # run delay only grows: a record without delay accounting cannot undercut a reading
        "runq_ns": max(x.cpu_delay_ns, read.get("runq_ns", 0)),
        "vcsw": x.vcsw,
        "ivcsw": x.ivcsw,
        "readings": read.get("readings", 0),
        "final": True,
        "source": "exit record" if not read else "readings + exit record",
    }


def _remainder(rows: list[dict[str, Any]], ru: Any, root: int, tracer: list[dict]) -> dict:
    """What wait4 counted that no reading saw: threads born and gone between two readings, and
    the tails of threads after their last reading."""
    total_cpu = round((ru.ru_utime + ru.ru_stime) * 1e9)
    seen = sum(r["cpu_ns"] for r in rows + tracer)
    seen_v = sum(r["vcsw"] for r in rows + tracer)
    seen_iv = sum(r["ivcsw"] for r in rows + tracer)
    return {
        "pid": root,
        "tid": -1,
        "comm": BETWEEN,
        "cpu_ns": max(total_cpu - seen, 0),
        "vcsw": max(ru.ru_nvcsw - seen_v, 0),
        "ivcsw": max(ru.ru_nivcsw - seen_iv, 0),
        "readings": 0,
        "exited_early": True,
        "final": True,
        "source": "wait4 less the rows above",
    }


def _timeline(sampler: _Sampler, exclude: set[int]) -> dict[str, list[Any]]:
    keep = [t for t in sampler.timeline if t[1] not in exclude]
    names = ("t_ns", "pid", "tid", "cpu_ns", "runq_ns", "vcsw", "cause")
    return {name: [t[i] for t in keep] for i, name in enumerate(names)}


def _perf_note() -> str:
    """Per-thread perf counters are not collected; say whether they could be here."""
    return (
        f"not collected (cycles: {counters.reason(bindings.perf_probe(0, 0))}; "
        f"task-clock: {counters.reason(bindings.perf_probe(1, 0))})"
    )


@controls.typed_arguments
def run(
    command: Sequence[str] = ProfilePlan.command,
    interval: float = ProfilePlan.interval,
    cpus: Sequence[int] | None = ProfilePlan.cpus,
    timeout: float | None = ProfilePlan.timeout,
    strace: bool = ProfilePlan.strace,
    env: Mapping[str, str] | None = None,
    stdout: int | None = None,
    stderr: int | None = None,
    progress: OnSampled | None = None,
    exit_records: bool = ProfilePlan.exit_records,
    sample_hz: int | None = ProfilePlan.sample_hz,
    samples: bool = ProfilePlan.samples,
    workload: str | None = ProfilePlan.workload,
    threads: int | None = ProfilePlan.threads,
) -> pd.DataFrame:
    """Profile one run of command, or of the built-in contention workload (`threads` workers,
    default the usable CPUs, at least 2): one row per thread it ever had (and a "(between
    readings)" row for what no reading saw), with the program's totals, syscalls and timeline
    in metadata.

    env None inherits perflab's environment; stdout and stderr fds for the program's streams
    (None: ours);
    exit_records: also take taskstats exit records where the kernel allows (CAP_NET_ADMIN);
    sample_hz: also sample each thread's CPU by symbol with perf record (perfsamples), at
    SAMPLE_HZ when only `samples` asks for it.
    """
    ProfilePlan(interval, tuple(cpus or ()), timeout, strace, exit_records, samples, sample_hz,
                workload, threads, command=tuple(command)).check()  # fmt: skip
    if workload:
        command = reproduction.command(workload, threads or max(2, len(machine.usable_cpus())))
    sample_hz = sample_hz or (constants.SAMPLE_HZ if samples else None)
    argv = list(command)
    cpus = machine.check_cpus(list(cpus)) if cpus else []
    path = spawn.check_program(argv[0])
    program = [path, *argv[1:]]
    tracer_path = stracelog.find() if strace else None
    if strace and tracer_path is None:
        raise PerflabError("strace is not installed (apt install strace), needed by --strace")
    with supervisor.Supervisor(tmp=True) as under:
        assert under.tmpdir is not None
        log = under.tmpdir / "strace.log"
        spawned = stracelog.command(tracer_path, log, program) if tracer_path else program
        recorder = perfsamples.PerfRecord(under, sample_hz) if sample_hz else None
        if recorder:
            recorder.start()
        boot0 = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
        listener, why_not = _listener(exit_records)
        steal0, t0 = cpuload.steal_ns(), time.monotonic_ns()
        try:
            with _deferred(signal.SIGINT, signal.SIGTERM) as came:
                fds = (0, 1 if stdout is None else stdout, 2 if stderr is None else stderr)
                child = under.start(spawned, env, fds, cpus, sigdef=True)
                pid = child.pid
                sampler = _Sampler(pid, boot0, t0, traced=tracer_path is not None)
            try:
                timed_out, interrupted, wall = _wait(
                    child, sampler, interval, timeout, progress, listener, came[0] if came else None
                )
            except BaseException:
                child.kill_group()  # an error, or Ctrl-C as it ended
                raise
            finally:
                status, ru = child.outcome()
                child.kill_group()  # what it left behind in its group
                steal = cpuload.steal_ns() - steal0
        finally:
            if listener:
                listener.close()
            if recorder:
                recorder.stop()
        syscalls = stracelog.read(log) if tracer_path and log.exists() else None
        sampled = recorder.read() if recorder else None
    records = taskstats.ours(listener.records(), pid) if listener else []
    exclude = sampler.tracer_pids(records)
    rows = _thread_rows(sampler, wall, exclude, records, interval_ns=interval * 1e9)
    everyone = _thread_rows(sampler, wall, set(), records, interval_ns=interval * 1e9)
    tracer = [r for r in everyone if r["pid"] in exclude]
    rest = _remainder(rows, ru, pid, tracer)
    df = pd.DataFrame([*rows, rest], columns=COLUMNS)
    df["exited_early"] = df["exited_early"].astype(bool)
    df["seen_once"] = df["seen_once"].eq(True)
    df["final"] = df["final"].astype(bool)
    program_cpu = round((ru.ru_utime + ru.ru_stime) * 1e9) - sum(r["cpu_ns"] for r in tracer)
    if syscalls is not None:
        tgid = {r["tid"]: r["pid"] for r in rows}
        syscalls.insert(0, "pid", [tgid.get(t, -1) for t in syscalls["tid"]])
    meta = {
        **provenance.metadata(),
        "experiment": "profile",
        "profiled": list(argv),
        "mechanism": "/proc readings every interval, the leader read as a zombie, wait4 totals"
        + ("" if listener is None else ", taskstats exit records"),
        "exit_records": why_not or _records_note(listener, records),
        "interval_s": interval,
        "readings": sampler.n,
        "cpus": cpus,
        "wall_ns": wall,
        "steal_ns": steal,
        "program_cpu_ns": program_cpu,
        "utilisation": program_cpu / wall if wall else None,
        "threads_seen": len(rows),
        "exit_code": os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else None,
        "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
        "timed_out": timed_out,
        "interrupted": interrupted,
        "strace": _strace_note(strace, tracer_path),
        "syscalls": None if syscalls is None else syscalls.to_dict(orient="list"),
        "perf_counters": _perf_note(),
        **perfsamples.metadata(recorder, sampled, rows),
        "timeline": _timeline(sampler, exclude),
    }
    df = results.attach(df, meta)
    if interrupted:
        raise Interrupted(
            df, interrupted, "the program was killed; its profile up to then is above"
        )
    return df


@contextlib.contextmanager
def _deferred(*signums: int) -> Iterator[list[int]]:
    """These signals, while the program starts, noted instead of raised: one that came once
    it could be seen running stops its profile like any later one (the main thread only)."""
    came: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield came
        return
    old = {s: signal.signal(s, lambda signum, _frame: came.append(signum)) for s in signums}
    try:
        yield came
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def _records_note(listener: taskstats.Listener | None, records: list) -> str:
    lost = listener is not None and listener.lost
    return f"taskstats: {len(records)} records" + (" (some lost: ENOBUFS)" if lost else "")


def _listener(wanted: bool) -> tuple[taskstats.Listener | None, str | None]:
    """A registered taskstats listener, or None and why not."""
    if not wanted:
        return None, "not asked"
    listener = taskstats.Listener()
    why = listener.open()
    return (None, why) if why else (listener, None)


def _strace_note(asked: bool, found: str | None) -> str:
    if found:
        return f"{found} -f -T: the program ran traced (ptrace slows every system call)"
    where = stracelog.find()
    if asked:
        return "absent"
    return f"not asked (--strace; {'installed: ' + where if where else 'absent here'})"
