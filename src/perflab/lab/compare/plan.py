"""The A/B comparison's plan: its parameters and their checks, and --randomize's and --layout's
words read, without numpy or pandas (a saved result named by --layout loads them)."""

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from perflab.errors import PerflabError
from perflab.lab.env_size.plan import MAX_ARG_STRLEN
from perflab.plan.controls import (
    ASLR_MODES,
    LONGEST_S,
    Controls,
    _cli,
    check_iterations,
    check_rows,
    typed_value,
)

# What a setup can vary; link-order, code-offset and function-order (the order of functions
# within their objects, drawn by a seed) only where perflab links A and B itself.
RANDOMIZE = ("env-size", "link-order", "heap-offset", "code-offset", "aslr", "function-order")
LINKED = ("link-order", "code-offset", "function-order")
HEAP_DIGITS = 8  # the heap offset's width in the environment: every setup's is as long
HEAP_MAX = 10**HEAP_DIGITS - 1
CODE_MAX = 1 << 24  # 16 MiB of padding before the code: more is a typo, not a layout
NO_PADDING = -1  # a size a setup leaves out: no padding variable, heap shift or padding object


def parse_layout(text: str) -> dict[str, str]:
    """'env-size=1200 heap-offset=64 aslr=off link-order=b,main,a,c' (a word per dimension, any
    order) as {dimension: value} in RANDOMIZE's order; a malformed word is one line."""
    values: dict[str, str] = {}
    for word in text.split():
        name, eq, value = word.partition("=")
        if not eq or name not in RANDOMIZE or name in values:
            raise PerflabError(
                f"--layout {text!r}: {word!r} is not one of {', '.join(RANDOMIZE)} "
                "(each once) as NAME=VALUE"
            )
        if name == "aslr":
            ok = value in ASLR_MODES
        elif name == "link-order":
            labels = value.split(",")
            ok = all(labels) and len(set(labels)) == len(labels)
        else:
            ok = value.isdigit()
        if not ok:
            raise PerflabError(f"--layout {text!r}: {word!r} has no valid value")
        values[name] = str(int(value)) if value.isdigit() else value
    if not values:
        raise PerflabError("--layout is empty: give NAME=VALUE words or RESULT:SETUP")
    return {d: values[d] for d in RANDOMIZE if d in values}


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


def parse_fraction(text: str | float | None, flag: str) -> float:
    """'1%' or '0.01' as 0.01 (None or 0: off), one line when it is neither."""
    if text is None or isinstance(text, float):
        return text or 0.0
    try:
        value = float(text.removesuffix("%")) / (100 if text.endswith("%") else 1)
    except ValueError:
        raise PerflabError(f"{flag} {text!r}: a percentage (1%) or a fraction (0.01)") from None
    if not 0 < value < 1:
        raise PerflabError(f"{flag} {text!r}: above 0 % and below 100 %")
    return value


def layout_option(text: str) -> str:
    """--layout: RESULT:SETUP (the layout a saved comparison's setup ran in) or NAME=VALUE
    words, as the canonical words a plan records."""
    found = re.fullmatch(r"(.+):(\d+)", text.strip())
    if found and "=" not in text and os.path.isfile(found[1]):
        return recorded_layout(found[1], int(found[2]))
    return layout_text(parse_layout(text))


def recorded_layout(path: str | os.PathLike[str], setup: int) -> str:
    """The layout that setup `setup` of a saved comparison ran in, as --layout words."""
    from perflab.store import results  # loads pandas: only when a result is named

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


def layout_text(values: dict[str, str]) -> str:
    """A layout as the words --layout reads back (RANDOMIZE's order)."""
    return " ".join(f"{d}={values[d]}" for d in RANDOMIZE if d in values)


