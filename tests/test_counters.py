"""perf_event counters: unsupported events say so, software events count real things."""

import errno
import json
import math
import mmap
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner

from perflab.cli import cli
from perflab.core.bindings import ffi, lib
from perflab.errors import PerflabError
from perflab.lab import counters as counters_experiment
from perflab.lab import threads
from perflab.store import results
from perflab.system import counters, machine, pmu

NO_PMU = not pmu.hardware_counters()
HARDWARE = ["cycles", "instructions", "ref-cycles"]
# perf_event_paranoid 3 (Debian's default) or 4 refuse even software events to a plain user.
SOFTWARE = bool(counters.available().set_index("event").loc["task-clock", "supported"])
software = pytest.mark.skipif(not SOFTWARE, reason="perf_event_paranoid forbids perf_event here")


@pytest.mark.skipif(not NO_PMU, reason="this machine has hardware counters")
def test_hardware_events_are_reported_unsupported_never_zero():
    table = counters.available().set_index("event")
    for name in HARDWARE:
        assert not table.loc[name, "supported"]
        assert math.isnan(table.loc[name, "count"])
        # ENOENT/EOPNOTSUPP: no PMU (a VM); EACCES: paranoid forbids it to this user
        assert re.match(
            r"not supported here \((ENOENT|EOPNOTSUPP|EACCES)", table.loc[name, "status"]
        )
        # the real cause: no PMU where the kernel lists none, paranoid only where it forbids
        if not pmu.core_pmu():
            assert pmu.NO_PMU in table.loc[name, "status"]
        if "paranoid" in table.loc[name, "status"]:
            assert pmu.perf_paranoid() > 2 and not pmu.perf_privileged()


@pytest.mark.skipif(not NO_PMU, reason="this machine has hardware counters")
@software
def test_group_falls_back_to_single_events_in_c():
    s = ffi.new("struct perflab_counter_set *")
    only_cycles = 1 << lib.PERFLAB_EV_CYCLES
    assert lib.perflab_counters_open(s, 0, -1, only_cycles, 0) == -errno.ENOENT
    assert lib.perflab_counters_open(s, 0, -1, lib.PERFLAB_EV_ALL, 0) == 4
    assert s.grouped == 0 and s.status[lib.PERFLAB_EV_CYCLES] == -errno.ENOENT
    assert s.status[lib.PERFLAB_EV_TASK_CLOCK] == 0
    lib.perflab_counters_close(s)


@software
def test_software_events_count_a_region():
    pages = 2048
    with mmap.mmap(-1, pages * mmap.PAGESIZE) as buf:
        buf.madvise(mmap.MADV_NOHUGEPAGE)  # with THP, one fault can map 512 pages at once
        with counters.Counters(["task-clock", "page-faults"]) as c:
            for page in range(pages):
                buf[page * mmap.PAGESIZE] = 1
    cols = c.columns()
    assert cols["task_clock_ns"] > 0
    assert cols["page_faults"] >= pages // 2  # at least half its pages faulted in


@software
def test_count_a_callable_and_a_command():
    value, table = counters.count(sum, range(200_000), events=["task-clock"])
    assert value == sum(range(200_000))
    assert table.set_index("event").loc["task-clock", "count"] > 0
    out = counters.count_command(["true"], events=["task-clock", "page-faults"])
    assert out.attrs["returncode"] == 0
    assert (out["count"] > 0).all()


@software
def test_worker_task_clock_matches_its_cpu_clock():
    df = threads.run_threads([machine.usable_cpus()[0]], 20)
    row = df.iloc[0]
    # task-clock runs on perf's clock, which keeps counting while the hypervisor steals the
    # vCPU; the thread CPU clock does not: allow the steal seen on that CPU (10 ms ticks).
    slack = row["steal_ns"] + 20_000_000
    assert 0.9 * row["cpu_ns"] < row["task_clock_ns"] < 1.1 * row["cpu_ns"] + slack
    if NO_PMU:
        assert math.isnan(row["cycles"]) and math.isnan(row["instructions"])


