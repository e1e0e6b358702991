"""memcpy sweep, knee detector and page-fault cost: real native runs and synthetic truths."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from perflab import machine, memcpy, pagefault, results
from perflab.cli import cli
from perflab.errors import PerflabError


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
    df = memcpy.sweep(256 << 10, trials=5)
    return df, before


def test_sweep_columns_and_metadata(sweep256k):
    df, before = sweep256k
    assert list(df.columns) == [
        "kernel",
        "size",
        "ticks",
        "ticks_per_byte",
        "gb_per_s",
        "derivative",
    ]
    assert df["size"].iloc[0] == 1 and df["size"].iloc[-1] == 256 << 10
    assert np.allclose(df["ticks_per_byte"], df["ticks"] / df["size"])
    meta = results.metadata(df)
    assert meta["trials"] == 5 and meta["experiment"] == "memcpy"
    assert meta["mlockall"] in (True, False)
    assert locked_kib() == before  # munlockall restored the process


def test_first_knee_is_l1d_on_the_touched_scale(sweep256k):
    df, _ = sweep256k
    l1d = machine.cache_size("L1d")
    if not l1d:
        pytest.skip("sysfs declares no L1d")
    knees = memcpy.detect_knees(df["size"], df["ticks_per_byte"])
    assert not knees.empty
    first = knees["touched"].iloc[0]
    assert l1d / 2 <= first <= 2 * l1d


def test_copies_get_dearer_beyond_l1(sweep256k):
    df, _ = sweep256k
    l1d = machine.cache_size("L1d") or 32768
    # minima: a loaded machine only ever adds time, so the floors compare the caches
    inside = df[(df["size"] >= l1d // 4) & (df["size"] <= l1d // 2)]["ticks_per_byte"].min()
    outside = df[df["size"] >= 4 * l1d]["ticks_per_byte"].min()
    assert outside > 2 * inside


def test_loop_kernel_shows_riquadro_3_oscillation():
    df = memcpy.sweep(64, trials=20, kernel="loop")
    small = memcpy.small_table(df, 64).set_index("size")["ticks"]
    cheaper = [small[8 * k] < small[8 * k - 1] for k in range(2, 9)]
    assert sum(cheaper) >= 5  # whole words only vs the same words plus 7 single bytes


def test_alignment_and_offset_are_validated():
    with pytest.raises(PerflabError, match="power of two"):
        memcpy.Placement(3, 0).check()
    with pytest.raises(PerflabError, match="offset"):
        memcpy.Placement(64, 5000).check()
    df = memcpy.sweep(4096, trials=2, align=1, offset=3)
    assert results.metadata(df)["align"] == 1 and len(df) > 64


def test_page_faults_cost_more_than_touching_again():
    df = pagefault.measure(pages=256, reps=5)
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


def test_cli_pagefault_json(runner):
    res = runner.invoke(cli, ["run", "pagefault", "--pages", "64", "--reps", "3", "--json"])
    assert res.exit_code == 0, res.output
    rows = {r["condition"]: r for r in json.loads(res.stdout)["per_page"]}
    assert (
        rows["first touch"]["median_ticks_per_page"] > rows["touch again"]["median_ticks_per_page"]
    )
