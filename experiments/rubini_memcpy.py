"""Rubini's moremem: memcpy time vs size, 32 steps per octave, minimum of 10 trials.

Log-log figure: red ticks per copy, blue ticks per byte, green the point-to-point derivative;
the knees are the caches (his AMD: L1 64 KB seen at a 32 KB copy, L2 512 KB). Small sizes:
multiples of 4 bytes were cheaper (Riquadro 3).
"""

import _common

from perflab import machine, memcpy

QUICK_MAX = 8 << 20  # past the L2 of most machines: two knees in a few seconds


def main(argv=None) -> None:
    args = _common.parse(__doc__, argv)
    stem = _common.name(__file__)
    trials = 10
    df = memcpy.run(max_bytes=QUICK_MAX if args.quick else None, trials=trials)
    knees = memcpy.detect_knees(df["size"], df["ticks_per_byte"])
    report = memcpy.knee_report(knees)
    _common.save(df, args, stem)
    memcpy.plot(df, _common.figure(args, stem), knees)
    print(f"figure: {_common.figure(args, stem)}")
    print(report.to_string(index=False) if len(report) else "no knee found")
    small = memcpy.summarize(df, 16).set_index("size")["ticks"]
    caches = machine.caches().set_index("cache")["size_bytes"]
    rows = [
        ("sizes, trials", "incr(): 32 per octave, min of 10", f"{len(df)} sizes, min of {trials}"),
    ]
    for k in report.itertuples(index=False):
        rows.append(
            (
                f"knee at copy size ({k.cache} {caches[k.cache] >> 10} KiB)",
                _article_knee(k.cache),
                f"{k.knee_size:,} B ({k.touched_over_cache:.2f} x cache touched)",
            )
        )
    rows.append(
        (
            "small sizes 1..8 (ticks)",
            "multiples of 4 cheaper",
            " ".join(f"{small[s]:.1f}" for s in range(1, 9)),
        )
    )
    _common.side_by_side("memcpy vs size (moremem)", rows)
    _common.done(args)


def _article_knee(cache: str) -> str:
    return {"L1d": "32 KB copy (64 KB L1)", "L2": "256 KB copy (512 KB L2)"}.get(cache, "-")


if __name__ == "__main__":
    main()
