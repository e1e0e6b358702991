"""instructions-exact: the instructions each side's program executes, counted by Valgrind once
per setup and side, in that setup's environment. A count is blind to layout (the same
instructions run wherever they are placed) and repeats to the instruction, so it needs no runs
beyond one. Where the program marks the probe's region (perflab_probe.h built where valgrind's
headers are, which toggles callgrind's collection around it), callgrind counts the region
alone; else cachegrind (--cache-sim=no) counts the whole program, loader included, and the
environment's size moves that count by a few instructions, which the setups' spread shows.
Valgrind comes from the system (apt install valgrind)."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from perflab.errors import PerflabError
from perflab.plan.metrics import VALGRIND, unavailable
from perflab.system import supervisor

SLOWER = 100  # cachegrind without its cache model runs a program some 10-50x slower
LEAST_S = 60.0  # the least a count may take before it is killed
LINK_NAME = 200  # a path this much longer: how far the loader's start-up moves a count
_SUMMARY = re.compile(rb"^summary:\s+(\d+)\s*$", re.M)
# valgrind.h's client request on x86-64 (four rotations of rdi, then xchg rbx,rbx): a program
# without it cannot toggle callgrind's collection, and is counted whole at once
CLIENT_REQUEST = bytes.fromhex("48c1c70348c1c70d48c1c73d48c1c7334887db")
MOST_SCANNED = 256 << 20  # a program file larger than this is counted whole, unscanned
REGION, PROGRAM = "the probe's region", "the whole program"


class Counted(NamedTuple):
    """A count, and what it counted: REGION or PROGRAM."""

    instructions: int
    scope: str


def count(
    argv: Sequence[str], env: Mapping[str, str], timeout: float | None, moved: bool = False
) -> Counted:
    """The instructions argv executes with exactly env, under valgrind, in a supervisor's
    private directory: its probe's regions where it marks them (callgrind), else the whole
    program (cachegrind); killed past SLOWER times the runs' timeout (LEAST_S at least). With
    `moved`, the program is run through a link of a long name in that directory: the loader's
    work on a path of another length, which start-up alone varies. One line when valgrind fails
    or the program does not exit 0 under it."""
    if _marks_regions(argv[0]):
        found = _valgrind(argv, env, timeout, moved, "callgrind", ["--collect-atstart=no"])
        if found:  # none collected: its client requests were not the probe's toggles
            return Counted(found, REGION)
    return Counted(_valgrind(argv, env, timeout, moved, "cachegrind", ["--cache-sim=no"]), PROGRAM)


def _marks_regions(program: str) -> bool:
    """Whether the program's file holds a valgrind client request (the probe's toggles)."""
    import mmap
    import stat

    path = shutil.which(program) or program
    try:  # O_NONBLOCK: a FIFO put where the program was does not hold the open
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with open(fd, "rb", buffering=0) as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode) or not 0 < st.st_size <= MOST_SCANNED:
                return False
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                return m.find(CLIENT_REQUEST) >= 0
    except (OSError, ValueError):
        return False


def _valgrind(argv: Sequence[str], env: Mapping[str, str], timeout: float | None, moved: bool,
              tool: str, options: list[str]) -> int:  # fmt: skip
    """The instructions valgrind's `tool` collected of argv (its summary line)."""
    path = shutil.which(VALGRIND)
    if path is None:
        raise PerflabError(f"--metric instructions-exact: {unavailable('instructions-exact')}")
    limit = max(LEAST_S, SLOWER * (timeout or 10.0))
    with supervisor.Supervisor(tmp=True) as under:
        assert under.tmpdir is not None
        out, log = under.tmpdir / f"{tool}.out", under.tmpdir / "valgrind.log"
        if moved:
            link = under.tmpdir / ("p" * LINK_NAME)
            link.symlink_to(os.path.abspath(shutil.which(argv[0]) or argv[0]))
            argv = [str(link), *argv[1:]]
        child = under.start(
            [path, f"--tool={tool}", *options, f"--{tool}-out-file={out}", f"--log-file={log}",
             *argv],
            env, fds=(None, None, None),
        )  # fmt: skip
        if not child.ended(limit):
            child.kill_group()
            raise PerflabError(
                f"--metric instructions-exact: {argv[0]} did not end within {limit:g} s under "
                "valgrind: it and what it started were killed"
            )
        code = child.wait()
        found = _SUMMARY.search(_read(out))
        if code != 0 or found is None:
            said = _last_line(_read(log))
            raise PerflabError(
                f"--metric instructions-exact: {argv[0]} under valgrind "
                f"{supervisor.ending(code)}{': ' + said if said else ''}"
            )
        return int(found.group(1))


def _read(path: os.PathLike[str]) -> bytes:
    """A file valgrind wrote in the private directory (empty when it wrote none)."""
    try:
        with open(path, "rb") as f:
            return f.read(1 << 20)
    except OSError:
        return b""


def _last_line(log: bytes) -> str:
    """Valgrind's last words, without its ==pid== prefix, printable."""
    lines = [re.sub(r"^==\d+==\s?", "", ln) for ln in log.decode(errors="replace").splitlines()]
    lines = [ln for ln in lines if ln.strip()]
    text = lines[-1] if lines else ""
    return "".join(c if c.isprintable() else "?" for c in text)[:200]
