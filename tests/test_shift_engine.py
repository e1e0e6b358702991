"""The shift engine (--engine shift): the same windows as exec'd runs, frames checked before it
measures, programs of the user refused, resume and stop as the exec engine, every child under
perflab's supervisor."""

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import psutil
import pytest
from conftest import _busy_s, _ours_s, wait_for

from perflab.cli import cli
from perflab.errors import PerflabError
from perflab.lab import env_size
from perflab.lab.env_size import measure, shifted, windows
from perflab.lab.env_size.plan import EnvSizePlan
from perflab.running import shift
from perflab.store import results
from perflab.system import compiler, machine, supervisor

REPEAT = 15  # runs per size: a median per size that one preempted run cannot move
ROUNDS = 5  # each engine's runs in rounds, alternated with the other's (fixture `both`)
MARGIN = 24  # sizes swept each side of the predicted window
ENGINES = ("exec", "shift")


@pytest.fixture(scope="module", autouse=True)
def cache(tmp_path_factory):
    """One build cache for the module, away from the user's."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "cache"))
        yield


# The timing check compares the engines' ticks and may refuse on a CPU where they differ (issue
# 48: a Xeon with AMX reads 4-14 % apart at a few frames, from run to run). Tests of what the
# engine does once it measures (resume, jobs, supervision) skip that check and nothing else;
# the check itself is tested on recorded figures below.
UNCHECKED = "from perflab.lab.env_size import shifted; shifted.check_timing = lambda *a: {}"


@pytest.fixture
def timing_unchecked(monkeypatch):
    """The shift engine without its timing check: see UNCHECKED."""
    monkeypatch.setattr(shifted, "check_timing", lambda *a: {})


@pytest.fixture(scope="module")
def window() -> tuple[int, int]:
    """The first window the addresses predict for the built-in loop: the loop's slots meet its
    statics modulo 4096 once per 4096 sizes, on any x86-64 CPU."""
    loop = str(windows.build_loop().path)
    predicted = windows.predict(windows.loop_layout(loop), np.arange(0, 8193))
    assert len(predicted), "the built-in loop has a predicted window every 4096 sizes"
    return int(predicted.start.iloc[0]), int(predicted.end.iloc[0])


@pytest.fixture(scope="module")
def both(window):
    """The same sweep around that window with each engine, in ROUNDS rounds of REPEAT / ROUNDS
    runs a size, the engines alternating, and the larger share of the CPUs other tasks took
    during either engine's rounds. A spell of the host that slows every run, which no task of
    this guest shows, covered a whole shift sweep once (a tenth as long as the exec one) and
    read its medians 1.22-1.30x the exec engine's; in rounds it reaches a minority of each
    size's runs, for both engines alike."""
    start, end = window
    plan = dict(min_size=start - MARGIN, max_size=end + MARGIN, repeat=REPEAT // ROUNDS,
                progress=False)  # fmt: skip
    parts: dict[str, list] = {e: [] for e in ENGINES}
    took, spent = dict.fromkeys(ENGINES, 0.0), dict.fromkeys(ENGINES, 0.0)
    for r in range(ROUNDS):
        for engine in ENGINES if r % 2 == 0 else ENGINES[::-1]:
            busy, ours, began = _busy_s(), _ours_s(), time.monotonic()
            try:
                part = env_size.sweep(engine=engine, seed=r, **plan)
            except PerflabError as exc:
                # Its timing check saw the engines differ here (issue 48: a Xeon with AMX read
                # 8-14 % high at 21 of 48 sizes): a refusal is what the engine owes this CPU.
                if "than exec'd runs at the same frames" not in str(exc):
                    raise
                pytest.skip(f"the shift engine refuses on this CPU: {exc}")
            took[engine] += (_busy_s() - busy) - (_ours_s() - ours)
            spent[engine] += time.monotonic() - began
            parts[engine].append(part.assign(rep=part["rep"] + r * plan["repeat"]))
    frames: dict = {
        e: results.attach(pd.concat(parts[e], ignore_index=True), results.metadata(parts[e][0]))
        for e in ENGINES
    }
    cpus = len(machine.usable_cpus())
    frames["others"] = max(took[e] / (spent[e] * cpus) for e in ENGINES)
    frames["spell"] = max(_spell(parts[e], window) for e in ENGINES)
    return frames


