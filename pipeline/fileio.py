"""Atomic file writes: a reader never sees a half-written file.

Everything is written to a temporary name in the same folder, flushed, then renamed
over the final name (`os.replace` is atomic on POSIX file systems).
"""
from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success rename it to `path`.

    The temporary name keeps the suffix so that format detection by extension works.

    >>> with atomic_path("out.json") as tmp:  # doctest: +SKIP
    ...     tmp.write_text("{}")
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp{os.getpid()}{path.suffix}")
    try:
        yield tmp
        if tmp.exists():
            with open(tmp, "rb+") as handle:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_text(path: str | Path, text: str) -> Path:
    """Write `text` to `path` atomically and return the path."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    return Path(path)


def write_json(path: str | Path, obj) -> Path:
    """Write `obj` as indented JSON, atomically."""
    return write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


def write_lines(path: str | Path, lines) -> Path:
    """Write an iterable of strings, one per line, atomically."""
    return write_text(path, "".join(f"{line}\n" for line in lines))
