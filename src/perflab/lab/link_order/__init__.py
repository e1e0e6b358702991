"""The link-order experiment of Mytkowicz et al.: link every order of some objects once, run
each, explain why one is faster. The plan and registry entry are here, light enough for --help
and the registry; sweep, summarize, plot, summary and the layout analyses load from
measure.py on first use."""

import itertools
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from perflab.errors import PerflabError
from perflab.plan.controls import (
    Controls,
    _cli,
    check_order,
    check_repeat,
    check_rows,
    order_field,
)
from perflab.plan.experiment import Experiment, lazy_api

if TYPE_CHECKING:
    import numpy as np

MAX_PERMUTATIONS = 5040  # 7!: beyond that, sample with --permutations N


def parse_permutations(text: str) -> str | int:
    """'all' or a positive count."""
    if text == "all":
        return "all"
    try:
        return int(text)
    except ValueError:
        raise PerflabError(f"--permutations {text!r}: expected 'all' or a number") from None


@dataclass(frozen=True)
class LinkOrderPlan(Controls):
    """Everything that decides which runs a sweep makes and how: a resume must match it."""

    labels: tuple[str, ...] = ()
    digests: tuple[str, ...] = ()
    link: str = ""
    permutations: str | int = field(
        default="all",
        metadata=_cli("--permutations", f"'all' orders (up to {MAX_PERMUTATIONS}) or N random "
                      "ones (with --seed).", parse=parse_permutations),
    )  # fmt: skip
    repeat: int = field(default=20, metadata=_cli("--repeat", "Runs per order.", min=1))
    order: str = order_field()
    args: tuple[str, ...] = ()

    def check(self) -> "LinkOrderPlan":
        """Refuse bad input before anything is built or measured."""
        check_repeat(self.repeat)
        check_order(self.order)
        self.check_controls()
        if self.permutations != "all":  # N distinct orders are drawn one by one: bound N first
            check_rows({"--permutations": int(self.permutations), "--repeat": self.repeat})
        drawn = orders(len(self.labels), self.permutations, self.seed)
        check_rows({"--repeat": self.repeat}, len(drawn))
        return self

    def pairs(self, nperms: int) -> tuple["np.ndarray", "np.ndarray"]:
        """(perm, rep) of every run, in the order they will be made."""
        from perflab.running import childruns

        return childruns.run_order(nperms, self.repeat, self.order, self.seed)


def orders(n: int, permutations: str | int, seed: int = 0) -> list[tuple[int, ...]]:
    """'all' orders of n objects (up to MAX_PERMUTATIONS), or N distinct ones drawn with seed,
    the order given first: the one a user would have measured without perflab."""
    total = math.factorial(n)
    if permutations == "all":
        if total > MAX_PERMUTATIONS:
            raise PerflabError(
                f"--permutations all: {n} objects have {total:,} orders, more than "
                f"{MAX_PERMUTATIONS}; sample some with --permutations N --seed S"
            )
        return list(itertools.permutations(range(n)))
    count = int(permutations)
    if count < 1:
        raise PerflabError(f"--permutations must be 'all' or at least 1, not {count}")
    if count > total:
        raise PerflabError(f"--permutations {count}: {n} objects have only {n}! = {total} orders")
    import numpy as np  # plans stay light: numpy only when orders are drawn

    rng = np.random.default_rng(seed)
    chosen = {tuple(range(n)): None}
    while len(chosen) < count:
        chosen.setdefault(tuple(int(i) for i in rng.permutation(n)), None)
    return list(chosen)


EXPERIMENT = Experiment(
    name="link-order",
    module="perflab.lab.link_order.measure",
    verb="sweep link-order",
    columns=frozenset({"link_order", "perm", "rep", "status", "ticks"}),
    points=("link_order",),
    help="Link OBJECTS (default: the built-in workload) in every order, run each REPEAT times.",
    rows=("perm", "rep"),
)

API = (
    "sweep", "summarize", "spread", "features", "alignment_effects", "layout_frame", "plot",
    "summary", "run_conditions", "counters_note", "builtin_source", "user_source", "link_all",
    "value_column", "Source", "KEY", "BUILTIN_HOT", "CHUNK_RUNS", "PROGRAM_PAGES", "MODULI",
)  # fmt: skip
__getattr__, __dir__ = lazy_api(__name__, EXPERIMENT.module, API)
