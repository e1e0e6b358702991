"""DjiBee's cputime_core_vs_ht: one thread, then two on the same CPU, two hyper-threads, two cores.

The post's do_loop (integer and double operations, -l 4000 loops of 100000) in 1 then 2 pinned
threads released on a barrier, CPU time and elapsed time; then its perturbation: hog threads on
the measured CPUs, and the same with `nice -n -20`.
"""

import _common
import pandas as pd

from perflab import machine, threads

FULL_LOOPS, QUICK_LOOPS = threads.POST_LOOPS, 150


def main(argv=None) -> None:
    args = _common.parse(__doc__, argv)
    stem = _common.name(__file__)
    loops = QUICK_LOOPS if args.quick else FULL_LOOPS
    print(machine.topology().to_string(index=False))  # the post's `lscpu -p`
    # SCHED_RR keeps the other tenants of this shared machine off our CPUs, as the post's
    # high priority did (without permission: one warning, normal priority).
    rt = threads.Priority(rt=True, rt_limit=30.0)
    df = threads.core_vs_ht.run(loops=loops, repeat=2 if args.quick else 1, priority=rt)
    summary = threads.core_vs_ht.summarize(df)
    _common.save(df, args, stem, loops=loops)
    threads.core_vs_ht.plot(df, _common.figure(args, stem))
    print(f"figure: {_common.figure(args, stem)}")
    print(summary.to_string(index=False))
    perturbed = _perturbation(loops, args)
    _common.save(perturbed, args, f"{stem}_perturbed", loops=loops)
    rows = summary.set_index("placement")
    walls = (
        perturbed[perturbed["threads"] == 1].groupby("condition", sort=False)["wall_ns"].median()
    )
    alone = walls["alone"]
    _common.side_by_side(
        "Core vs hyper-thread (ratios: 2 threads / 1 thread)",
        [
            ("1 thread, 4000 loops", "10.7 s", _scaled(rows, "two cores", loops)),
            ("hyper-threads: CPU time", "+51 % each", _ratio(rows, "hyper-threads", "cpu_ratio")),
            ("two cores: CPU, wall", "2x CPU, same wall", _pair(rows, "two cores")),
            ("same CPU: CPU, wall", "2x CPU, 2x wall", _pair(rows, "same cpu")),
            ("hogs on the CPUs: wall", "10.7 s -> 66 s (x6.2)", f"x{walls['hogs'] / alone:.1f}"),
            ("hogs + nice -20: wall", "-> 17 s (x1.6)", f"x{walls['hogs, nice -20'] / alone:.1f}"),
        ],
    )
    _common.done(args)


def _perturbation(loops: int, args) -> pd.DataFrame:
    """The post's trial: hog threads on both measured CPUs, at normal priority, then nice -20."""
    cpus = machine.usable_cpus()[:2]
    hogs = [threads.Perturbation("cpu", c) for c in cpus for _ in range(2)]
    frames = []
    for name, perturb, prio in (
        ("alone", [], threads.Priority()),
        ("hogs", hogs, threads.Priority()),
        ("hogs, nice -20", hogs, threads.Priority(nice=-20)),
    ):
        df = threads.core_vs_ht.run(loops=loops, cpus=cpus, perturb=perturb, priority=prio)
        df.insert(0, "condition", name)
        frames.append(df)
    out = pd.concat(frames, ignore_index=True)
    out.attrs = frames[0].attrs
    return out


def _scaled(rows, placement: str, loops: int) -> str:
    if placement not in rows.index:
        return "-"
    ms = rows.loc[placement, "cpu_ms_1"]
    return f"{ms / 1e3 * threads.POST_LOOPS / loops:.1f} s (CPU; {loops} loops: {ms:.0f} ms)"


def _ratio(rows, placement: str, column: str) -> str:
    if placement not in rows.index or pd.isna(rows.loc[placement, column]):
        label = rows.loc[placement, "cpus"] if placement in rows.index else "absent"
        return f"not here ({label})"
    return f"x{rows.loc[placement, column]:.2f}"


def _pair(rows, placement: str) -> str:
    return (
        f"{_ratio(rows, placement, 'cpu_ratio')} CPU, {_ratio(rows, placement, 'wall_ratio')} wall"
    )


if __name__ == "__main__":
    main()
