"""Whether the CPU's own counters count here, and if not, why: no PMU exposed (most VMs),
perf_event_paranoid, or a permission refused otherwise."""

from __future__ import annotations

import errno
import functools
import os
from pathlib import Path

from perflab.core import bindings
from perflab.system import machine

EVENT_SOURCES = Path("/sys/bus/event_source/devices")
CAP_SYS_ADMIN, CAP_PERFMON = 21, 38


def perf_paranoid() -> int | None:
    """/proc/sys/kernel/perf_event_paranoid."""
    text = machine.read_text("/proc/sys/kernel/perf_event_paranoid")
    return int(text) if text else None


@functools.cache
def hardware_counters() -> bool:
    """Whether perf_event can count hardware cycles here (no in most VMs)."""
    return bindings.perf_probe(0, 0) == 0


def core_pmu(root: Path = EVENT_SOURCES) -> str:
    """The kernel's event source for the CPU's own counters ('' when it lists none, as in a VM
    given no virtual PMU): 'cpu' on x86, 'cpu_core'/'cpu_atom' on hybrid Intel, and on Arm
    the PMUs that name the CPUs they count (a 'cpus' file); uncore PMUs have neither."""
    try:
        names = sorted(p.name for p in root.iterdir())
    except OSError:
        return ""
    return next((n for n in names if n == "cpu" or (root / n / "cpus").exists()), "")


def perf_privileged() -> bool:
    """Whether this process holds CAP_PERFMON or CAP_SYS_ADMIN: perf_event_paranoid then does
    not apply to it."""
    for line in machine.read_text("/proc/self/status").splitlines():
        if line.startswith("CapEff:"):
            caps = int(line.split()[1], 16)
            return bool(caps & (1 << CAP_SYS_ADMIN | 1 << CAP_PERFMON))
    return os.geteuid() == 0


def perf_refusal(code: int) -> str:
    """Why perf_event_open refused with EACCES/EPERM: perf_event_paranoid when it forbids this
    user (above 2 nothing is left to an unprivileged one), else whatever forbade it besides."""
    paranoid = perf_paranoid()
    name = bindings.errno_name(code)
    if paranoid is not None and paranoid > 2 and not perf_privileged():
        return (
            f"perf_event_paranoid={paranoid} forbids perf_event to unprivileged users; run "
            "as root (or with CAP_PERFMON) or set /proc/sys/kernel/perf_event_paranoid to 2"
        )
    return (
        f"permission: perf_event_open refused it ({name}) though perf_event_paranoid="
        f"{paranoid} allows it here; a seccomp filter (containers) or a security module "
        "forbids perf_event"
    )


# Short, as tables and verbs repeat it; NO_PMU_WHY is said once, by `perflab machine` and
# `perflab counters`.
NO_PMU = "no PMU exposed"
NO_PMU_WHY = (
    "the kernel lists no CPU event source in /sys/bus/event_source/devices (a VM given no "
    "virtual PMU, or a kernel without the CPU's perf driver): run on bare metal or give the VM "
    "a PMU for cycles and instructions"
)


def counters_missing() -> str:
    """Why hardware counters do not count here ('' when they do): no PMU exposed,
    perf_event_paranoid, or a permission refused otherwise."""
    status = bindings.perf_probe(0, 0)
    if status == 0:
        return ""
    code = -status
    if not core_pmu():
        return NO_PMU
    if code in (errno.EACCES, errno.EPERM):
        return perf_refusal(code)
    return f"the PMU refuses to count cycles ({bindings.errno_text(code)})"
