"""A project's performance history: `perflab track` measures commits over random layouts into
a store (store.py), `perflab history` reads the series per machine, finds where it changes
(changes.py) and confirms each change or dismisses it with a layout-randomised comparison of
the commits on either side, built and run afresh (bisect's builds and compare's engine), so that
a drift between two tracks or a commit that only moves code or data is not called a change.

The layouts are bisect's (environment size, heap offset, ASLR drawn per layout), drawn from one
seed for every commit, so that commits are measured in the same layouts; each commit runs in
pairs beside one reference commit (the series' first, unless told), and its value is its
ratio to the reference: a host that drifts between tracks (a cloud guest moved whole series
by 35 % between tracks minutes apart) moves both sides of a pair alike.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from perflab import errors
from perflab.analysis.summary import Summary, Table
from perflab.core.lazy import pd
from perflab.errors import PerflabError
from perflab.lab.bisect import builds, commits
from perflab.lab.history import changes
from perflab.lab.history.store import Entry, Store, machine_key, refuse_other
from perflab.plan import controls as ctl
from perflab.plan import metrics
from perflab.plan.commits import CommitPlan, TrackPlan
from perflab.plan.experiment import reads_frame
from perflab.running import childruns
from perflab.store import results
from perflab.system import machine

if TYPE_CHECKING:
    from matplotlib.figure import Figure

MOST_COMMITS = 1000  # a range longer than this is a typo, or a job for several tracks
FAILED = 4  # history's exit status when --fail-above trips
# where a change point is confirmed: between the commits the search names, else one commit
# before or after; each comparison at its share of the history's error rate
PLACES = 3
Z95 = 1.959964  # a commit's value's interval: normal on its log scale
SERIES = ("machine", "position", "sha", "commit", "value", "low", "high", "log_se", "setups",
          "runs", "unit", "reference", "date", "subject")  # fmt: skip


def default_store(repo: Path) -> Path:
    """Where a repository's history lives unless told: .perflab/history at its top."""
    return repo / ".perflab" / "history"


@ctl.typed_arguments
def track(
    revisions: str,
    build: Sequence[str],
    run: Sequence[str],
    *,
    repo: str | os.PathLike[str] | None = None,
    store: str | os.PathLike[str] | None = None,
    reference: str | None = None,
    setups: int = TrackPlan.setups,
    repeat: int = TrackPlan.repeat,
    seed: int = TrackPlan.seed,
    untracked_only: bool = False,
    controls: Mapping[str, Any] | None = None,  # values typed by ctl.commit_controls
    say: Callable[[str], None] = lambda line: None,
) -> tuple[list[Entry], list[str]]:
    """Measure each commit of `revisions` ('A..B', or one revision) in `setups` layouts of
    `repeat` pairs beside the reference commit (`reference`; default: the one this machine's
    series in the store runs beside, else the range's first commit) and add its runs to the
    store: the entries written, and the commits left out (one line each: it does not build, or
    no run of it ended well). untracked_only leaves out the commits this machine has; controls:
    how the children run (cpus, timeout, rt, as compare's)."""
    if not build or not run:
        raise PerflabError("--build and --run each need a command")
    TrackPlan(setups=setups, repeat=repeat, seed=seed).check()
    given = ctl.commit_controls(controls)
    where = commits.toplevel(repo)
    listed = commits.listed(where, revisions, MOST_COMMITS)
    kept = Store(store or default_store(where), create=True, parents=store is None)
    kept.check_writable()
    here = machine_key()
    have = [e for e in kept.entries() if e.machine == here]  # a bad store: said before building
    if untracked_only:
        listed = [c for c in listed if c.sha not in {e.sha for e in have}]
    ref = _reference(where, reference, have, listed)
    if not listed:
        return [], []
    ref_made = builds.build(where, ref, list(build))
    if not ref_made.ok:
        raise PerflabError(f"the reference {ref[:10]} does not build ({ref_made.log}): give "
                           "--reference a commit that builds")  # fmt: skip
    host = {k: str(v) for k, v in machine.identity().items() if k in ("hostname", "cpu_model")}

    def entry(c: commits.Commit) -> Entry:
        return Entry(here, c.sha, commits.parents(where, c.sha), c.subject, c.date, list(build),
                     list(run), seed, 0, 0, host, ref)  # fmt: skip

    by_sha = {e.sha: e for e in have}
    for c in listed:  # a commit kept otherwise, or its file gone bad: said before building
        if c.sha in by_sha:
            refuse_other(by_sha[c.sha], entry(c))
            kept.kept(by_sha[c.sha])
    written, left_out = [], []
    for i, c in enumerate(listed, 1):
        head = f"[{i}/{len(listed)}] {c.short}"
        made = builds.build(where, c.sha, list(build))
        if not made.ok:
            how = "did not build within --build-timeout" if made.timed_out else "does not build"
            left_out.append(f"{head} {how} ({made.log}): left out")
            say(left_out[-1])
            continue
        df = _measure(ref_made, made, build, run, setups, repeat, seed, given)
        value = changes.commit_value(df, side="B")
        if not value["setups"]:
            failed = builds.failed(df, ref_made, made, run,
                                   given.get("timeout", builds.RUN_TIMEOUT_S))  # fmt: skip
            why = failed[1] if failed else f"no run ended well ({childruns.status_counts(df)})"
            why = why.removeprefix(f"{c.sha[:10]}: ")  # the head names the commit already
            left_out.append(f"{head}: {why}: left out")
            say(left_out[-1])
            continue
        ratio = changes.relative(df, value["unit"])["value"]
        beside = "the reference, beside itself" if c.sha == ref else f"beside {ref[:10]}"
        done = kept.add(entry(c), df)
        say(f"{head} {value['value']:,.0f} {value['unit']}, {ratio:.3f}x {beside} "
            f"({done.runs} runs kept, {done.tracks} tracks) {c.subject}")  # fmt: skip
        written.append(done)
    return written, left_out


