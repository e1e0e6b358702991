"""The built-in loops are laid out by their source: code offset and statics read from the binary,
unmoved by a grown probe; the survey's choice and the swept binary's check."""

import json
import platform
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from perflab.cli import cli
from perflab.errors import PerflabError
from perflab.lab import env_size
from perflab.lab.env_size import excess, loop_layouts, windows
from perflab.lab.env_size.plan import LAYOUTS, STATICS_OFFSETS, EnvSizePlan, LoopLayout
from perflab.running import spawn
from perflab.store import results
from perflab.system import compiler

X86 = platform.machine() == "x86_64"
DATA = Path(__file__).parent / "data"
PAIR = re.compile(r"&(\w+) \(stack\) ≡ &(\w+) \(static\)")

pytestmark = pytest.mark.skipif(not X86, reason="objdump's x86-64 operands and gcc's -O0 frame")


def _expected_pairs(report: dict, statics: int) -> set[tuple[str, str]]:
    """The (stack slot, static) pairs that share their low 12 bits in some 16-byte stack step,
    from the twin's own report of where g and inc sit below its frame (not from objdump)."""
    slots = {name: (report[name] - report["frame"]) % 16 for name in ("g", "inc")}
    static = {"i": statics % 16, "j": (statics + 4) % 16, "k": (statics + 8) % 16}
    return {(s, t) for s, r in slots.items() for t, q in static.items() if r == q}


@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
def test_each_layout_of_the_paper_s_loop_is_where_its_flags_put_it(layout):
    built = windows.build_loop("mytkowicz", "0", layout)
    assert loop_layouts.placement_of(str(built.path)) == (layout.code, layout.statics)
    assert set(layout.flags()) <= set(built.flags)
    _, (report,) = windows.reports([0], layout=layout)
    stack = windows.loop_layout(str(built.path), layout=layout)
    predicted = windows.predict(stack, np.arange(0, 8193, 2))
    named = {p for text in predicted["pair"] for p in PAIR.findall(text)}
    assert named == _expected_pairs(report, layout.statics) != set()
    statics = {layout.statics + 4 * n for n in range(3)}
    assert {int(a, 16) % 4096 for a in predicted["static_address"]} <= statics


def test_the_four_statics_offsets_pair_every_slot_that_can_alias():
    """Across the four residues each of g and inc meets a static: the survey covers them all."""
    _, (report,) = windows.reports([0])
    met = set().union(*(_expected_pairs(report, s) for s in STATICS_OFFSETS))
    assert {s for s, _ in met} == {"g", "inc"}


def test_the_split_loop_is_laid_out_by_its_source_too():
    layout = LoopLayout(48, STATICS_OFFSETS[2])
    built = windows.build_loop("split", "0", layout)
    assert loop_layouts.placement_of(str(built.path)) == (48, STATICS_OFFSETS[2])


def test_a_grown_probe_moves_nothing_in_the_loop(tmp_path):
    """The probe's state and code grown (as an unrelated header edit grows them): main moves,
    the loop's offset in its 64-byte window, its statics' page offset and its frame do not."""
    for f in compiler.WORKLOADS.glob("*.h"):
        shutil.copy(f, tmp_path / f.name)
    shutil.copy(compiler.WORKLOADS / "mytkowicz.c", tmp_path / "mytkowicz.c")
    probe = tmp_path / "perflab_probe.h"
    text = probe.read_text()
    grown = text.replace("    uint64_t t0;\n};", "    uint64_t t0;\n    char grown[136];\n};", 1)
    grown = grown.replace(
        "    perflab_probe_setup_(&perflab_probe_state_);\n",
        "    perflab_probe_setup_(&perflab_probe_state_);\n"
        "    memset(perflab_probe_state_.grown, 1, sizeof perflab_probe_state_.grown);\n",
        1,
    )
    assert grown.count("grown") == 3
    probe.write_text(grown)
    layout = LoopLayout(16, STATICS_OFFSETS[1])
    ours = windows.build_loop("mytkowicz", "0", layout)
    theirs = compiler.build(tmp_path / "mytkowicz.c", "0", extra=layout.flags())
    assert ours.digest != theirs.digest

    def main(path: Path) -> int:
        return int(next(f[0] for f in _nm(path) if f[-1] == "main"), 16)

    assert main(theirs.path) != main(ours.path)
    assert loop_layouts.placement_of(str(theirs.path)) == (16, STATICS_OFFSETS[1])
    assert loop_layouts.placement_of(str(ours.path)) == (16, STATICS_OFFSETS[1])
    stack = [a for a in windows.loop_accesses(ours.path) if a.where == "stack"]
    assert stack == [a for a in windows.loop_accesses(theirs.path) if a.where == "stack"]


def _nm(path: Path) -> list[list[str]]:
    from perflab.system import binlayout

    return binlayout.nm_fields(path, "--defined-only")


