"""`perflab machine`: what every result records about where it was measured."""

from typing import TYPE_CHECKING

import click

from perflab.cli import cli
from perflab.cli.printing import emit_json, table
from perflab.errors import PerflabError

if TYPE_CHECKING:
    from perflab.system.placement_floor import PlacementFloor


@cli.command("machine")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option(
    "--remeasure-floor",
    is_flag=True,
    help="Measure the placement floor again (a few seconds) instead of reading it from the "
    "cache, e.g. after the machine was busy the first time.",
)
def machine_cmd(as_json: bool, remeasure_floor: bool) -> None:
    """CPU, topology, caches, clocks, ASLR, counters, and the conditions that spoil timing.

    With the placement floor (how much identical code at two addresses differs here),
    measured on first use and cached."""
    import dataclasses

    import pandas as pd

    from perflab.plan import metrics
    from perflab.running import placement
    from perflab.system import provenance

    rep = provenance.report()
    floor, cached, missing = None, False, ""
    try:
        floor, cached = placement.floor(remeasure=remeasure_floor)
    except PerflabError as exc:  # e.g. no C compiler: the rest of the report still holds
        missing = str(exc)
    rep["placement_floor"] = (
        {**dataclasses.asdict(floor), "cached": cached} if floor else {"not_measured": missing}
    )
    rep["metrics"] = {m: metrics.unavailable(m) or "available" for m in metrics.METRICS}
    if as_json:
        emit_json(rep)
        return
    mib = 2**20
    facts = [
        ("host", rep["hostname"]),
        ("cpu", f"{rep['cpu_model']} ({rep['arch']})"),
        (
            "cpus online",
            f"{rep['online_cpus']} ({rep['logical_cpus']} logical, "
            f"{rep['physical_cores']} physical cores)",
        ),
        ("memory", f"{rep['memory_bytes'] / 2**30:.1f} GiB"),
        ("kernel", rep["kernel"]),
        ("hypervisor", rep["hypervisor"]),
        (
            "clocksource",
            f"{rep['clocksource']} (available: {' '.join(rep['available_clocksources'])})",
        ),
        (
            "TSC",
            f"{rep['tsc_hz'] / 1e9:.6f} GHz, {rep['tsc_hz_source']}; "
            + " ".join(f"{k}={'yes' if v else 'no'}" for k, v in rep["tsc_flags"].items()),
        ),
        ("timer step", f"{rep['timer_step_ticks']} ticks (smallest step of the timing reads)"),
        *_floor_facts(floor, cached, missing),
        ("ASLR", f"randomize_va_space={rep['aslr']}"),
        ("governor", rep["governor"]),
        ("turbo", rep["turbo"]),
        ("perf_event_paranoid", rep["perf_event_paranoid"]),
        (
            "hardware counters",
            "work"
            if rep["hardware_counters"]
            else f"not supported here: {rep['hardware_counters_missing']}",
        ),
        (
            "metrics",
            ", ".join(m for m, why in rep["metrics"].items() if why == "available")
            + " (compare --metric); not here: "
            + (", ".join(m for m, why in rep["metrics"].items() if why != "available") or "none"),
        ),
    ]
    width = max(len(k) for k, _ in facts)
    for key, value in facts:
        click.echo(f"{key.rjust(width)}  {value}")
    click.echo()
    table(pd.DataFrame(rep["topology"]), title="topology (as lscpu -p)")
    click.echo()
    caches = pd.DataFrame(rep["caches"])
    if not caches.empty:
        caches["size"] = [
            f"{b // 1024} KiB" if b < mib else f"{b // mib} MiB" for b in caches.pop("size_bytes")
        ]
        table(caches, title="caches (cpu0)")
        click.echo()
    click.echo("conditions that spoil measurements:")
    for s in rep["spoilers"]:
        mark = "!!" if s["present"] else "ok"
        tail = f" -> {s['advice']}" if s["present"] else ""
        click.echo(f"  [{mark}] {s['name']}: {s['detail']}{tail}")


def _floor_facts(
    floor: "PlacementFloor | None", cached: bool, missing: str
) -> list[tuple[str, str]]:
    """The placement floor's lines: what it means, then how and when it was measured."""
    if floor is None:
        return [("placement floor", f"not measured: {missing}")]
    when = (
        f"measured {floor.measured_at}, cached (--remeasure-floor measures it again)"
        if cached
        else f"measured now in {floor.seconds:.1f} s and cached"
    )
    return [("placement floor", floor.sentence()), ("", f"{floor.method()}; {when}")]
