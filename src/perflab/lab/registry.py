"""The one list of experiments: what each is called in a result, which lab module implements it,
which verb runs it, the columns its frames have and the parameter columns that define one of its
points; and the contract each module fulfils.

Verbs, `report`, `diff`, the exporters and the Jupyter view read this list and nothing else, so
an experiment registered here cannot be forgotten by one of them. It imports no numpy:
`perflab --help` may read it.
"""

from __future__ import annotations

import importlib
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

from perflab.errors import PerflabError

if TYPE_CHECKING:
    import pandas as pd

    from perflab.analysis.summary import Summary


@runtime_checkable
class ExperimentModule(Protocol):
    """What a registered lab module provides: the summary of a frame it wrote, which every
    reader renders (a verb's tables, `perflab report`, the exports, the notebook view)."""

    def summary(self, frame: pd.DataFrame, meta: dict[str, Any]) -> Summary:
        """Sentences, tables, values and the figure of this frame and its metadata."""
        ...


@dataclass(frozen=True)
class SuiteRuns:
    """An experiment's runs the suite walks for every experiment at once (registry, report,
    identity, hostile input, the layers' contract, interrupts), so that a new experiment brings
    its own and no test table is edited. Words after the verb; `{cpu}` stands for a usable CPU,
    `{ncpus}` for how many (at most two), `{worker}` for the tests' pthread program, `{repo}`,
    `{good}` and `{bad}` for a small git repository of a C program that a commit made slower;
    `{threads}` is the threads verb's own (where a program's count goes)."""

    tiny: str  # the smallest real run (positional arguments first, a program last)
    api: dict[str, Any] | None = None  # the lab module's run(**api) at its smallest
    changed: tuple[str, str, str] | None = None  # an option of tiny, another value, its param
    lasting: str = ""  # a run of a few seconds, its first chunk long before its last
    one_measurement: str = ""  # why, without `lasting`, there is nothing to stop between chunks

    def argv(self, which: str = "tiny", **given: str) -> list[str]:
        """The words of `tiny` or `lasting` (split as a shell would), each {name} in them given."""
        words = shlex.split(getattr(self, which))
        for name, value in given.items():
            words = [w.replace(f"{{{name}}}", value) for w in words]
        return words

    def kwargs(self, cpu: int) -> dict[str, Any]:
        """The lab module's run(**kwargs) at its smallest, `{cpu}` given as this CPU's number."""

        def given(value: Any) -> Any:
            if isinstance(value, list):
                return [given(v) for v in value]
            return cpu if value == "{cpu}" else value

        return {key: given(value) for key, value in (self.api or {}).items()}


@dataclass(frozen=True)
class Experiment:
    """One experiment: its name in a result's metadata, its module, its verb and its points."""

    name: str  # the "experiment" value its results carry
    module: str  # the lab module implementing ExperimentModule
    verb: str | None  # how the CLI runs it ("sweep env-size"); None: the Python API only
    columns: frozenset[str]  # the columns a frame of it always has (how a bare CSV is recognised)
    points: tuple[str, ...]  # the parameter columns that define a point, for diff
    value: str | None = None  # the column diff compares (None: the frame's own value column)
    # The run parameters (the journal's "params") that define what a point's value measures (a
    # loop count, a page count): diff refuses two results that differ in one. The program is
    # not one of them: comparing two builds of it is what diff is for.
    defines: tuple[str, ...] = ()
    # Run parameters that are conditions of the whole run, not points (memcpy's kernel): diff
    # compares two results that differ in one point by point, and names it.
    conditions: tuple[str, ...] = ()
    ok: str = "ok"  # the status of a row diff may compare
    weighs_change: bool = False  # its summary weighs undecided points against a change (--change)
    help: str = ""  # the first paragraph of its verb's help (on one experiment per verb)
    rows: tuple[str, ...] = ()  # the columns that name one recorded row (what a resume skips)
    tests: SuiteRuns = SuiteRuns("")

    def load(self) -> ExperimentModule:
        """The lab module, imported now (it may import numpy, pandas and the C core)."""
        return cast("ExperimentModule", importlib.import_module(self.module))

    def summary(self, frame: pd.DataFrame, meta: dict[str, Any]) -> Summary:
        """The module's summary; a frame without this experiment's columns is one error."""
        from perflab.analysis.summary import Summary

        missing = sorted(self.columns - set(map(str, frame.columns)))
        if missing:
            raise PerflabError(
                f"a {self.name} result without column(s) {', '.join(missing)}: "
                "damaged, or not written by perflab"
            )
        if frame.empty:
            return Summary([f"no rows: the {self.name} run recorded nothing"], [])
        try:
            return self.load().summary(frame, meta)
        except KeyError as exc:  # a column some runs' summary reads (outer_ticks without a probe)
            key = str(exc.args[0]) if exc.args else ""
            absent = key not in map(str, frame.columns) and key.isidentifier()
            if not (absent or key.endswith(" not in index")):
                raise
            raise PerflabError(
                f"a {self.name} result without the {key.removesuffix(' not in index')} (a "
                "column or metadata key) its summary needs: damaged, or not written by perflab"
            ) from None


