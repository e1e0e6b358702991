"""pandas and pyarrow, loaded on first use: a sweep queues its first runs while they load.

They take a third of a second to import, the whole of perflab's start-up before its first
child otherwise. Modules take `pd`, `pa` and `pq` from here (and `from __future__ import
annotations`, so that annotations do not load them); type checkers see the real modules.
"""

import importlib
import types
from typing import TYPE_CHECKING

__all__ = ["pa", "pd", "pq"]


class _Lazy(types.ModuleType):
    """Stands for a module until one of its attributes is read; then imports it, and keeps
    its attributes so that later reads skip this."""

    def __getattr__(self, name: str) -> object:
        module = importlib.import_module(self.__name__)
        self.__dict__.update(
            (k, v) for k, v in vars(module).items() if k not in ("__name__", "__spec__")
        )
        return getattr(module, name)


if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq
else:
    pd, pa, pq = _Lazy("pandas"), _Lazy("pyarrow"), _Lazy("pyarrow.parquet")
