"""Score files: the three text formats `vpeval metrics` reads, with `file:line` errors.

The format is told by the number of whitespace-separated fields (blank lines skipped):

- 2: ``score label`` with label 1 (target) or 0 (non-target);
- 4: ``enroll test score target|nontarget`` (wespeaker / VPC scoring output);
- 5: ``speaker_a segment_a speaker_b segment_b score``, a trial table for voice similarity
  matrices (target = same speaker; side a is the original side of an OP table). Rows with
  segment_a == segment_b compare a segment with itself (or with its own anonymised
  version) and are left out of the target / non-target scores.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.errors import input_error
from pipeline.metrics.inputs import first_repeat
from pipeline.metrics.similarity import TrialTable

FORMATS = {2: "score_label", 4: "trials", 5: "table"}
LAYOUTS = {
    "score_label": "score label",
    "trials": "enroll test score target|nontarget",
    "table": "speaker_a segment_a speaker_b segment_b score",
}
SCORE_FIELD = {"score_label": 0, "trials": 2, "table": 4}
LABELS = {"score_label": ("1", "0"), "trials": ("target", "nontarget")}


@dataclass(frozen=True)
class ScoreFile:
    """Scores of one file split by class; speakers where the format has them
    (the enrolment speaker, or speaker a of a trial table); the table itself for tables."""

    path: str
    format: str
    target_scores: np.ndarray
    nontarget_scores: np.ndarray
    target_speakers: np.ndarray | None
    nontarget_speakers: np.ndarray | None
    table: TrialTable | None


def read_scores(path: str | Path) -> ScoreFile:
    """Read a score file in any of the three formats; bad input raises `file:line: problem`."""
    path = Path(path)
    if not path.is_file():
        raise input_error(path, "score file not found")
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        raise input_error(path, "not a text file") from None
    rows, numbers = [], []
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if fields:
            rows.append(fields)
            numbers.append(number)
    if not rows:
        raise input_error(path, "no trials: the file is empty")
    fmt = FORMATS.get(len(rows[0]))
    if fmt is None:
        raise input_error(path, f"{len(rows[0])} fields; expected one of: "
                          + "; ".join(f"{n} ({LAYOUTS[f]})" for n, f in FORMATS.items()), numbers[0])
    width = len(rows[0])
    for fields, number in zip(rows, numbers):
        if len(fields) != width:
            raise input_error(path, f"{len(fields)} fields, expected {width} ({LAYOUTS[fmt]})", number)
    numbers = np.asarray(numbers)
    scores = _parse_scores(path, [fields[SCORE_FIELD[fmt]] for fields in rows], numbers)
    if fmt == "table":
        columns = [np.asarray([fields[k] for fields in rows]) for k in range(4)]
        _refuse_repeats(path, columns[1], columns[3], numbers)
        table = TrialTable(*columns, score=scores, source=str(path), lines=numbers)
        # a segment against itself, or an utterance against its own anonymised version, is no trial
        distinct = columns[1] != columns[3]
        scores = scores[distinct]
        target = table.is_target()[distinct]
        speakers = columns[0][distinct]
    else:
        target = _parse_labels(path, fmt, [fields[-1] for fields in rows], numbers)
        table, speakers = None, None
        if fmt == "trials":
            speakers = np.asarray([fields[0] for fields in rows])
            _refuse_repeats(path, speakers, np.asarray([fields[1] for fields in rows]), numbers)
    if not target.any() or target.all():
        missing = "target" if not target.any() else "non-target"
        raise input_error(path, f"no {missing} trials: both classes are needed")
    return ScoreFile(
        path=str(path),
        format=fmt,
        target_scores=scores[target],
        nontarget_scores=scores[~target],
        target_speakers=None if speakers is None else speakers[target],
        nontarget_speakers=None if speakers is None else speakers[~target],
        table=table,
    )


def _parse_scores(path: Path, fields: list[str], numbers: np.ndarray) -> np.ndarray:
    try:
        scores = np.array(fields, dtype=np.float64)
    except ValueError:
        for field, number in zip(fields, numbers):
            try:
                float(field)
            except ValueError:
                raise input_error(path, f"score {field!r} is not a number", int(number)) from None
        raise
    finite = np.isfinite(scores)
    if not finite.all():
        bad = int(np.flatnonzero(~finite)[0])
        raise input_error(path, f"score {fields[bad]!r} is not finite", int(numbers[bad]))
    return scores


def _parse_labels(path: Path, fmt: str, fields: list[str], numbers: np.ndarray) -> np.ndarray:
    labels = np.asarray(fields)
    target_label, nontarget_label = LABELS[fmt]
    target = labels == target_label
    unknown = ~target & (labels != nontarget_label)
    if unknown.any():
        bad = int(np.flatnonzero(unknown)[0])
        raise input_error(path, f"unknown label {fields[bad]!r}; expected {target_label!r} or "
                          f"{nontarget_label!r} ({LAYOUTS[fmt]})", int(numbers[bad]))
    return target


def _refuse_repeats(path: Path, first: np.ndarray, second: np.ndarray, numbers: np.ndarray) -> None:
    """A trial (same two sides, same order) listed twice would count twice."""
    repeat = first_repeat(first, second)
    if repeat is not None:
        earlier, later = repeat
        raise input_error(path, f"trial {first[later]} {second[later]} repeats line {numbers[earlier]}",
                          int(numbers[later]))
