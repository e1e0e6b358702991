"""perflab bisect: the first commit between GOOD and BAD that made a benchmark slower, each
step a layout-randomised comparison (the compare engine: environment size, heap offset and
ASLR drawn per layout, A/B pairs interleaved), so that a commit that only moves code or data
is not taken for a slower one. The error rate asked (--confidence) is split over the most
comparisons the search may make (Bonferroni), and said.

Steps: GOOD against BAD first (BAD not shown slower: nothing to bisect); then the commit
nearest the middle of the range still open, compared with the newest commit judged like GOOD
(slower: like BAD) and, if not slower, with the oldest judged like BAD (BAD slower than it:
like GOOD); a comparison that shows neither way draws as many layouts again, up to LOOKS looks
(--budget sets how many runs a comparison may make), unless its interval already lies below
the step GOOD against BAD showed (it cannot hold that step); still neither shown, the commit is
unclear and the search tries its neighbour, as git bisect skips a commit; a commit that does
not build is skipped so. No single commit found: how many layouts the step would need is said.
One row per comparison, saved after each: Ctrl-C keeps the finished ones, and --resume goes on
from them."""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perflab import errors
from perflab.analysis.summary import Summary, Table
from perflab.core import files
from perflab.core.lazy import pd
from perflab.errors import PerflabError
from perflab.lab.bisect import builds, commits
from perflab.plan import controls as ctl
from perflab.plan import metrics
from perflab.plan.commits import CommitPlan
from perflab.plan.experiment import reads_frame
from perflab.store import filelock, results
from perflab.system import provenance

if TYPE_CHECKING:
    from matplotlib.figure import Figure

RANDOMIZE = builds.RANDOMIZE + builds.PLACED  # what a comparison draws where it can relink
COLUMNS = ("step", "older", "newer", "position", "ratio", "ci_low", "ci_high", "verdict",
           "runs", "subject", "date", "placement", "code_share", "environment_share")  # fmt: skip
NOT_SLOWER = 3  # the exit status when BAD is not shown slower than GOOD
UNRESOLVED = 4  # the exit status when the search ends without a single commit
SKIPS = ("does not build", "does not run")  # a commit's rows that hold no comparison
# An unclear comparison draws as many layouts again, up to six looks, each decided at a sixth
# of the comparison's error rate (optional stopping, paid for); one whose interval lies below
# the step GOOD against BAD showed stops there. On a 24-commit lz4 history whose one slower
# commit reads +4 %, three looks left 5 of 10 Zen 5 bisects without a commit, the code's
# placement spreading a layout's B/A (benchmarks/history_bisect.py).
LOOKS = 6
LOOKS_BEFORE = 3  # the looks of a record saved before --budget, which did not say them
SEED_STEP = 7919  # a later look's seed: other layouts
CONTROL_FLAGS = {"cpus": "--cpu", "timeout": "--timeout", "rt": "--rt/--no-rt"}


def most_comparisons(commits_between: int) -> int:
    """The most comparisons a search over this many commits may make: GOOD against BAD, then
    two per halving, and as many again for unclear or unbuildable neighbours."""
    return 1 + 4 * max(1, math.ceil(math.log2(commits_between + 1)))


