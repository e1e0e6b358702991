"""memcpy sweep, knee detector and page-fault cost: real native runs and synthetic truths."""

import contextlib
import json
import os
import resource
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import psutil
import pytest

from perflab.cli import cli
from perflab.errors import PerflabError, PerflabWarning
from perflab.lab import memcpy, pagefault, resolution
from perflab.store import results
from perflab.system import machine, timer


@contextlib.contextmanager
def mlock_may_be_refused():
    """A plain user's `ulimit -l` refuses mlockall: perflab warns (once) and sweeps on."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "mlockall", PerflabWarning)
        yield


def locked_kib() -> int:
    """VmLck of this process: mlockall must be undone after a sweep."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmLck:"):
            return int(line.split()[1])
    return 0


def test_incr_is_the_articles_32_steps_per_octave():
    s = memcpy.sizes(1 << 20)
    assert list(s[:64]) == list(range(1, 65))
    octave = s[(s >= 32768) & (s < 65536)]
    assert len(octave) == 32
    assert set(np.diff(octave)) == {1024}
    assert memcpy.incr(65536) == 65536 + 2048
    assert s[-1] == 1 << 20


def test_the_default_max_is_on_the_grid_within_the_cache_memory_and_time_it_names():
    """The default reaches 4x the last-level cache at most, on the 32-steps-an-octave grid, its
    two buffers within a quarter of the memory available, its copies within the time budget at
    the rate the pilot measured; the sentence says which bound held."""
    table = machine.caches()
    reach = memcpy.LLC_TIMES * table["size_bytes"].max() if len(table) else memcpy.NO_LLC
    for trials in (1, 10):
        bound = memcpy.default_max("libc", trials)
        assert bound.bytes == memcpy.on_grid(bound.bytes)
        assert bound.bytes <= reach
        assert 2 * bound.bytes <= psutil.virtual_memory().total // memcpy.MEMORY_SHARE
        assert bound.why.startswith(f"default --max {memcpy.human_bytes(bound.bytes)}: ")
        assert f"{trials} trial{'s' if trials > 1 else ''} at " in bound.why
    assert memcpy.on_grid(1_258_291_200) == 1_241_513_984  # 4x 300 MiB, down to the grid
    assert memcpy.on_grid(1 << 20) == 1 << 20


@pytest.mark.parametrize(
    ("text", "value"), [("64K", 65536), ("1MB", 1 << 20), ("1MiB", 1 << 20), ("4096", 4096)]
)
def test_parse_size(text, value):
    assert memcpy.parse_size(text) == value


@pytest.mark.parametrize("text", ["0", "-3", "1.5", "12Q", "", "K"])
def test_parse_size_refuses(text):
    with pytest.raises(PerflabError):
        memcpy.parse_size(text)


@pytest.mark.parametrize("kernel", list(memcpy.KERNELS))
@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 63, 4097])
def test_kernels_copy_every_byte(kernel, n):
    src = np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8)
    dst = np.zeros(n + 16, dtype=np.uint8)
    memcpy.copy(dst, src, kernel)
    assert np.array_equal(dst[:n], src)
    assert not dst[n:].any()


def staircase(breaks, levels, noise=0.03, seed=1, ramp_points=0):
    """A synthetic ticks-per-byte curve on incr() sizes with known steps."""
    size = memcpy.sizes(64 << 20, min_bytes=1024).astype(float)
    y = np.full(size.size, float(levels[0]))
    for b, lo, hi in zip(breaks, levels[:-1], levels[1:], strict=True):
        start = int(np.searchsorted(size, b))
        y[start:] = hi
        if ramp_points:
            y[start : start + ramp_points] = np.geomspace(lo, hi, ramp_points)
    rng = np.random.default_rng(seed)
    y *= np.exp(rng.normal(0, noise, size.size))
    spikes = rng.choice(size.size, 6, replace=False)
    y[spikes] *= 3  # an interrupt now and then, as in the green dots of the figure
    return size, y


