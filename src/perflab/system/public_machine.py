"""perflab.machine as the public API names it: the CPUs' facts (machine.py) with the metadata
every result carries and the machine's report (provenance.py), which sit above them."""

from typing import Any

from perflab.system import machine as _machine
from perflab.system.provenance import metadata, report

__all__ = ["metadata", "report"]


def __getattr__(name: str) -> Any:
    """Every other name is machine.py's: usable_cpus, topology, cpu_model and the rest."""
    return getattr(_machine, name)
