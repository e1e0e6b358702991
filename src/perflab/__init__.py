"""perflab: low-level performance experiments on Linux, measured honestly."""

from perflab.errors import PerflabError

__version__ = "0.1.0"
__all__ = ["PerflabError", "__version__"]