@ctl.typed_arguments
def bisect(
    good: str,
    bad: str,
    build: Sequence[str],
    run: Sequence[str],
    *,
    repo: str | os.PathLike[str] | None = None,
    confidence: float = 0.95,
    setups: int = CommitPlan.setups,
    repeat: int = CommitPlan.repeat,
    seed: int = CommitPlan.seed,
    metric: str = "time",
    budget: int | None = None,
    output: str | os.PathLike[str] | None = None,
    resume: bool = False,
    controls: Mapping[str, Any] | None = None,  # values typed by ctl.commit_controls
    warn: Callable[[str], None] = errors.warn,
    say: Callable[[str], None] = lambda line: None,
) -> pd.DataFrame:
    """Bisect GOOD..BAD for the first commit whose `run` is slower than its parent's (reads
    more of `metric`: compare's metrics, time by default), each commit built by `build`
    (argument lists, no shell); one row per comparison with its metadata (first_slower: the
    full sha or None). budget: the most runs one comparison may make, its looks of
    `setups` x `repeat` pairs each (default LOOKS looks). controls: how the children run
    (cpus, timeout, rt, as compare's). say(line) hears each step as it ends."""
    if not 0.5 <= confidence < 1:
        raise PerflabError(f"--confidence must be in [0.5, 1), not {confidence}")
    if not build or not run:
        raise PerflabError("--build and --run each need a command")
    (metric,) = metrics.check(metric, "bisect")
    CommitPlan(setups=setups, repeat=repeat, seed=seed).check()
    given = ctl.commit_controls(controls)
    per_look = 2 * setups * repeat
    if budget is not None and budget < per_look:
        raise PerflabError(f"--budget {budget} is less than one look at a comparison (--setups "
                           f"{setups} x --repeat {repeat} pairs: {per_look} runs)")  # fmt: skip
    looks = LOOKS if budget is None else budget // per_look
    where = commits.toplevel(repo)
    span = commits.between(where, commits.resolve(where, good), commits.resolve(where, bad))
    each = 1 - (1 - confidence) / most_comparisons(len(span) - 1)
    meta = {
        **provenance.metadata(),
        "experiment": "bisect",
        "repo": str(where),
        "good": span[0].sha,
        "bad": span[-1].sha,
        "build": list(build),
        "run": list(run),
        "confidence": confidence,
        "confidence_each": each,
        "setups": setups,
        "repeat": repeat,
        "seed": seed,
        "metric": metric,
        "looks": looks,
        "randomize": list(RANDOMIZE),
        "controls": {k: list(v) if isinstance(v, tuple) else v for k, v in given.items()},
        "commits": [c.__dict__ for c in span],
    }
    with filelock.held(output) if output is not None else contextlib.nullcontext():
        return _run(where, span, build, run, each, setups, repeat, seed, metric, looks, meta,
                    output, resume, warn, say)  # fmt: skip


def _run(where: Path, span: list[commits.Commit], build: Sequence[str], run: Sequence[str],
         each: float, setups: int, repeat: int, seed: int, metric: str, looks: int,
         meta: dict[str, Any], output: str | os.PathLike[str] | None, resume: bool,
         warn: Callable[[str], None], say: Callable[[str], None]) -> pd.DataFrame:  # fmt: skip
    """bisect's search, its record held for it (another bisect of the same -o is refused)."""
    evidence = files.private_dir(f"{output}.runs") if output is not None else None
    if evidence is not None and not resume:  # another bisect's runs: not this one's evidence
        for old in evidence.glob("step-*.parquet"):
            old.unlink()
    done, before = _resumed(output, meta, evidence) if resume else ([], {})
    search = _Search(where, span, list(build), list(run), each, setups, repeat, seed, metric,
                     looks, done, ctl.commit_controls(meta["controls"]), evidence,
                     before)  # fmt: skip
    rows = list(done)
    try:
        for row in search.steps():
            rows.append(row)
            say(_step_line(row))
            if output is not None:
                results.save(_frame(rows, meta | search.outcome(False)), output)
    except KeyboardInterrupt:
        if output is not None:
            results.save(_frame(rows, meta | search.outcome(False)), output)
            warn(f"stopped: {len(rows)} comparisons kept in {output}; complete it with "
                 f"--resume {output}")  # fmt: skip
        raise
    df = _frame(rows, meta | search.outcome(True))
    if output is not None:
        results.save(df, output)
    return df


def _frame(rows: list[dict[str, Any]], meta: dict[str, Any]) -> pd.DataFrame:
    return results.attach(pd.DataFrame(rows, columns=list(COLUMNS)), meta)


