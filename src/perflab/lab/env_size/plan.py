"""The env-size sweep's plan: its parameters and their checks, without numpy or pandas."""

import platform
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING

from perflab.errors import PerflabError
from perflab.plan.controls import (
    DEFAULT_OPT,
    OPT_LEVELS,
    Controls,
    _cli,
    check_order,
    check_repeat,
    check_rows,
    order_field,
)

if TYPE_CHECKING:
    import numpy as np

MAX_ARG_STRLEN = 32 * 4096  # the kernel's limit on one argv or environment string
# The built-in loops: the source and the C expression of the counter the twin reports as g.
BUILTIN = {"mytkowicz": ("mytkowicz.c", "g"), "split": ("stacksplit.c", "s.g")}
# exec: a fresh child per run, its environment moves its stack (running/childruns.py);
# shift: one child per CPU moves its stack pointer to where that environment would have put
# the built-in loop's frame (running/shift.py).
ENGINES = ("exec", "shift")
# The built-in loops' layouts (workloads/perflab_layout.h): the loop's first instruction's offset
# in its 64-byte window, and the static i's offset in its page. The four code offsets sample
# the fetch windows a CPU's speed may follow; the four statics offsets put i, j, k at each
# residue modulo 16 that the 16-byte stack steps meet, so each pairs other slots.
CODE_OFFSETS = (0, 16, 32, 48)
STATICS_PAGE_OFFSET = 0x300
STATICS_OFFSETS = tuple(STATICS_PAGE_OFFSET + r for r in (0, 4, 8, 12))
AUTO = "auto"


@dataclass(frozen=True)
class LoopLayout:
    """Where a built-in loop's code and statics sit, as its build flags fix them."""

    code: int = CODE_OFFSETS[0]
    statics: int = STATICS_OFFSETS[0]

    @classmethod
    def parse(cls, text: str) -> "LoopLayout":
        """'CODE:STATICS' (e.g. 32:0x308), refused in one line when it is not a layout."""
        try:
            code, statics = (int(x, 0) for x in text.split(":"))
        except ValueError:
            raise PerflabError(
                f"--layout {text!r}: expected auto or CODE:STATICS, e.g. 32:0x308 (the loop's "
                "code offset in its 64-byte window, the statics' offset in their page)"
            ) from None
        if not 0 <= code < 64:
            raise PerflabError(f"--layout {text!r}: the code offset must be 0-63, not {code}")
        if statics % 4 or not 0 <= statics <= 4096 - 12:
            raise PerflabError(
                f"--layout {text!r}: the statics' offset must be a multiple of 4 in 0-4084 "
                f"(i, j and k take 12 bytes of one page), not {statics}"
            )
        return cls(code, statics)

    def flags(self) -> tuple[str, ...]:
        """The compiler flags that build this layout."""
        return (f"-DPERFLAB_LOOP_CODE={self.code}", f"-DPERFLAB_LOOP_STATICS={self.statics:#x}")

    def __str__(self) -> str:
        return f"{self.code}:{self.statics:#x}"


LAYOUTS = tuple(LoopLayout(c, s) for c in CODE_OFFSETS for s in STATICS_OFFSETS)
DEFAULT_LAYOUT = LAYOUTS[0]  # the header's own defaults


