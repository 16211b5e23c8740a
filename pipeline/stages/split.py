"""Stage 3 — split: hold out validation data from the attacker's training set.

Three ways to hold out (`holdout`), each chosen by a seed from the sorted ids, so the
original and the anonymised training sets (same ids) are split identically:

- `unseen` (default): every utterance of `val_fraction` of each gender's speakers (at least
  `MIN_UNSEEN` per gender), or of the speakers `unseen_speakers` names. The attacker never
  trains on them, so EER_val measures what EER_test measures, verification of new speakers
  of the attacker's own training data, and a matched attacker's EER_val and EER_test differ
  by sampling noise; an attacker mismatched with the evaluation data keeps its EER_val low
  while its EER_test rises (`pipeline.metrics.detection`). Seen speakers, by contrast, are
  memorised by a well-trained attacker: on small corpora their EER_val is 0 whatever the
  system, so it cannot tell a mismatch.
- `speaker` (panariello2025 §3.4): `val_fraction` of every training speaker's utterances;
  the validation speakers are also training speakers.
- `list` (VPC 2024): `val_fraction` of the whole training list at random.

The held-out utterances form a verification protocol: per speaker `enroll_utterances`
enrolment utterances, the rest as trials, target and non-target trials within gender
(every enrolled speaker against every trial utterance, or with `sparse_trials`
{target: 3, nontarget: 5} that many drawn per speaker, as the paper's ~8 trials with 3
targets). The stage's record counts each protocol's speakers and trials.

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
held-out utterances are still not trained on. A gender with too few speakers to hold
`MIN_UNSEEN` out and train on one, and a protocol without target or non-target trials
(too few speakers for `select_fraction`), are errors naming the key.

Output folder: manifests/{train,val,val_enrolls,val_trials,select_enrolls,select_trials}.jsonl,
trials/{val_trials,select_trials}.txt.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from omegaconf import DictConfig

from pipeline.core.cache import Cache, plain
from pipeline.runtime.seeds import stable_seed
from pipeline.data.manifest import (
    GENDERS,
    Trial,
    Utterance,
    by_speaker,
    file_digest,
    read_manifest,
    write_manifest,
    write_trials,
)
from pipeline.core.errors import VpevalError, input_error
from pipeline.core.fileio import read_text
from pipeline.core.layout import manifest_path, trials_path
from pipeline.data.protocol import cross_trials

HOLDOUTS = ("unseen", "speaker", "list")
MIN_UNSEEN = 6  # unseen validation speakers per gender: 3 select the epoch, 3 give EER_val (6 in all:
# above the 5 speakers below which an interval is marked as too few)


def run(split: DictConfig, train_manifest: Path, cache: Cache, *, seed: int) -> Path:
    """Split `train_manifest` into training and validation data; returns the stage folder."""
    settings = {**plain(split), "unseen_speakers": named_speakers(split.get("unseen_speakers"))}
    inputs = {"train": file_digest(train_manifest)}
    return cache.build("split", {**settings, "seed": seed}, inputs,
                       lambda out: _build(out, read_manifest(train_manifest), seed, **settings), code=__name__)


def named_speakers(spec) -> list[str] | None:
    """`split.unseen_speakers`: None, a list of speaker ids, or a file of ids (one per line)."""
    if spec is None or not isinstance(spec, str):
        return None if spec is None else [str(s) for s in spec]
    path = Path(spec)
    if not path.is_file():
        raise input_error(path, "file of unseen validation speakers not found (split.unseen_speakers)")
    speakers = [line.strip() for line in read_text(path).splitlines() if line.strip()]
    if not speakers:
        raise input_error(path, "no speaker id (split.unseen_speakers: one id per line)")
    return speakers


def hold_out(utts: list[Utterance], seed: int, val_fraction: float, holdout: str = "speaker",
             unseen_speakers: list[str] | None = None) -> tuple[list[Utterance], list[Utterance]]:
    """(train, val): every utterance of `round(val_fraction * n)` of each gender's n speakers,
    at least `MIN_UNSEEN` (`holdout="unseen"`); `round(val_fraction * n)` utterances of every
    speaker, at least 1 (`"speaker"`); or `round(val_fraction * n)` of all n utterances, at
    least 1 (`"list"`). `unseen_speakers` names the unseen speakers instead of a draw."""
    if unseen_speakers is not None:
        if holdout != "unseen":
            raise VpevalError(f"split.unseen_speakers names speakers to hold out unseen, but split.holdout={holdout}: "
                              "set split.holdout=unseen")
        present = {u.speaker for u in utts}
        absent = [s for s in unseen_speakers if s not in present]
        if absent:
            raise VpevalError(f"split.unseen_speakers: {len(absent)} speaker(s) not in the attacker's training list "
                              f"(e.g. {', '.join(absent[:3])})")
        held = set(unseen_speakers)
        return [u for u in utts if u.speaker not in held], [u for u in utts if u.speaker in held]
    if holdout == "unseen":
        held = set()
        for gender in GENDERS:
            speakers = sorted({u.speaker for u in utts if u.gender == gender})
            if not speakers:
                continue
            n_val = max(MIN_UNSEEN, int(round(val_fraction * len(speakers))))
            if n_val >= len(speakers):
                raise VpevalError(
                    f"split.holdout=unseen: the attacker's training list has {len(speakers)} {'female' if gender == 'f' else 'male'} "
                    f"speaker(s); {n_val} are held out unseen (split.val_fraction={val_fraction}, at least "
                    f"{MIN_UNSEEN}) and one must remain to train on: add speakers or use split.holdout=speaker")
            rng = np.random.default_rng(stable_seed(seed, f"split:unseen:{gender}"))
            held.update(speakers[i] for i in rng.permutation(len(speakers))[:n_val])
        return [u for u in utts if u.speaker not in held], [u for u in utts if u.speaker in held]
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
           select_fraction: float | None = 0.5, sparse_trials: dict | None = None, holdout: str = "speaker",
           unseen_speakers: list[str] | None = None) -> dict:
    train, val = hold_out(utts, seed, val_fraction, holdout, unseen_speakers)
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