def _reference(where: Path, asked: str | None, have: list[Entry],
               listed: list[commits.Commit]) -> str:  # fmt: skip
    """The commit every commit of this machine's series runs beside: the one asked, else the
    one its series has (the most used, where a store mixes them), else the range's first."""
    if asked is not None:
        return commits.resolve(where, asked)
    used = [e.reference for e in have if e.reference]
    if used:
        return max(sorted(set(used)), key=used.count)  # a tie: the same one every time
    return listed[0].sha if listed else ""


def _measure(reference: builds.Build, made: builds.Build, build: Sequence[str],
             run: Sequence[str], setups: int, repeat: int, seed: int,
             controls: Mapping[str, Any]) -> pd.DataFrame:  # fmt: skip
    """Runs of two commits: pairs of A and B in each layout drawn, the code placed at random
    where both relink (builds.placed), interleaved so that the host's drift moves both alike;
    the placement in the frame's metadata."""
    from perflab.lab import compare
    from perflab.store import results

    with builds.relinking(reference, made):
        sides = builds.placed(reference, made, build, run)
        df = compare.compare(sides.a, sides.b, randomize=sides.randomize, setups=setups,
                             repeat=repeat, seed=seed, per_placement=sides.per_placement(setups),
                             progress=False, warn=errors.warn_once, **controls)  # fmt: skip
    meta = results.metadata(df) | {"placement": sides.placement, "relink_s": sides.relink_s}
    return results.attach(df, meta)


