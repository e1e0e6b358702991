"""Mytkowicz et al. (ASPLOS 2009): the environment's size moves a trivial loop's speed.

The paper's loop (static i, j, k += inc, 65536 times) run with an empty environment except A=,
A=a, A=aa, ... up to 8192 characters, 100 runs per size, ASLR off for the child only.
"""

import time

import _common

from perflab import env_size

FULL = {"min_size": 0, "max_size": 8192, "step": 1, "repeat": 100}
QUICK = {"min_size": 0, "max_size": 8192, "step": 8, "repeat": 3}


def main(argv=None) -> None:
    args = _common.parse(__doc__, argv)
    stem = _common.name(__file__)
    params = QUICK if args.quick else FULL
    t0 = time.perf_counter()
    df = env_size.sweep(aslr="off", **params)
    took = time.perf_counter() - t0
    summary = env_size.summarize(df)
    windows = env_size.detect_windows(summary)
    _common.save(df, args, stem, sweep_s=took)
    env_size.plot(df, _common.figure(args, stem), windows=windows, summary=summary)
    print(f"figure: {_common.figure(args, stem)}")
    print(windows.to_string(index=False) if len(windows) else "no window found")
    baseline = windows.attrs.get("baseline", float(summary["median"].median()))
    _common.side_by_side(
        "Environment size vs speed, ASLR off",
        [
            ("runs", "8193 sizes x 100", f"{len(df)} ({len(summary)} sizes x {params['repeat']})"),
            ("loop cost (median per size)", "~490,000 cycles (PAPI)", f"{baseline:,.0f} ticks"),
            (
                "peaks above the mean",
                "14-30 %",
                _pct(windows["excess"]) if len(windows) else "none",
            ),
            ("window width", "16 sizes", _join(windows["width"]) if len(windows) else "-"),
            ("window spacing", "~4096 B (4093)", _join(windows["spacing"].dropna())),
            ("sweep time", "1 h 45", f"{took / 60:.1f} min"),
        ],
    )
    _common.done(args)


def _pct(values) -> str:
    return ", ".join(f"+{v:.0%}" for v in values)


def _join(values) -> str:
    return ", ".join(f"{v:,.0f}" for v in values) or "-"


if __name__ == "__main__":
    main()
