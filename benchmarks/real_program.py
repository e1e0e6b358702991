"""A real C program nobody at perflab wrote, in two builds, for `perflab compare` to judge.

The program is the `brotli` command-line compressor (c/tools/brotli.c and the library under
c/) from Brotli's source distribution on PyPI, fetched once with pip into
~/.cache/perflab/real-program/ (where $XDG_CACHE_HOME says) and checked against a pinned
sha256. Each build is one compiler invocation over the sorted sources, cached by compiler,
flags and archive. The input is fixed by the archive: the Canterbury corpus texts and the
binary map data in its tests/testdata, 1.47 MB, compressed at quality 5 (about 45 ms a run
on an AMD EPYC at -O2). The compressed stream goes to stdout, which perflab's children have
on /dev/null (brotli refuses a terminal). On that EPYC, -O3 is about 1 % faster than -O2, and
`--b "-O2 -fno-tree-ch"` (no loop header copying) about 2.7 % slower: a real small difference.

Prints the two command lines, one per line, for `perflab compare`:

    python benchmarks/real_program.py [--a -O2] [--b -O3] [--cc-b gcc-13] [--time 20]
    mapfile -t ab < <(python benchmarks/real_program.py)
    perflab compare "${ab[0]}" "${ab[1]}" --setups 10 --repeat 10
    python benchmarks/real_program.py --b "-O2 -fno-tree-ch" --copy .   # ./brotli-A, ./brotli-B
    python benchmarks/real_program.py --b "-O2 -fno-tree-ch" --looped   # for --iterations

--looped builds benchmarks/brotli_loop.c's main instead of the tool's: the same encoder,
called in perflab's repeat loop (PERFLAB_PROBE_LOOP) over the input read once into memory.
"""

import argparse
import hashlib
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from perflab.errors import PerflabError
from perflab.system import compiler

PACKAGE, VERSION = "brotli", "1.2.1"
ARCHIVE = f"{PACKAGE}-{VERSION}.tar.gz"
SHA256 = "02b2f7b5a83485efe448a44ddf7983def05c3bb1dcf917d4f7154070260e13de"
INPUT_FILES = ("alice29.txt", "asyoulik.txt", "lcet10.txt", "plrabn12.txt", "mapsdatazrh")
QUALITY = 5


def cache() -> Path:
    """The real program's corner of perflab's cache directory."""
    path = compiler.cache_dir() / "real-program"
    path.mkdir(exist_ok=True)
    return path


def sha256(path: Path) -> str:
    """Hex sha256 of a file."""
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def archive() -> Path:
    """The pinned sdist, downloaded with pip unless a copy with the pinned digest is cached."""
    path = cache() / ARCHIVE
    if not path.exists():
        with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                   "--retries", "1", "--timeout", "15", "--dest", tmp,
                   f"{PACKAGE}=={VERSION}"]  # fmt: skip
            print(f"downloading {PACKAGE}=={VERSION} with pip", file=sys.stderr)
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            got = Path(tmp) / ARCHIVE
            if done.returncode != 0 or not got.exists():
                lines = [ln.strip() for ln in done.stderr.splitlines() if ln.strip()]
                why = (lines or [f"pip exited {done.returncode}"])[-1].removeprefix("ERROR: ")
                raise PerflabError(
                    f"could not download {PACKAGE}=={VERSION} from the package index: {why}"
                )
            os.replace(got, path)
    digest = sha256(path)
    if digest != SHA256:
        raise PerflabError(f"{path}: sha256 {digest}, expected {SHA256}; delete it to refetch")
    return path


def sources() -> Path:
    """The archive's C sources and test data unpacked (once) into the cache; their root."""
    root = cache() / f"{PACKAGE}-{VERSION}"
    if (root / ".complete").exists():
        return root
    data = "|".join(map(re.escape, INPUT_FILES))
    wanted = re.compile(rf"{PACKAGE}-{VERSION}/(c/[\w/]+\.[ch]|tests/testdata/({data}))")
    with tarfile.open(archive()) as tar:
        for member in tar:
            if member.isfile() and wanted.fullmatch(member.name):
                out = cache() / member.name
                out.parent.mkdir(parents=True, exist_ok=True)
                src = tar.extractfile(member)
                assert src is not None  # a regular file
                out.write_bytes(src.read())
    (root / ".complete").touch()
    return root


