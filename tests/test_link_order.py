"""The link-order sweep: real builds in every order, the cache, the layout, bad input, the CLI."""

import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from perflab.cli import cli
from perflab.errors import PerflabError
from perflab.lab import link_order
from perflab.store import results
from perflab.system import compiler, pmu

SYMBOL_OF = {"main": "lo_drive", "a": "lo_a", "b": "lo_b", "c": "lo_c"}

USER = {
    "one.c": "int f1(int x) { return x * 3 + 1; }\n",
    "two.c": "int f2(int x) { return x ^ 0x55; }\n",
    "three.c": "int f1(int);\nint f2(int);\nint main(void) { return f1(f2(1)) == 0; }\n",
    "dup.c": "int main(void) { return 0; }\n",
    "undef.c": "int missing(void);\nint g(void) { return missing(); }\n",
}


@pytest.fixture(autouse=True)
def cache(tmp_path_factory, monkeypatch):
    """One build cache for the module, away from the user's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "cache"))


@pytest.fixture(scope="module")
def objs(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("objs")
    out = {}
    for name, text in USER.items():
        (d / name).write_text(text)
        o = d / name.replace(".c", ".o")
        # -O1: at -O2 gcc puts main in .text.startup, where no link order moves it.
        subprocess.run([*compiler.compiler(), "-O1", "-c", str(d / name), "-o", str(o)], check=True)
        out[name[:-2]] = str(o)
    return out


def _symbol_order(lay: pd.DataFrame, perm: int) -> list[str]:
    return lay[lay["perm"] == perm].sort_values("address")["symbol"].tolist()


@pytest.mark.long
def test_every_order_is_linked_once_with_its_symbols_in_that_order(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # empty: every link is counted
    before = dict(compiler.BUILDS)
    df = link_order.sweep(permutations="all", repeat=2, rt=False)
    meta = results.metadata(df)
    assert compiler.BUILDS["link"] - before["link"] == meta["links"] == 24
    assert meta["program_pages"] == link_order.PROGRAM_PAGES
    lay = link_order.layout_frame(df)
    assert lay["perm"].nunique() == 24
    assert lay.groupby("perm")["link_order"].first().nunique() == 24
    for perm, order in lay.groupby("perm")["link_order"].first().items():
        assert _symbol_order(lay, perm) == [SYMBOL_OF[x] for x in order.split(",")]
        assert (lay.loc[lay["perm"] == perm, "loop_head"] > 0).all()
    assert len(df) == 48 and set(df["status"]) == {"ok"}
    assert df.groupby("link_order").size().eq(2).all()
    assert (df["ticks"] > 0).all()
    if not pmu.hardware_counters():
        assert df["cycles"].isna().all()
        assert meta["hardware_counters"].startswith("not supported here")

    again = dict(compiler.BUILDS)
    df2 = link_order.sweep(permutations="all", repeat=1, rt=False)
    assert again == compiler.BUILDS, "a second sweep must compile and link nothing"
    assert results.metadata(df2)["links"] == 0


@pytest.mark.long
def test_user_objects_in_every_order_and_by_template(objs, tmp_path):
    names = [objs["one"], objs["two"], objs["three"]]
    df = link_order.sweep(names, permutations="all", repeat=1, rt=False, timeout=5)
    lay = link_order.layout_frame(df)
    assert set(lay["symbol"]) == {"f1", "f2", "main"}
    of = {"one": "f1", "two": "f2", "three": "main"}
    for perm, order in lay.groupby("perm")["link_order"].first().items():
        assert _symbol_order(lay, perm) == [of[x] for x in order.split(",")]
    # No probe in these programs: the parent's ticks stand in.
    assert link_order.value_column(df) == "outer_ticks"
    assert set(df["status"]) == {"ok"}

    before = compiler.BUILDS["link"]
    df = link_order.sweep(
        names, template="cc -o {output} {objects}", permutations=2, seed=3, repeat=1, rt=False
    )
    assert compiler.BUILDS["link"] - before == 2
    assert df["link_order"].iloc[0].count(",") == 2
    assert df["link_order"].nunique() == 2


def test_orders_draws_distinct_permutations_and_refuses_too_many():
    got = link_order.orders(4, 10, seed=1)
    assert len(set(got)) == 10 and got[0] == (0, 1, 2, 3)
    assert got == link_order.orders(4, 10, seed=1)
    assert len(link_order.orders(3, "all")) == 6
    with pytest.raises(PerflabError, match="only 3! = 6"):
        link_order.orders(3, 7)
    with pytest.raises(PerflabError, match="more than 5040"):
        link_order.orders(8, "all")


def test_alignment_effects_finds_the_feature_that_decides_speed():
    rng = np.random.default_rng(0)
    rows = []
    for perm in range(24):
        slow = perm % 3 == 0  # lo_x at 32 mod 64 is slow; lo_z moves with it (confounded)
        pad = 32 if slow else 0
        for sym, addr in (("lo_x", 64 * perm + pad), ("lo_y", 16 * perm), ("lo_z", 8192 + pad)):
            rows.append({"perm": perm, "symbol": sym, "address": addr, "loop_head": -1})
    lay = pd.DataFrame(rows)
    for m in link_order.MODULI:
        lay[f"mod{m}"] = lay["address"] % m
    summary = pd.DataFrame(
        {
            "perm": range(24),
            "median": [1000 + (100 if p % 3 == 0 else 0) + rng.normal(0, 5) for p in range(24)],
        }
    )
    eff = link_order.alignment_effects(summary, lay)
    best = eff.iloc[0]
    assert best["feature"] == "lo_x % 64"
    assert best["same_split"] == "lo_z % 64"
    assert best["p"] < 0.01 and best["score"] > 0.6  # a perfect 8|16 split of ranks: 0.65
    assert (best["fast_value"], best["slow_value"]) == (0, 32)
    assert eff.loc[eff["feature"].str.startswith("lo_y"), "p"].min() > 0.01


# GNU ld's words, then LLVM lld's and mold's: whichever links here, its line is the one shown.
DUPLICATE = re.compile("multiple definition|duplicate symbol")
UNDEFINED = re.compile("undefined reference|undefined symbol")


def _fails(runner, args, tmp_path, match):
    out = tmp_path / "r.parquet"
    res = runner.invoke(cli, ["sweep", "link-order", *args, "-o", str(out)])
    assert res.exit_code != 0
    errors = [x for x in res.output.splitlines() if x.startswith("Error:")]
    found = match.search(errors[0]) if isinstance(match, re.Pattern) else match in errors[0]
    assert len(errors) == 1 and found, res.output
    assert "Traceback" not in res.output
    assert not out.exists() and not Path(str(out) + ".parts").exists()


def test_bad_input_is_one_line_and_measures_nothing(runner, objs, tmp_path, monkeypatch):
    three = [objs["one"], objs["two"], objs["three"]]
    _fails(runner, ["--permutations", "7", "--objects", *three], tmp_path, "only 3! = 6")
    _fails(runner, ["--objects", *three, "--link-cmd", "cc -o {output}"], tmp_path, "{objects}")
    _fails(runner, ["--objects", *three, "--link-cmd", "cc {objects}"], tmp_path, "{output}")
    _fails(runner, ["--objects", objs["three"], objs["dup"]], tmp_path, DUPLICATE)
    _fails(runner, ["--objects", *three, objs["undef"]], tmp_path, UNDEFINED)
    _fails(runner, ["--objects", objs["one"], "nope.o"], tmp_path, "nope.o: no such object")
    _fails(runner, ["--objects", *three, "--cc", "no-such-cc"], tmp_path, "no C compiler")
    _fails(runner, ["--permutations", "x"], tmp_path, "expected 'all' or a number")
    monkeypatch.setenv("CC", "/nonexistent/cc")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty-cache"))
    _fails(runner, ["--repeat", "1"], tmp_path, "no C compiler")


@pytest.mark.long
def test_interrupted_sweep_resumes_without_measuring_twice(tmp_path):
    out = tmp_path / "lo.parquet"
    kw = dict(permutations=4, seed=1, repeat=20, rt=False, output=out)
    seen = []

    def stop_after_first_chunk(n):
        seen.append(n)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        link_order.sweep(progress=stop_after_first_chunk, **kw)
    part = results.load(out)
    # the first batch: cut short of a chunk where an order runs first (its binary read afresh)
    assert 0 < len(part) == seen[0] <= link_order.CHUNK_RUNS
    assert results.metadata(part)["complete"] is False
    df = link_order.sweep(resume=True, **kw)
    assert len(df) == 80 and not df.duplicated(["perm", "rep"]).any()
    assert results.metadata(results.load(out))["complete"] is True


@pytest.mark.long
def test_cli_json_plot_and_resume(runner, tmp_path):
    out, png = tmp_path / "lo.parquet", tmp_path / "lo.png"
    args = ["sweep", "link-order", "--permutations", "4", "--seed", "2", "--repeat", "3"]
    res = runner.invoke(cli, [*args, "--no-rt", "-o", str(out), "--plot", str(png), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["runs"] == 12 and doc["status"] == {"ok": 12}
    assert len(doc["orders"]) == 4 and doc["spread"]["ratio"] >= 1.0
    assert doc["spread"]["ci_low"] <= doc["spread"]["ratio"] <= doc["spread"]["ci_high"]
    assert doc["alignment"] and {"feature", "score", "p"} <= set(doc["alignment"][0])
    assert png.stat().st_size > 0
    saved = results.load(out)
    assert list(saved.columns[:3]) == ["link_order", "perm", "rep"]
    assert results.metadata(saved)["experiment"] == "link-order"

    res = runner.invoke(cli, [*args, "--no-rt", "--resume", str(out), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["runs"] == 12  # everything was done: nothing re-measured
    res = runner.invoke(cli, [*args[:-1], "5", "--no-rt", "--resume", str(out)])
    assert res.exit_code != 0 and "different parameters" in res.output
