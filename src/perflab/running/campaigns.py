"""Campaigns: one measurement on every host of a Dask cluster, never two at once on one host.

The FauxPlat/sec post measured one loop on hundreds of same-CPU machines and found them 0-30 %
apart. A campaign runs a perflab measurement (any function returning a tidy frame) on every
worker host, one point at a time per host, and gathers the rows with each host's metadata.
Without an address the local machine runs the same code, so both give the same schema.
"""

from __future__ import annotations

import contextlib
import functools
import socket
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from perflab import __version__
from perflab.core.bindings import core_digest
from perflab.core.lazy import pd
from perflab.errors import PerflabError
from perflab.store import results
from perflab.store.journal import Journal
from perflab.store.rowchecks import Expect
from perflab.system import provenance

# A loaded scheduler can miss a heartbeat: a worker is dead once gone this long.
WORKER_GRACE_S = 2.0
# Longest wait for a finished point's rows before asking whether its worker still lives.
GATHER_S = 5.0
HOST_COLUMNS = ("host", "hostname", "cpu_model", "kernel", "clocksource", "tsc_hz")
Measure = Callable[..., "pd.DataFrame"]


@dataclass(frozen=True)
class Host:
    """One measuring host: its label, the worker that stands for it, what it runs."""

    label: str
    address: str
    version: str
    digest: str


@dataclass
class Outcome:
    """A campaign's rows and every point it could not measure, with the reason."""

    frame: pd.DataFrame
    missing: list[dict[str, Any]] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


def host_facts(dask_worker: Any = None) -> dict[str, str]:
    """Run on a worker (Client.run passes it): its host label, perflab version and core digest."""
    label = socket.gethostname()
    # `dask worker --name X` labels a host; the default name is the worker's address.
    name = getattr(dask_worker, "name", None)
    if isinstance(name, str) and name != dask_worker.address:
        label = name
    return {"label": label, "version": __version__, "digest": core_digest()}


def measure_point(measure: Measure, point: Mapping[str, Any], label: str) -> pd.DataFrame:
    """Run on a host: one point under the host's lock, rows tagged with the host's metadata."""
    lock: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
    with contextlib.suppress(ImportError, ValueError):
        from distributed import Lock, get_worker

        get_worker()
        lock = Lock(f"perflab-host:{label}")
    with lock:
        start = time.time_ns()
        df = measure(**point)
        end = time.time_ns()
    meta = provenance.metadata()
    df = df.copy()
    for key, value in point.items():
        df[key] = value
    df["host"] = label
    for col in HOST_COLUMNS[1:]:
        df[col] = meta[col]
    df["start_ns"], df["end_ns"] = start, end
    return df


def host_check(check: Callable[[], Any] | None) -> str | None:
    """Run on a host before its first point: why it cannot measure (a PerflabError), or None."""
    try:
        if check is not None:
            check()
    except PerflabError as exc:
        return str(exc)
    return None


def discover(
    client: Any, hosts: Iterable[str] | None = None, check: Callable[[], Any] | None = None
) -> tuple[list[Host], list[str]]:
    """The cluster's hosts (one worker each), and the refusals: foreign perflab builds, and
    hosts where check() fails (a --cpu the host does not have, say)."""
    facts = client.run(host_facts)
    problems = client.run(host_check, check)
    by_label: dict[str, Host] = {}
    for address, f in sorted(facts.items()):
        by_label.setdefault(f["label"], Host(f["label"], address, f["version"], f["digest"]))
    wanted = set(hosts) if hosts else set(by_label)
    unknown = wanted - set(by_label)
    if unknown:
        raise PerflabError(
            f"no worker for host {', '.join(sorted(unknown))}; cluster has {', '.join(by_label)}"
        )
    chosen, refused = [], []
    for label in sorted(wanted):
        h = by_label[label]
        if (h.version, h.digest) != (__version__, core_digest()):
            refused.append(
                f"{label}: runs perflab {h.version} (core {h.digest}), this driver runs "
                f"{__version__} (core {core_digest()}); install the same perflab there"
            )
        elif problems.get(h.address):
            refused.append(f"{label}: {problems[h.address]}")
        else:
            chosen.append(h)
    return chosen, refused


def run(
    measure: Measure,
    points: Sequence[Mapping[str, Any]],
    address: str | None = None,
    hosts: Iterable[str] | None = None,
    journal: Journal | None = None,
    on_point: Callable[[], object] | None = None,
    on_start: Callable[[int], object] | None = None,
    check: Callable[[], Any] | None = None,
) -> Outcome:
    """Measure every point on every host; a lost worker costs only its in-flight point.

    on_start gets the number of points still to measure over all hosts, on_point a call each;
    check runs on each host before its first point and refuses the host if it raises.
    """
    if address is None:
        if check is not None:
            check()
        if on_start:
            on_start(len(_pending(points, host_facts()["label"], journal)))
        return _run_local(measure, points, journal, on_point)
    from distributed import Client

    _reachable(address)
    try:
        client = Client(address, timeout=f"{CONNECT_S:g}s")
    except OSError as exc:
        raise PerflabError(f"cannot reach the Dask scheduler at {address}: {exc}") from None
    except ValueError as exc:  # an address Dask cannot parse: its scheme, its port
        raise PerflabError(f"--cluster {address}: {exc}") from None
    with client:
        chosen, refused = discover(client, hosts, check)
        if not chosen:
            raise PerflabError("no host can measure: " + "; ".join(refused))
        if on_start:
            on_start(sum(len(_pending(points, h.label, journal)) for h in chosen))
        return _run_cluster(client, measure, points, chosen, refused, journal, on_point)


