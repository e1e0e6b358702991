"""The placement floor (running/placement.py measures it), cached under the machine and C core
it holds for, and never trusted from another or when malformed."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path

from perflab.core import files
from perflab.errors import PerflabError
from perflab.system import machine


@dataclass(frozen=True)
class PlacementFloor:
    """How much identical C code at different addresses differs here (running/placement.py
    measures it): between two distinct C functions a ratio within 1 +/- share is undecidable."""

    share: float
    placements: int
    copies: int  # mappings of the twins' library timed (a cache from before: remeasured)
    pairs: int
    runs: int
    worst: str
    disturbed: int
    measured_at: str
    seconds: float
    timer_step_ticks: int
    compiler: str  # the C compiler that built the twins, or the Python interpreter of "python"
    short_runs: int  # runs in each short timing, as many as an assertion's first look (0: none)
    short_timings: int
    short_apart: int  # short timings whose interval lay wholly beyond 5 % from 1
    kind: str = "c"  # "c": C functions at different addresses; "python": function objects

    def sentence(self) -> str:
        """What the floor means, as the assertions and `perflab machine` say it."""
        if self.kind == "python":
            return (
                f"identical Python code in two function objects differs by up to "
                f"{100 * self.share:.2g} % in this interpreter: smaller differences between "
                "distinct callables are undecidable here"
            )
        return (
            f"identical code at two addresses differs by up to {100 * self.share:.2g} % on "
            "this CPU: smaller differences between distinct functions are undecidable here"
        )

    def method(self) -> str:
        """How it was measured, in one line; a busy machine's timings said so."""
        busy = (
            f" ({self.disturbed} of those {2 * self.pairs * self.copies} timings stayed "
            "disturbed: remeasure on a quieter machine)"
            if self.disturbed
            else ""
        )
        what = "function objects of one Python loop" if self.kind == "python" else "placements"
        mapped = f" in each of {self.copies} mappings of their library" if self.copies > 1 else ""
        short = (
            f"; then {self.short_timings} timings of {self.short_runs} runs, as short as an "
            f"assertion's first look: {self.short_apart} of them wholly beyond 5 % apart"
            if self.short_timings
            else ""
        )
        return (
            f"{self.placements} {what}{mapped}, each of {self.pairs} pairs timed twice "
            f"(both slots) in {self.runs} interleaved runs each{busy}{short}, the widest "
            f"ratio interval: {self.worst}"
        )


PLACEMENT_FLOOR = "placement-floor"


def cached_placement_floor() -> PlacementFloor | None:
    """The floor measured earlier on this machine and core; None when none is cached or the
    file is unreadable, corrupt or another machine's: it is then measured again, never trusted."""
    try:
        doc = json.loads(files.read_private(machine.calibration_path(PLACEMENT_FLOOR)))
        floor = PlacementFloor(**doc["floor"])
    except (OSError, ValueError, TypeError, KeyError, PerflabError):
        return None
    if doc.get("identity") != machine.identity() or not _well_formed(floor):
        return None
    return floor


def _well_formed(floor: PlacementFloor) -> bool:
    """Every field of its type and in range: JSON from elsewhere may hold anything."""
    numbers = (floor.share, floor.seconds)
    counts = (floor.placements, floor.pairs, floor.runs, floor.disturbed, floor.timer_step_ticks,
              floor.copies, floor.short_runs, floor.short_timings, floor.short_apart)  # fmt: skip
    texts = (floor.worst, floor.measured_at, floor.compiler, floor.kind)
    return (
        all(type(x) in (int, float) and math.isfinite(x) for x in numbers)
        and all(type(x) is int for x in counts)
        and all(isinstance(x, str) for x in texts)
        and floor.share >= 0
        and floor.placements >= 2
        and min(floor.pairs, floor.runs, floor.copies) >= 1
        and floor.disturbed >= 0
        and 0 <= floor.short_apart <= floor.short_timings
        and floor.short_runs >= 0
    )


def store_placement_floor(floor: PlacementFloor) -> Path:
    """Cache the floor for this machine and core, written whole (a reader never sees half)."""
    path = machine.calibration_path(PLACEMENT_FLOOR)
    doc = {"identity": machine.identity(), "floor": dataclasses.asdict(floor)}
    files.atomic(path, lambda tmp: tmp.write_text(json.dumps(doc, indent=1) + "\n"))
    return path
