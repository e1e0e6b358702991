"""perflab's pytest plugin on the three kinds of target: Python callables, C functions, programs."""

import importlib.util

import cffi
import pytest

from perflab import compiler

KERNELS = r"""
#include <string.h>
static char src[4096], dst[4096];
void copy_memcpy(void) { memcpy(dst, src, sizeof dst); __asm__ volatile("" ::: "memory"); }
void copy_bytes(void)
{
    volatile char *d = dst;  /* volatile: the compiler may not turn the loop into memcpy */
    for (size_t i = 0; i < sizeof dst; i++)
        d[i] = src[i];
}
"""

PROGRAM = r"""
#include <stdlib.h>
#include "perflab_probe.h"

int main(int argc, char **argv)
{
    long n = atol(argv[1]);
    PERFLAB_PROBE_BEGIN();
    for (long i = 0; i < n; i++)
        __asm__ volatile("" : "+r"(i));
    PERFLAB_PROBE_END();
    return 0;
}
"""


def concat_plus(n=200):
    s = ""
    for i in range(n):
        s += str(i)
    return s


def concat_join(n=200):
    return "".join([str(i) for i in range(n)])


def test_join_is_faster_than_plus(perflab):
    r = perflab.assert_faster(concat_join, concat_plus)
    print(f"join is {r.estimate:.2f}x faster, CI {r.ci[0]:.2f}-{r.ci[1]:.2f}, {r.runs} runs")


def test_refactor_did_not_slow_down(perflab):
    def baseline():
        return sorted(range(500, 0, -1))

    def candidate():
        return sorted(reversed(range(1, 501)))

    perflab.assert_no_slower(candidate, baseline, tolerance=0.10)


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    """A cffi API-mode module compiled for this test file: (ffi, lib)."""
    ffi = cffi.FFI()
    ffi.cdef("void copy_memcpy(void); void copy_bytes(void);")
    ffi.set_source("_example_kernels", KERNELS, extra_compile_args=["-O2"])
    so = ffi.compile(tmpdir=str(tmp_path_factory.mktemp("kernels")))
    spec = importlib.util.spec_from_file_location("_example_kernels", so)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ffi, module.lib


def test_memcpy_beats_a_byte_loop(perflab, kernels):
    ffi, lib = kernels
    fast = perflab.c_function(ffi.addressof(lib, "copy_memcpy"), name="memcpy 4 KiB")
    slow = perflab.c_function(ffi.addressof(lib, "copy_bytes"), name="byte loop 4 KiB")
    perflab.assert_faster(fast, slow, min_ratio=2)


@pytest.mark.perf(budget="2s,500", confidence=0.99)
def test_c_kernel_scales_linearly(perflab):
    # perflab.spin(n) is the core's own C loop: n turns, a known cost.
    perflab.assert_faster(perflab.spin(1000), perflab.spin(2000), min_ratio=1.5)


def test_c_kernel_stays_under_a_tick_limit(perflab):
    perflab.assert_ticks_below(perflab.spin(1000), limit=10_000)


@pytest.fixture(scope="module")
def loop_program(tmp_path_factory):
    source = tmp_path_factory.mktemp("src") / "loop.c"
    source.write_text(PROGRAM)
    return compiler.build(source, opt="2").path


def test_program_with_half_the_work_is_faster(perflab, loop_program):
    fast = perflab.program([loop_program, "100000"])
    slow = perflab.program([loop_program, "200000"])
    perflab.assert_faster(fast, slow, min_ratio=1.5)


def test_claiming_the_wrong_direction_fails(perflab):
    perflab.assert_faster(concat_plus, concat_join)
