"""The identity a journal and the result it becomes record: the digest of all that defines their
points (the experiment, its parameters, the bytes and arguments of the programs it runs, the
environment they start from, its plan and the C core), each component kept too, so that a
resume that would measure something else is refused with what changed."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from perflab.core.bindings import core_digest
from perflab.core.lazy import pd
from perflab.store import results
from perflab.store.rowchecks import Expect


@dataclass(frozen=True)
class Executes:
    """What child runs execute, for their identity: each program's argv (argv[0] resolved) and
    the environment every run starts from, less the variable `var` a sweep pads."""

    programs: Sequence[Sequence[str]] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    var: str | None = None


def _sha(obj: Any) -> str:
    """sha256 of a JSON value, keys sorted: the same value always gives the same digest."""
    text = json.dumps(obj, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _file_sha(path: str) -> str:
    try:
        return results.file_digest(path)
    except OSError as exc:
        return f"unreadable ({exc.strerror or type(exc).__name__})"


def _executed(programs: Sequence[Sequence[str]]) -> dict[str, str]:
    """sha256 of each file a run executes: argv[0], and an argument that names an executable
    file by its absolute path (the program env(1) runs for `sweep threads`)."""
    found: dict[str, str] = {}
    for argv in programs:
        for i, arg in enumerate(argv):
            if arg in found:
                continue
            if i == 0 or (os.path.isabs(arg) and os.path.isfile(arg) and os.access(arg, os.X_OK)):
                found[arg] = _file_sha(arg)
    return found


def key_digest(frame: pd.DataFrame, key: Sequence[str]) -> str:
    """sha256 of the distinct values of the key columns, in no particular row order and whatever
    the width of their dtypes: a plan and the rows that fulfil it give the same digest."""
    cols = {
        c: frame[c].to_numpy(dtype=np.float64, na_value=np.nan)
        if pd.api.types.is_numeric_dtype(frame[c])
        else frame[c].astype(str).to_numpy()
        for c in key
    }
    distinct = pd.DataFrame(cols).drop_duplicates()
    distinct = distinct.sort_values(list(key), na_position="last", kind="stable")
    h = hashlib.sha256()
    for c in key:
        h.update(f"{c}\0".encode())
        v = distinct[c].to_numpy()
        if v.dtype == np.float64:
            h.update(np.where(np.isnan(v), np.nan, v).tobytes())
        else:
            h.update("\0".join(v).encode())
    return h.hexdigest()


def plan_of(expect: Expect) -> dict[str, Any]:
    """The plan as an identity records it: its key columns, how many runs, their digest (an open
    plan, a campaign's, has neither)."""
    key = list(expect.unique)
    if expect.planned is None or not key:
        return {"key": key, "runs": None, "sha256": None}
    return {"key": key, "runs": len(expect.planned), "sha256": key_digest(expect.planned, key)}


def identity(
    experiment: str | None,
    params: Mapping[str, Any],
    expect: Expect,
    executes: Executes | None = None,
) -> dict[str, Any]:
    """The digest of everything that defines a result's points, and each component: what a
    resume must repeat (environment variables by name only, their values by digest)."""
    ex = executes or Executes()
    parts = {
        "experiment": experiment,
        "params": _sha(params),
        "programs": _sha([list(argv) for argv in ex.programs]),
        "files": _executed(ex.programs),
        "env": {"sha256": _sha([sorted(ex.env.items()), ex.var]), "names": sorted(ex.env)},
        "core": core_digest(),
        "plan": plan_of(expect),
    }
    return {"sha256": _sha(parts), **parts}


def _short(digest: object) -> str:
    return f"{str(digest)[:12]}…"


def identity_changes(recorded: Mapping[str, Any], asked: Mapping[str, Any]) -> list[str]:
    """What differs between the identity a file records and a run's, one phrase each (the
    parameters and the experiment are compared by the caller, by name)."""
    out = []
    old, new = recorded.get("files"), asked["files"]
    old = old if isinstance(old, dict) else {}
    for path in sorted(set(old) & set(new)):
        if old[path] != new[path]:
            out.append(
                f"the program {path} changed since the file was started "
                f"(sha256 {_short(old[path])} → {_short(new[path])})"
            )
    if set(old) != set(new):
        gone, added = sorted(set(old) - set(new)), sorted(set(new) - set(old))
        out.append(
            f"the programs changed since the file was started (it ran {', '.join(gone) or '-'}; "
            f"this run would run {', '.join(added) or '-'})"
        )
    elif recorded.get("programs") != asked["programs"]:
        out.append("the programs' arguments changed since the file was started")
    env_old, env_new = recorded.get("env"), asked["env"]
    env_old = env_old if isinstance(env_old, dict) else {}
    if env_old.get("sha256") != env_new["sha256"]:
        names_old, names_new = set(env_old.get("names") or ()), set(env_new["names"])
        moved = (("without", names_old - names_new), ("with", names_new - names_old))
        said = [f"{label} {', '.join(sorted(names))}" for label, names in moved if names]
        out.append(
            "the environment the runs start from changed since the file was started ("
            + ("now " + "; ".join(said) if said else "the values of its variables differ")
            + ")"
        )
    plan_old, plan_new = recorded.get("plan"), asked["plan"]
    plan_old = plan_old if isinstance(plan_old, dict) else {}
    if plan_old.get("sha256") != plan_new["sha256"] or plan_old.get("key") != plan_new["key"]:
        out.append(
            f"the planned runs differ ({plan_old.get('runs')} recorded, {plan_new['runs']} now; "
            f"sha256 {_short(plan_old.get('sha256'))} → {_short(plan_new['sha256'])})"
        )
    if recorded.get("core") != asked["core"]:
        out.append(
            f"the C core changed since the file was started ({recorded.get('core')} → "
            f"{asked['core']}): resume with the perflab that started it"
        )
    if not out and recorded.get("sha256") != asked["sha256"]:
        out.append(
            f"its identity differs (sha256 {_short(recorded.get('sha256'))} → "
            f"{_short(asked['sha256'])})"
        )
    return out
