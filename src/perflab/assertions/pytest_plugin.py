"""perflab's pytest face: the `perflab` fixture, the `perf` marker and the --perflab-* options.

Loaded in every pytest run once perflab is installed (entry point pytest11), so it imports
nothing heavy until a test asks for the fixture: a stale or missing C core then breaks only
the perf tests, never the rest of a suite. Measuring and deciding live in perflab.assertions.claims.
"""

import datetime as dt
import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # the plugin loads in every pytest run: nothing heavy at import
    import pandas as pd
    from _pytest.terminal import TerminalReporter

    from perflab.assertions.comparison import Comparison

SESSION = pytest.StashKey["PerflabSession"]()
MARKER_KWARGS = ("budget", "confidence")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("perflab", "perflab performance assertions")
    group.addoption(
        "--perflab-budget",
        metavar="BUDGET",
        help="What one perf assertion may spend before it fails as inconclusive: seconds "
        "('2s'), runs per target ('500') or both ('2s,500'). Raise it when assertions come "
        "out inconclusive on a noisy machine. Default: 5s,2000runs.",
    )
    group.addoption(
        "--perflab-confidence",
        metavar="P",
        type=float,
        help="Confidence a perf assertion needs to pass or fail, e.g. 0.99 to claim less "
        "often by mistake, 0.9 to decide sooner. Default: 0.95.",
    )
    group.addoption(
        "--perflab-save",
        metavar="DIR",
        help="Save every measurement of the session to DIR/perflab-<time>.parquet, with the "
        "machine's metadata, to compare runs later (perflab.results.load reads it).",
    )
    group.addoption(
        "--perflab-jobs",
        metavar="N",
        type=int,
        help="Run the children of perflab.program targets N at once, each pinned to its own "
        "CPU (the last N usable; 0: one per CPU); each saved row names its CPU. Default: 1, "
        "one child at a time.",
    )
    group.addoption(
        "--perflab-skip",
        action="store_true",
        help="Skip perf tests (those marked perf or using the perflab fixture), e.g. on "
        "machines too busy to measure.",
    )


