"""`perflab report` and `perflab diff` on real result files: each verb run small then read back,
a killed sweep's journal, CSV + JSON, recorded frames, two real sweeps diffed, bad input."""

import base64
import json
import math
import os
import signal
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import fakespawner
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import compile_children, long_beyond, tiny_argv, wait_for

import perflab
from perflab.analysis import stats
from perflab.cli import cli
from perflab.lab import registry
from perflab.reports import diff, report
from perflab.store import filelock, journal, results
from perflab.system import machine, provenance

DATA = Path(__file__).parent / "data"
SRC = str(Path(perflab.__file__).resolve().parents[1])
C0 = str(machine.usable_cpus()[0])

# Analysis options away from their defaults, which the report must take from the file.
AWAY_FROM_DEFAULTS = {"env-size": ["-k", "3"]}
# --json keys a report cannot repeat: the metadata (a verb rereads the TSC rate, a report the
# file's) and link-order's run_s, the sweep's time, taken once its file is written.
NOT_REPEATED = {"metadata", "run_s"}
VERBS = [e.name for e in registry.EXPERIMENTS.values() if e.verb is not None]
# A verb of each kind (a sweep of child runs, an A/B comparison, threads, a kernel in perflab's
# own process, a link) in the ten-minute suite; test_registry reads every verb's report back.
FAST_VERBS = {"env-size", "compare", "threads", "memcpy", "link-order"}


