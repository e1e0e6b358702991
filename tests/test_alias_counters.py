"""The address-alias counter: the event per CPU from Linux perf's tables, the one line that says
why nothing counts, the C path that counts only the children (checked with a software event,
which counts in a VM too), the per-window analysis on a constructed frame, and the real
`sweep env-size --counters` on this machine, whatever its PMU."""

import errno
import json
import os

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from perflab.cli import cli
from perflab.core import bindings
from perflab.lab import env_size
from perflab.lab.env_size import alias_counters, windows
from perflab.running import spawn
from perflab.store import results
from perflab.system import counters

SOFTWARE = bool(counters.available().set_index("event").loc["page-faults", "supported"])
PERF_TYPE_SOFTWARE, PAGE_FAULTS = 1, 2  # linux/perf_event.h: a software event that counts in VMs


@pytest.mark.parametrize(
    ("vendor", "family", "model", "name", "event", "umask", "table"),
    [
        ("GenuineIntel", 6, 0x2A, "ld_blocks_partial.address_alias", 0x07, 0x01, "sandybridge"),
        ("GenuineIntel", 6, 0x5E, "ld_blocks_partial.address_alias", 0x07, 0x01, "skylake"),
        ("GenuineIntel", 6, 0x55, "ld_blocks_partial.address_alias", 0x07, 0x01, "skylakex"),
        ("GenuineIntel", 6, 0x6A, "ld_blocks_partial.address_alias", 0x07, 0x01, "icelakex"),
        ("GenuineIntel", 6, 0x8C, "ld_blocks_partial.address_alias", 0x07, 0x01, "tigerlake"),
        ("GenuineIntel", 6, 0xA7, "ld_blocks_partial.address_alias", 0x07, 0x01, "rocketlake"),
        ("GenuineIntel", 6, 0x97, "ld_blocks.address_alias", 0x03, 0x04, "alderlake"),
        ("GenuineIntel", 6, 0x8F, "ld_blocks.address_alias", 0x03, 0x04, "sapphirerapids"),
        ("GenuineIntel", 6, 0xAD, "ld_blocks.address_alias", 0x03, 0x04, "graniterapids"),
        ("AuthenticAMD", 0x17, 0x31, "ls_bad_status2.stli_other", 0x24, 0x02, "amdzen2"),
        ("AuthenticAMD", 0x19, 0x01, "ls_bad_status2.stli_other", 0x24, 0x02, "amdzen3"),
        ("AuthenticAMD", 0x19, 0x11, "ls_bad_status2.stli_other", 0x24, 0x02, "amdzen4"),
    ],
)
def test_each_cpu_gets_its_tables_event_as_umask_and_event_code(
    vendor, family, model, name, event, umask, table
):
    found = alias_counters.lookup(vendor, family, model)
    assert isinstance(found, alias_counters.AliasEvent)
    assert (found.name, found.config) == (name, umask << 8 | event)
    assert found.source == f"tools/perf/pmu-events/arch/x86/{table}"
    assert found.kind == bindings.PERF_TYPE_RAW


@pytest.mark.parametrize(
    ("vendor", "family", "model", "line"),
    [
        ("AuthenticAMD", 0x17, 0x01, "no address-alias event known for AMD family 17h model "
         "01h; perf's amdzen1 tables list none"),
        ("AuthenticAMD", 0x17, 0x18, "no address-alias event known for AMD family 17h model "
         "18h; perf's amdzen1 tables list none"),
        ("AuthenticAMD", 0x1A, 0x02, "no address-alias event known for AMD family 1ah model 02h"),
        ("GenuineIntel", 6, 0x1A, "no address-alias event known for Intel family 6h model 1ah"),
        ("", 0, 0, "no address-alias event known for unknown CPU family 0h model 00h"),
    ],
)  # fmt: skip
def test_a_cpu_without_a_known_event_gets_one_line_saying_so(vendor, family, model, line):
    assert alias_counters.lookup(vendor, family, model) == line


