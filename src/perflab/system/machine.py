"""Where a result was measured: CPU, topology, caches, clocks, and what will spoil measurements."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import functools
import hashlib
import json
import math
import os
import platform
import shlex
import socket
import sys
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perflab import __version__
from perflab.core import bindings, files
from perflab.core.bindings import core_digest
from perflab.core.lazy import pd
from perflab.errors import PerflabError
from perflab.system import compiler

SYS_CPU = Path("/sys/devices/system/cpu")
CLOCKSOURCE = Path("/sys/devices/system/clocksource/clocksource0")
HZ_SOURCES = bindings.HZ_SOURCES
TSC_FLAGS = ("tsc", "rdtscp", "constant_tsc", "nonstop_tsc")


def _read(path: Path | str, default: str = "") -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return default


MAX_CPU = 1 << 16  # far beyond any kernel's NR_CPUS, so a typo cannot build a huge list


def parse_cpu_list(text: str) -> list[int]:
    """Expand a sysfs CPU list such as '0-3,8,10-11'; ValueError on anything else."""
    cpus: list[int] = []
    for part in filter(None, text.strip().split(",")):
        lo, _, hi = part.partition("-")
        first, last = int(lo), int(hi or lo)
        if not 0 <= first <= last < MAX_CPU:
            raise ValueError(f"bad CPU range {part!r}")
        cpus.extend(range(first, last + 1))
    return cpus


def format_cpu_list(cpus: Iterable[int]) -> str:
    """The inverse of parse_cpu_list: [0, 1, 2, 5] as '0-2,5'."""
    runs: list[list[int]] = []
    for c in sorted(set(cpus)):
        if runs and c == runs[-1][1] + 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def online_cpus() -> list[int]:
    """CPUs the kernel has online (an offline sibling cannot be bound to)."""
    text = _read(SYS_CPU / "online")
    return parse_cpu_list(text) if text else list(range(os.cpu_count() or 1))


def allowed_cpus() -> list[int]:
    """CPUs this process may run on (taskset, a container's cpuset), a subset of the online."""
    return sorted(os.sched_getaffinity(0))


def usable_cpus() -> list[int]:
    """Online CPUs inside the affinity mask: the ones perflab may choose by itself."""
    allowed = set(allowed_cpus())
    return [c for c in online_cpus() if c in allowed] or allowed_cpus()


def check_cpus(cpus: Iterable[int]) -> list[int]:
    """Refuse CPUs that do not exist, are offline, or lie outside the affinity mask, by name."""
    online, allowed = online_cpus(), set(allowed_cpus())
    absent = [c for c in cpus if c not in online]
    if absent:
        raise PerflabError(
            f"CPU {format_cpu_list(absent)} does not exist or is offline; "
            f"online CPUs: {format_cpu_list(online)}; affinity mask: {format_cpu_list(allowed)}"
        )
    outside = [c for c in cpus if c not in allowed]
    if outside:
        raise PerflabError(
            f"CPU {format_cpu_list(outside)} is outside this process's affinity mask "
            f"(taskset or a cpuset); allowed CPUs: {format_cpu_list(allowed)}"
        )
    return list(cpus)


# /proc/stat's per-CPU fields: user nice system idle iowait irq softirq steal guest guest_nice.
# Busy is all but idle and iowait; steal (the hypervisor ran someone else) counts as busy: it
# is time the CPU's own tasks did not get. guest time is already inside user.
_BUSY_FIELDS = (0, 1, 2, 5, 6, 7)


def busy_ns(cpus: Iterable[int]) -> float:
    """Time the CPUs have spent busy since boot, summed, in ns (/proc/stat counts USER_HZ
    steps, 10 ms, each tick sampling what ran): read around a run, less the run's own CPU
    time, it is what other tasks took of its CPUs. NaN where /proc/stat lacks one of them."""
    wanted = {f"cpu{c}" for c in cpus}
    total, seen = 0, 0
    try:
        with open("/proc/stat") as f:
            for line in f:
                name, *fields = line.split()
                if name in wanted:
                    total += sum(int(fields[i]) for i in _BUSY_FIELDS if i < len(fields))
                    seen += 1
                elif not name.startswith("cpu"):
                    break
    except OSError:
        return math.nan
    if not wanted or seen < len(wanted):
        return math.nan
    return total * 1e9 / os.sysconf("SC_CLK_TCK")


@functools.cache
def realtime_allowed() -> bool:
    """Whether SCHED_FIFO is granted here, found by asking for it on a throwaway thread:
    CAP_SYS_NICE, RLIMIT_RTPRIO and the cgroup's real-time budget decide, not the uid."""
    granted: list[bool] = []

    def attempt() -> None:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))  # 0: this thread only
        except OSError:
            granted.append(False)
        else:
            granted.append(True)

    worker = threading.Thread(target=attempt, name="perflab-rt-probe")
    worker.start()
    worker.join()
    return granted[0]