def _same(a, b) -> bool:
    """JSON values equal, numbers to 1e-9 (a verb rereads the TSC rate, a report the file's)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, int | float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return a == b


def _json(res) -> dict:
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


@pytest.mark.parametrize("verb", long_beyond(VERBS, FAST_VERBS))
def test_report_repeats_the_tables_each_verb_printed(verb, tmp_path):
    argv = [*tiny_argv(verb), *AWAY_FROM_DEFAULTS.get(verb, [])]
    at = argv.index("--") if "--" in argv else len(argv)
    out = tmp_path / f"{verb}.parquet"
    ran = _json(CliRunner().invoke(cli, [*argv[:at], "-o", str(out), "--json", *argv[at:]]))
    shown = _json(CliRunner().invoke(cli, ["report", str(out), "--json"]))
    assert shown["experiment"] == verb and shown["partial"] is None
    assert set(ran) <= set(shown)
    for key in set(ran) - NOT_REPEATED:
        assert _same(ran[key], shown[key]), key
    assert shown["conditions"]["host"] == provenance.metadata()["hostname"]
    text = CliRunner().invoke(cli, ["report", str(out), "--plot", str(tmp_path / "f.png")])
    assert text.exit_code == 0, text.output
    assert (tmp_path / "f.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_text_report_prints_the_verbs_tables(tmp_path):
    out = tmp_path / "s.parquet"
    argv = ["run", "syscalls", "--call", "getpid", "--trials", "100", "-o", str(out)]
    ran = CliRunner().invoke(cli, argv)
    shown = CliRunner().invoke(cli, ["report", str(out)])
    assert ran.exit_code == shown.exit_code == 0
    table = ran.output.strip().splitlines()
    assert "\n".join(table[-6:]) in shown.output  # title and FileGuard's table, row for row
    assert "measured on:" in shown.output and "timer step (ticks): " in shown.output


def _sweep(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "perflab", "sweep", "env-size", *args],
        env={**os.environ, "PYTHONPATH": SRC},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _first_chunk(parts: Path) -> None:
    wait_for(lambda: any(parts.glob("chunk-*.parquet")), "the sweep's first chunk")


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT], ids=["kill-9", "ctrl-c"])
def test_an_interrupted_sweep_reports_what_it_has_and_says_partial(how, tmp_path, children):
    out = tmp_path / "cut.parquet"
    top = 3999 if children is None else 199  # made up: a chunk per 64 runs, as many rows
    args = ["sweep", "env-size", "--max", str(top), "--repeat", "2", "--no-rt", "-o", str(out)]
    if children is None:
        proc = _sweep(*args[2:])
        try:
            _first_chunk(Path(f"{out}.parts"))
        finally:
            proc.send_signal(how)
            proc.communicate(timeout=60)
    else:  # stopped in its third batch, two of them on the disk
        cut = subprocess.run(fakespawner.cli(*args, chunk_runs=64, signal_after=(150, how)),
                             env=fakespawner.cli_env(), capture_output=True)  # fmt: skip
        assert cut.returncode in (-signal.SIGKILL, 128 + signal.SIGINT), cut.stderr
    res = _json(CliRunner().invoke(cli, ["report", str(out), "--json"]))
    assert res["experiment"] == "env-size" and res["partial"]
    assert f"--resume {out}" in res["partial"] or how == signal.SIGINT
    assert 0 < res["runs"] < 2 * (top + 1)  # every finished run, and fewer than planned
    assert children is None or res["runs"] == (128 if how == signal.SIGKILL else 150)
    assert sum(s["n"] + s["failed"] for s in res["sizes"]) == res["runs"]
    text = CliRunner().invoke(cli, ["report", str(out)])
    assert text.exit_code == 0 and "PARTIAL: " in text.output


def test_a_journal_without_rows_is_one_line_saying_what_it_is(tmp_path):
    """Interrupted before its first row reached the disk: not 'damaged', and how to go on."""
    out = tmp_path / "empty.parquet"
    journal.Journal(out, {"n": 4}, {"experiment": "env-size"}, ["env_size"])
    filelock.release(out)  # as the interrupted run's end released it
    res = CliRunner().invoke(cli, ["report", str(out)])
    assert res.exit_code == 1
    assert res.output.strip() == (
        f"Error: {out}: an interrupted run that recorded no run; the same command plus "
        f"--resume {out} measures them"
    )


def test_a_memcpy_file_is_matched_with_the_caches_of_the_machine_that_measured_it(tmp_path):
    df = results.load(DATA / "memcpy-epyc-kvm.parquet")
    sizes = {"L1d": 32 << 10, "L2": 512 << 10, "L3": 16 << 20}  # this EPYC's, as sysfs says
    caches = [{"cache": c, "size_bytes": b, "line_bytes": 64} for c, b in sizes.items()]
    meta = {**results.metadata(df), "hostname": "elsewhere", "caches": caches}
    r = report.report(results.save(results.attach(df, meta), tmp_path / "m.parquet"))
    knees = r.tables["knees"]
    assert not r.notes and len(knees) >= 1
    assert all(sizes[c] == b for c, b in zip(knees["cache"], knees["cache_bytes"], strict=True))


def test_csv_with_json_sidecar_reports_as_its_parquet_twin(tmp_path):
    argv = ["sweep", "env-size", "--max", "7", "--repeat", "2", "--no-rt", "-o"]
    assert CliRunner().invoke(cli, [*argv, str(tmp_path / "e.csv")]).exit_code == 0
    df = results.load(tmp_path / "e.csv")
    results.save(df, tmp_path / "e.parquet")
    a = _json(CliRunner().invoke(cli, ["report", str(tmp_path / "e.csv"), "--json"]))
    b = _json(CliRunner().invoke(cli, ["report", str(tmp_path / "e.parquet"), "--json"]))
    assert a["experiment"] == "env-size" and _same(a["sizes"], b["sizes"])
    assert a["conditions"] == b["conditions"] and a["conditions"]["ASLR (runs)"] == "off"


def test_recorded_frames_are_recognised():
    r = report.report(DATA / "memcpy-epyc-kvm.parquet")
    assert r.experiment == "memcpy" and r.partial is None and not r.notes[:1]
    assert r.summary.values["points"] == len(r.frame) == 672
    assert r.conditions()["CPU"] == "AMD EPYC" and r.conditions()["hypervisor"] == "KVM"
    assert len(r.tables["knees"]) >= 1 and (r.tables["knees"]["knee_size"] > 32).all()
    bare = report.report(DATA / "memcpy-loop-xeon.csv")  # no sidecar: no metadata at all
    assert bare.experiment == "memcpy" and bare.conditions() == {}
    assert "recognised as memcpy by its columns" in bare.notes[0]
    small = bare.tables["small"]
    assert small["ticks"].tolist()[:4] == [4, 4, 6, 8] and len(small) == 32
    with pytest.raises(perflab.PerflabError, match="no derivative column"):
        bare.plot(Path("/tmp") / "never-drawn.png")


class _Page(HTMLParser):
    """Tables (rows of cell texts) and image sources of an HTML page."""

    def __init__(self):
        super().__init__()
        self.tables, self.images, self.cell = [], [], None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self.cell = ""
        elif tag == "img":
            self.images.append(dict(attrs)["src"])

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.tables[-1][-1].append(self.cell)
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data


def _page(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text())
    return page


def _png(src: str) -> bytes:
    prefix = "data:image/png;base64,"
    assert src.startswith(prefix)
    return base64.b64decode(src[len(prefix) :], validate=True)


# A probed loop whose region takes twice as long at env sizes argv[1]..argv[2]. Twice, because
# this guest's speed drifts by up to 30 % between two sweeps a second apart (host load it cannot
# see), so a 10 % change was sometimes hidden; the recorded-frame tests below check sensitivity.
SLOW = r"""
#include <stdlib.h>
#include <string.h>
#include "perflab_probe.h"
#include "chain.h"
int main(int argc, char **argv)
{
    const char *pad = getenv("A");
    size_t n = pad ? strlen(pad) : 0;
    long iters = 200000;
    if (argc > 2 && n >= (size_t)atol(argv[1]) && n <= (size_t)atol(argv[2]))
        iters *= 2;
    PERFLAB_PROBE_BEGIN();
    chain((unsigned long)iters);
    PERFLAB_PROBE_END();
    return 0;
}
"""
CHANGED = range(2, 6)


@pytest.fixture(scope="module")
def slow(tmp_path_factory) -> str:
    return compile_children(tmp_path_factory.mktemp("slow"), {"slow": SLOW})["slow"]


def _probe_sweep(program: str, out: Path, *args: str) -> Path:
    argv = ["sweep", "env-size", "--max", "7", "--repeat", "25", "--no-rt", "-o", str(out)]
    res = CliRunner().invoke(cli, [*argv, "--", program, *args])
    assert res.exit_code == 0, res.output
    return out


@pytest.fixture(scope="module")
def sweep(slow, tmp_path_factory) -> Path:
    return _probe_sweep(slow, tmp_path_factory.mktemp("sweep") / "before.parquet")


def _recorded(sweep: Path, out: Path, factor: float, seed: int) -> Path:
    """A real sweep's file (its columns, runs and metadata) with ticks of a known spread drawn
    anew (5 %, lognormal, seeded), `factor` times as many at the CHANGED sizes: what diff must
    flag then follows from the frames, not from this machine's noise (a sweep under load here
    spread so far that no interval showed a doubling)."""
    df = results.load(sweep)
    meta = results.metadata(df)
    rng = np.random.default_rng(seed)
    scale = np.where(df["env_size"].isin(CHANGED), factor, 1.0)
    df["ticks"] = np.round(100_000 * scale * rng.lognormal(0.0, 0.05, len(df)))
    return results.save(results.attach(df, meta), out)


@pytest.mark.long
def test_diff_flags_the_sizes_a_recorded_sweep_made_twice_as_slow(sweep, tmp_path):
    png, page = tmp_path / "d.png", tmp_path / "d.html"
    before = _recorded(sweep, tmp_path / "before.parquet", 1.0, seed=1)
    after = _recorded(sweep, tmp_path / "after.parquet", 2.0, seed=2)
    argv = ["diff", str(before), str(after), "--json", "--plot", str(png), "--html", str(page)]
    out = _json(CliRunner().invoke(cli, argv))
    t = pd.DataFrame(out["points_table"]).set_index("env_size")
    changed, same = t.loc[list(CHANGED)], t.drop(index=list(CHANGED))
    assert (changed["change"] == "slower").all() and (changed["ci_low"] > 1.5).all(), t
    assert changed["ratio"].between(1.8, 2.2).all() and same["ratio"].between(0.9, 1.1).all(), t
    assert (same["change"] == "").all() and (same["ci_low"] < 1).all(), t
    assert out["points"] == 8 and out["level_per_point"] == pytest.approx(1 - 0.05 / 8)
    assert out["verdict"].startswith("after is slower at 4 (")
    assert _png(_page(page).images[0]) == png.read_bytes()[: len(_png(_page(page).images[0]))]
    rows = _page(page).tables[0]
    assert rows[0][:2] == ["env_size", "n_before"] and len(rows) == 1 + 8
    text = CliRunner().invoke(cli, ["diff", str(before), str(after)])
    assert text.exit_code == 0 and text.output.strip().splitlines()[-1] == out["verdict"]


def test_diff_of_real_sweeps_reads_the_code_made_twice_as_slow_where_it_is(slow, tmp_path, alone):
    """Two real sweeps, the second with the CHANGED sizes' loop doubled: their ratios stand
    above the others' (a drift of the host between the sweeps moves every size alike, a spell
    a minority of 25 runs), and the verdict counts what the table flags. Which sizes an
    interval decides follows this machine's noise (issue 48): the flags are tested above.
    Both sweeps pass two one-digit arguments (the first sweep a range no size is in): without
    them the sweeps differed in layout too (the arguments move the stack by 20 bytes), and in
    one CI run the changed sizes read 1.13x where the others read 0.89x."""
    with alone():
        before = _probe_sweep(slow, tmp_path / "before.parquet", "9", "9")
        after = _probe_sweep(slow, tmp_path / "after.parquet", str(CHANGED[0]), str(CHANGED[-1]))
        out = _json(CliRunner().invoke(cli, ["diff", str(before), str(after), "--json"]))
        t = pd.DataFrame(out["points_table"]).set_index("env_size")
        changed, same = t.loc[list(CHANGED)], t.drop(index=list(CHANGED))
        if same["ratio"].max() > 1.5 * same["ratio"].min():  # the yardstick moved
            pytest.skip(
                f"the unchanged sizes read {same['ratio'].min():.2f}-{same['ratio'].max():.2f}x "
                "from one sweep to the other: the host slowed this guest for a spell (steal no "
                "task here shows), so no size can be judged against them"
            )
        assert changed["ratio"].median() > 1.5 * same["ratio"].median(), t
    for moved in ("slower", "faster"):
        n = int((t["change"] == moved).sum())
        assert (f"{moved} at {n} (" in out["verdict"]) == (n > 0), (out["verdict"], t)
    if not (t["change"] != "").any():
        assert out["verdict"].startswith("no change shown at any of 8 env_size values")


def test_diff_of_two_halves_of_one_sweep_flags_nothing_95_percent_of_the_time(sweep, tmp_path):
    """On the real sweep's frame with ticks drawn anew (one spread at every size): the real
    ticks made the outcome this machine's, about one run in a hundred past the bound."""
    df = results.load(_recorded(sweep, tmp_path / "same.parquet", 1.0, seed=11))
    rng = np.random.default_rng(17)
    quiet = 0
    for _ in range(20):
        half = df["rep"].isin(rng.permutation(25)[:12])
        t = diff.compare_frames(df[half], df[~half], ("env_size",), "ticks", steps=(20.0, 20.0))
        quiet += int((t["change"] == "").all())
    # At the promised 5 %, 20 splits flag some value 3 or more times in 7.5 % of runs (it did in
    # CI): the bound allows what a correct diff does with probability 0.999 (at most 5 flagged).
    assert quiet >= 15


