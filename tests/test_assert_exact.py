"""The perf assertions on instructions-exact: two programs' instructions counted under
Valgrind, the same verdict in every run whatever the machine's load; refused in one line for a
Python callable, an unknown metric, or where Valgrind is missing."""

import pytest
from conftest import LOOP, compile_children

from perflab.assertions import claims
from perflab.errors import PerflabError
from perflab.plan import metrics
from perflab.running import timing

pytest_plugins = ["pytester"]


@pytest.fixture(scope="module")
def loop(tmp_path_factory) -> str:
    if metrics.unavailable("instructions-exact"):
        pytest.skip(metrics.unavailable("instructions-exact"))
    return compile_children(tmp_path_factory.mktemp("loop"), {"loop": LOOP})["loop"]


@pytest.mark.long
def test_the_plugin_passes_an_equal_pair_and_fails_one_percent_more_every_time(
    pytester, loop, monkeypatch
):
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # the inner session names its own
    pytester.makepyfile(test_exact=f"""
        import perflab as pl

        def test_equal(perflab):
            r = perflab.assert_no_slower(pl.program(["{loop}", "100000"]),
                                         pl.program(["{loop}", "100000"]), tolerance=0.005,
                                         metric="instructions-exact")
            assert r.estimate == 1.0 and r.ci == (1.0, 1.0)

        def test_one_percent_more(perflab):
            perflab.assert_no_slower(pl.program(["{loop}", "101000"]),
                                     pl.program(["{loop}", "100000"]), tolerance=0.005,
                                     metric="instructions-exact")
        """)  # fmt: skip
    for _ in range(2):  # exact counts: the same verdicts each time
        result = pytester.runpytest("-p", "perflab.assertions.pytest_plugin")
        result.assert_outcomes(passed=1, failed=1)
        result.stdout.fnmatch_lines(["*assert_no_slower: FAIL - *instructions under valgrind*"])


def test_a_callable_or_another_metric_is_one_line(loop):
    with pytest.raises(PerflabError, match=r"counts programs: give perflab\.program"):
        claims.check_no_slower(timing.spin(100), timing.spin(100), metric="instructions-exact")
    said = "metric cycles: an assertion times its runs or counts their instructions under valgrind"
    with pytest.raises(PerflabError, match=said):
        claims.check_faster(timing.spin(100), timing.spin(200), metric="cycles")
