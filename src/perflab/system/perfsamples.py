"""Per-thread CPU profiles by symbol from `perf record` (easyperf's `perf record -s`,
`perf report -T` and `--tid`, seed 003), for `perflab profile --samples`.

perf is attached to the run's supervisor (system/supervisor.py), the process that will start
the program, with its events disabled, and enabled through its control fifo before the program
is started: the program inherits the events from its first instruction, and perf's start-up
(0.5-1.5 s here, most of it reading kallsyms) is neither in the program's wall time nor in its
main thread's blocked time, as it would be under `perf record -- PROGRAM` (whose forked child
waits for perf before it execs). perf, and perf script after it, run under that supervisor too:
neither outlives perflab, and its files go with the supervisor's directory.
"""

from __future__ import annotations

import os
import re
import select
import shutil
import signal
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from perflab.core import bindings, constants
from perflab.core.lazy import pd
from perflab.errors import PerflabError
from perflab.system import counters, frames, supervisor

FREQUENCY_HZ = constants.SAMPLE_HZ
MAX_HZ = constants.MAX_SAMPLE_HZ
READY_S = 60.0  # perf reads kallsyms and every mapping before it listens: slow when loaded
STOP_S = 60.0
COLUMNS = ["pid", "tid", "comm", "dso", "symbol", "samples", "share", "est_cpu_ns"]
_SW, _HW, _CPU_CLOCK, _CYCLES = 1, 0, 0, 0  # perf_event type and config numbers
# `perf script -F comm,pid,tid,period,event,ip,sym,dso`: comm is right-aligned and may hold
# spaces, a symbol may hold spaces and parentheses (C++), the dso is the last parenthesis.
_LINE = re.compile(
    r"^\s*(?P<comm>.*?)\s+(?P<pid>-?\d+)/(?P<tid>-?\d+)\s+(?P<period>\d+)\s+"
    r"(?P<event>\S+):\s+(?P<ip>[0-9a-f]+)\s+(?P<sym>.*?)\s+\((?P<dso>[^()]*)\)\s*$"
)


@dataclass(frozen=True)
class Sampling:
    """What perf will sample, or why nothing can be sampled here."""

    perf: str | None
    event: str | None
    frequency: int
    note: str


def plan(frequency: int = FREQUENCY_HZ) -> Sampling:
    """Hardware cycles where the PMU has them, else the software cpu-clock; say why."""
    if not 1 <= frequency <= MAX_HZ:
        raise PerflabError(f"sampling frequency must be 1..{MAX_HZ} Hz, not {frequency}")
    cycles = bindings.perf_probe(_HW, _CYCLES)
    clock = bindings.perf_probe(_SW, _CPU_CLOCK)
    perf = shutil.which("perf")
    if perf is None:
        why = "perf is not installed: apt install linux-perf (Debian) or linux-tools (Ubuntu)"
        return Sampling(None, None, frequency, f"not supported here ({why})")
    if cycles >= 0:
        return Sampling(perf, "cycles", frequency, "")
    if clock >= 0:
        return Sampling(perf, "cpu-clock", frequency, f"cycles: {counters.reason(cycles)}")
    both = f"cycles: {counters.reason(cycles)}; cpu-clock: {counters.reason(clock)}"
    return Sampling(None, None, frequency, f"not supported here (neither event opens: {both})")


