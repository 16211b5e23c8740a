"""Draw docs/dataflow.svg, the data-flow figure of docs/architecture.md.

Plain SVG text, the same bytes on every run (tests/e2e/test_architecture_table.py checks that
the committed figure is this script's output). After changing the figure:

    python scripts/draw_dataflow.py            # rewrites docs/dataflow.svg
"""
from __future__ import annotations

import sys
from html import escape
from pathlib import Path

FIGURE = Path(__file__).resolve().parent.parent / "docs" / "dataflow.svg"
WIDTH, HEIGHT = 1008, 492
BOX_W, BOX_H, GAP = 168, 74, 32
STAGE = "#e8f0fb"
OUTSIDE = "#f4f4f4"
CORE = "#fdf3e1"

# (title, caption lines): a stage and the library it calls
FIRST_ROW = [
    ("prepare", ["corpus -> manifests,", "trial lists (pipeline/data)"]),
    ("validate", ["every file decodes;", "stops on a bad input"]),
    ("anonymize", ["each list through the", "system (anonymizers/)"]),
    ("split", ["attacker's training and", "validation speakers"]),
    ("train", ["the attacker", "(pipeline/asv)"]),
]
SECOND_ROW = [
    ("extract", ["embeddings of a list", "(pipeline/asv)"]),
    ("score", ["trials -> score file", "(cosine or PLDA)"]),
    ("evaluate", ["every metric of the list", "(pipeline/metrics)"]),
    ("detect", ["EER_val against EER_test:", "overestimated?"]),
    ("report", ["results.json, report.md,", "figures (pipeline/report)"]),
]


def box(x: float, y: float, title: str, lines: list[str], fill: str, w: float = BOX_W, h: float = BOX_H) -> str:
    """A rounded box with a bold title and caption lines."""
    parts = [f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="8" fill="{fill}" stroke="#44546a"/>',
             f'<text x="{x + w / 2}" y="{y + 22}" class="title">{escape(title)}</text>']
    parts += [f'<text x="{x + w / 2}" y="{y + 42 + 16 * i}">{escape(line)}</text>' for i, line in enumerate(lines)]
    return "\n".join(parts)


def arrow(points: list[tuple[float, float]]) -> str:
    """A polyline ending in an arrow head."""
    path = " ".join(f"{x},{y}" for x, y in points)
    return f'<polyline points="{path}" fill="none" stroke="#44546a" stroke-width="1.6" marker-end="url(#head)"/>'


def row(stages: list[tuple[str, list[str]]], y: float) -> tuple[list[str], list[float]]:
    """Boxes of one row of stages joined by arrows; returns the parts and each box's x."""
    xs = [20 + i * (BOX_W + GAP) for i in range(len(stages))]
    parts = [box(x, y, title, lines, STAGE) for x, (title, lines) in zip(xs, stages)]
    parts += [arrow([(x + BOX_W, y + BOX_H / 2), (x + BOX_W + GAP - 2, y + BOX_H / 2)]) for x in xs[:-1]]
    return parts, xs


def figure() -> str:
    """The whole SVG document."""
    top = 20
    parts = [box(20, top, "config", ["conf/ groups, recipes/<name>/,", "command-line overrides"], OUTSIDE, w=268),
             box(348, top, "pipeline/app/cli.py", ["composes the config, checks", "every setting before any stage"],
                 OUTSIDE, w=268),
             box(676, top, "pipeline/app/experiment.py", ["the stages of every attack", "(sweep.py: one per point)"],
                 OUTSIDE, w=312),
             arrow([(288, top + BOX_H / 2), (346, top + BOX_H / 2)]),
             arrow([(616, top + BOX_H / 2), (674, top + BOX_H / 2)])]
    first_y, second_y = 150, 282
    first, first_xs = row(FIRST_ROW, first_y)
    second, _ = row(SECOND_ROW, second_y)
    parts += first + second
    parts.append(arrow([(832, top + BOX_H), (832, 120), (20 + BOX_W / 2, 120), (20 + BOX_W / 2, first_y - 2)]))
    last = first_xs[-1] + BOX_W / 2
    parts.append(arrow([(last, first_y + BOX_H), (last, 252), (20 + BOX_W / 2, 252), (20 + BOX_W / 2, second_y - 2)]))
    side_y = 398
    parts.append(box(20, side_y, "beside the chain", ["confidence (EER intervals), similarity (voice similarity),",
                                                    "pitch / transcribe / emotion (utility: pipeline/app/utility.py)"],
                     STAGE, w=468))
    parts.append(box(512, side_y, "every stage: pipeline/core/cache.py",
                     ["<paths.cache>/<stage>/<hash>/, key = settings + inputs'",
                      "hashes + code digest; _DONE written last"], CORE, w=476))
    style = ("text{font-family:Helvetica,Arial,sans-serif;font-size:12.5px;text-anchor:middle;fill:#1d2733}"
             ".title{font-weight:bold;font-size:14px}")
    head = ('<defs><marker id="head" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
            'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#44546a"/></marker></defs>')
    return "\n".join([f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
                      f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="vpeval data flow">',
                      f"<style>{style}</style>", head, f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
                      *parts, "</svg>", ""])


if __name__ == "__main__":
    FIGURE.write_text(figure())
    print(FIGURE, file=sys.stderr)
