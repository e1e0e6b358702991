"""The registry walked: every experiment it lists is run small through its verb (or, without
one, its Python API), saved, read back by `perflab report` in every format and diffed against
itself; what the verb printed is what the report prints, by construction."""

import inspect
import json
from pathlib import Path

import pytest
import suite_runs
from click.testing import CliRunner
from conftest import long_beyond, tiny_argv

from perflab.analysis.summary import Summary
from perflab.cli import VERBS, cli
from perflab.lab import registry
from perflab.store import results
from perflab.system import machine

C0 = str(machine.usable_cpus()[0])


# Files of a verb run another way that must read back as well: (experiment, argv).
MORE = {
    "profile --workload mutex": ("profile", ["profile", "--workload", "mutex", "--threads", "2"]),
    "counters, the list": ("counters", ["counters"]),
}
CASES = {name: (name, None) for name in registry.EXPERIMENTS} | MORE


def test_every_experiment_has_a_tiny_run_and_every_verb_is_a_cli_verb():
    for e in registry.EXPERIMENTS.values():
        assert (e.verb is None) != bool(suite_runs.of(e.name).tiny), e.name
        assert e.verb is not None or suite_runs.of(e.name).api is not None, e.name
        assert e.verb is None or e.verb in VERBS, e.verb


@pytest.mark.parametrize("name", list(registry.EXPERIMENTS))
def test_every_registered_module_fulfils_the_contract(name):
    module = registry.EXPERIMENTS[name].load()
    assert isinstance(module, registry.ExperimentModule), name
    wanted = inspect.signature(registry.ExperimentModule.summary).parameters
    assert list(inspect.signature(module.summary).parameters) == list(wanted)[1:], name
    assert inspect.signature(module.summary, eval_str=True).return_annotation is Summary, name


def _summary_text(stdout: str) -> str:
    """What a verb printed less where it put its data and figure: its summary."""
    lines = stdout.rstrip("\n").splitlines()
    while lines and lines[0].startswith(("data: ", "plot: ")):
        lines.pop(0)
    return "\n".join(lines)


def _ok(res):
    assert res.exit_code == 0, (res.stdout, res.stderr)
    return res.stdout


def _saved(case: str, out: Path, run: CliRunner) -> str | None:
    """The case's tiny run saved at `out` through its verb (or its API, without one): the
    summary it printed, None where it has no verb."""
    name, argv = CASES[case]
    e = registry.get(name)
    if e.verb is None:
        results.save(e.load().run(**suite_runs.of(e.name).kwargs(int(C0))), out)  # type: ignore[attr-defined]
        return None
    argv = argv or tiny_argv(name)
    at = argv.index("--") if "--" in argv else len(argv)
    res = run.invoke(cli, [*argv[:at], "-o", str(out), *argv[at:]])
    _ok(res)
    # profile, and counters of a program, print on stderr: the program keeps its stdout
    told = res.stderr if name == "profile" or (name == "counters" and "--" in argv) else None
    return _summary_text(res.stdout if told is None else told)


# bisect's and compare's tiny runs (a repository built and bisected, pairs of builds) take
# seconds where the others take a fraction of one: CI's long step reads those two back.
@pytest.mark.parametrize("case", long_beyond(list(CASES), set(CASES) - {"bisect", "compare"}))
def test_each_experiment_reads_back_as_its_verb_printed_it_and_diffs_as_unchanged(case, tmp_path):
    name = CASES[case][0]
    out = tmp_path / "run.parquet"
    run = CliRunner()
    printed = _saved(case, out, run)
    text = _ok(run.invoke(cli, ["report", str(out)]))
    assert text.startswith(f"{name} result {out}") and "measured on:" in text
    if printed is not None:
        assert printed and printed in text  # the verb's sentences and tables, as they were
    doc = json.loads(_ok(run.invoke(cli, ["report", str(out), "--json"])))
    assert doc["experiment"] == name and doc["partial"] is None and doc["file"] == str(out)
    shown = registry.get(name).summary(results.load(out), doc["metadata"])
    for t in shown.tables:
        assert len(doc[t.name]) == len(t.frame), t.name
        if len(t.display) and len(t.display.columns):
            assert t.title in text, t.title
    md = _ok(run.invoke(cli, ["report", str(out), "--md", "-"]))
    assert md.startswith(f"## perflab report: {name}") and "**measured on**" in md
    said = _ok(run.invoke(cli, ["diff", str(out), str(out)])).strip().splitlines()[-1]
    assert said.startswith("no change shown at any of "), said
    bare = results.load(out)
    bare.attrs = {}
    assert registry.recognise(set(bare.columns)) == registry.get(name)


# A page draws its figure (most of a second each): a sweep of child runs and a kernel in
# perflab's own process in the suite, every experiment's page in CI's long step.
@pytest.mark.parametrize("case", long_beyond(list(CASES), {"env-size", "memcpy"}))
def test_each_experiment_s_page_holds_its_tables_and_figure(case, tmp_path):
    name = CASES[case][0]
    out = tmp_path / "run.parquet"
    run = CliRunner()
    _saved(case, out, run)
    shown = registry.get(name).summary(results.load(out), results.metadata(results.load(out)))
    page = _ok(run.invoke(cli, ["report", str(out), "--html", "-"]))
    assert page.startswith("<!DOCTYPE html>") and page.count("<table>") == 1 + sum(
        1 for t in shown.tables if len(t.display) and len(t.display.columns)
    )
    assert page.count('<img alt="figure" src="data:image/png;base64,') == (shown.plot is not None)


def test_a_frame_without_the_columns_of_its_experiment_is_one_error(tmp_path):
    df = results.load(Path(__file__).parent / "data" / "memcpy-epyc-kvm.parquet")
    meta = {**results.metadata(df), "experiment": "profile"}
    path = results.save(results.attach(df, meta), tmp_path / "m.parquet")
    res = CliRunner().invoke(cli, ["report", str(path)])
    assert res.exit_code == 1 and "a profile result without column(s) " in res.stderr
