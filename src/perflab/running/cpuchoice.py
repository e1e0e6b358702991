"""Which CPU a sweep measures on when none is asked: the quietest perflab may use, chosen after
reading what each is doing, and the one line that says which and why.

A CPU where another task is busy, above all a real-time one, delays every run pinned there
(issue 48: a 5 000-run sweep took 8x a bare spawn loop beside a real-time task on the last
CPU, which perflab had taken without looking). choose() is the rule, a pure function of one
reading (system/cpuload.py); pick() and check_asked() read the machine and apply it.
"""

import json
import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from perflab import errors
from perflab.system import cpuload, machine, settings

WINDOW_S = 0.1  # how long each CPU is watched before the choice: a tenth of a second at start
# CPUs asked for are only checked for a busy real-time task, which holds its CPU most of any
# window: a shorter look costs every pinned sweep less
ASKED_WINDOW_S = 0.025
REALTIME_SEEN_S = 60.0  # how long a reading's real-time CPUs are kept off (realtime_busy)
_realtime_seen: tuple[float, frozenset[int]] = (-math.inf, frozenset())


@dataclass(frozen=True)
class Choice:
    """The CPUs chosen and why, in the one line perflab says and the result records."""

    cpus: tuple[int, ...]
    line: str
    busy: dict[int, str]  # per CPU read, what kept it busy ('' for a quiet one)


def _culprit(cpu: int, load: cpuload.Load) -> cpuload.Task | None:
    """The task that kept a CPU busiest, a real-time one first; None when none took more of
    the window than the reading resolves."""
    there = [t for t in load.tasks if t.cpu == cpu and t.share >= load.step]
    if not there:
        return None
    return max(there, key=lambda t: (t.realtime, t.share))


def _realtime(cpu: int, load: cpuload.Load) -> bool:
    who = _culprit(cpu, load)
    return who is not None and who.realtime


def _busy(cpu: int, load: cpuload.Load) -> bool:
    """Busy: beyond one /proc/stat step of the window (less is within the reading's grain),
    or a real-time task ran there."""
    return load.busy.get(cpu, 0.0) > load.step or _realtime(cpu, load)


def _steps_busy(cpu: int, load: cpuload.Load) -> int:
    """How busy, in /proc/stat steps: 0 for a quiet CPU, so that quiet ones rank as equal."""
    return round(load.busy.get(cpu, 0.0) / load.step) if _busy(cpu, load) else 0


def _what(cpu: int, load: cpuload.Load) -> str:
    """'cpu 1 runs pid 1234 (hog) SCHED_FIFO 50 (95 % busy)', '' for a quiet CPU."""
    if not _busy(cpu, load):
        return ""
    who = _culprit(cpu, load)
    share = f"{load.busy.get(cpu, 0.0):.0%} busy"
    return f"cpu {cpu} runs {who.describe()} ({share})" if who else f"cpu {cpu} {share}"


def choose(eligible: Sequence[int], load: cpuload.Load, count: int = 1) -> Choice:
    """The `count` quietest of the eligible CPUs: none with a real-time task busy on it unless
    every one has, then the least busy; shares within one /proc/stat step of each other count as
    equal, and then the last CPU wins (away from CPU 0, where most interrupts land)."""
    ranked = sorted(
        eligible,
        key=lambda c: (_realtime(c, load), _steps_busy(c, load), -c),
    )
    chosen = tuple(sorted(ranked[:count]))
    busy = {c: _what(c, load) for c in eligible}
    named = ",".join(map(str, chosen))
    window = f"over {load.window_s * 1e3:.0f} ms"
    others = [busy[c] for c in eligible if c not in chosen and busy[c]]
    if len(eligible) == count:
        only = "the only CPU" if count == 1 else "the only CPUs"
        line = f"cpu {named}: {only} perflab may use (its affinity mask)"
        if any(busy[c] for c in chosen):
            said = "; ".join(busy[c] for c in chosen if busy[c])
            line += f", busy {window}: {said}; runs there wait for it (start perflab under a "
            line += "wider taskset to let it choose, or stop that work)"
    elif any(busy[c] for c in chosen):
        said = "; ".join(busy[c] for c in eligible if busy[c])
        line = (f"every CPU perflab may use is busy {window}: {said}; measuring on cpu {named}, "
                "the least busy (--cpu chooses)")  # fmt: skip
    elif others:
        line = f"cpu {named}: {'; '.join(others)} {window}"
    else:
        line = (f"cpu {named}: every CPU perflab may use ({machine.format_cpu_list(eligible)}) "
                f"quiet {window}; the last, away from CPU 0's interrupts")  # fmt: skip
    return Choice(chosen, line, busy)


