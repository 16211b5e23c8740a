"""A report as sections of text, tables and figures, rendered to Markdown and to HTML.

The Markdown links the figures (PNG files beside it); the HTML embeds them as base64, so
`report.html` is self-contained. In the HTML each section is a `<section>` whose id is its
title's slug (`slug`), a table that is wider than the page scrolls inside its own box, a
paragraph of `- ` lines is a list, `**bold**` and `` `code` `` are marked up. `results_csv`
flattens records into one CSV row each.

>>> doc = [Section("Results", text="EER in %.", tables=[(["a"], [[1]])])]
>>> "<table>" in render_html("t", doc)
True
"""
from __future__ import annotations

import base64
import csv
import html
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.report.tables import cell, markdown_table


@dataclass
class Section:
    """A titled part of a report: paragraphs, (headers, rows) tables, figure paths."""

    title: str
    text: str = ""
    tables: list[tuple[list[str], list[list]]] = field(default_factory=list)
    figures: list[Path] = field(default_factory=list)


def render_markdown(title: str, sections: list[Section], base: Path | None = None) -> str:
    parts = [f"# {title}"]
    for section in sections:
        parts.append(f"## {section.title}")
        if section.text:
            parts.append(section.text)
        parts += [markdown_table(headers, rows) for headers, rows in section.tables]
        for figure in section.figures:
            link = figure.relative_to(base) if base is not None else figure
            parts.append(f"![{figure.stem}]({link})")
    return "\n\n".join(parts) + "\n"


LONG_CELL = 40  # characters: a cell this long is prose (a reason, overrides), set left and given room


def _html_table(headers: list[str], rows: list[list]) -> str:
    def td(value) -> str:
        text = cell(value)
        return f"<td class='long'>{html.escape(text)}</td>" if len(text) >= LONG_CELL else f"<td>{html.escape(text)}</td>"

    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(td(v) for v in row) + "</tr>" for row in rows)
    return f"<div class='wide'><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"


def _inline(text: str) -> str:
    """Escaped `text` with its `**bold**` and `` `code` `` marked up."""
    text = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", html.escape(text))
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", text)


def _html_text(text: str) -> str:
    parts = []
    for paragraph in (p for p in text.split("\n\n") if p.strip()):
        lines = paragraph.strip().splitlines()
        if all(line.startswith("- ") for line in lines):
            parts.append("<ul>" + "".join(f"<li>{_inline(line[2:])}</li>" for line in lines) + "</ul>")
        else:
            parts.append(f"<p>{_inline(paragraph)}</p>")
    return "".join(parts)


def slug(title: str) -> str:
    """The HTML id of a section: its title in lower case, runs of other characters as one `-`."""
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


STYLE = ("body{font-family:sans-serif;max-width:70em;margin:2em auto;padding:0 1em}"
         "p,li{overflow-wrap:anywhere}code{font-size:90%}"
         ".wide{overflow-x:auto;margin:1em 0}"
         "table{border-collapse:collapse;font-size:90%}"
         "td,th{border:1px solid #ccc;padding:.2em .5em;text-align:right}th{background:#eee}"
         "td.long{min-width:20em;text-align:left}"
         "img{max-width:48%;margin:.5em}")


def render_html(title: str, sections: list[Section]) -> str:
    head = (f"<!DOCTYPE html><html><head><meta charset='utf-8'>"
            f"<meta name='viewport' content='width=device-width'><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>")
    parts = [head]
    for section in sections:
        parts.append(f"<section id='{slug(section.title)}'><h2>{html.escape(section.title)}</h2>")
        if section.text:
            parts.append(_html_text(section.text))
        parts += [_html_table(headers, rows) for headers, rows in section.tables]
        for figure in section.figures:
            data = base64.b64encode(Path(figure).read_bytes()).decode()
            parts.append(f"<img alt='{html.escape(figure.stem)}' src='data:image/png;base64,{data}'>")
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def results_csv(records: list[dict]) -> str:
    """One row per record, one column per key (nested values as JSON), keys in first-seen order."""
    columns = list(dict.fromkeys(k for r in records for k in r))
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for record in records:
        writer.writerow(["" if record.get(c) is None else
                         json.dumps(record[c]) if isinstance(record[c], (dict, list)) else record[c]
                         for c in columns])
    return buffer.getvalue()
