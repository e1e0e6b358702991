"""This machine's CPUs: which exist, which this process may use (and how busy they are), what
they are (the identity every calibration is cached under), their counter's rate, topology and
caches, as the kernel declares them."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import os
import platform
import socket
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from perflab.core import bindings, files
from perflab.core.bindings import core_digest
from perflab.core.lazy import pd
from perflab.errors import PerflabError
from perflab.system import compiler

SYS_CPU = Path("/sys/devices/system/cpu")
HZ_SOURCES = bindings.HZ_SOURCES
TSC_FLAGS = ("tsc", "rdtscp", "constant_tsc", "nonstop_tsc")


def read_text(path: Path | str, default: str = "") -> str:
    """A /proc or /sys file's text, stripped; `default` where it cannot be read."""
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


def parse_cpu_set(text: str) -> set[int]:
    """A sysfs CPU list ('0-1,4') as a set; '' as empty."""
    text = text.strip()
    return set(parse_cpu_list(text)) if text else set()


def online_cpus() -> list[int]:
    """CPUs the kernel has online (an offline sibling cannot be bound to)."""
    text = read_text(SYS_CPU / "online")
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
    for line in read_text("/proc/cpuinfo").splitlines():
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


def topology() -> pd.DataFrame:
    """One row per online CPU with logical core, socket, node and cache ids, as `lscpu -p` has."""
    rows: list[dict[str, Any]] = []
    cores: dict[Any, int] = {}
    caches: dict[Any, int] = {}
    for cpu in online_cpus():
        base = SYS_CPU / f"cpu{cpu}"
        socket_id = int(read_text(base / "topology/physical_package_id", "0"))
        core_key = (socket_id, int(read_text(base / "topology/core_id", str(cpu))))
        nodes = [p.name[4:] for p in base.glob("node[0-9]*")]
        row = {
            "cpu": cpu,
            "core": cores.setdefault(core_key, len(cores)),
            "socket": socket_id,
            "node": int(nodes[0]) if nodes else 0,
            "siblings": read_text(base / "topology/thread_siblings_list", str(cpu)),
        }
        for index in sorted((base / "cache").glob("index*")):
            name = _cache_name(index)
            shared = read_text(index / "shared_cpu_list", str(cpu))
            row[name] = caches.setdefault((name, shared), len([k for k in caches if k[0] == name]))
        rows.append(row)
    return pd.DataFrame(rows)


def _cache_name(index: Path) -> str:
    level, kind = read_text(index / "level"), read_text(index / "type")
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
                "size_bytes": _size_bytes(read_text(index / "size", "0")),
                "line_bytes": int(read_text(index / "coherency_line_size", "0") or 0),
                "ways": int(read_text(index / "ways_of_associativity", "0") or 0),
                "shared_cpus": read_text(index / "shared_cpu_list"),
            }
        )
    return pd.DataFrame(rows)


def cache_size(name: str) -> int | None:
    """Declared size in bytes of one cache level (e.g. 'L1d', 'L2'), None if not declared."""
    table = caches()
    match = table[table["cache"] == name] if not table.empty else table
    return int(match["size_bytes"].iloc[0]) if len(match) else None


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


def calibration_path(name: str) -> Path:
    """The cache file of one calibration on this machine and core (its name holds the key)."""
    key = hashlib.sha256(json.dumps(identity(), sort_keys=True).encode()).hexdigest()[:16]
    return compiler.cache_dir() / f"{name}-{key}.json"


TSC_CALIBRATION = "tsc-hz"
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


@functools.cache
def tsc_hz() -> tuple[float, str]:
    """Cycle-counter frequency in Hz and how it was obtained. A calibration (200 ms asleep,
    a quarter of a sweep's start-up) is kept for the rest of the boot where the counter's rate
    is constant: it cannot change before the next boot."""
    boot = read_text(BOOT_ID)
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
