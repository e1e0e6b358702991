"""Rubini's noise sources: a page fault in the timed region, and mlockall as the remedy.

First touch of fresh anonymous pages (one minor fault each) vs touching them again vs pages
mlock'ed first: what a page fault adds to a measurement and why Rubini asks for mlockall.
"""

import _common

from perflab import pagefault

FULL = {"pages": 1024, "reps": 20}
QUICK = {"pages": 256, "reps": 10}


def main(argv=None) -> None:
    args = _common.parse(__doc__, argv)
    stem = _common.name(__file__)
    df = pagefault.run(**(QUICK if args.quick else FULL))
    table = pagefault.summarize(df).set_index("condition")
    _common.save(df, args, stem)
    pagefault.plot(df, _common.figure(args, stem))
    print(f"figure: {_common.figure(args, stem)}")
    print(table.to_string())
    _common.side_by_side(
        "Page faults as noise (ticks per 4 KiB page, median)",
        [
            (
                "first call of sin(1): page fault + miss",
                "5716 vs 38 cycles (x150)",
                f"first touch x{table.loc['first touch', 'x_touch_again']:.0f} touching again",
            ),
            (
                "mlockall removes the faults",
                "recommended",
                f"mlocked x{table.loc['mlocked', 'x_touch_again']:.2f} touching again",
            ),
        ],
    )
    _common.done(args)


if __name__ == "__main__":
    main()