def test_bad_events_and_pids_refused():
    with pytest.raises(PerflabError, match="unknown event"):
        counters.mask(["cache-misses-everywhere"])
    with pytest.raises(PerflabError, match="no process"), counters.Counters(pid=2**22 + 1):
        pass
    with pytest.raises(PerflabError, match="not found"):
        counters.count_command(["/nonexistent/perflab-command"])


def test_cli_counters_json():
    result = CliRunner().invoke(cli, ["counters", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    by_name = {e["event"]: e for e in doc["events"]}
    assert set(by_name) == set(counters.EVENTS)
    assert by_name["task-clock"]["supported"] == SOFTWARE
    if SOFTWARE:
        assert by_name["task-clock"]["count"] > 0
    if NO_PMU:
        assert by_name["cycles"]["count"] is None
        assert by_name["cycles"]["status"].startswith("not supported here")


@software
def test_cli_counts_a_command():
    result = CliRunner().invoke(cli, ["counters", "-e", "task-clock", "--", "true"])
    assert result.exit_code == 0, result.output
    assert "task-clock" in result.output and "exit status 0" in result.output


@software
def test_cli_saves_counts_with_nan_for_unsupported(tmp_path):
    path = tmp_path / "counts.csv"
    result = CliRunner().invoke(cli, ["counters", "-o", str(path), "--", "true"])
    assert result.exit_code == 0, result.output
    saved = results.load(path).set_index("event")
    assert saved.loc["task-clock", "count"] > 0
    if NO_PMU:
        assert math.isnan(saved.loc["cycles", "count"])


@pytest.mark.long
def test_counting_a_command_keeps_the_json_valid_and_exits_with_its_status(tmp_path):
    """The command's output stays out of the JSON (discarded unless sent to a file), and
    perflab exits as the command did."""
    argv = [sys.executable, "-m", "perflab", "counters", "--json", "-e", "task-clock", "--"]
    proc = subprocess.run([*argv, "sh", "-c", "echo hi; exit 3"], capture_output=True, text=True)
    assert proc.returncode == 3 and "hi\n" not in proc.stderr, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["returncode"] == 3 and doc["signal"] is None
    assert doc["elapsed_ns"] > 0 and doc["cpu_ns"] >= 0
    assert doc["cpus_utilised"] == doc["cpu_ns"] / doc["elapsed_ns"]
    child = tmp_path / "child.txt"
    proc = subprocess.run(
        [*argv[:4], "--output-child", str(child), "--", "sh", "-c", "echo there; kill -TERM $$"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 128 + 15 and child.read_text() == "there\n", proc.stderr
    assert proc.stdout == "" and "exit status 143" in proc.stderr and "CPUs utilised" in proc.stderr


def test_counting_burns_cpu_where_the_command_does():
    """cpu_ns comes from the command's rusage: a loop that burns 0.3 s of CPU by its own clock
    shows at least that, a sleep of 0.2 s shows less than its length. No ratio between the two:
    a slowed host once made `sleep`'s start cost 3.8 ms of CPU."""
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass"
    busy = counters_experiment.run([sys.executable, "-c", burn], ["task-clock"])
    idle = counters_experiment.run(["sleep", "0.2"], ["task-clock"])
    busy_m, idle_m = results.metadata(busy), results.metadata(idle)
    assert busy_m["cpu_ns"] >= 299_000_000  # rusage's microseconds, truncated twice
    assert idle_m["elapsed_ns"] >= 200_000_000  # a sleep lasts at least its length
    assert idle_m["cpu_ns"] < idle_m["elapsed_ns"]
    assert idle_m["cpus_utilised"] < busy_m["cpus_utilised"]
    assert idle_m["cpus_utilised"] < busy_m["cpus_utilised"]
