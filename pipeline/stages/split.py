"""Stage 3 — split: hold out validation data from the attacker's training set.

Three ways to hold out (`holdout`), each chosen by a seed from the sorted ids, so the
original and the anonymised training sets (same ids) are split identically:

- `unseen` (default): every utterance of `val_fraction` of each gender's speakers (at least
  `unseen_wanted` per gender where the gender keeps as many to train on; see `unseen_count`), or
  of the speakers `unseen_speakers` names. The attacker never
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
targets). The reported protocol's trials are written per gender (`val_trials_f`,
`val_trials_m`, one enrolment list `val_enrolls`), as the evaluation sets are: EER_val is the
mean of the per-gender EERs, as EER_test is (`pipeline.metrics.detection.pairs`). A gender
whose reported trials lack target or non-target trials (no or one validation speaker of it)
gets no list, with a warning and `val_genders` in the record naming those written; the
selection protocol stays pooled (it only chooses the epoch). The stage's record counts each
protocol's speakers and trials.

Training speakers per gender under `unseen` (`unseen_count`): the holdout leaves each gender
at least as many training speakers as it holds out (a gender of n speakers holds out at most
n // 2), but never fewer than `unseen_floor` (the fewest that give the reported protocol two
speakers of the gender, 4 with `select_fraction: 0.5`); it wants `unseen_wanted` at least
(the `MIN_SPEAKERS` = 5 a speaker bootstrap needs in the reported protocol of each gender, 9
with `select_fraction: 0.5`); below that, or with fewer training than held-out speakers, it warns; where the attacker would train on fewer than
`MIN_TRAIN` speakers of a gender present in the list it refuses, naming the gender, the counts
and the keys to change. Named `unseen_speakers` get the same warning and refusal.

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
held-out utterances are still not trained on. A protocol without target or non-target
trials (too few speakers for `select_fraction`) is an error naming the key.

Output folder: manifests/{train,val,val_enrolls,val_trials_<g>,select_enrolls,select_trials}.jsonl,
trials/{val_trials_<g>,select_trials}.txt (g: f, m; a gender without reported trials has none).
"""
from __future__ import annotations

import logging
from dataclasses import asdict
from pathlib import Path

import numpy as np

from pipeline.core.cache import Cache
from pipeline.core.schemas import Split, check_of, require
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
from pipeline.metrics.bootstrap import MIN_SPEAKERS

log = logging.getLogger(__name__)

MIN_REPORTED = 2  # reported validation speakers of a gender, the fewest that give non-target trials
MIN_TRAIN = 2  # training speakers per gender present: one speaker teaches nothing about telling that gender's
# speakers apart (issue 37: 7 female speakers, 6 held out, the attacker trained on 1; EER_val f 25 %, m 6 %)
GENDER_NAMES = {"f": "female", "m": "male"}


def select_count(n: int, select_fraction: float | None) -> int:
    """How many of a gender's n validation speakers select the epoch: `round(select_fraction *
    n)`, at least 1 and at most n - 1; none with `select_fraction: null` or a lone speaker."""
    if select_fraction is None or n < 2:
        return 0
    return min(n - 1, max(1, int(round(float(select_fraction) * n))))


def unseen_needed(select_fraction: float | None, reported: int) -> int:
    """The fewest unseen speakers of a gender that leave its reported protocol `reported`
    speakers once `select_count` of them choose the epoch.

    >>> unseen_needed(0.5, MIN_REPORTED), unseen_needed(None, MIN_REPORTED), unseen_needed(0.5, MIN_SPEAKERS)
    (4, 2, 9)
    """
    require(check_of(Split, "select_fraction"), select_fraction, "split.select_fraction")
    k = reported
    while k - select_count(k, select_fraction) < reported:
        k += 1
    return k


def unseen_floor(select_fraction: float | None) -> int:
    """The fewest unseen speakers of a gender that give it a per-gender EER_val: its reported
    protocol keeps `MIN_REPORTED` speakers (target and non-target trials)."""
    return unseen_needed(select_fraction, MIN_REPORTED)


def unseen_wanted(select_fraction: float | None) -> int:
    """The unseen speakers of a gender wanted at least: its reported protocol keeps the
    `MIN_SPEAKERS` a speaker bootstrap needs (fewer make the verdict `undetermined`), 9 with
    `select_fraction: 0.5` (round(4.5) = 4 choose the epoch, 5 give EER_val)."""
    return unseen_needed(select_fraction, MIN_SPEAKERS)


