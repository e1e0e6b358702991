"""The machine report agrees with the kernel's own views of the machine."""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from perflab.errors import PerflabError
from perflab.system import compiler, machine


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


def test_metadata_records_the_conditions():
    meta = machine.metadata()
    for key in ("cpu_model", "kernel", "clocksource", "tsc_hz", "aslr_system", "core_digest"):
        assert key in meta
    assert meta["tsc_hz"] > 1e6
