"""Code placement is drawn per layout wherever perflab judges builds: each commit built once,
relinked per layout by its own make with a code offset and an object order drawn, its object
files untouched; a commit that only links a helper first is not blamed."""

import math
import os
import shutil
from pathlib import Path

import pytest
from conftest import CHAIN, new_repo

from perflab.errors import PerflabError
from perflab.lab import bisect, compare
from perflab.lab.bisect import builds
from perflab.lab.compare import metrics
from perflab.store import results
from perflab.system import binlayout, compiler, sections

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")

MAKEFILE = """\
OBJS := $(patsubst %.c,%.o,$(shell cat SOURCES))
prog: $(OBJS)
\tcc -O1 -o prog $(OBJS)
%.o: %.c chain.h
\tcc -O1 -c $< -o $@
"""
MAIN = '#include "chain.h"\nvoid work(unsigned long n);\nint main(void) { work(%d); return 0; }\n'
WORK = '#include "chain.h"\nvoid work(unsigned long n) { chain(n); }\nvoid work_tail(void) {}\n'
HELPER = 'void perflab_helper(void) { __asm__ volatile(".skip 200, 0x90"); }\n'
BUILD = ["make", "-s"]
RUN = ["./prog"]
_REPO: dict[str, str] = {}


def _repo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """c0; c1 links a helper first (every function moves, nothing else); c2 runs 1.5x the
    work; c3 a comment. Made once per session."""
    if _REPO:
        return _REPO
    repo = tmp_path_factory.mktemp("placed")
    git = new_repo(repo)
    steps = [(2_000_000, "main.c work.c", ""), (2_000_000, "helper.c main.c work.c", ""),
             (3_000_000, "helper.c main.c work.c", ""),
             (3_000_000, "helper.c main.c work.c", "// done\n")]  # fmt: skip
    for i, (loops, sources, note) in enumerate(steps):
        (repo / "Makefile").write_text(MAKEFILE)
        (repo / "chain.h").write_text(CHAIN)
        (repo / "main.c").write_text(note + MAIN % loops)
        (repo / "work.c").write_text(WORK)
        (repo / "helper.c").write_text(HELPER)
        (repo / "SOURCES").write_text(sources + "\n")
        git("add", "-A")
        git("commit", "-q", "-m", f"commit {i}")
        _REPO[f"c{i}"] = git("rev-parse", "HEAD")
    _REPO["repo"] = str(repo)
    return _REPO


@pytest.fixture
def placed_repo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return _repo(tmp_path_factory)


def _built(r: dict[str, str], sha: str) -> builds.Build:
    made = builds.build(Path(r["repo"]), sha, BUILD)
    assert made.ok, made.log.read_text()
    return made


def _where(program: str, *names: str) -> tuple[int, ...]:
    """The addresses of these functions in a linked program (nm)."""
    found = {f[-1]: int(f[0], 16) for f in binlayout.nm_fields(program, "--defined-only")}
    return tuple(found[n] for n in names)


def test_each_layout_relinks_the_commit_with_its_code_moved_and_its_objects_untouched(
    placed_repo,
):
    older, newer = _built(placed_repo, placed_repo["c0"]), _built(placed_repo, placed_repo["c1"])
    objects = {p: p.read_bytes() for p in sorted(older.tree.glob("*.o"))}
    program = (older.tree / "prog").read_bytes()
    with builds.relinking(older, newer):
        sides = builds.placed(older, newer, BUILD, RUN)
        assert not sides.fixed and "code-offset" in sides.randomize
        assert "link-order" not in sides.randomize  # A links 2 objects, B 3: no one order
        assert "relinked by make -s in each commit's tree" in sides.placement
        assert "the objects' order as built, since A links 2 and B 3" in sides.placement
        assert [o.label for o in sides.b.objects] == ["helper", "main", "work"]
        setups = [
            compare.Setup(i, 0, perm, code_offset=code)
            for i, (perm, code) in enumerate([((0, 1), 0), ((1, 0), 24), ((0, 1), 1000)])
        ]
        where = set()
        for setup in setups:
            argv, order = sides.a.program(setup)
            where.add((_where(argv[0], "work")[0], order))
        linker = sections.linker()
        if linker == sections.NONE:
            assert "function-order" not in sides.randomize
            assert "no linker that orders sections" in sides.placement
        else:  # the functions of one object drawn in other orders, by seed
            assert "function-order" in sides.randomize
            assert f"the functions' order within them (by {linker})" in sides.placement
            orders = set()
            for seed in range(1, 9):
                argv, _ = sides.a.program(compare.Setup(0, 0, (0, 1), function_order=seed))
                work, tail = _where(argv[0], "work", "work_tail")
                orders.add(work < tail)
            assert orders == {True, False}
        sides.a.put_back()
    assert len({w for w, _ in where}) > 1  # the code moved from layout to layout
    assert {p: p.read_bytes() for p in sorted(older.tree.glob("*.o"))} == objects
    assert (older.tree / "prog").read_bytes() == program  # the tree's program put back