@ctl.typed_arguments
def history(
    store: str | os.PathLike[str] | None = None,
    *,
    repo: str | os.PathLike[str] | None = None,
    confirm: bool = True,
    confidence: float = 0.95,
    setups: int = CommitPlan.setups,
    repeat: int = CommitPlan.repeat,
    seed: int = CommitPlan.seed,
    metric: str = "time",
    controls: Mapping[str, Any] | None = None,  # values typed by ctl.commit_controls
    say: Callable[[str], None] = lambda line: None,
) -> pd.DataFrame:
    """The series of every machine in the store (of `metric`: time, or a column every tracked
    run records: cpu, maxrss, or a PMU's counters where one counted them), one row per commit
    in history's order (the same positions for every machine), with its change points in the
    metadata: this machine's confirmed or dismissed by comparing the commits either side
    (built from `repo`, each decided at 1 - (1 - confidence) / their count), another
    machine's left unconfirmed; controls: how the confirming comparisons' children run (cpus,
    timeout, rt, as compare's)."""
    if not 0.5 <= confidence < 1:
        raise PerflabError(f"--confidence must be in [0.5, 1), not {confidence}")
    CommitPlan(setups=setups, repeat=repeat, seed=seed).check()
    children = ctl.commit_controls(controls)
    (metric,) = metrics.check(metric, "history")
    given = commits.toplevel(repo) if repo is not None else None  # a bad one: said at once
    kept = Store(store or default_store(given or commits.toplevel(None)))
    entries = kept.entries()
    if not entries:
        raise PerflabError(f"{kept.root}: the store holds no commit yet")
    order, ordered = _order(given, _one_per_sha(entries))
    frames, found, shas = [], [], {}
    for name in sorted({e.machine for e in entries}):
        series = _series(kept, [e for e in entries if e.machine == name], order, metric)
        if series.empty:
            continue
        shas[name] = dict(zip(series["sha"], series["position"], strict=True))
        logs = np.log(series["value"].to_numpy(float))
        sigma = changes.noise(logs, series["log_se"].to_numpy(float))
        for c in changes.steps(series, changes.change_points(logs, sigma)):
            found.append({"machine": name, **c, "sigma": sigma})
        frames.append(series)
    if not frames:
        what = "an ok run" if metric == "time" else (
            f"a run that measured {metric} (a PMU counts cycles and instructions, in programs "
            "that run perflab's probe)"
        )  # fmt: skip
        raise PerflabError(f"{kept.root}: no commit in the store has {what}")
    here = machine_key()
    mine = [c for c in found if c["machine"] == here]
    each = 1 - (1 - confidence) / max(1, PLACES * len(mine))
    where = (given or commits.toplevel(None)) if confirm and mine else None
    for c in found:
        if c["machine"] != here:
            c.update(verdict="unconfirmed", why="measured on another machine")
        elif where is None:
            c.update(verdict="unconfirmed", why="not compared (--no-confirm)")
        else:

            def confirm_at(pair: dict[str, Any]) -> dict[str, Any]:
                return confirm_change(kept, where, pair, entries, setups, repeat, seed, each, say,
                                      metric, children)  # fmt: skip

            c.update(_confirmed_near(c, shas[c["machine"]], found, confirm_at))
    meta = {
        "experiment": "history",
        "store": str(kept.root),
        "this_machine": here,
        "confidence": confidence,
        "confidence_each": each,
        "metric": metric,
        "change_points": found,
        "machines": {e.machine: e.host for e in entries},
        "order": ordered,
    }
    return results.attach(pd.concat(frames, ignore_index=True), meta)


def _order(given: Path | None, entries: list[Entry]) -> tuple[dict[str, int], dict[str, Any]]:
    """Each commit's place in history, and how it was found: the repository's graph (--repo,
    else the one around the current directory) read now, topological, a commit of the range
    the store lacks a gap; commits the repository lacks after them, by their parent links and
    author time, and said; with no repository at all, parent links and author time alone."""
    where = given
    if where is None:
        with contextlib.suppress(PerflabError):
            where = commits.toplevel(None)
    fallback = changes.commit_order(entries)
    if where is None:
        return (
            {e.sha: i for i, e in enumerate(fallback)},
            {"by": "parent links and author time: no repository to read the graph from"},
        )
    listed, lacks = commits.graph_order(where, [e.sha for e in entries])
    kept = {e.sha for e in entries}
    order = {sha: i for i, sha in enumerate(listed) if sha in kept}
    gaps = len(listed) - len(order)
    after = [e.sha for e in fallback if e.sha in lacks]
    order |= {sha: len(listed) + i for i, sha in enumerate(after)}
    said: dict[str, Any] = {"by": f"the repository {where}", "gaps": gaps, "lacking": lacks}
    return order, said


