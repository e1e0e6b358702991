"""compare's layout levels seen from inside real children: the heap and the code move by exactly
the offsets drawn, ASLR follows each setup, and a recorded layout runs again at the same addresses.
"""

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from perflab.cli import cli
from perflab.errors import PerflabError
from perflab.lab import compare
from perflab.store import results
from perflab.system import compiler, machine, sections

# Appends one line per run to argv[1]: its tag, the padding variable's length (which names the
# setup: the env sizes drawn are distinct), sbrk(0) and malloc's first block before anything
# else allocates, and the address of a function in another object.
WHERE_MAIN = r"""
#define _DEFAULT_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int where(void);
int main(int argc, char **argv)
{
    void *brk0 = sbrk(0);
    void *block = malloc(16);
    const char *pad = getenv("A");
    char line[256];
    int fd = open(argv[1], O_WRONLY | O_APPEND | O_CREAT, 0644);
    int n = snprintf(line, sizeof line, "%s %ld %lu %lu %lu\n", argv[2],
                     pad ? (long)strlen(pad) : -1L, (unsigned long)brk0, (unsigned long)block,
                     (unsigned long)(void *)where);
    return argc != 3 || write(fd, line, (size_t)n) != n || where() != 1;
}
"""
WHERE_FN = "int where(void) { return 1; }\n"
ALIGN = 16  # -falign-functions=16: where() moves by the code offset rounded up to this
MALLOC_ALIGN = 16  # glibc's on 64-bit targets; the heap test needs glibc's malloc


