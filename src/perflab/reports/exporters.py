"""Reports and diffs as GitHub Markdown (to paste into a pull request) and as one self-contained
HTML page (figure embedded as a base64 PNG, so it opens offline and travels as one file)."""

import base64
import html
import math
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from perflab.reports.diff import Diff
from perflab.reports.report import Report


def cell(value: Any, floatfmt: str = "{:,.2f}") -> str:
    """One value as the text tables print it: thousands separated, nan and None spelled out."""
    if hasattr(value, "item") and not isinstance(value, str):
        value = value.item()
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return (
            "nan"
            if math.isnan(value)
            else str(value)
            if math.isinf(value)
            else floatfmt.format(value)
        )
    return str(value)


def _rows(df: pd.DataFrame, floatfmt: str) -> list[list[str]]:
    return [[cell(v, floatfmt) for v in row] for row in df.itertuples(index=False)]


def md_table(df: pd.DataFrame, floatfmt: str = "{:,.2f}") -> str:
    """A GitHub-flavoured Markdown table, numbers right-aligned."""

    def esc(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    numeric = [pd.api.types.is_numeric_dtype(t) for t in df.dtypes]
    head = "| " + " | ".join(esc(str(c)) or " " for c in df.columns) + " |"
    rule = "|" + "|".join("---:" if n else "---" for n in numeric) + "|"
    body = ["| " + " | ".join(esc(c) for c in r) + " |" for r in _rows(df, floatfmt)]
    return "\n".join([head, rule, *body])


def _conditions_md(conditions: dict[str, Any]) -> str:
    frame = pd.DataFrame(
        {"condition": list(conditions), "value": [cell(v) for v in conditions.values()]}
    )
    return md_table(frame)


def report_markdown(r: Report) -> str:
    """The report as Markdown: headline, partial warning, tables, conditions."""
    out = [f"## perflab report: {r.experiment} (`{r.path}`)", ""]
    if r.partial:
        out += [f"> **Partial result:** {r.partial}", ""]
    out += [f"- {line}" for line in r.summary.lines + r.notes]
    for t in r.summary.tables:
        if len(t.display.columns):
            out += ["", f"**{t.title}**", "", md_table(t.display, t.floatfmt)]
    out += ["", "**measured on**", "", _conditions_md(r.conditions()), ""]
    return "\n".join(out)


def diff_markdown(d: Diff, rows: pd.DataFrame | None = None) -> str:
    """The diff as Markdown: verdict, warnings, the changed points (or every point given)."""
    shown = d.flagged if rows is None else rows
    out = [
        f"## perflab diff: {d.before.experiment}",
        "",
        f"before `{d.before.path}`, after `{d.after.path}`; "
        f"ratio = median {d.value} after / before",
        "",
        f"**{d.verdict}**",
        "",
    ]
    out += [f"> warning: {w}" for w in d.warnings] + [f"- {n}" for n in d.notes]
    if len(shown):
        out += ["", md_table(shown, "{:,.3f}")]
    return "\n".join(out) + "\n"


STYLE = """
body{font-family:system-ui,sans-serif;max-width:72rem;margin:2rem auto;padding:0 1rem;color:#222}
table{border-collapse:collapse;margin:.5rem 0 1.5rem;font-size:.85rem}
th,td{border:1px solid #ccc;padding:.2rem .5rem}
td.n{text-align:right;font-variant-numeric:tabular-nums}
th{background:#f0f0f0}.warn{background:#fff3cd;border:1px solid #e0b000;padding:.5rem}
img{max-width:100%;border:1px solid #ddd}caption{text-align:left;font-weight:bold;padding:.3rem 0}
"""


def html_table(df: pd.DataFrame, title: str, floatfmt: str = "{:,.2f}") -> str:
    """One table, every value escaped."""
    numeric = [pd.api.types.is_numeric_dtype(t) for t in df.dtypes]
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in df.columns)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="n">{html.escape(v)}</td>' if n else f"<td>{html.escape(v)}</td>"
            for v, n in zip(row, numeric, strict=True)
        )
        + "</tr>"
        for row in _rows(df, floatfmt)
    )
    return f"<table><caption>{html.escape(title)}</caption><tr>{head}</tr>{body}</table>"


def _png(draw) -> str:
    """A figure drawn by draw(path) as a data: URI."""
    with tempfile.TemporaryDirectory(prefix="perflab-html-") as tmp:
        png = Path(tmp) / "figure.png"
        draw(png)
        data = base64.b64encode(png.read_bytes()).decode("ascii")
    return f"data:image/png;base64,{data}"


def _page(title: str, parts: Iterable[str]) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>"
        + "\n".join(parts)
        + "</body></html>\n"
    )


def _list(lines: Iterable[str]) -> str:
    items = "".join(f"<li>{html.escape(x)}</li>" for x in lines)
    return f"<ul>{items}</ul>" if items else ""


def _conditions_html(conditions: dict[str, Any], title: str = "measured on") -> str:
    frame = pd.DataFrame(
        {"condition": list(conditions), "value": [cell(v) for v in conditions.values()]}
    )
    return html_table(frame, title)


def report_html(r: Report) -> str:
    """The report as one page: summary, warnings, figure, tables, conditions."""
    parts = [f"<h1>perflab report: {html.escape(r.experiment)}</h1>",
             f"<p><code>{html.escape(r.path)}</code></p>"]  # fmt: skip
    if r.partial:
        parts.append(f'<p class="warn">Partial result: {html.escape(r.partial)}</p>')
    parts.append(_list(r.summary.lines + r.notes))
    if r.summary.plot is not None:
        parts.append(f'<img alt="{html.escape(r.experiment)} figure" src="{_png(r.plot)}">')
    for t in r.summary.tables:
        if len(t.display.columns):
            parts.append(html_table(t.display, t.title, t.floatfmt))
    parts.append(_conditions_html(r.conditions()))
    return _page(f"perflab report: {r.experiment}", parts)


MAX_HTML_ROWS = 500  # a page of 8 193 env sizes is unreadable: the changed ones then


def diff_html(d: Diff) -> str:
    """The diff as one page: verdict, warnings, the ratio figure, the points, both conditions."""
    parts = [
        f"<h1>perflab diff: {html.escape(d.before.experiment)}</h1>",
        f"<p>before <code>{html.escape(d.before.path)}</code>, after "
        f"<code>{html.escape(d.after.path)}</code>; ratio = median {html.escape(d.value)} "
        "after / before</p>",
        f"<p><strong>{html.escape(d.verdict)}</strong></p>",
    ]
    parts += [f'<p class="warn">{html.escape(w)}</p>' for w in d.warnings]
    parts.append(_list(d.notes))
    parts.append(f'<img alt="ratio after / before" src="{_png(d.plot)}">')
    if len(d.table) <= MAX_HTML_ROWS:
        parts.append(
            html_table(d.table, "every point (change: the interval excludes 1)", "{:,.3f}")
        )
    else:
        title = f"the {len(d.flagged)} changed of {len(d.table)} points (every point: --json)"
        parts.append(html_table(d.flagged, title, "{:,.3f}"))
    parts.append(_conditions_html(d.before.conditions(), "before measured on"))
    parts.append(_conditions_html(d.after.conditions(), "after measured on"))
    return _page(f"perflab diff: {d.before.experiment}", parts)