def _confirmed_near(
    change: dict[str, Any],
    positions: dict[str, int],
    found: list[dict[str, Any]],
    confirm_at: Callable[[dict[str, Any]], dict[str, Any]],
) -> dict[str, Any]:
    """The change confirmed where the search placed it, else between the commits one before or
    one after (a commit whose layouts read it near its neighbour moves the search's split by
    one: on the lz4 history, seed 1 put commit 15's change at 15..16), else dismissed there.
    positions: the series' commits, in order, with their places in history."""
    shas = list(positions)
    k = shas.index(change["after"])
    taken = {(c["before"], c["after"]) for c in found}
    first = confirm_at(change)
    if first["verdict"] != "dismissed":
        return first
    for j in (k - 1, k + 1):
        if 0 < j < len(shas) and (shas[j - 1], shas[j]) not in taken:
            moved = change | {"before": shas[j - 1], "after": shas[j]}
            near = confirm_at(moved)
            if near["verdict"] == "confirmed":
                way = "later" if j < k else "earlier"
                return near | {
                    "before": moved["before"],
                    "after": moved["after"],
                    "position": int(positions[shas[j]]),
                    "why": f"{near['why']} (the search placed it one commit {way}, where they "
                    "do not)",
                }
    return first


def _one_per_sha(entries: list[Entry]) -> list[Entry]:
    return list({e.sha: e for e in entries}.values())


def _series(kept: Store, entries: list[Entry], order: dict[str, int],
            metric: str = "time") -> pd.DataFrame:  # fmt: skip
    """One machine's commits in history's order with their values and intervals, in one unit
    (time: the probe's ticks where every commit has them, else the parent's; else the metric's
    column). Where every commit ran beside one reference, a value is its ratio to the reference
    times the reference's own value over every track, so that drift between tracks cancels;
    else each commit's own runs. A commit without an ok run of the metric has no value: left
    out. A value of one layout has no interval (NaN bounds)."""
    frames = []
    for e in sorted(entries, key=lambda e: order[e.sha]):
        df, col = childruns.metric_column(kept.runs(e), metrics.METRICS[metric])
        frames.append((e, df if metric == "time" else df[df[col].notna()]))
    oks = [df[df["status"] == "ok"] for _, df in frames]
    if not any(len(ok) for ok in oks):  # nothing of this metric on this machine
        return pd.DataFrame(columns=list(SERIES))
    if metric == "time":
        units = {childruns.value_column(ok) for ok in oks if len(ok)}
        unit = "ticks" if units == {"ticks"} else "outer_ticks"
    else:
        unit = col
    references = {e.reference for e, _ in frames}
    reference = references.pop() if len(references) == 1 else ""
    if reference:
        scale = math.exp(np.nanmean([math.log(changes.commit_value(df, unit, "A")["value"])
                                     for (_, df), ok in zip(frames, oks, strict=True)
                                     if len(ok)]))  # fmt: skip
    rows = []
    for (e, df), ok in zip(frames, oks, strict=True):
        if ok.empty:
            continue
        if reference:
            v = changes.relative(df, unit)
            v["value"] *= scale
        else:
            v = changes.commit_value(df, unit, "B" if e.reference else None)
        if not v["setups"]:
            continue
        half = Z95 * v["log_se"]  # NaN with one layout: so are the bounds
        rows.append({"machine": e.machine, "position": order[e.sha], "sha": e.sha,
                     "commit": e.sha[:10], "value": v["value"],
                     "low": v["value"] * math.exp(-half), "high": v["value"] * math.exp(half),
                     "log_se": v["log_se"], "setups": v["setups"], "runs": e.runs,
                     "unit": unit, "reference": reference, "date": e.date,
                     "subject": e.subject})  # fmt: skip
    return pd.DataFrame(rows, columns=list(SERIES))


