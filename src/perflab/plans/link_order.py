"""The link-order sweep's plan: its parameters and their checks, without numpy or pandas."""

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from perflab.errors import PerflabError
from perflab.plans import Controls, _cli, check_order, check_repeat, order_field

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
class Plan(Controls):
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

    def check(self) -> "Plan":
        """Refuse bad input before anything is built or measured."""
        from perflab.link_order import orders

        check_repeat(self.repeat)
        check_order(self.order)
        self.check_controls()
        orders(len(self.labels), self.permutations, self.seed)
        return self

    def pairs(self, nperms: int) -> tuple["np.ndarray", "np.ndarray"]:
        """(perm, rep) of every run, in the order they will be made."""
        from perflab import childruns

        return childruns.run_order(nperms, self.repeat, self.order, self.seed)
