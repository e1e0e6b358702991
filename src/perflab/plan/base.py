"""The plan every experiment states its parameters in: one frozen dataclass whose fields are its
options (flag, default, help, bounds), so the verb, the Python API and a resume read one source.

A field made with `option` carries its CLI metadata; `Plan.check` applies its bounds, the same
ones the verb's option applies while parsing (cli/verbs.py), so a count is refused before
anything is allocated whichever face it came through."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, TypeVar

from perflab.errors import PerflabError
from perflab.plan import controls

P = TypeVar("P", bound="Plan")


def option(flag: str, default: Any, help: str, **more: Any) -> Any:
    """A plan field that is its verb's option `flag`: its default, its help and click extras.

    Counts take least=, each_bytes=, each_s=, what=, most= and most_why= (check_count's
    bounds); a number that must lie between two values takes within=(low, high)."""
    return field(default=default, metadata=controls._cli(flag, help, **more))


def other_default(plan: type[Plan], name: str, default: Any) -> Any:
    """`plan`'s field `name` with another default: a plan deriving from it states only what
    differs, the flag, help and bounds staying the base's."""
    return field(default=default, metadata=plan.__dataclass_fields__[name].metadata)


def bounds(meta: dict[str, Any]) -> dict[str, Any] | None:
    """The count bounds an option's metadata states, as check_count's keywords; None: no count."""
    if "least" not in meta:
        return None
    most = meta.get("most")
    return {"least": meta["least"], "each_bytes": meta.get("each_bytes", 0),
            "each_s": meta.get("each_s", 0), "what": meta.get("what", "its rows"),
            "most": (most, meta.get("most_why", f"the most {meta['flag']} takes")) if most
            else None}  # fmt: skip


@dataclass(frozen=True)
class Plan:
    """An experiment's parameters, checked once, whatever face built them."""

    def check(self: P) -> P:
        """Refuse a count out of its bounds, then what check_more refuses; returns the plan."""
        for f in dataclasses.fields(self):
            meta = f.metadata.get("cli") or {}
            limits = bounds(meta)
            if limits is not None:
                controls.check_count(meta["flag"], getattr(self, f.name), **limits)
            value = getattr(self, f.name)
            if "within" in meta and value is not None:  # None: the run's own default
                low, high = meta["within"]
                if not low <= value <= high:
                    raise PerflabError(f"{meta['flag']} must be {low} to {high}, not {value}")
        self.check_more()
        return self

    def check_more(self) -> None:
        """What one experiment refuses beyond its fields' bounds (nothing by default)."""

    def params(self) -> dict[str, Any]:
        """The fields as a journal records them (what a resume must repeat)."""
        return dataclasses.asdict(self)
