"""Does this CPU pay for 4K aliasing? The same loads and stores, aliased mod 4096 or not.

Why a CPU shows env-size windows or none: the windows come from a stack slot meeting a
static modulo 4096 (see windows.py), and whether that costs anything is the CPU's affair.
Two kernels (csrc/alias.c), each timed with its load a distance after its store that
shares the store's low 12 bits and 64 bytes further (another line, other low bits), in
interleaved trials. The paper's loop is placed so that the pairs the sweep's prediction
names alias, and no others.

One set of trials lasts a few milliseconds: a snapshot of the core's state. On a 2-vCPU KVM
Xeon the same kernel in one process ran at 0.8 or at 1.4 ticks per iteration from one tenth
of a second to the next, and a check that read one snapshot once said +403 % where nine
later ones said 0 %. So the check takes rounds spread over time after an untimed warm-up,
and gives a verdict only where the rounds agree; where they do not it says "unstable".
"""

import contextlib
import hashlib
import json
import os
import re
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from perflab.core import bindings, files
from perflab.errors import PerflabError
from perflab.system import machine

PAGE = 4096
ALIASED = 2 * PAGE  # the store-load kernel's distance; the loop's default
LINE = 64  # the not-aliased twin's extra distance: another line, other low bits
# A round pays when its median trial shows at least this much: a lone preempted trial on
# a shared machine must not make a CPU look affected.
SHOWS = 0.05
# The verdict needs this share of the rounds on one side of SHOWS; fewer is "unstable".
AGREE = 0.75
ROUNDS = 7
GAP_S = 0.05  # between rounds, so they sample the core over a third of a second
# A stable check of the same kernels on the same CPU this long ago, in this process or another
# since this boot, is reused with its age: the verdict is the CPU's, and a third of a second
# each sweep in a notebook, a shell loop or a test session. An unstable one is looked at again.
RECENT_S = 60.0
_recent: dict[tuple, tuple[float, list[dict]]] = {}
STORED = "alias-check"  # the cache file's name (system.machine.calibration_path) before its key
KERNELS = {
    "store-load": "a store, then an independent load",
    "loop": "the paper's loop",
}
# The loop kernel's slots (csrc/alias.c, paper_loop): the statics side by side from the
# store's address, the stack slots side by side from the load's, as gcc lays out the loop.
STATICS = {"i": 0, "j": 4, "k": 8}
STACK = {"inc": 0, "g": 4}
_PAIR = re.compile(r"&(\w+) \(stack\) ≡ &(\w+) \(static\)")


def loop_pairs(apart: int) -> list[str]:
    """The (stack slot, static) pairs of the loop kernel that alias at this distance."""
    return [
        f"&{s} ≡ &{t}"
        for s, so in STACK.items()
        for t, to in STATICS.items()
        if (apart + so - to) % PAGE == 0
    ]


def loop_distances(predicted_pairs: Iterable[str]) -> list[int]:
    """Distances that make the loop kernel alias each predicted pair ("&inc (stack) ≡ &k
    (static) mod 4096", as windows.predict names them), in order, once each; none when no
    pair names the loop's own slots (another program's)."""
    found = []
    for text in predicted_pairs:
        for s, t in _PAIR.findall(text):
            if s in STACK and t in STATICS:
                found.append(ALIASED + STATICS[t] - STACK[s])
    return list(dict.fromkeys(found))


@dataclass(frozen=True)
class AliasCheck:
    """One kernel's verdict: ticks per iteration aliased and not, the penalty per round."""

    kernel: str
    aliased_ticks: float
    distinct_ticks: float
    penalty: float  # median over rounds of each round's median aliased/distinct - 1
    low: float  # the lowest round's median penalty
    high: float  # the highest round's
    shows: bool  # the rounds agree that it pays
    pairs: str = ""  # what aliases in the loop kernel; "" in records before rounds
    rounds: list[float] = field(default_factory=list)  # each round's median penalty
    verdict: str = ""  # "pays", "does not pay" or "unstable"; "" in records before rounds
    age_s: float = 0.0  # how long before this sweep's end it was measured (reused: RECENT_S)

    @property
    def stable(self) -> bool:
        """Whether the rounds agreed (records before rounds had one round: taken as given)."""
        return self.verdict != "unstable"

    def sentence(self) -> str:
        """One line a newcomer can read."""
        what = KERNELS[self.kernel]
        if self.kernel == "loop":
            what += f" with {self.pairs or ', '.join(loop_pairs(ALIASED))} mod {PAGE}"
        figures = (
            f"{what}: {self.aliased_ticks:.2f} vs {self.distinct_ticks:.2f} ticks/iteration "
            f"aliased vs not, per-iteration cost {self.penalty:+.0%}"
        )
        if not self.rounds:
            spread = f"(IQR {self.low:+.0%}..{self.high:+.0%})"
        else:
            paid = sum(r >= SHOWS for r in self.rounds)
            spread = (
                f"(rounds {self.low:+.1%}..{self.high:+.1%}, {paid} of {len(self.rounds)} "
                f"at {SHOWS:+.0%} or more)"
            )
        if not self.stable:
            return (
                f"{figures} {spread}: unstable here, the rounds disagree: the core's speed "
                "changed during the check (another task or tenant on it, a frequency "
                "change), so it says nothing either way; run again on a quieter CPU"
            )
        what = "pays" if self.shows else "does not pay"
        return f"{figures} {spread}: this CPU {what} for 4K aliasing here"


