"""Mytkowicz et al. (ASPLOS 2009): the order of the .o files on the link line moves performance.

perflab's four-unit workload linked in every one of its 24 orders, each run `repeat` times
under the env-size sweep's controls; the spread between orders, and the alignment that
separates fast orders from slow ones (the paper's causal analysis).
"""

import _common

from perflab import link_order

FULL = {"permutations": "all", "repeat": 50}
QUICK = {"permutations": "all", "repeat": 8}


def main(argv=None) -> None:
    args = _common.parse(__doc__, argv)
    stem = _common.name(__file__)
    params = QUICK if args.quick else FULL
    df = link_order.sweep(aslr="off", **params)
    summary = link_order.summarize(df)
    spread = link_order.spread(df, summary)
    effects = link_order.alignment_effects(summary, link_order.layout_frame(df))
    _common.save(df, args, stem)
    link_order.plot(df, _common.figure(args, stem), summary, effects)
    print(f"figure: {_common.figure(args, stem)}")
    print(summary[["link_order", "n", "median", "mad", "min"]].to_string(index=False))
    best = effects.iloc[0] if len(effects) else None
    _common.side_by_side(
        "Link order vs speed",
        [
            ("orders measured", "several link orders of one program", f"{len(summary)}"),
            (
                "slowest / fastest order",
                "performance changes (the post gives no number)",
                f"{spread['ratio']:.3f} (95% CI {spread['ci_low']:.3f}-{spread['ci_high']:.3f})",
            ),
            (
                "cause (causal analysis)",
                "code alignment",
                f"{best['feature']} (p={best['p']:.3f})" if best is not None else "none found",
            ),
        ],
    )
    _common.done(args)


if __name__ == "__main__":
    main()