@pytest.mark.parametrize("ramp", [0, 16])
def test_detector_finds_known_steps(ramp):
    breaks = [16 << 10, 512 << 10, 16 << 20]
    size, y = staircase(breaks, [0.02, 0.1, 0.5, 1.0], ramp_points=ramp)
    knees = memcpy.detect_knees(size, y)
    assert len(knees) == 3
    for found, true in zip(knees["size"], breaks, strict=True):
        assert true / 1.1 <= found <= true * 1.1
    assert (knees["touched"] == 2 * knees["size"]).all()


def test_detector_ignores_noise_and_falls():
    size, y = staircase([1 << 20], [0.5, 0.2])
    assert memcpy.detect_knees(size, y).empty
    flat = np.full(size.size, 0.1) * np.exp(np.random.default_rng(3).normal(0, 0.05, size.size))
    assert memcpy.detect_knees(size, flat).empty


def test_knee_report_pairs_knees_with_declared_caches():
    caches = pd.DataFrame({"cache": ["L1d", "L1i", "L2"], "size_bytes": [32768, 32768, 1 << 20]})
    knees = pd.DataFrame(
        {
            "size": [16384, 600000],
            "touched": [32768, 1200000],
            "level_before": [0.02, 0.1],
            "level_after": [0.1, 0.5],
            "rise": [5.0, 5.0],
        }
    )
    rep = memcpy.knee_report(knees, caches)
    assert list(rep["cache"]) == ["L1d", "L2"]
    assert rep["touched_over_cache"].iloc[0] == 1.0


@pytest.fixture(scope="module")
def sweep256k():
    before = locked_kib()
    with mlock_may_be_refused():
        df = memcpy.run(256 << 10, trials=5)
    return df, before


def test_sweep_columns_and_metadata(sweep256k):
    df, before = sweep256k
    assert list(df.columns) == [
        "kernel",
        "size",
        "copies",
        "ticks",
        "ticks_per_byte",
        "gb_per_s",
        "derivative",
    ]
    assert df["size"].iloc[0] == 1 and df["size"].iloc[-1] == 256 << 10
    assert np.allclose(df["ticks_per_byte"], df["ticks"] / df["size"])
    meta = results.metadata(df)
    assert meta["trials"] == 5 and meta["experiment"] == "memcpy"
    assert meta["timer_step_ticks"] == timer.timer_step() and meta["min_sample_steps"] == 100
    assert meta["mlockall"] in (True, False)
    assert locked_kib() == before  # munlockall restored the process


def test_no_bandwidth_comes_from_a_sample_under_100_timer_steps(sweep256k):
    """A copy of a few bytes is far shorter than one step of a coarse TSC (26 ticks on an EPYC
    guest): each sample holds as many copies (a power of two) as last 100 steps, so every size
    is rated, and its ticks per copy are the sample's over its copies."""
    df, _ = sweep256k
    step = timer.timer_step()
    sample = df["ticks"] * df["copies"]
    assert (sample >= 100 * step).all()
    assert df["gb_per_s"].notna().all()
    assert (df["copies"] >= 1).all() and (df["copies"] & (df["copies"] - 1) == 0).all()
    assert df.loc[df["size"] == 1, "copies"].item() > 1
    hz = results.metadata(df)["tsc_hz"]
    assert np.allclose(df["gb_per_s"], df["size"] / (df["ticks"] / hz) / 1e9)
    peak = memcpy.summary(df, results.metadata(df)).values["peak"]
    assert sample[df["size"] == peak["size"]].item() >= 100 * step


DATA = Path(__file__).parent / "data"
# A real default sweep on an AMD EPYC KVM guest (L1d 32 KiB, L2 512 KiB, L3 8 MiB per sysfs),
# taken while other work shared the machine: this core copies at one cost per byte in and out
# of L1d, so the only knee is where the copy outgrows L2.
EPYC_CACHES = pd.DataFrame(
    {"cache": ["L1d", "L2", "L3"], "size_bytes": [32 << 10, 512 << 10, 8 << 20]}
)


