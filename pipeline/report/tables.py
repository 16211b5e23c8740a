"""Plain-text tables for reports.

>>> print(markdown_table(["a", "b"], [[1, 0.5]]))
| a | b |
|---|---|
| 1 | 0.5 |
"""
from __future__ import annotations


def cell(value) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def markdown_table(headers: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.2f}"


def fixed(value: float | None, digits: int = 2) -> str:
    """`value` with `digits` decimals (e.g. dB), '–' when missing."""
    return "–" if value is None else f"{value:.{digits}f}"
