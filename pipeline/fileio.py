"""Atomic file writes: a reader never sees a half-written file.

Everything is written to a temporary name in the same folder, flushed, then renamed
over the final name (`os.replace` is atomic on POSIX file systems). A failed write (full
disk, no permission) removes the temporary file and raises a one-line `WriteError`.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from pipeline import faults
from pipeline.errors import WriteError, write_error


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success rename it to `path`.

    The temporary name keeps the suffix so that format detection by extension works.

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> with atomic_path(folder / "out.json") as tmp:
    ...     _ = tmp.write_text("{}")
    >>> (folder / "out.json").read_text(), sorted(p.name for p in folder.iterdir())
    ('{}', ['out.json'])
    """
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.tmp{os.getpid()}{path.suffix}")  # see is_temporary
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        yield tmp
        faults.hit("write")
        if tmp.exists():
            with open(tmp, "rb+") as handle:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except WriteError:
        raise
    except OSError as error:  # a full disk, a read-only or unwritable folder: one line, no partial file
        raise write_error(path, error) from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


TEMPORARY_NAME = re.compile(r"\..*\.tmp[0-9]+(\.[^.]*)?")


def is_temporary(name: str) -> bool:
    """Whether a file name is one `atomic_path` gives its temporaries (.<stem>.tmp<pid><suffix>).

    >>> is_temporary(".model.tmp123.pt"), is_temporary("model.pt")
    (True, False)
    """
    return TEMPORARY_NAME.fullmatch(name) is not None


def write_text(path: str | Path, text: str) -> Path:
    """Write `text` to `path` atomically and return the path."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    return Path(path)


def write_json(path: str | Path, obj) -> Path:
    """Write `obj` as indented JSON, atomically."""
    return write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


def write_npy(path: str | Path, array) -> Path:
    """`np.save` atomically."""
    import numpy as np

    with atomic_path(path) as tmp:
        np.save(tmp, array)
    return Path(path)


def write_lines(path: str | Path, lines) -> Path:
    """Write an iterable of strings, one per line, atomically."""
    return write_text(path, "".join(f"{line}\n" for line in lines))
