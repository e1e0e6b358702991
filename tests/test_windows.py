"""Env-size windows predicted from addresses: objdump parsing and stack arithmetic on known
answers, the twin's own reports on this machine, the verdicts on recorded frames of a CPU with
windows (AMD EPYC) and one without (Xeon with AMX), and the CPU's 4K-aliasing check."""

import json
import platform
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from perflab.cli import cli
from perflab.core import bindings
from perflab.errors import PerflabError
from perflab.lab import env_size
from perflab.lab.env_size import aliasing, windows
from perflab.store import results

DATA = Path(__file__).resolve().parent / "data"
X86 = platform.machine() == "x86_64"

# objdump -d of the built-in loop's body (gcc 12, -O0, static), the lines windows.py reads.
LOOP = """
  4019fc:	mov    0xa68e6(%rip),%edx        # 4a82e8 <i>
  401a02:	mov    -0x8(%rbp),%eax
  401a05:	add    %edx,%eax
  401a07:	mov    %eax,0xa68db(%rip)        # 4a82e8 <i>
  401a0d:	mov    0xa68d9(%rip),%edx        # 4a82ec <j>
  401a13:	mov    -0x8(%rbp),%eax
  401a16:	add    %edx,%eax
  401a18:	mov    %eax,0xa68ce(%rip)        # 4a82ec <j>
  401a1e:	mov    0xa68cc(%rip),%edx        # 4a82f0 <k>
  401a24:	mov    -0x8(%rbp),%eax
  401a27:	add    %edx,%eax
  401a29:	mov    %eax,0xa68c1(%rip)        # 4a82f0 <k>
  401a2f:	addl   $0x1,-0x4(%rbp)
  401a33:	cmpl   $0xffff,-0x4(%rbp)
  401a3a:	jle    4019fc <main+0x1f>
"""


def _layout() -> windows.Layout:
    """The EPYC frame's recorded layout: the built-in loop as gcc 12 linked it."""
    meta = results.metadata(results.load(DATA / "env-size-epyc-kvm.parquet"))
    return windows.Layout.from_meta(meta["stack_layout"])


def test_objdump_lines_give_the_loops_slots_and_statics_with_loads_and_stores():
    got = {(a.where, a.name): (a.offset, a.size, a.load, a.store)
           for a in windows.parse_accesses(LOOP)}  # fmt: skip
    assert got == {
        ("stack", "frame-0x8"): (-8, 4, True, False),  # inc: only read
        ("stack", "frame-0x4"): (-4, 4, True, True),  # g: g++ and the compare
        ("static", "i"): (0x4A82E8, 4, True, True),
        ("static", "j"): (0x4A82EC, 4, True, True),
        ("static", "k"): (0x4A82F0, 4, True, True),
    }


def test_the_stack_model_steps_16_bytes_every_16_sizes_and_repeats_every_4096():
    model = windows.StackModel(top=0x7FFFFFFFEFF8, depth=880)
    frames = model.frame(99 + np.arange(0, 8193))
    steps = np.diff(frames)
    assert set(steps.tolist()) == {0, -16}
    assert np.count_nonzero(steps) == 8192 // 16
    assert np.all(frames[4096:] == frames[:-4096] - 4096)


def test_prediction_of_the_recorded_loop_is_one_16_wide_window_per_4096_sizes():
    predicted = windows.predict(_layout(), np.arange(0, 8193))
    assert predicted[["start", "end", "width"]].values.tolist() == [
        [2342, 2357, 16],
        [6438, 6453, 16],
    ]
    assert "&inc (stack) ≡ &i (static)" in predicted["pair"].iloc[0]
    assert "&g (stack) ≡ &j (static)" in predicted["pair"].iloc[0]


def test_only_a_store_and_a_load_can_alias():
    only_loads = windows.Layout(
        (windows.Access("s", "stack", -8, 4, True, False),
         windows.Access("t", "static", 0x1000, 4, True, False)),
        windows.StackModel(0x7FFFFFFFEFF8, 0), 0,
    )  # fmt: skip
    assert windows.predict(only_loads, np.arange(0, 8193)).empty