@pytest.mark.long
def test_a_commit_that_links_a_helper_first_is_not_shown_slower_and_more_work_is(placed_repo):
    c0, c1, c2 = (_built(placed_repo, placed_repo[f"c{i}"]) for i in range(3))

    def decided(older: builds.Build, newer: builds.Build) -> dict:
        with builds.relinking(older, newer):
            sides = builds.placed(older, newer, BUILD, RUN)
            df = compare.compare(sides.a, sides.b, randomize=sides.randomize, setups=8,
                                 repeat=5, seed=5, progress=False)  # fmt: skip
        assert list(results.metadata(df)["randomize"]) == list(sides.randomize)
        return metrics.decide(df, "time", confidence=0.999)

    moved = decided(c0, c1)
    assert moved["ci_low"] <= 1  # identical work, only placed otherwise: not shown slower
    slower = decided(c1, c2)
    assert slower["ci_low"] > 1 and slower["ratio"] > 1.2  # 1.5x the chain


@pytest.mark.long
def test_setups_of_one_placement_share_its_code_and_the_verdict_splits_its_variance(
    placed_repo,
):
    c0, c1 = (_built(placed_repo, placed_repo[f"c{i}"]) for i in range(2))
    with builds.relinking(c0, c1):
        sides = builds.placed(c0, c1, BUILD, RUN)
        assert sides.per_placement(8) == builds.SHARED and sides.per_placement(3) == 1
        df = compare.compare(sides.a, sides.b, randomize=sides.randomize, setups=8, repeat=4,
                             per_placement=2, seed=1, progress=False)  # fmt: skip
    code = [c for c in ("code_offset", "function_order", "link_order") if c in df]
    by = df.groupby("placement")
    assert by["setup"].nunique().tolist() == [2, 2, 2, 2]
    each = df.groupby(["placement", "side"])[code].nunique()
    assert (each == 1).all().all()  # one code placement per pair of setups
    assert df.groupby("placement")["code_offset"].first().nunique() > 1
    assert (by["env_size"].nunique() == 2).all()  # their environments drawn apart
    total = compare.overall(df, compare.per_setup(df))
    assert total["covers"][:2] == ["code placement", "setup"]
    shares = total["components"]
    assert math.isclose(shares["code placement"] + shares["environment"], shares["setup"])
    with pytest.raises(PerflabError, match="needs --setups of at least 4"):
        compare.compare(sides.a, sides.b, randomize=sides.randomize, setups=3, per_placement=2)
    plain = compare.program_side("A", ["true"]), compare.program_side("B", ["true"])
    with pytest.raises(PerflabError, match="--per-placement shares a code placement"):
        compare.compare(*plain, setups=4, per_placement=2)


