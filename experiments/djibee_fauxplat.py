"""DjiBee's FauxPlat/sec: a CPU-power index (loops per CPU second), alone and perturbed.

The post: 4000 loops of 100000 in 10.696 s = 373.97 FauxPlat/sec; a CPU load on the same CPU
costs 10 %, a cache-thrashing load 20 %, a same-priority real-time load nothing (CPU time is
measured), a frequency change x2. perflab runs the index alone and under a CPU hog, a cache
thrasher and a real-time hog on the measured CPU, repeats interleaved.
"""

import _common

from perflab import machine, threads

FULL = {"loops": threads.POST_LOOPS, "repeat": 5}
QUICK = {"loops": 60, "repeat": 5}


def main(argv=None) -> None:
    args = _common.parse(__doc__, argv)
    stem = _common.name(__file__)
    params = QUICK if args.quick else FULL
    cpu = machine.usable_cpus()[0]
    df = threads.fauxplat.run(cpu=cpu, **params)
    table = threads.fauxplat.summarize(df)
    _common.save(df, args, stem, **params)
    threads.fauxplat.plot(df, _common.figure(args, stem))
    print(f"figure: {_common.figure(args, stem)}")
    print(table.to_string(index=False))
    change = table.set_index("condition")["change_pct"]
    alone = table.set_index("condition").loc["alone"]
    _common.side_by_side(
        "FauxPlat/sec alone and perturbed (change of the median vs alone)",
        [
            ("index", "373.97 (i5-3320M)", f"{alone['median_per_cpu_s']:.2f}"),
            ("spread alone", "0-30 % across machines", _spread(alone)),
            ("CPU hog on the same CPU", "-10 %", f"{change[f'cpu@{cpu}']:+.1f} %"),
            ("cache thrasher", "-20 %", f"{change[f'cache@{cpu}']:+.1f} %"),
            ("real-time hog", "no change", f"{change[f'rt@{cpu}']:+.1f} %"),
            ("CPU frequency halved", "x2", "not here: no cpufreq in this guest"),
        ],
    )
    _common.done(args)


def _spread(row) -> str:
    spread = (row["max_per_cpu_s"] - row["min_per_cpu_s"]) / row["median_per_cpu_s"]
    return f"{spread:.0%} (min..max over {row['n']:.0f} repeats)"


if __name__ == "__main__":
    main()
