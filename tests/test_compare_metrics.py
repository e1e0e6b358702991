"""compare --metric: each metric decided alone from the columns the runs recorded, exact where
its runs repeat to the unit, and refused in one line before any run where this machine cannot
measure it."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import LOOP, compile_children

import perflab
from perflab.cli import cli
from perflab.lab.compare.metrics import decide
from perflab.plan import metrics
from perflab.store import results

ALLOC = r"""
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv) {
    size_t bytes = (size_t)atol(argv[1]) << 20;
    char *p = malloc(bytes);
    memset(p, 1, bytes);
    volatile char s = 0;
    for (size_t i = 0; i < bytes; i += 4096) s += p[i];
    return s == 42;
}
"""
DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def alloc(tmp_path_factory) -> str:
    return compile_children(tmp_path_factory.mktemp("alloc"), {"alloc": ALLOC})["alloc"]


@pytest.fixture(scope="module")
def halves(alloc, tmp_path_factory) -> Path:
    """A compare of a program touching 32 MiB against the same touching 64 MiB, saved."""
    out = tmp_path_factory.mktemp("ab") / "ab.parquet"
    res = CliRunner().invoke(cli, ["compare", f"{alloc} 32", f"{alloc} 64", "--setups", "3",
                                   "--repeat", "4", "--no-rt", "--metric", "maxrss,cpu",
                                   "-o", str(out), "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    return out


def test_twice_the_memory_is_decided_larger_exactly_and_time_stays_overall(halves):
    doc = json.loads(CliRunner().invoke(cli, ["report", str(halves), "--json"]).stdout)
    assert list(doc["metrics"]) == ["maxrss", "cpu"]
    rss = doc["metrics"]["maxrss"]
    # 32 MiB more of a ~34 MiB peak: B/A near 2 whatever the loader's pages
    assert 1.5 < rss["ratio"] < 2.5 and rss["conclusion"].endswith("B larger")
    # exact where every run of a side in a setup peaked at one size, as most kernels make it; a
    # host under memory pressure or handing out huge pages may vary a peak, and then it is not
    runs = perflab.results.load(halves)
    ok = runs[runs["status"] == "ok"]
    repeats = ok.groupby(["setup", "side"], observed=True)["maxrss_kb"].nunique().max() == 1
    assert rss["exact"] is bool(repeats)
    assert 1 < rss["ci_low"] <= rss["ratio"] <= rss["ci_high"]
    if rss["ci_low"] == rss["ci_high"]:  # every setup read the one B/A: stated exactly
        assert repeats and "exactly" in rss["conclusion"]
    assert rss["median_b"] - rss["median_a"] >= 30 * 1024  # KiB: the 32 MiB B touches more
    assert doc["metrics"]["cpu"]["ratio"] > 1 and doc["overall"]["ratio"] > 1
    text = CliRunner().invoke(cli, ["report", str(halves)]).stdout
    assert "by metric, each decided alone:" in text and rss["conclusion"] in text


def test_a_saved_comparison_is_decided_again_on_another_metric(halves):
    res = CliRunner().invoke(cli, ["report", str(halves), "--metric", "time", "--json"])
    doc = json.loads(res.stdout)
    assert list(doc["metrics"]) == ["time"]
    assert doc["metrics"]["time"]["ratio"] == doc["overall"]["ratio"]


def test_two_copies_of_one_program_never_differ_in_memory(alloc):
    res = CliRunner().invoke(cli, ["compare", f"{alloc} 16", f"{alloc} 16", "--setups", "3",
                                   "--repeat", "4", "--no-rt", "--metric", "maxrss",
                                   "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    said = json.loads(res.stdout)["metrics"]["maxrss"]["conclusion"]
    assert "larger" not in said and "smaller" not in said, said


def test_one_run_a_side_is_no_exact_verdict(alloc):
    """A lone pair repeats no value: bisect and history read such a B/A as proven exactly."""
    res = CliRunner().invoke(cli, ["compare", f"{alloc} 16", f"{alloc} 32", "--setups", "1",
                                   "--repeat", "1", "--no-rt", "--metric", "time,cpu,maxrss",
                                   "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    for name, said in json.loads(res.stdout)["metrics"].items():
        assert said["exact"] is False and "too few" in said["conclusion"], (name, said)


def test_decide_reads_a_recorded_frame(halves):
    frame = results.load(halves)
    cpu = decide(frame, "cpu")
    assert cpu["column"] == "cpu_ns" and cpu["pairs"] == 12 and cpu["setups"] == 3
    assert cpu["median_a"] > 0
    gone = decide(frame.assign(maxrss_kb=-1), "maxrss")
    assert "not measured" in gone["conclusion"] and "ratio" not in gone


@pytest.mark.parametrize("metric", list(metrics.METRICS))
def test_a_metric_this_machine_lacks_is_refused_before_any_run(metric, tmp_path):
    out = tmp_path / "x.parquet"
    res = CliRunner().invoke(cli, ["compare", "true", "true", "--metric", metric, "--no-rt",
                                   "--setups", "1", "--repeat", "1", "-o", str(out)])  # fmt: skip
    why = metrics.unavailable(metric)
    if why:
        assert res.exit_code == 1 and not out.exists()
        assert res.stderr.strip().splitlines() == [
            f"Error: --metric {metric}: {why}; this machine offers {', '.join(metrics.available())}"
        ]
    else:
        assert res.exit_code == 0, res.output


def test_unknown_metrics_and_other_results_are_one_line():
    res = CliRunner().invoke(cli, ["compare", "true", "true", "--metric", "joules"])
    said = "--metric 'joules': not a metric; this machine offers time, cpu"
    assert res.exit_code == 1 and said in res.stderr
    res = CliRunner().invoke(cli, ["report", str(DATA / "env-size-xeon-amx.parquet"),
                                   "--metric", "cpu"])  # fmt: skip
    assert res.exit_code == 1
    assert (
        res.stderr.strip()
        .splitlines()[-1]
        .endswith("--metric decides a compare result, and this result is of env-size")
    )


@pytest.fixture(scope="module")
def loop(tmp_path_factory) -> str:
    if metrics.unavailable("instructions-exact"):
        pytest.skip(metrics.unavailable("instructions-exact"))
    return compile_children(tmp_path_factory.mktemp("loop"), {"loop": LOOP})["loop"]


def _by_hand(argv: list[str], env: dict[str, str]) -> int:
    """cachegrind's count, run as a user would run it."""
    res = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no",
                          "--cachegrind-out-file=/dev/null", *argv],
                         env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    return int(re.search(r"I\s+refs:\s+([\d,]+)", res.stderr).group(1).replace(",", ""))


