"""Rubini's trig.c and trig-rep: sin(1.0), tan(1.0), sin(0.0), each call timed alone.

The first call pays a page fault and a cache miss, the second only a cache miss, the third
neither; repeated, the minimum converges: take the minimum of repeats. perflab's cold runs are
fresh forked children whose first call into libm faults, as the article's first run did.
"""

import math

import _common

from perflab import trig

FULL = {"repeat": 10, "cold_runs": 10}
QUICK = {"repeat": 10, "cold_runs": 5}


def main(argv=None) -> None:
    args = _common.parse(__doc__, argv)
    stem = _common.name(__file__)
    df = trig.run(**(QUICK if args.quick else FULL))
    table = trig.summarize(df).set_index("call")
    _common.save(df, args, stem)
    trig.plot(df, _common.figure(args, stem))
    print(f"figure: {_common.figure(args, stem)}")
    print(table.to_string())
    print(trig.convergence(df).to_string())
    calls = list(table.index)
    article_first, article_min = (5716, 1202, 62), (38, 124, 55)
    rows = []
    for call, first, low in zip(calls, article_first, article_min, strict=True):
        rows.append((f"{call}: first call (cold process)", f"{first:,} cycles", _cold(table, call)))
        warm = f"{table.loc[call, 'warm_min']:.1f} ticks per call"
        rows.append((f"{call}: minimum of 10", f"{low} cycles", warm))
    _common.side_by_side("trig: one libm call, cold and warm", rows)
    _common.done(args)


def _cold(table, call: str) -> str:
    median = table.loc[call, "cold_median"]
    if math.isnan(median):  # the first call lasted less than 100 timer steps
        return "unresolved (under 100 timer steps)"
    return f"{median:,.0f} ticks (median of cold children)"


if __name__ == "__main__":
    main()
