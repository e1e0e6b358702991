"""DjiBee's env-size reproduction: no effect with ASLR on, windows with ASLR off, zoom on one.

The post swept A= .. 8192 characters, 100 runs each, first with ASLR on (nothing), then with
`echo 0 > randomize_va_space` (peaks 16 sizes wide, ~4096 bytes apart). perflab turns ASLR off
for the child only, then zooms on the first window with every size.
"""

import _common
import numpy as np

from perflab import env_size

FULL = {"min_size": 0, "max_size": 8192, "step": 1, "repeat": 100}
QUICK = {"min_size": 0, "max_size": 8192, "step": 8, "repeat": 3}
QUICK_ON_STEP = 16  # showing that nothing stands out needs no finer grid
ZOOM_REPEAT = {True: 5, False: 100}


def main(argv=None) -> None:
    args = _common.parse(__doc__, argv)
    stem = _common.name(__file__)
    params = QUICK if args.quick else FULL
    found = {}
    for aslr in ("on", "off"):
        grid = {**params, "step": QUICK_ON_STEP} if args.quick and aslr == "on" else params
        df = env_size.sweep(aslr=aslr, **grid)
        summary = env_size.summarize(df)
        found[aslr] = env_size.detect_windows(summary)
        _common.save(df, args, f"{stem}_aslr_{aslr}")
        path = args.out / f"{stem}_aslr_{aslr}.png"
        env_size.plot(df, path, windows=found[aslr], summary=summary)
        print(f"figure: {path}")
    off = found["off"]
    # Without a window, zoom where the first one was on the machine of docs/env-size.md.
    first = int(off["start"].iloc[0]) if len(off) else 2342
    lo, hi = first - 48, first + 64
    zoom = env_size.sweep(aslr="off", min_size=lo, max_size=hi, repeat=ZOOM_REPEAT[args.quick])
    zsum = env_size.summarize(zoom)
    # Windows are judged against the whole sweep's baseline: in a 112-byte range the window
    # is too large a share for the zoom's own median to be the baseline.
    zwin = _inside(off, lo, hi)
    _common.save(zoom, args, f"{stem}_zoom")
    env_size.plot(zoom, args.out / f"{stem}_zoom.png", windows=zwin, zoom=(lo, hi), summary=zsum)
    print(f"figure: {args.out / f'{stem}_zoom.png'}")
    base = off.attrs.get("baseline", float("nan"))
    slow = _longest_run(zsum.loc[zsum["median"] > base * 1.1, "env_size"].to_numpy())
    _common.side_by_side(
        "Env size, ASLR on vs off (DjiBee)",
        [
            ("ASLR on: windows", "none (~490,000, a few at 500,000)", _windows(found["on"])),
            ("ASLR off: windows", "peaks +14-30 %", _windows(off)),
            ("spacing", "~4096 B (4093 seen)", _spacing(off)),
            (
                f"zoom {lo}..{hi}: sizes >10 % slow",
                "16 consecutive",
                f"{len(slow)} ({slow[0]}..{slow[-1]})" if len(slow) else "0",
            ),
        ],
    )
    _common.done(args)


def _inside(windows, lo: int, hi: int):
    return windows[(windows["end"] >= lo) & (windows["start"] <= hi)]


def _longest_run(sizes: np.ndarray) -> np.ndarray:
    """The longest stretch of consecutive sizes: one preempted run must not widen a window."""
    if not sizes.size:
        return sizes
    runs = np.split(sizes, np.flatnonzero(np.diff(sizes) != 1) + 1)
    return max(runs, key=len)


def _windows(w) -> str:
    if not len(w):
        return "none"
    return ", ".join(f"{r.start}-{r.end} +{r.excess:.0%}" for r in w.itertuples())


def _spacing(w) -> str:
    return ", ".join(f"{v:,.0f}" for v in w["spacing"].dropna()) or "-"


if __name__ == "__main__":
    main()
