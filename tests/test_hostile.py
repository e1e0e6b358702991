"""Hostile input to every verb, walked from cli.VERBS and each verb's own options, so the next
verb or option is covered by construction: bad numbers, bad CPUs, bad paths, foreign files, and
options given without the one they need. Each is refused in one line on stderr with a non-zero
exit, no traceback and no internal error, before anything is measured (no progress line, no
file). The signal case (stopped mid-run, then --resume) is tests/test_interrupt.py's, over the
same verbs; its test_every_experiment_and_verb_is_covered holds it to every one of them."""

import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import click
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import slowed_repo, tiny_words

from perflab.assertions import claims
from perflab.cli import VERBS, cli
from perflab.cli.params import Count, Needs, Number
from perflab.errors import PerflabError
from perflab.lab import registry
from perflab.running import timing
from perflab.system import machine

CPU = str(machine.usable_cpus()[0])
HUGE = "99999999999999999999"  # past a 64-bit counter, and absurd for every count
MISSING = "/nonexistent-perflab"
UNWRITABLE = "/proc"  # no one may create a file there, root included


@dataclass(frozen=True)
class Base:
    """A verb's valid, tiny invocation: options, its arguments by name, the program after --.
    A case adds an option (click keeps the last value given) or replaces an argument."""

    options: tuple[str, ...] = ()
    arguments: dict[str, str] = field(default_factory=dict)
    program: tuple[str, ...] = ()


# The verbs that run no experiment, as `perflab report` is `report show` and `report hosts`;
# every experiment's verb starts from the registry's tiny run (_tiny_base, below COMMANDS).
BASES = {
    "machine": Base(),
    "report show": Base(arguments={"path": "{result}"}),
    "report hosts": Base(arguments={"path": "{result}"}),
    "diff": Base(arguments={"before": "{result}", "after": "{result}"}),
    "track": Base(
        (
            "--repo",
            "{repo}",
            "--store",
            "{tmp}/store",
            "--build",
            "cc -O1 -o p prog.c",
            "--run",
            "./p",
            "--setups",
            "1",
            "--repeat",
            "1",
        ),
        {"revisions": "{good}"},
    ),
    "history": Base(("--store", "{store}", "--repo", "{repo}")),
}

# What an option that needs another gets beside it, by the name of the one it needs.
NEEDED = {
    "cluster": ("--cluster", "tcp://127.0.0.1:1"),
    "resume": ("--resume", "{result}"),
    "jobs": ("--jobs", "1"),
    "rt": ("--rt",),
    "use_build": ("--build",),
    "plot_path": ("--plot", "{tmp}/x.png"),
    "precision": ("--precision", "50%"),
    "until_steady": ("--until-steady",),
}
# A valid value of each option that needs another (flags take none), to give it alone.
VALID = {
    "hosts": "a",
    "reference": "0.1",
    "rt_limit": "5",
    "budget": "5",
    "cflags_a": "-O1",
    "cflags_b": "-O1",
    "zoom": "0:1",
    "seed": "1",
    "timeout": "5",
    "counts": "1",
    "threads_env": "N",
    "cpus": CPU,
    "runq": "proc",
    "program_output": "{tmp}/child.out",
    "steady_width": "5%",
}
# Options whose text holds a number: walked as the numeric ones are.
NUMERIC_TEXT = {"permutations", "counts"}
# Values an option takes although they look hostile, and why.
ACCEPTED = {
    ("sweep env-size", "k", "huge"): "any finite k is a threshold; a huge one finds no window",
    ("run core-vs-ht", "cpus", "repeated"): "-p A -p A is the post's 'same cpu' placement",
}


def _leaves(
    group: click.Group, ctx: click.Context, path: str
) -> Iterator[tuple[str, click.Command]]:
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        assert cmd is not None
        where = f"{path} {name}".strip()
        if isinstance(cmd, click.Group):
            yield from _leaves(cmd, click.Context(cmd, info_name=name, parent=ctx), where)
        else:
            yield where, cmd


# Every command a user can run, from cli.VERBS down (a group's subcommands each).
COMMANDS = dict(_leaves(cli, click.Context(cli, info_name="perflab"), ""))


