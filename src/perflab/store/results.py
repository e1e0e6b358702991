"""Tidy results with their metadata: save/load without loss, refuse what perflab did not write."""

from __future__ import annotations

import json
import os
import re
import stat
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from perflab import __version__, errors
from perflab.core import files
from perflab.core.files import atomic, publish, temporary_beside
from perflab.core.lazy import pa, pd, pq
from perflab.errors import PerflabError
from perflab.plan.controls import typed_arguments
from perflab.store import filelock, schema
from perflab.system.frames import META_KEY as META_KEY
from perflab.system.frames import attach as attach
from perflab.system.frames import metadata as metadata

FORMATS = (".parquet", ".csv")


def _release(version: str) -> tuple[int, ...]:
    """A version's leading numbers ("0.2.0.dev1" -> (0, 2, 0)), to order two of them."""
    numbers = []
    for part in version.split("."):
        digits = re.match(r"\d+", part)
        if digits is None:
            break
        numbers.append(int(digits.group()))
    return tuple(numbers)


def newer_perflab(meta: Mapping[str, Any]) -> str | None:
    """The version of perflab that wrote this metadata when it is newer than this one, else None:
    a newer perflab may record what this one cannot read."""
    theirs = meta.get("perflab_version")
    if isinstance(theirs, str) and _release(theirs) > _release(__version__):
        return theirs
    return None


def check_output(path: str | os.PathLike, formats: tuple[str, ...] = FORMATS) -> Path:
    """Refuse, before anything is measured, a path that cannot be written or has no known format."""
    p = files.check_new(path, formats, "output")
    _check_parts(p)
    filelock.check_free(p)
    return p


def _check_parts(p: Path) -> None:
    """Refuse a journal directory (PATH.parts) that perflab would write chunks into through
    someone else's link or directory."""
    parts = p.with_name(p.name + ".parts")
    try:
        st = os.lstat(parts)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        what = files.kind(st.st_mode) if not stat.S_ISDIR(st.st_mode) else "another user's"
        raise PerflabError(
            f"{parts}: is {what}, not a journal perflab made for {p.name}; remove it or "
            "choose another -o"
        )


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".json")


def file_digest(path: str | os.PathLike) -> str:
    """The sha256 of a file's bytes, read in blocks (a FIFO or device refused, never read)."""
    return files.digest(path)


@typed_arguments
def save(df: pd.DataFrame, path: str | os.PathLike) -> Path:
    """Save a frame and its metadata: Parquet schema metadata, or CSV plus a JSON sidecar.

    A CSV is written in full, then its sidecar (holding the CSV's digest) is renamed into
    place, then the CSV: a full disk or a kill leaves the old pair, or a pair load() refuses.
    """
    p = check_output(path)
    meta = metadata(df)
    with filelock.held(p):
        if p.suffix == ".parquet":
            table = pa.Table.from_pandas(df, preserve_index=False)
            schema_meta = dict(table.schema.metadata or {})
            schema_meta[META_KEY.encode()] = json.dumps(meta).encode()
            table = table.replace_schema_metadata(schema_meta)
            atomic(p, lambda t: pq.write_table(table, t))
            return p
        data = temporary_beside(p)
        try:
            df.to_csv(data, index=False)
            dtypes = {c: _dtype(t) for c, t in df.dtypes.items()}
            side = {"metadata": meta, "dtypes": dtypes, "sha256": file_digest(data)}
            atomic(_sidecar(p), lambda t: t.write_text(json.dumps(side, indent=1)))
            publish(data, p)
        except BaseException:
            data.unlink(missing_ok=True)
            raise
    return p


@typed_arguments
def load(path: str | os.PathLike) -> pd.DataFrame:
    """Load a frame saved by save(), metadata back in attrs; a damaged file, or one whose
    columns or metadata break the types and ranges perflab writes (schema.py), is one clear
    error."""
    p = Path(path)
    if not p.exists():
        raise PerflabError(f"{p}: no such file")
    if p.is_dir():
        raise PerflabError(f"{p}: is a directory")
    if p.suffix not in FORMATS:
        raise PerflabError(f"{p}: unknown format {p.suffix!r}; use one of {', '.join(FORMATS)}")
    files.open_read(p).close()  # a FIFO or a device: refused here, never waited on
    if p.stat().st_size == 0:
        raise PerflabError(f"{p}: empty file (not a result perflab wrote)")
    df = _load_parquet(p) if p.suffix == ".parquet" else _load_csv(p)
    schema.check(df, metadata(df), p)
    return df


def _load_parquet(p: Path) -> pd.DataFrame:
    try:
        with files.open_read(p) as f:
            table = pq.read_table(f)
        df = table.to_pandas()
    except Exception as exc:
        raise PerflabError(f"{p}: not a Parquet file perflab can read ({_first(exc)})") from None
    raw = (table.schema.metadata or {}).get(META_KEY.encode(), b"{}")
    return attach(df, _meta(raw, p))


