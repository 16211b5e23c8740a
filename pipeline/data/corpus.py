"""What corpus readers and protocol sources give the prepare stage, and how bad input is kept.

A **reader** (`data.reader`, built with `root=`) lists a subset's utterances as `Entry`s
without opening any audio; an entry the reader already knows to be bad carries a `problem`.
A **protocol source** (`data.protocol`) says which entries a split's evaluation needs and
builds that split's protocols from the screened utterances: generated (LibriSpeech, VCTK)
or given by the corpus (VoicePrivacy data dirs). A split's protocols are keyed by variant:
`""` is the split itself (lists `<split>_enrolls`, `<split>_trials_<g>`), any other variant
`v` gives the evaluation set `<split>_<v>` (e.g. VCTK's `dev_common`).

>>> set_name("dev", ""), set_name("dev", "common")
('dev', 'dev_common')
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable
from typing import Protocol as Interface

from pipeline.core.errors import VpevalError, input_error
from pipeline.core.fileio import write_lines
from pipeline.data.manifest import Utterance

MAIN = ""


@dataclass(frozen=True)
class Entry:
    """One listed utterance before its audio is read; `where` names its source (`file:line`)."""

    id: str
    speaker: str
    gender: str
    path: str
    text: str = ""
    where: str = ""
    problem: str = ""

    def utterance(self, duration: float, sample_rate: int) -> Utterance:
        return Utterance(id=self.id, speaker=self.speaker, gender=self.gender, path=self.path,
                         duration=round(duration, 4), sample_rate=sample_rate, text=self.text)


class Reader(Interface):
    def entries(self, subset: str) -> list[Entry]:
        """Every utterance of `subset`, in a stable order."""


def listed_once(path: str | Path, rows: Iterable[tuple[int, str, str]], what: str,
                listed: str) -> dict[str, tuple[str, int]]:
    """key -> (value, line of its first listing) from the (line, key, value) rows of a metadata
    file (genders of speakers, the speaker of each utterance). A key listed again with the same
    value is accepted; with another value it is an error naming both lines, never the last
    value silently (a male speaker listed twice, once as F, became female). `listed` is how a
    value reads in that message, e.g. "as {}".

    >>> listed_once("SPEAKERS.TXT", [(12, "174", "F"), (30, "174", "F")], "speaker", "as {}")
    {'174': ('F', 12)}
    >>> listed_once("SPEAKERS.TXT", [(12, "174", "F"), (57, "174", "M")], "speaker", "as {}")
    Traceback (most recent call last):
    pipeline.core.errors.VpevalError: SPEAKERS.TXT:57: speaker 174 is listed as M here and as F at line 12
    """
    found: dict[str, tuple[str, int]] = {}
    for number, key, value in rows:
        first = found.setdefault(key, (value, number))
        if first[0] != value:
            raise input_error(path, f"{what} {key} is listed {listed.format(value)} here and "
                                    f"{listed.format(first[0])} at line {first[1]}", number)
    return found


def set_name(split: str, variant: str) -> str:
    """The evaluation-set name of a split's protocol variant."""
    return f"{split}_{variant}" if variant else split


class PreparationProblems(VpevalError):
    """Preparation stopped on bad input: the message names the first problem, `problems`
    holds every one, as does the file `listing` (`vpeval validate` prints them)."""

    def __init__(self, message: str, problems: list[str], listing: Path):
        super().__init__(message)
        self.problems = problems
        self.listing = listing


@dataclass
class Problems:
    """Bad utterances and trials found while preparing, each as `where: problem`, and problems
    of the corpus as a whole (`corpus`: an unreadable list, evaluation speakers among the
    training speakers), which no skipping can mend.

    Without `data.skip_bad` any of them stops preparation (all are listed in a file, the
    first is shown); with it bad utterances and trials are dropped and listed in the skip
    list, and corpus problems still stop it. One problem is one line, counted once: met again
    (SPEAKERS.TXT, read for every subset), it is not added again.
    """

    utterances: list[str] = field(default_factory=list)
    trials: list[str] = field(default_factory=list)
    corpus: list[str] = field(default_factory=list)

    seen: set[tuple[str, str]] = field(default_factory=set, repr=False)  # (kind, problem) already listed

    def utterance(self, where: str, problem: str) -> None:
        self._add("utterance", self.utterances, f"{where}: {problem}")

    def trial(self, where: str, problem: str) -> None:
        self._add("trial", self.trials, f"{where}: {problem}")

    def whole(self, problem: str) -> None:
        """A problem of the corpus as a whole (already `where: problem`)."""
        self._add("corpus", self.corpus, problem)

    def _add(self, kind: str, found: list[str], problem: str) -> None:
        if (kind, problem) not in self.seen:
            self.seen.add((kind, problem))
            found.append(problem)

    def lines(self) -> list[str]:
        return ([f"corpus\t{p}" for p in self.corpus] + [f"utterance\t{p}" for p in self.utterances]
                + [f"trial\t{p}" for p in self.trials])

    def stop_unless(self, skip_bad: bool, listing: Path) -> None:
        """Raise `PreparationProblems` naming the first problem (all written to `listing`)
        unless skipping bad input (corpus problems stop even then)."""
        found = self.corpus + ([] if skip_bad else self.utterances + self.trials)
        if not found:
            return
        write_lines(listing, self.lines())
        more = f" ({len(found)} bad inputs in all, listed in {listing})" if len(found) > 1 else ""
        mend = "" if self.corpus and found[0] in self.corpus else \
            "; fix the data or set data.skip_bad=true to skip bad utterances"
        raise PreparationProblems(f"{found[0]}{more}{mend}", found, listing)