def test_the_summary_says_the_peak_memory_private_and_resident(sweep256k):
    """Private (RssAnon while the buffers were held: at least the two buffers) beside resident
    (VmHWM, never less); a file from before perflab recorded them says nothing of memory."""
    df, _ = sweep256k
    meta = results.metadata(df)
    assert meta["buffer_bytes"] == (256 << 10) + 2 * memcpy.PAGE
    assert 2 * meta["buffer_bytes"] <= meta["peak_private_kib"] << 10
    assert meta["peak_private_kib"] <= meta["peak_resident_kib"]
    s = memcpy.summary(df, meta)
    assert s.values["memory"] == {k: meta[k] for k in memcpy.MEMORY_KEYS}
    mb = [f"{v / 1e6:.1f}" for v in (meta["peak_private_kib"] << 10, meta["buffer_bytes"])]
    line = next(line for line in s.lines if line.startswith("peak memory: "))
    assert line.startswith(f"peak memory: {mb[0]} MB private (two buffers of {mb[1]} MB each + ")
    assert line.endswith(
        f"{(meta['peak_resident_kib'] << 10) / 1e6:.1f} MB resident with shared libraries"
    )
    old = results.load(DATA / "memcpy-epyc-kvm.parquet")
    summary = memcpy.summary(old, results.metadata(old))
    assert "memory" not in summary.values
    assert not any(line.startswith("peak memory") for line in summary.lines)


def test_recorded_epyc_sweep_has_no_l1_knee_and_one_beyond_l2():
    df = memcpy.rated(results.load(DATA / "memcpy-epyc-kvm.parquet"))
    assert results.metadata(df)["cpu_model"] == "AMD EPYC"
    knees = memcpy.detect_knees(df["size"], df["ticks_per_byte"])
    report = memcpy.knee_report(knees, EPYC_CACHES)
    assert list(report["cache"]) == ["L2"]
    assert (knees["touched"] > 2 * (512 << 10)).all()


def test_a_sweep_recorded_one_copy_per_sample_is_rated_only_where_its_timer_resolved_it():
    """The EPYC file timed single copies with a TSC in steps of 20 ticks (unrecorded then: read
    from the ticks): sizes under 100 steps (2,000 ticks) give no rate, no knee, no ticks per
    byte, and the summary says how many; the peak is a resolved size's."""
    df = results.load(DATA / "memcpy-epyc-kvm.parquet")
    meta = results.metadata(df)
    keep, step = memcpy.resolved_rows(df, meta)
    assert step == 20 and not keep.all() and keep.any()
    assert (df.loc[keep, "ticks"] >= 2000).all() and (df.loc[~keep, "ticks"] < 2000).all()
    s = memcpy.summary(df, meta)
    assert s.values["unresolved"] == int((~keep).sum())
    assert df.loc[df["size"] == s.values["peak"]["size"], "ticks"].item() >= 2000
    assert any("lasted less than 100 timer steps" in line for line in s.lines)
    small = s.tables[0].frame
    assert small["ticks_per_byte"].isna().all() and small["ticks"].notna().all()
    assert (memcpy.rated(df)["ticks"] >= 2000).all()


def test_xeon_shape_from_the_docs_has_l1_l2_and_l3_knees():
    """The Xeon run of benchmarks/results/2026-11-21-xeon-memory-os.txt: x3 from an 11.5 KiB
    copy, x5.3 from 480 KiB, x1.5 from 20 MiB, rebuilt as a noisy staircase on the article's
    sizes."""
    breaks = [11_520, 491_520, 20 << 20]
    size, y = staircase(breaks, [0.02, 0.06, 0.32, 0.48], noise=0.05)
    caches = pd.DataFrame(
        {"cache": ["L1d", "L2", "L3"], "size_bytes": [32 << 10, 1 << 20, 37_486_592]}
    )
    report = memcpy.knee_report(memcpy.detect_knees(size, y), caches)
    assert list(report["cache"]) == ["L1d", "L2", "L3"]
    assert report["touched_over_cache"].between(0.5, 2).all()


