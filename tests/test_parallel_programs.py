"""--jobs on the perf-assertion program targets: one child per CPU at a time, rows name it."""

import shutil
import sys

import numpy as np
import pytest

from perflab.assertions import claims, table
from perflab.errors import PerflabError
from perflab.running import timing
from perflab.store import results
from perflab.system import machine

pytest_plugins = ["pytester"]
TWO = machine.usable_cpus()[-2:]
needs_two = pytest.mark.skipif(len(TWO) < 2, reason="needs two usable CPUs")
TRUE = shutil.which("true") or "/bin/true"

# Each child writes where it may run and when, in a file named by its pid.
WITNESS = (
    "import os, sys, time\n"
    "t0 = time.monotonic()\n"
    "time.sleep(0.25)\n"
    "cpus = sorted(os.sched_getaffinity(0))\n"
    "path = os.path.join(sys.argv[1], str(os.getpid()))\n"
    "open(path, 'w').write(f'{cpus[0]} {len(cpus)} {t0} {time.monotonic()}')\n"
)


@needs_two
def test_program_samples_run_two_at_once_each_pinned_and_tagged(tmp_path):
    (tmp_path / "w.py").write_text(WITNESS)
    seen = tmp_path / "seen"
    seen.mkdir()
    target = timing.program([sys.executable, str(tmp_path / "w.py"), str(seen)], jobs=2,
                            cpus=TWO)  # fmt: skip
    assert target.lanes == tuple(TWO) and not target.pin
    raw, net, cpu = timing.sample_tagged(target, 6)
    assert raw.size == net.size == cpu.size == 6 and (raw > 0).all()
    runs = [f.read_text().split() for f in seen.iterdir()]
    assert len(runs) == 6 and all(int(n) == 1 for _, n, _, _ in runs)  # each pinned to one CPU
    assert sorted(int(c) for c, _, _, _ in runs) == sorted(cpu.tolist())  # tags: where they ran
    assert set(cpu.tolist()) == set(TWO)
    spans = [(float(a), float(b)) for _, _, a, b in runs]
    assert max(sum(a <= t < b for a, b in spans) for t, _ in spans) == 2  # never three


@needs_two
def test_a_comparison_side_by_side_tags_each_sample_with_its_cpu():
    a, b = (timing.program([TRUE], jobs=0, cpus=TWO, name=n) for n in ("a", "b"))
    c = claims.check_no_slower(a, b, tolerance=10.0, budget="30s,40runs")
    assert c.lanes == tuple(TWO) and c.summary()["lane_cpus"] == TWO
    assert c.summary()["jobs"] == 2 and "side by side, one child per CPU" in table.render(c)
    df = c.frame()
    assert len(df) == 2 * c.runs and set(df["cpu"]) == set(TWO)
    for role in ("baseline", "candidate"):
        assert set(df.loc[df["role"] == role, "cpu"]) <= set(TWO)
    assert (df["ticks"] > 0).all()


def test_sequential_targets_keep_their_one_cpu_or_say_none():
    cpu = machine.usable_cpus()[-1]
    pinned = timing.program([TRUE], cpus=[cpu])
    _, _, tags = timing.sample_tagged(pinned, 3)
    assert tags.tolist() == [cpu] * 3
    spin = timing.spin(100)
    timing.calibrate(spin)
    assert timing.sample_tagged(spin, 3)[2].tolist() == [timing.NOT_PINNED] * 3


@needs_two
def test_side_by_side_programs_must_share_their_batch():
    a = timing.program([TRUE], jobs=2, cpus=TWO)
    other_env = timing.program([TRUE], {"X": "1"}, jobs=2, cpus=TWO)
    with pytest.raises(PerflabError, match="same jobs, CPUs, environment and options"):
        timing.sample_pair_tagged(a, other_env, 4)
    one_at_a_time = timing.program([TRUE], cpus=TWO[:1])
    with pytest.raises(PerflabError, match="same jobs"):
        timing.sample_pair_tagged(a, one_at_a_time, 4)


def test_program_jobs_are_checked_before_running():
    usable = machine.usable_cpus()
    with pytest.raises(PerflabError, match=rf"--jobs {len(usable) + 1}: only {len(usable)}"):
        timing.program([TRUE], jobs=len(usable) + 1)
    with pytest.raises(PerflabError, match="--jobs must be 0"):
        timing.program([TRUE], jobs=-1)


@needs_two
def test_plugin_jobs_option_runs_programs_side_by_side_and_saves_cpus(pytester, monkeypatch):
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile(
        test_perf=f"""
        def test_programs(perflab):
            a = perflab.program([{TRUE!r}], name="a")
            b = perflab.program([{TRUE!r}], name="b")
            assert a.lanes == b.lanes == {tuple(TWO)!r}
            perflab.assert_no_slower(a, b, tolerance=10.0, budget="30s,40runs")
        """
    )
    res = pytester.runpytest("-p", "perflab.assertions.pytest_plugin", "--perflab-jobs", "2",
                             "--perflab-save", "saved")  # fmt: skip
    res.assert_outcomes(passed=1)
    df = results.load(next((pytester.path / "saved").glob("perflab-*.parquet")))
    assert set(df["cpu"]) == set(TWO) and np.isin(df["cpu"], TWO).all()
    meta = results.metadata(df)
    assert meta["perflab_jobs"] == 2 and meta["comparisons"][0]["lane_cpus"] == TWO
    bad = pytester.runpytest("-p", "perflab.assertions.pytest_plugin", "--perflab-jobs", "999")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--perflab-jobs: --jobs 999: only * usable CPUs*"])
