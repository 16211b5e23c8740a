"""Stage 3 — split: hold out validation data from the attacker's training set.

A share (`val_fraction`, 10 % by default) of every training speaker's utterances is held
out (`holdout: speaker`), or that share of the whole training list, drawn at random as the
VPC 2024 toolkit draws its validation list (`holdout: list`); either is chosen by a seed
from the sorted utterance ids, so the original and the anonymised training sets (same ids)
are split identically. The held-out utterances form a
verification protocol as in panariello2025 §3.4: per speaker `enroll_utterances`
enrolment utterances, the rest as trials, target and non-target trials within gender
(every enrolled speaker against every trial utterance, or with `sparse_trials`
{target: 3, nontarget: 5} that many drawn per speaker, as the paper's ~8 trials with 3
targets).

Model selection and the reported EER_val use disjoint speakers: per gender a seeded share
`select_fraction` of the validation speakers forms the *selection* protocol (the training
stage keeps the epoch with the lowest EER on it), the others the *reported* one (EER_val).
Choosing the epoch on the data whose EER is reported biases EER_val low (the minimum of
noisy estimates); `select_fraction: null` restores that (biased) behaviour, both protocols
then being all validation speakers.

Fallback (documented): a speaker with fewer than `enroll_utterances + 1` held-out
utterances enrols with all but one of them; fewer than 2 held-out utterances is an error
naming the speaker, since it could give no trial, except under `holdout: list`, where such
speakers (a random list always leaves some) stay out of the validation protocols; their
held-out utterances are still not trained on. A protocol without target or
non-target trials (too few speakers for `select_fraction`) is an error naming the key.

Output folder: manifests/{train,val,val_enrolls,val_trials,select_enrolls,select_trials}.jsonl,
trials/{val_trials,select_trials}.txt.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from omegaconf import DictConfig

from anonymizers.base import stable_seed
from pipeline.cache import Cache, plain
from pipeline.data.manifest import (
    Trial,
    Utterance,
    by_speaker,
    file_digest,
    read_manifest,
    write_manifest,
    write_trials,
)
from pipeline.data.protocol import cross_trials
from pipeline.errors import VpevalError
from pipeline.layout import manifest_path, trials_path

VERSION = 2
HOLDOUTS = ("speaker", "list")


def run(split: DictConfig, train_manifest: Path, cache: Cache, *, seed: int) -> Path:
    """Split `train_manifest` into training and validation data; returns the stage folder."""
    params = {**plain(split), "seed": seed}
    inputs = {"train": file_digest(train_manifest)}
    return cache.build("split", params, inputs,
                       lambda out: _build(out, read_manifest(train_manifest), seed, **plain(split)), VERSION)


def hold_out(utts: list[Utterance], seed: int, val_fraction: float,
             holdout: str = "speaker") -> tuple[list[Utterance], list[Utterance]]:
    """(train, val): `round(val_fraction * n)` utterances of every speaker held out, at least 1
    (`holdout="speaker"`), or `round(val_fraction * n)` of all n, at least 1 (`"list"`)."""
    if holdout == "list":
        ordered = sorted(utts, key=lambda u: u.id)
        rng = np.random.default_rng(stable_seed(seed, "split:list"))
        n_val = max(1, int(round(val_fraction * len(ordered))))
        held = {ordered[i].id for i in rng.choice(len(ordered), size=n_val, replace=False).tolist()}
        return [u for u in utts if u.id not in held], [u for u in utts if u.id in held]
    if holdout != "speaker":
        raise VpevalError(f"split.holdout must be one of {', '.join(HOLDOUTS)}, got {holdout!r}")
    train, val = [], []
    for speaker, own in by_speaker(utts).items():
        rng = np.random.default_rng(stable_seed(seed, f"split:{speaker}"))
        n_val = max(1, int(round(val_fraction * len(own))))
        held = set(rng.choice(len(own), size=n_val, replace=False).tolist())
        for i, utt in enumerate(own):
            (val if i in held else train).append(utt)
    return train, val


def _build(out: Path, utts: list[Utterance], seed: int, val_fraction: float, enroll_utterances: int,
           select_fraction: float | None = 0.5, sparse_trials: dict | None = None, holdout: str = "speaker") -> dict:
    train, val = hold_out(utts, seed, val_fraction, holdout)
    held = by_speaker(val)
    too_few = sorted(speaker for speaker, own in held.items() if len(own) < 2)
    if too_few and holdout == "speaker":
        speaker, n_held = too_few[0], len(held[too_few[0]])
        raise VpevalError(
            f"split: speaker {speaker} has {n_held + sum(u.speaker == speaker for u in train)} training "
            f"utterances, so split.val_fraction={val_fraction} holds out {n_held}; at least 2 are needed "
            "(one enrolment, one trial): raise split.val_fraction or drop the speaker")
    # holdout: list leaves them out of the protocols; their utterances are still not trained on
    held = {speaker: own for speaker, own in held.items() if speaker not in too_few}
    check_sparse(sparse_trials)
    selecting = selection_speakers(held, seed, select_fraction)
    parts = {"select": selecting, "val": set(held) - selecting} if select_fraction is not None else \
        {"select": set(held), "val": set(held)}
    counts = {"train": len(train), "val": len(val), "val_speakers_left_out": len(too_few)}
    for part, speakers in parts.items():
        enrolls, trial_utts, trials = protocol({s: held[s] for s in sorted(speakers)}, enroll_utterances,
                                               sparse_trials, seed, part)
        n_target = sum(t.target for t in trials)
        if n_target == 0 or n_target == len(trials):
            raise VpevalError(f"split: the {part} protocol of {len(speakers)} validation speaker(s) has "
                              f"{n_target} target and {len(trials) - n_target} non-target trials; both are needed: "
                              "add training speakers or set split.select_fraction (null: select on the reported data)")
        write_manifest(manifest_path(out, f"{part}_enrolls"), enrolls)
        write_manifest(manifest_path(out, f"{part}_trials"), trial_utts)
        write_trials(trials_path(out, f"{part}_trials"), trials)
        counts.update({f"{part}_speakers": len(speakers), f"{part}_target": n_target,
                       f"{part}_nontarget": len(trials) - n_target})
    write_manifest(manifest_path(out, "train"), train)
    write_manifest(manifest_path(out, "val"), val)
    return counts


def check_sparse(sparse_trials: dict | None) -> None:
    if sparse_trials is None:
        return
    valid = isinstance(sparse_trials, dict) and set(sparse_trials) == {"target", "nontarget"} and all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in sparse_trials.values())
    if not valid:
        raise VpevalError(f"split.sparse_trials must be null or {{target: n, nontarget: m}} with positive integers, "
                          f"got {sparse_trials!r}")


def selection_speakers(held: dict[str, list[Utterance]], seed: int, select_fraction: float | None) -> set[str]:
    """The validation speakers of the selection protocol: per gender a seeded
    `round(select_fraction * n)` of them, at least 1 and at most n - 1 (None: none)."""
    if select_fraction is None:
        return set()
    if not 0 < float(select_fraction) < 1:
        raise VpevalError(f"split.select_fraction must lie in (0, 1) or be null, got {select_fraction!r}")
    chosen = set()
    for gender in ("f", "m"):
        speakers = sorted(s for s, own in held.items() if own[0].gender == gender)
        if len(speakers) < 2:  # a lone speaker of a gender stays in the reported protocol
            continue
        n = min(len(speakers) - 1, max(1, int(round(float(select_fraction) * len(speakers)))))
        rng = np.random.default_rng(stable_seed(seed, f"select:{gender}"))
        chosen.update(speakers[i] for i in rng.permutation(len(speakers))[:n])
    return chosen


def protocol(held: dict[str, list[Utterance]], enroll_utterances: int, sparse_trials: dict | None, seed: int,
             part: str) -> tuple[list[Utterance], list[Utterance], list[Trial]]:
    """(enrolment utterances, trial utterances, trials) of the validation speakers `held`:
    `enroll_utterances` each (all but one when fewer), within-gender trials, all of them or
    `sparse_trials` {target, nontarget} drawn per enrolled speaker."""
    enrolls, trial_utts, enrolled = [], [], {"f": [], "m": []}
    for speaker, own in held.items():
        k = min(enroll_utterances, len(own) - 1)
        enrolls += own[:k]
        trial_utts += own[k:]
        enrolled[own[0].gender].append(speaker)
    trials = []
    for gender, speakers in enrolled.items():
        candidates = [u for u in trial_utts if u.gender == gender]
        if sparse_trials is None:
            trials += cross_trials(speakers, candidates)
            continue
        for speaker in speakers:
            rng = np.random.default_rng(stable_seed(seed, f"sparse:{part}:{speaker}"))
            for target, wanted in ((True, int(sparse_trials["target"])), (False, int(sparse_trials["nontarget"]))):
                pool = [u for u in candidates if (u.speaker == speaker) == target]
                drawn = sorted(rng.choice(len(pool), size=min(wanted, len(pool)), replace=False).tolist())
                trials += [Trial(speaker, pool[i].id, target) for i in drawn]
    return enrolls, trial_utts, trials