def test_predicted_edges_match_the_measured_ones_on_the_recorded_epyc_frame():
    frame = results.load(DATA / "env-size-epyc-kvm.parquet")
    measured = env_size.detect_windows(frame)
    predicted, table, lines = windows.explain(results.metadata(frame), frame, measured)
    assert len(measured) == len(predicted) == 2
    for p, m in zip(predicted.itertuples(), measured.itertuples(), strict=True):
        assert abs(p.start - m.start) <= windows.STACK_STEP
        assert abs(p.end - m.end) <= windows.STACK_STEP
    assert table["verdict"].tolist() == ["predicted and seen"] * 2
    assert (table["ci_low"] > 0.5).all()  # recorded: +120 %, far from noise
    assert any("low 12 bits" in line for line in lines)


def test_the_xeon_frame_has_its_windows_predicted_not_seen_with_an_excess_near_zero():
    frame = results.load(DATA / "env-size-xeon-amx.parquet")
    meta = results.metadata(frame)
    epyc = results.metadata(results.load(DATA / "env-size-epyc-kvm.parquet"))
    # The same workload digest: the same source, flags and compiler, so the same binary.
    assert meta["workload_digest"] == epyc["workload_digest"]
    meta = {**meta, "stack_layout": epyc["stack_layout"]}
    measured = env_size.detect_windows(frame)
    predicted, table, lines = windows.explain(meta, frame, measured)
    assert measured.empty and len(predicted) == 2
    assert table["verdict"].tolist() == ["predicted, not seen"] * 2
    assert (table["ci_low"] < 0).all() and (table["ci_high"] > -0.02).all()
    assert (table["excess"].abs() < 0.01).all()
    assert any("No window where one was predicted" in line for line in lines)


def test_a_window_no_address_explains_is_seen_not_predicted():
    sizes = np.arange(0, 2000)
    median = np.full(sizes.size, 100.0)
    median[1000:1016] = 150.0
    summary = pd.DataFrame({"env_size": sizes, "median": median, "min": median})
    measured = env_size.detect_windows(summary)
    predicted = windows.predict(_layout(), sizes)
    assert predicted.empty
    table = windows.verdicts(summary, predicted, measured)
    assert table["verdict"].tolist() == ["seen, not predicted"]
    assert table["excess"].iloc[0] == pytest.approx(0.5)


def test_each_figure_of_one_effect_in_the_summary_names_its_statistic():
    """A window 30 % above the rest, its sizes 28-32 % up, and an alias check of +14 % per
    iteration: the windows' peak, the verdicts' median and the check's per-iteration cost are
    three figures of one effect, and each says which statistic it is."""
    sizes = np.arange(0, 512)
    ticks = np.full(sizes.size, 1000.0)
    ticks[256:272] = np.linspace(1280, 1320, 16)
    frame = pd.DataFrame({"env_size": np.repeat(sizes, 3), "rep": np.tile([0, 1, 2], sizes.size),
                          "ticks": np.repeat(ticks, 3), "status": "ok"})  # fmt: skip
    check = {"kernel": "loop", "aliased_ticks": 2.08, "distinct_ticks": 1.82, "penalty": 0.14,
             "low": 0.12, "high": 0.15, "shows": True}  # fmt: skip
    said = env_size.summary(frame, {"aslr": "off", "alias_check": [check]})
    tables = {t.name: t for t in said.tables}
    assert "peak_excess: the window's highest per-size median over the baseline" in (
        tables["windows"].title
    )
    assert tables["windows"].display["peak_excess"].tolist() == ["+32.0%"]
    assert tables["verdicts"].title.startswith("verdicts (median_excess: the median of")
    assert tables["verdicts"].display["median_excess"].iloc[0].startswith("+30.0% [")
    assert any("ticks/iteration aliased vs not, per-iteration cost +14%" in x for x in said.lines)


