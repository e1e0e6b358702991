"""A comparison's setups: the layouts it parses from words and files, and draws from its seed."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from perflab.errors import PerflabError
from perflab.lab.plans.compare import RANDOMIZE, ComparePlan, layout_text, parse_layout
from perflab.store import results
from perflab.system.sections import SEED_MAX

NO_PADDING = -1  # a size a setup leaves out: no padding variable, heap shift or padding object

LAYOUT = ("env_size", "link_order", "heap_offset", "code_offset", "aslr", "function_order")


def parse_randomize(text: str) -> tuple[str, ...]:
    """'env-size,link-order' (or 'none') as a tuple of known setup dimensions."""
    if text.strip() == "none":
        return ()
    parts = tuple(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))
    bad = [p for p in parts if p not in RANDOMIZE]
    if bad or not parts:
        raise PerflabError(
            f"--randomize {text!r}: expected 'none' or a list of {', '.join(RANDOMIZE)}"
        )
    return parts


def layout_option(text: str) -> str:
    """--layout: RESULT:SETUP (the layout a saved comparison's setup ran in) or NAME=VALUE
    words, as the canonical words a plan records."""
    found = re.fullmatch(r"(.+):(\d+)", text.strip())
    if found and "=" not in text and os.path.isfile(found[1]):
        return recorded_layout(found[1], int(found[2]))
    return layout_text(parse_layout(text))


def recorded_layout(path: str | os.PathLike[str], setup: int) -> str:
    """The layout that setup `setup` of a saved comparison ran in, as --layout words."""
    df = results.load(path)
    if results.metadata(df).get("experiment") != "compare":
        raise PerflabError(f"{path}: not a perflab compare result")
    rows = df[(df["setup"] == setup) & (df["side"] == "A")]
    if rows.empty:
        have = ", ".join(map(str, sorted(set(df["setup"]))))
        raise PerflabError(f"{path}: no setup {setup} (it has {have})")
    row = rows.iloc[0]
    values = {"link-order": str(row.get("link_order") or ""), "aslr": str(row.get("aslr", ""))}
    for column in ("env_size", "heap_offset", "code_offset", "function_order"):
        values[column.replace("_", "-")] = str(int(row.get(column, NO_PADDING)))
    return layout_text({k: v for k, v in values.items() if v and v != str(NO_PADDING)})


@dataclass(frozen=True)
class Setup:
    """One setup: the draw of every randomised factor that A's and B's runs in it share (the
    padding variable's length, the link order (None: as given), the heap offset, the code
    offset and the seed of the functions' order, each NO_PADDING when left out, and the child's
    ASLR mode); the memory layout those factors give a program is its layout."""

    index: int
    env_size: int
    perm: tuple[int, ...] | None
    heap_offset: int = NO_PADDING
    code_offset: int = NO_PADDING
    aslr: str = "off"
    function_order: int = NO_PADDING
    placement: int = 0  # which code placement: setups of one share it (--per-placement)


def draw_setups(plan: ComparePlan, labels: Sequence[str]) -> list[Setup]:
    """The plan's fixed layout, or `setups` setups drawn with its seed, each dimension it
    randomizes uniform: env sizes in 0..env_max, orders of the objects `labels` name (A's),
    heap and code offsets in 0..heap_max and 0..code_max bytes, a seed of the functions' order,
    ASLR on or off. The offsets, the seed and ASLR draw from streams of their own: adding one
    leaves the others' draws as they were. Setups of one placement (per_placement of them in a
    row) share the code's draws: its offset, link order and function order."""
    if plan.layout:
        return [_fixed(plan, labels)]
    randomize = plan.randomize
    rng = np.random.default_rng(plan.seed)
    own = {d: np.random.default_rng((plan.seed, i)) for i, d in enumerate(RANDOMIZE)}

    def offset(dimension: str, most: int) -> int:
        return int(own[dimension].integers(0, most + 1)) if dimension in randomize else NO_PADDING

    out = []
    perm, code, functions = None, NO_PADDING, NO_PADDING
    for i in range(plan.setups):
        size = int(rng.integers(0, plan.env_max + 1)) if "env-size" in randomize else NO_PADDING
        placed = i % plan.per_placement == 0  # a new code placement, or the one before's
        if placed and "link-order" in randomize:
            perm = tuple(int(x) for x in rng.permutation(len(labels)))
        heap = offset("heap-offset", plan.heap_max)
        if placed:
            code = offset("code-offset", plan.code_max)
        aslr = ("off", "on")[int(own["aslr"].integers(0, 2))] if "aslr" in randomize else plan.aslr
        if placed and "function-order" in randomize:
            functions = int(own["function-order"].integers(1, SEED_MAX + 1))
        out.append(Setup(i, size, perm, heap, code, aslr, functions, i // plan.per_placement))
    return out


def _fixed(plan: ComparePlan, labels: Sequence[str]) -> Setup:
    """The one setup of a --layout plan (the plan's aslr where the layout names none)."""
    values = parse_layout(plan.layout)
    perm = None
    if "link-order" in values:
        order = values["link-order"].split(",")
        if sorted(order) != sorted(labels):
            raise PerflabError(
                f"--layout link-order={values['link-order']}: A's objects are "
                f"{','.join(labels)}; give each once"
            )
        perm = tuple(list(labels).index(name) for name in order)

    def size(name: str) -> int:
        return int(values.get(name, NO_PADDING))

    return Setup(0, size("env-size"), perm, size("heap-offset"), size("code-offset"),
                 values.get("aslr", plan.aslr), size("function-order"))  # fmt: skip