def _spell(rounds: list[pd.DataFrame], window: tuple[int, int]) -> float:
    """How far the slowest round's median ticks (sizes away from the window) stood above the
    engine's median round: the host's speed, not the engine, since what an engine does wrong
    at a size it does in every round."""
    away = [r.loc[~r["env_size"].between(window[0] - 16, window[1] + 16), "ticks"].median()
            for r in rounds]  # fmt: skip
    return float(max(away) / np.median(away) - 1)


@contextlib.contextmanager
def judged(both):
    """A timing comparison that fails while other tasks kept the CPUs busy, or while the host
    slowed a whole round of runs, is a skip that says so, not a verdict (conftest's `alone`,
    for sweeps made by a fixture)."""
    try:
        yield
    except AssertionError:
        if both["others"] > 0.05:
            pytest.skip(f"other tasks used {both['others']:.0%} of the CPUs during the sweeps")
        _skip_a_spell(both)
        raise


def _skip_a_spell(both) -> None:
    if both["spell"] > 0.05:
        pytest.skip(
            f"a round of one engine ran {both['spell']:.0%} slower than its others (the host "
            "slowed this guest for a spell): neither engine's medians can be judged"
        )


def _windows(df) -> list[tuple[int, int]]:
    found = env_size.detect_windows(env_size.summarize(df))
    return [(int(w.start), int(w.end)) for w in found.itertuples()]


@pytest.mark.long
def test_both_engines_predict_the_same_windows(both, window):
    sizes = np.unique(both["exec"]["env_size"])
    exec_meta, shift_meta = (results.metadata(both[e]) for e in ("exec", "shift"))
    predicted = windows.predicted_from(exec_meta, sizes)
    assert predicted is not None and predicted.equals(windows.predicted_from(shift_meta, sizes))
    assert (int(predicted.start.iloc[0]), int(predicted.end.iloc[0])) == window
    assert (exec_meta["engine"], shift_meta["engine"]) == ("exec", "shift")


@pytest.mark.long
def test_the_shift_engine_sees_the_exec_engines_windows_edge_for_edge(both):
    seen = _windows(both["exec"])
    if not seen:
        _skip_a_spell(both)
        pytest.skip(
            "this CPU does not pay for the loop's 4K aliasing: exec'd runs show no window "
            "where the addresses predict one, so there is no edge to compare"
        )
    # Each edge within one stack step: a size at an edge reads either way at the detector's
    # threshold, in either engine's sweep, as in two sweeps of the exec engine.
    with judged(both):
        shift = _windows(both["shift"])
        assert len(shift) == len(seen), (shift, seen)
        edges = np.abs(np.array(shift) - np.array(seen))
        assert (edges <= windows.STACK_STEP).all(), (shift, seen)


def test_the_timing_check_refuses_a_bias_of_many_sizes_one_way_and_not_the_hosts_noise():
    """On recorded ticks of a known answer: the shift child 10 % slower than exec'd runs at 8
    of 17 sizes, exec'd runs within 1 % of each other, is refused in one line; the same bias
    where exec'd runs disagree with themselves by 20 % is not (the check cannot tell), nor are
    ticks drawn alike for both engines."""
    rng = np.random.default_rng(3)
    base = rng.uniform(1e5, 2e5, 17)

    def drawn(spread: float, bias=1.0) -> np.ndarray:
        return base * bias * rng.lognormal(0, spread, (shifted.TIMING_ROUNDS, 17))

    bias = np.where(np.arange(17) < 8, 1.10, 1.0)
    found = shifted.agreement(drawn(0.003), drawn(0.003, bias), drawn(0.003))
    assert (found["sizes"], found["slower"], found["faster"]) == (17, 8, 0)
    line = shifted.disagreement(found)
    assert line is not None and "\n" not in line and line.endswith("; use --engine exec")
    assert line.startswith("--engine shift: at 8 of 17 sizes its loop ran 10% slower than exec")
    noisy = shifted.agreement(drawn(0.003), drawn(0.003, bias), drawn(0.003) * 1.2)
    assert noisy["bound"] > 0.15 and shifted.disagreement(noisy) is None
    alike = shifted.agreement(drawn(0.003), drawn(0.003), drawn(0.003))
    assert alike["slower"] + alike["faster"] <= 1 and shifted.disagreement(alike) is None


