"""compare --precision on a real program: false claims between identical builds, decisions of a
real ~3 % difference, and the time a planned comparison takes against a fixed 10 x 10 design.

The program is brotli's command-line compressor (benchmarks/real_program.py). "Identical" is
one -O2 build run as A and as B; "copies" is that build under two paths (the same bytes in two
files: what differs is the path's length on the stack, and the physical pages each file sits
in, which each layout draws afresh); the real difference is -O2 against
-O2 -fno-tree-ch (about 2.5-3 % slower on an AMD EPYC). Each comparison is one
`compare --precision` with its own seed, so each draws its own layouts.

    PYTHONPATH=src python benchmarks/rigorous_compare.py [--identical 40] [--copies 40]
        [--different 20] [--precision 2%] [--plan 0.5%] [--plans 5] [--looped 4]

--looped N runs every comparison on brotli's encoder in perflab's repeat loop instead
(real_program.py --looped), N iterations a run: the fixed design is then 10 x 10 x N, and
--precision pilots at N iterations a run and plans the rest's.
"""

import argparse
import math
import shutil
import statistics
import time
from pathlib import Path

import real_program

from perflab.lab import compare
from perflab.lab.compare.plan import parse_fraction
from perflab.store import results


def one(a: list[str], b: list[str], precision: float, seed: int, iterations: int = 1) -> dict:
    """One --precision comparison: its B/A, interval, verdict, time and plan; iterations of
    the repeat loop a run (1: the brotli tool, one region a run)."""
    t0 = time.perf_counter()
    df = compare.compare(compare.program_side("A", a), compare.program_side("B", b),
                         precision=precision, seed=seed, iterations=iterations,
                         progress=False)  # fmt: skip
    took = time.perf_counter() - t0
    meta = results.metadata(df)
    total = compare.overall(df, compare.per_setup(df))
    lo, hi = total["ci_low"], total["ci_high"]
    return {
        "ratio": total["ratio"],
        "low": lo,
        "high": hi,
        "claim": "B slower" if lo > 1 else "B faster" if hi < 1 else "",
        "seconds": took,
        "setups": int(df["setup"].nunique()),
        "runs": len(df),
        "record": meta["precision"],
        "layout_share": (total["components"] or {}).get("setup", math.nan),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--identical", type=int, default=40, help="comparisons of identical builds")
    p.add_argument("--copies", type=int, default=40, help="comparisons of two copies of a build")
    p.add_argument("--different", type=int, default=20, help="comparisons of -O2/-fno-tree-ch")
    p.add_argument("--precision", default="2%", help="their --precision (default 2%%)")
    p.add_argument("--plan", default="0.5%", help="a precision that needs a plan (0.5%%)")
    p.add_argument("--plans", type=int, default=5, help="seeds of: a fixed 10 x 10 design, "
                   "--precision at its half-width, and at --plan")  # fmt: skip
    p.add_argument("--looped", type=int, default=0, metavar="N",
                   help="brotli's encoder in the repeat loop, N iterations a run")  # fmt: skip
    args = p.parse_args()
    looped, k = args.looped > 0, max(args.looped, 1)
    precision = parse_fraction(args.precision, "--precision")
    o2 = real_program.command(["-O2"], looped=looped)
    copy = Path(o2[0]).with_name(Path(o2[0]).name + "-copy")
    shutil.copy2(o2[0], copy)
    twin = [str(copy), *o2[1:]]
    slower = real_program.command(["-O2", "-fno-tree-ch"], looped=looped)

    for what, b, n in (("identical builds", o2, args.identical),
                       ("two copies of one build", twin, args.copies)):  # fmt: skip
        if not n:
            continue
        same = [one(o2, b, precision, seed, k) for seed in range(n)]
        false = [r for r in same if r["claim"]]
        seconds = sorted(r["seconds"] for r in same)[len(same) // 2]
        layouts = sorted(r["setups"] for r in same)[len(same) // 2]
        print(f"{what} at --precision {precision:.1%}: {len(false)} false claims of "
              f"{len(same)} ({len(false) / max(len(same), 1):.1%}); median {seconds:.1f} s and "
              f"{layouts} layouts a comparison")  # fmt: skip
        for r in false:
            print(f"  claimed {r['claim']}: B/A {r['ratio']:.4f} ({r['low']:.4f}-{r['high']:.4f})")

    if args.different:
        different(o2, slower, precision, args.different, k)
    if args.plans:
        planned(o2, slower, parse_fraction(args.plan, "--plan"), args.plans, k)


def different(o2: list[str], slower: list[str], precision: float, n: int, k: int) -> None:
    """A real difference at --precision: how often it is decided."""
    diff = [one(o2, slower, precision, 1000 + seed, k) for seed in range(n)]
    decided = [r for r in diff if r["claim"] == "B slower"]
    ratios = sorted(r["ratio"] for r in diff)
    print(f"-O2 against -O2 -fno-tree-ch at --precision {precision:.1%}: B slower decided in "
          f"{len(decided)} of {len(diff)} ({len(decided) / max(len(diff), 1):.0%}); B/A median "
          f"{ratios[len(ratios) // 2]:.4f}, from {ratios[0]:.4f} to {ratios[-1]:.4f}")  # fmt: skip


def planned(o2: list[str], slower: list[str], fine: float, n: int, k: int) -> None:
    """n fixed 10 x 10 designs; --precision at their median half-width (the precision the
    fixed design buys, one draw of it being luckier than another), its time against theirs;
    and --precision at `fine`, its time against what the pilot's plan predicted."""
    fixed = []
    for seed in range(2000, 2000 + n):
        t0 = time.perf_counter()
        df = compare.compare(compare.program_side("A", o2), compare.program_side("B", slower),
                             setups=10, repeat=10, seed=seed, iterations=k,
                             progress=False)  # fmt: skip
        total = compare.overall(df, compare.per_setup(df))
        fixed.append((time.perf_counter() - t0, total["half_width"]))
        design = "10 x 10" + f" x {k}" * (k > 1)
        print(f"fixed {design} (seed {seed}): {fixed[-1][0]:.1f} s, B/A {total['ratio']:.4f} "
              f"({total['ci_low']:.4f}-{total['ci_high']:.4f}), "
              f"±{total['half_width']:.2%}")  # fmt: skip
    took = statistics.median(t for t, _ in fixed)
    target = math.ceil(statistics.median(h for _, h in fixed) * 1e4) / 1e4
    same = [one(o2, slower, target, seed, k) for seed in range(2000, 2000 + n)]
    times = [r["seconds"] for r in same]
    print(f"--precision {target:.2%} (the fixed designs' median half-width): median "
          f"{statistics.median(times):.1f} s (from {min(times):.1f} to {max(times):.1f}) against "
          f"the fixed design's {took:.1f} s; less time in {sum(t < took for t in times)} of {n}; "
          f"reached in {sum(r['record']['reached'] for r in same)} of {n}")  # fmt: skip
    ratios, inside = [], []
    for seed in range(2000, 2000 + n):
        r = one(o2, slower, fine, seed, k)
        rec = r["record"]
        plan = next((x["planned"] for x in rec["rounds"] if x["planned"]), None)
        if plan:
            ratios.append(r["seconds"] / rec["predicted_s"])
            low, high = rec["predicted_range_s"]
            inside.append(low <= r["seconds"] <= high)
        print(f"--precision {fine:.1%} (seed {seed}): "
              f"{'reached' if rec['reached'] else 'not reached (' + rec['stopped'] + ')'} in "
              f"{len(rec['rounds'])} rounds, {r['seconds']:.1f} s over {r['setups']} layouts "
              f"({r['runs']} runs); " + (f"the pilot's plan ({plan}) predicted "
              f"{rec['predicted_s']:.1f} s ({low:.1f}-{high:.1f} s at "
              f"{rec['predicted_confidence']:.0%}): actual/predicted {ratios[-1]:.2f}" if plan
              else "the pilot reached it") + f"; B/A {r['ratio']:.4f} "
              f"({r['low']:.4f}-{r['high']:.4f}); layout share "
              f"{r['layout_share']:.0%}")  # fmt: skip
    shown = ", ".join(f"{x:.2f}" for x in ratios)
    print(f"--precision {fine:.1%}: within 1.3x of the pilot's prediction in "
          f"{sum(x <= 1.3 for x in ratios)} of the {len(ratios)} that needed a plan "
          f"(actual/predicted {shown}); inside the predicted range in {sum(inside)} of "
          f"{len(inside)}")  # fmt: skip


if __name__ == "__main__":
    main()