def test_twin_reports_agree_with_the_model_at_128_sizes_over_two_periods():
    sizes = np.linspace(0, 8191, 128).astype(int)
    reports = windows.probe(sizes)
    model = windows.StackModel.from_report(reports.iloc[0].to_dict(), reports.attrs["path"])
    assert np.array_equal(model.frame(reports["strings"]), reports["frame"])
    assert (reports["frame"] % windows.STACK_STEP == 0).all()


def test_the_twins_frame_moves_by_exactly_16_bytes_per_16_bytes_of_environment():
    reports = windows.probe(np.arange(0, 64))
    steps = np.diff(reports["frame"].to_numpy())
    assert set(steps.tolist()) == {0, -16}
    assert np.count_nonzero(steps) == 4
    assert (reports["execfn"] == reports["execfn"].iloc[0]).all()


@pytest.mark.skipif(not X86, reason="objdump's x86-64 operands (%rbp, %rip)")
def test_the_built_in_loop_read_here_gives_windows_4096_apart():
    layout = windows.loop_layout(str(windows.build_loop().path))
    predicted = windows.predict(layout, np.arange(0, 8193))
    assert len(predicted) == 2
    assert (predicted["width"] == 16).all()
    assert predicted["start"].diff().iloc[1] == 4096


@pytest.mark.skipif(not X86, reason="objdump's x86-64 operands (%rbp, %rip)")
def test_a_binarys_loop_is_read_once_and_again_when_its_bytes_change(tmp_path, monkeypatch):
    loop = tmp_path / "loop"
    loop.write_bytes(windows.build_loop().path.read_bytes())
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    read = windows.loop_accesses(loop)
    assert [a for a in read if a.where == "stack"]
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))  # neither nm nor objdump from here
    assert windows.loop_accesses(loop) == read
    with loop.open("ab") as f:
        f.write(b"\0")  # the same code, other bytes: read again, which needs nm
    with pytest.raises(PerflabError, match="nm not found"):
        windows.loop_accesses(loop)


@pytest.mark.skipif(not X86, reason="objdump's x86-64 operands (%rbp, %rip)")
def test_at_O1_the_loop_touches_no_stack_slot_and_nothing_is_predicted():
    layout = windows.loop_layout(str(windows.build_loop(opt="1").path), opt="1")
    assert not [a for a in layout.accesses if a.where == "stack"]
    assert windows.predict(layout, np.arange(0, 8193)).empty


def test_the_alias_check_times_both_kernels_and_refuses_bad_distances():
    for kernel in aliasing.KERNELS:
        c = aliasing.check(kernel, iterations=4096, trials=3)
        assert c.aliased_ticks > 0 and c.distinct_ticks > 0
        assert c.low <= c.penalty <= c.high
        assert kernel.split("-")[0] in c.sentence() or "loop" in c.sentence()
    with pytest.raises(PerflabError, match="alias check"):
        bindings.alias_time("loop", 8190, 8256, 10, 1)  # not a multiple of 4 bytes
    with pytest.raises(PerflabError, match="alias check"):
        bindings.alias_time("loop", 1 << 20, 8256, 10, 1)  # beyond the buffer


@pytest.mark.skipif(not X86, reason="objdump's x86-64 operands (%rbp, %rip)")
@pytest.mark.long
def test_cli_prints_the_prediction_and_a_verdict_per_window(tmp_path):
    """One period on a 16-byte grid: each stack position once, so one window is predicted
    wherever this machine's cache path and compiler put it."""
    out = tmp_path / "s.parquet"
    args = ["sweep", "env-size", "--max", "4095", "--step", "16", "--repeat", "1", "--no-rt",
            "-o", str(out)]  # fmt: skip
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 0, done.output
    meta = results.metadata(results.load(out))
    predicted = windows.predicted_from(meta, np.arange(0, 4096, 16))
    assert len(predicted) == 1
    w = predicted.iloc[0]
    assert f"predicted: {w.start}-{w.end}: &" in done.output
    assert "verdicts (median_excess: " in done.output
    named = re.findall(r"(&\w+) \(stack\) ≡ (&\w+) \(static\)", w.pair)
    pairs = ", ".join(f"{stack} ≡ {static}" for stack, static in named)
    timed_line = f"this CPU: the swept binary at {w.start}-{w.end} against its neighbours: "
    assert timed_line in done.output
    assert f"in-process proxy: the paper's loop with {pairs} mod 4096" in done.output
    assert len(meta["alias_check"]) == 2
    (timed,) = meta["window_check"]
    assert (timed["start"], timed["end"]) == (w.start, w.end)
    assert all(w.start <= s <= w.end for s in timed["inside"])
    assert not any(w.start <= s <= w.end for s in timed["outside"])


