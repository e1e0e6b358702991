"""The process limits a run must fit, named before anything is measured: the descriptor the
probe reports on (ulimit -n), and the memory a plan holds (available memory, ulimit -v, -d).

A limit that cannot work otherwise surfaces mid-run as the wrong error: a child whose probe
descriptor is beyond RLIMIT_NOFILE fails its dup2 with EBADF, which reads as the program's
fault, and an address-space limit as a MemoryError or a library that cannot map its code.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import re
import resource
import select
import signal
import sys
from dataclasses import dataclass

from perflab.errors import PerflabError
from perflab.system import compiler

# The libraries a measurement loads: under an address-space limit they are loaded before the
# room left is read, so that what they map counts as held, not as room.
LIBRARIES = ("numpy", "pandas", "pyarrow", "pyarrow.parquet")
UNLIMITED = resource.RLIM_INFINITY


class LimitTooSmall(PerflabError):
    """A process limit no run can work under, whatever was asked: not a usage mistake."""


@functools.cache
def probe_fd() -> int:
    """The descriptor every child's probe reports on, as the probe's header defines it (the C
    core and the workloads are built from that header: one number, read where it is set)."""
    header = compiler.WORKLOADS / "perflab_probe.h"
    found = re.search(r"^#define PERFLAB_PROBE_FD (\d+)$", header.read_text(), re.MULTILINE)
    if found is None:  # pragma: no cover - the header ships with perflab
        raise PerflabError(f"{header}: defines no PERFLAB_PROBE_FD; reinstall perflab")
    return int(found.group(1))


def check_open_files() -> None:
    """Refuse to start children when the probe's descriptor is beyond ulimit -n: every child
    would fail to set it up, each reported as a failed run of the program."""
    need = probe_fd() + 1
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == UNLIMITED or soft >= need:
        return
    how = (
        f"raise it with ulimit -n {need}"
        if hard == UNLIMITED or hard >= need
        else f"the hard limit is {hard} too: raise it (as root) with ulimit -Hn {need}"
    )
    raise LimitTooSmall(
        f"perflab needs {need} open files (the probe's descriptor is {need - 1}); "
        f"ulimit -n is {soft}: {how}"
    )


@dataclass(frozen=True)
class Room:
    """The bytes this process may still take, and the bound that sets it."""

    nbytes: int
    bound: str  # "available memory", "ulimit -v" or "ulimit -d"
    limit: int | None = None  # the ulimit's value in bytes (None: available memory)
    held: int = 0  # what the process holds of that ulimit already


def _status() -> dict[str, int]:
    """This process's VmSize and VmData in bytes (/proc/self/status counts them in kB)."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            name, _, value = line.partition(":")
            if name in ("VmSize", "VmData"):
                out[name] = int(value.split()[0]) * 1024
    return out


def _limited() -> list[tuple[str, int, str]]:
    """The finite address-space and data limits: (ulimit flag, soft limit, /proc field)."""
    found = []
    for res, flag, field in (
        (resource.RLIMIT_AS, "ulimit -v", "VmSize"),
        (resource.RLIMIT_DATA, "ulimit -d", "VmData"),
    ):
        soft, _ = resource.getrlimit(res)
        if soft != UNLIMITED:
            found.append((flag, soft, field))
    return found


def load_libraries() -> dict[str, int]:
    """Under a finite ulimit -v or -d, the address space and data this process holds once a
    measurement's libraries are loaded (VmSize, VmData; none without such a limit); a limit
    too small for them is one line. They load in a forked child: an OpenBLAS that cannot
    allocate its buffers prints and exits the process it loads in."""
    limited = _limited()
    if not limited:
        return {}
    if all(name in sys.modules for name in LIBRARIES):
        return _status()
    return _held_with_libraries(limited[0][0], limited[0][1])


LOAD_S = 30.0  # the libraries load in about a second; near a limit, malloc can crawl for minutes