def _resumed(output: str | os.PathLike[str] | None, meta: dict[str, Any],
             evidence: Path | None) -> tuple[list[dict], dict[str, Any]]:  # fmt: skip
    """The comparisons a saved bisect holds, when it bisected the same commits the same way,
    each decided again from its runs (FILE.runs/step-N.parquet), and what its metadata says of
    their code placement (placement, relink_s), which the resumed record keeps."""
    if output is None or not Path(output).exists():
        raise PerflabError("--resume needs the file a stopped bisect saved (-o FILE)")
    old = results.load(output)
    saved = results.metadata(old)
    saved = {"metric": "time", "looks": LOOKS_BEFORE,  # saved before --metric, --budget, placement
             "randomize": list(builds.RANDOMIZE)} | saved  # fmt: skip
    for k in ("experiment", "good", "bad", "build", "run", "setups", "repeat", "seed",
              "confidence", "metric", "looks", "randomize"):  # fmt: skip
        if saved.get(k) != meta[k]:
            raise PerflabError(f"{output}: refusing to resume a bisect with another {k} "
                               f"(recorded {saved.get(k)!r}, asked {meta[k]!r})")  # fmt: skip
    given = saved.get("controls")
    recorded: dict[str, Any] = given if isinstance(given, dict) else {}
    asked: dict[str, Any] = meta["controls"]
    for k in sorted(set(recorded) | set(asked)):  # how the children ran
        if recorded.get(k) != asked.get(k):
            was, now = (repr(v) if v is not None else "the default"
                        for v in (recorded.get(k), asked.get(k)))  # fmt: skip
            raise PerflabError(f"{output}: refusing to resume a bisect whose runs ran with "
                               f"another {CONTROL_FLAGS.get(k, k)} (recorded {was}, asked "
                               f"{now})")  # fmt: skip
    rows = [dict(r) for r in old.to_dict("records")]
    shas = [c["sha"] for c in meta["commits"]]
    for r in rows:
        if not _follows(r, shas):
            raise PerflabError(f"{output}: step {r.get('step')} reads {r.get('verdict')!r} of "
                               f"{str(r.get('newer'))[:10]} against {str(r.get('older'))[:10]}, "
                               "which its commits' order, B/A and interval do not give "
                               f"({r.get('ratio')}, {r.get('ci_low')}-{r.get('ci_high')}): the "
                               "record was edited; bisect again without --resume")  # fmt: skip
        _decided_again(r, evidence, meta, output)
    placed = saved.get("placement")
    return rows, {"placement": [str(x) for x in placed] if isinstance(placed, list) else [],
                  "relink_s": _seconds(saved.get("relink_s"))}  # fmt: skip


def _seconds(value: object) -> float:
    """A recorded number of seconds, 0 where the record holds none (or not a number)."""
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else 0.0


def _decided_again(row: dict[str, Any], evidence: Path | None, meta: dict[str, Any],
                   output: str | os.PathLike[str] | None) -> None:  # fmt: skip
    """A saved comparison's verdict and B/A made again from its kept runs, or one line."""
    if row.get("verdict") in SKIPS:
        return
    path = (evidence or Path(f"{output}.runs")) / f"step-{row.get('step')}.parquet"
    again = f"the record was edited, or its runs ({path}) were; bisect again without --resume"
    try:
        runs = results.load(path)
    except PerflabError as exc:
        raise PerflabError(f"{output}: step {row.get('step')}'s runs cannot be read ({exc}): "
                           "bisect again without --resume") from None  # fmt: skip
    level = 1 - (1 - meta["confidence_each"]) / meta["looks"]
    got, verdict = decided(runs, meta["metric"], level)
    same = (
        verdict == row.get("verdict")
        and len(runs) == row.get("runs")
        and math.isclose(
            got.get("ratio", math.nan), float(row.get("ratio", math.nan)), rel_tol=1e-9
        )
    )
    if not same:
        raise PerflabError(f"{output}: step {row.get('step')} reads {row.get('verdict')!r} at "
                           f"B/A {row.get('ratio')}, its runs {verdict!r} at "
                           f"{got.get('ratio', math.nan)}: {again}")  # fmt: skip