def _loop_body(binary: str) -> int:
    """Instructions per turn of main's loop, from its disassembly: from the target of the one
    backward branch to that branch, every one executed each turn (the body is straight)."""
    text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", binary], capture_output=True,
                          text=True, check=True).stdout  # fmt: skip
    main = text.split("<main>:\n", 1)[1].split("\n\n", 1)[0]
    lines = [(int(ln.split(":")[0], 16), ln) for ln in main.splitlines() if ":" in ln]
    addrs = [a for a, _ in lines]
    back = [
        (a, int(m.group(1), 16))
        for a, ln in lines
        if (m := re.search(r"\sj\w+\s+([0-9a-f]+) <main", ln)) and int(m.group(1), 16) < a
    ]
    (branch, target), = back  # fmt: skip
    return sum(target <= a <= branch for a in addrs)


@pytest.mark.long
def test_exact_counts_are_valgrinds_and_the_loops_own(loop, tmp_path):
    """(benchmarks/metrics_exact.py repeats the comparison over seeds: B/A within 1e-4.)"""
    out = tmp_path / "ie.parquet"
    res = CliRunner().invoke(cli, ["compare", f"{loop} 20000", f"{loop} 40000", "--setups", "2",
                                   "--repeat", "2", "--no-rt", "--metric", "instructions-exact",
                                   "-o", str(out), "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    said = doc["metrics"]["instructions-exact"]
    assert said["repeats"] is True and said["conclusion"].endswith("B does more instructions")
    meta = results.metadata(results.load(out))
    env_size = {s["setup"]: s["env_size"] for s in doc["setups"]}
    for c in meta["instructions_exact"]:
        n = {"A": 20000, "B": 40000}[c["side"]]
        env = {meta["env_var"]: "a" * env_size[c["setup"]]}
        assert c["instructions"] == _by_hand([loop, str(n)], env)
    if shutil.which("objdump"):  # B's 20 000 more turns, to the instruction, from the code
        per = {(c["setup"], c["side"]): c["instructions"] for c in meta["instructions_exact"]}
        for setup in {s for s, _ in per}:
            assert per[setup, "B"] - per[setup, "A"] == 20000 * _loop_body(loop)


@pytest.mark.long
def test_two_copies_count_the_same_exactly(loop, tmp_path):
    copy = tmp_path / "copy"
    shutil.copy2(loop, copy)
    res = CliRunner().invoke(cli, ["compare", f"{loop} 50000", f"{copy} 50000", "--setups", "2",
                                   "--repeat", "2", "--no-rt", "--metric",
                                   "instructions-exact", "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    said = json.loads(res.stdout)["metrics"]["instructions-exact"]
    # the paths' lengths differ: the loader's work by an instruction or two, within start-up's
    assert abs(said["ratio"] - 1) < 1e-4 and said["repeats"] is True
    assert said["conclusion"].endswith(("B the same", "(more environment, a longer path)")), said
    assert "more instructions" not in said["conclusion"]


PAD = "int pad_fn(int x) { int s = 0; for (int i = 0; i < x; i++) s += i * x; return s; }\n"


@pytest.mark.long
def test_code_moved_by_a_padding_object_runs_the_same_instructions(loop, tmp_path):
    """B links a padding object first: its loop's code lies elsewhere, its work is A's."""
    for name, text in (("loop", LOOP), ("pad", PAD)):
        (tmp_path / f"{name}.c").write_text(text)
        subprocess.run(["cc", "-O1", "-c", f"{name}.c"], cwd=tmp_path, check=True)
    res = CliRunner().invoke(cli, ["compare", "--objects-a", str(tmp_path / "loop.o"),
                                   "--objects-b", f"{tmp_path / 'pad.o'} {tmp_path / 'loop.o'}",
                                   "--args", "50000", "--randomize", "env-size,code-offset",
                                   "--setups", "3", "--repeat", "2", "--no-rt", "--metric",
                                   "time,instructions-exact", "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    said = json.loads(res.stdout)["metrics"]
    assert list(said) == ["time", "instructions-exact"]
    assert said["instructions-exact"]["conclusion"].endswith("B the same"), said
    assert said["time"]["setups"] == 3  # the time over layouts, beside it


# The loop of LOOP inside the probe's region, after some start-up work of its own.
PROBED = r"""
#include <stdlib.h>
#include "perflab_probe.h"
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    volatile long s = 0;
    for (long i = 0; i < 5000; i++) s += i;
    PERFLAB_PROBE_BEGIN();
    for (long i = 0; i < n; i++) s += i;
    PERFLAB_PROBE_END();
    return 0;
}
"""


@pytest.mark.long
def test_a_program_that_marks_the_probes_region_is_counted_there_alone(tmp_path):
    """Built where valgrind's headers are, the probe toggles callgrind around its region: the
    count is the region's loop and a few instructions of the toggles, whatever the start-up
    and the environment's size, so B/A is exact."""
    from perflab.lab.compare import exact

    if metrics.unavailable("instructions-exact"):
        pytest.skip(metrics.unavailable("instructions-exact"))
    probed = compile_children(tmp_path, {"probed": PROBED})["probed"]
    if not exact._marks_regions(probed):
        pytest.skip("valgrind's headers are not installed: the probe cannot mark its region")
    out = tmp_path / "ie.parquet"
    res = CliRunner().invoke(cli, ["compare", f"{probed} 20000", f"{probed} 40000", "--setups",
                                   "3", "--repeat", "1", "--no-rt", "--metric",
                                   "instructions-exact", "-o", str(out), "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    said = json.loads(res.stdout)["metrics"]["instructions-exact"]
    assert said["counted"] == exact.REGION and said["exact"] is True
    counted = results.metadata(results.load(out))["instructions_exact"]
    per = {side: {c["instructions"] for c in counted if c["side"] == side} for side in "AB"}
    assert all(len(v) == 1 for v in per.values())  # the same in every layout
    (a,), (b,) = per["A"], per["B"]
    body = (b - a) / 20000
    assert body == int(body) and 0 <= a - 20000 * body < 100  # the loop, and no start-up
    assert a < _by_hand([probed, "20000"], {}) - 5000 * body
    assert all(c["moved"] in (None, c["instructions"]) for c in counted)
