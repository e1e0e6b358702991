"""FileGuard's tables (Wijata): open() and read() cost, min/max/mean with 10 best and 10 worst
dropped, in TSC cycles and µs, 10000 trials each.

FileGuard compared a kernel module with a user-space guard; kernel/user crossings cost ~20-30 k
cycles (~50 µs at 572 MHz) and maxima reached 30 M cycles while means stayed moderate: report
robust statistics. perflab times the plain system calls the same way.
"""

import _common

from perflab import syscalls

FULL, QUICK = 10000, 2000
TRIM = 10


def main(argv=None) -> None:
    args = _common.parse(__doc__, argv)
    stem = _common.name(__file__)
    df = syscalls.run(trials=QUICK if args.quick else FULL)
    table = syscalls.summarize(df, trim=TRIM)
    _common.save(df, args, stem, trim=TRIM)
    syscalls.plot(df, _common.figure(args, stem))
    print(f"figure: {_common.figure(args, stem)}")
    print(syscalls.fileguard_text(table).to_string())
    rows = table.set_index("call")
    worst = rows["max"].idxmax()
    _common.side_by_side(
        f"System call costs, {len(df) // len(rows)} trials, {TRIM} best and worst dropped",
        [
            ("trials", "10000 (or 5000)", f"{len(df) // len(rows)}"),
            ("open: mean / trimmed (µs)", "~50 µs (through the module)", _us(rows, "open+close")),
            ("read: mean / trimmed (µs)", "~50 µs (through the module)", _us(rows, "read")),
            (
                "max / trimmed mean",
                "30 M cycles max, moderate means",
                f"x{rows.loc[worst, 'max'] / rows.loc[worst, 'trimmed_mean']:.0f} ({worst})",
            ),
        ],
    )
    _common.done(args)


def _us(rows, call: str) -> str:
    r = rows.loc[call]
    return f"{r['mean_us']:.3f} / {r['trimmed_mean_us']:.3f}"


if __name__ == "__main__":
    main()
