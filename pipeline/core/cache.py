"""Content-addressed, resumable stage outputs.

A stage's output folder is `<root>/<stage>/<hash>` where the hash covers the stage name,
the code that computes it (`pipeline.core.code_version.code_digest` of the stage module named by
`code` and of the plugin classes its parameters name: a changed computation, never a
comment, gives a new folder), its resolved parameters and the identities of its inputs
(other stage folders or manifest digests). The folder is complete when it holds `_DONE`, written last and
atomically; a complete folder is reused, a changed parameter gives a new folder, and an
incomplete one is handed back to its builder, which resumes from what is already there.
A file lock serialises builders, so two experiments sharing the cache never build the
same folder at once: one builds, the other waits and then reuses.

>>> import tempfile
>>> cache = Cache(tempfile.mkdtemp())
>>> def make_split(folder):
...     (folder / "train.txt").write_text("u1\\nu2\\n")
...     return {"utterances": 2}
>>> out = cache.build("split", {"val_fraction": 0.1}, {"train": "3f2a"}, make_split, code="pipeline.stages.split")
>>> sorted(p.name for p in out.iterdir())
['_DONE', '_params.json', 'train.txt']
>>> cache.build("split", {"val_fraction": 0.1}, {"train": "3f2a"}, make_split, code="pipeline.stages.split") == out
True
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import shutil
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from omegaconf import DictConfig, ListConfig, OmegaConf

from pipeline.core import faults
from pipeline.core.code_version import code_digest, plugin_modules
from pipeline.core.errors import VpevalError, write_error
from pipeline.core.fileio import is_temporary, write_json

log = logging.getLogger(__name__)

DONE = "_DONE"
PARAMS = "_params.json"


def plain(value: Any) -> Any:
    """Resolved plain Python containers from OmegaConf nodes (for hashing and JSON)."""
    if isinstance(value, (DictConfig, ListConfig)):
        return OmegaConf.to_container(value, resolve=True)
    return value


def content_hash(obj: Any, length: int = 16) -> str:
    """Hash of a JSON-serialisable object, independent of key order.

    >>> content_hash({"a": 1, "b": [2]}) == content_hash({"b": [2], "a": 1})
    True
    """
    text = json.dumps(plain(obj), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def is_complete(path: Path) -> bool:
    return (Path(path) / DONE).is_file()


@contextmanager
def file_lock(path: Path, waiting: str = "") -> Iterator[None]:
    """An exclusive advisory lock on `path` (created if needed), released on exit; when
    another process holds it, `waiting` (what is waited for) is logged once, and the end of
    the wait with its length."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path, "a")  # noqa: SIM115  (closed below)
    except OSError as error:  # an unwritable cache (paths.cache): one line, before any work
        raise write_error(path, error) from None
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            start = time.perf_counter()
            log.info("%s: waiting: another run holds %s", waiting or path, path)
            fcntl.flock(handle, fcntl.LOCK_EX)
            log.info("%s: waited %.0f s for the other run", waiting or path, time.perf_counter() - start)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@dataclass
class StageEvent:
    stage: str
    path: str
    reused: bool
    seconds: float


@dataclass
class Cache:
    """The stage-output store rooted at `root`; `events` records what each call did."""

    root: Path
    events: list[StageEvent] = field(default_factory=list)

    def __post_init__(self):
        self.root = Path(self.root)

    def path(self, stage: str, params: Any, inputs: Any, *, code: str | Sequence[str]) -> Path:
        return self.root / stage / content_hash(self.key(stage, params, inputs, code=code))

    @staticmethod
    def key(stage: str, params: Any, inputs: Any, *, code: str | Sequence[str]) -> dict:
        """What names a stage's folder; `code`: the module(s) that compute it."""
        modules = [code] if isinstance(code, str) else list(code)
        return {"stage": stage, "code": code_digest([*modules, *sorted(plugin_modules(plain(params)))]),
                "params": plain(params), "inputs": plain(inputs)}

    def build(self, stage: str, params: Any, inputs: Any, builder: Callable[[Path], Any], *,
              code: str | Sequence[str], stale: Callable[[Path], str | None] | None = None) -> Path:
        """Return the complete output folder of `stage`, calling `builder(folder)` if needed.

        `builder` writes its files into the folder (atomically, file by file) and may return
        a JSON-serialisable summary, stored in `_DONE`. It must resume from whatever an
        interrupted earlier call left in the folder. `code` names the module that computes
        the output (a stage passes `__name__`). `stale(folder)`: for inputs the key cannot
        hold, why a complete folder no longer matches them (None: it does); a stale folder is
        removed and built again.
        """
        key = self.key(stage, params, inputs, code=code)
        out = self.root / stage / content_hash(key)
        start = time.perf_counter()
        if stale is not None and is_complete(out) and stale(out):
            with file_lock(out.parent / f"{out.name}.lock", waiting=f"{stage} {out.name}"):
                if is_complete(out) and (reason := stale(out)):
                    log.warning("%s: %s; building %s again", stage, reason, out)
                    shutil.rmtree(out)
        if not is_complete(out):
            with file_lock(out.parent / f"{out.name}.lock", waiting=f"{stage} {out.name}"):
                if not is_complete(out):
                    resuming = out.is_dir() and any(p.name != PARAMS for p in out.iterdir())
                    log.info("%s: %s %s", stage, "resuming an interrupted build in" if resuming else "building", out)
                    out.mkdir(parents=True, exist_ok=True)
                    removed = remove_stale_temporaries(out)
                    if removed:
                        log.info("%s: removed %d temporary file(s) of an interrupted build", stage, removed)
                    with faults.stage(stage):
                        write_json(out / PARAMS, key)
                        faults.hit("start")
                        summary = builder(out)
                        faults.hit("end")
                    write_json(out / DONE, {"summary": plain(summary),
                                            "seconds": round(time.perf_counter() - start, 3)})
                    self.events.append(StageEvent(stage, str(out), False, time.perf_counter() - start))
                    return out
        log.info("%s: reusing %s", stage, out)
        self.events.append(StageEvent(stage, str(out), True, time.perf_counter() - start))
        return out


def remove_stale_temporaries(folder: Path) -> int:
    """Delete the temporary files (`.<stem>.tmp<pid><suffix>`, see `fileio.atomic_path`) that a
    killed writer left in an incomplete folder; the caller holds the folder's lock."""
    removed = 0
    for path in Path(folder).rglob(".*.tmp*"):
        if path.is_file() and is_temporary(path.name):
            path.unlink(missing_ok=True)
            removed += 1
    return removed


def summary_of(path: Path) -> Any:
    """The summary a completed stage stored in its `_DONE` marker."""
    marker = Path(path) / DONE
    if not marker.is_file():
        raise VpevalError(f"{path}: stage output is not complete (no {DONE})")
    return json.loads(marker.read_text())["summary"]
