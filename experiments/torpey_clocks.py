"""Torpey's "Clock sources in Linux": clocks.c (resolution, current value) and ClockBench.

ClockBench reads each clock in a tight loop and reports samples, min, max, avg, median, stdev
in ns (his machine: REALTIME/MONOTONIC ~55 ns, COARSE ~0, MONOTONIC_RAW ~690 ns (a syscall
then), cpuid+rdtsc ~93 ns, rdtsc ~25 ns), and asks for an invariant TSC as clocksource.
"""

import _common

from perflab import clocks

FULL, QUICK = 1_000_000, 2000  # ClockBench took a million samples of each clock
ARTICLE_NS = {
    "CLOCK_REALTIME": "~55",
    "CLOCK_REALTIME_COARSE": "~0",
    "CLOCK_MONOTONIC": "~55",
    "CLOCK_MONOTONIC_RAW": "~690 (syscall)",
    "CLOCK_MONOTONIC_COARSE": "~0",
    "cpuid+rdtsc": "~93",
    "rdtsc": "~25",
    "rdtscp": "cheaper than cpuid",
}


def main(argv=None) -> None:
    args = _common.parse(__doc__, argv)
    stem = _common.name(__file__)
    print(clocks.resolution_table().to_string(index=False))
    costs = clocks.read_costs(QUICK if args.quick else FULL)
    table = clocks.cost_table(costs)
    _common.save(costs, args, stem)
    clocks.plot(costs, _common.figure(args, stem), table)
    print(f"figure: {_common.figure(args, stem)}")
    print(table.to_string(index=False))
    report = clocks.tsc_report()
    rows = table.set_index("method")
    out = [
        (f"{m}: median (batch) ns", ARTICLE_NS[m], _ns(rows, m))
        for m in ARTICLE_NS
        if m in rows.index
    ]
    out.append(("clocksource", "tsc (invariant TSC)", report.get("clocksource", "?")))
    out.append(("verdict", "use an invariant TSC", report.get("verdict", "?").split(":")[0]))
    _common.side_by_side("Cost of one clock read", out)
    _common.done(args)


def _ns(rows, method: str) -> str:
    return f"{rows.loc[method, 'median']:.1f} ({rows.loc[method, 'batch_ns']:.1f})"


if __name__ == "__main__":
    main()