LOOP = Path(__file__).resolve().parent / "brotli_loop.c"


def build(flags: Sequence[str], cc: Sequence[str] | None = None, looped: bool = False) -> Path:
    """The brotli tool built with cc (default $CC or cc) and flags, cached by both; looped:
    brotli_loop.c's main instead of the tool's, the library's encoder in perflab's repeat
    loop."""
    cc = list(cc) if cc else compiler.compiler()
    root = sources()
    main = LOOP if looped else root / "c" / "tools" / "brotli.c"
    extra = [LOOP.read_text(), (compiler.WORKLOADS / "perflab_probe.h").read_text()] * looped
    key = hashlib.sha256(
        "\0".join([SHA256, *cc, compiler.compiler_version(tuple(cc)), "", *flags, *extra]).encode()
    ).hexdigest()
    slug = re.sub(r"[^\w.+=-]+", "_", "".join(flags))[:40]
    out = cache() / f"{PACKAGE}{'-loop' * looped}{slug}-{key[:8]}"
    if out.exists():
        return out
    c = root / "c"
    files = sorted(str(p) for d in ("common", "dec", "enc") for p in (c / d).glob("*.c"))
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    os.close(fd)
    cmd = [*cc, *flags, "-I", str(c / "include"), "-I", str(compiler.WORKLOADS), *files,
           str(main), "-lm", "-o", tmp]  # fmt: skip
    print(f"building {out.name}: {' '.join([*cc, *flags])}", file=sys.stderr)
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        Path(tmp).unlink(missing_ok=True)
        first = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[0]
        raise PerflabError(f"building brotli with {shlex.join([*cc, *flags])} failed: {first}")
    os.replace(tmp, out)
    return out


def input_file() -> Path:
    """The fixed input: the archive's corpus files concatenated in a fixed order."""
    out = cache() / "input"
    if not out.exists():
        data = b"".join((sources() / "tests" / "testdata" / n).read_bytes() for n in INPUT_FILES)
        fd, tmp = tempfile.mkstemp(prefix=".input.", dir=out.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    return out


def command(
    flags: Sequence[str], cc: Sequence[str] | None = None, looped: bool = False
) -> list[str]:
    """argv of one run: compress the input at QUALITY (to stdout, or looped in memory)."""
    if looped:
        return [str(build(flags, cc, looped=True)), str(QUALITY), str(input_file())]
    return [str(build(flags, cc)), "-c", "-q", str(QUALITY), str(input_file())]


def run_ms(argv: Sequence[str], runs: int) -> float:
    """Median wall milliseconds of runs runs of argv, stdout on /dev/null."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--a", default="-O2", help="A's compiler flags (default -O2)")
    p.add_argument("--b", default="-O3", help="B's compiler flags (default -O3)")
    p.add_argument("--cc-a", help="A's compiler (default $CC or cc)")
    p.add_argument("--cc-b", help="B's compiler (default $CC or cc)")
    p.add_argument("--time", type=int, default=0, metavar="N",
                   help="also report on stderr the median time of N runs of each")  # fmt: skip
    p.add_argument("--looped", action="store_true",
                   help="build brotli_loop.c's main: the encoder in perflab's repeat loop, "
                   "for compare --iterations")  # fmt: skip
    p.add_argument("--copy", metavar="DIR",
                   help="copy the builds (as brotli-A, brotli-B) and the input into DIR and "
                   "print command lines that name the copies relative to it")  # fmt: skip
    args = p.parse_args()
    try:
        cmds = [command(shlex.split(flags), cc and shlex.split(cc), args.looped)
                for flags, cc in ((args.a, args.cc_a), (args.b, args.cc_b))]  # fmt: skip
    except PerflabError as e:
        sys.exit(f"real_program.py: {e}")
    if args.copy:
        into = Path(args.copy)
        shutil.copy2(cmds[0][-1], into / "input")
        for side, argv in zip("AB", cmds, strict=True):
            shutil.copy2(argv[0], into / f"brotli-{side}")
            argv[0], argv[-1] = f"./brotli-{side}", "input"  # both forms end with the input
    for side, argv in zip("AB", cmds, strict=True):
        if args.time:
            ms = run_ms(argv, args.time)
            print(f"{side}: {ms:.1f} ms a run (median of {args.time})", file=sys.stderr)
        print(shlex.join(argv))


if __name__ == "__main__":
    main()
