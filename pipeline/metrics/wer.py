"""Word error rate of recognised speech against reference transcripts (jiwer's alignment).

Both sides are normalised by a named text rule: `vpc` (default), as in the VoicePrivacy ASR
evaluation (LibriSpeech style): upper case, every character other than a letter, a digit or an
apostrophe made a space, runs of spaces collapsed; `vpc_speechbrain`, as VPC 2024's and VPC
2026 Track 1's `compute_wer` (SpeechBrain's ErrorRateStats): nothing changed, the reference's
words split on whitespace, the hypothesis stripped and split on single spaces, so a double
space in a recogniser's output is an empty word (an insertion, or a substitution);
`vpc2026_whisper`, as VPC 2026's Whisper evaluation (Track 2): lower case, the characters
. , ! ? ; : » « " ( ) [ ] … — – - deleted (a hyphenated word becomes one word), runs of spaces
collapsed, all other characters kept. The WER of a set is its total word errors
(substitutions, deletions, insertions) over its total reference words, as Kaldi's
`compute-wer` counts them.

>>> word_errors(["The cat, sat."], ["the cat sat on"]).wer
0.3333333333333333
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass

import numpy as np

from pipeline.core.errors import VpevalError

_NOT_WORD = re.compile(r"[^\w']+|_")


_WHISPER_PUNCTUATION = re.compile(r'[.,!?;:»«"()\[\]…—–\-]')


def normalise(text: str) -> str:
    """'Hello, world!' -> 'HELLO WORLD'."""
    return " ".join(_NOT_WORD.sub(" ", text.upper()).split())


def whisper_normalise(text: str) -> str:
    """VPC 2026's Whisper rule: ' Well-known, ¿Qué?' -> 'wellknown ¿qué'."""
    return " ".join(_WHISPER_PUNCTUATION.sub("", text.strip().lower()).split())


def collapse_spaces(text: str) -> str:
    """The reference side of `vpc_speechbrain` (VPC reads it with its Kaldi reader): 'A  B ' -> 'A B'."""
    return " ".join(text.split())


TEXT_RULES = {"vpc": normalise, "vpc_speechbrain": collapse_spaces, "vpc2026_whisper": whisper_normalise}
SINGLE_SPACE_HYPOTHESES = {"vpc_speechbrain"}  # rules whose hypotheses split on single spaces, empty words kept


def hypothesis_words(text: str, rule: str) -> list[str]:
    """The words of a recogniser's output under `rule`.

    >>> hypothesis_words(" A  B ", "vpc_speechbrain"), hypothesis_words(" A  B ", "vpc")
    (['A', '', 'B'], ['A', 'B'])
    """
    if rule in SINGLE_SPACE_HYPOTHESES:
        return text.strip().split(" ")
    return text_rule(rule)(text).split()


def text_rule(name: str):
    """The normaliser named `name` (config key utility.wer_text)."""
    if name not in TEXT_RULES:
        raise VpevalError(f"utility.wer_text={name!r}: not a text rule (one of {', '.join(TEXT_RULES)})")
    return TEXT_RULES[name]


@dataclass(frozen=True)
class WordErrors:
    """Error counts of a set of utterances."""

    substitutions: int
    deletions: int
    insertions: int
    words: int
    utterances: int
    per_utterance: tuple[int, ...] = ()  # word errors of each utterance, in input order

    @property
    def errors(self) -> int:
        return self.substitutions + self.deletions + self.insertions

    @property
    def wer(self) -> float:
        return self.errors / self.words

    def as_dict(self) -> dict:
        return {**{k: v for k, v in asdict(self).items() if k != "per_utterance"}, "errors": self.errors,
                "wer": self.wer}


def word_errors(references: list[str], hypotheses: list[str], rule: str = "vpc") -> WordErrors:
    """Counts over utterance pairs, both normalised by the text rule `rule`; every reference must
    have a word after normalisation."""
    try:
        import jiwer
    except ImportError:
        raise VpevalError("WER needs jiwer: pip install -c constraints.txt -e '.[utility]'") from None
    normaliser = text_rule(rule)
    refs = [normaliser(r) for r in references]
    if len(refs) != len(hypotheses):
        raise ValueError(f"{len(refs)} references but {len(hypotheses)} hypotheses")
    if not refs or not all(refs):
        raise ValueError("every reference needs at least one word")
    out = jiwer.process_words(refs, list(hypotheses),
                              hypothesis_transform=lambda texts: [hypothesis_words(t, rule) for t in texts])
    per_utterance = tuple(sum(max(c.ref_end_idx - c.ref_start_idx, c.hyp_end_idx - c.hyp_start_idx)
                              for c in chunks if c.type != "equal") for chunks in out.alignments)
    return WordErrors(out.substitutions, out.deletions, out.insertions, words=sum(len(r.split()) for r in refs),
                      utterances=len(refs), per_utterance=per_utterance)


def ratio_interval(numerators, denominators, *, n_resamples: int = 1000, confidence: float = 0.95,
                   seed: int = 0) -> tuple[float, float]:
    """Percentile interval of sum(numerators) / sum(denominators) over utterances resampled with
    replacement: a pooled WER (errors / words) or, with denominators of 1, a mean (ρF0)."""
    numerators, denominators = np.asarray(numerators, float), np.asarray(denominators, float)
    picks = np.random.default_rng(seed).integers(0, len(numerators), size=(n_resamples, len(numerators)))
    ratios = numerators[picks].sum(axis=1) / np.maximum(denominators[picks].sum(axis=1), 1e-12)
    alpha = (1 - confidence) / 2
    return float(np.quantile(ratios, alpha)), float(np.quantile(ratios, 1 - alpha))