@pytest.mark.long
def test_bisect_names_the_commit_with_more_work_not_the_one_that_moved_code(placed_repo):
    df = bisect.bisect(placed_repo["c0"], placed_repo["c3"], BUILD, RUN,
                       repo=placed_repo["repo"], setups=8, repeat=5, seed=2,
                       confidence=0.999)  # fmt: skip
    meta = results.metadata(df)
    assert meta["first_slower"] == placed_repo["c2"]
    assert all(p.startswith("code placed at random per layout") for p in meta["placement"])
    compared = df[df["verdict"] != "does not build"]
    functions = ",function-order" if sections.linker() != sections.NONE else ""
    drawn = {f"code-offset,link-order{functions}", f"code-offset{functions}"}
    assert set(compared["placement"]) <= drawn
    assert f"code-offset,link-order{functions}" in set(compared["placement"])  # c1..c3: 3 objects
    shares = compared[["code_share", "environment_share"]]
    assert shares.notna().all().all() and ((shares >= 0) & (shares <= 1)).all().all()
    said = bisect.summary(df, meta).lines
    assert any(x.startswith("of the variance of a layout's B/A, the code placement") for x in said)
    assert meta["relink_s"] > 0


def test_a_build_perflab_cannot_relink_is_said_once_and_compared_as_built(tmp_path):
    repo = tmp_path / "one-call"
    git = new_repo(repo)
    (repo / "chain.h").write_text(CHAIN)
    shas = []
    for loops in (1_000_000, 1_000_000):
        (repo / "prog.c").write_text(f'#include "chain.h"\nint main(void) {{ chain({loops}); }}\n')
        git("add", "-A")
        git("commit", "-q", "--allow-empty", "-m", "c")
        shas.append(git("rev-parse", "HEAD"))
    build = ["cc", "-O1", "-o", "prog", "prog.c"]
    older, newer = (builds.build(repo, s, build) for s in shas)
    first = builds.placed(older, newer, build, RUN)
    assert first.fixed and first.placement.startswith("code placement fixed: ")
    assert "compiles and links in one call" in first.placement
    assert "env -C" not in first.placement
    log = (older.tree / "prog").stat().st_mtime_ns
    again = builds.placed(older, newer, build, RUN)
    assert again.placement == first.placement
    assert (older.tree / "prog").stat().st_mtime_ns == log  # remembered: not built again


READS = r"""
#include <stdio.h>
#include "chain.h"
int main(void)
{
    FILE *f = fopen("input.txt", "r");
    unsigned long n = 0;
    if (!f || fscanf(f, "%lu", &n) != 1) {
        fprintf(stderr, "cannot read input.txt\n");
        return 2;
    }
    chain(n);
    return 0;
}
"""


def _reading(repo: Path, inputs: tuple[str, ...]) -> list[str]:
    """A commit per input: READS and its input.txt ("": none it can read); their shas."""
    git = new_repo(repo)
    (repo / "chain.h").write_text(CHAIN)
    (repo / "prog.c").write_text(READS)
    shas = []
    for n in inputs:
        (repo / "input.txt").write_text(n + "\n")
        git("add", "-A")
        git("commit", "-q", "--allow-empty", "-m", f"input {n or 'none'}")
        shas.append(git("rev-parse", "HEAD"))
    return shas


@pytest.mark.long
def test_the_benchmark_runs_in_its_commit_s_tree_and_a_failing_one_says_why(tmp_path):
    repo = tmp_path / "reads"
    shas = _reading(repo, ("1000000", "1000000", ""))  # the last commit's input is unreadable
    build = ["cc", "-O1", "-o", "prog", "prog.c"]
    older, newer, broken = (builds.build(repo, s, build) for s in shas)
    with builds.relinking(older, newer):
        sides = builds.placed(older, newer, build, RUN)
        df = compare.compare(sides.a, sides.b, randomize=sides.randomize, setups=2, repeat=2,
                             progress=False)  # fmt: skip
    assert (df["status"] == "ok").all()  # input.txt found in each commit's tree
    assert builds.failed(df, older, newer, RUN) is None
    with builds.relinking(older, broken):
        sides = builds.placed(older, broken, build, RUN)
        df = compare.compare(sides.a, sides.b, randomize=sides.randomize, setups=2, repeat=2,
                             progress=False)  # fmt: skip
    said = builds.failed(df, older, broken, RUN)
    assert said == (shas[2], f"{shas[2][:10]}: every run of ./prog in its tree failed (exit "
                    "status 2): cannot read input.txt")  # fmt: skip
    with pytest.raises(PerflabError, match=f"^{shas[2][:10]}: every run of ./prog.*GOOD and BAD"):
        bisect.bisect(shas[1], shas[2], build, RUN, repo=repo, setups=2, repeat=2)