def decided(both: pd.DataFrame, metric: str, level: float) -> tuple[dict[str, Any], str]:
    """A comparison's runs decided on the metric at this level: compare's numbers, and the
    verdict bisect reads from them (slower, faster, same, or unclear)."""
    from perflab.lab.compare.metrics import decide

    got = decide(both, metric, confidence=level)
    lo, hi = got.get("ci_low", math.nan), got.get("ci_high", math.nan)
    verdict = "slower" if lo > 1 else "faster" if hi < 1 else "unclear"
    if got.get("same") or (verdict == "unclear" and got.get("exact") and lo == hi):
        verdict = "same"
    return got, verdict


def _follows(row: dict[str, Any], shas: list[str]) -> bool:
    """Whether a saved row's verdict is what its interval decides, between commits of this
    bisect in their order (the newer at the position the row names): a resume takes no
    verdict its numbers or commits do not carry."""
    if row.get("older") not in shas or row.get("newer") not in shas:
        return False
    older, newer = shas.index(row["older"]), shas.index(row["newer"])
    if row.get("position") != newer:
        return False
    verdict = row.get("verdict")
    if verdict in ("does not build", "does not run"):
        return older == newer
    if older >= newer:
        return False
    try:
        lo, hi = float(row["ci_low"]), float(row["ci_high"])
    except (KeyError, TypeError, ValueError):
        return False
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return False
    if verdict == "slower":
        return lo > 1
    if verdict == "faster":
        return hi < 1
    return verdict in ("unclear", "same") and lo <= 1 <= hi


