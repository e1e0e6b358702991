"""perflab bisect against a one-layout `git bisect run` on a history of a real C program that
nobody at perflab wrote (LZ4's lz4.c, from the `lz4` sdist on PyPI): --commits commits, of which
one (--slow-at) makes the compression's hash do two more operations a position, and the others
only move code or data: a function of padding linked first, a new global array, the objects
in another order. A second history is the same but for the slower commit, which moves code
there as its neighbours do: no commit in it is slower.

For each seed: `perflab bisect` over both histories (the commit it names, how many commits it
built), and `git bisect run` around a one-layout timing (the median of RUNS runs of the
commit against GOOD's, bad beyond half the slower commit's step). Printed: how often each
names the slower commit, a wrong one, or none.

    sudo PYTHONPATH=src python benchmarks/history_bisect.py [--seeds 10] [--commits 24]
    python benchmarks/history_bisect.py --make-repo DIR [--flat]  # the history alone
"""

import argparse
import math
import os
import platform
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
BUILD = ["sh", "build.sh"]
RUN = ["./bench"]


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


def perflab_bisect(repo: Path, shas: list[str], seed: int) -> tuple[str | None, int, float]:
    """The commit perflab bisect names (None: none), how many commits its search built or
    found built, and its seconds."""
    t = time.monotonic()
    df = bisect.bisect(shas[0], shas[-1], BUILD, RUN, repo=repo, seed=seed)
    meta = df.attrs["perflab"]
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
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--commits", type=int, default=24)
    ap.add_argument("--slow-at", type=int, default=15)
    ap.add_argument("--runs", type=int, default=10, help="git bisect's runs per commit")
    ap.add_argument("--make-repo", type=Path, metavar="DIR",
                    help="Only write the history with the slower commit to DIR, and print its "
                    "shas (docs/history.md's example is this history).")  # fmt: skip
    ap.add_argument("--flat", action="store_true",
                    help="With --make-repo: the history without the slower commit.")  # fmt: skip
    args = ap.parse_args()
    if args.make_repo:
        slow_at = None if args.flat else args.slow_at
        with tempfile.TemporaryDirectory(prefix="perflab-lz4-") as d:
            shas = make_history(args.make_repo, lz4_sources(Path(d)), args.commits, slow_at)
        slower = "none" if slow_at is None else shas[slow_at]
        print(f"{args.make_repo}: {len(shas)} commits, {shas[0]}..{shas[-1]}, the slower one "
              f"{slower}")  # fmt: skip
        return
    with tempfile.TemporaryDirectory(prefix="perflab-history-") as d:
        tmp = Path(d)
        lz4 = lz4_sources(tmp / "sdist")
        slowed = make_history(tmp / "slowed", lz4, args.commits, args.slow_at)
        flat = make_history(tmp / "flat", lz4, args.commits, None)
        slow = slowed[args.slow_at]
        # the step, measured once side by side: git bisect's threshold is half of it
        parent = builds.build(tmp / "slowed", slowed[args.slow_at - 1], BUILD).tree
        child = builds.build(tmp / "slowed", slow, BUILD).tree
        a = [one_layout_time(parent, args.runs) for _ in range(3)]
        b = [one_layout_time(child, args.runs) for _ in range(3)]
        step = statistics.median(b) / statistics.median(a) - 1
        print(f"{platform.node()}: {machine.cpu_model()}, perflab {__version__}")
        print(f"history: {args.commits} commits of lz4.c ({LZ4_SDIST}), commit {args.slow_at} "
              f"slower by {step:+.1%} (one layout, {args.runs} runs x 3); most builds allowed "
              f"log2(N) + 3 = {math.log2(args.commits) + 3:.1f}")  # fmt: skip
        tally = {k: 0 for k in ("pl_right", "pl_wrong", "pl_none", "pl_flat_none",
                                "gb_right", "gb_wrong", "gb_none", "gb_flat_none")}  # fmt: skip
        most_built = 0
        for seed in range(args.seeds):
            named, built, took = perflab_bisect(tmp / "slowed", slowed, seed)
            most_built = max(most_built, built)
            key = "pl_none" if named is None else "pl_right" if named == slow else "pl_wrong"
            tally[key] += 1
            flat_named, _, flat_took = perflab_bisect(tmp / "flat", flat, seed)
            tally["pl_flat_none"] += flat_named is None
            gb = git_bisect_run(tmp / "slowed", slowed, args.runs, max(step, 0.0) / 2)
            tally["gb_none" if gb is None else "gb_right" if gb == slow else "gb_wrong"] += 1
            gb_flat = git_bisect_run(tmp / "flat", flat, args.runs, max(step, 0.0) / 2)
            tally["gb_flat_none"] += gb_flat is None
            print(f"seed {seed}: perflab {str(named)[:10]} ({built} built, {took:.0f} s), "
                  f"flat {str(flat_named)[:10]} ({flat_took:.0f} s); git bisect "
                  f"{str(gb)[:10]}, flat {str(gb_flat)[:10]}", flush=True)  # fmt: skip
        n = args.seeds
        print(
            f"perflab bisect: slower commit named {tally['pl_right']}/{n}, a wrong one "
            f"{tally['pl_wrong']}/{n}, none {tally['pl_none']}/{n}; most commits built "
            f"{most_built}; without the slower commit none named {tally['pl_flat_none']}/{n}"
        )
        print(
            f"git bisect run (one layout): slower commit named {tally['gb_right']}/{n}, a "
            f"wrong one {tally['gb_wrong']}/{n}; without the slower commit it named none "
            f"{tally['gb_flat_none']}/{n} (else a wrong one)"
        )


if __name__ == "__main__":
    main()
