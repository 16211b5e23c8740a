"""What the tests of the bad-input catalogue share (docs/robustness.md, "Bad inputs").

One test per row of the table, in the `test_bad_inputs_<n>_<topic>.py` files beside this one.
Every row feeds one bad input to the code that meets it first and checks that it stops with
a VpevalError (or, through the CLI, exit status 2) whose message is ONE line naming the file,
line or key and the problem, and, where a file was being written, that no half-written
output is left. Each test records the message it saw in OBSERVED. The files run in the order
of their numbers, which is the order of the table's rows; the last one checks that the table
in docs/robustness.md shows exactly these messages (regenerate it with
`python tests/bad_inputs_table.py`).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tqdm import tqdm

from pipeline.core.cache import Cache
from pipeline.core.config import REPO_ROOT
from pipeline.core.errors import VpevalError
from pipeline.stages import validate
from tests.helpers import edit_manifest

RATE = 16000
SECONDS = 0.3
OBSERVED: dict[str, tuple[str, str, str]] = {}  # row id -> (input, message, where detected)


def record(row: str, what: str, where: str, message: str, tmp: Path, *needles: str) -> str:
    """Check `message` is one line mentioning every needle, and keep it for the table."""
    message = message.strip()
    assert message and "\n" not in message, f"{row}: not one line: {message!r}"
    shown = message.replace(str(tmp), "<tmp>").replace(str(REPO_ROOT), "<repo>")
    for needle in needles:  # looked for outside the test's folder, whose name holds the test's words
        assert needle in (message if str(tmp) in needle else shown), f"{row}: {needle!r} not in {message!r}"
    shown = re.sub(r"/(\w+)/[0-9a-f]{16}(?=[/.])", r"/\1/<hash>", shown)  # stage folders: keys follow the code
    OBSERVED[row] = (what, shown, where)
    return message


def raised(function, *args, **kwargs) -> str:
    """The one-line error of `function(*args, **kwargs)`; no progress bar it opened is left open
    (an open bar shifts every line printed after it, the CLI's `vpeval: error:` line included)."""
    before = set(map(id, tqdm._instances))
    with pytest.raises(VpevalError) as caught:
        function(*args, **kwargs)
    left_open = [bar.desc for bar in list(tqdm._instances) if id(bar) not in before]
    assert not left_open, f"progress bars left open by the error: {left_open}"
    return str(caught.value)


def vpeval(*args: str, tmp: Path) -> subprocess.CompletedProcess:
    """`python -m pipeline ARGS` in a subprocess; returns the finished process."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "VPEVAL_DATA": str(tmp / "vpeval_data")}
    return subprocess.run([sys.executable, "-m", "pipeline", *args], cwd=REPO_ROOT, env=env, capture_output=True,
                          text=True, timeout=300, check=False)


def cli_message(process: subprocess.CompletedProcess) -> str:
    """The CLI's error line: exit status 2 and stderr ending in exactly one `vpeval: error:` /
    `error:` line (log lines before it are allowed)."""
    assert process.returncode == 2, (process.returncode, process.stderr[-2000:])
    lines = [line for line in process.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith(("vpeval: error:", "error:"))]
    assert len(errors) == 1 and errors[0] == lines[-1], process.stderr[-2000:]
    assert "Traceback" not in process.stderr
    return errors[0]


def validation_error(prepared: Path) -> str:
    return raised(validate.run, prepared, Cache(prepared.parent / "cache"), ("test",))


def point_audio(prepared: Path, uid: str, path: Path, **changes) -> None:
    """Make utterance `uid` of test_trials_f use `path` (with other manifest `changes`)."""
    edit_manifest(prepared, "test_trials_f",
                  lambda r: [{**r, "path": str(path), **changes} if r["id"] == uid else r])


def append_line(path: Path, line: str) -> None:
    path.write_text(path.read_text() + line + "\n")


GOOD_SCORES = ["e1 u1 2.5 target", "e1 u2 -1.0 nontarget", "e2 u2 1.5 target", "e2 u1 -0.5 nontarget"]