def unseen_count(n: int, val_fraction: float, select_fraction: float | None = 0.5,
                 gender: str = "f") -> tuple[int, str | None]:
    """(unseen speakers to hold out of a gender's n training speakers, a warning or None).

    Wanted: `max(unseen_wanted(select_fraction), round(val_fraction * n))`. The holdout leaves the
    gender at least as many training speakers as it holds out (at most n // 2 held out), but holds
    out no fewer than `unseen_floor(select_fraction)`; it warns when it holds out fewer than
    wanted at least or trains on fewer than it holds out, and refuses (VpevalError) when fewer
    than `MIN_TRAIN` remain.

    >>> unseen_count(20, 0.1)
    (9, None)
    >>> unseen_count(7, 0.1)[0], unseen_count(13, 0.1)[0]
    (4, 6)
    """
    least = unseen_wanted(select_fraction)
    wanted = max(least, int(round(val_fraction * n)))
    floor = unseen_floor(select_fraction)
    n_val = min(wanted, max(floor, n // 2))
    name = GENDER_NAMES.get(gender, gender)
    if n - n_val < MIN_TRAIN:
        raise VpevalError(
            f"split.holdout=unseen: the attacker's training list has {n} {name} speaker(s); holding out the "
            f"fewest unseen ({floor}: 2 for EER_val, split.select_fraction={select_fraction} for the epoch) leaves "
            f"{max(n - n_val, 0)} to train on, below {MIN_TRAIN}: add {name} speakers, set split.select_fraction=null, "
            "or use split.holdout=speaker")
    return n_val, holdout_warning(n, n_val, name, f"split.val_fraction={val_fraction}", least)


def holdout_warning(n: int, n_val: int, name: str, wanted: str, least: int) -> str | None:
    """The warning of a gender that holds out `n_val` of its n training speakers unseen (at least
    `least` wanted), or None."""
    if n_val >= least and n - n_val >= n_val:
        return None
    return (f"split.holdout=unseen: {n_val} of the {n} {name} training speakers held out unseen ({wanted}; "
            f"at least {least} wanted, and at least as many left to train on): the attacker trains on "
            f"{n - n_val} {name} speaker(s) and EER_val of that gender comes from few speakers")


def run(split: Split, train_manifest: Path, cache: Cache, *, seed: int, warned: bool = False) -> Path:
    """Split `train_manifest` into training and validation data; returns the stage folder.
    `split`: the section's settings (`typed(cfg.split, Split, "split")`). `warned`: the caller
    has logged the holdout's warnings already (`hold_out` on the same list, as the experiment's
    check does), so they are not logged twice."""
    settings = {**asdict(split), "unseen_speakers": named_speakers(split.unseen_speakers)}
    inputs = {"train": file_digest(train_manifest)}
    return cache.build("split", {**settings, "seed": seed}, inputs,
                       lambda out: _build(out, read_manifest(train_manifest), seed, warn=not warned, **settings),
                       code=__name__)


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
             unseen_speakers: list[str] | None = None, select_fraction: float | None = 0.5,
             warn: bool = True) -> tuple[list[Utterance], list[Utterance]]:
    """(train, val): every utterance of `unseen_count` of each gender's n speakers
    (`holdout="unseen"`, warnings logged unless `warn` is false); `round(val_fraction * n)` utterances of every
    speaker, at least 1 (`"speaker"`); or `round(val_fraction * n)` of all n utterances, at
    least 1 (`"list"`). `unseen_speakers` names the unseen speakers instead of a draw."""
    require(check_of(Split, "holdout"), holdout, "split.holdout")
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
        for gender in GENDERS:
            speakers = {u.speaker for u in utts if u.gender == gender}
            n_val, name = len(speakers & held), GENDER_NAMES[gender]
            if speakers and len(speakers) - n_val < MIN_TRAIN:
                raise VpevalError(
                    f"split.unseen_speakers names {n_val} of the {len(speakers)} {name} speakers of the attacker's "
                    f"training list, leaving {len(speakers) - n_val} to train on, below {MIN_TRAIN}: name fewer "
                    f"{name} speakers in split.unseen_speakers or add {name} speakers")
            if n_val and (warning := holdout_warning(len(speakers), n_val, name, "named in split.unseen_speakers",
                                                     unseen_wanted(select_fraction))) and warn:
                log.warning(warning)
        return [u for u in utts if u.speaker not in held], [u for u in utts if u.speaker in held]
    if holdout == "unseen":
        held = set()
        for gender in GENDERS:
            speakers = sorted({u.speaker for u in utts if u.gender == gender})
            if not speakers:
                continue
            n_val, warning = unseen_count(len(speakers), val_fraction, select_fraction, gender)
            if warning and warn:
                log.warning(warning)
            rng = np.random.default_rng(stable_seed(seed, f"split:unseen:{gender}"))
            held.update(speakers[i] for i in rng.permutation(len(speakers))[:n_val])
        return [u for u in utts if u.speaker not in held], [u for u in utts if u.speaker in held]
    if holdout == "list":
        ordered = sorted(utts, key=lambda u: u.id)
        rng = np.random.default_rng(stable_seed(seed, "split:list"))
        n_val = max(1, int(round(val_fraction * len(ordered))))
        held = {ordered[i].id for i in rng.choice(len(ordered), size=n_val, replace=False).tolist()}
        return [u for u in utts if u.id not in held], [u for u in utts if u.id in held]
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
           unseen_speakers: list[str] | None = None, warn: bool = True) -> dict:
    train, val = hold_out(utts, seed, val_fraction, holdout, unseen_speakers, select_fraction, warn)
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
    require(check_of(Split, "sparse_trials"), sparse_trials, "split.sparse_trials")
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
        if part == "val":
            counts["val_genders"] = write_by_gender(out, trial_utts, trials, len(speakers))
        else:
            write_manifest(manifest_path(out, f"{part}_trials"), trial_utts)
            write_trials(trials_path(out, f"{part}_trials"), trials)
        counts.update({f"{part}_speakers": len(speakers), f"{part}_target": n_target,
                       f"{part}_nontarget": len(trials) - n_target})
    write_manifest(manifest_path(out, "train"), train)
    write_manifest(manifest_path(out, "val"), val)
    return counts


