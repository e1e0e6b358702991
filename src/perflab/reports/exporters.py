"""The renderers of what perflab says, one per format behind one interface: plain text (what a
verb prints and `perflab report` prints), JSON (--json), GitHub Markdown (to paste into a pull
request) and one self-contained HTML page (figure embedded as a base64 PNG, so it opens offline
and travels as one file; the notebook view shows the same HTML)."""

from __future__ import annotations

import base64
import html
import json
import math
import re
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from perflab.analysis.summary import Summary, Table
from perflab.core.lazy import pd
from perflab.reports.report import Report

if TYPE_CHECKING:  # a verb that prints its result renders no diff, nor imports its statistics
    from perflab.reports.diff import Diff


def cell(value: Any, floatfmt: str = "{:,.2f}") -> str:
    """One value as the tables print it: thousands separated, nan and None spelled out."""
    if hasattr(value, "item") and not isinstance(value, str):
        value = value.item()
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return str(value) if math.isinf(value) else floatfmt.format(value)
    return str(value)


def _rows(df: pd.DataFrame, floatfmt: str) -> list[list[str]]:
    return [[cell(v, floatfmt) for v in row] for row in df.itertuples(index=False)]


def jsonable(obj: Any) -> Any:
    """JSON-safe values: NaN/inf become null, numpy scalars Python numbers, frames records."""
    if isinstance(obj, pd.DataFrame):
        return records(obj)
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(v) for v in obj]
    if hasattr(obj, "item"):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """A frame as JSON-ready records."""
    return jsonable(df.to_dict(orient="records"))


def json_text(doc: Any) -> str:
    """One JSON document, indented, NaN as null."""
    return json.dumps(jsonable(doc), indent=1, default=str)


def _shown(summary: Summary) -> list[Table]:
    """The tables a reader sees: those with rows and columns left to show."""
    return [t for t in summary.tables if len(t.display.columns) and len(t.display)]