@functools.cache
def _held_with_libraries(flag: str, soft: int) -> dict[str, int]:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe, then exits
        try:
            os.close(read)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 2)  # OpenBLAS's own complaint: the parent says it in one line
            for name in LIBRARIES:
                importlib.import_module(name)
            os.write(write, json.dumps(_status()).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        ready, _, _ = select.select([f], [], [], LOAD_S)
        said = f.read() if ready else b""
    if not ready:  # glibc retrying an arena on every malloc near the limit: minutes, not a load
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    if not said:
        late = f" within {LOAD_S:g} s" if not ready else ""
        raise LimitTooSmall(
            f"{flag} is {soft // 2**20} MiB: too little for perflab's libraries (numpy, "
            f"pandas, pyarrow) to load{late}; raise it ({flag} unlimited)"
        )
    return dict(json.loads(said))


def memory_room() -> Room:
    """What a plan may still allocate: the memory available now, or less where ulimit -v or
    -d leaves less above what the process holds (its libraries loaded first)."""
    import psutil

    libraries = load_libraries()
    room = Room(int(psutil.virtual_memory().available), "available memory")
    limited = _limited()
    status = _status() if limited else {}
    for flag, soft, field in limited:
        held = max(status.get(field, 0), libraries.get(field, 0))
        if soft - held < room.nbytes:
            room = Room(max(soft - held, 0), flag, soft, held)
    return room


def thread_stack_bytes() -> int:
    """The address space each new thread's stack reserves: glibc's default thread attributes
    (RLIMIT_STACK's soft limit when finite), read from the C library itself."""
    import ctypes

    libc = ctypes.CDLL(None)
    attr = ctypes.create_string_buffer(256)  # a pthread_attr_t is 56 bytes on 64-bit glibc
    size = ctypes.c_size_t()
    if libc.pthread_getattr_default_np(attr) != 0:  # pragma: no cover - glibc >= 2.18 has it
        return 0
    try:
        libc.pthread_attr_getstacksize(attr, ctypes.byref(size))
    finally:
        libc.pthread_attr_destroy(attr)
    return int(size.value)


def check_threads(flag: str, threads: int) -> None:
    """Refuse, under ulimit -v, more threads at once than their stacks alone can fit in
    (pthread_create would fail with EAGAIN, which says nothing of the limit)."""
    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    if limit == UNLIMITED:
        return
    stack = thread_stack_bytes()
    held = max(_status()["VmSize"], load_libraries().get("VmSize", 0))
    room = max(limit - held, 0)
    if threads * stack > room:
        raise PerflabError(
            f"{flag} {threads}: its threads' stacks take {threads * stack // 2**20} MiB of "
            f"address space ({stack // 2**20} MiB each, ulimit -s); ulimit -v leaves "
            f"{room // 2**20} MiB: raise it, or lower ulimit -s"
        )


def threads_failed(exc: PerflabError, threads: int) -> PerflabError:
    """A failure to start threads, the address-space limit named when one is set and the
    failure is the kernel's EAGAIN: each thread's stack and malloc arena take address space."""
    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    if limit == UNLIMITED or "EAGAIN" not in str(exc):
        return exc
    return PerflabError(
        f"{exc}: {threads} threads at once do not fit in ulimit -v {limit // 2**20} MiB (each "
        f"reserves a {thread_stack_bytes() // 2**20} MiB stack, ulimit -s, and may take a "
        "malloc arena): raise it"
    )


def out_of_memory(exc: BaseException) -> bool:
    """Whether an error is memory running out: a MemoryError, or a library whose code could
    not be mapped (what an address-space limit does to an import)."""
    seen: BaseException | None = exc
    while seen is not None:  # pandas re-raises numpy's failed import as its own
        text = str(seen)
        if isinstance(seen, MemoryError) or (
            isinstance(seen, ImportError)
            and ("failed to map segment" in text or "cannot allocate memory" in text.lower())
        ):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def out_of_memory_text() -> str:
    """The one line for memory that ran out: which bound it met, and what to do."""
    for flag, soft, _ in _limited():
        return (
            f"out of memory: {flag} allows {soft // 2**20} MiB of "
            f"{'address space' if flag.endswith('-v') else 'data'}; raise it, or ask for less"
        )
    return "out of memory: this machine has no more to give; ask for less, or free some"
