"""easyperf's per-thread analysis: who runs, who spins, who waits, as threads are added.

A fixed amount of serial work (every step under one lock) split over 1..N threads, profiled
with `perflab profile --samples`: with a mutex the waiters block in futex and utilisation stays
near one thread; with a spin lock every thread stays busy and the samples move into the lock,
as easyperf's ed_rec_thread grew from 0.18 % of h264dec's samples at 1 worker to 17.53 % at 8.
Neither finishes the work sooner with more threads.
"""

import _common
import pandas as pd

from perflab import contention, machine, perfsamples, profile, results

FULL = {"iterations": 200_000, "work": 2_000, "factors": (1, 2, 4), "repeat": 5}
QUICK = {"iterations": 20_000, "work": 2_000, "factors": (1,), "repeat": 1}


def main(argv=None) -> None:
    args = _common.parse(__doc__, argv)
    stem = _common.name(__file__)
    params = QUICK if args.quick else FULL
    planned = perfsamples.plan()
    if planned.perf is None:
        _common.cannot_run_here(f"perf cannot sample here: {planned.note}")
    cores = len(machine.usable_cpus())
    counts = sorted({1, *(f * cores for f in params["factors"])})
    profiles: list = []
    table = contention.run(
        counts,
        iterations=params["iterations"],
        work=params["work"],
        repeat=params["repeat"],
        profiles=profiles,
    )
    note = results.metadata(profiles[0])["samples_note"]
    if note.startswith("not supported"):
        _common.cannot_run_here(f"perf cannot sample here: {note}")
    _common.save(table, args, stem)
    # the last run with the most threads, of each kind
    most = [p for p in profiles if results.metadata(p)["profiled"][2] == str(counts[-1])]
    for df in most[-2:]:
        kind = results.metadata(df)["profiled"][1]
        _common.save(df, args, f"{stem}_{kind}_threads")
        print(f"\n{kind}, {counts[-1]} threads: hottest symbols per thread")
        print(perfsamples.summarize(perfsamples.frame(df), top=3).to_string(index=False))
        profile.plot(df, args.out / f"{stem}_{kind}_timeline.png")
    contention.plot(table, _common.figure(args, stem))
    medians = contention.summarize(table)
    print(f"\nmedians of {params['repeat']} runs\n{medians.round(2).to_string(index=False)}")
    print(f"figure: {_common.figure(args, stem)}")
    _compare(medians, counts, results.metadata(table)["samples_event"])
    _common.done(args)


def _compare(table: pd.DataFrame, counts: list[int], event: str) -> None:
    t = table.set_index(["kind", "threads"])
    lo, hi = counts[0], counts[-1]
    spin_share = " -> ".join(f"{t.loc[('spin', n), 'waiting_pct']:.1f} %" for n in counts)
    spin_samples = " -> ".join(f"{t.loc[('spin', n), 'samples']:,.0f}" for n in counts)
    _common.side_by_side(
        "Per-thread profiles of a program that does not scale",
        [
            (
                "share of samples in the spin loop",
                "ed_rec_thread 0.18 % -> 3.62 % -> 17.53 % (1, 4, 8 workers)",
                f"spin_lock {spin_share} ({', '.join(map(str, counts))} threads)",
            ),
            (
                "samples (they follow CPU time)",
                "282,808 -> 330,029 -> 556,685",
                f"{spin_samples} ({event})",
            ),
            (
                f"utilisation at {hi} threads (threads busy)",
                "5 threads -> 4 busy",
                f"spin {t.loc[('spin', hi), 'utilisation']:.2f}, "
                f"mutex {t.loc[('mutex', hi), 'utilisation']:.2f}",
            ),
            (
                f"speedup {lo} -> {hi} threads",
                "h264dec: none beyond 4 (4 cores)",
                f"spin {t.loc[('spin', hi), 'speedup']:.2f}, "
                f"mutex {t.loc[('mutex', hi), 'speedup']:.2f} (serial work)",
            ),
            (
                "a thread's time blocked (strace futex+read)",
                "16.4 s futex + 2.2 s read of 21 s (~80 %)",
                f"mutex workers blocked {t.loc[('mutex', hi), 'blocked_pct']:.0f} % of their "
                f"lives at {hi} threads (futex), spin {t.loc[('spin', hi), 'blocked_pct']:.0f} %",
            ),
        ],
    )


if __name__ == "__main__":
    main()