def test_the_api_refuses_one_string_where_a_command_s_words_are_meant(placed_repo):
    r = placed_repo
    with pytest.raises(PerflabError, match="is not a sequence"):
        bisect.bisect(r["c0"], r["c3"], "make", RUN, repo=r["repo"])
    with pytest.raises(PerflabError, match="is not a text"):
        bisect.bisect(7, r["c3"], BUILD, RUN, repo=r["repo"])  # type: ignore[arg-type]
    made = _built(r, r["c0"])
    side = compare.program_side("A", list(made.argv(RUN)))
    df = compare.compare(side, side, randomize="aslr,env-size", setups=2, repeat=1,
                         progress=False)  # fmt: skip
    assert list(results.metadata(df)["randomize"]) == ["aslr", "env-size"]


def test_a_build_the_timeout_killed_is_built_again_with_a_longer_one(tmp_path):
    from perflab.system import supervisor

    repo = tmp_path / "slow-build"
    git = new_repo(repo)
    (repo / "prog.c").write_text("int main(void) { return 0; }\n")
    git("add", "-A")
    git("commit", "-q", "-m", "c")
    sha = git("rev-parse", "HEAD")
    build = ["sh", "-c", "sleep 1 && cc -o prog prog.c"]
    with supervisor.build_timeout(0.5):
        cut = builds.build(repo, sha, build)
    assert not cut.ok and "build" in cut.log.read_text()
    made = builds.build(repo, sha, build)
    assert made.ok and not made.reused and (made.tree / "prog").is_file()


def test_a_bisect_record_another_holds_is_refused_before_anything_is_built(placed_repo, tmp_path):
    import threading

    from perflab.store import filelock

    out = tmp_path / "b.parquet"
    taken, done = threading.Event(), threading.Event()

    def hold() -> None:
        with filelock.held(out):
            taken.set()
            done.wait(30)

    other = threading.Thread(target=hold, name="other-bisect")
    other.start()
    try:
        assert taken.wait(10)
        with pytest.raises(PerflabError, match="other-bisect"):
            bisect.bisect(placed_repo["c0"], placed_repo["c3"], BUILD, RUN,
                          repo=placed_repo["repo"], output=out)  # fmt: skip
    finally:
        done.set()
        other.join()
    assert not out.exists()


@pytest.mark.long
def test_a_commit_between_whose_benchmark_always_fails_is_skipped_as_git_bisect_skips(tmp_path):
    repo = tmp_path / "skips"
    shas = _reading(repo, ("1000000", "", "8000000", "8000000"))
    build = ["cc", "-O1", "-o", "prog", "prog.c"]
    df = bisect.bisect(shas[0], shas[3], build, RUN, repo=repo, setups=3, repeat=3,
                       confidence=0.99)  # fmt: skip
    meta = results.metadata(df)
    (skip,) = df[df["verdict"] == "does not run"].itertuples()
    assert skip.newer == shas[1] and "every run of ./prog in its tree failed" in skip.subject
    assert shas[1] in meta["skipped"] and meta["first_slower"] is None
    assert meta["open"] == [shas[1]]  # the first slower is it or the next, as git bisect says


def test_a_program_outside_the_commit_s_tree_is_run_as_it_is_never_relinked(placed_repo, tmp_path):
    c0, c1 = (_built(placed_repo, placed_repo[f"c{i}"]) for i in range(2))
    outside = tmp_path / "victim"
    shutil.copy("/bin/true" if Path("/bin/true").exists() else shutil.which("true"), outside)
    before = outside.read_bytes()
    for run in ([str(outside)], ["../" * 12 + str(outside).lstrip("/")]):
        sides = builds.placed(c0, c1, BUILD, run)
        assert sides.fixed and "is not a program of the commit's tree" in sides.placement
        assert outside.read_bytes() == before  # neither removed nor relinked
    assert not builds.placed(c0, c1, BUILD, RUN).fixed  # no note left for the tree's own


MAKE_ONCE = ["sh", "-c", "test -e .linked && exit 7; make -s && touch .linked"]


