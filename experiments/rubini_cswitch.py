"""Rubini's cswitch: one-byte write+read through a pipe alone, then ping-pong with a child.

The difference is the context switch (Linux 2.4: 2.9 µs alone, 4.5 µs round trip, 1.55 µs
switch). As root with real-time priority it got worse (twice the switches): measure the
"optimisation". perflab adds the placements (unpinned, one CPU, two CPUs) and the switch counts.
"""

import _common

from perflab import cswitch

FULL = {"n": 20000, "reps": 3}
QUICK = {"n": 2000, "reps": 2}


def main(argv=None) -> None:
    args = _common.parse(__doc__, argv)
    stem = _common.name(__file__)
    params = QUICK if args.quick else FULL
    df = cswitch.run(realtime=cswitch.realtime_wanted(None), **params)
    table = cswitch.summarize(df)
    _common.save(df, args, stem)
    cswitch.plot(df, _common.figure(args, stem))
    print(f"figure: {_common.figure(args, stem)}")
    for line in cswitch.article_lines(df.iloc[0]):
        print(line)
    print(table.to_string(index=False))
    first = table.iloc[0]
    rt = table[table["priority"] != "normal"]
    _common.side_by_side(
        f"cswitch, {params['n']} iterations (µs each; {first['placement']}, {first['priority']})",
        [
            ("write+read alone", "2.9", f"{first['alone_us_each']:.3f}"),
            ("round trip with the child", "4.5", f"{first['roundtrip_us_each']:.3f}"),
            ("context switch part", "1.55", f"{first['cswitch_us_each']:.3f}"),
            (
                "real-time priority",
                "worse: twice the switches",
                _rt(first, rt.iloc[0]) if len(rt) else "not permitted here",
            ),
        ],
    )
    _common.done(args)


def _rt(normal, rt) -> str:
    return (
        f"round trip {rt['roundtrip_us_each']:.3f} vs {normal['roundtrip_us_each']:.3f} µs; "
        f"{rt['switches_per_roundtrip']:.2f} vs {normal['switches_per_roundtrip']:.2f} switches"
    )


if __name__ == "__main__":
    main()