def _tiny_base(e: registry.Experiment) -> Base:
    """The experiment's tiny run as a base: its leading words are the verb's arguments by name,
    what follows `--` the program ("true" as {true})."""
    assert e.verb is not None
    words = tiny_words(e, int(CPU))
    at = words.index("--") if "--" in words else len(words)
    words, program = words[:at], tuple("{true}" if w == "true" else w for w in words[at + 1 :])
    names = [p.name for p in COMMANDS[e.verb].params if isinstance(p, click.Argument)]
    lead = 0
    while lead < len(words) and not words[lead].startswith("-"):
        lead += 1
    given = ["{true}" if w == "true" else w for w in words[:lead]]
    return Base(tuple(words[lead:]), dict(zip(names, given, strict=False)), program)


PROGRAM_BASES: dict[str, Base] = {}
for _e in registry.EXPERIMENTS.values():
    if _e.verb is not None:
        _base = BASES.setdefault(_e.verb, _tiny_base(_e))
        if _base != _tiny_base(_e) and _tiny_base(_e).program:
            PROGRAM_BASES[_e.verb] = _tiny_base(_e)


@dataclass(frozen=True)
class Case:
    """One hostile invocation: the verb, the option or argument attacked, what kind of attack."""

    verb: str
    param: str
    kind: str
    base: Base
    words: tuple[str, ...] = ()
    argument: str | None = None

    @property
    def id(self) -> str:
        return f"{self.verb}:{self.param}:{self.kind}"


def _with_needed(verb: str, base: Base, param: click.Parameter) -> Base:
    """The base, plus what `param` needs beside it to be taken at all (a program: the tiny run
    of the verb's experiment that runs one, where the verb has two)."""
    if not isinstance(param, Needs):
        return base
    if param.needs == "command":
        return PROGRAM_BASES.get(verb) or replace(base, program=base.program or ("{true}",))
    return replace(base, options=base.options + NEEDED[param.needs])


def _flag(param: click.Parameter) -> str:
    return param.opts[0]


def _lower(t: click.ParamType) -> tuple[float | None, bool]:
    """The least value a type takes, and whether that bound is excluded."""
    if isinstance(t, Count):
        return t.least, False
    if isinstance(t, click.IntRange | click.FloatRange):
        return t.min, bool(t.min_open)
    if isinstance(t, Number):
        return t.low, t.open_low
    return None, False


def _numeric(param: click.Parameter) -> bool:
    numbers = (click.types.IntParamType, click.types.FloatParamType, Count, Number)
    return isinstance(param.type, numbers) or param.name in NUMERIC_TEXT


def _cases() -> Iterator[Case]:
    for verb, cmd in COMMANDS.items():
        base = BASES.get(verb, Base())
        for param in cmd.params:
            if param.name in ("help",) or param.name is None:
                continue
            yield from _param_cases(verb, base, param)


def _attack(verb: str, base: Base, param: click.Parameter, kind: str, value: str) -> Case:
    """A case that gives param this value (an argument: in its place)."""
    base = _with_needed(verb, base, param)
    if isinstance(param, click.Argument):
        return Case(verb, str(param.name), kind, base, argument=value)
    return Case(verb, str(param.name), kind, base, (_flag(param), value))


def _param_cases(verb: str, base: Base, param: click.Parameter) -> Iterator[Case]:
    name = str(param.name)
    if name in ("cpu", "cpus"):
        yield from _cpu_cases(verb, base, param)
    elif _numeric(param):
        low, open_low = _lower(param.type)
        values = {"huge": HUGE, "nan": "nan", "text": "many", "fraction": "1.5"}
        if isinstance(param.type, click.types.FloatParamType | Number):
            del values["fraction"]
        if low is None or low > -1:
            values["negative"] = "-1"
        if low is not None and (low > 0 or (low == 0 and open_low)):
            values["zero"] = "0"
        for kind, value in values.items():
            yield _attack(verb, base, param, kind, value)
    if isinstance(param.type, click.Path) and isinstance(param, click.Option):
        yield from _path_cases(verb, base, param)
    if name == "resume" or (
        isinstance(param, click.Argument) and "{result}" in str(base.arguments.get(name, ""))
    ):
        for kind in FOREIGN:
            yield _attack(verb, base, param, f"foreign {kind}", f"{{foreign {kind}}}")
    if isinstance(param, Needs):
        value = () if param.is_flag else (VALID[name],)
        alone = replace(base, program=()) if param.needs == "command" else base
        yield Case(verb, name, "alone", alone, (_flag(param), *value))