def test_the_timing_check_refuses_a_small_bias_at_every_size_unless_exec_drifts_as_much():
    """On recorded ticks: the shift child 7 % fast at all 17 sizes, inside exec'd runs' largest
    per-size gap (9 %) so no size reads beyond it, is refused on the median over sizes; where
    exec'd runs' second run drifts 10 % from their first, the check cannot tell, and lets it by."""
    rng = np.random.default_rng(5)
    base = rng.uniform(1e5, 2e5, 17)

    def drawn(spread: float, bias=1.0) -> np.ndarray:
        return base * bias * rng.lognormal(0, spread, (shifted.TIMING_ROUNDS, 17))

    wide = drawn(0.003) * np.where(np.arange(17) == 3, 1.09, 1.0)  # one size's gap sets the bound
    found = shifted.agreement(drawn(0.003), drawn(0.003, 0.93), wide)
    assert found["slower"] + found["faster"] <= 2 and found["drift"] < 0.005
    line = shifted.disagreement(found)
    assert line is not None and "\n" not in line and line.endswith("; use --engine exec")
    assert line.startswith("--engine shift: over 17 sizes its loop ran 7% faster than exec'd")
    drifting = shifted.agreement(drawn(0.003), drawn(0.003, 0.97), drawn(0.003, 1.10))
    assert drifting["drift"] > 0.05 and drifting["ratio"] < 0.95
    assert shifted.disagreement(drifting) is None


@pytest.mark.long
def test_the_timing_check_ran_at_sixteen_frame_steps_and_let_the_sweep_measure(both):
    timing = results.metadata(both["shift"])["shift_check"]["timing"]
    start, end = int(both["shift"]["env_size"].min()), int(both["shift"]["env_size"].max())
    sizes = shifted.timing_sizes(EnvSizePlan(min_size=start, max_size=end))
    assert timing["sizes"] == sizes.size and sizes.size >= shifted.TIMING_FRAMES
    assert shifted.disagreement(timing) is None


@pytest.mark.long
def test_rows_carry_the_exec_engines_columns_and_say_what_they_cannot_be(both):
    exec_rows, shift_rows = both["exec"], both["shift"]
    assert list(shift_rows.columns) == list(exec_rows.columns)
    assert (shift_rows["status"] == "ok").all() and shift_rows["ticks"].notna().all()
    assert shift_rows["maxrss_kb"].isna().all()  # one child ran every point: no point's peak
    meta = results.metadata(shift_rows)
    assert "not measured" in meta["maxrss_method"] and meta["maxrss_floor_kb"] is None
    # outer_ticks times a call, not a process's whole life: the medians, since a host spell in
    # a round (rounds alternate the engines) put 10.5 % of one run's calls above the exec median
    assert shift_rows["outer_ticks"].median() < exec_rows["outer_ticks"].median()


@pytest.mark.long
def test_the_frames_are_checked_against_exec_d_children_before_measuring(both):
    meta = results.metadata(both["shift"])
    checked = meta["shift_check"]
    loop = str(windows.build_loop().path)
    twin = str(windows.twin().path)
    pad = windows.env_strings([loop], {}, "A", 0) - windows.env_strings([twin], {}, "A", 0)
    sizes = np.asarray(checked["sizes"])
    exec_frames = windows.probe((sizes + pad).tolist(), "A")["frame"]
    assert [hex(int(f)) for f in exec_frames] == checked["frames"]
    assert len(set(checked["frames"])) > 1  # the sample spans more than one 16-byte step


def test_a_placement_that_is_not_the_exec_d_one_is_refused(window):
    loop = str(windows.build_loop().path)
    layout = windows.loop_layout(loop)
    built = _shift_binary()
    deeper = windows.StackModel(layout.model.top, layout.model.depth + 16)
    off = windows.Layout(layout.accesses, deeper, layout.base_strings)
    plan = EnvSizePlan(min_size=window[0], max_size=window[1], cpus=(machine.usable_cpus()[-1],))
    statics = tuple((a.offset, a.size) for a in layout.accesses if a.where == "static")
    with pytest.raises(PerflabError, match=r"use --engine exec$"):
        shifted.check_frames(plan, off, loop, str(built.path), {}, statics)
    shifted.check_frames(plan, layout, loop, str(built.path), {}, statics)


def test_the_shift_binary_keeps_every_address_of_the_exec_d_one():
    loop = windows.build_loop().path
    built = _shift_binary()
    shift.check_layout(loop, built.path)
    with pytest.raises(PerflabError, match="moved"):
        shift.check_layout(loop, windows.twin().path)