@dataclass(frozen=True)
class ComparePlan(Controls):
    """Everything that decides which runs a comparison makes and how: a resume must match it."""

    a: str = ""
    b: str = ""
    digests: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    randomize: tuple[str, ...] = field(
        default=("env-size",),
        metadata=_cli("--randomize", "Setup dimensions drawn at random per setup: env-size, "
                      "heap-offset (a preloaded library moves the heap), aslr (on or off), and "
                      "where perflab links (--build, --objects-a/-b, --build-cmd-a/-b) "
                      "link-order, code-offset (a padding object linked first) and "
                      "function-order (the functions within objects compiled with "
                      "-ffunction-sections); or none. [default: env-size, plus link-order where "
                      "perflab links; for --build-cmd-a/-b, all of the code's placement both can "
                      "take]", parse=parse_randomize, default=None, shown=False),
    )  # fmt: skip
    setups: int = field(default=10, metadata=_cli("--setups", "Random setups to draw.", min=1))
    repeat: int = field(default=10, metadata=_cli("--repeat", "A/B pairs per setup.", min=1))
    env_max: int = field(
        default=4096,
        metadata=_cli("--env-max", "Env sizes are drawn in 0..ENV_MAX bytes.", min=0),
    )
    heap_max: int = field(
        default=4096,
        metadata=_cli("--heap-max", "Heap offsets are drawn in 0..HEAP_MAX bytes.", min=0),
    )
    code_max: int = field(
        default=4096,
        metadata=_cli("--code-max", "Code offsets (the padding linked first) are drawn in "
                      "0..CODE_MAX bytes.", min=0),
    )  # fmt: skip
    iterations: int = field(
        default=1,
        metadata=_cli("--iterations", "Iterations of the programs' repeat loop "
                      "(PERFLAB_PROBE_LOOP) in each run, a level of the variance of its own; "
                      "20 or more: each run's warm-up is found and set aside "
                      "(docs/warmup.md); with --precision, the pilot's, and the plan chooses "
                      "the rest's.", min=1),
    )  # fmt: skip
    per_placement: int = field(
        default=1,
        metadata=_cli("--per-placement", "Setups that share one code placement (its code "
                      "offset, link order and function order), their environments drawn apart: "
                      "the variance the code placement explains is told from the "
                      "environment's, and B/A's interval is over the placements.", min=1),
    )  # fmt: skip
    layout: str = field(  # one fixed layout (parse_layout's words) instead of random setups
        default="",
        metadata=_cli("--layout", "Run one layout instead of random setups: RESULT:SETUP (the "
                      "layout that setup of a saved comparison ran in) or words such as "
                      "'env-size=1200 heap-offset=64 aslr=off'.", parse=layout_option,
                      default=None, shown=False),
    )  # fmt: skip
    precision: float = field(
        default=0.0,
        metadata=_cli("--precision", "Run layouts until B/A's interval is this narrow (1% or "
                      "0.01: B/A within ±1 %), repetitions planned from the variance measured "
                      "at each level, instead of --setups x --repeat. [default: off]",
                      parse=lambda text: parse_fraction(text, "--precision"), shown=False,
                      default=None),
    )  # fmt: skip
    budget: float = field(
        default=600.0,
        metadata=_cli("--budget", "With --precision: the most time the comparison may take.",
                      kind="seconds", needs="precision"),
    )  # fmt: skip
    var: str = "A"

    @classmethod
    def given(cls, metrics: Sequence[str] = ("time",), linked: bool = False,
              **given: Any) -> "ComparePlan":  # fmt: skip
        """The plan of what was given (a verb's options left at their defaults are not): every
        rule that turns on what was given, one line each, then the defaults. `linked`: perflab
        links A and B, so a setup also draws their link order unless told what to draw."""
        given = {k: v for k, v in given.items() if v is not None}
        if given.get("layout"):
            if given.get("randomize"):
                raise PerflabError("--layout fixes the layout: leave --randomize out")
            if "setups" in given:
                raise PerflabError("--layout runs one setup, the one given: leave --setups out")
            given.update(setups=1, randomize=())
        if given.get("precision"):
            named = [f"--{n}" for n in ("setups", "repeat") if n in given]
            if named:
                raise PerflabError(
                    "--precision plans the layouts and runs from the variance it measures: "
                    f"leave {' and '.join(named)} out"
                )
            if "instructions-exact" in metrics:
                raise PerflabError("--metric instructions-exact counts the setups of a fixed "
                                   "design: leave --precision out")  # fmt: skip
            if metrics and metrics[0] != "time":
                raise PerflabError("--precision plans the runs for time's interval: give "
                                   f"--metric time first (then {', '.join(metrics)})")  # fmt: skip
        if isinstance(given.get("randomize"), str):  # "aslr" or "env-size,aslr", as the CLI's
            given["randomize"] = tuple(filter(None, map(str.strip, given["randomize"].split(","))))
        given.setdefault("randomize", ("env-size", "link-order") if linked else ("env-size",))
        drawn = typed_value(given["randomize"], tuple[str, ...], "randomize")
        return cls(**{**given, "randomize": drawn})

    def params(self) -> dict:
        """The plan as a journal stores it; per_placement only where setups share one, so
        that journals from before it still resume."""
        plan = super().params()
        if self.per_placement == 1:
            del plan["per_placement"]
        return plan

    def varied(self) -> tuple[str, ...]:
        """The dimensions the setups set: those randomized, or those the fixed layout names."""
        return tuple(parse_layout(self.layout)) if self.layout else self.randomize

    def check(self, objects: tuple[int, int]) -> "ComparePlan":
        """Refuse bad input before anything is measured; objects: how many A and B link from
        (0: a program as given)."""
        if self.setups < 1 or self.repeat < 1:
            raise PerflabError(
                f"--setups and --repeat must be at least 1 ({self.setups}, {self.repeat})"
            )
        check_rows({"--setups": self.setups, "--repeat": self.repeat}, 2)
        longest = MAX_ARG_STRLEN - len(self.var) - 2  # "VAR=" and the NUL count too
        sizes = {"--env-max": (self.env_max, longest), "--heap-max": (self.heap_max, HEAP_MAX),
                 "--code-max": (self.code_max, CODE_MAX)}  # fmt: skip
        if self.layout:
            values = parse_layout(self.layout)
            for name, most in (("env-size", longest), ("heap-offset", HEAP_MAX),
                               ("code-offset", CODE_MAX)):  # fmt: skip
                sizes[f"--layout {name}"] = (int(values.get(name, 0)), most)
        for flag, (value, most) in sizes.items():
            if not 0 <= value <= most:
                why = f" (Linux takes environment strings of at most {MAX_ARG_STRLEN} bytes, " \
                      "MAX_ARG_STRLEN)" if "env" in flag else ""  # fmt: skip
                raise PerflabError(f"{flag} must be 0 to {most}{why}, not {value}")
        check_iterations(self.iterations)
        self._check_dimensions(objects)
        self._check_precision()
        self.check_controls()
        return self

    def _check_precision(self) -> None:
        """A precision within what a B/A interval can be asked for, a budget within a week."""
        if not 0 <= self.precision < 1 or self.precision != self.precision:
            raise PerflabError(
                f"--precision must be above 0 % and below 100 %, not {self.precision}"
            )
        if not 0 < self.budget <= LONGEST_S:
            raise PerflabError(
                f"--budget must be above 0 and at most a week ({LONGEST_S} s), not {self.budget}"
            )
        if self.precision and self.layout:
            raise PerflabError(
                "--precision draws layouts until B/A is that precise: leave --layout out"
            )

    def _check_dimensions(self, objects: tuple[int, int]) -> None:
        """What the setups vary must be something A and B can vary."""
        flag = "--layout" if self.layout else "--randomize"
        unknown = [d for d in self.randomize if d not in RANDOMIZE]
        if unknown:
            raise PerflabError(f"--randomize {','.join(map(str, self.randomize))}: "
                               f"{unknown[0]!r} is not one of {', '.join(RANDOMIZE)}")  # fmt: skip
        varied = self.varied()
        linked = [d for d in LINKED if d in varied]
        if linked and not all(objects):
            raise PerflabError(
                f"{flag} {linked[0]} needs --build, --objects-a/-b or --build-cmd-a/-b: "
                "perflab can relink only what it links"
            )
        if "link-order" in varied and objects[0] != objects[1]:
            raise PerflabError(
                f"{flag} link-order links A's and B's objects in one order, so they need as "
                f"many objects (A has {objects[0]}, B {objects[1]})"
            )
        if "aslr" in self.randomize and self.aslr != "off":
            raise PerflabError("--randomize aslr draws ASLR on or off per setup: leave --aslr out")
        if self.per_placement > 1:
            if not linked or self.layout or self.precision:
                raise PerflabError(
                    "--per-placement shares a code placement between setups: it needs random "
                    "setups (no --layout or --precision) that draw code-offset, link-order or "
                    "function-order"
                )
            if self.setups < 2 * self.per_placement:
                raise PerflabError(
                    f"--per-placement {self.per_placement} needs --setups of at least "
                    f"{2 * self.per_placement} (two placements), not {self.setups}"
                )