def _verdict(rounds: list[float]) -> str:
    """The side of SHOWS that AGREE of the rounds take, else unstable."""
    paid = sum(r >= SHOWS for r in rounds)
    if paid >= AGREE * len(rounds):
        return "pays"
    if len(rounds) - paid >= AGREE * len(rounds):
        return "does not pay"
    return "unstable"


def check_many(
    kernels: list[tuple[str, int]],
    iterations: int = 65536,
    trials: int = 11,
    rounds: int = ROUNDS,
    gap_s: float = GAP_S,
) -> list[AliasCheck]:
    """Time each (kernel, aliased distance) in `rounds` rounds of `trials` interleaved
    pairs, the kernels taking turns inside each round, after one untimed pair each."""
    for kernel, apart in kernels:
        bindings.alias_time(kernel, apart, apart + LINE, iterations, 2)
    ticks: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in kernels]
    for r in range(rounds):
        if r:
            time.sleep(gap_s)
        for got, (kernel, apart) in zip(ticks, kernels, strict=True):
            got.append(bindings.alias_time(kernel, apart, apart + LINE, iterations, trials))
    out = []
    for got, (kernel, apart) in zip(ticks, kernels, strict=True):
        a = np.concatenate([x for x, _ in got]).astype(float)
        d = np.concatenate([y for _, y in got]).astype(float)
        medians = [
            float(np.median(x.astype(float) / np.maximum(y.astype(float), 1) - 1)) for x, y in got
        ]
        verdict = _verdict(medians)
        out.append(
            AliasCheck(
                kernel,
                float(np.median(a)) / iterations,
                float(np.median(d)) / iterations,
                float(np.median(medians)),
                min(medians),
                max(medians),
                verdict == "pays",
                ", ".join(loop_pairs(apart)) if kernel == "loop" else "",
                medians,
                verdict,
            )
        )
    return out


def check(
    kernel: str, iterations: int = 65536, trials: int = 11, rounds: int = ROUNDS
) -> AliasCheck:
    """One kernel at its default distance (see check_many)."""
    return check_many([(kernel, ALIASED)], iterations, trials, rounds)[0]


def check_all(
    predicted_pairs: Iterable[str] = (),
    iterations: int = 65536,
    trials: int = 11,
    cpu: int | None = None,
) -> list[dict]:
    """The store-load kernel and the loop at each predicted pair (at its default distance
    when none is the loop's), as records for a result's metadata, timed on `cpu` (the one a
    sweep measures on; None: wherever this thread runs); the same kernels checked stable here
    less than RECENT_S ago, by this process or another, are not timed again (their records say
    age_s)."""
    loops = loop_distances(predicted_pairs) or [ALIASED]
    kernels = [("store-load", ALIASED), *(("loop", d) for d in loops)]
    key, now = (tuple(kernels), iterations, trials, cpu), time.monotonic()
    at, records = _recent.get(key) or _stored(key)
    if records and 0 <= now - at < RECENT_S:
        return [{**r, "age_s": round(now - at, 3)} for r in records]
    before = os.sched_getaffinity(0)
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    try:
        checks = check_many(kernels, iterations, trials)
    finally:
        os.sched_setaffinity(0, before)
    records = [asdict(c) for c in checks]
    if all(c.stable for c in checks):
        _recent[key] = (now, records)
        _store(key, now, records)
    return records


def _path(key: tuple) -> Path:
    """The cache file of one check's key on this machine and core."""
    digest = hashlib.sha256(json.dumps(key).encode()).hexdigest()[:16]
    return machine.calibration_path(f"{STORED}-{digest}")


def _store(key: tuple, at: float, records: list[dict]) -> None:
    """The check for the next process in this boot; one that cannot be kept is timed again."""
    doc = {"identity": machine.identity(), "boot_id": machine.read_text(machine.BOOT_ID),
           "key": key, "at": at, "records": records}  # fmt: skip
    with contextlib.suppress(OSError, PerflabError, ValueError):
        text = json.dumps(doc, allow_nan=False) + "\n"
        files.atomic(_path(key), lambda tmp: tmp.write_text(text))


def _stored(key: tuple) -> tuple[float, list[dict]]:
    """This boot's stable check of `key` on this machine and core (CLOCK_MONOTONIC's `at` holds
    across processes within a boot), or (0, []) when there is none or the file is unreadable,
    corrupt, planted, or another boot's or machine's: never trusted."""
    boot = machine.read_text(machine.BOOT_ID)
    try:
        doc = json.loads(files.read_private(_path(key)))
        mine = bool(boot) and doc["boot_id"] == boot and doc["identity"] == machine.identity()
        same = doc["key"] == json.loads(json.dumps(key))
        checks = [AliasCheck(**r) for r in doc["records"]]
        at = doc["at"]
    except (OSError, ValueError, TypeError, KeyError, PerflabError):
        return 0.0, []
    kinds = [c.kernel for c in checks] == [k for k, _ in key[0]]
    verdicts = all(c.verdict in ("pays", "does not pay") for c in checks)
    if mine and same and kinds and verdicts and type(at) is float:
        return at, [asdict(c) for c in checks]
    return 0.0, []