def _meta(raw: bytes | str, where: Path) -> dict:
    try:
        meta = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        meta = None
    if not isinstance(meta, dict):
        raise PerflabError(f"{where}: its perflab metadata is damaged")
    return meta


def _load_csv(p: Path) -> pd.DataFrame:
    side_path = _sidecar(p)
    side = {}
    if side_path.exists():
        side = _meta(files.read(side_path), side_path)
        if "sha256" not in side:
            errors.warn(errors.warning("sidecar_unchecked", path=p, sidecar=side_path))
        elif side["sha256"] != file_digest(p):
            raise PerflabError(
                f"{p}: does not match {side_path} (changed after perflab saved it, or a save "
                f"was cut short); delete {side_path} to load it without metadata"
            )
    try:
        with files.open_read(p) as f:
            df = pd.read_csv(f, keep_default_na=False, na_values=[""])
        dtypes = side.get("dtypes", {})
        for col, dtype in dtypes.items() if isinstance(dtypes, dict) else ():
            if col in df:
                df[col] = _as_recorded(df[col], dtype, side_path)
                if dtype in TEXT_DTYPES:  # a CSV writes "" and a missing text alike: "" it was
                    df[col] = df[col].fillna("")
    except PerflabError:
        raise
    except Exception as exc:
        raise PerflabError(f"{p}: not a CSV file perflab can read ({_first(exc)})") from None
    return attach(df, side.get("metadata", {}) if isinstance(side.get("metadata"), dict) else {})


def _as_recorded(values: pd.Series, dtype: Any, side_path: Path) -> pd.Series:
    """A CSV column in the dtype its sidecar records, refused where that dtype does not hold
    the column's values: a sidecar that lies (categories without "ok", float16 for ticks)
    would otherwise turn them into missing, infinite or wrapped ones."""
    import numpy as np

    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # what the cast loses is said below, in one line
        typed = values.astype(
            pd.CategoricalDtype(dtype["categories"], dtype["ordered"])
            if isinstance(dtype, dict)
            else dtype
        )
    lost = typed.isna().to_numpy() & values.notna().to_numpy()
    if not lost.any() and all(map(pd.api.types.is_numeric_dtype, (values, typed))):
        a = values.to_numpy(dtype=float, na_value=np.nan)
        b = typed.to_numpy(dtype=float, na_value=np.nan)
        lost = (a != b) & ~(np.isnan(a) & np.isnan(b))
    if lost.any():
        first = values.to_numpy(dtype=object)[lost.nonzero()[0][0]]
        said = "categories " + repr(dtype["categories"]) if isinstance(dtype, dict) else dtype
        raise PerflabError(
            f"{side_path}: records column {values.name} as {said}, which does not hold its "
            f"value {first!r} (changed after perflab saved it); delete {side_path} to load "
            "the CSV without metadata"
        )
    return typed


# Text columns: perflab's frames hold "" where a text is absent (compare's link_order where
# nothing is linked), never a missing value, which read back would print as "nan".
TEXT_DTYPES = ("object", "str", "string")


def _dtype(dtype: Any) -> str | dict[str, Any]:
    """A column's dtype for the CSV sidecar: a categorical one with its categories and their
    order, which its values alone do not give back (a status no run had, the order of a scale)."""
    if isinstance(dtype, pd.CategoricalDtype):
        categories = dtype.categories.tolist()
        if all(isinstance(c, (str, int, float)) for c in categories):  # what JSON gives back
            return {"categories": categories, "ordered": bool(dtype.ordered)}
    return str(dtype)


def stored(path: str | os.PathLike) -> tuple[dict, int | None] | None:
    """A result file's metadata and row count (None for a CSV) without reading its rows or
    loading pandas; None when it is not a file perflab saved."""
    p = Path(path)
    try:
        if p.suffix == ".parquet":
            with files.open_read(p) as f:
                info = pq.read_metadata(f)
            return _meta((info.metadata or {})[META_KEY.encode()], p), info.num_rows
        side = _meta(files.read(_sidecar(p)), p)
        return (side["metadata"], None) if isinstance(side.get("metadata"), dict) else None
    except (OSError, KeyError, PerflabError, pa.ArrowException):
        return None


def _first(exc: BaseException) -> str:
    """An exception as a short phrase: its type and the first line of its message."""
    text = str(exc).strip().splitlines()
    if not text:
        return type(exc).__name__
    first = text[0] if len(text[0]) <= 160 else text[0][:160].rsplit(" ", 1)[0] + " ..."
    return f"{type(exc).__name__}: {first}"