def _cpu_cases(verb: str, base: Base, param: click.Parameter) -> Iterator[Case]:
    for kind, value in (("absent", "4095"), ("empty", ""), ("negative", "-1")):
        yield _attack(verb, base, param, kind, value)
    if isinstance(param, click.Option) and param.multiple:
        base = _with_needed(verb, base, param)
        yield Case(verb, str(param.name), "repeated", base, (_flag(param), CPU) * 2)
    elif param.type is not click.INT:  # a CPU list
        yield _attack(verb, base, param, "repeated", f"{CPU},{CPU}")


def _path_cases(verb: str, base: Base, param: click.Option) -> Iterator[Case]:
    t = param.type
    assert isinstance(t, click.Path)
    suffix = {"output": ".parquet", "resume": ".parquet", "plot_path": ".png",
              "md_path": ".md", "html_path": ".html"}.get(str(param.name), "")  # fmt: skip
    if t.file_okay:
        yield _attack(verb, base, param, "missing dir", f"{MISSING}/x{suffix}")
        yield _attack(verb, base, param, "unwritable", f"{UNWRITABLE}/x{suffix}")
    else:
        yield _attack(verb, base, param, "missing dir", MISSING)
        yield _attack(verb, base, param, "a file", "{result}")
    if t.dir_okay:
        yield _attack(verb, base, param, "unwritable dir", UNWRITABLE)
    else:
        yield _attack(verb, base, param, "a directory", "{tmp}")


# Files perflab did not write as the result it is asked to read or complete.
FOREIGN = {
    "text": lambda p: p.write_text("not a result\n"),
    "truncated": None,  # a real result, cut short (written by the fixture)
    "alien": lambda p: pd.DataFrame({"a": [1, 2], "b": [3.0, 4.0]}).to_parquet(p),
}