@pytest.mark.parametrize(
    "text, message",
    [
        ("32", "expected auto or CODE:STATICS"),
        ("64:0x300", "code offset must be 0-63"),
        ("0:0x302", "multiple of 4"),
        ("0:4096", "multiple of 4 in 0-4084"),
        ("x:y", "expected auto or CODE:STATICS"),
    ],
)
def test_a_bad_layout_is_one_line_before_anything_is_built(text, message):
    with pytest.raises(PerflabError, match=message):
        EnvSizePlan(layout=text).check()
    done = CliRunner().invoke(cli, ["sweep", "env-size", "--layout", text, "--max", "10"])
    assert done.exit_code != 0 and message.split(" ")[0] in done.output
    assert len(done.output.strip().splitlines()) == 1


def test_a_layout_is_for_the_built_in_loop_only():
    with pytest.raises(PerflabError, match="--layout places the built-in loop"):
        EnvSizePlan(program=("true",), layout="0:0x300").check()


def _rows() -> list[dict]:
    return json.loads((DATA / "env-size-layouts-zen4.json").read_text())["loop_layout"]["survey"]


def test_the_choice_is_the_steady_layout_whose_interval_pays_most_on_a_recorded_survey():
    rows = [loop_layouts.LayoutRow(**r) for r in _rows()]
    layout, why = loop_layouts.choose(rows)
    paying = [r for r in rows if r.steady and r.verdict == "pays"]
    assert paying and str(layout) == max(paying, key=lambda r: r.ci_low).layout
    assert f"{len(paying)} steady ones pay here" in why
    assert all(r.ci_low <= r.excess <= r.ci_high for r in rows)


def test_where_no_layout_pays_the_steadiest_is_swept_and_said():
    rows = [loop_layouts.LayoutRow(**{**r, "verdict": "does not pay"}) for r in _rows()]
    layout, why = loop_layouts.choose(rows)
    assert str(layout) == min(rows, key=lambda r: r.spread).layout
    assert "none of 16 layouts timed is steady and pays here" in why
    assert loop_layouts.choose([]) == (
        loop_layouts.DEFAULT_LAYOUT,
        "the default: no predicted window among the sizes swept",
    )


def test_a_recorded_survey_prints_as_a_table_of_every_layout():
    shown = loop_layouts.shown(loop_layouts.table(_rows()))
    assert list(shown["layout"]) == [str(x) for x in LAYOUTS]
    assert shown["excess"].str.fullmatch(r"[+-]\d+\.\d% \[[+-]\d+\.\d%, [+-]\d+\.\d%\]").all()


@pytest.mark.parametrize(
    "gain, low, high, verdict",
    [(0.18, 0.15, 0.21, "pays"), (0.001, -0.004, 0.006, "does not pay"),
     (0.03, -0.01, 0.09, "unclear"), (0.01, 0.005, 0.03, "unclear")],
)  # fmt: skip
def test_a_window_pays_only_when_its_interval_says_so(gain, low, high, verdict):
    assert excess.verdict_of(gain, low, high) == verdict


def test_the_swept_binary_is_timed_inside_each_predicted_window_against_its_neighbours():
    """Real exec'd runs: every pair's two runs on either side of the window, in one batch."""
    layout = LAYOUTS[5]
    path = str(windows.build_loop("mytkowicz", "0", layout).path)
    grid = np.arange(0, 8193, 2)
    predicted = windows.predicted_rows(windows.loop_layout(path, layout=layout), grid)
    assert len(predicted) == 2
    options = spawn.SpawnOptions(aslr="off", timeout=10.0)
    timed = loop_layouts.time_windows([path], predicted, grid, options, "A", {}, pairs=8)
    assert [(t.start, t.end) for t in timed] == [(w["start"], w["end"]) for w in predicted]
    for t, w in zip(timed, predicted, strict=True):
        assert t.pairs == 8 and t.inside and t.outside
        assert all(w["start"] <= s <= w["end"] for s in t.inside)
        assert all(not (p["start"] <= s <= p["end"]) for s in t.outside for p in predicted)
        assert all(abs(s - w["start"]) <= 4 * 16 + 16 for s in t.outside)
        assert t.ci_low <= t.excess <= t.ci_high and t.ticks_outside > 0
        assert t.verdict in ("pays", "does not pay", "unclear")


def test_a_sweep_names_its_layout_and_a_resume_builds_it_again(tmp_path):
    out = tmp_path / "l.parquet"
    args = ["sweep", "env-size", "--max", "40", "--step", "8", "--repeat", "1", "--no-rt",
            "--layout", "32:0x30c", "-o", str(out)]  # fmt: skip
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 0, done.output
    assert "layout 32:0x30c: the loop 32 bytes into a 64-byte window, i at 0x30c" in done.output
    meta = results.metadata(results.load(out))
    assert meta["loop_layout"]["layout"] == "32:0x30c" and meta["params"]["layout"] == "32:0x30c"
    built = windows.build_loop("mytkowicz", "0", LoopLayout(32, 0x30C))
    assert meta["workload_digest"] == built.digest
    assert loop_layouts.placement_of(meta["workload_path"]) == (32, 0x30C)
    df = env_size.sweep(max_size=40, step=8, repeat=1, rt=False, output=out, resume=True)
    assert results.metadata(df)["loop_layout"]["how"] == "resumed"
    assert results.metadata(df)["workload_digest"] == built.digest