class _Search:
    """Where the search stands: judged commits by position in the span, the range still open,
    the comparisons made (as rows) and the builds."""

    def __init__(self, repo: Path, span: list[commits.Commit], build: list[str],
                 run: list[str], each: float, setups: int, repeat: int, seed: int,
                 metric: str, looks: int, done: list[dict],
                 controls: dict[str, Any], evidence: Path | None,
                 before: dict[str, Any]) -> None:  # fmt: skip
        self.repo, self.span, self.build, self.run = repo, span, build, run
        self.each, self.setups, self.repeat, self.seed = each, setups, repeat, seed
        self.metric, self.looks, self.controls = metric, looks, controls
        self.evidence = evidence  # where each comparison's runs are kept (FILE.runs), if -o
        self.before = before  # the resumed record's placement and relink_s
        self.made = {(r["older"], r["newer"]): r for r in done}
        self.count = len(done)  # comparisons and skips so far: the next row's step
        self.good, self.bad = 0, len(span) - 1
        self.skipped: set[int] = set()
        self.builds: dict[int, builds.Build] = {}
        self.placements: list[builds.Placed] = []  # each comparison's sides made here
        self.runs = sum(int(r["runs"]) for r in done)
        self.not_slower = False
        self.first: int | None = None
        self.step_low: float | None = None  # GOOD against BAD's lower bound, once slower

    def steps(self) -> Any:
        """Each new comparison's row, as it ends."""
        row = yield from self._compared(self.good, self.bad)
        if row["verdict"] != "slower":
            self.not_slower = True
            return
        self.step_low = float(row["ci_low"])
        while self.bad - self.good > 1:
            mid = self._next()
            if mid is None:
                return  # every commit left open is unclear or does not build
            if not self._built(mid).ok:
                self.skipped.add(mid)
                yield self._skip_row(mid)
                continue
            older = yield from self._compared(self.good, mid)
            if older["verdict"] == "does not run":  # skipped, as git bisect skips it
                self.skipped.add(mid)
                continue
            if older["verdict"] == "slower":
                self.bad = mid
                continue
            newer = yield from self._compared(mid, self.bad)
            if newer["verdict"] == "does not run":
                self.skipped.add(mid)
            elif newer["verdict"] == "slower":
                self.good = mid
            else:
                self.skipped.add(mid)
        self.first = self.bad

    def _next(self) -> int | None:
        """The open commit nearest the middle, not skipped."""
        open_ = [i for i in range(self.good + 1, self.bad) if i not in self.skipped]
        middle = (self.good + self.bad) / 2
        return min(open_, key=lambda i: (abs(i - middle), i)) if open_ else None

    def _built(self, i: int) -> builds.Build:
        if i not in self.builds:
            self.builds[i] = builds.build(self.repo, self.span[i].sha, self.build)
        return self.builds[i]

    def _compared(self, older: int, newer: int) -> Any:
        """newer against older (B/A), made now or taken from the resumed file."""
        key = (self.span[older].sha, self.span[newer].sha)
        if key in self.made:
            return self.made[key]
        for i in (older, newer):
            made = self._built(i)
            if not made.ok:
                how = "did not build within --build-timeout" if made.timed_out else "does not build"
                raise PerflabError(f"{self.span[i].short} {how} ({made.log}): GOOD and BAD must "
                                   "build")  # fmt: skip
        row = self._compare(older, newer)
        self.made[key] = row
        self.runs += int(row["runs"])
        yield row
        return row

    def _compare(self, older: int, newer: int) -> dict[str, Any]:
        """B/A of the metric over `setups` layouts; unclear, over as many more (other layouts,
        another seed), up to its looks (LOOKS, or as many as --budget holds), each look decided
        at its share of the comparison's error rate. An exact metric that reads the same ends
        the looks: more cannot change it; so does an interval wholly below the step GOOD
        against BAD showed: it cannot hold that step, whichever way more layouts tip it."""
        with builds.relinking(self._built(older), self._built(newer)):
            sides = builds.placed(self._built(older), self._built(newer), self.build, self.run)
            self.placements.append(sides)
            return self._looks(older, newer, sides)

    def _looks(self, older: int, newer: int, sides: builds.Placed) -> dict[str, Any]:
        """_compare's looks at one pair of sides."""
        from perflab.lab import compare

        a, b = sides.a, sides.b
        level = 1 - (1 - self.each) / self.looks
        frames: list[pd.DataFrame] = []
        counted: list[dict[str, Any]] = []  # instructions-exact's counts, one per setup and side
        for look in range(self.looks):
            df = compare.compare(a, b, randomize=sides.randomize, setups=self.setups,
                                 repeat=self.repeat, seed=self.seed + SEED_STEP * look,
                                 per_placement=sides.per_placement(self.setups),
                                 metrics=(self.metric,), progress=False,
                                 warn=errors.warn_once, **self.controls)  # fmt: skip
            timeout = self.controls.get("timeout", builds.RUN_TIMEOUT_S)
            if failed := builds.failed(df, self._built(older), self._built(newer), self.run,
                                       timeout):  # fmt: skip
                sha, why = failed
                if sha in (self.span[0].sha, self.span[-1].sha):
                    raise PerflabError(f"{why}: GOOD and BAD must run")
                i = older if sha == self.span[older].sha else newer
                self.skipped.add(i)
                row = self._row(i, i, math.nan, math.nan, math.nan, "does not run", len(df))
                return row | {"subject": f"{self.span[i].subject}: {why}"}
            shift = self.setups * look
            frames.append(df.assign(setup=df["setup"] + shift,
                                    placement=df["placement"] + shift))  # fmt: skip
            meta = results.metadata(df)
            counted += [c | {"setup": c["setup"] + shift}
                        for c in meta.get("instructions_exact") or []]  # fmt: skip
            both = results.attach(
                pd.concat(frames, ignore_index=True),
                meta | ({"instructions_exact": counted} if counted else {}),
            )
            got, verdict = decided(both, self.metric, level)
            ratio = got.get("ratio", math.nan)
            lo, hi = got.get("ci_low", math.nan), got.get("ci_high", math.nan)
            below = self.step_low is not None and hi < self.step_low
            if verdict != "unclear" or below:
                break
        if "ratio" not in got:  # the metric could not be read from these runs
            raise PerflabError(f"--metric {self.metric}: {got['conclusion']}")
        row = self._row(older, newer, ratio, lo, hi, verdict, len(both))
        if self.evidence is not None:  # what a resume decides this step from again
            results.save(both, self.evidence / f"step-{row['step']}.parquet")
        drawn = [d for d in builds.PLACED if d in sides.randomize]
        shares = got.get("components") or {}
        return row | {"placement": ",".join(drawn) or "fixed",
                      "code_share": shares.get("code placement", math.nan),
                      "environment_share": shares.get("environment", math.nan),
                      "below_step": verdict == "unclear" and below}  # fmt: skip

    def _skip_row(self, i: int) -> dict[str, Any]:
        return self._row(i, i, math.nan, math.nan, math.nan, "does not build", 0)

    def _row(self, older: int, newer: int, ratio: float, lo: float, hi: float, verdict: str,
             runs: int) -> dict[str, Any]:  # fmt: skip
        c = self.span[newer]
        self.count += 1
        return {"step": self.count - 1, "older": self.span[older].sha, "newer": c.sha,
                "position": newer, "ratio": ratio, "ci_low": lo, "ci_high": hi,
                "verdict": verdict, "runs": runs, "subject": c.subject,
                "date": c.date, "placement": "", "code_share": math.nan,
                "environment_share": math.nan}  # fmt: skip

    def outcome(self, finished: bool) -> dict[str, Any]:
        """What the result's metadata says of the search so far."""
        first = self.span[self.first].sha if finished and self.first is not None else None
        return {
            "complete": finished,
            "first_slower": first,
            "not_slower": self.not_slower,
            "open": [c.sha for c in self.span[self.good + 1 : self.bad]] if finished else [],
            "builds": sum(not b.reused for b in self.builds.values()),
            "builds_reused": sum(b.reused for b in self.builds.values()),
            "skipped": [self.span[i].sha for i in sorted(self.skipped)],
            "total_runs": self.runs,
            "placement": list(
                dict.fromkeys(
                    [*self.before.get("placement", []), *(p.placement for p in self.placements)]
                )
            ),
            "relink_s": max(
                [self.before.get("relink_s", 0.0), *(p.relink_s for p in self.placements)]
            ),
        }


