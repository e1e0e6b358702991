"""Rubini's moremem: copy time vs size, 32 steps per octave, and the cache knees it shows.

Each sample times enough back-to-back copies to last MIN_STEPS timer steps (resolution.py), the
minimum of `trials` samples is kept, and the rows say how many copies a sample held: a copy of a
few bytes is far shorter than one step of a coarse TSC (26 ticks on some AMD guests).

The package: sweep (the sizes, the buffers, the run), knees (the caches' edges found in it),
report (its table, summary and figure).
"""

from perflab.lab.memcpy.knees import detect_knees, knee_report
from perflab.lab.memcpy.report import (
    per_size,
    plot,
    rated,
    resolved_rows,
    small_table,
    summarize,
    summary,
)
from perflab.lab.memcpy.sweep import (
    KERNELS,
    LLC_TIMES,
    MAX_BYTES,
    MEMORY_KEYS,
    MEMORY_SHARE,
    NO_LLC,
    PAGE,
    BufferAlignment,
    MemoryLock,
    check_kernel,
    copy,
    default_max,
    derivative,
    human_bytes,
    incr,
    measure,
    on_grid,
    parse_size,
    run,
    sizes,
)

__all__ = [
    "KERNELS",
    "LLC_TIMES",
    "MAX_BYTES",
    "MEMORY_KEYS",
    "MEMORY_SHARE",
    "NO_LLC",
    "PAGE",
    "BufferAlignment",
    "MemoryLock",
    "check_kernel",
    "copy",
    "default_max",
    "derivative",
    "detect_knees",
    "human_bytes",
    "incr",
    "knee_report",
    "measure",
    "on_grid",
    "parse_size",
    "per_size",
    "plot",
    "rated",
    "resolved_rows",
    "run",
    "sizes",
    "small_table",
    "summarize",
    "summary",
]