def test_copies_beyond_every_cache_cost_more_per_byte_than_in_l1():
    """Physics on any machine: a 64 MiB copy (128 MiB touched) streams from memory, 4 KiB
    stays in L1; minima, because a loaded machine only ever adds time."""
    size = np.array([4096, 64 << 20])
    ticks = memcpy.measure(size, trials=5)
    per_byte = ticks / size
    # Each sample lasts 100 timer steps: its ticks per copy are good to 1 %.
    assert per_byte[1] > per_byte[0] * (1 + 2 / resolution.MIN_STEPS) > 0


def test_recorded_xeon_loop_kernel_shows_riquadro_3_oscillation():
    """Transcribed from a Xeon run (benchmarks/results/2026-11-21-xeon-memory-os.txt, a TSC in
    steps of 2 ticks): whole words are cheaper than the same words plus 7 single bytes, by more than
    a step summed over the table's three words."""
    small = memcpy.small_table(pd.read_csv(DATA / "memcpy-loop-xeon.csv"), 32)
    ticks = small.set_index("size")["ticks"]
    words, tails = ticks[[16, 24, 32]].sum(), ticks[[15, 23, 31]].sum()
    assert tails - words > 2


def test_loop_kernel_shows_riquadro_3_live():
    """Batched copies resolve what a single copy cannot on a coarse TSC: with the loop kernel,
    S = 8k+7 bytes (7 odd bytes one at a time) costs more than 8k+8 (one more whole word), by
    more than one timer step of each sample spread over its copies."""
    with mlock_may_be_refused():
        df = memcpy.run(64, trials=10, kernel="loop")
    step = timer.timer_step()
    row = df.set_index("size")
    for k in range(1, 4):
        odd, whole = row.loc[8 * k + 7], row.loc[8 * k + 8]
        assert odd["ticks"] - whole["ticks"] > step / odd["copies"] + step / whole["copies"]


def test_alignment_and_offset_are_validated():
    with pytest.raises(PerflabError, match="power of two"):
        memcpy.BufferAlignment(3, 0).check()
    with pytest.raises(PerflabError, match="offset"):
        memcpy.BufferAlignment(64, 5000).check()
    with mlock_may_be_refused():
        df = memcpy.run(4096, trials=2, align=1, offset=3)
    assert results.metadata(df)["align"] == 1 and len(df) > 64


def test_page_faults_cost_more_than_touching_again():
    df = pagefault.run(pages=256, reps=5)
    assert (df["ticks"] >= 100 * timer.timer_step()).all()
    assert (df.loc[df["condition"] == "first touch", "passes"] == 1).all()
    t = pagefault.table(df).set_index("condition")
    assert (
        t.loc["first touch", "median_ticks_per_page"]
        > 3 * t.loc["touch again", "median_ticks_per_page"]
    )
    assert (
        t.loc["mlocked", "median_ticks_per_page"]
        < t.loc["first touch", "median_ticks_per_page"] / 3
    )
    assert set(df["condition"]) == set(pagefault.CONDITIONS) and len(df) == 15