def test_report_html_and_markdown_of_an_env_size_sweep(sweep, tmp_path):
    before = sweep
    page, md = tmp_path / "r.html", tmp_path / "r.md"
    res = CliRunner().invoke(cli, ["report", str(before), "--html", str(page), "--md", str(md)])
    assert res.exit_code == 0, res.output
    r = report.report(before)
    parsed = _page(page)
    png = _png(parsed.images[0])
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    slowest = next(t for t in r.summary.tables if t.name == "sizes").display
    html_rows = next(t for t in parsed.tables if t[0][:2] == ["env_size", "n"])
    assert [int(row[0]) for row in html_rows[1:]] == slowest["env_size"].tolist()
    conditions = dict(row for row in parsed.tables[-1][1:])
    assert conditions["host"] == provenance.metadata()["hostname"]
    assert conditions["timer step (ticks)"] == f"{r.meta['timer_step_ticks']:,}"
    text = md.read_text()
    assert "| env_size | n | min | median | mean | stdev | mad | failed |" in text
    assert "|---:|---:|---:|---:|---:|---:|---:|---:|" in text
    shown = CliRunner().invoke(cli, ["report", str(before), "--md", "-"])
    assert shown.exit_code == 0 and shown.stdout == text


def _one_error(res, *words: str) -> str:
    lines = [x for x in res.output.splitlines() if x.startswith("Error:")]
    assert res.exit_code not in (0, None) and len(lines) == 1, res.output
    assert "Traceback" not in res.output and "internal error" not in lines[0], res.output
    for w in words:
        assert w in lines[0], res.output
    return lines[0]