def _step_line(row: dict[str, Any]) -> str:
    """One comparison as it ends, for the terminal."""
    if row["verdict"] == "does not build":
        return f"{row['newer'][:10]} does not build: skipped ({row['subject']})"
    if row["verdict"] == "does not run":
        return f"{row['newer'][:10]} does not run: skipped ({row['subject']})"
    fixed = " (code placement fixed)" if row.get("placement") == "fixed" else ""
    below = ", below the step GOOD against BAD showed" if row.get("below_step") else ""
    return (f"{row['newer'][:10]} vs {row['older'][:10]}: B/A {row['ratio']:.3f} "
            f"({row['ci_low']:.3f}-{row['ci_high']:.3f}) {row['verdict']}{below}"
            f"{fixed}")  # fmt: skip


@reads_frame("bisect")
def summary(frame: pd.DataFrame, meta: dict[str, Any]) -> Summary:
    """The first slower commit with its B/A against its parent, or why there is none; each
    comparison; what it took."""
    each = meta.get("confidence_each", math.nan)
    metric = meta.get("metric", "time")
    slower = "slower" if metric == "time" else f"higher on {metric}"
    first_is = "first slower commit" if metric == "time" else f"first commit {slower}"
    lines = [f"bisect of {meta['good'][:10]}..{meta['bad'][:10]} in {meta.get('repo')}: "
             f"{len(meta.get('commits', [])) - 1} commits, each comparison at {each:.2%} so "
             f"that all together hold {meta['confidence']:.0%}"]  # fmt: skip
    relink = float(meta.get("relink_s") or 0.0)
    cost = f" ({relink:.2f} s a link at most)" if relink else ""
    lines += [f"layouts: environment size, heap offset and ASLR drawn per layout; {p}"
              + ("" if p.startswith("code placement fixed") else cost)
              for p in meta.get("placement", [])]  # fmt: skip
    values: dict[str, Any] = {"first_slower": meta.get("first_slower"), "ratio": None,
                              "interval": None, "builds": meta.get("builds"),
                              "placement": meta.get("placement", [])}  # fmt: skip
    compared = frame[~frame["verdict"].isin(SKIPS)]
    first = meta.get("first_slower")
    if meta.get("not_slower") and len(compared):
        row = compared.iloc[0]
        values |= {"ratio": float(row["ratio"]), "interval": [row["ci_low"], row["ci_high"]]}
        lines.append(f"BAD is not shown {slower} than GOOD: B/A {row['ratio']:.3f} "
                     f"({row['ci_low']:.3f}-{row['ci_high']:.3f}); nothing to bisect")  # fmt: skip
    elif first:
        against = compared[(compared["newer"] == first) & (compared["verdict"] == "slower")]
        parent = next((c for c, n in zip(meta["commits"], meta["commits"][1:], strict=False)
                       if n["sha"] == first), None)  # fmt: skip
        direct = against[against["older"] == (parent or {}).get("sha")]
        row = (direct if len(direct) else against).iloc[-1]
        c = next(c for c in meta["commits"] if c["sha"] == first)
        values |= {"ratio": float(row["ratio"]), "interval": [row["ci_low"], row["ci_high"]]}
        lines.append(f"{first_is}: {first} {c['subject']!r} ({c['date']}): B/A "
                     f"{row['ratio']:.3f} ({row['ci_low']:.3f}-{row['ci_high']:.3f}) against "
                     f"{row['older'][:10]}")  # fmt: skip
    elif meta.get("complete"):
        lines.append("no single commit found: the commits left open are unclear or do not "
                     f"build ({', '.join(s[:10] for s in meta.get('open', []))})")  # fmt: skip
        if needed := layouts_needed(compared, meta):
            values["layouts_needed"] = needed
            per_look = int(meta["setups"])
            runs = 2 * int(meta["repeat"]) * per_look * math.ceil(needed / per_look)
            lines.append(f"too few layouts for this step: the widest unclear comparison would "
                         f"need about {needed} to show the step GOOD against BAD read (B/A "
                         f"{compared.iloc[0]['ratio']:.3f}) in 19 comparisons of 20; --budget "
                         f"{runs} allows that many")  # fmt: skip
    else:
        lines.append(f"PARTIAL: {len(frame)} comparisons kept; complete it with --resume")
    lines.append(f"{len(compared)} comparison{'' if len(compared) == 1 else 's'}, "
                 f"{meta.get('total_runs', 0)} runs, "
                 f"{meta.get('builds', 0)} builds ({meta.get('builds_reused', 0)} reused), "
                 f"{len(meta.get('skipped', []))} commits skipped")  # fmt: skip
    shares = compared.get("code_share", pd.Series(dtype=float)).dropna()
    if len(shares):
        env = compared["environment_share"].dropna()
        lines.append(f"of the variance of a layout's B/A, the code placement explains a median "
                     f"{shares.median():.0%} and the environment's layout {env.median():.0%} "
                     "(setups in pairs sharing a code placement; each comparison's in "
                     "code_share)")  # fmt: skip
        values["code_share"] = float(shares.median())
    shown = frame.assign(newer=frame["newer"].str[:10], older=frame["older"].str[:10])
    shared = ["code_share"] if "code_share" in frame else []  # a record from before it: none
    columns = ["step", "newer", "older", "ratio", "ci_low", "ci_high", "verdict", "runs",
               "placement", *shared, "subject"]  # fmt: skip
    table = Table("steps", "each comparison: newer (B) against older (A)", shown[columns],
                  "{:,.3f}")  # fmt: skip
    return Summary(lines, [table], values, lambda p: plot(frame, meta, p))


