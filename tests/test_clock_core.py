"""The native clock core against known answers: overhead subtraction, frequency, monotonicity."""

import numpy as np
import pytest

from perflab.core.bindings import ffi, lib, ptr
from perflab.lab import clocks
from perflab.running import timing
from perflab.system import machine


def test_empty_region_costs_less_than_one_step_plus_half_a_read():
    """After subtracting the timer's own cost an empty region is about zero, to within the
    counter's step (1 tick on most Intel TSCs, 20 on some AMD guests) and read jitter."""
    out = np.zeros(200_000, dtype=np.int64)
    lib.perflab_time_empty(ptr(out, "int64_t[]"), out.size)
    overhead = lib.perflab_timer_overhead()
    step = timing.timer_step()
    assert overhead > 0
    assert abs(np.median(out)) < step + overhead / 2
    assert np.percentile(out, 1) >= -(step + overhead / 2)


def test_tsc_frequency_agrees_with_monotonic():
    hz, how = machine.tsc_hz()
    measured = ffi.new("double *")
    assert lib.perflab_calibrate_hz(lib.PERFLAB_CLOCK_MONOTONIC, 200_000_000, measured) == 0
    assert how in machine.HZ_SOURCES.values()
    assert measured[0] == pytest.approx(hz, rel=0.005)


def test_monotonic_never_goes_backwards():
    reads = clocks.sample("CLOCK_MONOTONIC", 1_000_000).astype(np.int64)
    assert np.all(np.diff(reads) >= 0)


@pytest.mark.parametrize("name", ["CLOCK_REALTIME_COARSE", "CLOCK_MONOTONIC_COARSE"])
def test_coarse_clock_steps_by_its_resolution(name):
    res = clocks.resolution_table().set_index("clock").loc[name, "res_ns"]
    steps = np.diff(clocks.sample(name, 3_000_000).astype(np.int64))
    ticks = steps[steps > 0]
    assert ticks.size >= 1
    # Every step is a whole number of ticks of res: preemption or a tickless idle CPU can merge
    # steps (16 ms seen for a 4 ms tick on a loaded guest), NTP slews each by far less than 1 %.
    ratio = ticks / res
    assert ratio.min() > 0.99
    assert np.abs(ratio - np.round(ratio)).max() < 0.01 * np.round(ratio).max()


def test_counter_methods_all_advance():
    """Two back-to-back reads may fall within one step of a coarse counter (26 ticks on an EPYC
    guest) and be equal: a counter never goes back, and 10,000 reads move it by many steps."""
    step = timing.timer_step()
    for name in clocks.available(["rdtsc", "lfence+rdtsc", "rdtscp"]):
        reads = clocks.sample(name, 10_000).astype(np.int64)
        assert np.all(np.diff(reads) >= 0), name
        assert reads[-1] - reads[0] > 100 * step, name


def test_unknown_source_is_refused():
    out = np.zeros(4, dtype=np.uint64)
    assert lib.perflab_sample(99, ptr(out, "uint64_t[]"), 4) < 0
    with pytest.raises(Exception, match="unknown clock"):
        clocks.resolve(["CLOCK_SOLAR"])


def test_read_costs_table_has_every_available_method():
    costs = clocks.read_costs(50)
    table = clocks.cost_table(costs, batch=1000)
    assert list(table["method"]) == clocks.available()
    assert (table["samples"] == 50).all()
    coarse = table.set_index("method").loc["CLOCK_MONOTONIC_COARSE"]
    assert coarse["median"] == 0 and coarse["batch_ns"] > 0
    # a read between two reads of a clock that steps by 4 ms is no figure of its cost
    assert not coarse["resolved"]
    batch = dict(zip(table["method"], table["batch_ns"], strict=True))
    said = clocks.summary(costs, {"batch_ns": batch})
    unresolved = next(line for line in said.lines if line.startswith("per-read values of "))
    assert "CLOCK_MONOTONIC_COARSE" in unresolved and "batch_ns" in unresolved