def test_cli_memcpy_json_output_and_plot(runner, tmp_path):
    out, png = tmp_path / "m.csv", tmp_path / "m.png"
    res = runner.invoke(
        cli,
        [
            "sweep",
            "memcpy",
            "--max",
            "128K",
            "--trials",
            "3",
            "--json",
            "-o",
            str(out),
            "--plot",
            str(png),
        ],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["max_bytes"] == 128 << 10 and isinstance(doc["knees"], list)
    assert [r["size"] for r in doc["small"]] == list(range(1, 33))
    assert len(results.load(out)) == doc["points"]
    assert png.stat().st_size > 10000


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max", "0"], "bad size"),
        (["--max", "10X"], "bad size"),
        (["--kernel", "nope"], "nope"),
        (["--align", "6"], "power of two"),
        (["--max", "1K", "-o", "/nonexistent/x.csv"], "does not exist"),
        (["--max", "1K", "--plot", "x.gif"], "unknown plot format"),
    ],
)
def test_cli_memcpy_errors_are_one_line(runner, args, message):
    res = runner.invoke(cli, ["sweep", "memcpy", *args])
    assert res.exit_code != 0
    assert message in res.output
    assert "Traceback" not in res.output and len(res.output.strip().splitlines()) == 1


def test_touching_two_pages_again_is_resolved_by_passes():
    """Two mapped pages are touched in less than one step of a coarse TSC: a sample takes as
    many passes over them as last 100 steps, and ticks per page are per page touched."""
    df = pagefault.run(pages=2, reps=3)
    again = df[df["condition"] == "touch again"]
    # a pass slowed by the host (a preemption, a fault) can last 100 steps alone: then it is one
    assert (again["passes"] > 1).any() and (again["ticks"] >= 100 * timer.timer_step()).all()
    assert np.allclose(again["ticks_per_page"], again["ticks"] / (2 * again["passes"]))
    assert pagefault.summarize(df)["median_ticks_per_page"].notna().all()


def test_cli_pagefault_json(runner):
    res = runner.invoke(cli, ["run", "pagefault", "--pages", "64", "--reps", "3", "--json"])
    assert res.exit_code == 0, res.output
    rows = {r["condition"]: r for r in json.loads(res.stdout)["per_page"]}
    assert (
        rows["first touch"]["median_ticks_per_page"] > rows["touch again"]["median_ticks_per_page"]
    )


@pytest.mark.skipif(os.geteuid() == 0, reason="root may lock any amount of memory")
def test_more_pages_than_a_user_may_lock_are_refused_before_measuring():
    """As a user, RLIMIT_MEMLOCK bounds the mlock'ed condition: one line naming the limit and
    the --pages that fits, before any page is touched (it failed mid-run with ENOMEM)."""

    def four_mib() -> None:
        hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (4 << 20, hard))

    argv = [sys.executable, "-m", "perflab", "run", "pagefault", "--pages", "2048", "--reps", "1"]
    done = subprocess.run(argv, capture_output=True, text=True, preexec_fn=four_mib, check=False)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.strip().splitlines()[-1] == (
        "Error: --pages 2048: the mlock'ed condition locks 8192 KiB, more than this user may "
        "lock (4096 KiB, ulimit -l); use --pages 1024 or fewer, or run as root"
    )