CONNECT_S = 10.0  # how long a scheduler that does not answer is waited for


def _reachable(address: str) -> None:
    """A tcp:// scheduler that refuses the connection is said at once: the client would retry
    it for all of CONNECT_S. Other schemes are left to the client."""
    scheme, _, rest = address.partition("://")
    host, _, port = rest.rpartition(":")
    if scheme != "tcp" or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_S).close()
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise PerflabError(f"cannot reach the Dask scheduler at {address}: {why}") from None


def run_journaled(
    measure: Measure,
    points: Sequence[Mapping[str, Any]],
    address: str | None,
    hosts: Iterable[str] | None,
    output: str | None,
    params: Mapping[str, Any],
    meta: Mapping[str, Any],
    resume: bool = False,
    unique: Iterable[str] = (),
    on_point: Callable[[], object] | None = None,
    on_start: Callable[[int], object] | None = None,
    check: Callable[[], Any] | None = None,
) -> tuple[pd.DataFrame, Outcome]:
    """run() journaled in `output` by (host, point), so an interrupted campaign resumes where it
    stopped; the frame comes back merged, complete only when no point is missing. Without an
    output the rows stay in memory."""
    out: Outcome | None = None
    if output is None:
        out = run(measure, points, address, hosts, None, on_point, on_start, check)
        extra = {"params": dict(params), "missing": out.missing, "refused": out.refused}
        return results.attach(out.frame, {**meta, **extra, "complete": not out.missing}), out
    key = ("host", *(points[0] if points else {}))
    recorder = Journal(output, params, meta, key, resume, expect=Expect(unique=tuple(unique)))
    try:
        out = run(measure, points, address, hosts, recorder, on_point, on_start, check)
    except BaseException:  # a campaign that recorded nothing (no scheduler) leaves no file
        if not recorder.abandon():
            recorder.finish(False)
        raise
    df = recorder.finish(not out.missing, {"missing": out.missing, "refused": out.refused})
    return df, out


def _pending(
    points: Sequence[Mapping[str, Any]], label: str, journal: Journal | None
) -> list[dict[str, Any]]:
    """Points of one host not measured yet (by an interrupted campaign)."""
    done = journal.done_keys() if journal else set()
    out = []
    for p in points:
        key = (label, *p.values())
        if key not in done:
            out.append(dict(p))
    return out


def _run_local(
    measure: Measure,
    points: Sequence[Mapping[str, Any]],
    journal: Journal | None,
    on_point: Callable[[], object] | None,
) -> Outcome:
    label = host_facts()["label"]
    frames = []
    for point in _pending(points, label, journal):
        df = measure_point(measure, point, label)
        frames.append(df)
        if journal:
            journal.extend_frame(df)
        if on_point:
            on_point()
    return Outcome(pd.concat(frames, ignore_index=True) if frames else pd.DataFrame())


def _run_cluster(
    client: Any,
    measure: Measure,
    points: Sequence[Mapping[str, Any]],
    chosen: list[Host],
    refused: list[str],
    journal: Journal | None,
    on_point: Callable[[], object] | None,
) -> Outcome:
    """One in-flight point per host; a host whose worker vanishes gets its rest marked missing."""
    queues = {h.label: _pending(points, h.label, journal) for h in chosen}
    inflight: dict[str, tuple[Any, dict]] = {}
    frames, missing = [], []
    hosts = {h.label: h for h in chosen}

    def submit(label: str) -> None:
        if queues[label]:
            point = queues[label].pop(0)
            task = functools.partial(measure_point, measure, point, label)
            fut = client.submit(
                task, workers=[hosts[label].address], pure=False, allow_other_workers=False
            )
            inflight[label] = (fut, point)

    def lose(label: str, reason: str) -> None:
        fut, point = inflight.pop(label)
        fut.cancel()
        missing.append({"host": label, **point, "reason": reason})
        missing.extend({"host": label, **p, "reason": "not run: host lost"} for p in queues[label])
        queues[label] = []

    for label in hosts:
        submit(label)
    checked, missing_since = 0.0, dict[str, float]()
    while inflight:
        time.sleep(0.005)
        if time.monotonic() - checked > 0.5:
            checked = time.monotonic()
            alive = set(client.scheduler_info()["workers"])
            for label, host in hosts.items():
                if host.address in alive:
                    missing_since.pop(label, None)
                else:
                    missing_since.setdefault(label, checked)
        for label in list(inflight):
            fut = inflight[label][0]
            if fut.status == "finished":
                try:
                    df = fut.result(timeout=GATHER_S)
                except TimeoutError:
                    # The result lived on a worker that died before it was gathered.
                    if hosts[label].address not in set(client.scheduler_info()["workers"]):
                        lose(label, "worker died before its result was gathered")
                    continue
                frames.append(df)
                if journal:
                    journal.extend_frame(df)
                del inflight[label]
                if on_point:
                    on_point()
                submit(label)
            elif fut.status == "error":
                first = str(fut.exception()).strip().splitlines() or ["unknown error"]
                lose(label, f"failed: {first[0]}")
            elif checked - missing_since.get(label, checked) > WORKER_GRACE_S:
                lose(label, "worker died during this point")
    if not frames and missing:
        raise PerflabError(
            f"no host measured anything: {missing[0]['host']}: {missing[0]['reason']}"
        )
    # No frames and nothing missing: a resumed campaign whose points were all journaled.
    return Outcome(
        pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(), missing, refused
    )