def write_by_gender(out: Path, trial_utts: list[Utterance], trials: list[Trial], n_speakers: int) -> list[str]:
    """Write the reported protocol's trials per gender (`val_trials_<g>`: manifest and list, as
    the evaluation sets' `<split>_trials_<g>`); returns the genders written. A gender whose
    trials lack target or non-target trials gets none, with a warning: its EER_val cannot be
    measured, and EER_val is then the other gender's (the detection row says so)."""
    genders = {u.id: u.gender for u in trial_utts}
    written = []
    for gender in GENDERS:
        own = [t for t in trials if genders[t.test] == gender]
        n_target = sum(t.target for t in own)
        if 0 < n_target < len(own):
            write_manifest(manifest_path(out, f"val_trials_{gender}"), [u for u in trial_utts if u.gender == gender])
            write_trials(trials_path(out, f"val_trials_{gender}"), own)
            written.append(gender)
        elif own:
            log.warning("split: the reported validation protocol has %d target and %d non-target %s trials (one %s "
                        "validation speaker): no %s EER_val, EER_val is the other gender's", n_target,
                        len(own) - n_target, GENDER_NAMES[gender], GENDER_NAMES[gender], GENDER_NAMES[gender])
    if not written:
        raise VpevalError(f"split: the reported validation protocol of {n_speakers} speaker(s) has no gender with both "
                          "target and non-target trials (2 validation speakers of one gender are needed): add "
                          "training speakers or change split.val_fraction / split.select_fraction")
    return written


def selection_speakers(held: dict[str, list[Utterance]], seed: int, select_fraction: float | None) -> set[str]:
    """The validation speakers of the selection protocol: per gender a seeded
    `round(select_fraction * n)` of them, at least 1 and at most n - 1 (None: none)."""
    if select_fraction is None:
        return set()
    require(check_of(Split, "select_fraction"), select_fraction, "split.select_fraction")
    chosen = set()
    for gender in ("f", "m"):
        speakers = sorted(s for s, own in held.items() if own[0].gender == gender)
        n = select_count(len(speakers), select_fraction)  # a lone speaker of a gender stays in the reported protocol
        if not n:
            continue
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