def private_kib(pid: int) -> int | None:
    """RssAnon of a process's /proc/PID/status now (KiB); None once its memory is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name == "RssAnon":
            return int(value.split()[0])
    return None


@pytest.mark.long
def test_the_default_sweep_holds_its_two_buffers_and_at_most_100_mb_more(tmp_path):
    """Issue #29: a default `perflab sweep memcpy` peaks at most 100 MB (10^6 bytes) above its
    two buffers (it reached 1.6 GB when mlockall faulted in all the interpreter had mapped).
    Private memory (RssAnon), polled from outside every 5 ms: the resident set also holds the
    pages of numpy's, pandas' and pyarrow's shared libraries (~60 MB), shared with the page
    cache and other processes. The buffers really were faulted in: private memory falls by
    them when the sweep frees them. The file records a private peak within the bound too, and
    the resident one (VmHWM) beside it. Every default but --trials 1: trials repeat each size
    in the same buffers, and the default 10 took 107 s of a 9-minute suite on a Xeon guest
    against 27 s."""
    out = tmp_path / "m.parquet"
    argv = [sys.executable, "-m", "perflab", "sweep", "memcpy", "--trials", "1", "-o", str(out)]
    with (tmp_path / "stdout").open("w") as stdout, (tmp_path / "stderr").open("w") as stderr:
        child = subprocess.Popen(argv, stdout=stdout, stderr=stderr, cwd=tmp_path)
        peak = last = 0
        while child.poll() is None:
            last = private_kib(child.pid) or last
            peak = max(peak, last)
            time.sleep(0.005)
    assert child.returncode == 0, (tmp_path / "stderr").read_text()
    meta = results.metadata(results.load(out))
    # The plan's largest size, as the sweep rounds --max down to its grid (issue 48: 4x a 300 MiB
    # L3 is not on it), and the bound the output names.
    assert meta["buffer_bytes"] == memcpy.on_grid(meta["max_bytes"]) + 2 * memcpy.PAGE
    assert meta["max_from"].startswith(f"default --max {memcpy.human_bytes(meta['max_bytes'])}:")
    assert meta["max_from"] in (tmp_path / "stdout").read_text()
    buffers_kib = 2 * meta["buffer_bytes"] >> 10
    bound_kib = buffers_kib + 100_000_000 // 1024
    assert peak <= bound_kib
    assert peak - last >= buffers_kib * 0.9
    assert buffers_kib <= meta["peak_private_kib"] <= bound_kib
    assert meta["peak_resident_kib"] > meta["peak_private_kib"]
    assert "peak memory: " in (tmp_path / "stdout").read_text()


def test_repeat_sweeps_the_same_sizes_and_diff_compares_the_kernels_on_a_log_axis(
    runner, tmp_path, caplog
):
    """--repeat N: N sweeps of the same sizes, each size's median in the summary; diff compares
    libc with the loop kernel size by size (the kernel is a condition, named), N runs a point,
    drawn along a log size axis without a tick warning (512 category labels made a black bar)."""
    files = {}
    for kernel in ("libc", "loop"):
        files[kernel] = tmp_path / f"{kernel}.parquet"
        argv = ["sweep", "memcpy", "--max", "64K", "--trials", "1", "--repeat", "5", "--kernel",
                kernel, "--no-mlock", "--json", "-o", str(files[kernel])]  # fmt: skip
        res = runner.invoke(cli, argv)
        assert res.exit_code == 0, res.output
        assert json.loads(res.stdout)["repeat"] == 5
    df = results.load(files["libc"])
    grid = memcpy.sizes(64 << 10).astype(np.int64)
    assert list(df["repeat"]) == list(np.repeat(range(5), grid.size))
    assert all(list(sizes) == list(grid) for _, sizes in df.groupby("repeat")["size"])
    assert results.metadata(df)["params"]["repeat"] == 5
    one = df[df["repeat"] == 2].reset_index(drop=True)
    assert np.allclose(one["derivative"].iloc[1:], memcpy.derivative(one["size"], one["ticks"])[1:])
    per = memcpy.per_size(df)
    assert list(per["size"]) == list(grid)
    assert np.allclose(per["ticks"], df.groupby("size")["ticks"].median().to_numpy())

    from perflab.reports import diff

    d = diff.diff(files["libc"], files["loop"])
    assert d.params == ("size",) and len(d.table) == grid.size
    assert (d.table["n_before"] == 5).all() and (d.table["n_after"] == 5).all()
    assert "measured with another kernel: 'libc' before, 'loop' after" in d.notes[0]
    with caplog.at_level("WARNING", logger="matplotlib"):
        fig = d.plot(tmp_path / "d.png")
    assert fig.axes[0].get_xscale() == "log" and not caplog.records
    assert (tmp_path / "d.png").stat().st_size > 10000
    res = runner.invoke(cli, ["diff", str(files["libc"]), str(files["loop"])])
    assert res.exit_code == 0 and "another kernel" in res.output, res.output
