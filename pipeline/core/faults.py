"""Fault injection for the kill-and-resume tests: SIGKILL this process at a chosen point.

Set `VPEVAL_FAULT=<point>:<n>` to kill the process (SIGKILL, no clean-up, as a pre-empted
cluster job dies) at the n-th time it reaches `<point>`. Points are `<stage>.<event>`, the
stage being the cache stage being built (`prepare`, `validate`, `anonymize`, `split`,
`train`, `extract`, `score`, `evaluate`) or `report`; events:

    start       a stage folder was created (its `_params.json` written), nothing else yet
    write       a file's bytes are written to its temporary name, not yet renamed (fileio)
    step        a training optimiser step finished
    checkpoint  a checkpoint (checkpoint.pt, model.pt) is written to its temporary name, not yet renamed
    end         the stage's builder returned, its `_DONE` marker is not written yet

`*` as the point counts every point inside a stage. Only the process that first imported
this module acts (worker processes inherit the variables and ignore them). `VPEVAL_FAULT_TRACE=<file>` appends every point reached
to `<file>` (one line each), which tells the tests which kill points a run has.
With neither variable set, `hit` costs one global lookup.
"""
from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager

_SPEC = os.environ.get("VPEVAL_FAULT")
_TRACE = os.environ.get("VPEVAL_FAULT_TRACE")
ACTIVE = bool(_SPEC or _TRACE)
_point, _, _count = (_SPEC or "").rpartition(":")
_target = int(_count) if _SPEC else 0
_seen = 0
_stage = ["none"]
if ACTIVE:  # worker processes (forked or spawned) inherit the variable and never act
    _OWNER = os.environ.setdefault("VPEVAL_FAULT_PID", str(os.getpid()))
    ACTIVE = _OWNER == str(os.getpid())


@contextmanager
def stage(name: str) -> Iterator[None]:
    """Name the stage whose points are hit inside the block (nested blocks restore the outer one)."""
    if not ACTIVE:
        yield
        return
    _stage.append(name)
    try:
        yield
    finally:
        _stage.pop()


def hit(event: str) -> None:
    """A kill point: `<current stage>.<event>`."""
    if not ACTIVE:
        return
    global _seen
    point = f"{_stage[-1]}.{event}"
    if _TRACE:
        with open(_TRACE, "a") as trace:
            trace.write(point + "\n")
    if _SPEC and (point == _point or (_point == "*" and _stage[-1] != "none")):
        _seen += 1
        if _seen == _target:
            os.kill(os.getpid(), signal.SIGKILL)
