"""Where each thread's time goes: per-thread CPU, run-queue wait, time blocked and utilisation of
any program, and time inside each system call per thread when strace is asked for (easyperf's
"Performance analysis of multithreaded applications", seed 003).

Mechanism (no ptrace unless --strace): the program is started without a shell in its own process
group, under the run's supervisor (system/supervisor.py: nothing it leaves outlives perflab or the
run, and strace's and perf's files go with the supervisor's directory); every `interval` its threads
(and those of processes it forks) are read from /proc (proctasks), and where CAP_NET_ADMIN allows,
the kernel's taskstats exit record of every thread gives its figures at its exit (taskstats).
Without records a thread is known as of its last reading, and one that lived and died between two
readings is not seen at all; the leader is read once more as a zombie, so its figures are final.
Nothing is lost: wait4's totals less what the rows account for is one "(between readings)" row, so
the per-thread CPU adds up to the program's.
"""

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

from perflab.analysis.summary import Summary, Table
from perflab.core import bindings
from perflab.core.lazy import pd
from perflab.engine import controls, results, spawn
from perflab.errors import PerflabError, Stopped
from perflab.lab.plans.defaults import PROFILE_INTERVAL_S as INTERVAL_S
from perflab.system import (
    blockcause,
    counters,
    machine,
    perfsamples,
    proctasks,
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
Progress = Callable[[float, int], None]


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
    progress: Progress | None,
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
        cut = _cut(seen, row)
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


def _cut(points: list, row: dict[str, Any]) -> blockcause.Intervals:
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
    argv: Sequence[str],
    interval: float = INTERVAL_S,
    cpus: Sequence[int] = (),
    timeout: float | None = None,
    strace: bool = False,
    env: Mapping[str, str] | None = None,
    stdout: int | None = None,
    stderr: int | None = None,
    progress: Progress | None = None,
    exit_records: bool = True,
    sample_hz: int | None = None,
) -> pd.DataFrame:
    """Profile one run of argv: one row per thread it ever had (and a "(between readings)" row
    for what no reading saw), with the program's totals, syscalls and timeline in metadata.

    env None inherits perflab's environment; stdout and stderr fds for the program's streams
    (None: ours);
    exit_records: also take taskstats exit records where the kernel allows (CAP_NET_ADMIN);
    sample_hz: also sample each thread's CPU by symbol with perf record (perfsamples).
    """
    from perflab.system import perfsamples  # perf's own module, only when sampling is asked for

    if not argv:
        raise PerflabError("no program to profile (perflab profile -- PROGRAM ARGS)")
    if not 0.001 <= interval <= 10:
        raise PerflabError(f"interval must be between 0.001 and 10 s, not {interval}")
    if timeout is not None:
        controls.check_timeout(timeout)
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
        recorder = perfsamples.Recorder(under, sample_hz) if sample_hz else None
        if recorder:
            recorder.start()
        boot0 = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
        listener, why_not = _listener(exit_records)
        t0 = time.monotonic_ns()
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
        **machine.metadata(),
        "experiment": "profile",
        "profiled": list(argv),
        "mechanism": "/proc readings every interval, the leader read as a zombie, wait4 totals"
        + ("" if listener is None else ", taskstats exit records"),
        "exit_records": why_not or _records_note(listener, records),
        "interval_s": interval,
        "readings": sampler.n,
        "cpus": cpus,
        "wall_ns": wall,
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
        raise Interrupted(df, interrupted)
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


class Interrupted(Stopped):
    """Ctrl-C or SIGTERM stopped a profile: the program was killed, its profile up to then is
    in frame (metadata "interrupted" says which signal)."""

    def __init__(self, frame: pd.DataFrame, signum: int):
        super().__init__(signum)
        self.frame = frame


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


