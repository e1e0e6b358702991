"""What a comparison can decide on, stated once: each metric's column, unit, how it is measured,
where it can be had (and why not, in one line), its words, and which faces take it; and the one
check of a `--metric` every face makes, with one message wherever it refuses.

Light, as the rest of plan/: nothing here imports numpy, pandas or the C core at import time,
so a verb's --help lists the metrics from this table. How a metric's values are read from runs
is running/childruns.metric_column; how a comparison decides on it, lab/compare/metrics.py.
"""

import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from perflab.errors import PerflabError

VALGRIND = "valgrind"
ASSERTED = "an assertion times its runs or counts their instructions under valgrind"


@dataclass(frozen=True)
class Metric:
    """One metric: the child-run column it reads (None: the timed ticks), its unit, what --help
    and docs/metrics.md say of it, how B reads beyond 1 and below it, and the faces that do not
    take it, each with why."""

    name: str
    column: str | None
    unit: str
    brief: str  # a few words in a verb's --help
    measured: str  # what it reads, as docs/metrics.md's table says
    where: str  # where it can be had, as that table says
    more: str
    less: str
    needs: str = ""  # what measuring it needs here: "pmu", "valgrind", "spawner" or nothing
    exact: str = ""  # why its B/A can be exact (its values repeat); '' where it cannot
    absent: str = "no values"  # why a result's runs may hold none of it
    refused: Mapping[str, str] = field(default_factory=dict)  # face: why it does not take it


@dataclass(frozen=True)
class Face:
    """Where a metric is named: by which flag, whether it measures on this machine (and so
    takes only what this machine offers), and whether it takes several at once."""

    name: str
    flag: str
    here: bool
    several: bool


FACES = {
    f.name: f
    for f in (
        Face("compare", "--metric", here=True, several=True),
        Face("report", "--metric", here=False, several=True),
        Face("bisect", "--metric", here=True, several=False),
        Face("history", "--metric", here=False, several=False),
        Face("diff", "--metric", here=False, several=False),
        Face("assertions", "metric", here=True, several=False),
    )
}

_COUNTER_WHERE = (
    "where the CPU's PMU is exposed (not in most virtual machines: `perflab machine` says)"
)
_COUNTER_ABSENT = "the programs do not run perflab's probe, which reads the counters"

METRICS = {
    m.name: m
    for m in (
        Metric(
            "time",
            None,
            "TSC ticks of the timed region",
            "ticks",
            "TSC ticks of the timed region (the default, always measured)",
            "everywhere",
            "slower",
            "faster",
        ),
        Metric(
            "cpu",
            "cpu_ns",
            "ns of user + system CPU time of the child",
            "the child's user + system time",
            "user + system CPU time of the child (`utime_ns + stime_ns`, from `wait4`'s rusage)",
            "everywhere",
            "uses more CPU",
            "uses less CPU",
            refused={"assertions": ASSERTED},
        ),
        Metric(
            "maxrss",
            "maxrss_kb",
            "KiB of the child's peak resident memory",
            "the child's peak memory",
            "the child's peak resident memory in KiB (`wait4`'s `ru_maxrss`)",
            "where perflab's spawner helper runs the children (always, unless it cannot start)",
            "larger",
            "smaller",
            needs="spawner",
            exact="usually: a program's peak repeats to the page",
            absent="not measured in these runs (perflab's spawner helper measures it; runs made "
            "in-process cannot)",
            refused={"assertions": ASSERTED},
        ),
        Metric(
            "instructions",
            "instructions",
            "user-mode instructions of the probe's region",
            "a PMU's count of the probe's region",
            "user-mode instructions of the probe's region, from perf_event",
            _COUNTER_WHERE,
            "does more instructions",
            "does fewer instructions",
            needs="pmu",
            absent=_COUNTER_ABSENT,
            refused={"assertions": ASSERTED},
        ),
        Metric(
            "instructions-exact",
            "instructions_exact",
            "instructions under valgrind (of the probe's region where the program marks it, "
            "else of the whole program), one count per setup and side",
            "valgrind's count",
            "the instructions of the probe's region under Valgrind (`callgrind`, where the "
            "program marks it), else the whole program's (`cachegrind --cache-sim=no`), loader "
            "included",
            "where `valgrind` is installed (`apt install valgrind`)",
            "does more instructions",
            "does fewer instructions",
            needs=VALGRIND,
            exact="yes: a count repeats to the instruction",
            absent="not counted for this result (compare --metric instructions-exact counts it)",
            refused={
                "history": "track does not count instructions under valgrind",
                "diff": "counted once per layout and side, not per run: `perflab report FILE "
                "--metric instructions-exact` decides a comparison on it",
            },
        ),
        Metric(
            "cycles",
            "cycles",
            "user-mode cycles of the probe's region",
            "a PMU's count of the probe's region",
            "user-mode cycles of the probe's region, from perf_event",
            _COUNTER_WHERE,
            "takes more cycles",
            "takes fewer cycles",
            needs="pmu",
            absent=_COUNTER_ABSENT,
            refused={"assertions": ASSERTED},
        ),
    )
}