def test_diff_refuses_other_experiments_and_grids_by_name(sweep, tmp_path):
    before = sweep
    memcpy = str(DATA / "memcpy-epyc-kvm.parquet")
    _one_error(CliRunner().invoke(cli, ["diff", str(before), memcpy]), "different experiments",
               "env-size", "memcpy")  # fmt: skip
    df = results.load(before)
    fewer = results.save(df[df["env_size"] < 4], tmp_path / "fewer.parquet")
    refused = CliRunner().invoke(cli, ["diff", str(before), str(fewer)])
    _one_error(refused, "different parameter grids", "4 env_size values only before", "--intersect")
    res = _json(CliRunner().invoke(cli, ["diff", str(before), str(fewer), "--intersect", "--json"]))
    assert res["points"] == 4 and "compared the 4 env_size values both have" in res["notes"][0]
    other = results.metadata(df) | {"hostname": "elsewhere", "aslr": "on"}
    moved = results.save(results.attach(df.copy(), other), tmp_path / "moved.parquet")
    res = CliRunner().invoke(cli, ["diff", str(before), str(moved)])
    assert res.exit_code == 0
    assert "warning: different machine: " in res.stderr and "different ASLR: off" in res.stderr


def test_bad_files_are_one_line_each(tmp_path):
    (tmp_path / "empty.parquet").write_bytes(b"")
    (tmp_path / "text.parquet").write_text("not parquet\n")
    good = (DATA / "memcpy-epyc-kvm.parquet").read_bytes()
    (tmp_path / "cut.parquet").write_bytes(good[: len(good) // 2])
    (tmp_path / "dir.parquet").mkdir()
    foreign = pd.DataFrame({"x": [1, 2], "y": [3, 4]})
    results.save(results.attach(foreign, {}), tmp_path / "foreign.csv")
    df = results.load(DATA / "memcpy-epyc-kvm.parquet")
    results.save(results.attach(df, {"experiment": "teleport"}), tmp_path / "alien.parquet")
    results.save(results.attach(df, {"experiment": "env-size"}), tmp_path / "liar.parquet")
    cases = {
        "missing.parquet": "no such file",
        "empty.parquet": "empty file",
        "text.parquet": "not a Parquet file",
        "cut.parquet": "not a Parquet file",
        "dir.parquet": "is a directory",
        "foreign.csv": "not a result perflab wrote",
        "alien.parquet": "unknown experiment 'teleport'",
        "liar.parquet": "without column(s) env_size",
    }
    for name, words in cases.items():
        _one_error(CliRunner().invoke(cli, ["report", str(tmp_path / name)]), name, words)
        _one_error(CliRunner().invoke(cli, ["diff", str(tmp_path / name), str(tmp_path / name)]))
    memcpy = str(DATA / "memcpy-epyc-kvm.parquet")
    _one_error(CliRunner().invoke(cli, ["report", memcpy, "--html", str(tmp_path / "x.txt")]),
               "x.txt", ".html")  # fmt: skip
    _one_error(CliRunner().invoke(cli, ["report", memcpy, "--plot", str(tmp_path / "x.gif")]),
               "unknown plot format")  # fmt: skip


def test_report_hosts_is_still_the_fleet_view(tmp_path):
    frame = pd.DataFrame(
        {"host": ["a"] * 3 + ["b"] * 3, "ticks": [10.0, 11, 12, 20, 21, 22], "status": "ok"}
    )
    path = results.save(
        results.attach(frame, {"experiment": "env-size campaign"}), tmp_path / "c.csv"
    )
    hosts = _json(CliRunner().invoke(cli, ["report", "hosts", str(path), "--json"]))
    assert [h["host"] for h in hosts["hosts"]] == ["a", "b"]
    shown = _json(CliRunner().invoke(cli, ["report", str(path), "--json"]))
    assert shown["experiment"] == "campaign" and shown["hosts"][1]["median"] == 21


@pytest.mark.long
def test_thousands_of_points_flag_exactly_the_changed_ones():
    """Known truth: 8 193 env sizes, 100 of them 30 % slower, lognormal noise of 5 %."""
    rng = np.random.default_rng(3)
    sizes = np.repeat(np.arange(8193), 30)
    slower = (sizes >= 2000) & (sizes < 2100)
    a = pd.DataFrame({"env_size": sizes, "ticks": rng.lognormal(13, 0.05, sizes.size)})
    b = pd.DataFrame({"env_size": sizes, "ticks": rng.lognormal(13, 0.05, sizes.size)})
    t = diff.compare_frames(a, b, ("env_size",), "ticks")
    assert (t["change"] == "").all() and t.attrs["method"] == "order statistics"
    b.loc[slower, "ticks"] *= 1.3
    t = diff.compare_frames(a, b, ("env_size",), "ticks")
    assert t.loc[t["change"] == "slower", "env_size"].tolist() == list(range(2000, 2100))


def test_few_points_get_bootstrap_intervals_that_agree_with_order_statistics():
    rng = np.random.default_rng(5)
    a = pd.DataFrame({"call": np.repeat(["x", "y"], 40), "ticks": rng.normal(1000, 20, 80)})
    b = a.assign(ticks=a["ticks"] * np.where(a["call"] == "y", 1.1, 1.0))
    boot = diff.compare_frames(a, b, ("call",), "ticks")
    assert boot.attrs["method"] == "bootstrap" and boot["change"].tolist() == ["", "slower"]
    sorted_a, sorted_b = np.sort(a["ticks"]), np.sort(b["ticks"])
    exact = stats.ratio_order_interval(sorted_a, sorted_b, 0.999, (20.0, 20.0))
    assert diff._order_ratio(sorted_a, sorted_b, 0.999, (20.0, 20.0)) == pytest.approx(exact)


def test_the_package_reads_and_compares_results(sweep):
    """perflab.report and perflab.diff are the modules' functions, reachable from the package."""
    r = perflab.report(sweep)
    assert r.experiment == "env-size" and r.tables["sizes"].equals(
        report.report(sweep).tables["sizes"]
    )
    d = perflab.diff(sweep, sweep)
    assert d.table["change"].eq("").all() and "no change" in d.verdict