def confirm_change(kept: Store, repo: Path, change: dict[str, Any], entries: list[Entry],
               setups: int, repeat: int, seed: int, each: float,
               say: Callable[[str], None], metric: str = "time",
               controls: Mapping[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    """The change's comparison: the commit after it (B) against the one before (A), built and
    run as they were tracked, its runs made once per design and kept in the store, decided at
    this history's level."""
    by_sha = {e.sha: e for e in entries if e.machine == change["machine"]}
    a, b = by_sha[change["before"]], by_sha[change["after"]]
    if (a.build, a.run) != (b.build, b.run):
        return {"verdict": "unconfirmed", "why": "the two commits were tracked with other "
                "--build or --run commands"}  # fmt: skip
    key = {"machine": change["machine"], "a": a.sha, "b": b.sha, "build": a.build, "run": a.run,
           "setups": setups, "repeat": repeat, "seed": seed}  # fmt: skip
    df = kept.confirmed(key)
    made_now = df is None
    if df is None:
        try:
            made = [builds.build(repo, sha, a.build) for sha in (a.sha, b.sha)]
        except PerflabError as exc:  # a commit gone from this clone (shallow, or rewritten)
            return {"verdict": "unconfirmed", "why": f"not built: {exc}"}
        if not all(m.ok for m in made):
            return {"verdict": "unconfirmed", "why": "a commit either side does not build now"}
        df = _measure(
            made[0], made[1], a.build, a.run, setups, repeat, seed, ctl.commit_controls(controls)
        )
        kept.confirm(key, df)
    from perflab.lab.compare.metrics import decide

    total = decide(df, metric, confidence=each)
    if "ratio" not in total:
        return {"verdict": "unconfirmed", "why": total["conclusion"]}
    lo, hi = float(total["ci_low"]), float(total["ci_high"])
    shown = lo > 1 or hi < 1
    found = {"verdict": "confirmed" if shown else "dismissed", "ratio": float(total["ratio"]),
             "ci_low": lo, "ci_high": hi,
             "why": "the commits either side differ" if shown
             else "the commits either side do not differ"}  # fmt: skip
    shares = total.get("components") or {}
    said = "" if made_now else " (its runs kept from an earlier history)"
    split = ""
    if "code placement" in shares:  # layouts in pairs sharing a code placement
        found |= {"code_share": shares["code placement"],
                  "environment_share": shares["environment"]}  # fmt: skip
        split = (f"; the code placement explains {shares['code placement']:.0%} of a layout's "
                 f"variance, the environment {shares['environment']:.0%}")  # fmt: skip
    say(f"{b.sha[:10]} vs {a.sha[:10]}: B/A {found['ratio']:.3f} ({lo:.3f}-{hi:.3f}) "
        f"{found['verdict']}{said}{split}")  # fmt: skip
    return found


def gate_can_trip(confirm: bool) -> None:
    """--fail-above trips on confirmed change points only: with --no-confirm none is, and a
    gate that cannot trip is refused in one line before anything is read."""
    if not confirm:
        raise PerflabError(
            "--fail-above trips on confirmed change points, and --no-confirm confirms none: "
            "the gate could never fail; leave --no-confirm out"
        )


def tripped(meta: dict[str, Any], above: float) -> str | None:
    """--fail-above's verdict: the newest confirmed change point of this machine, when it is a
    slowdown beyond `above` (0.05: 5 %); None otherwise."""
    mine = [
        c
        for c in meta.get("change_points", [])
        if c["machine"] == meta.get("this_machine") and c["verdict"] == "confirmed"
    ]
    if not mine:
        return None
    newest = max(mine, key=lambda c: c["position"])
    if newest["ratio"] > 1 + above:
        return (f"the newest confirmed change, {newest['before'][:10]}..{newest['after'][:10]}, "
                f"is {newest['ratio'] - 1:+.1%} (beyond --fail-above {above:.1%})")  # fmt: skip
    return None


def _change_line(c: dict[str, Any], subject: str) -> str:
    where = f"{c['before'][:10]}..{c['after'][:10]} ({subject})"
    way = "slower" if c["step"] > 1 else "faster"
    line = f"change point at {where}: {abs(c['step'] - 1):.1%} {way} from segment to segment"
    if "ratio" in c:
        line += (f"; {c['verdict']}: B/A {c['ratio']:.3f} ({c['ci_low']:.3f}-"
                 f"{c['ci_high']:.3f}), {c['why']}")  # fmt: skip
    else:
        line += f"; {c['verdict']}: {c['why']}"
    return line


@reads_frame("history")
def summary(frame: pd.DataFrame, meta: dict[str, Any]) -> Summary:
    """Per machine: how many commits and in what unit, each change point with its step and its
    comparison, or that none was found; the series as a table."""
    lines, values = [], {"change_points": meta.get("change_points", [])}
    hosts = meta.get("machines", {})
    for name, series in frame.groupby("machine", sort=True):
        host = hosts.get(name, {})
        mark = " (this machine)" if name == meta.get("this_machine") else ""
        ref = str(series["reference"].iloc[0])
        how = (f"each commit's ratio to {ref[:10]}, run beside it pair by pair, times "
               f"{ref[:10]}'s own" if ref else "each commit's own runs: tracked beside no one "
               "reference, so drift between tracks does not cancel")  # fmt: skip
        lines.append(f"{name}{mark}: {host.get('cpu_model', '?')}, {len(series)} commits, "
                     f"values in {series['unit'].iloc[0]} ({how}; geometric means over "
                     "layouts of each layout's median)")  # fmt: skip
        subjects = dict(zip(series["sha"], series["subject"], strict=True))
        mine = [c for c in meta.get("change_points", []) if c["machine"] == name]
        for c in mine:
            lines.append("  " + _change_line(c, subjects.get(c["after"], "")))
        if not mine:
            lines.append("  no change point: the commits differ no more than their noise")
    order = meta.get("order") or {}
    if order:
        said = f"commits ordered by {order['by']}"
        if "gaps" in order:
            said = f"commits in the topological order of {order['by']}"
            if order["gaps"]:
                said += f"; {order['gaps']} commits of that range are not in the store (gaps)"
            if order["lacking"]:
                shown = ", ".join(s[:10] for s in order["lacking"][:5])
                said += (
                    f"; {len(order['lacking'])} commits of the store are not in the "
                    f"repository ({shown}): placed last, by parent links and author time"
                )
        lines.insert(0, said)
    confirmed = [c for c in values["change_points"] if c["verdict"] == "confirmed"]
    values["confirmed"] = len(confirmed)
    values["order"] = order
    shown = frame[["machine", "position", "commit", "value", "low", "high", "setups",
                   "subject"]]  # fmt: skip
    table = Table("series", "each commit: value and its 95 % interval", frame, "{:,.0f}", shown)
    return Summary(lines, [table], values, lambda p: plot(frame, meta, p))


@reads_frame("history")
def plot(frame: pd.DataFrame, meta: dict[str, Any], path: Any = None) -> Figure:
    """Each machine's series relative to its first commit, with its intervals, its segments'
    means and its change points (solid: confirmed, dotted: dismissed or unconfirmed)."""
    from perflab.analysis import plot as plt

    fig, ax = plt.figure(figsize=(9, 4.5))
    for i, (name, s) in enumerate(frame.groupby("machine", sort=True)):
        colour = plt.COLORS[i % len(plt.COLORS)]
        base = float(s["value"].iloc[0])
        v = s["value"].to_numpy(float) / base
        ax.errorbar(s["position"], v, yerr=[v - s["low"] / base, s["high"] / base - v],
                    fmt="o-", ms=4, lw=0.8, capsize=2, color=colour, label=str(name))  # fmt: skip
        mine = [c for c in meta.get("change_points", []) if c["machine"] == name]
        for c in mine:
            style = "-" if c["verdict"] == "confirmed" else ":"
            ax.axvline(c["position"] - 0.5, color=colour, lw=1.0, ls=style)
            ax.annotate(f"{c['step'] - 1:+.1%} {c['verdict']}", (c["position"] - 0.5, 1),
                        xycoords=("data", "axes fraction"), rotation=90, va="top",
                        ha="right", fontsize=7)  # fmt: skip
    ax.axhline(1.0, color="black", lw=0.6, ls="--")
    commits_ = frame.drop_duplicates("position").sort_values("position")
    if len(commits_) <= 40:
        ax.set_xticks(commits_["position"], commits_["commit"].str[:7], rotation=90, fontsize=7)
    ax.set_xlabel("commit, in history's order")
    ax.set_ylabel("value / the first commit's")
    ax.legend(fontsize=8)
    return plt.save(fig, path, title="perflab history")
