"""Exact child runs from Python: typed options over csrc/spawn.c and results as numpy records."""

import errno
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from perflab._native import check, ffi, lib, ptr
from perflab.errors import PerflabError

STATUS = {
    lib.PERFLAB_RUN_OK: "ok",
    lib.PERFLAB_RUN_EXIT: "exit",
    lib.PERFLAB_RUN_CRASH: "crash",
    lib.PERFLAB_RUN_TIMEOUT: "timeout",
    lib.PERFLAB_RUN_BAD_PROBE: "bad_probe",
    lib.PERFLAB_RUN_EXEC_FAILED: "exec_failed",
    lib.PERFLAB_RUN_SETUP_FAILED: "setup_failed",
    lib.PERFLAB_RUN_SPAWN_FAILED: "spawn_failed",
}
STATUS_NAMES = [STATUS[i] for i in range(len(STATUS))]
ASLR_MODES = ("off", "on", "system")
RT_POLICIES = {"fifo": 1, "rr": 2}


def _run_dtype() -> np.dtype:
    """numpy's view of struct perflab_run, read from cffi so the layout is never retyped."""
    ctype = ffi.typeof("struct perflab_run")
    names, formats, offsets = [], [], []
    for name, f in ctype.fields:
        names.append(name)
        kind = "u" if f.type.cname.startswith("uint") else "i"
        formats.append(f"{kind}{ffi.sizeof(f.type)}")
        offsets.append(f.offset)
    return np.dtype(
        {"names": names, "formats": formats, "offsets": offsets, "itemsize": ffi.sizeof(ctype)}
    )


RUN_DTYPE = _run_dtype()


@dataclass(frozen=True)
class SpawnOptions:
    """How each child runs: ASLR, CPUs, priority, memory locking, timeout, stdio."""

    aslr: str = "system"
    cpus: tuple[int, ...] = ()
    rt: bool = False
    rt_policy: str = "fifo"
    rt_priority: int = 1
    mlock: bool = False
    timeout: float | None = 10.0
    stdin: int | None = None
    stdout: int | None = None
    stderr: int | None = None

    def __post_init__(self):
        if self.aslr not in ASLR_MODES:
            raise PerflabError(f"aslr must be one of {', '.join(ASLR_MODES)}, not {self.aslr!r}")
        if self.rt_policy not in RT_POLICIES:
            raise PerflabError(f"rt_policy must be fifo or rr, not {self.rt_policy!r}")
        if self.timeout is not None and self.timeout <= 0:
            raise PerflabError(f"timeout must be positive, not {self.timeout}")

    def c_struct(self):
        """The struct perflab_spawn_opts for these options and the CPU array it points to.

        Keep both alive for the duration of the call: cffi frees what nobody references.
        """
        o = ffi.new("struct perflab_spawn_opts *")
        o.flags = (
            (lib.PERFLAB_SPAWN_NO_ASLR if self.aslr == "off" else 0)
            | (lib.PERFLAB_SPAWN_ASLR if self.aslr == "on" else 0)
            | (lib.PERFLAB_SPAWN_RT if self.rt else 0)
            | (lib.PERFLAB_SPAWN_MLOCK if self.mlock else 0)
        )
        cpus = ffi.new("int[]", list(self.cpus) or [0])
        o.ncpus, o.cpus = len(self.cpus), cpus
        o.rt_policy, o.rt_priority = RT_POLICIES[self.rt_policy], self.rt_priority
        o.timeout_ns = int(self.timeout * 1e9) if self.timeout else 0
        o.stdin_fd, o.stdout_fd, o.stderr_fd = (
            -1 if fd is None else fd for fd in (self.stdin, self.stdout, self.stderr)
        )
        return o, cpus


def check_program(program: str | os.PathLike) -> str:
    """Resolve a program like a shell would, refusing what cannot be executed, before any run."""
    name = os.fspath(program)
    if os.sep not in name:
        found = shutil.which(name)
        if found is None:
            raise PerflabError(f"{name}: command not found")
        name = found
    p = Path(name)
    if not p.exists():
        raise PerflabError(f"{name}: no such file")
    if p.is_dir() or not os.access(p, os.X_OK) or not p.stat().st_mode & 0o111:
        raise PerflabError(f"{name}: not an executable file")
    return str(p.resolve())


def _cstrings(items: Sequence[str]):
    """A NULL-terminated char*[] and the buffers it points to (keep both alive)."""
    bufs = [ffi.new("char[]", os.fsencode(s)) for s in items]
    return ffi.new("char *[]", [*bufs, ffi.NULL]), bufs