EXPERIMENTS: dict[str, Experiment] = {
    e.name: e
    for e in (
        Experiment(
            name="env-size",
            module="perflab.lab.env_size",
            verb="sweep env-size",
            columns=frozenset({"env_size", "rep", "status", "ticks"}),
            points=("env_size",),
            help=(
                "Run PROGRAM (default: the paper's loop) with env sizes MIN..MAX, REPEAT times "
                "each."
            ),
            rows=("env_size", "rep"),
            tests=SuiteRuns(
                tiny="--max 15 --repeat 2 --no-rt",
                changed=("--repeat", "3", "repeat"),
                lasting="--max 0 --repeat 1500 --no-rt -- {worker} 0 1000 2",
            ),
        ),
        Experiment(
            name="link-order",
            module="perflab.lab.link_order",
            verb="sweep link-order",
            columns=frozenset({"link_order", "perm", "rep", "status", "ticks"}),
            points=("link_order",),
            help=(
                "Link OBJECTS (default: the built-in workload) in every order, run each REPEAT "
                "times."
            ),
            rows=("perm", "rep"),
            tests=SuiteRuns(
                tiny="--permutations 2 --repeat 2 --no-rt",
                changed=("--repeat", "3", "repeat"),
                lasting="--permutations 2 --repeat 1000 --no-rt",
            ),
        ),
        Experiment(
            name="compare",
            module="perflab.lab.compare",
            verb="compare",
            weighs_change=True,
            columns=frozenset({"env_size", "setup", "side", "status", "ticks"}),
            points=("side", "env_size", "link_order"),
            help=(
                "Run A and B interleaved in random setups; report B/A per setup and over all of "
                "them."
            ),
            rows=("setup", "rep", "side"),
            tests=SuiteRuns(
                tiny="true true --setups 2 --repeat 3 --no-rt",
                changed=("--repeat", "4", "repeat"),
                lasting='"{worker} 0 1000 2" "{worker} 0 2000 2" --setups 4 --repeat 200 --no-rt',
            ),
        ),
        Experiment(
            name="memcpy",
            module="perflab.lab.memcpy",
            verb="sweep memcpy",
            columns=frozenset({"kernel", "size", "ticks", "ticks_per_byte"}),
            points=("size",),
            value="ticks",
            defines=("trials", "align", "offset"),
            conditions=("kernel",),
            help=(
                "Copy time vs size, 32 steps per octave, the minimum of --trials; cache knees "
                "found."
            ),
            rows=("size",),
            tests=SuiteRuns(
                tiny="--max 4K --trials 2 --no-mlock",
                api={"max_bytes": 256, "trials": 1, "lock": False},
                changed=("--trials", "3", "trials"),
                lasting="--max 32M --trials 20 --no-mlock",
            ),
        ),
        Experiment(
            name="pagefault",
            module="perflab.lab.pagefault",
            verb="run pagefault",
            columns=frozenset({"condition", "pages", "rep", "ticks_per_page"}),
            points=("condition",),
            value="ticks_per_page",
            defines=("pages",),
            help="Ticks per page: first touch (a fault each) vs touching again vs mlock'ed memory.",
            rows=("rep", "condition"),
            tests=SuiteRuns(
                tiny="--pages 4 --reps 2",
                api={"pages": 2, "reps": 1},
                changed=("--reps", "3", "reps"),
                lasting="--pages 1024 --reps 800",
            ),
        ),
        Experiment(
            name="trig",
            module="perflab.lab.trig",
            verb="run trig",
            columns=frozenset({"call", "mode", "rep", "ticks"}),
            points=("call", "mode"),
            value="ticks",
            help="Ticks of libm calls (default sin(1.0) tan(1.0) sin(0.0)), timer cost subtracted.",
            rows=("mode", "rep", "position"),
            tests=SuiteRuns(
                tiny="--repeat 3",
                api={"call_texts": ["sin(1.0)"], "repeat": 2},
                changed=("--repeat", "4", "repeat"),
                lasting="--cold 600 --repeat 10",
            ),
        ),
        Experiment(
            name="cswitch",
            module="perflab.lab.cswitch",
            verb="run cswitch",
            columns=frozenset(
                {"alone_us_each", "cswitch_us_each", "placement", "realtime", "rt_applied"}
            ),
            points=("placement", "realtime"),
            value="cswitch_us_each",
            defines=("n",),
            help="N one-byte write+read alone, N round trips with a child, and the difference.",
            rows=("placement", "realtime", "rep"),
            tests=SuiteRuns(
                tiny="50 --reps 1 --no-rt --cpu {cpu}",
                api={"n": 20, "reps": 1, "realtime": False, "cpus": ["{cpu}"]},
                changed=("--reps", "2", "reps"),
                lasting="5000 --reps 8 --no-rt",
            ),
        ),
        Experiment(
            name="syscalls",
            module="perflab.lab.syscalls",
            verb="run syscalls",
            columns=frozenset({"call", "ns", "rep", "ticks"}),
            points=("call",),
            value="ticks",
            defines=("directory",),
            help="Cost of getpid, open+close, read/write of 4 KiB, stat... in ticks and µs.",
            rows=("call", "rep"),
            tests=SuiteRuns(
                tiny="--call getpid --trials 100 --trim 5",
                api={"calls": ["getpid"], "trials": 25},
                changed=("--trials", "101", "trials"),
                lasting="--trials 150000",
            ),
        ),
        Experiment(
            name="core-vs-ht",
            module="perflab.lab.threads.core_vs_ht",
            verb="run core-vs-ht",
            columns=frozenset({"cpu_ns", "label", "placement", "threads", "wall_ns"}),
            points=("placement", "threads"),
            value="cpu_ns",
            defines=("loops",),
            help=(
                "1 thread, then 2 released together: CPU and wall time per placement "
                "(cputime_core_vs_ht)."
            ),
            rows=("placement", "rep", "threads", "thread"),
            tests=SuiteRuns(
                tiny="-l 1 -p {cpu}",
                api={"loops": 1, "cpus": ["{cpu}"]},
                changed=("-l", "2", "loops"),
                lasting="-l 20 --repeat 20",
            ),
        ),
        Experiment(
            name="threads",
            module="perflab.lab.threads.thread_count",
            verb="sweep threads",
            columns=frozenset(
                {"bytes", "cpu_ns", "end_ns", "loops", "release_ns", "rep", "threads"}
            ),
            points=("threads",),
            value="cpu_ns",
            defines=("kernel", "loops", "size"),
            help=(
                "Throughput, speedup, efficiency and CPU utilisation vs thread count (easyperf): "
                "of a built-in kernel, or of your program given after -- with {threads} where its "
                "count goes."
            ),
            rows=("threads", "rep", "thread"),
            tests=SuiteRuns(
                tiny="--max 1 -l 1 --repeat 1",
                api={"max_threads": 1, "loops": 1, "repeat": 1},
                changed=("-l", "2", "loops"),
                lasting="--max {ncpus} -l 40 --repeat 40",
            ),
        ),
        Experiment(
            name="threads-program",
            module="perflab.lab.threads.program",
            verb="sweep threads",
            columns=frozenset({"rep", "status", "stime_ns", "threads", "utime_ns", "wall_ns"}),
            points=("threads",),
            value="wall_ns",
            rows=("threads", "rep"),
            tests=SuiteRuns(
                tiny="--threads 1,2 --repeat 2 --oversubscribe -- true {threads}",
                changed=("--repeat", "3", "repeat"),
                lasting="--threads 1,2 --repeat 100 --oversubscribe -- {worker} {threads} 1000 20",
            ),
        ),
        Experiment(
            name="fauxplat",
            module="perflab.lab.threads.fauxplat",
            verb="run fauxplat",
            columns=frozenset({"condition", "fauxplat_per_s", "fauxplat_wall_per_s"}),
            points=("condition",),
            value="fauxplat_per_s",
            defines=("kernel", "loops", "size"),
            help=(
                "FauxPlat/sec (loops / CPU second) alone and under each perturbation (default: "
                "cpu, cache and rt hogs on --cpu), with its spread and its change vs alone."
            ),
            rows=("rep", "condition"),
            tests=SuiteRuns(
                tiny="-l 1 --repeat 1 --cpu {cpu} --perturb cpu@{cpu}",
                api={"loops": 1, "repeat": 1, "cpu": "{cpu}", "perturb": []},
                changed=("-l", "2", "loops"),
                lasting="-l 20 --repeat 30 --cpu {cpu} --perturb cpu@{cpu}",
            ),
        ),
        Experiment(
            name="counters",
            module="perflab.lab.counters",
            verb="counters",
            columns=frozenset({"count", "event", "kind", "status"}),
            points=("event",),
            value="count",
            ok="counts",
            help=(
                "List the perf events that count here (with a sample count), or count COMMAND "
                "(`perflab counters -- make -j2`) with every thread and child it starts."
            ),
            tests=SuiteRuns(
                tiny="-e task-clock -- true",
                api={},
                one_measurement=(
                    "without a command it lists the events; with one it counts a single run of "
                    "it and exits with its status, as perf stat does"
                ),
            ),
        ),
        Experiment(
            name="clocks",
            module="perflab.lab.clocks",
            verb="clocks",
            columns=frozenset({"method", "ns", "rep", "ticks"}),
            points=("method",),
            value="ns",
            help=(
                "Resolution, value and read cost of every clock and TSC method; TSC trust verdict."
            ),
            tests=SuiteRuns(
                tiny="--samples 20",
                one_measurement=(
                    "one C loop per clock, well under a second at the default --samples; its "
                    "verdicts need every clock at once (a --cluster campaign is journaled by host)"
                ),
            ),
        ),
        Experiment(
            name="profile",
            module="perflab.lab.profile",
            verb="profile",
            columns=frozenset({"blocked_ns", "comm", "cpu_ns", "lifetime_ns", "pid", "tid"}),
            points=("comm",),
            value="cpu_ns",
            help="Where each thread of COMMAND spends its time: CPU, run-queue wait, blocked.",
            tests=SuiteRuns(
                tiny="-- sleep 0.1",
                one_measurement="one profiled run of COMMAND, its threads sampled while it runs",
            ),
        ),
        Experiment(
            name="bisect",
            module="perflab.lab.bisect",
            verb="bisect",
            columns=frozenset({"newer", "older", "ratio", "step", "verdict"}),
            points=("newer",),
            value="ratio",
            help="Find the first commit between GOOD and BAD whose benchmark is slower than its "
            "parent's.",
            tests=SuiteRuns(
                tiny='{good} {bad} --repo {repo} --build "cc -O1 -o prog prog.c" --run ./prog '
                "--setups 4 --repeat 3",
                one_measurement="each comparison is saved as it ends; tests/test_bisect.py stops "
                "one between two and resumes it",
            ),
        ),
        Experiment(
            name="spin-cost",
            module="perflab.lab.spin_cost",
            verb="run spin-cost",
            columns=frozenset({"sample", "ticks", "turns"}),
            points=("turns",),
            value="ticks",
            help="Ticks per turn of the core's spin loop, at 1000 to 8000 turns.",
            tests=SuiteRuns(
                tiny="--samples 3",
                api={"turns": (100, 200), "samples": 3},
                one_measurement="one short loop per length, well under a second at its default",
            ),
        ),
        Experiment(
            name="contention",
            module="perflab.lab.contention",
            verb=None,
            columns=frozenset({"blocked_pct", "kind", "rep", "threads", "utilisation", "wall_ms"}),
            points=("kind", "threads"),
            value="wall_ms",
            tests=SuiteRuns(
                tiny="",
                api={"threads": [2], "kinds": ["mutex"], "iterations": 200, "sample_hz": None},
                one_measurement=(
                    "one run of the built-in workload per (kind, threads), through the Python "
                    "API only (contention.run; `profile --workload` writes a profile file)"
                ),
            ),
        ),
    )
}


def get(name: str) -> Experiment:
    """The experiment a result names; one line naming the known ones when it is none of them."""
    if name not in EXPERIMENTS:
        known = ", ".join(sorted(EXPERIMENTS))
        raise PerflabError(f"unknown experiment {name!r}; perflab knows {known}")
    return EXPERIMENTS[name]


def describe(name: str) -> str:
    """How a user makes a result of `name`: its verb, with the experiment's name where two share
    the verb, and --cluster for a campaign ("sweep threads (threads-program)")."""
    base = name.removesuffix(" campaign")
    e = EXPERIMENTS.get(base)
    if e is None or e.verb is None:
        said = base
    elif sum(other.verb == e.verb for other in EXPERIMENTS.values()) > 1:
        said = f"{e.verb} ({e.name})"
    else:
        said = e.verb
    return f"{said} --cluster" if base != name else said


def recognise(columns: set[str]) -> Experiment | None:
    """The experiment whose columns a frame without metadata has (the most specific one)."""
    fits = [e for e in EXPERIMENTS.values() if e.columns <= columns]
    return max(fits, key=lambda e: len(e.columns)) if fits else None