class PerflabSession:
    """The session's perf options and comparisons; registered as a plugin for its hooks."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.skip = config.getoption("perflab_skip")
        self.budget = config.getoption("perflab_budget")
        self.confidence = config.getoption("perflab_confidence")
        self.save_dir = config.getoption("perflab_save")
        self.jobs = config.getoption("perflab_jobs")
        self.frames: list[pd.DataFrame] = []
        self.summaries: list[dict[str, Any]] = []
        self.reported: list[tuple[str, Any]] = []
        self.saved: Path | None = None
        self.save_path = self._save_path() if self.save_dir else None
        if self.budget is not None or self.confidence is not None or self.jobs is not None:
            self._validate()

    def _validate(self) -> None:
        """Refuse bad options before any test runs."""
        from perflab.assertions import claims
        from perflab.errors import PerflabError

        try:
            claims.as_budget(self.budget)
        except PerflabError as exc:
            raise pytest.UsageError(f"--perflab-budget: {exc}") from None
        if self.confidence is not None and not 0 < self.confidence < 1:
            raise pytest.UsageError(
                f"--perflab-confidence must be between 0 and 1, not {self.confidence}"
            )
        if self.jobs is not None:
            from perflab.running import timing

            try:
                timing.program_lanes(self.jobs, None)
            except PerflabError as exc:
                raise pytest.UsageError(f"--perflab-jobs: {exc}") from None

    def _save_path(self) -> Path:
        """DIR/perflab-<UTC time>-<xdist worker or pid>.parquet, checked before measuring."""
        from perflab.errors import PerflabError
        from perflab.store import results

        directory = Path(self.save_dir)
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise pytest.UsageError(f"--perflab-save: cannot create {directory}: {exc}") from None
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")
        worker = getattr(self.config, "workerinput", {}).get("workerid")
        name = f"perflab-{stamp}-{worker or os.getpid()}.parquet"
        try:
            return results.check_output(directory / name)
        except PerflabError as exc:
            raise pytest.UsageError(f"--perflab-save: {exc}") from None

    def record(self, node: pytest.Item, comparison: "Comparison") -> None:
        """Keep a comparison for the saved file and show it in the test's report."""
        index = sum(1 for key, _ in node.user_properties if key == "perflab")
        frame = comparison.frame()
        frame.insert(0, "test", node.nodeid)
        frame.insert(1, "index", index)
        self.frames.append(frame)
        self.summaries.append({"test": node.nodeid, "index": index, **comparison.summary()})
        node.user_properties.append(("perflab", comparison.summary()))
        if comparison.passed:
            from perflab.assertions import table

            # A failing comparison's table is the exception message already.
            node.add_report_section("call", "perflab", table.render(comparison))

    def save(self) -> Path | None:
        """Write the session's measurements with metadata; None when nothing was measured."""
        if not self.save_path or not self.frames:
            return None
        import pandas as pd

        from perflab.assertions import claims
        from perflab.store import results
        from perflab.system import provenance

        df = pd.concat(self.frames, ignore_index=True)
        meta = {
            **provenance.metadata(),
            "perflab_budget": str(claims.as_budget(self.budget)),
            "perflab_confidence": self.confidence or claims.DEFAULT_CONFIDENCE,
            "perflab_jobs": 1 if self.jobs is None else self.jobs,
            "comparisons": self.summaries,
        }
        return results.save(results.attach(df, meta), self.save_path)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Collect comparisons from reports: under pytest-xdist they arrive from the workers."""
        if report.when == "call":
            self.reported.extend(
                (report.nodeid, value) for key, value in report.user_properties if key == "perflab"
            )

    def pytest_sessionfinish(self) -> None:
        self.saved = self.save()

    def pytest_terminal_summary(self, terminalreporter: "TerminalReporter") -> None:
        """One line per perf assertion: verdict, estimate, CI, runs."""
        if not self.reported and not self.saved:
            return
        tr = terminalreporter
        tr.section("perflab")
        for nodeid, s in self.reported:
            tr.write_line(
                f"{s['verdict'].upper():<13} {nodeid} {s['assertion']}: {s['estimate']:.4g} "
                f"CI [{s['ci_lo']:.4g}, {s['ci_hi']:.4g}] vs {s['threshold']:.4g}, "
                f"{s['runs']} runs, {s['seconds']:.2f} s"
            )
        if self.saved:
            tr.write_line(f"measurements saved to {self.saved}")
        elif self.save_dir and self.reported:
            tr.write_line(f"measurements saved in {self.save_dir}, one file per xdist worker")


class PerfFixture:
    """What a test receives as `perflab`: the assertions, with the session's budget and
    confidence unless the test's perf marker or the call itself says otherwise."""

    def __init__(
        self,
        node: pytest.Item,
        session: PerflabSession,
        budget: Any = None,
        confidence: float | None = None,
    ) -> None:
        from perflab.assertions import claims
        from perflab.running import timing

        self._node = node
        self._session = session
        self._claims = claims
        self.budget = budget if budget is not None else session.budget
        self.confidence = (
            confidence if confidence is not None else session.confidence
        ) or claims.DEFAULT_CONFIDENCE
        self.target = timing.as_target
        self.c_function = timing.c_function
        self.spin = timing.spin
        self.program = (
            timing.program
            if session.jobs is None
            else functools.partial(timing.program, jobs=session.jobs)
        )
        self.comparisons: list[Comparison] = []

    def _run(
        self,
        check: Callable[..., "Comparison"],
        *args: Any,
        confidence: float | None,
        budget: Any,
        **kwargs: Any,
    ) -> "Comparison":
        __tracebackhide__ = True
        comparison = check(
            *args,
            confidence=confidence or self.confidence,
            budget=budget if budget is not None else self.budget,
            **kwargs,
        )
        self.comparisons.append(comparison)
        self._session.record(self._node, comparison)
        if not comparison.passed:
            raise self._claims.PerfAssertionError(comparison)
        return comparison

    def assert_faster(
        self,
        fast: Any,
        slow: Any,
        min_ratio: float = 1.0,
        confidence: float | None = None,
        budget: Any = None,
        placement_floor: float | None = None,
        metric: str = "time",
    ) -> "Comparison":
        """Pass only when the CI of median(slow)/median(fast) lies above min_ratio (between
        distinct C functions widened by placement_floor, None: this machine's measured one;
        metric="instructions-exact" counts two programs' instructions instead)."""
        __tracebackhide__ = True
        return self._run(
            self._claims.check_faster,
            fast,
            slow,
            min_ratio=min_ratio,
            confidence=confidence,
            budget=budget,
            placement_floor=placement_floor,
            metric=metric,
        )

    def assert_no_slower(
        self,
        candidate: Any,
        baseline: Any,
        tolerance: float = 0.05,
        confidence: float | None = None,
        budget: Any = None,
        placement_floor: float | None = None,
        metric: str = "time",
    ) -> "Comparison":
        """Pass only when the CI of median(candidate)/median(baseline) lies below 1+tolerance
        (placement_floor and metric as in assert_faster)."""
        __tracebackhide__ = True
        return self._run(
            self._claims.check_no_slower,
            candidate,
            baseline,
            tolerance=tolerance,
            confidence=confidence,
            budget=budget,
            placement_floor=placement_floor,
            metric=metric,
        )

    def assert_ticks_below(
        self, fn: Any, limit: float, confidence: float | None = None, budget: Any = None
    ) -> "Comparison":
        """Pass only when the CI of fn's median net ticks per call lies below limit."""
        __tracebackhide__ = True
        return self._run(
            self._claims.check_ticks_below, fn, limit, confidence=confidence, budget=budget
        )


@pytest.fixture
def perflab(request: pytest.FixtureRequest) -> PerfFixture:
    """Performance assertions decided on interleaved runs (see perflab.assertions.claims)."""
    session = request.config.stash[SESSION]
    marker = request.node.get_closest_marker("perf")
    options = dict(marker.kwargs) if marker else {}
    unknown = sorted(set(options) - set(MARKER_KWARGS))
    if unknown or (marker and marker.args):
        pytest.fail(
            f"perf marker takes only keyword arguments {', '.join(MARKER_KWARGS)}; "
            f"got {', '.join(unknown) or repr(marker.args)}",
            pytrace=False,
        )
    return PerfFixture(request.node, session, **options)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "perf(budget=None, confidence=None): a performance test; skipped by --perflab-skip, "
        "its perflab assertions use this budget and confidence",
    )
    session = PerflabSession(config)
    config.stash[SESSION] = session
    config.pluginmanager.register(session, "perflab-session")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test using the fixture as perf (so -m perf selects it); apply --perflab-skip."""
    session = config.stash[SESSION]
    skip = pytest.mark.skip(reason="perf test skipped (--perflab-skip)")
    for item in items:
        if "perflab" in getattr(item, "fixturenames", ()) and not item.get_closest_marker("perf"):
            item.add_marker("perf")
        if session.skip and item.get_closest_marker("perf"):
            item.add_marker(skip)
