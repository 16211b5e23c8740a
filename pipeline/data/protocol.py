"""VPC-style verification protocols generated from a prepared corpus.

The structure follows the VoicePrivacy LibriSpeech sets (tomashenko2020, Tables 1-2): per
gender, a subset of the speakers enrols with a few utterances; every other utterance of
every speaker of that gender is a trial utterance; each enrolled speaker is tried against
every trial utterance of the same gender (target when the speaker matches).

>>> utts = [Utterance(f"{spk}-{n}", spk, gender, f"{spk}-{n}.flac", 2.0)
...         for spk, gender in [("f1", "f"), ("f2", "f"), ("m1", "m"), ("m2", "m")] for n in range(3)]
>>> protocol = make_protocol(utts, seed=0, enroll_fraction=0.5, enroll_utterances=2)
>>> [u.id for u in protocol.enrolls]
['f2-1', 'f2-2', 'm1-0', 'm1-2']
>>> protocol.trials["f"][:2]
[Trial(enroll='f2', test='f1-0', target=False), Trial(enroll='f2', test='f1-1', target=False)]

`GeneratedProtocol` is the protocol source (`data.protocol`) that applies it in preparation.

Mixed-gender trials (VPC 2026's `libri_<split>_trials_mixed`, `data.eval_trials`): the female
and male lists plus, for every trial utterance, cross-gender non-target trials against as
many enrolled speakers of the other gender as the average number of same-gender non-target
trials of an utterance of its gender (`mixed_trials`). VPC's script draws them unseeded;
here they are drawn with a seed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol as Interface

import numpy as np

from pipeline.core.errors import VpevalError
from pipeline.core.schemas import Data, check_of, require
from pipeline.data.corpus import MAIN, Entry, Problems, Reader
from pipeline.data.manifest import GENDERS, Trial, Utterance, by_speaker

MIXED = "mixed"
SEX = {"f": "female", "m": "male"}
EVAL_TRIALS = {"same_gender": GENDERS, MIXED: (MIXED,), "both": (*GENDERS, MIXED)}


def trial_lists(eval_trials: str) -> tuple[str, ...]:
    """The trial lists (`<set>_trials_<list>`) that `data.eval_trials` evaluates.

    >>> trial_lists("both")
    ('f', 'm', 'mixed')
    """
    require(check_of(Data, "eval_trials"), eval_trials, "data.eval_trials")
    return EVAL_TRIALS[eval_trials]


@dataclass
class Protocol:
    """Enrolment utterances (both genders) and, per trial list, trial utterances and trials:
    lists `f` and `m` (same-gender), and `mixed` once `with_mixed` added it."""

    enrolls: list[Utterance]
    trial_utts: dict[str, list[Utterance]]
    trials: dict[str, list[Trial]]

    def counts(self) -> dict:
        out = {"enroll_speakers": len({u.speaker for u in self.enrolls}), "enroll_utterances": len(self.enrolls)}
        for g in self.trials:
            out[g] = {
                "trial_speakers": len({u.speaker for u in self.trial_utts[g]}),
                "trial_utterances": len(self.trial_utts[g]),
                "target": sum(t.target for t in self.trials[g]),
                "nontarget": sum(not t.target for t in self.trials[g]),
            }
        return out

    def utterances(self) -> list[Utterance]:
        return self.enrolls + [u for g in GENDERS for u in self.trial_utts[g]]

    def with_mixed(self, trials: list[Trial]) -> "Protocol":
        """This protocol with the `mixed` list: every trial utterance of both genders, `trials`."""
        trial_utts = {g: self.trial_utts[g] for g in GENDERS}
        return Protocol(self.enrolls, {**trial_utts, MIXED: [u for g in GENDERS for u in trial_utts[g]]},
                        {**{g: self.trials[g] for g in GENDERS}, MIXED: trials})

    def restricted(self, ready: dict[str, Utterance]) -> "Protocol":
        """This protocol over the utterances in `ready` (by id, which replace the old records):
        others are dropped with their trials, and so are trials of speakers left without enrolment."""
        enrolls = [ready[u.id] for u in self.enrolls if u.id in ready]
        enrolled = {u.speaker for u in enrolls}
        trial_utts = {g: [ready[u.id] for u in us if u.id in ready] for g, us in self.trial_utts.items()}
        trials = {g: [t for t in ts if t.test in ready and t.enroll in enrolled] for g, ts in self.trials.items()}
        return Protocol(enrolls, trial_utts, trials)


class ProtocolSource(Interface):
    """Where a split's protocols come from (`data.protocol`): generated, or given by the corpus."""

    def entries(self, reader: Reader, subset: str) -> list[Entry]:
        """The utterances the evaluation of `subset` draws on."""

    def build(self, utterances: list[Utterance], *, reader: Reader, subset: str, name: str,
              problems: Problems) -> dict[str, Protocol]:
        """Protocols by variant from the screened `utterances` of `subset`."""

    def mixed(self, protocol: Protocol, *, reader: Reader, subset: str, seed: int,
              problems: Problems) -> list[Trial]:
        """The mixed-gender trial list of `subset`'s (same-gender) `protocol`."""