def test_a_program_of_the_user_is_refused_in_one_line(runner, tmp_path):
    with pytest.raises(PerflabError, match="built-in loops only"):
        env_size.sweep(["/bin/true"], engine="shift")
    result = runner.invoke(cli, ["sweep", "env-size", "--engine", "shift", "-o",
                                 str(tmp_path / "x.parquet"), "--", "/bin/true"])  # fmt: skip
    assert result.exit_code != 0
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "built-in loops only" in lines[0], lines
    assert not (tmp_path / "x.parquet").exists()
    with pytest.raises(PerflabError, match="needs --aslr off"):
        env_size.sweep(engine="shift", aslr="on", max_size=1, repeat=1)


def test_a_resume_completes_the_plan_and_never_mixes_engines(tmp_path, monkeypatch,
                                                             timing_unchecked):  # fmt: skip
    out = tmp_path / "shift.parquet"
    monkeypatch.setattr(measure, "SHIFT_CHUNK_POINTS", 50)
    done: list[int] = []

    def stop_after_two(n: int) -> None:
        done.append(n)
        if len(done) == 2:
            raise KeyboardInterrupt

    plan = dict(min_size=100, max_size=199, repeat=3, engine="shift")
    with pytest.raises(KeyboardInterrupt):
        env_size.sweep(output=out, progress=stop_after_two, on_start=lambda *_: None, **plan)
    kept = results.load(out)
    assert results.metadata(kept)["complete"] is False and 0 < len(kept) < 300
    with pytest.raises(PerflabError, match="engine"):
        env_size.sweep(output=out, resume=True, progress=False, **{**plan, "engine": "exec"})
    df = env_size.sweep(output=out, resume=True, progress=False, **plan)
    assert results.metadata(df)["complete"] is True and len(df) == 300
    assert not df.duplicated(["env_size", "rep"]).any()
    merged = df.merge(kept, on=["env_size", "rep"], suffixes=("", "_kept"))
    assert len(merged) == len(kept) and (merged["ticks"] == merged["ticks_kept"]).all()


@pytest.mark.skipif(len(machine.usable_cpus()) < 2, reason="--jobs 2 needs two usable CPUs")
def test_jobs_run_one_shift_child_per_cpu_with_a_reference_slice(timing_unchecked):
    cpus = tuple(machine.usable_cpus()[-2:])
    df = env_size.sweep(min_size=0, max_size=99, repeat=20, engine="shift", jobs=2, cpus=cpus,
                        allow_siblings=True, reference=0.2, progress=False)  # fmt: skip
    assert set(df["cpu"]) == set(cpus) and set(df["parallel"]) == {True, False}
    assert (df["status"] == "ok").all() and len(df) == 2000
    assert results.metadata(df)["interference"]["cpus"]


def _shift_binary() -> compiler.Workload:
    """The paper's loop linked with the shift driver, in the layout a sweep without a window
    to time builds it in."""
    return shift.build(compiler.WORKLOADS / "mytkowicz.c", "0", windows.DEFAULT_LAYOUT.flags())


def _shift_children(binary: str) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["exe"]):
        if p.info["exe"] == binary:
            found.append(p)
    return found


@pytest.mark.long
@pytest.mark.parametrize("ending", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "kill-9"])
def test_the_shift_child_is_supervised_and_ends_with_perflab(ending, tmp_path):
    out = tmp_path / "long.parquet"
    binary = str(_shift_binary().path)
    prelude = f"{UNCHECKED}; from perflab.cli import main; main()"
    argv = [sys.executable, "-c", prelude, "sweep", "env-size", "--engine", "shift", "--max",
            "63", "--repeat", "2000", "-o", str(out)]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ})  # fmt: skip

    def running(ready):
        def check() -> bool:
            assert proc.poll() is None, proc.communicate()
            return ready()

        return check

    try:
        chunks = out.with_name(out.name + ".parts")
        wait_for(running(lambda: any(chunks.glob("chunk-*"))), "a first chunk")
        (child,) = _shift_children(binary)
        parent = child.parent()
        assert parent is not None and parent.exe() == str(supervisor.HELPER)
        assert "supervise" in parent.cmdline()
        personality = Path(f"/proc/{child.pid}/personality").read_text().strip()
        assert int(personality, 16) & 0x0040000  # ADDR_NO_RANDOMIZE
        proc.send_signal(ending)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    wait_for(lambda: not _shift_children(binary), "the shift child's end", 10)
    if ending == signal.SIGINT:
        assert proc.returncode == 128 + signal.SIGINT, err
        kept = results.load(out)
        assert 0 < len(kept) < 64 * 2000 and results.metadata(kept)["complete"] is False
