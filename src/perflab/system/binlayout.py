"""Where code lands in a linked program: symbol addresses from nm, loops from objdump.

What the link-order experiment explains its timings with: each hot function's and loop's
address and its alignment (mod 16/32/64), cached beside the program (named by its content).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING

from perflab.core import files
from perflab.core.lazy import pd
from perflab.errors import PerflabError
from perflab.system import compiler

if TYPE_CHECKING:
    from perflab.system import supervisor

MODULI = (16, 32, 64)


def _binutils(argv: list[str]) -> supervisor.Finished:
    """A binutils command under the build timeout and a supervisor of its own, as builds run
    (a binary another user made can keep nm or objdump busy for ever); missing is one line
    saying what to install."""
    try:
        return compiler.bounded(argv)
    except FileNotFoundError:
        raise PerflabError(f"{argv[0]} not found: install binutils") from None


def nm_fields(path: str | os.PathLike[str], *args: str) -> list[list[str]]:
    """`nm` lines as fields (no shell)."""
    done = _binutils(["nm", *args, str(path)])
    if done.returncode != 0:
        raise PerflabError(f"nm {path}: {done.stderr.strip().splitlines()[0]}")
    return [line.split() for line in done.stdout.splitlines()]


def disassembly(path: str | os.PathLike[str], start: int, stop: int, raw: bool = False) -> str:
    """objdump -d of [start, stop) of a binary (with the instructions' bytes when raw)."""
    flags = [] if raw else ["--no-show-raw-insn"]
    argv = ["objdump", "-d", *flags, f"--start-address={start}", f"--stop-address={stop}"]
    return _binutils([*argv, str(path)]).stdout


def functions(objects: Sequence[compiler.Object]) -> tuple[str, ...]:
    """Every function the objects define (nm types T and t), in link-line order."""
    names: list[str] = []
    for o in objects:
        names += [f[-1] for f in nm_fields(o.path, "--defined-only") if f[-2] in "Tt"]
    return tuple(dict.fromkeys(names))


_BRANCH = re.compile(r"^\s*([0-9a-f]+):\s+(j\w+|loop\w*)\s+([0-9a-f]+)\s")
_INSN = re.compile(r"^\s*([0-9a-f]+):")


def loop_spans(
    path: str | os.PathLike[str], spans: dict[str, tuple[int, int]]
) -> dict[str, tuple[int, int]]:
    """(head, end) of each function's outermost loop: the lowest target of a backward jump
    inside it, and the address after the last such jump (objdump, one call per program)."""
    if not spans:
        return {}
    lo = min(s for s, _ in spans.values())
    hi = max(e for _, e in spans.values())
    addrs, back = [], []
    for line in disassembly(path, lo, hi).splitlines():
        if m := _INSN.match(line):
            addrs.append(int(m.group(1), 16))
        if (m := _BRANCH.match(line)) and int(m.group(3), 16) < int(m.group(1), 16):
            back.append((int(m.group(1), 16), int(m.group(3), 16)))
    addrs.sort()
    out = {}
    for name, (start, end) in spans.items():
        mine = [(a, t) for a, t in back if start <= t <= a < end]
        if mine:
            last = max(a for a, _ in mine)
            after = next((x for x in addrs if x > last), end)
            out[name] = (min(t for _, t in mine), after)
    return out


def layout(program: compiler.Program, symbols: Sequence[str]) -> pd.DataFrame:
    """Address, size and loop of each symbol in one program, and their alignments.

    Cached beside the program: its name is its content's hash, so the layout never changes.
    """
    tag = hashlib.sha256("\0".join(symbols).encode()).hexdigest()[:12]
    cached = program.path.with_name(f"{program.path.name}.layout-{tag}.json")
    with contextlib.suppress(OSError, ValueError, PerflabError):  # absent, or not ours: again
        return pd.DataFrame(json.loads(files.read_private(cached)))
    df = _locate(program, symbols)
    files.atomic(cached, lambda t: t.write_text(json.dumps(records(df))))
    return df


def _locate(program: compiler.Program, symbols: Sequence[str]) -> pd.DataFrame:
    """layout() without the cache: nm for the symbols, objdump for their loops."""
    found: dict[str, tuple[int, int]] = {}
    for f in nm_fields(program.path, "-S", "--defined-only"):
        if len(f) == 4 and f[3] in symbols and f[3] not in found:
            found[f[3]] = (int(f[0], 16), int(f[1], 16))
    missing = [s for s in symbols if s not in found]
    if missing:
        raise PerflabError(f"{program.path}: no symbol {', '.join(missing)} (see --symbol)")
    spans = {s: (a, a + n) for s, (a, n) in found.items()}
    loops = loop_spans(program.path, spans)
    rows = []
    for s in symbols:
        addr, size = found[s]
        head, end = loops.get(s, (-1, -1))
        row = {"symbol": s, "address": addr, "size": size, "loop_head": head, "loop_end": end}
        for m in MODULI:
            row[f"mod{m}"] = addr % m
            row[f"loop_mod{m}"] = head % m if head >= 0 else -1
        for m in (32, 64):
            row[f"loop_lines{m}"] = (end - 1) // m - head // m + 1 if head >= 0 else -1
        rows.append(row)
    return pd.DataFrame(rows)


def records(df: pd.DataFrame) -> list[dict]:
    """A frame as plain-Python records (JSON metadata)."""
    return [{k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()}
            for r in df.to_dict(orient="records")]  # fmt: skip


PT_INTERP = 3
SCRIPT_DEPTH = 4  # the kernel follows at most this many #! interpreters too


def preloads(path: str | os.PathLike[str], depth: int = SCRIPT_DEPTH) -> bool:
    """Whether the program starts through a dynamic loader, the only thing that honours
    LD_PRELOAD: an ELF with a PT_INTERP header (static and static-pie ones have none), or a
    script whose interpreter preloads. What is neither is not ours to judge: exec will say."""
    with open(path, "rb") as f:
        head = f.read(256)
        if head.startswith(b"#!"):
            words = head[2:].split(b"\n", 1)[0].split()
            return depth > 0 and bool(words) and preloads(os.fsdecode(words[0]), depth - 1)
        if head[:4] != b"\x7fELF" or len(head) < 64:
            return True
        end, wide = "<" if head[5] == 1 else ">", head[4] == 2  # EI_DATA, EI_CLASS
        (phoff,) = struct.unpack_from(end + ("Q" if wide else "I"), head, 0x20 if wide else 0x1C)
        size, count = struct.unpack_from(end + "HH", head, 0x36 if wide else 0x2A)
        f.seek(phoff)
        table = f.read(size * count)
    types = [struct.unpack_from(end + "I", table, i * size)[0] for i in range(len(table) // size)]
    return PT_INTERP in types