def layouts_needed(compared: pd.DataFrame, meta: dict[str, Any]) -> int | None:
    """How many layouts the widest unclear comparison would need for its interval to tell
    the step GOOD against BAD showed with 95 % power (its half width shrinking as one over
    the root of the layouts), or None where no comparison was unclear or no step was shown."""
    import numpy as np
    from scipy import stats

    first = compared.iloc[0] if len(compared) else None
    if first is None or first["verdict"] != "slower" or first["newer"] != meta.get("bad"):
        return None
    short = (compared["verdict"] == "unclear") & (compared["ci_high"] >= first["ci_low"])
    unclear = compared[short]  # not those whose interval lay below the step: too few layouts
    step = math.log(float(first["ratio"]))
    if unclear.empty or not step > 0:
        return None
    level = 1 - (1 - float(meta["confidence_each"])) / int(meta.get("looks", LOOKS_BEFORE))
    z = float(stats.norm.ppf(1 - (1 - level) / 2))
    # A true step s reads lo > 1 in 95 % of comparisons where s - h >= z(95 %) h / z.
    allowed = step / (1 + float(stats.norm.ppf(0.95)) / z)
    half = (np.log(unclear["ci_high"].astype(float)) - np.log(unclear["ci_low"].astype(float))) / 2
    layouts = unclear["runs"].astype(float) / (2 * int(meta["repeat"]))
    return math.ceil(float((layouts * (half / allowed) ** 2).max()))


