"""Each experiment's runs that the suite walks for every experiment at once, one module per
experiment named as it (env-size: env_size.py): a new experiment brings its own file here
and no test table is edited."""

import importlib
import shlex
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SuiteRuns:
    """An experiment's runs the suite walks for every experiment at once (registry, report,
    identity, hostile input, the layers' contract, interrupts), so that a new experiment brings
    its own and no test table is edited. Words after the verb; `{cpu}` stands for a usable CPU,
    `{ncpus}` for how many (at most two), `{worker}` for the tests' pthread program, `{repo}`,
    `{good}` and `{bad}` for a small git repository of a C program that a commit made slower;
    `{threads}` is the threads verb's own (where a program's count goes)."""

    tiny: str  # the smallest real run (positional arguments first, a program last)
    api: dict[str, Any] | None = None  # the lab module's run(**api) at its smallest
    changed: tuple[str, str, str] | None = None  # an option of tiny, another value, its param
    lasting: str = ""  # a run of a few seconds, its first chunk long before its last
    one_measurement: str = ""  # why, without `lasting`, there is nothing to stop between chunks

    def argv(self, which: str = "tiny", **given: str) -> list[str]:
        """The words of `tiny` or `lasting` (split as a shell would), each {name} in them given."""
        words = shlex.split(getattr(self, which))
        for name, value in given.items():
            words = [w.replace(f"{{{name}}}", value) for w in words]
        return words

    def kwargs(self, cpu: int) -> dict[str, Any]:
        """The lab module's run(**kwargs) at its smallest, `{cpu}` given as this CPU's number."""

        def given(value: Any) -> Any:
            if isinstance(value, list):
                return [given(v) for v in value]
            return cpu if value == "{cpu}" else value

        return {key: given(value) for key, value in (self.api or {}).items()}


def of(name: str) -> SuiteRuns:
    """The suite's runs of the experiment a result calls `name`."""
    return importlib.import_module(f"suite_runs.{name.replace('-', '_')}").RUNS
