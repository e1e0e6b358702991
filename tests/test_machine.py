"""The machine report agrees with the kernel's own views of the machine."""

import errno
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from perflab.cli import cli
from perflab.core import bindings
from perflab.errors import PerflabError
from perflab.system import compiler, machine, pmu, provenance, settings


def test_topology_matches_cpu_count_and_sysfs():
    topo = machine.topology()
    assert len(topo) == len(machine.online_cpus()) == os.cpu_count()
    for row in topo.itertuples():
        base = f"/sys/devices/system/cpu/cpu{row.cpu}/topology"
        with open(f"{base}/physical_package_id") as f:
            assert int(f.read()) == row.socket


def test_topology_matches_lscpu():
    if shutil.which("lscpu") is None:
        return
    text = subprocess.run(["lscpu", "-p"], capture_output=True, text=True, check=True).stdout
    rows = [line.split(",") for line in text.splitlines() if not line.startswith("#")]
    topo = machine.topology().set_index("cpu")
    for fields in rows:
        cpu, core, sock = int(fields[0]), int(fields[1]), int(fields[2])
        assert (topo.loc[cpu, "core"], topo.loc[cpu, "socket"]) == (core, sock)


def test_parse_cpu_list():
    assert machine.parse_cpu_list("0-2,5,7-8\n") == [0, 1, 2, 5, 7, 8]
    assert machine.format_cpu_list([8, 0, 1, 2, 5, 7]) == "0-2,5,7-8"
    for text in ("3-1", "-1", "0-99999999", "a"):
        with pytest.raises(ValueError):
            machine.parse_cpu_list(text)


def test_offline_cpu_is_refused_with_the_online_list():
    absent = max(machine.online_cpus()) + 1
    with pytest.raises(PerflabError, match=f"CPU {absent} does not exist .* online CPUs"):
        machine.check_cpus([absent])


def test_cpus_outside_the_affinity_mask_are_refused_by_name():
    """As under `taskset -c` or a container's cpuset: online, but not ours to pin to."""
    usable = machine.usable_cpus()
    if len(usable) < 2:
        pytest.skip("needs two usable CPUs to narrow the mask")
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {usable[0]})
    try:
        assert machine.usable_cpus() == [usable[0]]
        with pytest.raises(PerflabError, match=f"CPU {usable[1]} is outside .* affinity mask"):
            machine.check_cpus([usable[1]])
        assert machine.check_cpus([usable[0]]) == [usable[0]]
    finally:
        os.sched_setaffinity(0, before)


@pytest.mark.skipif(shutil.which("chrt") is None, reason="no chrt")
def test_realtime_detection_agrees_with_chrt():
    done = subprocess.run(["chrt", "-f", "1", "true"], capture_output=True, check=False)
    assert machine.realtime_allowed() == (done.returncode == 0)


def test_build_cache_falls_back_when_home_cannot_hold_it(tmp_path, monkeypatch):
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "no" / "such" / "home"))
    path = compiler.cache_dir()
    assert path.parent == Path(tempfile.gettempdir())
    assert path.stat().st_uid == os.getuid() and not (tmp_path / "no").exists()


def test_a_calibrated_tsc_rate_is_kept_for_the_boot_only(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    machine.tsc_hz.cache_clear()
    try:
        hz, how = machine.tsc_hz()
        if how != bindings.HZ_CALIBRATED:
            pytest.skip(f"the CPU states its counter's rate here ({how}): nothing calibrated")
        path = machine.calibration_path(machine.TSC_CALIBRATION)
        doc = json.loads(path.read_text())
        assert doc["hz"] == hz and doc["boot_id"] == Path(machine.BOOT_ID).read_text().strip()
        for change, kept in [({"hz": 1e9}, True), ({"hz": 1e9, "boot_id": "another"}, False),
                             ({"hz": "1e9"}, False), ({"hz": -1.0}, False)]:  # fmt: skip
            path.write_text(json.dumps(doc | change))
            machine.tsc_hz.cache_clear()
            assert (machine.tsc_hz()[0] == 1e9) is kept
            assert machine.tsc_hz()[0] == pytest.approx(1e9 if kept else hz, rel=0.005)
        path.write_text("{")
        machine.tsc_hz.cache_clear()
        assert machine.tsc_hz()[0] == pytest.approx(hz, rel=0.005)
    finally:
        machine.tsc_hz.cache_clear()


def test_metadata_records_the_conditions():
    meta = provenance.metadata()
    for key in ("cpu_model", "kernel", "clocksource", "tsc_hz", "aslr_system", "core_digest"):
        assert key in meta
    assert meta["tsc_hz"] > 1e6


def test_core_pmu_is_the_cpus_own_event_source(tmp_path):
    vm, x86, arm = (tmp_path / d for d in ("vm", "x86", "arm"))
    for root in (vm, x86, arm):
        for name in ("software", "tracepoint", "msr", "uncore_imc_0"):
            (root / name).mkdir(parents=True)
    (x86 / "cpu").mkdir()
    (arm / "armv8_pmuv3_0").mkdir()
    (arm / "armv8_pmuv3_0" / "cpus").write_text("0-3\n")
    assert pmu.core_pmu(vm) == ""  # this machine's kind: a VM given no PMU
    assert pmu.core_pmu(x86) == "cpu"
    assert pmu.core_pmu(arm) == "armv8_pmuv3_0"
    assert pmu.core_pmu(tmp_path / "absent") == ""


def test_missing_counters_name_their_real_cause():
    """What this machine really has decides the reason: never perf_event_paranoid where no PMU
    is exposed, nor where this user may open events whatever its value."""
    reason = pmu.counters_missing()
    if pmu.hardware_counters():
        assert reason == ""
    elif not pmu.core_pmu():
        assert reason == pmu.NO_PMU and "paranoid" not in reason
    forbids = (pmu.perf_paranoid() or 0) > 2 and not pmu.perf_privileged()
    refusal = pmu.perf_refusal(errno.EACCES)
    assert refusal.startswith("perf_event_paranoid=") == forbids
    assert refusal.startswith("permission: ") == (not forbids)
    spoiler = {s.name: s for s in settings.spoilers()}["no hardware counters"]
    assert spoiler.present == bool(reason) and (spoiler.detail == reason or not reason)
    assert provenance.report()["hardware_counters_missing"] == reason
    shown = CliRunner().invoke(cli, ["machine"]).output
    assert f"hardware counters  {f'not supported here: {reason}' if reason else 'work'}" in shown


def test_privilege_is_read_from_the_capabilities():
    status = Path("/proc/self/status").read_text().splitlines()
    caps = next(int(line.split()[1], 16) for line in status if line.startswith("CapEff:"))
    assert pmu.perf_privileged() == bool(caps & (1 << 21 | 1 << 38))
