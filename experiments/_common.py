"""What every gallery script shares: --quick/--out, where files go, and the side-by-side table."""

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import pandas as pd

from perflab import machine, provenance, results

DEFAULT_OUT = Path(__file__).resolve().parent / "out"
SHARED_NOTE = "2-CPU KVM guest shared with other work: expect noise"


# Exit status of a script this machine cannot run (a tool it needs is missing), as automake's
# test drivers use it: the gallery test reports it as skipped with the script's reason.
CANNOT_RUN_HERE = 77


def cannot_run_here(why: str) -> NoReturn:
    """Stop with the reason on stderr and CANNOT_RUN_HERE, so a missing tool is not a failure."""
    print(why, file=sys.stderr)
    raise SystemExit(CANNOT_RUN_HERE)


def parse(doc: str, argv: Sequence[str] | None = None) -> argparse.Namespace:
    """--quick (small, well under a minute) or the article's full size; --out DIR for the files."""
    p = argparse.ArgumentParser(description=doc.strip().splitlines()[0])
    p.add_argument(
        "--quick", action="store_true", help="small parameters (seconds), not the article's"
    )
    p.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help=f"output directory [{DEFAULT_OUT}]"
    )
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    args.started = time.perf_counter()
    return args


def name(script: str) -> str:
    """The prefix of every file a script writes: its own name."""
    return Path(script).stem


def save(df: pd.DataFrame, args, stem: str, **extra) -> Path:
    """Save a tidy frame with the metadata its run() attached plus the gallery's run mode."""
    # clocks.read_costs still returns a bare frame (issue 14 gives it run()): only such a frame
    # gets the machine's metadata here.
    base = results.metadata(df) or provenance.metadata()
    meta = {**base, "gallery": stem, "quick": args.quick}
    meta.update(extra)
    path = results.save(results.attach(df, meta), args.out / f"{stem}.parquet")
    print(f"data: {path} ({len(df)} rows)")
    return path


def figure(args, stem: str) -> Path:
    """Where a script draws its figure."""
    return args.out / f"{stem}.png"


def side_by_side(title: str, rows: Sequence[tuple[str, object, object]]) -> pd.DataFrame:
    """Print the article's numbers next to this machine's: quantity, article, here."""
    table = pd.DataFrame(rows, columns=["quantity", "article", "here"]).astype(str)
    print(f"\n{title}  (here: {machine.cpu_model()}; {SHARED_NOTE})")
    print(table.to_string(index=False))
    return table


def done(args) -> None:
    """One last line: how long the script took, so --quick stays quick."""
    mode = "quick" if args.quick else "full"
    print(f"\n{mode} run took {time.perf_counter() - args.started:.1f} s", file=sys.stderr)
