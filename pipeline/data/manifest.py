"""Typed manifests: utterances in JSONL, trial lists in the VPC text format.

An utterance manifest holds one JSON object per line (lhotse-style)::

    {"id": "19-198-0001", "speaker": "19", "gender": "f", "path": "/abs/19-198-0001.flac",
     "duration": 3.2, "sample_rate": 16000, "text": "..."}

An anonymised manifest adds `pseudo_speaker`, what the utterance received: its key, the seed
drawn from it and the system's drawn parameters, e.g.
`{"key": "dev_enrolls/19", "seed": 123..., "alpha": 0.74}`.

A prepared manifest adds `source_stamp`, `size:mtime_ns` of the corpus file the utterance was
read from (before any conversion): a stage's cache key holds its manifest's digest, so audio
replaced under the same name changes the key of every stage that reads it, as make and rsync
tell a changed file.

A trial list holds `enroll_speaker test_utterance target|nontarget` lines, as the
VoicePrivacy toolkits write them.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Iterable

from pipeline.core.errors import VpevalError, input_error
from pipeline.core.fileio import read_text, write_lines

GENDERS = ("f", "m")


@dataclass(frozen=True)
class Utterance:
    """One audio segment of one speaker."""

    id: str
    speaker: str
    gender: str
    path: str
    duration: float
    sample_rate: int = 16000
    text: str = ""
    pseudo_speaker: dict | None = field(default=None, compare=False)
    source_stamp: str = field(default="", compare=False)

    def with_path(self, path: str | Path) -> "Utterance":
        return replace(self, path=str(path))


@dataclass(frozen=True)
class Trial:
    """A verification trial: does `test` (an utterance id) belong to `enroll` (a speaker id)?"""

    enroll: str
    test: str
    target: bool

    def line(self) -> str:
        return f"{self.enroll} {self.test} {'target' if self.target else 'nontarget'}"


_FIELDS = {f.name for f in fields(Utterance)}
_REQUIRED = {f.name for f in fields(Utterance) if f.default is MISSING}


def read_manifest(path: str | Path, problems: list[str] | None = None) -> list[Utterance]:
    """Read and check an utterance manifest; a bad line raises a `file:line: problem` error, or,
    with a `problems` list, is appended to it and skipped (every bad line of the file listed)."""
    path = Path(path)
    if not path.is_file():
        raise input_error(path, "manifest not found")
    utterances, seen = [], set()
    for number, raw in enumerate(read_text(path).splitlines(), start=1):
        if not raw.strip():
            continue
        problem, record = _manifest_line(raw, seen)
        if problem:
            _bad_line(input_error(path, problem, number), problems)
            continue
        seen.add(record["id"])
        utterances.append(Utterance(**record))
    return utterances


def _manifest_line(raw: str, seen: set[str]) -> tuple[str | None, dict | None]:
    try:
        record = json.loads(raw)
    except json.JSONDecodeError as exc:
        return f"not a JSON object ({exc.msg})", None
    if not isinstance(record, dict):
        return "not a JSON object", None
    if _REQUIRED - record.keys():
        return f"missing field(s) {sorted(_REQUIRED - record.keys())}", None
    if record.keys() - _FIELDS:
        return f"unknown field(s) {sorted(record.keys() - _FIELDS)}", None
    if record["gender"] not in GENDERS:
        return f"gender must be 'f' or 'm', got {record['gender']!r}", None
    if record["id"] in seen:
        return f"duplicate utterance id {record['id']!r}", None
    return None, record


def _bad_line(error: VpevalError, problems: list[str] | None) -> None:
    if problems is None:
        raise error
    problems.append(str(error))


def write_manifest(path: str | Path, utterances: Iterable[Utterance]) -> Path:
    """Write an utterance manifest atomically, one JSON object per line."""
    return write_lines(path, (json.dumps(_record(u), ensure_ascii=False) for u in utterances))


def _record(utt: Utterance) -> dict:
    """The JSON object of an utterance; `pseudo_speaker` and `source_stamp` only where there is one."""
    record = asdict(utt)
    if record["pseudo_speaker"] is None:
        del record["pseudo_speaker"]
    if not record["source_stamp"]:
        del record["source_stamp"]
    return record


def audio_stamp(path: str | Path) -> str:
    """`size:mtime_ns` of a file (see the module doc); raises OSError when it cannot be read."""
    info = Path(path).stat()
    return f"{info.st_size}:{info.st_mtime_ns}"


def read_trials(path: str | Path, problems: list[str] | None = None) -> list[Trial]:
    """Read `enroll test target|nontarget` lines (bad lines: as `read_manifest`)."""
    path = Path(path)
    if not path.is_file():
        raise input_error(path, "trial list not found")
    trials = []
    for number, raw in enumerate(read_text(path).splitlines(), start=1):
        parts = raw.split()
        if not parts:
            continue
        if len(parts) != 3:
            _bad_line(input_error(path, f"expected 'enroll test target|nontarget', got {raw!r}", number), problems)
        elif parts[2] not in ("target", "nontarget"):
            _bad_line(input_error(path, f"label must be 'target' or 'nontarget', got {parts[2]!r}", number), problems)
        else:
            trials.append(Trial(parts[0], parts[1], parts[2] == "target"))
    return trials


def write_trials(path: str | Path, trials: Iterable[Trial]) -> Path:
    return write_lines(path, (t.line() for t in trials))


def by_speaker(utterances: Iterable[Utterance]) -> dict[str, list[Utterance]]:
    """Group utterances by speaker, speakers and utterances in sorted order."""
    groups: dict[str, list[Utterance]] = {}
    for utt in sorted(utterances, key=lambda u: u.id):
        groups.setdefault(utt.speaker, []).append(utt)
    return dict(sorted(groups.items()))


def file_digest(path: str | Path) -> str:
    """sha256 of a file's bytes (hex)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
