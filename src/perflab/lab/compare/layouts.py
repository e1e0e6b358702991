"""A comparison's setups: the layouts it draws from its seed (plan.py reads them from words
and saved results)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from perflab.errors import PerflabError
from perflab.lab.compare.plan import NO_PADDING as NO_PADDING
from perflab.lab.compare.plan import RANDOMIZE, ComparePlan, parse_layout
from perflab.lab.compare.plan import layout_option as layout_option
from perflab.lab.compare.plan import parse_randomize as parse_randomize
from perflab.lab.compare.plan import recorded_layout as recorded_layout
from perflab.system.sections import SEED_MAX

LAYOUT = ("env_size", "link_order", "heap_offset", "code_offset", "aslr", "function_order")


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