def cross_trials(enroll_speakers: list[str], trial_utts: list[Utterance]) -> list[Trial]:
    """Every enrolled speaker against every trial utterance."""
    return [Trial(spk, u.id, u.speaker == spk) for spk in enroll_speakers for u in trial_utts]


def mixed_trials(protocol: Protocol, seed: int) -> list[Trial]:
    """VPC 2026's mixed list from a same-gender protocol: the female and male trials, then for
    each trial utterance of gender g, non-target trials against k_g distinct enrolled speakers
    of the other gender drawn with `seed`, k_g = round(mean number of non-target trials of a
    trial utterance of gender g) (Python's `round`, as VPC's script) and at most the number of
    such speakers. Trial utterances are taken in sorted order, so the seed alone fixes the draw.

    VPC's script differs where it is wrong: it reads the male list into its female variables
    (so its "cross-gender" trials pair utterances with enrolled speakers of their own gender,
    their own speaker included, labelled non-target), and it samples from the enrolment
    utterance list, so a speaker can be drawn twice for one utterance.
    """
    rng = np.random.default_rng(seed)
    genders = {u.speaker: u.gender for u in protocol.enrolls}
    cross: list[Trial] = []
    for gender, other in zip(GENDERS, reversed(GENDERS)):
        tried = sorted({t.test for t in protocol.trials[gender]})
        others = sorted(spk for spk, g in genders.items() if g == other)
        if not tried:
            continue
        if not others:
            raise VpevalError(f"data.eval_trials: no enrolled '{other}' speaker to try the '{gender}' "
                              "trial utterances against; mixed-gender trials need enrolled speakers of both genders")
        nontarget = sum(not t.target for t in protocol.trials[gender])
        count = min(round(nontarget / len(tried)), len(others))
        for test in tried:
            cross.extend(Trial(str(spk), test, False) for spk in sorted(rng.choice(others, size=count, replace=False)))
    return [*protocol.trials["f"], *protocol.trials["m"], *cross]


def make_protocol(utterances: list[Utterance], *, seed: int, enroll_fraction: float,
                  enroll_utterances: int, name: str = "protocol") -> Protocol:
    """Split a subset's utterances into enrolment and same-gender trials, deterministically."""
    rng = np.random.default_rng(seed)
    speakers = by_speaker(utterances)
    enrolls: list[Utterance] = []
    trial_utts: dict[str, list[Utterance]] = {}
    trials: dict[str, list[Trial]] = {}
    for gender in GENDERS:
        names = [s for s, utts in speakers.items() if utts[0].gender == gender]
        n_enroll = int(round(enroll_fraction * len(names)))
        if not names:
            present = SEX["m" if gender == "f" else "f"]
            raise VpevalError(f"{name}: no {SEX[gender]} speaker (all {len(speakers)} are {present}); the "
                              "verification protocol is per gender and needs at least 2 speakers of each, 1 enrolled")
        if len(names) < 2 or n_enroll < 1:
            raise VpevalError(f"{name}: {len(names)} '{gender}' speakers and {n_enroll} enrolled; "
                              "a protocol needs at least 2 speakers and 1 enrolled speaker per gender")
        enrolled = sorted(rng.choice(names, size=n_enroll, replace=False).tolist())
        held: set[str] = set()
        for spk in enrolled:
            utts = speakers[spk]
            if len(utts) < 2:
                raise VpevalError(f"{name}: speaker {spk} has {len(utts)} utterance(s); an enrolled "
                                  "speaker needs at least one enrolment and one trial utterance")
            k = min(enroll_utterances, len(utts) - 1)
            chosen = rng.choice(len(utts), size=k, replace=False)
            enrolls.extend(utts[i] for i in sorted(chosen))
            held.update(utts[i].id for i in chosen)
        trial_utts[gender] = [u for s in names for u in speakers[s] if u.id not in held]
        trials[gender] = cross_trials(enrolled, trial_utts[gender])
    return Protocol(sorted(enrolls, key=lambda u: u.id), trial_utts, trials)


class GeneratedProtocol:
    """Protocol source: the VPC LibriSpeech structure generated from each split's utterances."""

    def __init__(self, seed: int, enroll_fraction: float, enroll_utterances: int):
        self.settings = {"seed": seed, "enroll_fraction": enroll_fraction, "enroll_utterances": enroll_utterances}

    def entries(self, reader: Reader, subset: str) -> list[Entry]:
        return reader.entries(subset)

    def build(self, utterances: list[Utterance], *, reader: Reader, subset: str, name: str,
              problems: Problems) -> dict[str, Protocol]:
        return {MAIN: make_protocol(utterances, name=name, **self.settings)}

    def mixed(self, protocol: Protocol, *, reader: Reader, subset: str, seed: int,
              problems: Problems) -> list[Trial]:
        return mixed_trials(protocol, seed)