def env_list(env: Mapping[str, str] | None) -> list[str]:
    """NAME=value strings, in the mapping's order; None means an empty environment."""
    return [f"{k}={v}" for k, v in (env or {}).items()]


def run(
    argv: Sequence[str], env: Mapping[str, str] | None = None, options: SpawnOptions | None = None
) -> np.record:
    """One run with exactly argv and env (None: empty): nothing else is inherited."""
    options = options or SpawnOptions()
    path = check_program(argv[0])
    av, keep_a = _cstrings(list(argv))
    ev, keep_e = _cstrings(env_list(env))
    out = np.zeros(1, dtype=RUN_DTYPE)
    opts, keep_o = options.c_struct()
    rc = lib.perflab_spawn(os.fsencode(path), av, ev, opts, ptr(out, "struct perflab_run[]"))
    check(rc, f"spawn {path}")
    del keep_a, keep_e, keep_o
    return out[0]


def run_env_sizes(
    argv: Sequence[str],
    sizes: np.ndarray,
    var: str = "A",
    base_env: Mapping[str, str] | None = None,
    options: SpawnOptions | None = None,
) -> np.ndarray:
    """Run argv once per size, each with base_env plus VAR=<size pad characters>, in one C call."""
    options = options or SpawnOptions()
    if not var or "=" in var:
        raise PerflabError(f"invalid environment variable name {var!r}")
    sizes = np.ascontiguousarray(sizes, dtype=np.int64)
    if sizes.size and sizes.min() < 0:
        raise PerflabError("environment sizes must not be negative")
    av, keep_a = _cstrings(list(argv))
    ev, keep_e = _cstrings(env_list(base_env))
    out = np.zeros(sizes.size, dtype=RUN_DTYPE)
    opts, keep_o = options.c_struct()
    rc = lib.perflab_spawn_env_sizes(
        os.fsencode(argv[0]),
        av,
        ev,
        var.encode(),
        ptr(sizes, "int64_t[]"),
        sizes.size,
        opts,
        ptr(out, "struct perflab_run[]"),
    )
    check(rc, f"spawn {argv[0]}")
    del keep_a, keep_e, keep_o
    return out


def timer_overhead() -> int:
    """The probe's own cost in ticks (same lfence;rdtsc / rdtscp;lfence pair), to subtract."""
    return int(lib.perflab_timer_overhead())


def tidy(runs: np.ndarray, overhead: int = 0) -> pd.DataFrame:
    """Run records as tidy columns: probe ticks less overhead (NaN if no probe), rusage, status.

    Counts are int32 and status a categorical: 800 000 rows must fit in a few copies.
    """
    has_probe = (runs["flags"] & lib.PERFLAB_RUN_HAS_PROBE) != 0
    has_counters = (runs["flags"] & lib.PERFLAB_RUN_HAS_COUNTERS) != 0
    # The probed region lies inside the parent's own reads around the run, on the same clock:
    # a record of 0 or of more than outer_ticks is not a measurement (bad_probe, no ticks).
    raw = runs["probe_ticks"]
    unphysical = has_probe & ((raw == 0) | (raw > runs["outer_ticks"]))
    ok = runs["status"] == lib.PERFLAB_RUN_OK
    status = np.where(unphysical & ok, lib.PERFLAB_RUN_BAD_PROBE, runs["status"])
    # A region cheaper than the timer's own cost reads 0, not a negative time.
    probe = np.maximum(raw.astype(np.float64) - overhead, 0.0)
    return pd.DataFrame(
        {
            "ticks": np.where(has_probe & ~unphysical, probe, np.nan),
            "outer_ticks": runs["outer_ticks"].astype(np.int64),
            "wall_ns": runs["wall_ns"],
            "utime_ns": runs["utime_ns"],
            "stime_ns": runs["stime_ns"],
            "maxrss_kb": runs["maxrss_kb"].astype(np.int32),
            "minflt": runs["minflt"].astype(np.int32),
            "majflt": runs["majflt"].astype(np.int32),
            "nvcsw": runs["nvcsw"].astype(np.int32),
            "nivcsw": runs["nivcsw"].astype(np.int32),
            "cycles": np.where(has_counters, runs["cycles"].astype(np.float64), np.nan),
            "instructions": np.where(has_counters, runs["instructions"].astype(np.float64), np.nan),
            "exit_code": runs["exit_code"],
            "signal": runs["signal"],
            "status": pd.Categorical.from_codes(status, STATUS_NAMES),
            "child_errno": runs["child_errno"],
        }
    )


def describe_errno(code: int) -> str:
    """'EACCES (Permission denied)' for an errno the child reported."""
    return f"{errno.errorcode.get(code, str(code))} ({os.strerror(code)})"