def test_a_relink_that_fails_or_times_out_puts_the_program_back(placed_repo):
    from perflab.system import supervisor

    c0, c1 = (_built(placed_repo, placed_repo[f"c{i}"]) for i in range(2))
    for made in (c0, c1):
        (made.tree / ".linked").unlink(missing_ok=True)
    slow = ["sh", "-c", "sleep 30; make -s"]
    with supervisor.build_timeout(0.5):
        timed = builds.placed(c0, c1, slow, RUN)
    assert timed.fixed and "did not finish within 0.5 s" in timed.placement
    assert (c0.tree / "prog").is_file() and (c1.tree / "prog").is_file()
    failed = builds.placed(c0, c1, MAKE_ONCE, RUN)  # the first relink of each finds its objects
    assert not failed.fixed
    failed.a.put_back()
    failed.b.put_back()
    again = builds.placed(c0, c1, MAKE_ONCE, RUN)  # now the command exits 7: said, kept
    assert again.fixed and "exited 7" in again.placement
    assert (c0.tree / "prog").is_file() and (c1.tree / "prog").is_file()
    assert builds.placed(c0, c1, MAKE_ONCE, RUN).placement == again.placement  # remembered
    assert not builds.placed(c0, c1, BUILD, RUN).fixed  # the note is that command's alone


def test_a_relink_killed_midway_leaves_the_program_to_be_put_back(placed_repo):
    c0 = _built(placed_repo, placed_repo["c0"])
    prog = c0.tree / "prog"
    kept = compiler.restore_kept(prog)
    os.replace(prog, kept)  # as a relink killed by kill -9 leaves it
    assert not prog.exists()
    assert compiler.restore_kept(prog) == kept and prog.is_file() and not kept.exists()
    os.link(prog, kept)  # a file with two names (a hard link planted there) is not taken
    os.replace(prog, c0.tree / "elsewhere")
    compiler.restore_kept(prog)
    assert not prog.exists()
    os.replace(c0.tree / "elsewhere", prog)
    kept.unlink()
    if os.geteuid() == 0:  # another user's file is not taken either
        shutil.copy(prog, kept)
        os.chown(kept, 65534, 65534)
        saved = prog.read_bytes()
        prog.unlink()
        compiler.restore_kept(prog)
        assert not prog.exists() and kept.exists()
        kept.unlink()
        prog.write_bytes(saved)
        prog.chmod(0o755)


def test_track_leaves_out_a_commit_whose_runs_all_fail_naming_it_once(tmp_path):
    from perflab.lab import history

    repo = tmp_path / "reads"
    shas = _reading(repo, ("1000000", ""))
    said: list[str] = []
    build = ["cc", "-O1", "-o", "prog", "prog.c"]
    (tmp_path / "store").mkdir()
    written, left_out = history.track(f"{shas[0]}..{shas[1]}", build, RUN, repo=repo,
                                      store=tmp_path / "store", reference=shas[0], setups=2,
                                      repeat=2, say=said.append)  # fmt: skip
    assert not written and left_out == [
        f"[1/1] {shas[1][:10]}: every run of ./prog in its tree failed (exit status 2): cannot "
        "read input.txt: left out"
    ]


@pytest.mark.long
def test_a_commit_whose_runs_all_time_out_is_said_so_without_running_it_again(tmp_path):
    repo = tmp_path / "hangs"
    git = new_repo(repo)
    shas = []
    for body in ("return 0;", "for (;;) ;"):
        (repo / "prog.c").write_text(f"int main(void) {{ {body} }}\n")
        git("add", "-A")
        git("commit", "-q", "-m", body)
        shas.append(git("rev-parse", "HEAD"))
    build = ["cc", "-O0", "-o", "prog", "prog.c"]
    older, newer = (builds.build(repo, s, build) for s in shas)
    sides = builds.placed(older, newer, build, RUN)
    df = compare.compare(sides.a, sides.b, randomize=sides.randomize, setups=2, repeat=2,
                         timeout=0.3, rt=False, progress=False)  # fmt: skip
    said = builds.failed(df, older, newer, RUN, timeout=0.3)  # a run again would hang here
    assert said == (shas[1], f"{shas[1][:10]}: every run of ./prog in its tree failed (killed "
                    "past --timeout)")  # fmt: skip