def taken(face: str) -> tuple[str, ...]:
    """The metrics a face takes, wherever it runs."""
    return tuple(m.name for m in METRICS.values() if face not in m.refused)


def available(face: str | None = None) -> tuple[str, ...]:
    """The metrics this machine can measure (perflab machine lists them), of those `face` takes."""
    return tuple(name for name in (taken(face) if face else METRICS) if not unavailable(name))


def unavailable(name: str) -> str:
    """Why this machine cannot measure the metric ('' when it can), in one line."""
    needs = METRICS[name].needs
    if needs == "pmu":
        from perflab.system import pmu

        if pmu.hardware_counters():
            return ""
        why = pmu.counters_missing()
        if why and why != pmu.NO_PMU:  # a PMU, refused by perf_event_paranoid or a filter
            return f"no hardware counters here: {why}"
        return (
            "no hardware counters here (perf_event has no PMU for this CPU: most virtual "
            "machines expose none)"
        )
    if needs == VALGRIND and shutil.which(VALGRIND) is None:
        return "valgrind is not installed (apt install valgrind)"
    if needs == "spawner":
        import os

        from perflab.system import supervisor

        if not os.access(supervisor.HELPER, os.X_OK):
            return (
                f"perflab's spawner helper {supervisor.HELPER} is missing, and runs made "
                "in-process cannot measure a child's peak memory: reinstall perflab"
            )
    return ""


def check(names: str | Iterable[str] | None, face: str) -> tuple[str, ...]:
    """The metrics asked of `face`, each once, time's the default (a comma list is several);
    else one line: why the name cannot be taken here, and the ones that can."""
    f = FACES[face]
    given = names.split(",") if isinstance(names, str) else list(names or ("time",))
    asked = tuple(dict.fromkeys(str(n).strip() for n in given))
    for name in asked:
        metric = METRICS.get(name)
        why = (
            "not a metric"
            if metric is None
            else metric.refused.get(face) or (unavailable(name) if f.here else "")
        )
        if why:
            raise PerflabError(refusal(face, name, why))
    if len(asked) > 1 and not f.several:
        raise PerflabError(refusal(face, ",".join(asked), f"{face} decides on one metric"))
    return asked


def refusal(face: str, name: str, why: str) -> str:
    """The one line a refused --metric reads: the name, why, and what the face takes (what this
    machine offers, where the face measures)."""
    f = FACES[face]
    shown = name if name in METRICS else repr(name)
    if f.here:
        offer = f"this machine offers {', '.join(available(face))}"
    else:
        offer = f"{face} reads {'' if f.several else 'one of '}{', '.join(taken(face))}"
    return f"{f.flag} {shown}: {why}; {offer}"


def listed(face: str, time: str = "") -> str:
    """The metrics a face takes with a few words each, for its --help (`time`: what time is
    where it is not ticks)."""
    return ", ".join(f"{m} ({time if m == 'time' and time else METRICS[m].brief})"
                     for m in taken(face))  # fmt: skip