@reads_frame("bisect")
def plot(frame: pd.DataFrame, meta: dict[str, Any], path: Any = None) -> Figure:
    """Each comparison's B/A and interval at the newer commit's place in the history."""
    from perflab.analysis import plot as plt

    fig, ax = plt.figure(figsize=(8, 4.5))
    done = frame[~frame["verdict"].isin(SKIPS)]
    colour = {"slower": plt.COLORS[0], "faster": plt.COLORS[1], "unclear": "#888888"}
    for verdict, g in done.groupby("verdict"):
        r = g["ratio"].to_numpy(float)
        ax.errorbar(g["position"], r, yerr=[r - g["ci_low"].to_numpy(float),
                    g["ci_high"].to_numpy(float) - r], fmt="o", capsize=3,
                    color=colour.get(str(verdict), "#888888"), label=str(verdict))  # fmt: skip
    ax.axhline(1.0, color="black", lw=0.8, ls="--")
    first = str(meta.get("first_slower") or "")
    shas = [c["sha"] for c in meta.get("commits", [])]
    if first in shas:
        ax.axvline(shas.index(first), color=plt.COLORS[0], lw=0.8, ls=":",
                   label=f"first slower {first[:10]}")  # fmt: skip
    if float(done["ci_high"].max()) / max(float(done["ci_low"].min()), 1e-9) > 4:
        ax.set_yscale("log")  # ratios far apart: twice as slow as far from 1 as twice as fast
    if len(shas) <= 30:
        ax.set_xticks(range(len(shas)), [s[:7] for s in shas], rotation=90, fontsize=7)
    ax.set_xlim(-0.5, len(shas) - 0.5)
    ax.set_xlabel(f"commit, in order from GOOD (left) to BAD ({len(shas) - 1} after it)")
    ax.set_ylabel("B / A (newer over older)")
    ax.legend(fontsize=8)
    return plt.save(fig, path, title="perflab bisect")
