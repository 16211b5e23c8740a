"""Score files: the three text formats `vpeval metrics` reads, with `file:line` errors.

The format is told by the number of whitespace-separated fields (blank lines skipped):

- 2: ``score label`` with label 1 (target) or 0 (non-target);
- 3: ``enroll test score``, the `scores` files of the VPC 2024 toolkit, read with their
  trials file (``enroll test target|nontarget``, VPC's `data/<list>/trials`): line i of one
  must be the trial of line i of the other;
- 4: ``enroll test score target|nontarget`` (wespeaker / VPC scoring output);
- 5: ``speaker_a segment_a speaker_b segment_b score``, a trial table for voice similarity
  matrices (target = same speaker; side a is the original side of an OP table). Rows with
  segment_a == segment_b compare a segment with itself (or with its own anonymised
  version) and are left out of the target / non-target scores.

The two-way speaker bootstrap needs the test speaker of every trial: speaker_b of a table;
for the formats with a test utterance id, its speaker in a `utt2spk` map (Kaldi's file,
`read_utt2spk`), else read from the id itself when every id has the LibriSpeech
(`19-198-0001`: speaker 19) or VCTK (`p225_001`: speaker p225) form.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.core.errors import input_error
from pipeline.core.fileio import read_lines
from pipeline.data.corpus import listed_once
from pipeline.metrics.similarity import TrialTable

FORMATS = {2: "score_label", 3: "vpc", 4: "trials", 5: "table"}
LAYOUTS = {
    "score_label": "score label",
    "vpc": "enroll test score (VPC, with its trials file)",
    "trials": "enroll test score target|nontarget",
    "table": "speaker_a segment_a speaker_b segment_b score",
}
SCORE_FIELD = {"score_label": 0, "vpc": 2, "trials": 2, "table": 4}
TRIAL_SIDES = {3: (0, 1), 4: (0, 1), 5: (1, 3)}  # fields -> the two sides of a trial (enroll, test / segments)
LABELS = {"score_label": ("1", "0"), "trials": ("target", "nontarget")}
SPEAKER_IN_ID = (re.compile(r"^([^-\s]+)-[^-\s]+-\d+$"),  # LibriSpeech: speaker-chapter-utterance
                 re.compile(r"^(p\d{3}|s\d+)_\d{3}(?:_mic\d)?$"))  # VCTK: p225_001, p225_001_mic1, s5_001


@dataclass(frozen=True)
class ScoreFile:
    """Scores of one file split by class; speakers where the format has them
    (`*_speakers`: the enrolment speaker, or speaker a of a trial table; `*_test_speakers`:
    the test utterance's speaker, or speaker b); the table itself for tables."""

    path: str
    format: str
    target_scores: np.ndarray
    nontarget_scores: np.ndarray
    target_speakers: np.ndarray | None
    nontarget_speakers: np.ndarray | None
    table: TrialTable | None
    target_test_speakers: np.ndarray | None = None
    nontarget_test_speakers: np.ndarray | None = None

    def speaker_sides(self) -> dict:
        """The speaker keywords of `bootstrap_ci` (both sides of every trial)."""
        return {"tar_speakers": self.target_speakers, "non_speakers": self.nontarget_speakers,
                "tar_test_speakers": self.target_test_speakers, "non_test_speakers": self.nontarget_test_speakers}


def field_count(path: str | Path) -> int:
    """Fields of the first non-blank line (which format a score file is); 0 if there is none."""
    _check_is_file(Path(path), "score file")
    return next((len(line.split()) for _, line in read_lines(path) if line.split()), 0)


def _check_is_file(path: Path, what: str) -> None:
    if path.is_dir():  # e.g. a run's report folder
        hint = " (a run's report/results.json lists its score files, `score_files`)" if what == "score file" else ""
        raise input_error(path, f"a folder, not a {what}{hint}")
    if not path.is_file():
        raise input_error(path, f"{what} not found")


def _rows(path: Path, what: str = "score file") -> tuple[list[list[str]], list[int]]:
    """Non-blank lines split into fields, with their 1-based line numbers (a leading byte-order
    mark dropped: it would become part of the first speaker id). Read as it goes: a trial
    (the same two sides, in the same order) listed twice would count twice and stops the read
    at its second listing, so a file of repeated trials fails at once, not after the whole
    file is held in memory."""
    _check_is_file(path, what)
    rows, numbers, seen = [], [], {}
    for number, line in read_lines(path):
        fields = line.split()
        if not fields:
            continue
        sides = TRIAL_SIDES.get(len(fields))  # (a 2-field utt2spk or score_label line has none)
        if sides is not None:
            trial = (fields[sides[0]], fields[sides[1]])
            earlier = seen.setdefault(trial, number)
            if earlier != number:
                raise input_error(path, f"trial {trial[0]} {trial[1]} repeats line {earlier}", number)
        rows.append(fields)
        numbers.append(number)
    return rows, numbers


def read_utt2spk(path: str | Path) -> dict[str, str]:
    """A Kaldi `utt2spk` file (`utterance speaker` per line) as a dict; an utterance given two
    speakers is an error naming both lines."""
    rows, numbers = _rows(Path(path), "utt2spk file")
    for fields, number in zip(rows, numbers):
        if len(fields) != 2:
            raise input_error(path, f"{len(fields)} fields, expected 2 (utterance speaker)", number)
    listed = listed_once(path, ((number, *fields) for fields, number in zip(rows, numbers)), "utterance",
                         "with speaker {}")
    return {utt: speaker for utt, (speaker, _) in listed.items()}


def speakers_of_utterances(utterances: list[str], utt2spk: dict[str, str] | None, path: Path,
                  numbers: np.ndarray) -> np.ndarray | None:
    """The speaker of every test utterance: from `utt2spk` (every one must be listed), else
    from the ids when all have the LibriSpeech or VCTK form; None when they do not."""
    if utt2spk is not None:
        for utterance, number in zip(utterances, numbers):
            if utterance not in utt2spk:
                raise input_error(path, f"test utterance {utterance} is not in the utt2spk map", int(number))
        return np.asarray([utt2spk[u] for u in utterances])
    for pattern in SPEAKER_IN_ID:
        found = [pattern.match(u) for u in utterances]
        if all(found):
            return np.asarray([m.group(1) for m in found])
    return None


def read_scores(path: str | Path, trials: str | Path | None = None, utt2spk: dict[str, str] | None = None) -> ScoreFile:
    """Read a score file in any of the formats (`trials`: the trials file of a VPC 3-field
    score file; `utt2spk`: the speaker of every test utterance, see the module docstring);
    bad input raises `file:line: problem`."""
    path = Path(path)
    rows, numbers = _rows(path)
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
        table = TrialTable(*columns, score=scores, source=str(path), lines=numbers)
        # a segment against itself, or an utterance against its own anonymised version, is no trial
        distinct = columns[1] != columns[3]
        scores = scores[distinct]
        target = table.is_target()[distinct]
        speakers, tested = columns[0][distinct], columns[2][distinct]
    else:
        if fmt == "vpc":
            target = _vpc_labels(path, rows, numbers, trials)
        else:
            target = _parse_labels(path, fmt, [fields[-1] for fields in rows], numbers)
        table, speakers, tested = None, None, None
        if fmt in ("trials", "vpc"):
            speakers = np.asarray([fields[0] for fields in rows])
            tested = speakers_of_utterances([fields[1] for fields in rows], utt2spk, path, numbers)
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
        target_test_speakers=None if tested is None else tested[target],
        nontarget_test_speakers=None if tested is None else tested[~target],
    )