class PerfRecord:
    """perf record attached to a supervisor, so that what it starts next inherits the events;
    perf's files in the supervisor's directory."""

    def __init__(self, under: supervisor.Supervisor, frequency: int = FREQUENCY_HZ):
        if under.tmpdir is None:
            raise ValueError("perf record needs a supervisor with a directory (tmp=True)")
        self.plan = plan(frequency)
        self.supervisor = under
        self.dir = under.tmpdir
        self.data = self.dir / "perf.data"
        self.proc: supervisor.Child | None = None
        self.why_not: str | None = None if self.plan.perf else self.plan.note
        self.stopped_by: str | None = None

    def argv(self, ctl: Path, ack: Path) -> list[str]:
        """perf record, events disabled (-D -1) until 'enable' arrives on the control fifo;
        no build-ids (-B -N) and no BPF events: they only slow perf's start and end here."""
        assert self.plan.perf and self.plan.event
        return [
            self.plan.perf, "record", "-q", "-B", "-N", "--no-bpf-event",
            "-e", self.plan.event, "-F", str(self.plan.frequency), "-D", "-1",
            f"--control=fifo:{ctl},{ack}", "-p", str(self.supervisor.pid), "-o", str(self.data),
        ]  # fmt: skip

    def start(self) -> bool:
        """Start perf and wait until its events are on; False (and why_not) if it cannot."""
        if self.why_not:
            return False
        ctl, ack = self.dir / "perf.ctl", self.dir / "perf.ack"
        os.mkfifo(ctl)
        os.mkfifo(ack)
        # O_RDWR: opening a fifo so never blocks, and perf's end cannot close it under us.
        ctl_fd, ack_fd = os.open(ctl, os.O_RDWR), os.open(ack, os.O_RDWR)
        err = open(self.dir / "perf.err", "w+b")  # noqa: SIM115 (read once perf has gone)
        try:
            # in a group of its own: a Ctrl-C meant for perflab must not end the recording early
            self.proc = self.supervisor.start(self.argv(ctl, ack), fds=(None, None, err.fileno()))
            os.write(ctl_fd, b"enable\n")
            ready = select.select([ack_fd, self.proc.pidfd], [], [], READY_S)[0]
            if ack_fd in ready:
                return True
            self.why_not = self._failed(err, f"did not start within {READY_S:g} s")
            self.stop()
            return False
        except BaseException:
            self.stop()  # Ctrl-C while perf starts: it must not outlive us
            raise
        finally:
            os.close(ctl_fd)
            os.close(ack_fd)
            err.close()

    def _failed(self, err: Any, otherwise: str) -> str:
        """Why perf did not start, in perf's own last words."""
        if self.proc:
            self.proc.wait(0.5)
        err.seek(0)
        lines = [x.strip() for x in err.read().decode(errors="replace").splitlines() if x.strip()]
        said = next(
            (x for x in lines if "rror" in x or "ermission" in x), lines[-1] if lines else ""
        )
        rc = self.proc.returncode if self.proc else None
        what = f"perf record exited {rc}" if rc is not None else f"perf record {otherwise}"
        return f"not supported here ({what}{': ' + said if said else ''})"

    def stop(self) -> None:
        """SIGINT, as perf expects at the end of a recording; killed if it does not finish."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGINT)
        if self.proc.wait(STOP_S) is None:
            self.proc.kill()
            self.proc.wait()
            self.stopped_by = f"killed after {STOP_S:g} s: the recording may be cut short"

    def read(self) -> pd.DataFrame | None:
        """Every sample of the recording, counted per (pid, tid, comm, event, dso, symbol)."""
        if self.why_not or not self.data.exists():
            return None
        assert self.plan.perf
        fields = "comm,pid,tid,period,event,ip,sym,dso"
        err = self.dir / "script.err"
        out, into = os.pipe()
        with open(out, errors="replace") as lines, open(err, "wb") as errors:
            try:
                script = self.supervisor.start(
                    [self.plan.perf, "script", "-i", str(self.data), "-F", fields],
                    fds=(None, into, errors.fileno()),
                )
            finally:
                os.close(into)
            counted = parse(lines)  # streamed: a long run prints millions of lines
            rc = script.wait()
        if rc != 0:
            last = (err.read_text(errors="replace").strip().splitlines() or ["no output"])[-1]
            self.why_not = f"perf script failed: {last}"
            return None
        return counted


def parse(lines: str | Iterable[str]) -> pd.DataFrame:
    """`perf script -F comm,pid,tid,period,event,ip,sym,dso` output (text or lines) counted
    per (pid, tid, comm, event, dso, symbol): samples and the sum of their periods (ns for a
    clock event)."""
    samples: Counter[tuple] = Counter()
    periods: Counter[tuple] = Counter()
    for line in lines.splitlines() if isinstance(lines, str) else lines:
        m = _LINE.match(line)
        if m is None:
            continue
        key = (
            int(m["pid"]), int(m["tid"]), m["comm"], m["event"],
            m["dso"] or "[unknown]", m["sym"] or "[unknown]",
        )  # fmt: skip
        samples[key] += 1
        periods[key] += int(m["period"])
    names = ["pid", "tid", "comm", "event", "dso", "symbol"]
    rows = [(*k, n, periods[k]) for k, n in samples.items()]
    return pd.DataFrame(rows, columns=[*names, "samples", "period"]).astype(
        {"pid": int, "tid": int, "samples": int, "period": "int64"}
    )


def table(
    raw: pd.DataFrame,
    cpu_ns: dict[tuple[int, int], float] | None = None,
    names: dict[tuple[int, int], str] | None = None,
) -> pd.DataFrame:
    """The tidy per-thread profile: per (pid, tid, comm, dso, symbol) its samples, their share
    of the thread's samples and the on-CPU ns they stand for (a clock event's periods are ns; a
    cycles event's share of the periods is applied to the thread's measured CPU time, cpu_ns).
    names: each thread's final name, for the samples taken before it named itself."""
    cpu_ns = cpu_ns or {}
    if raw.empty:
        return pd.DataFrame(columns=COLUMNS)
    df = raw.copy()
    if names:
        ids = zip(df["pid"], df["tid"], strict=True)
        df["comm"] = [names.get(k, c) for k, c in zip(ids, df["comm"], strict=True)]
        keys = ["pid", "tid", "comm", "event", "dso", "symbol"]
        df = df.groupby(keys, as_index=False, sort=False)[["samples", "period"]].sum()
    keys = ["pid", "tid"]
    thread_samples = df.groupby(keys)["samples"].transform("sum")
    thread_period = df.groupby(keys)["period"].transform("sum")
    clock = df["event"].str.startswith(("cpu-clock", "task-clock"))
    measured = np.array([cpu_ns.get(k, np.nan) for k in zip(df["pid"], df["tid"], strict=True)])
    est = np.where(clock, df["period"], df["period"] / thread_period * measured)
    out = df.assign(share=df["samples"] / thread_samples, est_cpu_ns=est)[COLUMNS]
    out = out.sort_values(["pid", "tid", "samples"], ascending=[True, True, False])
    return out.reset_index(drop=True)