def test_cli_json_carries_predicted_verdicts_and_the_explanation(tmp_path):
    args = ["sweep", "env-size", "--min", "0", "--max", "40", "--step", "8", "--repeat", "1",
            "--no-rt", "-o", str(tmp_path / "s.parquet"), "--json"]  # fmt: skip
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 0, done.output
    doc = json.loads(done.output[done.output.index("{") :])
    assert isinstance(doc["predicted"], list) and doc["explanation"]
    assert len(doc["verdicts"]) >= len(doc["predicted"])
    assert {c["kernel"] for c in doc["alias_check"]} == set(aliasing.KERNELS)


def test_with_aslr_on_nothing_is_predicted_and_the_reason_is_said(tmp_path):
    args = ["sweep", "env-size", "--aslr", "on", "--max", "16", "--step", "8", "--repeat", "1",
            "--no-rt", "-o", str(tmp_path / "s.parquet")]  # fmt: skip
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 0, done.output
    assert "ASLR moves the stack at every run" in done.output


def test_for_a_users_program_the_stack_shift_is_reported_and_the_limit_said():
    meta = {"aslr": "off", "stack_top": 0x7FFFFFFFEFF8, "base_strings": 40}
    sizes = np.arange(0, 4097)
    shift = windows.stack_shift(meta, sizes)
    assert shift[0] == 0 and shift[-1] in (4096, 4096 + 16) and set(np.diff(shift)) == {0, 16}
    summary = pd.DataFrame({"env_size": sizes, "median": np.ones(sizes.size)})
    _, _, lines = windows.explain(meta, summary, env_size.detect_windows(summary))
    assert "cannot see your program's frames" in lines[0]


def test_the_split_workloads_page_split_window_is_predicted_where_it_was_measured():
    frame = results.load(DATA / "env-size-split-epyc-kvm.parquet")
    measured = env_size.detect_windows(frame)
    predicted, _, lines = windows.explain(results.metadata(frame), frame, measured)
    split = predicted[predicted["pair"].str.contains("straddles a page")]
    assert len(split) == 1
    seen = measured[(measured["start"] <= split["end"].iloc[0])
                    & (measured["end"] >= split["start"].iloc[0])]  # fmt: skip
    assert len(seen) == 1
    assert abs(seen["start"].iloc[0] - split["start"].iloc[0]) <= windows.STACK_STEP
    assert abs(seen["end"].iloc[0] - split["end"].iloc[0]) <= windows.STACK_STEP
    assert any("page-split window" in line for line in lines)


@pytest.mark.skipif(not X86, reason="objdump's x86-64 operands (%rbp, %rip)")
def test_the_split_workload_built_here_has_one_page_split_window_per_4096_sizes():
    layout = windows.loop_layout(str(windows.build_loop("split").path), workload="split")
    assert any(a.where == "stack" and a.size == 8 for a in layout.accesses)
    predicted = windows.predict(layout, np.arange(0, 8193))
    split = predicted[predicted["pair"].str.contains("straddles a page")]
    assert split["width"].tolist() == [16, 16]
    assert split["start"].diff().iloc[1] == 4096


def test_a_workload_and_a_program_together_are_one_error_line():
    done = CliRunner().invoke(cli, ["sweep", "env-size", "--workload", "split", "--", "/bin/true"])
    assert done.exit_code != 0
    assert done.output.strip().splitlines()[-1].startswith("Error: --workload chooses")
