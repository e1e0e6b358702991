"""perflab: low-level performance experiments on Linux, measured honestly."""

from perflab.errors import PerflabError

__version__ = "0.1.0"
__all__ = ["PerflabError", "__version__", "campaign"]


def campaign(*args, **kwargs):
    """Run one measurement on every host of a Dask cluster: see perflab.campaigns.run."""
    from perflab.campaigns import run

    return run(*args, **kwargs)