CASES = [c for c in _cases() if (c.verb, c.param, c.kind) not in ACCEPTED]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    """{true}, {result} (a small perflab result) and each foreign file, by placeholder."""
    where = tmp_path_factory.mktemp("hostile")
    result = where / "result.parquet"
    done = CliRunner().invoke(
        cli, ["run", "pagefault", "--pages", "1", "--reps", "2", "-o", str(result)]
    )
    assert done.exit_code == 0, done.output
    found = {"{true}": shutil.which("true") or "/bin/true", "{result}": str(result)}
    repo = slowed_repo()
    found |= {"{repo}": repo["repo"], "{good}": repo["good"], "{store}": str(where / "store")}
    (where / "store").mkdir()
    done = CliRunner().invoke(cli, ["track", repo["good"], "--repo", repo["repo"], "--store",
                                    found["{store}"], "--build", "cc -O1 -o p prog.c", "--run",
                                    "./p", "--setups", "1", "--repeat", "1"])  # fmt: skip
    assert done.exit_code == 0, done.output
    for kind, write in FOREIGN.items():
        path = where / f"{kind}.parquet"
        if write is None:
            path.write_bytes(result.read_bytes()[: result.stat().st_size // 2])
        else:
            write(path)
        found[f"{{foreign {kind}}}"] = str(path)
    return found


def _argv(case: Case, files: dict[str, str], tmp: Path) -> list[str]:
    cmd = COMMANDS[case.verb]
    args = dict(case.base.arguments)
    if case.argument is not None:
        args[case.param] = case.argument
    ordered = [args[str(p.name)] for p in cmd.params if isinstance(p, click.Argument)
               and str(p.name) in args]  # fmt: skip
    words = [*case.verb.split(), *case.base.options, *case.words, *ordered]
    if case.base.program:
        words += ["--", *case.base.program]
    out = []
    for w in words:
        for key, value in {**files, "{tmp}": str(tmp)}.items():
            w = w.replace(key, value)
        out.append(w)
    return out


def test_every_verb_has_a_base():
    """A verb added to cli.VERBS without a base here would be attacked with invalid defaults."""
    assert {v if v in VERBS else v.rpartition(" ")[0] for v in COMMANDS} == set(VERBS)
    assert set(BASES) == set(COMMANDS)


def test_every_verb_is_attacked():
    """Each verb meets hostile cases; `machine` alone takes nothing but --json."""
    assert {c.verb for c in CASES} == set(COMMANDS) - {"machine"}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_input_is_one_line_and_measures_nothing(case, files, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = _argv(case, files, tmp_path)
    before = set(tmp_path.iterdir())
    res = CliRunner().invoke(cli, argv)
    err = res.stderr.strip().splitlines()
    assert res.exit_code not in (0, None), (argv, res.output)
    assert len(err) == 1, (argv, res.stderr)  # no progress line, no second thought
    assert "Traceback" not in res.output and "internal error" not in err[0], (argv, err)
    assert res.exception is None or isinstance(res.exception, SystemExit), (argv, res.exception)
    # the line says what it refuses: the option, the value given, or the argument's name
    cut = len(case.verb.split())
    named = [*_argv(replace(case, base=Base()), files, tmp_path)[cut:], case.param.upper()]
    assert any(w and w in err[0] for w in named), (argv, err)
    assert set(tmp_path.iterdir()) == before, (argv, "something was written")


# The cases the issue measured (#30), each once more by name: what they did then in brackets.
ISSUE_CASES = {
    "repeat that cannot fit": (  # MemoryError
        ["sweep", "env-size", "--max", "0", "--repeat", "1000000000000"],
        ["--repeat 1000000000000 would need", "this machine has", "at most"],
    ),
    "samples that cannot fit": (  # MemoryError
        ["clocks", "--samples", "100000000000"],
        ["--samples 100000000000 would need", "this machine has", "at most"],
    ),
    "round trips past a week": (  # OverflowError after the progress line
        ["run", "cswitch", HUGE],
        [f"N {HUGE} would take at least", "perflab plans at most a week"],
    ),
    "an unbalanced quote": (["compare", "./a 'x", "./b"], ["No closing quotation"]),  # internal
    "three CPUs for two roles": (  # the 'two CPUs' row on one CPU, the third dropped
        ["run", "cswitch", "--cpu", CPU, "--cpu", CPU, "--cpu", CPU, "100"],
        ["--cpu names 3 CPUs; it takes 2 at most"],
    ),
    "one CPU twice": (["run", "cswitch", "--cpu", CPU, "--cpu", CPU, "100"], ["twice"]),
    "an empty CPU list": (  # the child left unpinned
        ["sweep", "env-size", "--max", "0", "--repeat", "1", "--cpu", ""],
        ["--cpu names no CPU"],
    ),
    "an unknown placeholder": (  # OMP_NUM_THREADS claimed 2 threads, the program ran 1
        ["sweep", "threads", "--threads", "1", "--", "{true}", "-T{thread}"],
        ["unknown placeholder {thread}", "only {threads}"],
    ),
    "--host without --cluster": (["clocks", "--host", "a"], ["--host needs --cluster"]),
}


@pytest.mark.parametrize("name", ISSUE_CASES)
def test_the_cases_of_the_issue_are_refused_before_measuring(name, files, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv, said = ISSUE_CASES[name]
    res = CliRunner().invoke(cli, [w.replace("{true}", files["{true}"]) for w in argv])
    err = res.stderr.strip().splitlines()
    assert res.exit_code not in (0, None) and len(err) == 1, (argv, res.output)
    assert all(s in err[0] for s in said) and "internal error" not in err[0], err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("claim", "threshold"),
    [("faster", "min_ratio"), ("no_slower", "tolerance"), ("ticks_below", "limit")],
)
@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_assertions_refuse_a_threshold_no_interval_can_decide(claim, threshold, value):
    """min_ratio=nan once ran the whole budget: no interval is above or below NaN."""
    fn = timing.spin(10)
    targets = {"faster": (fn, fn), "no_slower": (fn, fn), "ticks_below": (fn,)}[claim]
    check = getattr(claims, f"check_{claim}")
    with pytest.raises(PerflabError, match=f"{threshold} must be a finite number"):
        check(*targets, **{threshold: value})
    with pytest.raises(PerflabError, match="finite number of seconds"):
        claims.Budget(seconds=value)