@functools.cache
def cpuinfo() -> dict[str, str]:
    """The first processor's block of /proc/cpuinfo."""
    info: dict[str, str] = {}
    for line in _read("/proc/cpuinfo").splitlines():
        if not line.strip():
            break
        key, _, value = line.partition(":")
        info[key.strip()] = value.strip()
    return info


def cpu_flags() -> set[str]:
    """CPU feature flags (x86 'flags', aarch64 'Features')."""
    info = cpuinfo()
    return set((info.get("flags") or info.get("Features", "")).split())


def cpu_model() -> str:
    """The CPU's marketing name, or the architecture when the kernel gives none."""
    info = cpuinfo()
    return info.get("model name") or info.get("Hardware") or platform.machine()


def cpu_id() -> str:
    """Which CPU design beyond its name (one "Intel Xeon Processor" name covers many):
    x86's family and model, Arm's implementer and part; '' where the kernel says neither."""
    info = cpuinfo()
    if "cpu family" in info:
        return f"family {int(info['cpu family']):X}h, model {int(info.get('model', '0')):X}h"
    if "CPU implementer" in info:
        return f"implementer {info['CPU implementer']}, part {info.get('CPU part', '?')}"
    return ""


def topology() -> pd.DataFrame:
    """One row per online CPU with logical core, socket, node and cache ids, as `lscpu -p` has."""
    rows: list[dict[str, Any]] = []
    cores: dict[Any, int] = {}
    caches: dict[Any, int] = {}
    for cpu in online_cpus():
        base = SYS_CPU / f"cpu{cpu}"
        socket_id = int(_read(base / "topology/physical_package_id", "0"))
        core_key = (socket_id, int(_read(base / "topology/core_id", str(cpu))))
        nodes = [p.name[4:] for p in base.glob("node[0-9]*")]
        row = {
            "cpu": cpu,
            "core": cores.setdefault(core_key, len(cores)),
            "socket": socket_id,
            "node": int(nodes[0]) if nodes else 0,
            "siblings": _read(base / "topology/thread_siblings_list", str(cpu)),
        }
        for index in sorted((base / "cache").glob("index*")):
            name = _cache_name(index)
            shared = _read(index / "shared_cpu_list", str(cpu))
            row[name] = caches.setdefault((name, shared), len([k for k in caches if k[0] == name]))
        rows.append(row)
    return pd.DataFrame(rows)


def _cache_name(index: Path) -> str:
    level, kind = _read(index / "level"), _read(index / "type")
    suffix = {"Data": "d", "Instruction": "i"}.get(kind, "")
    return f"L{level}{suffix}"


def _size_bytes(text: str) -> int:
    units = {"K": 1024, "M": 1024**2, "G": 1024**3}
    text = text.strip()
    if text and text[-1] in units:
        return int(text[:-1]) * units[text[-1]]
    return int(text or 0)


def caches() -> pd.DataFrame:
    """Cache levels of CPU 0 as sysfs declares them: name, size, line, ways, shared CPUs."""
    rows = []
    for index in sorted((SYS_CPU / "cpu0/cache").glob("index*")):
        rows.append(
            {
                "cache": _cache_name(index),
                "size_bytes": _size_bytes(_read(index / "size", "0")),
                "line_bytes": int(_read(index / "coherency_line_size", "0") or 0),
                "ways": int(_read(index / "ways_of_associativity", "0") or 0),
                "shared_cpus": _read(index / "shared_cpu_list"),
            }
        )
    return pd.DataFrame(rows)


def cache_size(name: str) -> int | None:
    """Declared size in bytes of one cache level (e.g. 'L1d', 'L2'), None if not declared."""
    table = caches()
    match = table[table["cache"] == name] if not table.empty else table
    return int(match["size_bytes"].iloc[0]) if len(match) else None


TSC_CALIBRATION = "tsc-hz"
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


