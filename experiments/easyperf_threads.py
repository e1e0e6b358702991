"""easyperf's multithreaded analysis: scaling, CPU utilisation and synchronisation overhead.

A fixed amount of work split over 1..N threads (strong scaling, as easyperf's fixed video):
the `loop` kernel (independent work) stops scaling at the number of cores, as h264dec did
after 4 on 4 cores / 8 threads; the `spin` kernel (compare-and-swap on one shared counter)
shows the overhead easyperf counted as 36 % more instructions at 8 threads: without a PMU
perflab counts the failed CAS instead.
"""

import _common
import pandas as pd

from perflab import machine, threads

FULL = {"loop": 4000, "spin": 400, "repeat": 3}
QUICK = {"loop": 150, "spin": 60, "repeat": 2}


def main(argv=None) -> None:
    args = _common.parse(__doc__, argv)
    stem = _common.name(__file__)
    params = QUICK if args.quick else FULL
    cores = len(machine.usable_cpus())
    # Twice the cores, as easyperf's 8 threads on 4 cores (there, hyper-threads).
    most = 2 * cores
    tables = {}
    for kernel in ("loop", "spin"):
        df = threads.thread_count.run(
            most,
            kernel,
            loops=params[kernel],
            repeat=params["repeat"],
            oversubscribe=True,
            priority=threads.Priority(rt=True, rt_limit=30.0),
        )
        tables[kernel] = threads.thread_count.summarize(df)
        _common.save(df, args, f"{stem}_{kernel}", kernel=kernel)
        threads.thread_count.plot(df, args.out / f"{stem}_{kernel}.png")
        print(f"figure: {args.out / f'{stem}_{kernel}.png'}")
        print(f"{kernel} kernel\n{_shown(tables[kernel]).to_string(index=False)}")
    loop = tables["loop"].set_index("threads")
    spin = tables["spin"].set_index("threads")
    _common.side_by_side(
        "Thread scaling and synchronisation overhead",
        [
            (
                f"threads beyond the cores: {cores} -> {most}",
                "4 -> 8 (4 cores, 8 HT): no gain",
                f"x{loop.loc[most, 'speedup'] / loop.loc[cores, 'speedup']:.2f} (no SMT here)",
            ),
            (
                f"speedup at {cores} / {most} threads",
                "~4 / no better",
                f"{loop.loc[cores, 'speedup']:.2f} / {loop.loc[most, 'speedup']:.2f}",
            ),
            ("busy threads (utilisation)", "5 threads -> 4 busy", _busy(loop)),
            (
                f"spin: extra work at {cores} threads",
                "+36 % instructions at 8 threads",
                f"+{spin.loc[cores, 'retry_pct']:.0f} % failed CAS (no PMU: no instructions)",
            ),
            (
                f"spin: speedup at {cores} threads",
                "slower with more threads",
                f"{spin.loc[cores, 'speedup']:.2f}",
            ),
        ],
    )
    _common.done(args)


def _shown(table: pd.DataFrame) -> pd.DataFrame:
    """The columns that hold numbers here (instructions and IPC are NaN without a PMU)."""
    return table.dropna(axis=1, how="all")


def _busy(loop: pd.DataFrame) -> str:
    n = int(loop.index.max())
    return f"{n} threads -> {loop.loc[n, 'utilisation']:.1f} busy"


if __name__ == "__main__":
    main()