def overview(df: pd.DataFrame) -> dict[str, Any]:
    """The program's line: wall, CPU, utilisation (threads busy on average), threads, exit."""
    meta = results.metadata(df)
    threads = df[df["tid"] >= 0]
    return {
        "wall_ns": meta["wall_ns"],
        "cpu_ns": meta["program_cpu_ns"],
        "utilisation": meta["utilisation"],
        "threads": len(threads),
        "exited_early": int(threads["exited_early"].sum()),
        "seen_once": int(_seen_once(threads).sum()),
        "no_utilisation": int(threads["utilisation"].isna().sum()),
        "unseen_cpu_ns": int(df.loc[df["tid"] < 0, "cpu_ns"].sum()),
        "exit_code": meta["exit_code"],
        "signal": meta["signal"],
        "timed_out": meta["timed_out"],
        "interrupted": meta.get("interrupted"),
    }


def _seen_once(df: pd.DataFrame) -> pd.Series:
    """Which rows were seen in one reading only (none, in a file written before it was said)."""
    return df["seen_once"] if "seen_once" in df else pd.Series(False, index=df.index)


def syscalls(df: pd.DataFrame) -> pd.DataFrame | None:
    """Time inside each system call per thread (strace -T), None when strace was not used."""
    table = results.metadata(df).get("syscalls")
    return None if table is None else pd.DataFrame(table)


def timeline(df: pd.DataFrame) -> pd.DataFrame:
    """Cumulative CPU and run-queue wait of every thread at every reading (ns from the spawn)."""
    return pd.DataFrame(results.metadata(df)["timeline"])


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """The per-thread table in milliseconds: where each thread's time went."""
    ms = 1e6
    out = pd.DataFrame(
        {
            "pid": df["pid"],
            "tid": df["tid"],
            "comm": df["comm"],
            "life_ms": df["lifetime_ns"] / ms,
            "cpu_ms": df["cpu_ns"] / ms,
            "user_ms": df["user_ns"] / ms,
            "sys_ms": df["system_ns"] / ms,
            "util_%": df["utilisation"] * 100,
            "runq_ms": df["runq_ns"] / ms,
            "blocked_ms": df["blocked_ns"] / ms,
            **{
                f"{cause}_ms": df[f"blocked_{cause}_ns"] / ms
                for cause in blockcause.CAUSES
                if df[f"blocked_{cause}_ns"].fillna(0).any()
            },
            "vcsw": df["vcsw"],
            "ivcsw": df["ivcsw"],
            "early": np.where(df["tid"] < 0, "", np.where(df["exited_early"], "yes", "")),
        }
    )
    if _seen_once(df).any():
        out["seen_once"] = np.where(_seen_once(df), "yes", "")
    return out.astype({"pid": int, "tid": int, "vcsw": int, "ivcsw": int})


def causes(df: pd.DataFrame) -> pd.DataFrame:
    """Per thread and cause, the blocked ns and how many readings found it asleep there: the
    sample behind each figure."""
    tl = timeline(df)
    asleep = tl[tl["cause"].notna()].groupby(["pid", "tid", "cause"]).size()
    rows = []
    for th in df[df["tid"] >= 0].itertuples():
        for cause in blockcause.CAUSES:
            ns = getattr(th, f"blocked_{cause}_ns")
            n = int(asleep.get((th.pid, th.tid, cause), 0))
            if ns or n:
                rows.append({"pid": th.pid, "tid": th.tid, "comm": th.comm, "cause": cause,
                             "blocked_ns": ns, "readings": n})  # fmt: skip
    return pd.DataFrame(rows, columns=["pid", "tid", "comm", "cause", "blocked_ns", "readings"])


def cause_note(df: pd.DataFrame) -> str:
    """How much of the blocked time has an exact cause, how much a sampled or shared one."""
    threads = df[df["tid"] >= 0]
    blocked = threads["blocked_ns"].sum()
    if not blocked:
        return "no thread was blocked"
    exact, shared = threads["cause_exact_ns"].sum(), threads["cause_shared_ns"].sum()
    return (
        f"the call each thread slept in at each reading (/proc/PID/task/TID/syscall, no "
        f"ptrace; {int(threads['asleep_readings'].sum())} readings found one asleep): "
        f"{exact / blocked:.0%} exact, {shared / blocked:.0%} unseen and shared as the "
        "readings were, the rest sampled (docs/profile.md)"
    )


