"""Rubini's moremem: copy time vs size, 32 steps per octave, and the cache knees it shows.

Each sample times enough back-to-back copies to last MIN_STEPS timer steps (resolution.py), the
minimum of `trials` samples is kept, and the rows say how many copies a sample held: a copy of a
few bytes is far shorter than one step of a coarse TSC (26 ticks on some AMD guests).

The package: this light module (the plan, its registry entry, the sizes and alignments it
reads), sweep (the sizes, the buffers, the run), knees (the caches' edges found in it), report
(its table, summary and figure); their names load on first use.
"""

from dataclasses import dataclass

from perflab.core import constants
from perflab.errors import PerflabError
from perflab.plan import controls
from perflab.plan.base import Plan, option
from perflab.plan.controls import PAGE
from perflab.plan.experiment import Experiment, lazy_api

KERNEL_NAMES = tuple(constants.COPY_KERNELS)
MAX_BYTES = 1 << 34


def parse_size(text: str | int) -> int:
    """'1MB', '64K', '4096', '2GiB' -> bytes (binary units, as the article's 64kB caches)."""
    if isinstance(text, int):
        return text
    units = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = text.strip().upper().removesuffix("IB").removesuffix("B")
    num, unit = (s[:-1], s[-1]) if s and s[-1] in units else (s, "")
    try:
        value = float(num) * units[unit]
    except ValueError:
        raise PerflabError(f"bad size {text!r}: use bytes or K/M/G, e.g. 64K, 1M") from None
    if value < 1 or value != int(value):
        raise PerflabError(f"bad size {text!r}: must be a whole number of bytes >= 1")
    return int(value)


def _max_size(text: str | None) -> int | None:
    """--max as bytes, within what two buffers of it take; None: the default's choice."""
    if text is None:
        return None
    return controls.check_count("", parse_size(text), 1, 2, what="its two buffers")


@dataclass(frozen=True)
class BufferAlignment:
    """Where the buffers start: `align` is the exact alignment of both, `offset` shifts dst."""

    align: int = PAGE
    offset: int = 0

    def check(self) -> None:
        """Refuse alignments that are not powers of two and negative or huge offsets."""
        if self.align < 1 or self.align & (self.align - 1):
            raise PerflabError(f"--align must be a power of two, not {self.align}")
        if not 0 <= self.offset < PAGE:
            raise PerflabError(f"--offset must be in 0..{PAGE - 1}, not {self.offset}")

    @property
    def skew(self) -> int:
        """Bytes past a page boundary: align < page lands exactly on `align`, not on 2*align."""
        return self.align % PAGE


@dataclass(frozen=True)
class MemcpyPlan(Plan):
    """The sizes swept (1 byte to max_bytes), the samples and sweeps, the copy, the buffers'
    placement and lock, and how the summary reads it (small) and the verb prints it (full)."""

    max_bytes: int | None = option(
        "--max", None, "Largest copy, e.g. 64M (default: 4x the last-level cache, so its knee "
        "shows, within a quarter of the memory available and 30 s of copying; the output says "
        "which bound held).", parse=_max_size, usage=True, metavar="SIZE", shown=False,
    )  # fmt: skip
    trials: int = option("--trials", 10, "Samples per size, each of enough copies to last 100 "
                         "timer steps; the minimum is kept.", least=1, each_s=controls.CALL_S,
                         what="its copies")  # fmt: skip
    repeat: int = option("--repeat", 1, "Sweeps of the same sizes, one after the other: runs "
                         "per size that `perflab diff` compares (the summary takes each size's "
                         "median).", least=1, each_s=controls.CALL_S,
                         what="its sweeps")  # fmt: skip
    kernel: str = option("--kernel", "libc", "Copy implementation: glibc memcpy, one rep movsb, "
                         "or a word-then-byte C loop.", choices=KERNEL_NAMES)  # fmt: skip
    align: int = option("--align", PAGE, "Exact alignment of both buffers (power of two; 1 puts "
                        "them on odd addresses).", least=1)  # fmt: skip
    offset: int = option("--offset", 0, "Extra bytes that move the destination against the "
                         "source (misaligned copies).", least=0)  # fmt: skip
    small: int = option("--small", 32, "Sizes up to this go in the small-size table (Riquadro "
                        "3).", least=0)  # fmt: skip
    full: bool = option("--full", False, "Print every size, as moremem does.", display=True)
    lock: bool = option("--no-mlock", True, "Do not mlockall (to see what page faults do to the "
                        "curve).")  # fmt: skip

    def check_more(self) -> None:
        BufferAlignment(self.align, self.offset).check()
        if self.max_bytes is not None and not 1 <= self.max_bytes <= MAX_BYTES:
            raise PerflabError(f"--max must be between 1 byte and {MAX_BYTES >> 30} GiB, "
                               f"not {self.max_bytes}")  # fmt: skip


EXPERIMENT = Experiment(
    name="memcpy",
    module="perflab.lab.memcpy",
    verb="sweep memcpy",
    columns=frozenset({"kernel", "size", "ticks", "ticks_per_byte"}),
    points=("size",),
    value="ticks",
    defines=("trials", "align", "offset"),
    conditions=("kernel",),
    help="Copy time vs size, 32 steps per octave, the minimum of --trials; cache knees found.",
    rows=("size",),
    plan=MemcpyPlan,
    label="memcpy 1..{max_bytes} B",
    prepare="verb_values",
    preface="every_size",
)

SWEEP = ("KERNELS", "LLC_TIMES", "MEMORY_KEYS", "MEMORY_SHARE", "NO_LLC", "MemoryLock",
         "check_kernel", "copy", "default_max", "derivative", "human_bytes", "incr", "measure",
         "on_grid", "run", "sizes", "verb_values")  # fmt: skip
REPORT = ("every_size", "per_size", "plot", "rated", "resolved_rows", "small_table", "summarize",
          "summary")  # fmt: skip
KNEES = ("detect_knees", "knee_report")
MORE = {f"{__name__}.report": REPORT, f"{__name__}.knees": KNEES}
__getattr__, __dir__ = lazy_api(__name__, f"{__name__}.sweep", SWEEP, MORE)