def test_cpu_identity_reads_the_first_cpu_and_survives_a_missing_file(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text(
        "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\n\n"
        "processor\t: 1\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\n"
    )
    assert alias_counters.cpu_identity(str(info)) == ("GenuineIntel", 6, 0x8F)
    assert alias_counters.cpu_identity(str(tmp_path / "none")) == ("", 0, 0)


def test_the_status_line_names_the_event_or_exactly_why_nothing_counts():
    enoent, ok = -errno.ENOENT, 0
    skl = alias_counters.lookup("GenuineIntel", 6, 0x5E)
    assert isinstance(skl, alias_counters.AliasEvent)
    no_pmu = alias_counters.status_line(
        skl, {"cycles": enoent, "instructions": enoent, "alias_events": enoent}
    )
    # ENOENT's cause is this machine's: no PMU exposed, or a PMU without the event
    why = counters.reason(enoent)
    assert why.startswith("not supported here (ENOENT: ")
    assert no_pmu == (
        "alias counter: ld_blocks_partial.address_alias (raw 0x0107, "
        f"tools/perf/pmu-events/arch/x86/skylake): {why}"
    )
    counting = alias_counters.status_line(
        skl, {"cycles": ok, "instructions": ok, "alias_events": ok}
    )
    assert counting.endswith("skylake): counts")
    zen1 = alias_counters.lookup("AuthenticAMD", 0x17, 0x01)
    line = alias_counters.status_line(zen1, {"cycles": enoent, "instructions": enoent})
    assert line == (
        "alias counter: no address-alias event known for AMD family 17h model 01h; perf's "
        f"amdzen1 tables list none; cycles, instructions: {why}"
    )


def test_sizes_are_picked_inside_each_window_and_beside_it_outside_every_window():
    predicted = pd.DataFrame({"start": [2344, 6440], "end": [2359, 6455]})
    picks = alias_counters.pick_sizes(predicted, np.arange(0, 8193))
    for i, (start, end) in enumerate([(2344, 2359), (6440, 6455)]):
        inside = [s for w, s, where in picks if w == i and where == "inside"]
        outside = [s for w, s, where in picks if w == i and where == "outside"]
        assert len(inside) == len(outside) == alias_counters.SIZES_PER_SIDE
        assert all(start <= s <= end for s in inside) and inside[0] == start and inside[-1] == end
        assert all(32 <= start - s <= 64 or 32 <= s - end <= 64 for s in outside)
    coarse = alias_counters.pick_sizes(predicted.iloc[:1], np.arange(2304, 2420, 8))
    assert [s for _, s, where in coarse if where == "inside"] == [2344, 2352]


def _frame(rows: list[tuple[int, str, float, str]]) -> pd.DataFrame:
    """Counter rows as count_runs returns them: alias events per run, cycles 10 per iteration."""
    n = alias_counters.ITERATIONS
    return pd.DataFrame(
        [{"window": w, "where": where, "env_size": 0, "rep": 0, "cycles": 10.0 * n,
          "instructions": 12.0 * n, "alias_events": a * n, "status": st}
         for w, where, a, st in rows]
    )  # fmt: skip


def test_per_window_counts_say_whether_the_cpu_counted_the_aliasing():
    predicted = pd.DataFrame({"start": [2344, 6440, 100], "end": [2359, 6455, 115]})
    runs = _frame(
        [(0, "inside", 2.0, "ok"), (0, "inside", 1.9, "ok"), (0, "inside", 50.0, "crash"),
         (0, "outside", 0.01, "ok"), (0, "outside", 0.0, "ok"),
         (1, "inside", 0.02, "ok"), (1, "outside", 0.01, "ok"),
         (2, "inside", np.nan, "ok"), (2, "outside", np.nan, "ok")]
    )  # fmt: skip
    table = alias_counters.by_window(runs, predicted).set_index("start")
    assert table.loc[2344, "counters"] == "the CPU counted the aliasing"
    assert table.loc[2344, "alias_per_iter_inside"] == pytest.approx(1.95)
    assert table.loc[2344, "alias_per_iter_outside"] == pytest.approx(0.005)
    assert table.loc[2344, "runs_inside"] == 2  # the crashed run is not counted
    assert table.loc[2344, "cycles_per_iter_inside"] == pytest.approx(10.0)
    assert table.loc[6440, "counters"] == "the CPU counted no more aliasing inside than outside"
    assert table.loc[100, "counters"] == "not counted"
    lines = alias_counters.summary_lines(
        {"alias_counter": "alias counter: x: counts",
         "alias_counts": alias_counters._plain(table.reset_index())}
    )  # fmt: skip
    assert lines[0] == "alias counter: x: counts"
    assert lines[1] == (
        "  2344-2359: 1.950 vs 0.005 alias events per iteration inside vs outside: "
        "the CPU counted the aliasing"
    )
    assert lines[3] == "  100-115: no counts: not counted"


@pytest.mark.skipif(not SOFTWARE, reason="perf_event cannot count page faults here")
def test_the_counted_path_counts_each_child_and_never_the_caller():
    live = bindings.ExecCounters([(PERF_TYPE_SOFTWARE, PAGE_FAULTS)])
    try:
        assert live.status() == [0]
        start = live.read()[0]
        touched = bytearray(32 << 20)
        touched[::4096] = b"x" * len(touched[::4096])  # the caller's own faults
        assert live.read()[0] == start
    finally:
        live.close()
    event = alias_counters.AliasEvent("page-faults", PAGE_FAULTS, "test", PERF_TYPE_SOFTWARE)
    argv = [str(windows.build_loop().path)]
    picks = [(0, 2344, "inside"), (0, 2300, "outside")]
    runs = alias_counters.count_runs(argv, picks, event, spawn.SpawnOptions(aslr="off"), repeat=4)
    assert len(runs) == 8 and (runs["status"] == "ok").all()
    assert sorted(runs["env_size"]) == [2300] * 4 + [2344] * 4
    # A static binary faults in a similar few pages at every run (23-30 as a user on one CPU):
    # a count per child, not a running sum, which would double by the second child.
    faults = runs["alias_events"]
    assert faults.min() > 0 and faults.max() < 2 * faults.min()


def test_sweep_counters_says_in_summary_json_metadata_and_report_what_this_machine_counts(
    tmp_path,
):
    out = tmp_path / "c.parquet"
    args = ["sweep", "env-size", "--min", "2340", "--max", "2364", "--step", "4", "--repeat",
            "1", "--no-rt", "--counters", "-o", str(out)]  # fmt: skip
    res = CliRunner().invoke(cli, [*args, "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    meta = results.metadata(results.load(out))
    line = meta["alias_counter"]
    assert doc["alias_counter"] == line and line.startswith("alias counter: ")
    if "alias_counts" in meta:  # a PMU with the event: every predicted window was counted
        assert doc["alias_counts"] == meta["alias_counts"]
        assert all(w["runs_inside"] > 0 and w["runs_outside"] > 0 for w in meta["alias_counts"])
    else:
        why = ("not supported here", "no address-alias event known", "no predicted window")
        assert any(w in line for w in why), line
    assert doc["runs"] == 7  # the sweep was measured anyway
    text = CliRunner().invoke(cli, [*args[:-2], "-o", str(tmp_path / "t.parquet")])
    assert text.exit_code == 0, text.output
    assert line.split(";")[0] in text.output
    again = CliRunner().invoke(cli, ["report", str(out)])
    assert again.exit_code == 0 and line in again.output, again.output


def test_the_sweep_records_the_binarys_path_and_size():
    argv, meta = env_size.resolve_program((), "0")
    path = str(windows.build_loop().path)
    assert argv == (path,) and meta["workload_path"] == path
    assert meta["workload_bytes"] == os.stat(path).st_size > 0
    assert meta["workload_path_bytes"] == len(os.fsencode(path))
    argv, meta = env_size.resolve_program(("true", "x"), "0")
    assert meta["workload_path"] == argv[0] and meta["workload_bytes"] == os.stat(argv[0]).st_size
    df = env_size.sweep(min_size=100, max_size=101, repeat=1, rt=False)
    assert results.metadata(df)["workload_path"] == path
