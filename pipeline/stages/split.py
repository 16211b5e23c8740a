"""Stage 3 — split: hold out validation data from the attacker's training set.

A share (`val_fraction`, 10 % by default) of every training speaker's utterances is held
out, chosen by a seed from the sorted utterance ids, so the original and the anonymised
training sets (same ids) are split identically. The held-out utterances form a
verification protocol as in panariello2025 §3.4: per speaker `enroll_utterances`
enrolment utterances, the rest as trials, target and non-target trials within gender.

Fallback (documented): a speaker with fewer than `enroll_utterances + 1` held-out
utterances enrols with all but one of them; fewer than 2 held-out utterances is an error
naming the speaker, since it could give no trial.

Output folder: manifests/{train,val,val_enrolls,val_trials}.jsonl, trials/val_trials.txt.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from omegaconf import DictConfig

from anonymizers.base import stable_seed
from pipeline.cache import Cache, plain
from pipeline.data.manifest import (
    Utterance,
    by_speaker,
    file_digest,
    read_manifest,
    write_manifest,
    write_trials,
)
from pipeline.data.protocol import cross_trials
from pipeline.errors import VpevalError
from pipeline.stages.prepare import manifest_path, trials_path

VERSION = 1


def run(split: DictConfig, train_manifest: Path, cache: Cache, *, seed: int) -> Path:
    """Split `train_manifest` into training and validation data; returns the stage folder."""
    params = {**plain(split), "seed": seed}
    inputs = {"train": file_digest(train_manifest)}
    return cache.build("split", params, inputs,
                       lambda out: _build(out, read_manifest(train_manifest), seed, **plain(split)), VERSION)


def hold_out(utts: list[Utterance], seed: int, val_fraction: float) -> tuple[list[Utterance], list[Utterance]]:
    """(train, val): `round(val_fraction * n)` utterances of every speaker held out, at least 1."""
    train, val = [], []
    for speaker, own in by_speaker(utts).items():
        rng = np.random.default_rng(stable_seed(seed, f"split:{speaker}"))
        n_val = max(1, int(round(val_fraction * len(own))))
        held = set(rng.choice(len(own), size=n_val, replace=False).tolist())
        for i, utt in enumerate(own):
            (val if i in held else train).append(utt)
    return train, val


def _build(out: Path, utts: list[Utterance], seed: int, val_fraction: float, enroll_utterances: int) -> dict:
    train, val = hold_out(utts, seed, val_fraction)
    enrolls, trial_utts, enrolled = [], [], {"f": [], "m": []}
    for speaker, own in by_speaker(val).items():
        if len(own) < 2:
            raise VpevalError(
                f"split: speaker {speaker} has {len(own) + sum(u.speaker == speaker for u in train)} training "
                f"utterances, so split.val_fraction={val_fraction} holds out {len(own)}; at least 2 are needed "
                "(one enrolment, one trial): raise split.val_fraction or drop the speaker")
        k = min(enroll_utterances, len(own) - 1)
        enrolls += own[:k]
        trial_utts += own[k:]
        enrolled[own[0].gender].append(speaker)
    trials = [t for g, speakers in enrolled.items()
              for t in cross_trials(speakers, [u for u in trial_utts if u.gender == g])]
    for name, items in (("train", train), ("val", val), ("val_enrolls", enrolls), ("val_trials", trial_utts)):
        write_manifest(manifest_path(out, name), items)
    write_trials(trials_path(out, "val_trials"), trials)
    return {"train": len(train), "val": len(val), "val_speakers": len(by_speaker(val)),
            "val_target": sum(t.target for t in trials), "val_nontarget": sum(not t.target for t in trials)}
