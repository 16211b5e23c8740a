"""User-facing errors: one line that names the culprit and the fix, and a non-zero exit."""
from __future__ import annotations

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
