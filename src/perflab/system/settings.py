"""The system settings that spoil a measurement (ASLR, the clocksource, the frequency governor,
turbo, the real-time throttle, ...), each checked with what to do about it (as pyperf's system
command does)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from perflab.system import machine, pmu

CLOCKSOURCE = Path("/sys/devices/system/clocksource/clocksource0")


def clocksources() -> tuple[str, list[str]]:
    """The kernel's current clocksource and the available ones."""
    return machine.read_text(CLOCKSOURCE / "current_clocksource"), machine.read_text(
        CLOCKSOURCE / "available_clocksource"
    ).split()


def aslr() -> int | None:
    """/proc/sys/kernel/randomize_va_space: 0 off, 1 partial, 2 full."""
    text = machine.read_text("/proc/sys/kernel/randomize_va_space")
    return int(text) if text else None


def governor() -> str:
    """cpufreq governor of CPU 0, '' when the kernel exposes no cpufreq (typical in a VM)."""
    return machine.read_text(machine.SYS_CPU / "cpu0/cpufreq/scaling_governor")


def turbo() -> str:
    """Turbo/boost state where the driver exposes it."""
    no_turbo = machine.read_text(machine.SYS_CPU / "intel_pstate/no_turbo")
    if no_turbo:
        return "off" if no_turbo == "1" else "on"
    boost = machine.read_text(machine.SYS_CPU / "cpufreq/boost")
    return {"1": "on", "0": "off"}.get(boost, "")


def rt_bandwidth() -> tuple[int, int] | None:
    """What the kernel lets real-time tasks run on a CPU: (runtime, period) in ns, or None
    where it does not throttle them (sched_rt_runtime_us -1) or the knobs cannot be read."""
    try:
        runtime = int(machine.read_text(Path("/proc/sys/kernel/sched_rt_runtime_us")))
        period = int(machine.read_text(Path("/proc/sys/kernel/sched_rt_period_us")))
    except ValueError:
        return None
    return (runtime * 1000, period * 1000) if 0 < runtime < period else None


def rt_throttling() -> str:
    """The kernel's real-time throttle (the last line of defence against a runaway RT task)
    and how perflab's back-to-back real-time runs rest so that it never lands inside one."""
    bandwidth = rt_bandwidth()
    if bandwidth is None:
        return "off, or unknown (sched_rt_runtime_us, sched_rt_period_us)"
    runtime, period = bandwidth
    return (
        f"real-time tasks get at most {runtime / 1e6:.0f} ms of each {period / 1e6:.0f} ms on "
        "a CPU; perflab's spawned runs, when at real-time priority, rest between runs to stay "
        "under it"
    )


@dataclass(frozen=True)
class Spoiler:
    """A condition that will bias measurements, and what to do about it."""

    name: str
    present: bool
    detail: str
    advice: str


def spoilers() -> list[Spoiler]:
    """Every check, in the order a user should fix them."""
    import psutil  # only `perflab machine` asks: no sweep's start-up imports it

    flags = machine.cpu_flags()
    current, _ = clocksources()
    gov = governor()
    load1 = os.getloadavg()[0]
    swap = psutil.swap_memory()
    space = aslr()
    hv = machine.hypervisor()
    invariant = {"constant_tsc", "nonstop_tsc"} <= flags
    missing = pmu.counters_missing()
    return [
        Spoiler(
            "ASLR",
            space not in (0, None),
            f"randomize_va_space={space}",
            "use --aslr off (per process, no root needed) rather than changing the system",
        ),
        Spoiler(
            "non-invariant TSC",
            "tsc" in flags and not invariant,
            "constant_tsc/nonstop_tsc " + ("present" if invariant else "missing"),
            "convert ticks with care or time with CLOCK_MONOTONIC_RAW",
        ),
        Spoiler(
            "clocksource",
            bool(current) and current != "tsc" and "tsc" in flags,
            f"current={current or 'unknown'}",
            "echo tsc > /sys/devices/system/clocksource/clocksource0/current_clocksource",
        ),
        Spoiler(
            "frequency governor",
            bool(gov) and gov != "performance",
            f"governor={gov or 'not exposed'}",
            "cpupower frequency-set -g performance",
        ),
        Spoiler(
            "turbo",
            turbo() == "on",
            f"turbo={turbo() or 'not exposed'}",
            "disable turbo (intel_pstate/no_turbo=1) for stable frequencies",
        ),
        Spoiler(
            "hypervisor",
            bool(hv),
            hv or "bare metal",
            "expect steal time and trapped instructions; compare runs on one VM, not across VMs",
        ),
        Spoiler(
            "load",
            load1 > 0.5,
            f"1-min load average {load1:.2f}",
            "stop other work or pin the measurement (--cpu) away from it",
        ),
        Spoiler(
            "swap",
            swap.used > 0,
            f"{swap.used // 2**20} MiB swapped",
            "free memory or use mlockall (perflab asks for it where allowed)",
        ),
        Spoiler(
            "no hardware counters",
            not pmu.hardware_counters(),
            missing or "cycles count",
            f"{pmu.NO_PMU_WHY}; perflab reports ticks"
            if missing == pmu.NO_PMU
            else "cycles/instructions unavailable; perflab reports ticks",
        ),
    ]
