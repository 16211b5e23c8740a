"""Validation of a prepared corpus before any long work (`vpeval validate`).

Checks every manifest and trial list of a prepare-stage folder: audio files exist, have
readable headers, are mono and at the configured rate (or resampleable); utterance ids are
unique; each speaker has one gender; trials name enrolled speakers and listed trial
utterances, pair speakers of one gender, and have both target and non-target trials; no
evaluation speaker is among the attacker's training speakers. The result is cached with
the prepared folder, so an experiment validates once.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from pipeline.cache import Cache, summary_of
from pipeline.data.audio import audio_info
from pipeline.data.manifest import Utterance, read_manifest, read_trials
from pipeline.errors import VpevalError
from pipeline.report.tables import markdown_table


@dataclass
class Validation:
    """What was checked (`counts`, one row per list) and what is wrong (`problems`)."""

    counts: list[list] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def render(self) -> str:
        table = markdown_table(["list", "utterances", "speakers", "trials (target / non-target)"], self.counts)
        verdict = "OK: no problems found." if not self.problems else \
            f"{len(self.problems)} problem(s):\n" + "\n".join(f"- {p}" for p in self.problems)
        return f"{table}\n\n{verdict}"


def _check_audio(utts: list[Utterance], source: Path, problems: list[str]) -> None:
    def header(utt):
        try:
            rate, frames, channels = audio_info(utt.path)
        except VpevalError as error:
            return f"{source}: utterance {utt.id}: {error}"
        if frames == 0:
            return f"{source}: utterance {utt.id}: {utt.path} is empty"
        if channels != 1:
            return f"{source}: utterance {utt.id}: {utt.path} has {channels} channels, expected mono"
        if rate != utt.sample_rate:
            return f"{source}: utterance {utt.id}: {utt.path} is {rate} Hz, manifest says {utt.sample_rate} Hz"
        return None

    with ThreadPoolExecutor(8) as pool:
        found = tqdm(pool.map(header, utts), total=len(utts), desc=f"validate {source.stem}", unit="file", leave=False)
        problems.extend(p for p in found if p)


def validate_lists(manifests: dict[str, Path], trial_lists: dict[str, tuple[Path, str, str]],
                   train: str = "train") -> Validation:
    """Check `manifests` (name -> path) and `trial_lists` (name -> (path, enroll list, trial list))."""
    result = Validation()
    lists = {name: read_manifest(path) for name, path in manifests.items()}
    genders: dict[str, tuple[str, str]] = {}
    for name, utts in lists.items():
        _check_audio(utts, manifests[name], result.problems)
        for utt in utts:
            known = genders.setdefault(utt.speaker, (utt.gender, name))
            if known[0] != utt.gender:
                result.problems.append(f"{manifests[name]}: speaker {utt.speaker} is '{utt.gender}' here but "
                                       f"'{known[0]}' in {known[1]}")
        result.counts.append([name, len(utts), len({u.speaker for u in utts}), ""])
    train_speakers = {u.speaker for u in lists.get(train, [])}
    for name, (path, enroll_list, trial_list) in trial_lists.items():
        enrolled = {u.speaker for u in lists[enroll_list]}
        tried = {u.id: u for u in lists[trial_list]}
        trials = read_trials(path)
        for number, trial in enumerate(trials, start=1):
            if trial.enroll not in enrolled:
                result.problems.append(f"{path}:{number}: enrolment speaker {trial.enroll} is not in {enroll_list}")
            elif trial.test not in tried:
                result.problems.append(f"{path}:{number}: trial utterance {trial.test} is not in {trial_list}")
            elif genders[trial.enroll][0] != tried[trial.test].gender:
                result.problems.append(f"{path}:{number}: mixed-gender trial {trial.enroll} vs {trial.test}")
            elif trial.target != (tried[trial.test].speaker == trial.enroll):
                result.problems.append(f"{path}:{number}: label '{'target' if trial.target else 'nontarget'}' "
                                       f"contradicts the speakers of {trial.enroll} and {trial.test}")
        n_target = sum(t.target for t in trials)
        if n_target == 0 or n_target == len(trials):
            result.problems.append(f"{path}: needs both target and non-target trials "
                                   f"({n_target} target of {len(trials)})")
        leaked = (enrolled | {u.speaker for u in tried.values()}) & train_speakers
        if leaked and name != "val_trials":
            result.problems.append(f"{path}: speakers {sorted(leaked)[:5]} are in the attacker's training data")
        result.counts.append([name, "", "", f"{n_target} / {len(trials) - n_target}"])
    return result


def check(prepared: Path, splits: tuple[str, ...] = ("dev", "test")) -> Validation:
    """Validate a prepare-stage folder; the result lists every problem found."""
    from pipeline.stages.prepare import manifest_path, trials_path

    names = ["train"] + [f"{s}_{kind}" for s in splits for kind in ("enrolls", "trials_f", "trials_m")]
    manifests = {n: manifest_path(prepared, n) for n in names}
    trial_lists = {f"{s}_trials_{g}": (trials_path(prepared, f"{s}_trials_{g}"), f"{s}_enrolls", f"{s}_trials_{g}")
                   for s in splits for g in ("f", "m")}
    return validate_lists(manifests, trial_lists)


def run(prepared: Path, cache: Cache, splits: tuple[str, ...] = ("dev", "test")) -> Validation:
    """Validate once per prepared folder (cached); raises a VpevalError naming the problems."""
    def build(out: Path) -> dict:
        result = check(prepared, splits)
        if result.problems:
            shown = "; ".join(result.problems[:5])
            more = f" (and {len(result.problems) - 5} more; run `vpeval validate` for all)" \
                if len(result.problems) > 5 else ""
            raise VpevalError(f"{prepared}: {len(result.problems)} validation problem(s): {shown}{more}")
        return {"lists": result.counts}

    out = cache.build("validate", {"splits": list(splits)}, {"prepared": Path(prepared).name}, build)
    return Validation(counts=summary_of(out)["lists"])
