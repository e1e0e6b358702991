"""The fleet view of a campaign: which host is off, by how much, judged robustly."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from perflab.analysis import plot, stats
from perflab.analysis.summary import Summary, Table
from perflab.core.lazy import pd
from perflab.errors import PerflabError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# A host is an outlier when its median is more than this many scaled MADs from the fleet's.
OUTLIER_MADS = 3.5
MAD_TO_SIGMA = 1.4826


def select(df: pd.DataFrame, where: list[str]) -> pd.DataFrame:
    """Rows matching every COLUMN=VALUE filter (values compared as text)."""
    for cond in where:
        col, sep, val = cond.partition("=")
        if not sep or col not in df:
            raise PerflabError(f"--where {cond!r}: expected COLUMN=VALUE with a column of the file")
        df = df[df[col].astype(str) == val]
    if df.empty:
        raise PerflabError(f"no rows match {' and '.join(where)}")
    return df


def per_host(df: pd.DataFrame, value: str) -> pd.DataFrame:
    """Median and spread per host, the deviation from the fleet median, and an outlier flag."""
    if "host" not in df or value not in df:
        raise PerflabError(f"no 'host' and '{value}' columns: is this a campaign result?")
    if not pd.api.types.is_numeric_dtype(df[value]) or pd.api.types.is_bool_dtype(df[value]):
        raise PerflabError(f"--value {value}: not a numeric column ({df[value].dtype})")
    ok = df[df["status"] == "ok"] if "status" in df else df
    ok = ok[np.isfinite(ok[value].astype(float))]
    if ok.empty:
        raise PerflabError(f"no row with status ok and a finite {value}: nothing to compare")
    table = stats.describe(ok, "host", value)
    fleet = float(np.median(table["median"]))
    scale = MAD_TO_SIGMA * stats.mad(table["median"]) if len(table) > 2 else 0.0
    table["vs_fleet_pct"] = 100 * (table["median"] / fleet - 1)
    table["robust_z"] = (table["median"] - fleet) / scale if scale else 0.0
    table["outlier"] = table["robust_z"].abs() > OUTLIER_MADS
    return table.sort_values("median", ignore_index=True)


def fleet_summary(table: pd.DataFrame) -> dict:
    """The distribution of host medians: the post's '0-30 %, some 1 to 3'."""
    med = table["median"]
    return {
        "hosts": len(table),
        "fleet_median": float(np.median(med)),
        "lowest": str(table["host"].iloc[0]),
        "highest": str(table["host"].iloc[-1]),
        "spread_pct": float(100 * (med.max() / med.min() - 1)),
        "outliers": table.loc[table["outlier"], "host"].tolist(),
    }


def plot_hosts(table: pd.DataFrame, value: str, path: Any = None) -> Figure:
    """Hosts sorted by median with their p5-p95 range; outliers in red."""
    fig, ax = plot.figure(figsize=(max(6, 0.35 * len(table) + 3), 5))
    x = np.arange(len(table))
    colours = [plot.COLORS[0] if o else plot.COLORS[1] for o in table["outlier"]]
    ax.vlines(x, table["p5"], table["p95"], color="#999999", lw=1, label="p5-p95")
    ax.scatter(x, table["median"], c=colours, zorder=3, label="median (red: outlier)")
    ax.axhline(np.median(table["median"]), color=plot.COLORS[2], ls="--", label="fleet median")
    ax.set_xticks(x, table["host"], rotation=60, ha="right")
    ax.set_ylabel(value)
    ax.margins(x=0.15)
    ax.legend(loc="best")
    return plot.save(fig, path, title="Hosts sorted by median")


def summary(df: pd.DataFrame, meta: dict[str, Any]) -> Summary:
    """A campaign's per-host medians; `perflab report hosts` has the fleet view and its options."""
    value = "fauxplat_per_s" if "fauxplat_per_s" in df else "ns" if "method" in df else "ticks"
    part = df[df["condition"] == "alone"] if "condition" in df else df
    hosts = per_host(part, value)
    lines = [f"{len(df)} rows from {df['host'].nunique()} hosts"]
    lines += [f"missing: {m}" for m in meta.get("missing", [])]
    cols = ["host", "n", "min", "median", "mean", "stdev", "mad", "vs_fleet_pct", "outlier"]
    table = Table("hosts", f"per host ({value})", hosts, shown=hosts[cols])
    return Summary(lines, [table], {"value": value}, lambda p: plot_hosts(hosts, value, p))
