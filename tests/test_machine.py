"""The machine report agrees with the kernel's own views of the machine."""

import os
import shutil
import subprocess

from perflab import machine


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


def test_offline_cpu_is_refused_with_the_online_list():
    import pytest

    from perflab.errors import PerflabError

    with pytest.raises(PerflabError, match="online CPUs"):
        machine.check_cpus([4096])


def test_metadata_records_the_conditions():
    meta = machine.metadata()
    for key in ("cpu_model", "kernel", "clocksource", "tsc_hz", "aslr_system", "core_digest"):
        assert key in meta
    assert meta["tsc_hz"] > 1e6
