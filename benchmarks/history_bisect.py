"""perflab bisect against a one-layout `git bisect run` on a history of a real C program that
nobody at perflab wrote (LZ4's lz4.c, from the `lz4` sdist on PyPI): --commits commits, of which
one makes the compression's hash do two more operations a position (at --slow-at, or at a place
drawn per seed), and the others only move code or data: a function of padding linked first, a
new global array, the objects in another order. A second history is the same but for the
slower commit, which moves code there as its neighbours do: no commit in it is slower.

Each commit builds two ways: `make -s` (a Makefile that compiles each source to an object and
links them, which perflab relinks per layout with its code placed at random) and `sh build.sh`
(one `cc` call that compiles and links, which perflab cannot relink: code placement fixed, as
every bisect was before it drew it). For each seed: `perflab bisect` over both histories with
each build (the commit it names, how many commits it built), and, unless --no-git-bisect,
`git bisect run` around a one-layout timing (the median of RUNS runs of the commit against
GOOD's, bad beyond half the slower commit's step). Printed: how often each names the slower
commit, a wrong one, or none.

    sudo PYTHONPATH=src python benchmarks/history_bisect.py [--seeds 10] [--commits 24]
    python benchmarks/history_bisect.py --make-repo DIR [--flat]  # the history alone
"""

import argparse
import math
import os
import platform
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from perflab import __version__
from perflab.lab import bisect
from perflab.lab.bisect import builds
from perflab.system import machine

LZ4_SDIST = "lz4==4.4.5"
BENCH = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lz4.h"

/* Compress and decompress 2 MiB of made-up text (words of a small vocabulary drawn by a
 * fixed xorshift) twice; exit 1 if the round trip differs. */