@dataclass(frozen=True)
class EnvSizePlan(Controls):
    """Everything that decides which runs a sweep makes and how: a resume must match it.

    The one statement of the sweep's parameters: sweep() takes them as keywords and the CLI
    derives its options from the fields' metadata.
    """

    program: tuple[str, ...] = ()
    min_size: int = field(default=0, metadata=_cli("--min", "Smallest padding (bytes).", min=0))
    max_size: int = field(default=8192, metadata=_cli("--max", "Largest padding.", min=0))
    step: int = field(default=1, metadata=_cli("--step", "Padding step (the post: 1).", min=1))
    repeat: int = field(
        default=100, metadata=_cli("--repeat", "Runs per size (the post: 100).", min=1)
    )
    var: str = field(default="A", metadata=_cli("--env-var", "The padding variable."))
    order: str = order_field()
    opt: str = field(
        default=DEFAULT_OPT,
        metadata=_cli("-O", "Optimisation level of the built-in loop (-O1 keeps the loop in "
                      "registers, -O2 folds it away: only -O0 touches the stack each "
                      "iteration).", choices=OPT_LEVELS),
    )  # fmt: skip
    workload: str = field(
        default="mytkowicz",
        metadata=_cli("--workload", "Built-in loop: mytkowicz (the paper's; its windows depend "
                      "on the CPU) or split (its 8-byte counter straddles a page once per 4096 "
                      "sizes: a cost that does not rest on 4K aliasing).",
                      choices=tuple(BUILTIN)),
    )  # fmt: skip
    engine: str = field(
        default="exec",
        metadata=_cli("--engine", "exec: a freshly exec'd child per run, as the post. shift: for "
                      "a built-in loop with --aslr off, one child per CPU that calls the loop with "
                      "its frame where an exec'd child's would be (checked first), several times "
                      "faster; same columns, windows and journal.", choices=ENGINES),
    )  # fmt: skip
    layout: str = field(
        default=AUTO,
        metadata=_cli("--layout", "Where the built-in loop's code and statics sit, CODE:STATICS "
                      "(e.g. 32:0x308: the loop 32 bytes into a 64-byte window, i at 0x308 of "
                      "its page). auto: time the 16 layouts of code offsets 0, 16, 32, 48 and "
                      "statics at each residue mod 16 first, and sweep the steadiest that pays "
                      "for 4K aliasing here (the table is printed)."),
    )  # fmt: skip
    workload_digest: str = field(default="", compare=False)

    def check(self) -> "EnvSizePlan":
        """Refuse bad input before anything is measured."""
        if self.min_size < 0 or self.max_size < 0:
            raise PerflabError(f"sizes must not be negative ({self.min_size}..{self.max_size})")
        if self.min_size > self.max_size:
            raise PerflabError(f"--min {self.min_size} is greater than --max {self.max_size}")
        longest = MAX_ARG_STRLEN - len(self.var) - 2  # "VAR=" and the NUL count too
        if self.max_size > longest:
            raise PerflabError(
                f"--max {self.max_size}: Linux takes environment strings of at most "
                f"{MAX_ARG_STRLEN} bytes (MAX_ARG_STRLEN), so at most {longest} bytes of padding"
            )
        if self.step < 1:
            raise PerflabError(f"--step must be at least 1, not {self.step}")
        check_repeat(self.repeat)
        check_rows({"--repeat": self.repeat}, (self.max_size - self.min_size) // self.step + 1)
        check_order(self.order)
        if self.program and self.workload != "mytkowicz":
            raise PerflabError("--workload chooses a built-in loop: give it or a PROGRAM, not both")
        if self.layout != AUTO:
            if self.program:
                raise PerflabError(
                    "--layout places the built-in loop: give it or a PROGRAM, not both"
                )
            LoopLayout.parse(self.layout)
        self.check_engine()
        if not self.var or "=" in self.var or "\0" in self.var:
            raise PerflabError(f"invalid environment variable name {self.var!r}")
        self.check_controls()
        return self

    def check_engine(self) -> None:
        """Refuse what the shift engine cannot stand for: a program of the user, whose frames
        perflab does not know, or a stack that ASLR moves at every run."""
        if self.engine not in ENGINES:
            raise PerflabError(f"--engine must be one of {', '.join(ENGINES)}, not {self.engine!r}")
        if self.engine != "shift":
            return
        if self.program:
            raise PerflabError(
                "--engine shift runs perflab's built-in loops only: it places their frames where "
                "an exec'd child's would be, and perflab cannot see the frames of "
                f"{self.program[0]}; leave --engine out to exec it at every run"
            )
        if self.aslr != "off":
            raise PerflabError(
                f"--engine shift needs --aslr off: with --aslr {self.aslr} an exec'd child's "
                "stack lands somewhere else at every run, which no placement can repeat"
            )
        if platform.machine() != "x86_64":
            raise PerflabError(
                f"--engine shift runs on x86-64 only (its child moves the stack pointer in "
                f"x86-64 assembly), not on {platform.machine()}; leave --engine out"
            )

    def params(self) -> dict:
        """The plan as a journal stores it; the exec engine unnamed, as before --engine, so
        journals of that time still resume and no resume mixes engines; an auto layout
        likewise, since a resume takes the layout its journal recorded."""
        plan = super().params()
        if self.engine == "exec":
            del plan["engine"]
        if self.layout == AUTO:  # the layout auto chose is in the journal's metadata
            del plan["layout"]
        return plan

    def loop_layout(self) -> LoopLayout:
        """The layout the built-in loop is built in: the one named, the default before a sweep
        resolves auto (lab/env_size/loop_layouts.resolve)."""
        return DEFAULT_LAYOUT if self.layout == AUTO else LoopLayout.parse(self.layout)

    def sizes(self) -> "np.ndarray":
        """The env sizes swept, min..max inclusive."""
        import numpy as np

        return np.arange(self.min_size, self.max_size + 1, self.step, dtype=np.int64)

    def pairs(self) -> tuple["np.ndarray", "np.ndarray"]:
        """(env_size, rep) of every run, in the order they will be made."""
        from perflab.running import childruns

        item, rep = childruns.run_order(self.sizes().size, self.repeat, self.order, self.seed)
        return self.sizes()[item], rep


PARAMS = tuple(
    f.name
    for f in fields(EnvSizePlan)
    if f.name not in ("program", "workload_digest", "cpu_choice")
)
