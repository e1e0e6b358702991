"""The placement floor: measured with the real C core once per machine and core, cached, shown
by `perflab machine` and recorded in every result; a cache that cannot be trusted is remeasured."""

import json
import math

import pytest

from perflab.cli import cli
from perflab.running import placement
from perflab.system import machine, placement_floor, provenance


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """One real measurement in a cache of this module's own: (the floor, its cache file's text)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
        assert placement_floor.cached_placement_floor() is None
        assert provenance.metadata()["placement_floor_measured"] == "not measured"
        floor, cached = placement.floor()
        assert not cached
        yield floor, machine.calibration_path(placement_floor.PLACEMENT_FLOOR).read_text()


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A cache directory of the test's own: what it holds, no other run sees."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "perflab"


@pytest.mark.long
def test_the_floor_is_measured_once_cached_and_reused(measured, cache):
    floor, text = measured
    assert math.isfinite(floor.share) and floor.share >= 0
    n = len(placement.TWINS)
    assert floor.placements == n == 12 and floor.pairs == n * (n - 1) // 2
    assert floor.copies == placement.COPIES > 1  # the library mapped that many times over
    assert floor.timer_step_ticks >= 1 and floor.worst.startswith("placed_")
    assert json.loads(text)["identity"] == machine.identity()
    path = machine.calibration_path(placement_floor.PLACEMENT_FLOOR)
    assert path.parent == cache
    path.write_text(text)
    again, cached = placement.floor()
    assert cached and again == floor
    meta = provenance.metadata()
    assert meta["placement_floor"] == floor.share
    assert meta["placement_floor_measured"] == floor.measured_at


@pytest.mark.long
@pytest.mark.parametrize("damage", ["torn", "foreign", "wrong type", "one mapping"])
def test_a_cache_file_that_cannot_be_trusted_is_remeasured(measured, cache, damage):
    floor, text = measured
    doc = json.loads(text)
    if damage == "foreign":
        doc["identity"]["hostname"] += "-elsewhere"
    elif damage == "wrong type":
        doc["floor"]["share"] = "0.5"
    elif damage == "one mapping":  # from a perflab that timed the library in one mapping only
        del doc["floor"]["copies"]
    path = machine.calibration_path(placement_floor.PLACEMENT_FLOOR)
    path.write_text(text[: len(text) // 2] if damage == "torn" else json.dumps(doc))
    assert placement_floor.cached_placement_floor() is None
    assert provenance.metadata()["placement_floor"] is None
    if damage != "torn":  # every rejected cache takes the one path measured below
        return
    again, cached = placement.floor()
    assert not cached and again.measured_at >= floor.measured_at
    assert placement_floor.cached_placement_floor() == again


@pytest.mark.long
def test_perflab_machine_shows_the_floor_and_when_it_was_measured(measured, cache, runner):
    floor, text = measured
    machine.calibration_path(placement_floor.PLACEMENT_FLOOR).write_text(text)
    res = runner.invoke(cli, ["machine"])
    assert res.exit_code == 0, res.output
    assert f"placement floor  {floor.sentence()}" in res.output
    assert f"measured {floor.measured_at}, cached" in res.output
    assert f"{len(placement.TWINS)} placements" in res.output
    res = runner.invoke(cli, ["machine", "--remeasure-floor"])
    again = placement_floor.cached_placement_floor()
    assert again is not None and again != floor and "measured now in" in res.output
    doc = json.loads(runner.invoke(cli, ["machine", "--json"]).output)
    assert doc["placement_floor"]["share"] == again.share and doc["placement_floor"]["cached"]


def test_perflab_machine_without_a_compiler_says_the_floor_is_not_measured(
    cache, runner, monkeypatch
):
    monkeypatch.setenv("CC", "/nonexistent/cc")
    res = runner.invoke(cli, ["machine"])
    assert res.exit_code == 0, res.output
    assert (
        "placement floor  not measured: the placement floor could not be measured (no C compiler"
        in res.output
        and "placement_floor=" in res.output
    )
    assert placement_floor.cached_placement_floor() is None


def test_distinct_python_callables_get_this_interpreters_floor_once_per_process(monkeypatch):
    """Function objects of one loop, timed in pairs: a floor of their own, measured on first
    use and kept; a callable compared with itself is not widened."""
    from perflab.assertions import claims, table
    from perflab.running import timing

    monkeypatch.setattr(placement, "_python_floor", None)
    twin = placement._python_twin
    a, b = twin("a")(), twin("b")()
    assert timing.distinct_callables(a, b) and not timing.distinct_code(a, b)
    c = claims.check_faster(a, b, budget="30s,40")
    floor, kept = placement.python_floor()
    assert kept and floor.kind == "python" and c.floor == floor.share >= 0
    assert floor.placements == placement.PYTHON_TWINS and floor.pairs == 6 and floor.copies == 1
    assert floor.worst.startswith("twin_") and "Python" in floor.compiler
    assert "in two function objects" in floor.sentence() and floor.sentence() in table.render(c)
    assert c.floor_kind == "python" and "(distinct Python callables)" in table.render(c)
    given = claims.check_faster(a, b, budget="30s,40", placement_floor=0.5)
    assert given.summary()["placement_floor_kind"] == "python"
    assert "(distinct Python callables)" in table.render(given)
    assert placement_floor.cached_placement_floor() != floor  # never written to the C floor's cache
    same = timing.python_callable(placement._loop)
    assert not timing.distinct_callables(same, same)
    assert claims.check_faster(same, same, budget="30s,40").floor == 0


def test_a_floor_beyond_what_placement_can_be_allowed_makes_distinct_c_claims_undecidable(cache):
    """A CPU whose identical code at two addresses differs by 60 %: no claim between distinct C
    functions, one round and a reason; the same function twice is decided as ever."""
    import cffi

    from perflab.assertions import claims, comparison
    from perflab.running import timing
    from perflab.system import compiler

    built = compiler.build(placement.SOURCE, opt="2", static=False, extra=placement.FLAGS)
    ffi = cffi.FFI()
    ffi.cdef("void placed_0(void); void placed_9(void);")
    lib = ffi.dlopen(str(built.path))
    wide = placement_floor.PlacementFloor(
        0.6, 12, 3, 66, 1000, "placed_0/placed_9 1.6000", 0, "2026-12-01T00:00:00+00:00", 1.0,
        26, "cc", 20, 396, 40, "c",
    )  # fmt: skip
    placement_floor.store_placement_floor(wide)
    c = claims.check_faster(timing.c_function(lib.placed_0), timing.c_function(lib.placed_9))
    assert c.verdict == comparison.INCONCLUSIVE and c.within_floor and c.floor == 0.6
    assert "claims between them are undecidable on this CPU" in c.reason and c.rounds == 1
    given = claims.check_faster(timing.c_function(lib.placed_0), timing.c_function(lib.placed_9),
                                placement_floor=0.6, budget="2s,200")  # fmt: skip
    assert "undecidable on this CPU" not in given.reason  # a floor the user gives is theirs
    same = claims.check_faster(timing.c_function(lib.placed_0), timing.c_function(lib.placed_0),
                               budget="2s,200")  # fmt: skip
    assert same.floor == 0 and "undecidable on this CPU" not in same.reason