@functools.cache
def tsc_hz() -> tuple[float, str]:
    """Cycle-counter frequency in Hz and how it was obtained. A calibration (200 ms asleep,
    a quarter of a sweep's start-up) is kept for the rest of the boot where the counter's rate
    is constant: it cannot change before the next boot."""
    boot = _read(BOOT_ID)
    cached = _cached_tsc_hz(boot)
    if cached is not None:
        return cached
    hz, how = bindings.tsc_hz()
    calibrated = how == bindings.HZ_CALIBRATED
    if calibrated and boot and "constant_tsc" in cpu_flags():
        doc = {"identity": identity(), "boot_id": boot, "hz": hz, "how": how}
        with contextlib.suppress(OSError, PerflabError):
            path = calibration_path(TSC_CALIBRATION)
            files.atomic(path, lambda tmp: tmp.write_text(json.dumps(doc, indent=1) + "\n"))
    return hz, how


def _cached_tsc_hz(boot: str) -> tuple[float, str] | None:
    """This boot's calibration on this machine and core; None when there is none, or the file
    is unreadable, corrupt or another boot's or machine's: never trusted."""
    try:
        doc = json.loads(files.read_private(calibration_path(TSC_CALIBRATION)))
        hz, how = doc["hz"], doc["how"]
        mine = boot and doc["boot_id"] == boot and doc["identity"] == identity()
    except (OSError, ValueError, TypeError, KeyError, PerflabError):
        return None
    if mine and type(hz) is float and math.isfinite(hz) and hz > 0 and isinstance(how, str):
        return hz, how
    return None


def hypervisor() -> str:
    """The hypervisor's name from CPUID leaf 0x40000000, '' on bare metal."""
    if "hypervisor" not in cpu_flags():
        return ""
    regs = bindings.cpuid(0x40000000)
    if regs is None:
        return "yes"
    raw = b"".join(r.to_bytes(4, "little") for r in regs[1:])
    name = raw.rstrip(b"\0").decode("ascii", "replace").strip()
    return {"KVMKVMKVM": "KVM", "VMwareVMware": "VMware", "Microsoft Hv": "Hyper-V"}.get(
        name, name or "yes"
    )


def clocksources() -> tuple[str, list[str]]:
    """The kernel's current clocksource and the available ones."""
    return _read(CLOCKSOURCE / "current_clocksource"), _read(
        CLOCKSOURCE / "available_clocksource"
    ).split()


def aslr() -> int | None:
    """/proc/sys/kernel/randomize_va_space: 0 off, 1 partial, 2 full."""
    text = _read("/proc/sys/kernel/randomize_va_space")
    return int(text) if text else None


def governor() -> str:
    """cpufreq governor of CPU 0, '' when the kernel exposes no cpufreq (typical in a VM)."""
    return _read(SYS_CPU / "cpu0/cpufreq/scaling_governor")


def turbo() -> str:
    """Turbo/boost state where the driver exposes it."""
    no_turbo = _read(SYS_CPU / "intel_pstate/no_turbo")
    if no_turbo:
        return "off" if no_turbo == "1" else "on"
    boost = _read(SYS_CPU / "cpufreq/boost")
    return {"1": "on", "0": "off"}.get(boost, "")


def perf_paranoid() -> int | None:
    """/proc/sys/kernel/perf_event_paranoid."""
    text = _read("/proc/sys/kernel/perf_event_paranoid")
    return int(text) if text else None


@functools.cache
def hardware_counters() -> bool:
    """Whether perf_event can count hardware cycles here (no in most VMs)."""
    return bindings.perf_probe(0, 0) == 0


EVENT_SOURCES = Path("/sys/bus/event_source/devices")
CAP_SYS_ADMIN, CAP_PERFMON = 21, 38


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
    for line in _read("/proc/self/status").splitlines():
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

    flags = cpu_flags()
    current, _ = clocksources()
    gov = governor()
    load1 = os.getloadavg()[0]
    swap = psutil.swap_memory()
    space = aslr()
    hv = hypervisor()
    invariant = {"constant_tsc", "nonstop_tsc"} <= flags
    missing = counters_missing()
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
            not hardware_counters(),
            missing or "cycles count",
            f"{NO_PMU_WHY}; perflab reports ticks"
            if missing == NO_PMU
            else "cycles/instructions unavailable; perflab reports ticks",
        ),
    ]


def _timer_step() -> int:
    """The tick counter's step: the finest difference any timing here can show."""
    from perflab.system import timer  # needs the C core; machine is imported without it

    return timer.timer_step()