def summarize_syscalls(df: pd.DataFrame, top: int = 5) -> pd.DataFrame | None:
    """Per thread, the calls it spent most time in (strace's -T, the article's futex and read
    sums), with counts and the median, 90th percentile and maximum of one call."""
    table = syscalls(df)
    if table is None or table.empty:
        return table
    comm = dict(zip(df["tid"], df["comm"], strict=True))
    table = table.sort_values(["tid", "total_ns"], ascending=[True, False])
    table = table.groupby("tid", sort=False).head(top)
    return pd.DataFrame(
        {
            "tid": table["tid"],
            "comm": [comm.get(t, "(unread)") for t in table["tid"]],
            "syscall": table["syscall"],
            "calls": table["calls"],
            "total_ms": table["total_ns"] / 1e6,
            "median_us": table["median_ns"] / 1e3,
            "p90_us": table["p90_ns"] / 1e3,
            "max_ms": table["max_ns"] / 1e6,
        }
    ).reset_index(drop=True)


COLORS = {
    "on CPU": "#d62728", "run queue": "#e08b00", "futex": "#1f4e9c", "io": "#2ca02c",
    "poll": "#17becf", "sleep": "#bdbdbd", "wait": "#8c564b", "other": "#9467bd",
    "unseen": "#9ecae1",
}  # fmt: skip


def plot(df: pd.DataFrame, path: Any = None) -> Any:
    """One lane per thread over wall time: on-CPU, waiting on a run queue, and blocked by the
    call the readings saw it sleep in (futex, I/O, poll, sleep...)."""
    from perflab.analysis import plot as plt

    tl = timeline(df)
    threads = df[df["tid"] >= 0].reset_index(drop=True)
    fig, ax = plt.figure(figsize=(9, 1.6 + 0.45 * max(len(threads), 1)))
    shown: set[str] = set()
    for lane, th in threads.iterrows():
        t = tl[(tl["pid"] == th["pid"]) & (tl["tid"] == th["tid"])]
        t = t[(t["t_ns"] <= th["last_ns"]) | (not th["final"])]  # not the zombie's reading
        points = list(t[["t_ns", "cpu_ns", "runq_ns", "vcsw", "cause"]].itertuples(index=False))
        cut = _cut(points, th)
        shares = blockcause.share(cut.blocked, cut.ends, cut.unbroken)[0]
        span = np.maximum(np.diff(cut.bounds), 1)
        f_cpu = np.clip((cut.cpu + cut.pending) / span, 0, 1) * 0.8
        # the run queue's is what is neither CPU nor blocked: a reading's pending run delay
        # reaches schedstat only later, and cut.blocked has it settled
        f_blocked = np.clip(cut.blocked / span, 0, 1) * 0.8
        lo = top = np.maximum(0.8 - f_blocked, f_cpu)
        bands = [(0 * f_cpu, f_cpu, "on CPU"), (f_cpu, lo, "run queue")]
        parts = shares / np.maximum(shares.sum(axis=1, keepdims=True), 1e-9)
        parts[shares.sum(axis=1) <= 0, blockcause.CAUSES.index("unseen")] = 1
        for k, cause in enumerate(blockcause.CAUSES):
            hi = lo + (0.8 - top) * parts[:, k]
            bands.append((lo, hi, cause))
            lo = hi
        x = np.repeat(cut.bounds / 1e6, 2)[1:-1]
        for y_lo, y_hi, name in bands:
            if not (y_hi > y_lo).any():
                continue
            label = None if name in shown else name
            shown.add(name)
            y0, y1 = lane + np.repeat(y_lo, 2), lane + np.repeat(y_hi, 2)
            ax.fill_between(x, y0, y1, color=COLORS[name], lw=0, label=label)
    names = [f"{c} {t}" for c, t in zip(threads["comm"], threads["tid"], strict=True)]
    ax.set_yticks(np.arange(len(threads)) + 0.4, names)
    ax.set_ylim(-0.2, max(len(threads), 1))
    ax.invert_yaxis()
    ax.set_xlabel("wall time since spawn (ms)")
    handles, labels = ax.get_legend_handles_labels()
    order = [labels.index(n) for n in COLORS if n in labels]
    ax.legend([handles[i] for i in order], [labels[i] for i in order], loc="lower right",
              bbox_to_anchor=(1, 1), ncol=5, fontsize=8, frameon=False)  # fmt: skip
    u = overview(df)
    title = f"threads over time (utilisation {u['utilisation']:.2f} threads busy on average)"
    if path is not None:
        plt.save(fig, path, title=title)
    return fig


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.1f} ms"


