"""Atomic file writes (a reader never sees a half-written file), and text reads that drop a BOM.

Everything is written to a temporary name in the same folder, flushed, then renamed
over the final name (`os.replace` is atomic on POSIX file systems). A failed write (full
disk, no permission) removes the temporary file and raises a one-line `WriteError`.
"""
from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from pipeline.core import faults
from pipeline.core.errors import WriteError, input_error, write_error


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
    except Exception as error:
        cause = library_write_cause(error, path.parent)
        if cause is None:
            raise
        raise write_error(path, cause) from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


LOW_SPACE = 1 << 20  # bytes: a folder with less free space than this counts as full
SFE_SYSTEM = 2  # libsndfile's "System error." (a failed system call)


def library_write_cause(error: Exception, folder: Path) -> OSError | None:
    """The OSError behind a libsndfile error (soundfile.LibsndfileError), which reports a full
    disk or an unwritable file as "System error." without the system's reason: the reason is
    read from the folder (read-only file system, no write permission, less than LOW_SPACE
    free), else libsndfile's own words for a system error. None for any other error (a bug, not
    the disk). fileio does not import soundfile: only a process that loaded it can meet its errors.

    >>> library_write_cause(ValueError("bad"), Path(".")) is None
    True
    """
    soundfile = sys.modules.get("soundfile")
    if soundfile is None or not isinstance(error, soundfile.LibsndfileError):
        return None
    try:
        disk = os.statvfs(folder)
    except OSError as probe:
        return probe
    if disk.f_flag & os.ST_RDONLY:
        return OSError(errno.EROFS, os.strerror(errno.EROFS))
    if not os.access(folder, os.W_OK):
        return OSError(errno.EACCES, os.strerror(errno.EACCES))
    if disk.f_bavail * disk.f_frsize < LOW_SPACE:
        return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return OSError(f"libsndfile: {error.error_string}") if error.code == SFE_SYSTEM else None


TEMPORARY_NAME = re.compile(r"\..*\.tmp[0-9]+(\.[^.]*)?")


def is_temporary(name: str) -> bool:
    """Whether a file name is one `atomic_path` gives its temporaries (.<stem>.tmp<pid><suffix>).

    >>> is_temporary(".model.tmp123.pt"), is_temporary("model.pt")
    (True, False)
    """
    return TEMPORARY_NAME.fullmatch(name) is not None


def read_text(path: str | Path) -> str:
    r"""The text of a UTF-8 file without the byte-order mark (U+FEFF) some editors put first,
    which would otherwise become part of the first id (speaker "\ufeff1272"). Every reader of
    a user's text file (lists, score files, corpus metadata) goes through it; a file that is not
    UTF-8 text is a VpevalError naming the file, line and byte.

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "utt2spk"
    >>> _ = path.write_bytes(b"\xef\xbb\xbfu1 1272\n")  # a BOM, then one line
    >>> read_text(path)
    'u1 1272\n'
    >>> _ = path.write_bytes(b"u1 1272\nu2 Ren\xe9\n")  # Latin-1
    >>> read_text(path)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    pipeline.core.errors.VpevalError: .../utt2spk:2: not UTF-8 text (byte 0xe9 at column 7); save the file as UTF-8
    """
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line_start = data.rfind(b"\n", 0, error.start) + 1
        raise not_utf8(path, data, error, line_start, data.count(b"\n", 0, error.start) + 1) from None


def read_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    r"""(line number, text) of every line of a UTF-8 file, read as it goes (a large file is
    never held whole; a reader may stop at its first problem); the same lines, numbers and
    errors as `read_text(path).splitlines()`.

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "scores"
    >>> _ = path.write_bytes(b"\xef\xbb\xbfa 1\r\n\nb 0\n")  # a BOM, CRLF, a blank line
    >>> list(read_lines(path))
    [(1, 'a 1'), (2, ''), (3, 'b 0')]
    """
    number = 0
    with open(path, "rb") as stream:
        for raw in stream:
            try:
                text = raw.decode("utf-8-sig" if number == 0 else "utf-8")
            except UnicodeDecodeError as error:
                raise not_utf8(path, raw, error, 0, number + 1) from None
            for line in text.splitlines() or [""]:
                number += 1
                yield number, line


def not_utf8(path: str | Path, data: bytes, error: UnicodeDecodeError, line_start: int, line: int):
    """`path:line: not UTF-8 text (byte 0x.. at column n)`, for the byte `error` met in `data`."""
    return input_error(path, f"not UTF-8 text (byte 0x{data[error.start]:02x} at column "
                             f"{error.start - line_start + 1}); save the file as UTF-8", line)


def macos_metadata(name: str) -> bool:
    """Whether a file name is macOS Finder metadata (`._<name>` AppleDouble files, `.DS_Store`),
    which copies from a Mac leave beside the real files: never corpus data.

    >>> [macos_metadata(n) for n in ("._84-121123.trans.txt", ".DS_Store", "84-121123.trans.txt")]
    [True, True, False]
    """
    return name.startswith("._") or name == ".DS_Store"


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
