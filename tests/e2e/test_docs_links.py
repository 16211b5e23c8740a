"""Every relative link of README.md, DEVELOPERS.md and docs/ names a file, and a heading of it, that exists.

`mkdocs build --strict` (.ci/run) checks the links between docs/ pages; this also covers the
Markdown files outside the site that link into it.
"""
from __future__ import annotations

import re
import unicodedata
from pathlib import Path

from pipeline.core.config import REPO_ROOT

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """The anchor MkDocs (Python-Markdown's toc) and GitHub give a heading's text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def prose(path: Path) -> list[tuple[int, str]]:
    """(line number, line) of a Markdown file's lines outside fenced code blocks."""
    lines, fenced = [], False
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append((number, line))
    return lines


def anchors(path: Path) -> set[str]:
    return {slug(m.group(1)) for _, line in prose(path) if (m := re.match(r"#{1,6} (.*)", line))}


def broken_links(path: Path) -> list[str]:
    """`file:line: target` for every relative link whose file or heading is missing."""
    broken = []
    for number, line in prose(path):
        for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
            if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
                continue
            file, _, anchor = target.partition("#")
            resolved = (path.parent / file).resolve() if file else path
            if not resolved.exists():
                broken.append(f"{path}:{number}: {target}")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                broken.append(f"{path}:{number}: {target} (no such heading)")
    return broken


def documents() -> list[Path]:
    return [REPO_ROOT / "README.md", REPO_ROOT / "DEVELOPERS.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]


def test_every_relative_link_resolves():
    assert [problem for path in documents() for problem in broken_links(path)] == []


def test_readme_links_into_every_docs_page():
    linked = {Path(target.partition("#")[0]).name for _, line in prose(REPO_ROOT / "README.md")
              for target in LINK.findall(line) if target.startswith("docs/")}
    pages = {path.name for path in (REPO_ROOT / "docs").glob("*.md")}
    assert pages - {"index.md"} <= linked


def test_broken_links_are_found(tmp_path):
    (tmp_path / "other.md").write_text("# Other page\n\n## A `code` heading, §4\n")
    page = tmp_path / "page.md"
    page.write_text("# Page\n\n[ok](other.md#a-code-heading-4) [ok](#page) [web](https://example.org)\n"
                    "[gone](missing.md) [no heading](other.md#nowhere) [self](#nowhere)\n"
                    "```\n[in code](missing.md)\n```\n`[inline](missing.md)` [after code](gone.md)\n")
    assert broken_links(page) == [f"{page}:4: missing.md", f"{page}:4: other.md#nowhere (no such heading)",
                                  f"{page}:4: #nowhere (no such heading)", f"{page}:8: gone.md"]