def _ids(shown: pd.DataFrame) -> pd.DataFrame:
    """Thread and process ids as plain numbers (not 28,621), '-' for the remainder row."""
    for col in ("pid", "tid"):
        if col in shown:
            shown[col] = [str(v) if v >= 0 else "-" for v in shown[col]]
    return shown


def _no_utilisation(over: dict[str, Any], interval_s: float) -> str:
    """Why some threads have no util_%: their lifetime is not known to better than a reading."""
    once, short = over["seen_once"], over["no_utilisation"] - over["seen_once"]
    why = [f"{once} seen once (in one reading, without an exit record)"] if once else []
    why += [f"{short} alive less than the reading interval"] if short else []
    n = over["no_utilisation"]
    return (
        f"no utilisation for {n} thread{'s' * (n != 1)}, whose lifetime is not known to better "
        f"than a reading ({interval_s * 1e3:g} ms): {' and '.join(why)}"
    )


def _ended(over: dict[str, Any]) -> str:
    if over["timed_out"]:
        return "killed at the timeout"
    if over["interrupted"]:
        return f"killed when perflab got signal {over['interrupted']}"
    if over["signal"]:
        return f"killed by signal {over['signal']}"
    return f"exit status {over['exit_code']}"


def summary(frame: pd.DataFrame, meta: dict[str, Any]) -> Summary:
    """The program's line, where each thread's time went, the time inside system calls and the
    hottest symbols per thread when they were asked for, and how each figure was read."""
    over = overview(frame)
    lines = [
        f"{' '.join(meta['profiled'])}: {_ended(over)}; wall {_ms(over['wall_ns'])}, "
        f"CPU {_ms(over['cpu_ns'])}, utilisation {over['utilisation']:.2f} "
        f"(threads busy on average); {over['threads']} threads seen, "
        f"{over['exited_early']} exited early",
        f"readings every {meta['interval_s'] * 1e3:g} ms on average ({meta['readings']}); "
        f"'{BETWEEN}' is what wait4 counted and no reading saw "
        f"({_ms(over['unseen_cpu_ns'])} CPU)",
        f"blocked by cause: {cause_note(frame)}",
        f"exit records: {meta['exit_records']}",
    ]
    if over["no_utilisation"]:
        lines.insert(2, _no_utilisation(over, meta["interval_s"]))
    tables = [Table("threads", "per thread (ms)", frame, "{:,.1f}", _ids(summarize(frame)))]
    values: dict[str, Any] = {
        "program": over,
        "blocked_by_cause": cause_note(frame),
        "strace": meta["strace"],
        "exit_records": meta["exit_records"],
        "perf_counters": meta["perf_counters"],
    }
    calls = syscalls(frame)
    if calls is None:
        lines.append(f"time per system call: {meta['strace']}")
        values["syscalls"] = None
    else:
        title = "time inside system calls (strace -T), per thread"
        shown = summarize_syscalls(frame)
        tables.append(
            Table("syscalls", title, calls, "{:,.1f}", _ids(shown) if shown is not None else None)
        )
    lines.append(f"per-thread perf counters: {meta['perf_counters']}")
    if "samples_note" in meta:
        lines.append(f"CPU samples per thread and symbol: {meta['samples_note']}")
        values["samples_note"] = meta["samples_note"]
        sampled = perfsamples.frame(frame)
        if sampled is None:
            values["samples"] = None
        else:
            top = _ids(perfsamples.summarize(sampled))
            tables.append(Table("samples", "hottest symbols per thread", sampled, "{:,.1f}", top))
    return Summary(lines, tables, values, lambda p: plot(frame, p))
