"""Where env-size windows should fall: the loop's stack slots meet its statics modulo 4096.

With ASLR off the kernel lays the exec strings (the path, argv, the environment) at the top
of the stack and aligns what follows to 16 bytes (fs/exec.c, create_elf_tables), so one
more byte of environment moves main's frame down by 16 bytes every 16 sizes. Once per
4096 bytes a stack slot the -O0 loop touches then sits at the same address modulo 4096 as
a static counter, and a CPU that checks store/load dependences on the low 12 address bits
(4K aliasing) holds the load behind the store. This module finds the loop's slots and
statics in its binary (objdump), where main's frame lands at each size (a twin of the loop
reports it), and from both the sizes where the pairs alias.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from perflab.core import files
from perflab.core.lazy import pd
from perflab.errors import PerflabError
from perflab.lab.env_size import excess
from perflab.lab.env_size.plan import BUILTIN as BUILTIN
from perflab.lab.env_size.plan import DEFAULT_LAYOUT, LoopLayout
from perflab.running import spawn
from perflab.running.childruns import value_column
from perflab.system import binlayout, compiler

PAGE = 4096  # the low 12 address bits a store/load check compares
STACK_STEP = 16  # the kernel's alignment of the initial stack pointer
MIN_EXCESS = excess.MIN_EXCESS
_INSN = re.compile(r"^\s*([0-9a-f]+):\s+(\S+)\s*(.*)$")
_STACK = re.compile(r"^(-?0x[0-9a-f]+|-?\d+)?\(%[re]bp\)$")
_STATIC = re.compile(r"#\s*([0-9a-f]+)\s+<([^>]+)>")
_REPORT = re.compile(r"(\w+)=(0x[0-9a-f]+|\d+)")
_READ_ONLY = {"cmp", "test", "push", "bt"}


@dataclass(frozen=True)
class Access:
    """One memory operand of the loop: a stack slot (offset from the frame) or a static."""

    name: str
    where: str  # "stack" or "static"
    offset: int  # from the frame pointer (stack) or the absolute address (static)
    size: int
    load: bool
    store: bool


def _operands(text: str) -> list[str]:
    """AT&T operands split on the commas outside parentheses."""
    out, depth, cur = [], 0, ""
    for ch in text.split("#")[0].strip():
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    return [o.strip() for o in [*out, cur] if o.strip()]


def _size(mnemonic: str, operands: list[str]) -> int:
    """Bytes accessed: the mnemonic's suffix when it has one, else the register's width."""
    regs = [o for o in operands if o.startswith("%")]
    if regs:
        r = regs[0][1:]
        if re.fullmatch(r"r\d+d|e\w\w", r):
            return 4
        if re.fullmatch(r"r\d+w|[a-d]x|[sd]i|[sb]p", r):
            return 2
        if re.fullmatch(r"r\d+b|[a-d][lh]|[sd]il|[sb]pl", r):
            return 1
        return 8
    return {"b": 1, "w": 2, "l": 4, "q": 8}.get(mnemonic[-1], 4)


def parse_accesses(disassembly: str) -> list[Access]:
    """The stack and static memory operands of objdump -d lines, merged per location."""
    found: dict[tuple[str, int], Access] = {}
    for line in disassembly.splitlines():
        m = _INSN.match(line)
        if not m:
            continue
        mnemonic, rest = m.group(2), m.group(3)
        if mnemonic.startswith(("lea", "nop", "j", "call")):
            continue
        ops = _operands(rest)
        for pos, op in enumerate(ops):
            dest = pos == len(ops) - 1 and len(ops) > 1
            base = mnemonic.rstrip("bwlq")
            load = not (dest and base.startswith("mov")) or base in _READ_ONLY
            store = dest and base not in _READ_ONLY
            size = _size(mnemonic, ops)
            if s := _STACK.match(op):
                key = ("stack", int(s.group(1) or "0", 0))
                name = f"frame{key[1]:+#x}"
            elif op.endswith("(%rip)") and (g := _STATIC.search(rest)):
                key, name = ("static", int(g.group(1), 16)), g.group(2)
            else:
                continue
            old = found.get(key)
            found[key] = Access(name, key[0], key[1], max(size, old.size if old else 0),
                                load or bool(old and old.load),
                                store or bool(old and old.store))  # fmt: skip
    return sorted(found.values(), key=lambda a: (a.where, a.offset))


def loop_accesses(path: str | Path, function: str = "main") -> list[Access]:
    """The memory operands inside `function`'s outermost loop in a linked binary.

    nm and objdump cost a sweep's start-up 30 ms, so their reading is cached under the sha256
    of the binary's bytes and of the code that reads them (this module and binlayout.py).
    """
    h = hashlib.sha256()
    for f in (Path(path), Path(__file__), Path(binlayout.__file__)):
        h.update(f.read_bytes() + b"\0")
    h.update(function.encode())
    cached = compiler.cache_dir() / f"{Path(path).name}.loop-{h.hexdigest()[:16]}.json"
    with contextlib.suppress(OSError, ValueError, TypeError, PerflabError):
        return [Access(**a) for a in json.loads(files.read_private(cached))]
    found = _read_accesses(path, function)
    files.atomic(cached, lambda tmp: tmp.write_text(json.dumps([asdict(a) for a in found])))
    return found


def _read_accesses(path: str | Path, function: str) -> list[Access]:
    """loop_accesses() without the cache: nm for the function, objdump for its loop."""
    span = None
    for f in binlayout.nm_fields(path, "-S", "--defined-only"):
        if len(f) == 4 and f[3] == function:
            span = (int(f[0], 16), int(f[0], 16) + int(f[1], 16))
    if span is None:
        raise PerflabError(f"{path}: no symbol {function} (a stripped binary cannot be read)")
    loop = binlayout.loop_spans(path, {function: span}).get(function)
    if loop is None:
        return []
    return parse_accesses(binlayout.disassembly(path, *loop))


def exec_strings(argv: Sequence[str], env: Sequence[str]) -> int:
    """Bytes the kernel copies to the stack top at execve: the path, argv, env, NULs."""
    texts = [argv[0], *argv, *env]
    return sum(len(t.encode()) + 1 for t in texts)


def env_strings(argv: Sequence[str], base_env: Mapping[str, str], var: str, size: int) -> int:
    """exec_strings of argv with base_env plus VAR=<size characters>, as a sweep runs it."""
    return exec_strings(argv, [*spawn.env_list(base_env), f"{var}={'a' * size}"])


@dataclass(frozen=True)
class StackModel:
    """frame(L) = floor16(top - L) - depth: where main's frame lands for L bytes of strings.

    top is where the strings end (the stack's top minus the 8-byte end marker), read from
    AT_EXECFN; depth is what the kernel's tables and the libc's startup take below them.
    """

    top: int
    depth: int

    def frame(self, strings: np.ndarray | int) -> np.ndarray:
        """main's frame address for each strings length."""
        s = np.asarray(strings, dtype=np.int64)
        return (np.int64(self.top) - s) // STACK_STEP * STACK_STEP - self.depth

    @classmethod
    def from_report(cls, report: Mapping[str, int], path: str) -> StackModel:
        """The model that one run's own report fixes: top from execfn, depth from the frame."""
        top = report["execfn"] + len(path.encode()) + 1
        aligned = (top - report["strings"]) // STACK_STEP * STACK_STEP
        return cls(top=top, depth=aligned - report["frame"])


def build_loop(
    workload: str = "mytkowicz",
    opt: str = compiler.DEFAULT_OPT,
    layout: LoopLayout = DEFAULT_LAYOUT,
) -> compiler.Workload:
    """A built-in loop by name (see BUILTIN) in a layout, compiled and cached."""
    return compiler.build(compiler.WORKLOADS / BUILTIN[workload][0], opt, extra=layout.flags())


def twin(
    opt: str = compiler.DEFAULT_OPT,
    workload: str = "mytkowicz",
    layout: LoopLayout = DEFAULT_LAYOUT,
) -> compiler.Workload:
    """A loop's twin (workloads/stack_twin.c), built with the loop's source inlined into its
    own so that the build cache's key follows the loop's source too, in the loop's layout."""
    source, counter = BUILTIN[workload]
    text = (compiler.WORKLOADS / "stack_twin.c").read_text()
    loop = (compiler.WORKLOADS / source).read_text()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{Path(source).stem}_twin.c"
        path.write_text(
            f"#define PERFLAB_TWIN_G {counter}\n" + text.replace('#include "mytkowicz.c"\n', loop)
        )
        return compiler.build(path, opt, extra=layout.flags())


def reports(
    sizes: Sequence[int],
    var: str = "A",
    base_env: Mapping[str, str] | None = None,
    opt: str = compiler.DEFAULT_OPT,
    workload: str = "mytkowicz",
    layout: LoopLayout = DEFAULT_LAYOUT,
) -> tuple[str, list[dict[str, int]]]:
    """Run a loop's twin once per env size with ASLR off: its path, and each run's report with
    its env_size and strings (exec bytes), frame, g, inc, i, j, k, environ, execfn, envc."""
    path = str(twin(opt, workload, layout).path)
    base_env = dict(base_env or {})
    with tempfile.TemporaryFile() as out:
        options = spawn.SpawnOptions(aslr="off", stdout=out.fileno(), timeout=10.0)
        runs = spawn.run_env_sizes([path], np.asarray(sizes), var, base_env, options)
        out.seek(0)
        lines = out.read().decode().splitlines()
    if len(lines) != len(sizes) or np.any(runs["status"] != 0):
        raise PerflabError(f"stack probe: {len(lines)} reports from {len(sizes)} runs")
    return path, [
        {"env_size": int(s), "strings": env_strings([path], base_env, var, int(s))}
        | {k: int(v, 0) for k, v in _REPORT.findall(line)}
        for s, line in zip(sizes, lines, strict=True)
    ]


def probe(
    sizes: Sequence[int],
    var: str = "A",
    base_env: Mapping[str, str] | None = None,
    opt: str = compiler.DEFAULT_OPT,
    workload: str = "mytkowicz",
    layout: LoopLayout = DEFAULT_LAYOUT,
) -> pd.DataFrame:
    """reports() as a frame, a row per run, the twin's path in attrs["path"]."""
    path, rows = reports(sizes, var, base_env, opt, workload, layout)
    df = pd.DataFrame(rows)
    df.attrs["path"] = path
    return df


@dataclass(frozen=True)
class Layout:
    """What a prediction needs, recorded with a sweep: the loop's accesses and stack model."""

    accesses: tuple[Access, ...]
    model: StackModel
    base_strings: int  # exec strings at env size 0 for the measured program

    def meta(self) -> dict:
        """As plain JSON for the result's metadata."""
        return {
            "accesses": [asdict(a) for a in self.accesses],
            "top": self.model.top,
            "depth": self.model.depth,
            "base_strings": self.base_strings,
        }

    @classmethod
    def from_meta(cls, meta: Mapping) -> Layout:
        """Back from metadata, as recorded by meta()."""
        accesses = tuple(Access(**a) for a in meta["accesses"])
        return cls(accesses, StackModel(meta["top"], meta["depth"]), meta["base_strings"])

    def frames(self, sizes: np.ndarray) -> np.ndarray:
        """main's frame at each env size."""
        return self.model.frame(self.base_strings + np.asarray(sizes, dtype=np.int64))


_twin_rows: dict[tuple, tuple[str, list[dict[str, int]]]] = {}


def loop_layout(
    program: str,
    var: str = "A",
    base_env: Mapping[str, str] | None = None,
    opt: str = "0",
    workload: str = "mytkowicz",
    layout: LoopLayout = DEFAULT_LAYOUT,
) -> Layout:
    """A built-in loop's stack layout: its binary's accesses, the frame from its twin's report
    (the twin built in the loop's `layout`; its report at size 0 is the same at every run with
    ASLR off, so a process asks for it once per binary and environment)."""
    key = (program, var, tuple(sorted((base_env or {}).items())), opt, workload, layout)
    if key not in _twin_rows:
        _twin_rows[key] = reports([0], var, base_env, opt, workload, layout)
    twin_path, (row,) = _twin_rows[key]
    model = StackModel.from_report(row, twin_path)
    base = env_strings([program], dict(base_env or {}), var, 0)
    names = {int(row[v] - row["frame"]): v for v in ("g", "inc")}
    found = loop_accesses(program)
    if set(names) != {a.offset for a in found if a.where == "stack"}:
        names = {}  # the twin laid its frame out otherwise: no names to trust
    accesses = tuple(
        replace(a, name=names.get(a.offset, a.name)) if a.where == "stack" else a for a in found
    )
    return Layout(accesses, model, base)


def _overlap(a: np.ndarray, size_a: int, b: int, size_b: int) -> np.ndarray:
    """Whether [a, a+size_a) and [b, b+size_b) share a byte modulo PAGE."""
    d = (np.asarray(a) - b) % PAGE
    return (d < size_b) | (d > PAGE - size_a)


def pairs(accesses: Sequence[Access]) -> list[tuple[Access, Access]]:
    """(stack slot, static) pairs a store/load check could confuse: one of them is stored."""
    stack = [a for a in accesses if a.where == "stack"]
    static = [a for a in accesses if a.where == "static"]
    return [(s, t) for s in stack for t in static if (s.store and t.load) or (t.store and s.load)]


PREDICTED = ["start", "end", "width", "pair", "stack_address", "static_address"]


def predict(layout: Layout, sizes: np.ndarray) -> pd.DataFrame:
    """Windows 4K aliasing predicts over these sizes: start, end, width, pair, addresses.

    A window is a run of consecutive sizes (on the sizes' grid) where at least one stack
    slot shares a byte with a static modulo 4096; `pair` names every such pair in it.
    """
    return pd.DataFrame(predicted_rows(layout, sizes), columns=PREDICTED)


def predicted_rows(layout: Layout, sizes: np.ndarray) -> list[dict]:
    """predict's windows as plain rows: a sweep reads them before it loads pandas."""
    sizes = np.unique(np.asarray(sizes, dtype=np.int64))
    if sizes.size == 0:
        return []
    frames = layout.frames(sizes)
    hits: dict[int, list[str]] = {}
    addr: dict[int, tuple[int, int]] = {}
    for s, t in pairs(layout.accesses):
        slot = frames + s.offset
        for i in np.flatnonzero(_overlap(slot, s.size, t.offset, t.size)):
            hits.setdefault(int(i), []).append(f"&{s.name} (stack) ≡ &{t.name} (static) mod {PAGE}")
            addr.setdefault(int(i), (int(slot[i]), t.offset))
    for s in (a for a in layout.accesses if a.where == "stack" and a.size > 1):
        slot = frames + s.offset
        for i in np.flatnonzero(slot % PAGE > PAGE - s.size):
            hits.setdefault(int(i), []).append(
                f"&{s.name} (stack, {s.size} bytes) straddles a page boundary"
            )
            addr.setdefault(int(i), (int(slot[i]), -1))
    idx = np.array(sorted(hits), dtype=np.int64)
    step = int(np.min(np.diff(sizes))) if sizes.size > 1 else 1
    rows = []
    for group in np.split(idx, np.flatnonzero(np.diff(sizes[idx]) > step) + 1) if idx.size else []:
        first = int(group[0])
        names = list(dict.fromkeys(p for i in group for p in hits[int(i)]))
        rows.append({
            "start": int(sizes[first]),
            "end": int(sizes[group[-1]]),
            "width": int(sizes[group[-1]] - sizes[first]) + step,
            "pair": ", ".join(names),
            "stack_address": hex(addr[first][0]),
            "static_address": hex(addr[first][1]) if addr[first][1] >= 0 else "",
        })  # fmt: skip
    return rows


def verdicts(
    summary: pd.DataFrame,
    predicted: pd.DataFrame,
    measured: pd.DataFrame,
    column: str = "median",
    runs: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """A verdict for every window, predicted or measured, with its excess and an interval.

    'predicted and seen': a measured window overlaps the predicted one; 'predicted, not
    seen': none does (this CPU does not pay for that aliasing in this loop, the excess
    says how little); 'seen, not predicted': another mechanism. The baseline is the median
    of the per-size values outside every window. `over` names what the interval covers:
    with the sweep's `runs` (in run order) 95 % over time blocks of the sweep, or where the
    window's runs have two modes (`modes`) the range from one to the other, which a repeated
    sweep may read; from a per-size summary alone 95 % over the window's sizes.
    """
    s = summary.dropna(subset=[column])
    sizes, values = s["env_size"].to_numpy(), s[column].to_numpy(dtype=float)
    spans: list[tuple[int, int, str, Any, Any]] = []
    matched: set[int] = set()
    for p in predicted.itertuples():
        seen = [m for m in measured.itertuples() if m.start <= p.end and m.end >= p.start]
        matched.update(m.Index for m in seen)
        verdict = "predicted and seen" if seen else "predicted, not seen"
        spans.append((p.start, p.end, verdict, p.pair, seen[0] if seen else None))
    for m in measured.itertuples():
        if m.Index not in matched:
            spans.append((m.start, m.end, "seen, not predicted",
                          "another mechanism: no aliasing pair", m))  # fmt: skip
    inside = np.zeros(sizes.size, bool)
    for w in [*predicted.itertuples(), *measured.itertuples()]:
        inside |= (sizes >= w.start) & (sizes <= w.end)
    baseline = float(np.median(values[~inside])) if (~inside).any() else np.nan
    masks = [(sizes >= start) & (sizes <= end) for start, end, *_ in spans]
    timed = None
    if runs is not None and column == "median" and spans and sizes.size:
        timed = excess.SizeBlocks(runs, value_column(runs), sizes)
        bounds = timed.over_time(masks, ~inside, np.random.default_rng(0))
    rng = np.random.default_rng(0)
    rows = []
    for i, (start, end, verdict, pair, hit) in enumerate(spans):
        ex, lo, hi = excess.over_sizes(values[masks[i]], baseline, rng)
        over, modes = "95 % over its sizes", []
        if timed is not None:
            (lo, hi), over = bounds[i], f"95 % over {excess.BLOCKS} time blocks of the sweep"
            modes = timed.modes(masks[i], ~inside, baseline)
        if modes:
            lo = min(lo, *(m.level for m in modes))
            hi = max(hi, *(m.level for m in modes))
            over = "unstable: from one mode to the other"
        rows.append({
            "start": int(start), "end": int(end), "verdict": verdict, "excess": ex,
            "ci_low": lo, "ci_high": hi, "over": over,
            "modes": ", ".join(m.text() for m in modes), "pair": pair,
            "seen_start": hit.start if hit is not None else np.nan,
            "seen_end": hit.end if hit is not None else np.nan,
        })  # fmt: skip
    cols = ["start", "end", "verdict", "excess", "ci_low", "ci_high", "over", "modes", "pair",
            "seen_start", "seen_end"]  # fmt: skip
    out = pd.DataFrame(rows, columns=cols)
    out.attrs["baseline"] = baseline
    return out


def sweep_meta(
    argv: Sequence[str],
    workload: str | None,
    var: str,
    base_env: Mapping,
    opt: str,
    layout: LoopLayout = DEFAULT_LAYOUT,
) -> dict:
    """What a sweep with ASLR off records so its windows can be predicted later, anywhere:
    the stack layout for the built-in loop; for another program the stack top only."""
    try:
        if workload:
            found = loop_layout(argv[0], var, base_env, opt, workload, layout)
            return {"stack_layout": found.meta()}
        twin_path, (row,) = reports([0], var, base_env, opt)
        model = StackModel.from_report(row, twin_path)
        return {"stack_top": model.top, "base_strings": env_strings(argv, dict(base_env), var, 0)}
    except (PerflabError, OSError) as exc:
        return {"stack_layout_error": str(exc)}


def predicted_from(meta: Mapping, sizes: np.ndarray) -> pd.DataFrame | None:
    """The predicted windows of a recorded sweep, or None when it recorded no layout."""
    if meta.get("aslr") != "off" or "stack_layout" not in meta:
        return None
    return predict(Layout.from_meta(meta["stack_layout"]), sizes)


def stack_shift(meta: Mapping, sizes: np.ndarray) -> np.ndarray | None:
    """How far below its position at the smallest size the stack starts, per size (bytes)."""
    if "stack_top" not in meta or meta.get("aslr") != "off":
        return None
    frames = StackModel(int(meta["stack_top"]), 0).frame(
        int(meta["base_strings"]) + np.asarray(sizes, dtype=np.int64)
    )
    return frames[0] - frames


def explain_meta(argv: Sequence[str], plan: Any, base_env: Mapping) -> dict:
    """Everything a sweep records to explain its windows: the layout with ASLR off (for
    EnvSizePlan `plan`), and whether this CPU pays for 4K aliasing at all."""
    from perflab.lab.env_size import aliasing

    meta: dict = {}
    pairs: list[str] = []
    if plan.aslr == "off":
        workload = None if plan.program else plan.workload
        loop = plan.loop_layout()
        meta = sweep_meta(argv, workload, plan.var, base_env, plan.opt, loop)
        if "stack_layout" in meta:
            layout = Layout.from_meta(meta["stack_layout"])
            pairs = [row["pair"] for row in predicted_rows(layout, plan.sizes())]
    cpu = plan.cpus[0] if plan.cpus else None
    return meta | {"alias_check": aliasing.check_all(pairs, cpu=cpu)}


def _ranges(df: pd.DataFrame) -> str:
    return ", ".join(f"{w.start}-{w.end}" for w in df.itertuples())


def _cpu_lines(meta: Mapping) -> tuple[list[str], bool | str | None]:
    """The CPU's sentences and whether it pays: True, False, "unstable", or None without a
    check. The swept binary timed at its predicted windows decides (loop_layouts.check); the
    in-process kernels of the paper's loop shape, where there are no such timings, or beside
    them as a proxy."""
    from perflab.lab.env_size import aliasing

    checks = [aliasing.AliasCheck(**c) for c in meta.get("alias_check", [])]
    loops = [c for c in checks if c.kernel == "loop"]
    timed = [excess.WindowTiming(**w) for w in meta.get("window_check") or []]
    if timed:
        lines = [
            f"this CPU: the swept binary at {w.start}-{w.end} against its neighbours: "
            f"{w.text()}: {_PAYS[w.verdict]}"
            for w in timed
        ]
        lines += ["in-process proxy: " + c.sentence() for c in loops]
        verdicts = {w.verdict for w in timed}
        if "pays" in verdicts:
            return lines, True
        return lines, False if verdicts == {"does not pay"} else "unstable"
    lines = ["this CPU: " + c.sentence() for c in loops]
    if any(c.shows for c in loops):
        return lines, True
    if any(not c.stable for c in loops):
        return lines, "unstable"
    return lines, False if loops else None


_PAYS = {
    "pays": "this CPU pays for 4K aliasing in this binary",
    "does not pay": "this CPU does not pay for 4K aliasing in this binary",
    "unclear": "unclear: the pairs' interval straddles the least excess a window is found at",
}


def explain(
    meta: Mapping,
    summary: pd.DataFrame,
    measured: pd.DataFrame,
    column: str = "median",
    runs: pd.DataFrame | None = None,
) -> tuple[pd.DataFrame | None, pd.DataFrame, list[str]]:
    """Predicted windows, a verdict for each window, and sentences that say why; with the
    sweep's runs the verdicts' intervals cover time, and say where a window is unstable."""
    sizes = summary["env_size"].to_numpy()
    cpu, pays = _cpu_lines(meta)
    values = summary[column].dropna().to_numpy(dtype=float)
    spread = ""
    if values.size:
        q1, q3 = np.percentile(values, [25, 75]) / np.median(values) - 1
        spread = f"the per-size {column}s span {q1:+.1%}..{q3:+.1%} (IQR) around their median"
    lines = []
    predicted = predicted_from(meta, sizes)
    if meta.get("aslr") != "off":
        lines.append(
            "ASLR moves the stack at every run: no env size can be predicted (--aslr off)."
        )
    elif "stack_layout_error" in meta:
        lines.append(f"no prediction: {meta['stack_layout_error']}")
    elif predicted is None:
        shift = stack_shift(meta, sizes)
        if shift is not None and len(sizes) > 1:
            lines.append(
                f"the stack starts {int(shift.max())} bytes lower at size {int(sizes[-1])} than at "
                f"{int(sizes[0])}, in 16-byte steps: each of your program's stack slots meets each "
                "static once per 4096 sizes, but perflab cannot see your program's frames, so it "
                "cannot say at which sizes (16-wide windows 4096 apart would point at 4K aliasing)."
            )
    elif predicted.empty and not any(
        a["where"] == "stack" for a in meta["stack_layout"]["accesses"]
    ):
        lines.append(
            f"predicted: none: the loop at {meta.get('opt', '')} touches no stack slot (its "
            "variables stay in registers), so the env size has nothing to move against the statics."
        )
    elif predicted.empty:
        lines.append("predicted: none in this range of sizes (4K aliasing recurs every 4096).")
    else:
        causes = [f"{_ranges(g)}: {pair}" for pair, g in predicted.groupby("pair", sort=False)]
        lines.append("predicted: " + "; ".join(causes))
    table = verdicts(summary, predicted if predicted is not None else measured.iloc[:0], measured,
                     runs=runs)  # fmt: skip
    lines += cpu
    seen = table[table["verdict"] == "predicted and seen"] if len(table) else table
    if predicted is not None and len(predicted) and seen.empty:
        why = {
            True: "the check shows this CPU pays for the aliasing, so the sweep's runs hid it "
            "(another task, or a change of speed during the sweep: see its verdicts)"
            if meta.get("window_check")
            else "the check shows this CPU pays for the aliasing on its own, so something "
            "else in the loop hides it",
            False: "this CPU does not hold the loop's loads behind stores that match mod 4096 "
            "(its check agrees)",
            "unstable": "this CPU does not pay for this aliasing in this loop (its check was "
            "unstable, so it cannot say whether the CPU pays elsewhere)",
            None: "this CPU does not pay for this aliasing in this loop (the record has no "
            "alias check to say whether it pays elsewhere)",
        }[pays]
        lines.append(
            f"No window where one was predicted: {why}. {spread[:1].upper() + spread[1:]}. "
            "The effect depends on the CPU: the paper's authors saw 14-30 % on one machine and "
            "2 % on another. For a bias that does not rest on 4K aliasing, try --workload "
            "split (its 8-byte counter straddles a page once per 4096 sizes)."
        )
    for w in table[table["modes"] != ""].itertuples():
        lines.append(
            f"{w.start}-{w.end}: its runs are bimodal ({w.modes} over the baseline): a repeated "
            f"sweep may read either mode, so its median excess (here {w.excess:+.1%}) is unstable, "
            f"and its interval spans both ({w.ci_low:+.1%}..{w.ci_high:+.1%})."
        )
    if seen["pair"].str.contains("≡").any():
        lines.append(
            "A 4K-aliasing window is the stack position where the loop's load from the stack "
            "waits behind its store to a static (or the reverse) because their addresses "
            "match in their low 12 bits."
        )
    if seen["pair"].str.contains("straddles").any():
        lines.append(
            "A page-split window is the stack position where a slot spans two pages: each of "
            "its loads and stores needs both pages (two translations, two cache lines)."
        )
    return predicted, table, lines


def hatch(ax: Any, predicted: pd.DataFrame, lo: float, hi: float, pad: float) -> None:
    """Draw the predicted windows on an env-size axis as hatched bands, labelled once."""
    shown = predicted[(predicted["end"] >= lo) & (predicted["start"] <= hi)]
    for i, w in enumerate(shown.itertuples()):
        label = "predicted from addresses" if i == 0 else None
        ax.axvspan(w.start - pad, w.end + pad, facecolor="none", edgecolor="0.3", hatch="///",
                   lw=0.6, label=label)  # fmt: skip
