"""Where and how a result was measured: the metadata every result carries, and the whole
machine report `perflab machine` prints."""

from __future__ import annotations

import platform
import shlex
import socket
import sys

from perflab import __version__
from perflab.core.bindings import core_digest
from perflab.system import machine, placement_floor, pmu, settings


def _timer_step() -> int:
    """The tick counter's step: the finest difference any timing here can show."""
    from perflab.system import timer  # needs the C core; provenance is imported without it

    return timer.timer_step()


def metadata() -> dict:
    """What every result records about where and how it was measured (the placement floor
    only as cached: measuring it takes seconds, which no verb spends unasked)."""
    current, _ = settings.clocksources()
    hz, how = machine.tsc_hz()
    floor = placement_floor.cached_placement_floor()
    return {
        "hostname": socket.gethostname(),
        "cpu_model": machine.cpu_model(),
        "cpu_id": machine.cpu_id(),
        "arch": platform.machine(),
        "online_cpus": len(machine.online_cpus()),
        "kernel": platform.release(),
        "hypervisor": machine.hypervisor(),
        "clocksource": current,
        "tsc_hz": hz,
        "tsc_hz_source": how,
        "timer_step_ticks": _timer_step(),
        "placement_floor": floor.share if floor else None,
        "placement_floor_measured": floor.measured_at if floor else "not measured",
        "aslr_system": settings.aslr(),
        "rt_throttling": settings.rt_throttling(),
        "governor": settings.governor(),
        "hardware_counters": pmu.hardware_counters(),
        "perflab_version": __version__,
        "core_digest": core_digest(),
        "python": platform.python_version(),
        "command": shlex.join(sys.argv),
    }


def report() -> dict:
    """The whole machine report that `perflab machine` prints."""
    import psutil

    current, available = settings.clocksources()
    hz, how = machine.tsc_hz()
    mem = psutil.virtual_memory()
    return {
        "hostname": socket.gethostname(),
        "cpu_model": machine.cpu_model(),
        "arch": platform.machine(),
        "flags": sorted(machine.cpu_flags()),
        "online_cpus": machine.read_text(machine.SYS_CPU / "online"),
        "logical_cpus": psutil.cpu_count(logical=True),
        "physical_cores": psutil.cpu_count(logical=False),
        "topology": machine.topology().to_dict(orient="records"),
        "caches": machine.caches().to_dict(orient="records"),
        "memory_bytes": mem.total,
        "kernel": platform.release(),
        "hypervisor": machine.hypervisor() or "none",
        "clocksource": current,
        "available_clocksources": available,
        "tsc_hz": hz,
        "tsc_hz_source": how,
        "timer_step_ticks": _timer_step(),
        "tsc_flags": {f: f in machine.cpu_flags() for f in machine.TSC_FLAGS},
        "aslr": settings.aslr(),
        "governor": settings.governor() or "not exposed",
        "turbo": settings.turbo() or "not exposed",
        "perf_event_paranoid": pmu.perf_paranoid(),
        "hardware_counters": pmu.hardware_counters(),
        "hardware_counters_missing": pmu.counters_missing(),
        "spoilers": [s.__dict__ for s in settings.spoilers()],
    }
