"""Did the CPU count the aliasing? Its address-alias event inside and outside predicted windows.

Each CPU names the event otherwise (Linux perf's tables, tools/perf/pmu-events/arch/x86/):
Intel counts loads held by a 4K false dependence (ld_blocks_partial.address_alias through
Ice/Tiger Lake, ld_blocks.address_alias from Golden Cove on); AMD Zen 2-4 count every
store-to-load interlock that could not forward (ls_bad_status2.stli_other), of which 4K
aliasing is one cause; Zen 1's tables list no such event. The counts are the child's whole
run (user mode, as `perf stat` counts a command), per loop iteration.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from perflab.core import bindings
from perflab.core.lazy import pd
from perflab.errors import Stopped
from perflab.lab.env_size import windows as windows_mod
from perflab.running import spawn
from perflab.system import counters

ITERATIONS = 65536  # the built-in loops' trip count (workloads/mytkowicz.c, stacksplit.c)
REPEAT = 5  # counted runs per size
SIZES_PER_SIDE = 4  # sizes counted inside a window, and as many outside it
COUNTED = 0.1  # alias events per iteration inside minus outside that say "the CPU counted it"
NOTHING_TO_COUNT = "; no predicted window to count in (needs --aslr off and a built-in loop)"


@dataclass(frozen=True)
class AliasEvent:
    """A model-specific event: its perf name, raw config (umask << 8 | event) and source;
    kind is perf_event_attr.type (raw for every CPU event here)."""

    name: str
    config: int
    source: str
    kind: int = bindings.PERF_TYPE_RAW


_INTEL_PARTIAL = AliasEvent("ld_blocks_partial.address_alias", 0x0107, "")
_INTEL_BLOCKS = AliasEvent("ld_blocks.address_alias", 0x0403, "")
_AMD_STLI = AliasEvent("ls_bad_status2.stli_other", 0x0224, "")

# Intel family 6 model -> (event, perf's table for it), as mapfile.csv maps them.
_INTEL: dict[int, tuple[AliasEvent, str]] = {
    **{m: (_INTEL_PARTIAL, "sandybridge") for m in (0x2A,)},
    **{m: (_INTEL_PARTIAL, "jaketown") for m in (0x2D,)},
    **{m: (_INTEL_PARTIAL, "ivybridge") for m in (0x3A,)},
    **{m: (_INTEL_PARTIAL, "ivytown") for m in (0x3E,)},
    **{m: (_INTEL_PARTIAL, "haswell") for m in (0x3C, 0x45, 0x46)},
    **{m: (_INTEL_PARTIAL, "haswellx") for m in (0x3F,)},
    **{m: (_INTEL_PARTIAL, "broadwell") for m in (0x3D, 0x47)},
    **{m: (_INTEL_PARTIAL, "broadwellx") for m in (0x4F, 0x56)},
    **{m: (_INTEL_PARTIAL, "skylake") for m in (0x4E, 0x5E, 0x8E, 0x9E, 0xA5, 0xA6)},
    **{m: (_INTEL_PARTIAL, "skylakex") for m in (0x55,)},
    **{m: (_INTEL_PARTIAL, "icelake") for m in (0x7D, 0x7E)},
    **{m: (_INTEL_PARTIAL, "icelakex") for m in (0x6A, 0x6C)},
    **{m: (_INTEL_PARTIAL, "tigerlake") for m in (0x8C, 0x8D)},
    **{m: (_INTEL_PARTIAL, "rocketlake") for m in (0xA7,)},
    **{m: (_INTEL_BLOCKS, "alderlake") for m in (0x97, 0x9A, 0xB7, 0xBA, 0xBF)},
    **{m: (_INTEL_BLOCKS, "sapphirerapids") for m in (0x8F,)},
    **{m: (_INTEL_BLOCKS, "emeraldrapids") for m in (0xCF,)},
    **{m: (_INTEL_BLOCKS, "graniterapids") for m in (0xAD, 0xAE)},
}


def _amd_table(family: int, model: int) -> str:
    """perf's table for an AMD family and model, as mapfile.csv's patterns choose it."""
    if family == 0x17:
        return "amdzen1" if model < 0x30 else "amdzen2"
    if family == 0x19:  # mapfile: 25-([245][[:xdigit:]]|[[:xdigit:]]) is Zen 3, the rest Zen 4
        return "amdzen3" if model < 0x10 or model >> 4 in (2, 4, 5) else "amdzen4"
    return ""


def lookup(vendor: str, family: int, model: int) -> AliasEvent | str:
    """The address-alias event of a CPU, or the one-line reason there is none known."""
    if vendor == "GenuineIntel" and family == 6 and model in _INTEL:
        event, table = _INTEL[model]
        return replace(event, source=f"tools/perf/pmu-events/arch/x86/{table}")
    table = _amd_table(family, model) if vendor == "AuthenticAMD" else ""
    if table in ("amdzen2", "amdzen3", "amdzen4"):
        return replace(_AMD_STLI, source=f"tools/perf/pmu-events/arch/x86/{table}")
    name = {"GenuineIntel": "Intel", "AuthenticAMD": "AMD"}.get(vendor, vendor or "unknown CPU")
    where = f"; perf's {table} tables list none" if table else ""
    return f"no address-alias event known for {name} family {family:x}h model {model:02x}h{where}"


def cpu_identity(path: str = "/proc/cpuinfo") -> tuple[str, int, int]:
    """(vendor_id, family, model) of the first CPU, ('', 0, 0) where the kernel does not say."""
    found: dict[str, str] = {}
    try:
        with open(path) as f:
            for line in f:
                key, _, value = line.partition(":")
                found.setdefault(key.strip(), value.strip())
                if not line.strip():
                    break
    except OSError:
        return "", 0, 0
    try:
        return found.get("vendor_id", ""), int(found["cpu family"]), int(found["model"])
    except (KeyError, ValueError):
        return found.get("vendor_id", ""), 0, 0


def _events(event: AliasEvent | None) -> list[tuple[str, tuple[int, int]]]:
    hw = bindings.PERF_TYPE_HARDWARE
    out = [("cycles", (hw, 0)), ("instructions", (hw, 1))]
    if event is not None:
        out.append(("alias_events", (event.kind, event.config)))
    return out


def status_line(event: AliasEvent | str, status: Mapping[str, int]) -> str:
    """One line: which event counts, or exactly why nothing does."""
    why = {k: counters.reason(v) for k, v in status.items()}
    hw = [k for k in ("cycles", "instructions") if why.get(k) != "counts"]
    hw_text = f"; cycles, instructions: {why[hw[0]]}" if hw else ""
    if isinstance(event, str):
        return f"alias counter: {event}{hw_text}"
    head = f"alias counter: {event.name} (raw {event.config:#06x}, {event.source})"
    if why.get("alias_events") != "counts":
        return f"{head}: {why.get('alias_events')}"
    return f"{head}: counts{hw_text}"


def pick_sizes(predicted: pd.DataFrame, grid: np.ndarray) -> list[tuple[int, int, str]]:
    """(window index, size, 'inside' or 'outside') to count: up to SIZES_PER_SIDE sizes of
    each window and as many 2-4 stack steps beside it, outside every predicted window."""
    grid = np.asarray(grid, dtype=np.int64)
    hot = np.zeros(grid.size, bool)
    for w in predicted.itertuples():
        hot |= (grid >= w.start) & (grid <= w.end)
    step = windows_mod.STACK_STEP
    out = []
    for i, w in enumerate(predicted.itertuples()):
        inside = grid[(grid >= w.start) & (grid <= w.end)]
        near = ((grid >= w.start - 4 * step) & (grid <= w.start - 2 * step)) | (
            (grid >= w.end + 2 * step) & (grid <= w.end + 4 * step)
        )
        outside = grid[near & ~hot]
        for where, sizes in (("inside", inside), ("outside", outside)):
            if sizes.size:
                pick = np.unique(np.linspace(0, sizes.size - 1, SIZES_PER_SIDE).round())
                out += [(i, int(sizes[int(j)]), where) for j in pick]
    return out


class _Counted(spawn.DirectSpawner):
    """Spawns from this thread with the events on during each batch only."""

    def __init__(self, live: bindings.ExecCounters):
        self.live = live
        self.counts = live.read()

    def batch(self, request: bytes, nruns: int, stdio: list[int]) -> np.ndarray:
        out = np.zeros(nruns, dtype=spawn.RUN_DTYPE)
        done, self.counts = self.live.run(request, stdio, out)
        return out[:done]


def count_runs(
    argv: Sequence[str],
    picks: Sequence[tuple[int, int, str]],
    event: AliasEvent,
    options: spawn.SpawnOptions,
    var: str = "A",
    base_env: Mapping[str, str] | None = None,
    repeat: int = REPEAT,
    seed: int = 0,
) -> pd.DataFrame:
    """Each picked size run `repeat` times in a seeded random order, one child at a time, its
    counts read after it exits: window, where, env_size, rep, cycles, instructions,
    alias_events (NaN where an event does not count), status."""
    names = [n for n, _ in _events(event)]
    plan = [(p, r) for p in picks for r in range(repeat)]
    random.Random(seed).shuffle(plan)
    spawner = _Counted(bindings.ExecCounters([e for _, e in _events(event)]))
    rows = []
    try:
        for (window, size, where), rep in plan:
            before = spawner.counts
            run = spawn.run_env_sizes(argv, np.array([size]), var, base_env, options, spawner)
            if run.size == 0:
                raise Stopped
            counts = {
                n: float(a - b) if a >= 0 and b >= 0 else np.nan
                for n, a, b in zip(names, spawner.counts, before, strict=True)
            }
            status = spawn.STATUS[int(run["status"][0])]
            rows.append({"window": window, "where": where, "env_size": size, "rep": rep,
                         **counts, "status": status})  # fmt: skip
    finally:
        spawner.live.close()
    return pd.DataFrame(rows)


def by_window(
    runs: pd.DataFrame, predicted: pd.DataFrame, iterations: int = ITERATIONS
) -> pd.DataFrame:
    """Per predicted window: median alias events, cycles and instructions per loop iteration
    of its ok runs inside and outside, and whether the CPU counted the aliasing."""
    ok = runs[runs["status"] == "ok"].copy()
    cols = ["alias_events", "cycles", "instructions"]
    for c in cols:
        if c not in ok:
            ok[c] = np.nan
        ok[c] = ok[c] / iterations
    rows = []
    for i, w in enumerate(predicted.itertuples()):
        part = ok[ok["window"] == i]
        med = {s: part[part["where"] == s][cols].median() for s in ("inside", "outside")}
        a_in, a_out = med["inside"]["alias_events"], med["outside"]["alias_events"]
        if np.isnan(a_in) or np.isnan(a_out):
            seen = "not counted"
        elif a_in - a_out >= COUNTED:
            seen = "the CPU counted the aliasing"
        else:
            seen = "the CPU counted no more aliasing inside than outside"
        rows.append({
            "start": int(w.start), "end": int(w.end),
            "runs_inside": int((part["where"] == "inside").sum()),
            "runs_outside": int((part["where"] == "outside").sum()),
            "alias_per_iter_inside": a_in, "alias_per_iter_outside": a_out,
            "cycles_per_iter_inside": med["inside"]["cycles"],
            "cycles_per_iter_outside": med["outside"]["cycles"],
            "counters": seen,
        })  # fmt: skip
    return pd.DataFrame(rows)


def _plain(df: pd.DataFrame) -> list[dict]:
    """Records for JSON metadata: NaN as None."""
    return [{k: (None if isinstance(v, float) and v != v else v) for k, v in r.items()}
            for r in df.to_dict("records")]  # fmt: skip


def sweep_meta(
    argv: Sequence[str],
    meta: Mapping[str, Any],
    sizes: np.ndarray,
    options: spawn.SpawnOptions,
    var: str,
    base_env: Mapping[str, str],
    seed: int = 0,
    cpu: tuple[str, int, int] | None = None,
) -> dict:
    """What `sweep env-size --counters` records: the status line, the event, and where it
    counts, the counts per run and per predicted window."""
    found = lookup(*(cpu or cpu_identity()))
    event = found if isinstance(found, AliasEvent) else None
    probe = bindings.ExecCounters([e for _, e in _events(event)])
    status = dict(zip([n for n, _ in _events(event)], probe.status(), strict=True))
    probe.close()
    out: dict[str, Any] = {
        "alias_counter": status_line(found, status),
        "alias_event": asdict(event) if event else None,
    }
    if event is None or status["alias_events"] < 0:
        return out
    predicted = windows_mod.predicted_from(meta, sizes)
    if predicted is None or predicted.empty:
        out["alias_counter"] += NOTHING_TO_COUNT
        return out
    picks = pick_sizes(predicted, sizes)
    runs = count_runs(argv, picks, event, options, var, base_env, seed=seed)
    out["alias_counter_runs"] = _plain(runs)
    out["alias_counts"] = _plain(by_window(runs, predicted))
    return out


def summary_lines(meta: Mapping[str, Any]) -> list[str]:
    """The status line, then one line per window that was counted."""
    if "alias_counter" not in meta:
        return []
    lines = [meta["alias_counter"]]
    for w in meta.get("alias_counts", []):
        a_in, a_out = w["alias_per_iter_inside"], w["alias_per_iter_outside"]
        nums = (
            f"{a_in:.3f} vs {a_out:.3f} alias events per iteration inside vs outside"
            if a_in is not None and a_out is not None
            else "no counts"
        )
        lines.append(f"  {w['start']}-{w['end']}: {nums}: {w['counters']}")
    return lines