def text_table(df: pd.DataFrame, floatfmt: str = "{:,.2f}", title: str | None = None) -> str:
    """A right-aligned text table in the style of the articles' listings."""
    cols = [str(c) for c in df.columns]
    cells = _rows(df, floatfmt)
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(cols)]
    lines = [title] if title else []
    lines.append("  ".join(c.rjust(w) for c, w in zip(cols, widths, strict=True)))
    lines += ["  ".join(v.rjust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(lines)


# What Markdown would read as markup rather than text: a cell's end, raw HTML, a code span, a
# link or image (a page fetching an address a result file chose), an escape of our own.
_MD_MARKUP = re.compile(r"([\\`|<>\[\]])")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _visible(text: str) -> str:
    """Control characters as their escapes (\\x1b), a line break as a space: one line, as typed."""
    return _CONTROL.sub(lambda m: " " if m[0] in "\n\r\t" else f"\\x{ord(m[0]):02x}", text)


def _h(text: Any) -> str:
    """Text from a result file or its metadata as a page shows it: markup escaped, control
    characters (an ESC a host label carried) spelled out as they are in a terminal."""
    return html.escape(_visible(str(text)))


def md_text(text: Any) -> str:
    """Text from a result file or its metadata as Markdown shows it: literally, whatever it is."""
    return _visible(_MD_MARKUP.sub(r"\\\1", str(text)))


def md_code(text: Any) -> str:
    """Text as one inline code span that no backtick inside it can close."""
    text = _visible(str(text))
    fence = "`" * (max((len(r) for r in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def md_table(df: pd.DataFrame, floatfmt: str = "{:,.2f}") -> str:
    """A GitHub-flavoured Markdown table, numbers right-aligned, every value shown as text."""
    numeric = [pd.api.types.is_numeric_dtype(t) for t in df.dtypes]
    head = "| " + " | ".join(md_text(c) or " " for c in df.columns) + " |"
    rule = "|" + "|".join("---:" if n else "---" for n in numeric) + "|"
    body = ["| " + " | ".join(md_text(c) for c in r) + " |" for r in _rows(df, floatfmt)]
    return "\n".join([head, rule, *body])


def html_table(df: pd.DataFrame, title: str, floatfmt: str = "{:,.2f}") -> str:
    """One table, every value escaped."""
    numeric = [pd.api.types.is_numeric_dtype(t) for t in df.dtypes]
    head = "".join(f"<th>{_h(str(c))}</th>" for c in df.columns)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="n">{_h(v)}</td>' if n else f"<td>{_h(v)}</td>"
            for v, n in zip(row, numeric, strict=True)
        )
        + "</tr>"
        for row in _rows(df, floatfmt)
    )
    return f"<table><caption>{_h(title)}</caption><tr>{head}</tr>{body}</table>"


def _conditions(conditions: dict[str, Any]) -> pd.DataFrame:
    return pd.DataFrame(
        {"condition": list(conditions), "value": [cell(v) for v in conditions.values()]}
    )


class Renderer(Protocol):
    """One format: a summary alone (what a verb prints of what it measured), or a whole report
    (the summary, how the frame was read and where it was measured)."""

    def summary(self, s: Summary) -> str:
        """The summary's sentences and tables."""
        ...

    def report(self, r: Report) -> str:
        """The report: a heading, the summary and the conditions."""
        ...


class Text:
    """What a terminal shows."""

    def summary(self, s: Summary) -> str:
        parts = ["\n".join(s.lines + s.notes)] if s.lines or s.notes else []
        parts += [text_table(t.display, t.floatfmt, t.title) for t in _shown(s)]
        return "\n\n".join(parts)

    def report(self, r: Report) -> str:
        head = [f"{r.experiment} result {r.path}"]
        if r.partial:
            head.append(f"PARTIAL: {r.partial}")
        measured = ["measured on:"] + [f"  {k}: {cell(v)}" for k, v in r.conditions().items()]
        parts = ["\n".join(head + r.notes), self.summary(r.summary), "\n".join(measured)]
        return "\n\n".join(p for p in parts if p)


class Json:
    """One JSON document: the sentences, every value and every table in full."""

    def document(self, s: Summary) -> dict[str, Any]:
        return {
            "lines": s.lines,
            **s.values,
            **{t.name: records(t.frame) for t in s.tables},
        }

    def summary(self, s: Summary) -> str:
        return json_text(self.document(s))

    def report(self, r: Report) -> str:
        return json_text(
            {
                "file": r.path,
                "experiment": r.experiment,
                "partial": r.partial,
                "notes": r.notes + r.summary.notes,
                **self.document(r.summary),
                "conditions": r.conditions(),
                "metadata": r.meta,
            }
        )


class Markdown:
    """GitHub Markdown: sentences as a list, each table under its title in bold."""

    def summary(self, s: Summary) -> str:
        out = [f"- {md_text(line)}" for line in s.lines + s.notes]
        for t in _shown(s):
            out += ["", f"**{md_text(t.title)}**", "", md_table(t.display, t.floatfmt)]
        return "\n".join(out)

    def report(self, r: Report) -> str:
        out = [f"## perflab report: {md_text(r.experiment)} ({md_code(r.path)})", ""]
        if r.partial:
            out += [f"> **Partial result:** {md_text(r.partial)}", ""]
        out += [f"- {md_text(note)}" for note in r.notes]
        out += [self.summary(r.summary), "", "**measured on**", ""]
        return "\n".join([*out, md_table(_conditions(r.conditions())), ""])


STYLE = """
body{font-family:system-ui,sans-serif;max-width:72rem;margin:2rem auto;padding:0 1rem;color:#222}
table{border-collapse:collapse;margin:.5rem 0 1.5rem;font-size:.85rem}
th,td{border:1px solid #ccc;padding:.2rem .5rem}
td.n{text-align:right;font-variant-numeric:tabular-nums}
th{background:#f0f0f0}.warn{background:#fff3cd;border:1px solid #e0b000;padding:.5rem}
img{max-width:100%;border:1px solid #ddd}caption{text-align:left;font-weight:bold;padding:.3rem 0}
"""


def _png(draw: Callable[[Path], Any]) -> str:
    """A figure drawn by draw(path) as a data: URI."""
    with tempfile.TemporaryDirectory(prefix="perflab-html-") as tmp:
        png = Path(tmp) / "figure.png"
        draw(png)
        data = base64.b64encode(png.read_bytes()).decode("ascii")
    return f"data:image/png;base64,{data}"


def _page(title: str, parts: Iterable[str]) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_h(title)}</title><style>{STYLE}</style></head><body>"
        + "\n".join(parts)
        + "</body></html>\n"
    )


def _list(lines: Iterable[str]) -> str:
    items = "".join(f"<li>{_h(x)}</li>" for x in lines)
    return f"<ul>{items}</ul>" if items else ""


class Html:
    """HTML: the body a notebook shows inline, or one self-contained page around it."""

    def summary(self, s: Summary) -> str:
        parts = [_list(s.lines + s.notes)]
        if s.plot is not None:
            parts.append(f'<img alt="figure" src="{_png(s.plot)}">')
        parts += [html_table(t.display, t.title, t.floatfmt) for t in _shown(s)]
        return "\n".join(p for p in parts if p)

    def body(self, r: Report) -> str:
        """The report without the page around it: what the notebook view shows."""
        parts = [f"<h2>perflab {_h(r.experiment)}: {len(r.frame):,} rows</h2>"]
        if r.path:
            parts.append(f"<p><code>{_h(r.path)}</code></p>")
        if r.partial:
            parts.append(f'<p class="warn">Partial result: {_h(r.partial)}</p>')
        parts += [_list(r.notes), self.summary(r.summary)]
        parts.append(html_table(_conditions(r.conditions()), "measured on"))
        return "\n".join(p for p in parts if p)

    def report(self, r: Report) -> str:
        return _page(f"perflab report: {r.experiment}", [self.body(r)])

    def page(self, title: str, s: Summary) -> str:
        """A summary alone as one self-contained page (a verb's view that is no result)."""
        return _page(title, [f"<h2>{_h(title)}</h2>", self.summary(s)])


TEXT, JSON, MARKDOWN, HTML = Text(), Json(), Markdown(), Html()
RENDERERS: dict[str, Renderer] = {"text": TEXT, "json": JSON, "md": MARKDOWN, "html": HTML}


def diff_markdown(d: Diff, rows: pd.DataFrame | None = None) -> str:
    """The diff as Markdown: verdict, warnings, the changed points (or every point given)."""
    shown = d.flagged if rows is None else rows
    out = [
        f"## perflab diff: {md_text(d.before.experiment)}",
        "",
        f"before {md_code(d.before.path)}, after {md_code(d.after.path)}; "
        f"ratio = median {md_text(d.value)} after / before",
        "",
        f"**{md_text(d.verdict)}**",
        "",
    ]
    out += [f"> warning: {md_text(w)}" for w in d.warnings]
    out += [f"- {md_text(n)}" for n in d.notes]
    if len(shown):
        out += ["", md_table(shown, "{:,.3f}")]
    return "\n".join(out) + "\n"


MAX_HTML_ROWS = 500  # a page of 8 193 env sizes is unreadable: the changed ones then


def diff_html(d: Diff) -> str:
    """The diff as one page: verdict, warnings, the ratio figure, the points, both conditions."""
    parts = [
        f"<h1>perflab diff: {_h(d.before.experiment)}</h1>",
        f"<p>before <code>{_h(str(d.before.path))}</code>, after "
        f"<code>{_h(str(d.after.path))}</code>; ratio = median "
        f"{_h(d.value)} after / before</p>",
        f"<p><strong>{_h(d.verdict)}</strong></p>",
    ]
    parts += [f'<p class="warn">{_h(w)}</p>' for w in d.warnings]
    parts.append(_list(d.notes))
    parts.append(f'<img alt="ratio after / before" src="{_png(d.plot)}">')
    if len(d.table) <= MAX_HTML_ROWS:
        parts.append(
            html_table(d.table, "every point (change: the interval excludes 1)", "{:,.3f}")
        )
    else:
        title = f"the {len(d.flagged)} changed of {len(d.table)} points (every point: --json)"
        parts.append(html_table(d.flagged, title, "{:,.3f}"))
    parts.append(html_table(_conditions(d.before.conditions()), "before measured on"))
    parts.append(html_table(_conditions(d.after.conditions()), "after measured on"))
    return _page(f"perflab diff: {d.before.experiment}", parts)