# What a per-machine calibration holds for, beyond host and model name: the CPU down to its
# stepping and microcode (x86), or its implementer, part and revision (Arm).
CPU_IDENTITY = ("cpu family", "model", "stepping", "microcode", "CPU implementer",
                "CPU architecture", "CPU variant", "CPU part", "CPU revision")  # fmt: skip


def identity() -> dict[str, str]:
    """The machine and C core a calibration measured here holds for: the same host, the same
    CPU (a VM moved to another host CPU is another machine), the same core's timing loop."""
    info = cpuinfo()
    return {
        "hostname": socket.gethostname(),
        "cpu_model": cpu_model(),
        "arch": platform.machine(),
        "hypervisor": hypervisor(),
        **{key: info[key] for key in CPU_IDENTITY if key in info},
        "core_digest": core_digest(),
    }


@dataclass(frozen=True)
class PlacementFloor:
    """How much identical C code at different addresses differs here (engine/placement.py
    measures it): between two distinct C functions a ratio within 1 +/- share is undecidable."""

    share: float
    placements: int
    copies: int  # mappings of the twins' library timed (a cache from before: remeasured)
    pairs: int
    runs: int
    worst: str
    disturbed: int
    measured_at: str
    seconds: float
    timer_step_ticks: int
    compiler: str  # the C compiler that built the twins, or the Python interpreter of "python"
    kind: str = "c"  # "c": C functions at different addresses; "python": function objects

    def sentence(self) -> str:
        """What the floor means, as the assertions and `perflab machine` say it."""
        if self.kind == "python":
            return (
                f"identical Python code in two function objects differs by up to "
                f"{100 * self.share:.2g} % in this interpreter: smaller differences between "
                "distinct callables are undecidable here"
            )
        return (
            f"identical code at two addresses differs by up to {100 * self.share:.2g} % on "
            "this CPU: smaller differences between distinct functions are undecidable here"
        )

    def method(self) -> str:
        """How it was measured, in one line; a busy machine's timings said so."""
        busy = (
            f"; {self.disturbed} of {2 * self.pairs * self.copies} timings stayed disturbed: "
            "remeasure on a quieter machine"
            if self.disturbed
            else ""
        )
        what = "function objects of one Python loop" if self.kind == "python" else "placements"
        mapped = f" in each of {self.copies} mappings of their library" if self.copies > 1 else ""
        return (
            f"{self.placements} {what}{mapped}, each of {self.pairs} pairs timed twice "
            f"(both slots) in {self.runs} interleaved runs each, the widest 95 % ratio "
            f"interval: {self.worst}{busy}"
        )


PLACEMENT_FLOOR = "placement-floor"


def calibration_path(name: str) -> Path:
    """The cache file of one calibration on this machine and core (its name holds the key)."""
    key = hashlib.sha256(json.dumps(identity(), sort_keys=True).encode()).hexdigest()[:16]
    return compiler.cache_dir() / f"{name}-{key}.json"


def cached_placement_floor() -> PlacementFloor | None:
    """The floor measured earlier on this machine and core; None when none is cached or the
    file is unreadable, corrupt or another machine's: it is then measured again, never trusted."""
    try:
        doc = json.loads(files.read_private(calibration_path(PLACEMENT_FLOOR)))
        floor = PlacementFloor(**doc["floor"])
    except (OSError, ValueError, TypeError, KeyError, PerflabError):
        return None
    if doc.get("identity") != identity() or not _well_formed(floor):
        return None
    return floor


def _well_formed(floor: PlacementFloor) -> bool:
    """Every field of its type and in range: JSON from elsewhere may hold anything."""
    numbers = (floor.share, floor.seconds)
    counts = (floor.placements, floor.pairs, floor.runs, floor.disturbed, floor.timer_step_ticks,
              floor.copies)  # fmt: skip
    texts = (floor.worst, floor.measured_at, floor.compiler, floor.kind)
    return (
        all(type(x) in (int, float) and math.isfinite(x) for x in numbers)
        and all(type(x) is int for x in counts)
        and all(isinstance(x, str) for x in texts)
        and floor.share >= 0
        and floor.placements >= 2
        and min(floor.pairs, floor.runs, floor.copies) >= 1
        and floor.disturbed >= 0
    )


def store_placement_floor(floor: PlacementFloor) -> Path:
    """Cache the floor for this machine and core, written whole (a reader never sees half)."""
    path = calibration_path(PLACEMENT_FLOOR)
    doc = {"identity": identity(), "floor": dataclasses.asdict(floor)}
    files.atomic(path, lambda tmp: tmp.write_text(json.dumps(doc, indent=1) + "\n"))
    return path