@pytest.fixture(autouse=True)
def cache(tmp_path_factory, monkeypatch):
    """One build cache for the module, away from the user's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "cache"))


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """main.o and where.o, and from them a dynamic and a static program."""
    d = tmp_path_factory.mktemp("where")
    (d / "main.c").write_text(WHERE_MAIN)
    (d / "where.c").write_text(WHERE_FN)
    cc = compiler.compiler()
    flags = ["-O2", f"-falign-functions={ALIGN}", "-c"]
    subprocess.run([*cc, *flags, "main.c", "where.c"], cwd=d, check=True)
    subprocess.run([*cc, "main.o", "where.o", "-o", "prog"], cwd=d, check=True)
    if subprocess.run([*cc, "-static", "main.o", "where.o", "-o", "sprog"], cwd=d).returncode:
        (d / "sprog").unlink(missing_ok=True)
    return d


def _lines(path: Path) -> pd.DataFrame:
    cols = ("tag", "env_size", "brk", "block", "where")
    rows = [line.split() for line in path.read_text().splitlines()]
    return pd.DataFrame(rows, columns=cols).astype({c: np.int64 for c in cols[1:]})


def _seen(df: pd.DataFrame, out: Path) -> pd.DataFrame:
    """What each recorded run's child printed beside its setup's row, matched by env size. The
    unrecorded preflight runs, one per program before any recorded run, printed first: the
    lines before the last len(df) are theirs."""
    per = df.groupby("setup").first().reset_index()
    assert per["env_size"].is_unique  # the env size names the setup in the children's lines
    lines = _lines(out)
    return lines.iloc[len(lines) - len(df) :].merge(per, on="env_size")


def _base(side_a: compare.Side, side_b: compare.Side, out: Path, layout: str) -> pd.Series:
    """What a child prints at a layout with zero offsets: the addresses the offsets move."""
    out.unlink(missing_ok=True)
    compare.compare(side_a, side_b, layout=layout, repeat=1, rt=False, progress=False)
    lines = _lines(out)
    assert len(lines.drop(columns="tag").drop_duplicates()) == 1
    return lines.iloc[0]


def test_the_heap_moves_by_the_drawn_offset_in_the_child(built, tmp_path):
    out = tmp_path / "lines"
    a = compare.program_side("A", [str(built / "prog"), str(out), "A"])
    b = compare.program_side("B", [str(built / "prog"), str(out), "B"])
    base = _base(a, b, out, "env-size=0 heap-offset=0")
    out.unlink()
    df = compare.compare(a, b, randomize=("env-size", "heap-offset"), setups=6, repeat=2,
                         rt=False, progress=False)  # fmt: skip
    assert set(compare.LAYOUT) <= set(df.columns)
    assert (df.groupby("setup")[list(compare.LAYOUT)].nunique() == 1).all().all()
    assert (df["code_offset"] == compare.NO_PADDING).all() and (df["aslr"] == "off").all()
    assert df["heap_offset"].between(0, 4096).all() and df["heap_offset"].nunique() == 6
    seen = _seen(df, out)
    assert len(seen) == len(df) and set(seen["setup"]) == set(range(6))
    # sbrk(0) moves by exactly the offset; malloc's first block by it rounded up to its alignment
    assert (seen["brk"] - base["brk"] == seen["heap_offset"]).all()
    moved = seen["block"] - base["block"] - seen["heap_offset"]
    assert moved.between(0, MALLOC_ALIGN - 1).all() and (seen["block"] % MALLOC_ALIGN == 0).all()
    assert (seen["where"] == base["where"]).all()  # the code stays where it was
    meta = results.metadata(df)
    assert meta["heap_shim"]["workload"] == "heap_offset.c" and meta["heap_var"] == compare.HEAP_VAR


@pytest.mark.skipif(len(machine.usable_cpus()) < 2, reason="needs two usable CPUs")
def test_each_lane_starts_its_runs_under_their_setup(built, tmp_path):
    out = tmp_path / "lines"
    a = compare.program_side("A", [str(built / "prog"), str(out), "A"])
    b = compare.program_side("B", [str(built / "prog"), str(out), "B"])
    base = _base(a, b, out, "env-size=0 heap-offset=0")
    out.unlink()
    lanes = {"jobs": 2, "cpus": machine.usable_cpus()[-2:], "reference": 0.4,
             "allow_siblings": True}  # fmt: skip
    df = compare.compare(a, b, randomize=("env-size", "heap-offset"), setups=4, repeat=6,
                         rt=False, progress=False, **lanes)  # fmt: skip
    assert df["parallel"].any() and not df["parallel"].all()
    seen = _seen(df, out)
    assert len(seen) == len(df) and (seen["brk"] - base["brk"] == seen["heap_offset"]).all()


def test_the_code_moves_by_the_padding_linked_first(built, tmp_path):
    out = tmp_path / "lines"
    objects = [str(built / "main.o"), str(built / "where.o")]
    a = compare.objects_side("A", objects, args=[str(out), "A"])
    b = compare.objects_side("B", objects, args=[str(out), "B"])
    base = _base(a, b, out, "env-size=0 code-offset=0")
    out.unlink()
    df = compare.compare(a, b, randomize=("env-size", "code-offset"), setups=6, repeat=1,
                         code_max=300, rt=False, progress=False)  # fmt: skip
    assert df["code_offset"].between(0, 300).all() and df["code_offset"].nunique() == 6
    assert (df["link_order"] == "main,where").all() and (df["heap_offset"] == -1).all()
    seen = _seen(df, out)
    assert set(seen["setup"]) == set(range(6))
    rounded = -(-seen["code_offset"] // ALIGN) * ALIGN
    assert (seen["where"] - base["where"] == rounded).all()
    assert (seen["brk"] == base["brk"]).all()  # 300 bytes of code leave the heap where it was


@pytest.mark.long
def test_the_built_in_workload_is_padded_and_reordered(tmp_path):
    plan = compare.ComparePlan(randomize=("link-order", "code-offset"), setups=3, seed=4)
    side = compare.build_side("A", ["-O2"])
    setups = compare.draw_setups(plan, [o.label for o in side.objects])
    assert all(s.perm is not None and s.code_offset >= 0 for s in setups)

    def lo_a(setup: compare.Setup) -> int:
        argv, order = side.program(setup)
        assert order == ",".join(side.objects[i].label for i in setup.perm or ())
        nm = subprocess.run(["nm", argv[0]], capture_output=True, text=True, check=True).stdout
        return next(int(f[0], 16) for f in map(str.split, nm.splitlines()) if f[-1] == "lo_a")

    for s in setups:  # the same order without padding, then with it: lo_a moves, 16-aligned
        bare = lo_a(compare.Setup(0, -1, s.perm, code_offset=0))
        assert lo_a(s) - bare == -(-s.code_offset // 16) * 16


@pytest.mark.long
def test_a_build_command_relinks_through_the_wrapped_driver(built, tmp_path):
    cc = compiler.compiler()
    if os.path.basename(cc[0]) not in compiler.WRAPPED_DRIVERS:
        pytest.skip(f"the compiler {cc[0]} is not one the wrappers stand in for")
    out, target = tmp_path / "lines", tmp_path / "relinked"
    objects = [str(built / "main.o"), str(built / "where.o")]
    command = [os.path.basename(cc[0]), *cc[1:], *objects, "-o", str(target)]
    sides = [compare.build_command_side(n, command, target, [str(out), n]) for n in "AB"]
    plain = target.read_bytes()
    kw = {"randomize": ("env-size", "link-order", "code-offset"), "setups": 4, "repeat": 1,
          "code_max": 300, "rt": False, "progress": False}  # fmt: skip
    by_command = _seen(compare.compare(*sides, **kw), out)
    assert target.read_bytes() == plain  # the user's build output is left as their command made it
    out.unlink()
    sides = [compare.objects_side(n, objects, args=[str(out), n]) for n in "AB"]
    by_objects = _seen(compare.compare(*sides, **kw), out)
    cols = ["setup", "env_size", "link_order", "code_offset", "brk", "block", "where"]
    assert by_command[cols].equals(by_objects[cols])
    assert set(by_command["link_order"]) <= {"main,where", "where,main"}
    out.unlink()
    sides = [compare.build_command_side(n, command, target, [str(out), n]) for n in "AB"]
    df = compare.compare(*sides, setups=2, repeat=1, rt=False, progress=False)
    drawn = compare.code_placement(*sides)[0]  # what two build commands draw unless told
    functions = sections.functions_apart(sides[0].objects) and sections.linker() != "none"
    assert drawn == ("code-offset", "link-order", *(["function-order"] if functions else []))
    assert results.metadata(df)["randomize"] == ["env-size", *drawn]


def test_aslr_is_drawn_per_setup(built, tmp_path):
    out = tmp_path / "lines"
    a = compare.program_side("A", [str(built / "prog"), str(out), "A"])
    b = compare.program_side("B", [str(built / "prog"), str(out), "B"])
    df = compare.compare(a, b, randomize=("env-size", "aslr"), setups=6, repeat=3, rt=False,
                         progress=False)  # fmt: skip
    per = df.groupby("setup")["aslr"].first()
    assert set(per) == {"on", "off"}
    seen = _seen(df, out)
    spread = seen.groupby("setup").agg(aslr=("aslr", "first"), places=("brk", "nunique"))
    assert (spread.loc[spread["aslr"] == "off", "places"] == 1).all()
    if Path("/proc/sys/kernel/randomize_va_space").read_text().strip() != "0":
        assert (spread.loc[spread["aslr"] == "on", "places"] > 1).all()


@pytest.mark.long
def test_a_recorded_layout_runs_again_at_the_same_addresses(built, runner, tmp_path):
    out, saved = tmp_path / "lines", tmp_path / "ab.parquet"
    objects = f"{built / 'main.o'} {built / 'where.o'}"
    common = ["compare", "--objects-a", objects, "--objects-b", objects, "--args",
              f"{out} X", "--repeat", "1", "--no-rt"]  # fmt: skip
    dims = "env-size,link-order,heap-offset,code-offset"
    res = runner.invoke(cli, [*common, "--randomize", dims, "--setups", "4", "-o", str(saved)])
    assert res.exit_code == 0, res.output
    first = _seen(results.load(saved), out)
    out.unlink()
    res = runner.invoke(
        cli, [*common, "--layout", f"{saved}:2", "--json", "-o", str(tmp_path / "again.parquet")]
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["setups"][0]["heap_offset"] == first.loc[first["setup"] == 2, "heap_offset"].iloc[0]
    again = _lines(out).drop(columns="tag").drop_duplicates().to_dict("records")
    recorded = first.loc[first["setup"] == 2, ["env_size", "brk", "block", "where"]]
    assert again == recorded.drop_duplicates().to_dict("records")
    row = results.load(saved).query("setup == 2").iloc[0]
    layout = compare.recorded_layout(saved, 2)
    assert layout == (
        f"env-size={row.env_size} link-order={row.link_order} heap-offset={row.heap_offset} "
        f"code-offset={row.code_offset} aslr=off"
    )


def test_a_static_program_is_refused_a_heap_offset(built, runner, tmp_path):
    if not (built / "sprog").exists():
        pytest.skip("this libc cannot link statically")
    out = tmp_path / "r.parquet"
    prog = str(built / "sprog")
    res = runner.invoke(cli, ["compare", prog, prog, "--randomize", "heap-offset", "-o", str(out)])
    errors = [x for x in res.output.splitlines() if x.startswith("Error:")]
    assert res.exit_code != 0 and len(errors) == 1, res.output
    assert "statically linked (no ELF interpreter)" in errors[0]
    assert not out.exists()


def test_resume_refuses_other_layout_parameters(built, runner, tmp_path):
    out = tmp_path / "ab.parquet"
    prog = f"{built / 'prog'} {tmp_path / 'lines'} A"
    args = ["compare", prog, prog, "--randomize", "heap-offset", "--setups", "2", "--repeat", "1",
            "--no-rt"]  # fmt: skip
    assert runner.invoke(cli, [*args, "-o", str(out)]).exit_code == 0
    res = runner.invoke(cli, [*args, "--heap-max", "64", "--resume", str(out)])
    assert res.exit_code != 0 and "heap_max: recorded 4096, asked 64" in res.output


BUILD_B = ["--build-cmd-b", "true", "--program-b", "{t}/x"]


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["{p}", "{p}", "--randomize", "code-offset"], "code-offset needs --build"),
        (["{p}", "{p}", "--layout", "heap-offset=x"], "has no valid value"),
        (["{p}", "{p}", "--layout", "stack=3"], "'stack=3' is not one of"),
        (["{p}", "{p}", "--layout", "aslr=on", "--setups", "3"], "leave --setups out"),
        (["{p}", "{p}", "--layout", "aslr=on", "--randomize", "aslr"], "leave --randomize out"),
        (["{p}", "{p}", "--randomize", "aslr", "--aslr", "on"], "leave --aslr out"),
        (["{p}", "{p}", "--heap-max", "100000000"], "--heap-max must be 0 to 99999999"),
        (["--build", "--layout", "link-order=a,b"], "A's objects are main,a,b,c"),
        (["--objects-a", "x.o"], "give both --objects-a and --objects-b"),
        (["--objects-a", "/no/x.o", "--objects-b", "/no/x.o"], "/no/x.o: no such object file"),
        (["{p}", "{p}", "--ldflags", "-lm"], "--ldflags with --objects-a/-b"),
        (["--build-cmd-a", "true", "--build-cmd-b", "true"], "go together"),
        (["--build-cmd-a", "true", "--program-a", "{t}/x", *BUILD_B], "true did not link"),
        (
            ["--build-cmd-a", "cc {t}/w.c -o {t}/x", "--program-a", "{t}/x", *BUILD_B],
            "from no object file of its own",
        ),
    ],
)
def test_bad_layout_input_is_one_line_and_measures_nothing(built, runner, tmp_path, args, match):
    out = tmp_path / "r.parquet"
    (tmp_path / "w.c").write_text(WHERE_FN + "int main(void) { return where() - 1; }\n")
    argv = [a.format(p=built / "prog", t=tmp_path) for a in args]
    res = runner.invoke(cli, ["compare", *argv, "-o", str(out)])
    assert res.exit_code != 0
    errors = [x for x in res.output.splitlines() if x.startswith("Error:")]
    assert len(errors) == 1 and match in errors[0], res.output
    assert not out.exists()


@pytest.mark.parametrize(
    ("given", "match"),
    [
        ({"layout": "aslr=on", "setups": 1}, "leave --setups out"),
        ({"layout": "aslr=on", "randomize": ("aslr",)}, "leave --randomize out"),
        ({"precision": 0.01, "repeat": 10}, "leave --repeat out"),
        ({"precision": 0.01, "metrics": ("cpu", "time")}, "give --metric time first"),
    ],
)
def test_the_python_api_keeps_the_verbs_rules(built, tmp_path, given, match):
    """The rules that turn on what was given live in the plan: the API refuses what the verb
    refuses, in the same words, before a run."""
    out = tmp_path / "r.parquet"
    side = compare.program_side("A", [str(built / "prog")])
    with pytest.raises(PerflabError, match=match):
        compare.compare(side, side, output=out, progress=False, **given)
    assert not out.exists()