def asked_warning(asked: Sequence[int], eligible: Sequence[int], load: cpuload.Load) -> str | None:
    """The warning for CPUs asked by --cpu where a real-time task is busy (None when none is),
    naming a quieter CPU when one is eligible."""
    hit = [c for c in asked if _realtime(c, load)]
    if not hit:
        return None
    rest = [c for c in eligible if c not in asked]
    other = choose(rest, load).cpus[0] if rest else None
    quiet = other is not None and not _busy(other, load)
    return errors.warning(
        "cpu_busy_rt",
        what="; ".join(_what(c, load) for c in hit),
        window=f"{load.window_s * 1e3:.0f}",
        quieter=f" (cpu {other} was quiet)" if quiet else "",
    )


def _read(window_s: float) -> cpuload.Load:
    """A reading, whose real-time CPUs the measurement's own threads then keep off."""
    global _realtime_seen
    load = cpuload.read(window_s)
    eligible = machine.usable_cpus()
    _realtime_seen = (time.monotonic(), frozenset(c for c in eligible if _realtime(c, load)))
    return load


def realtime_busy() -> frozenset[int]:
    """The CPUs where the last reading, less than a minute ago, saw a real-time task busy:
    perflab's own threads there would get what it leaves (5 % beside a spinning one)."""
    at, cpus = _realtime_seen
    return cpus if time.monotonic() - at < REALTIME_SEEN_S else frozenset()


def pick(count: int = 1) -> Choice:
    """The quietest `count` CPUs perflab may use now (online, in the affinity mask it was
    started with); say(choice.line) tells it once the plan has passed its checks."""
    eligible = machine.usable_cpus()
    return choose(eligible, _read(WINDOW_S), min(count, len(eligible)))


def say(line: str) -> None:
    """The choice's one line, as a measurement starts: after every check of its input, so that
    bad input stays one line (errors.note_once: compare's rounds measure one plan repeatedly)."""
    if line:
        errors.note_once(line)


def check_asked(cpus: Sequence[int]) -> Choice:
    """CPUs asked for, honoured: a warning when a real-time task is busy on one of them (looked
    at again, past the kernel's throttle, when one is there but was not seen busy)."""
    eligible = machine.usable_cpus()
    load = _read(ASKED_WINDOW_S)
    if not any(_realtime(c, load) for c in cpus) and cpuload.realtime_there(set(cpus)):
        # a real-time task is there but was not seen busy: the throttle may have held it for
        # most of the look, so look again across one throttled gap
        bandwidth = settings.rt_bandwidth()
        gap_s = (bandwidth[1] - bandwidth[0]) / 1e9 if bandwidth else 0.0
        load = _read(ASKED_WINDOW_S + gap_s)
    said = asked_warning(cpus, eligible, load)
    if said:
        errors.warn(said)
    busy = {c: _what(c, load) for c in eligible}
    return Choice(tuple(cpus), f"cpu {','.join(map(str, cpus))}: asked (--cpu)", busy)


def recorded_cpus(output: str | os.PathLike) -> tuple[int, ...] | None:
    """The CPUs an interrupted or finished sweep at `output` recorded, so that its resume
    measures where it began (None when it records none)."""
    parts = Path(f"{os.fspath(output)}.parts") / "params.json"
    try:
        params = json.loads(parts.read_bytes()).get("params", {})
    except (OSError, ValueError, AttributeError):
        from perflab.store import results

        try:
            params = results.metadata(results.load(output)).get("params", {})
        except Exception:  # any unreadable file: the journal itself will say why
            return None
    cpus = params.get("cpus") if isinstance(params, dict) else None
    if isinstance(cpus, list) and cpus and all(isinstance(c, int) for c in cpus):
        return tuple(cpus)
    return None
