"""User-facing errors: one line that names the culprit and the fix, and a non-zero exit."""
from __future__ import annotations

import errno
from pathlib import Path


class VpevalError(Exception):
    """An error the user can fix. The CLI prints it as one line and exits with status 2."""


def input_error(path: str | Path, problem: str, line: int | None = None) -> VpevalError:
    """Build the standard `file:line: problem` error.

    >>> str(input_error("trials", "unknown utterance 'x'", line=3))
    "trials:3: unknown utterance 'x'"
    """
    where = f"{path}:{line}" if line is not None else f"{path}"
    return VpevalError(f"{where}: {problem}")


def byte_size(count: float) -> str:
    """A byte count for a message, in decimal units.

    >>> byte_size(41_234_000_000), byte_size(12_500_000), byte_size(900)
    ('41.2 GB', '12.5 MB', '900 B')
    """
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count:.0f} B"


class WriteError(VpevalError, OSError):
    """A file could not be written (full disk, no permission, read-only file system): one line
    naming the file, the system's reason and what to do. Still an OSError for callers that catch it."""


WRITE_HINTS = {
    errno.ENOSPC: "free some disk space or point paths.data at a bigger disk, then rerun (finished work is kept)",
    errno.EDQUOT: "free some quota or point paths.data elsewhere, then rerun (finished work is kept)",
    errno.EACCES: "make the folder writable or point paths.data (or hydra.run.dir) elsewhere",
    errno.EPERM: "make the folder writable or point paths.data (or hydra.run.dir) elsewhere",
    errno.EROFS: "the file system is read-only: point paths.data (or hydra.run.dir) elsewhere",
}


def write_error(path: str | Path, error: OSError) -> WriteError:
    """`path: cannot write (reason); hint` from the OSError a write raised.

    >>> import errno
    >>> str(write_error("out/x.json", OSError(errno.ENOSPC, "No space left on device")))[:52]
    'out/x.json: cannot write (No space left on device); '
    """
    reason = error.strerror or str(error) or type(error).__name__
    hint = WRITE_HINTS.get(error.errno, "check the folder and the disk, then rerun")
    if error.errno in (errno.EEXIST, errno.ENOTDIR):  # mkdir or open met a file where a folder must be
        reason, hint = "a part of its folder path is a file, not a folder", "choose another output path"
    return WriteError(f"{path}: cannot write ({reason}); {hint}")