def _vpc_labels(path: Path, rows: list[list[str]], numbers: np.ndarray, trials: str | Path | None) -> np.ndarray:
    """Whether each trial of a VPC score file is a target, from its trials file, which must list
    the same trials in the same order (`enroll test target|nontarget`)."""
    if trials is None:
        raise input_error(path, f"3 fields ({LAYOUTS['vpc']}): give the trials file it was scored from "
                          "(vpeval metrics SCORES --trials TRIALS)", int(numbers[0]))
    trial_rows, trial_numbers = _rows(Path(trials), "trials file")
    for fields, number in zip(trial_rows, trial_numbers):
        if len(fields) != 3:
            raise input_error(trials, f"{len(fields)} fields, expected 3 (enroll test target|nontarget)", number)
    for scored, listed, number, trial_number in zip(rows, trial_rows, numbers, trial_numbers):
        if scored[:2] != listed[:2]:
            raise input_error(path, f"trial {' '.join(scored[:2])} does not match line {trial_number} of {trials} "
                              f"({' '.join(listed[:2])}); the files must list the same trials line for line",
                              int(number))
    if len(rows) != len(trial_rows):
        fewer, more = (path, trials) if len(rows) < len(trial_rows) else (trials, path)
        raise input_error(path, f"{len(rows)} trials but {trials} lists {len(trial_rows)}: {fewer} ends before "
                          f"{more} (the files must list the same trials line for line)")
    return _parse_labels(Path(trials), "trials", [fields[2] for fields in trial_rows], np.asarray(trial_numbers))


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
