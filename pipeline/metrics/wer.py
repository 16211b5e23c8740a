"""Word error rate of recognised speech against reference transcripts (jiwer's alignment).

Both sides are normalised as in the VoicePrivacy ASR evaluation (LibriSpeech style): upper
case, every character other than a letter, a digit or an apostrophe made a space, runs of
spaces collapsed. The WER of a set is its total word errors (substitutions, deletions,
insertions) over its total reference words, as Kaldi's `compute-wer` counts them.

>>> word_errors(["The cat, sat."], ["the cat sat on"]).wer
0.3333333333333333
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from pipeline.errors import VpevalError

_NOT_WORD = re.compile(r"[^\w']+|_")


def normalise(text: str) -> str:
    """'Hello, world!' -> 'HELLO WORLD'."""
    return " ".join(_NOT_WORD.sub(" ", text.upper()).split())


@dataclass(frozen=True)
class WordErrors:
    """Error counts of a set of utterances."""

    substitutions: int
    deletions: int
    insertions: int
    words: int
    utterances: int

    @property
    def errors(self) -> int:
        return self.substitutions + self.deletions + self.insertions

    @property
    def wer(self) -> float:
        return self.errors / self.words

    def as_dict(self) -> dict:
        return {**asdict(self), "errors": self.errors, "wer": self.wer}


def word_errors(references: list[str], hypotheses: list[str]) -> WordErrors:
    """Counts over utterance pairs; every reference must have a word after normalisation."""
    try:
        import jiwer
    except ImportError:
        raise VpevalError("WER needs jiwer: pip install -c constraints.txt -e '.[utility]'") from None
    refs, hyps = [normalise(r) for r in references], [normalise(h) for h in hypotheses]
    if len(refs) != len(hyps):
        raise ValueError(f"{len(refs)} references but {len(hyps)} hypotheses")
    if not refs or not all(refs):
        raise ValueError("every reference needs at least one word")
    out = jiwer.process_words(refs, hyps)
    return WordErrors(out.substitutions, out.deletions, out.insertions, words=sum(len(r.split()) for r in refs),
                      utterances=len(refs))