def rt_bandwidth() -> tuple[int, int] | None:
    """What the kernel lets real-time tasks run on a CPU: (runtime, period) in ns, or None
    where it does not throttle them (sched_rt_runtime_us -1) or the knobs cannot be read."""
    try:
        runtime = int(_read(Path("/proc/sys/kernel/sched_rt_runtime_us")))
        period = int(_read(Path("/proc/sys/kernel/sched_rt_period_us")))
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


def metadata() -> dict:
    """What every result records about where and how it was measured (the placement floor
    only as cached: measuring it takes seconds, which no verb spends unasked)."""
    current, _ = clocksources()
    hz, how = tsc_hz()
    floor = cached_placement_floor()
    return {
        "hostname": socket.gethostname(),
        "cpu_model": cpu_model(),
        "cpu_id": cpu_id(),
        "arch": platform.machine(),
        "online_cpus": len(online_cpus()),
        "kernel": platform.release(),
        "hypervisor": hypervisor(),
        "clocksource": current,
        "tsc_hz": hz,
        "tsc_hz_source": how,
        "timer_step_ticks": _timer_step(),
        "placement_floor": floor.share if floor else None,
        "placement_floor_measured": floor.measured_at if floor else "not measured",
        "aslr_system": aslr(),
        "rt_throttling": rt_throttling(),
        "governor": governor(),
        "hardware_counters": hardware_counters(),
        "perflab_version": __version__,
        "core_digest": core_digest(),
        "python": platform.python_version(),
        "command": shlex.join(sys.argv),
    }


def report() -> dict:
    """The whole machine report that `perflab machine` prints."""
    import psutil

    current, available = clocksources()
    hz, how = tsc_hz()
    mem = psutil.virtual_memory()
    return {
        "hostname": socket.gethostname(),
        "cpu_model": cpu_model(),
        "arch": platform.machine(),
        "flags": sorted(cpu_flags()),
        "online_cpus": _read(SYS_CPU / "online"),
        "logical_cpus": psutil.cpu_count(logical=True),
        "physical_cores": psutil.cpu_count(logical=False),
        "topology": topology().to_dict(orient="records"),
        "caches": caches().to_dict(orient="records"),
        "memory_bytes": mem.total,
        "kernel": platform.release(),
        "hypervisor": hypervisor() or "none",
        "clocksource": current,
        "available_clocksources": available,
        "tsc_hz": hz,
        "tsc_hz_source": how,
        "timer_step_ticks": _timer_step(),
        "tsc_flags": {f: f in cpu_flags() for f in TSC_FLAGS},
        "aslr": aslr(),
        "governor": governor() or "not exposed",
        "turbo": turbo() or "not exposed",
        "perf_event_paranoid": perf_paranoid(),
        "hardware_counters": hardware_counters(),
        "hardware_counters_missing": counters_missing(),
        "spoilers": [s.__dict__ for s in spoilers()],
    }


def parse_cpu_set(text: str) -> set[int]:
    """A sysfs CPU list ('0-1,4') as a set; '' as empty."""
    text = text.strip()
    return set(parse_cpu_list(text)) if text else set()


def core_siblings(cpus: Sequence[int], root: str | os.PathLike = SYS_CPU) -> list[tuple[int, int]]:
    """Pairs of listed CPUs that are SMT siblings (one core), read from <root>/cpuN/topology."""
    pairs: list[tuple[int, int]] = []
    for i, a in enumerate(cpus):
        topo = Path(root) / f"cpu{a}" / "topology"
        text = ""
        for name in ("core_cpus_list", "thread_siblings_list"):
            path = topo / name
            if path.exists():
                text = path.read_text()
                break
        same_core = parse_cpu_set(text) - {a}
        pairs.extend((a, b) for b in cpus[i + 1 :] if b in same_core)
    return pairs


def refuse_siblings(cpus: Sequence[int], allow: bool, root: str | os.PathLike = SYS_CPU) -> None:
    """Refuse lanes on SMT siblings (one core) unless asked: they slow each other down."""
    pairs = core_siblings(cpus, root)
    if pairs and not allow:
        shown = ", ".join(f"{a} and {b}" for a, b in pairs)
        raise PerflabError(
            f"CPUs {shown} are SMT siblings (one core): their children would slow each other "
            "down; list one CPU per core, or --allow-siblings to measure that on purpose"
        )