def event_used(raw: pd.DataFrame | None) -> str | None:
    """The event perf really sampled (it adds :u where only user space may be sampled)."""
    if raw is None or raw.empty:
        return None
    return ", ".join(sorted(raw["event"].unique()))


def metadata(rec: PerfRecord | None, raw: pd.DataFrame | None, rows: list[dict]) -> dict:
    """What profile.run's metadata carries about the samples: the table and how it was made."""
    if rec is None:
        return {}
    cpu = {(r["pid"], r["tid"]): r["cpu_ns"] for r in rows}
    names = {(r["pid"], r["tid"]): r["comm"] for r in rows}
    keep = {p for p, _ in cpu}
    out = None if raw is None else table(raw[raw["pid"].isin(keep)], cpu, names)
    used = event_used(raw)
    if rec.why_not:
        note = rec.why_not
    else:
        note = f"{used or rec.plan.event} at {rec.plan.frequency} Hz"
        note += f"; {rec.plan.note}" if rec.plan.note else ""
        if rec.stopped_by:
            note += f"; perf {rec.stopped_by}"
    return {
        "samples_note": note,
        "samples_event": used,
        "samples_hz": rec.plan.frequency,
        "samples": None if out is None else out.to_dict(orient="list"),
    }


def frame(df: pd.DataFrame) -> pd.DataFrame | None:
    """The per-thread profile by symbol of a profile frame, None when it was not sampled."""
    kept = frames.metadata(df).get("samples")
    return None if kept is None else pd.DataFrame(kept, columns=COLUMNS)


def summarize(samples: pd.DataFrame, top: int = 5) -> pd.DataFrame:
    """Per thread, its hottest symbols: samples, % of the thread's samples, estimated CPU ms."""
    top_rows = samples.groupby(["pid", "tid"], sort=False).head(top)
    return pd.DataFrame(
        {
            "pid": top_rows["pid"],
            "tid": top_rows["tid"],
            "comm": top_rows["comm"],
            "dso": [Path(d).name if d.startswith("/") else d for d in top_rows["dso"]],
            "symbol": top_rows["symbol"],
            "samples": top_rows["samples"],
            "%": top_rows["share"] * 100,
            "cpu_ms": top_rows["est_cpu_ns"] / 1e6,
        }
    ).reset_index(drop=True)