int main(void)
{
    static const char *words[] = {"perflab", "layout", "commit", "the", "of", "a", "measure",
                                  "cache", "line", "page", "stack", "heap", "loop", "time"};
    size_t n = 2u << 20;
    char *src = malloc(n), *dst = malloc(LZ4_compressBound((int)n)), *back = malloc(n);
    unsigned x = 2463534242u;
    size_t at = 0;
    int c = 0, d = 0;
    while (at < n) {
        x ^= x << 13; x ^= x >> 17; x ^= x << 5;
        const char *w = words[x % 14];
        for (size_t i = 0; w[i] && at < n; i++) src[at++] = w[i];
        if (at < n) src[at++] = (x >> 8) % 7 ? ' ' : '\n';
    }
    for (int pass = 0; pass < 2; pass++) {
        c = LZ4_compress_default(src, dst, (int)n, LZ4_compressBound((int)n));
        d = LZ4_decompress_safe(dst, back, c, (int)n);
    }
    return d != (int)n || memcmp(src, back, n) != 0;
}
"""
# The slower commit: the 5-byte hash of every position compressed mixes its input once more.
HASH = "        return (U32)(((sequence << 24) * prime5bytes) >> (64 - hashLog));"
SLOWER = "        sequence ^= sequence >> 29;\n" + HASH
BUILD = ["make", "-s"]  # relinked per layout: code placement drawn
FIXED = ["sh", "build.sh"]  # compiles and links in one call: code placement fixed
RUN = ["./bench"]
MAKEFILE = """\
OBJS := $(patsubst %.c,%.o,$(shell cat SOURCES))
bench: $(OBJS)
\tcc -O2 -o bench $(OBJS)
%.o: %.c lz4.h
\tcc -O2 -c $< -o $@
"""


def lz4_sources(into: Path) -> Path:
    """lz4.c and lz4.h from the lz4 sdist (pip download, no binary), unpacked under `into`."""
    done = subprocess.run([sys.executable, "-m", "pip", "download", LZ4_SDIST, "--no-binary",
                           ":all:", "--no-deps", "-q", "-d", str(into)],
                          capture_output=True, text=True)  # fmt: skip
    sdists = sorted(into.glob("lz4-*.tar.gz"))
    if not sdists:
        raise SystemExit(f"could not download {LZ4_SDIST}: {done.stderr.strip()[-300:]}")
    with tarfile.open(sdists[0]) as tar:
        tar.extractall(into, filter="data")
    (lib,) = into.glob("lz4-*/lz4libs")
    return lib


def make_history(repo: Path, lz4: Path, commits: int, slow_at: int | None) -> list[str]:
    """The history's shas, oldest first: commit 0 the program, then padding, globals and
    object orders in turn, with the slower commit at slow_at (None: none)."""
    env = {**os.environ, "GIT_AUTHOR_NAME": "perflab", "GIT_AUTHOR_EMAIL": "p@l",
           "GIT_COMMITTER_NAME": "perflab", "GIT_COMMITTER_EMAIL": "p@l"}  # fmt: skip

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(repo), *args], env=env, check=True,
                              capture_output=True, text=True).stdout.strip()  # fmt: skip

    repo.mkdir()
    git("init", "-q")
    shutil.copy(lz4 / "lz4.c", repo / "lz4.c")
    shutil.copy(lz4 / "lz4.h", repo / "lz4.h")
    (repo / "bench.c").write_text(BENCH)
    (repo / "build.sh").write_text("cc -O2 -o bench $(cat SOURCES)\n")
    (repo / "Makefile").write_text(MAKEFILE)
    sources = ["bench.c", "lz4.c"]
    shas = []
    for i in range(commits):
        kind = "program" if i == 0 else ["pad", "global", "order"][i % 3]
        if i == slow_at:
            kind = "slower"
        if kind == "pad" or (kind == "slower" and slow_at is None):
            (repo / f"pad{i}.c").write_text(
                f'void perflab_pad{i}(void) {{ __asm__ volatile(".skip {64 * i + 24}, 0x90"); }}\n'
            )
            sources.insert(0, f"pad{i}.c")
        elif kind == "global":
            with open(repo / "bench.c", "a") as f:
                f.write(f"char perflab_global{i}[{(i * 1237) % 4096 + 8}] = {{1}};\n")
        elif kind == "order":
            sources = sources[1:] + sources[:1]
        elif kind == "slower":
            text = (repo / "lz4.c").read_text()
            assert HASH in text, "this lz4.c has another hash: update HASH"
            (repo / "lz4.c").write_text(text.replace(HASH, SLOWER, 1))
        (repo / "SOURCES").write_text(" ".join(sources) + "\n")
        git("add", "-A")
        git("commit", "-q", "-m", f"{kind} {i}")
        shas.append(git("rev-parse", "HEAD"))
    return shas


def perflab_bisect(repo: Path, shas: list[str], seed: int,
                   build: list[str] = BUILD) -> tuple[str | None, int, float]:  # fmt: skip
    """The commit perflab bisect names (None: none), how many commits its search built or
    found built, and its seconds."""
    t = time.monotonic()
    df = bisect.bisect(shas[0], shas[-1], build, RUN, repo=repo, seed=seed)
    meta = df.attrs["perflab"]
    if seed == 0 and repo.name.startswith("slowed"):
        print(f"  {' '.join(build)}: {meta['placement'][0]}", flush=True)
    return meta["first_slower"], meta["builds"] + meta["builds_reused"], time.monotonic() - t


def one_layout_time(tree: Path, runs: int) -> float:
    """The median wall time of `runs` runs of the commit's bench, one after another."""
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run([str(tree / "bench")], check=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def git_bisect_run(repo: Path, shas: list[str], runs: int, threshold: float) -> str | None:
    """`git bisect run` on a copy of the repository, each commit built as perflab builds it and
    bad when its one-layout time is beyond GOOD's times (1 + threshold); None when BAD itself
    is not (as a user who timed BAD first would not bisect)."""
    good = one_layout_time(builds.build(repo, shas[0], BUILD).tree, runs)
    if one_layout_time(builds.build(repo, shas[-1], BUILD).tree, runs) <= good * (1 + threshold):
        return None
    copy = repo.with_name(repo.name + "-git-bisect")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(repo, copy)
    script = copy / ".judge.sh"
    script.write_text(
        f"sh build.sh >/dev/null 2>&1 || exit 125\n"
        f'exec {shlex.quote(sys.executable)} -c "import statistics, subprocess, sys, time\n'
        f"t = []\nfor _ in range({runs}):\n    s = time.perf_counter()\n"
        f"    subprocess.run(['./bench'], check=True)\n    t.append(time.perf_counter() - s)\n"
        f'sys.exit(1 if statistics.median(t) > {good * (1 + threshold)} else 0)"\n'
    )

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(copy), *args], capture_output=True, text=True)

    git("bisect", "start", shas[-1], shas[0])
    done = git("bisect", "run", "sh", str(script))
    found = None
    for line in done.stdout.splitlines():
        if line.endswith("is the first bad commit"):
            found = line.split()[0]
    git("bisect", "reset")
    shutil.rmtree(copy, ignore_errors=True)
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--commits", type=int, default=24)
    ap.add_argument("--slow-at", type=int, default=None,
                    help="The slower commit's place (default: drawn per seed).")  # fmt: skip
    ap.add_argument("--runs", type=int, default=10, help="git bisect's runs per commit")
    ap.add_argument("--no-git-bisect", action="store_true", help="perflab's bisects only")
    ap.add_argument("--make-repo", type=Path, metavar="DIR",
                    help="Only write the history with the slower commit to DIR, and print its "
                    "shas (docs/history.md's example is this history).")  # fmt: skip
    ap.add_argument("--flat", action="store_true",
                    help="With --make-repo: the history without the slower commit.")  # fmt: skip
    args = ap.parse_args()
    if args.make_repo:
        slow_at = None if args.flat else (15 if args.slow_at is None else args.slow_at)
        with tempfile.TemporaryDirectory(prefix="perflab-lz4-") as d:
            shas = make_history(args.make_repo, lz4_sources(Path(d)), args.commits, slow_at)
        slower = "none" if slow_at is None else shas[slow_at]
        print(f"{args.make_repo}: {len(shas)} commits, {shas[0]}..{shas[-1]}, the slower one "
              f"{slower}")  # fmt: skip
        return
    print(f"{platform.node()}: {machine.cpu_model()}, perflab {__version__}; {args.commits} "
          f"commits of lz4.c ({LZ4_SDIST}); most builds allowed log2(N) + 3 = "
          f"{math.log2(args.commits) + 3:.1f}")  # fmt: skip
    modes = {"placed": BUILD, "fixed": FIXED}
    tally = {f"{m}_{k}": 0 for m in modes for k in ("right", "wrong", "none", "flat_none")}
    tally |= {k: 0 for k in ("gb_right", "gb_wrong", "gb_none", "gb_flat_none")}
    most_built = {m: 0 for m in modes}
    took = {m: 0.0 for m in modes}
    with tempfile.TemporaryDirectory(prefix="perflab-history-") as d:
        tmp = Path(d)
        lz4 = lz4_sources(tmp / "sdist")
        for seed in range(args.seeds):
            slow_at = args.slow_at or random.Random(seed).randint(2, args.commits - 2)
            slowed = make_history(tmp / f"slowed{seed}", lz4, args.commits, slow_at)
            flat = make_history(tmp / f"flat{seed}", lz4, args.commits, None)
            slow = slowed[slow_at]
            said = [f"seed {seed}: the slower commit is {slow_at}"]
            for mode, build in modes.items():
                named, built, s = perflab_bisect(tmp / f"slowed{seed}", slowed, seed, build)
                flat_named, _, s_flat = perflab_bisect(tmp / f"flat{seed}", flat, seed, build)
                most_built[mode] = max(most_built[mode], built)
                took[mode] += s + s_flat
                key = "none" if named is None else "right" if named == slow else "wrong"
                tally[f"{mode}_{key}"] += 1
                tally[f"{mode}_flat_none"] += flat_named is None
                named_at = "none" if named is None else slowed.index(named)
                flat_at = "none" if flat_named is None else flat.index(flat_named)
                said.append(f"{mode} names {named_at} ({built} built, {s:.0f} s), flat "
                            f"{flat_at} ({s_flat:.0f} s)")  # fmt: skip
            if not args.no_git_bisect:
                step = _step(tmp / f"slowed{seed}", slowed, slow_at, args.runs)
                gb = git_bisect_run(tmp / f"slowed{seed}", slowed, args.runs, max(step, 0) / 2)
                tally["gb_none" if gb is None else "gb_right" if gb == slow else "gb_wrong"] += 1
                gb_flat = git_bisect_run(tmp / f"flat{seed}", flat, args.runs, max(step, 0) / 2)
                tally["gb_flat_none"] += gb_flat is None
                said.append(f"git bisect {str(gb)[:10]}, flat {str(gb_flat)[:10]}")
            print("; ".join(said), flush=True)
    n = args.seeds
    for mode in modes:
        what = "code placement drawn (make)" if mode == "placed" else "code placement fixed"
        print(
            f"perflab bisect, {what}: slower commit named {tally[mode + '_right']}/{n}, a wrong "
            f"one {tally[mode + '_wrong']}/{n}, none {tally[mode + '_none']}/{n}; most commits "
            f"built {most_built[mode]}; without the slower commit none named "
            f"{tally[mode + '_flat_none']}/{n}; {took[mode] / (2 * n):.0f} s a bisect"
        )
    if not args.no_git_bisect:
        print(
            f"git bisect run (one layout): slower commit named {tally['gb_right']}/{n}, a "
            f"wrong one {tally['gb_wrong']}/{n}; without the slower commit it named none "
            f"{tally['gb_flat_none']}/{n} (else a wrong one)"
        )


def _step(repo: Path, shas: list[str], slow_at: int, runs: int) -> float:
    """The slower commit's step over its parent, one layout, measured side by side 3 times."""
    parent = builds.build(repo, shas[slow_at - 1], BUILD).tree
    child = builds.build(repo, shas[slow_at], BUILD).tree
    a = [one_layout_time(parent, runs) for _ in range(3)]
    b = [one_layout_time(child, runs) for _ in range(3)]
    return statistics.median(b) / statistics.median(a) - 1


if __name__ == "__main__":
    main()
