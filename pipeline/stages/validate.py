"""Validation of a prepared corpus before any long work (`vpeval validate`).

Checks every manifest and trial list of a prepare-stage folder:
- audio: every file exists and decodes to the end (worker processes, with a progress bar),
  is mono, at the manifest's rate and at the configured `data.sample_rate`, as long as the
  manifest says, and at least one 25 ms fbank window long (the shipped attackers' shortest input);
- ids: unique within each list; one path per id across lists; no utterance (id or audio
  file) both enrols and is tried in one evaluation set;
- genders: one gender per speaker across all lists; trials pair speakers of one gender;
- trials: name enrolled speakers and listed trial utterances, labels agree with the
  speakers, no trial is listed twice, and both target and non-target trials are present;
- unseen: no enrolment or trial speaker is among the attacker's training speakers;
- sets: every requested evaluation split was prepared.
Every problem is listed (each bad line of a list, not only the first). The result is cached
with the prepared folder, so an experiment validates once.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.core.cache import PARAMS, Cache, summary_of
from pipeline.core.errors import VpevalError
from pipeline.core.layout import SKIP_LIST, manifest_path, trials_path
from pipeline.data.manifest import GENDERS, Utterance, read_manifest, read_trials
from pipeline.data.protocol import MIXED
from pipeline.data.screening import decode_check, process_map
from pipeline.report.tables import markdown_table

SPLITS = ("dev", "test")
SHORTEST_SECONDS = 0.025  # one 25 ms fbank window (400 samples at 16 kHz): the shipped attackers' shortest input


@dataclass
class Validation:
    """What was checked (`counts`, one row per list), what was noted, and what is wrong."""

    counts: list[list] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def render(self) -> str:
        table = markdown_table(["list", "utterances", "speakers", "trials (target / non-target)"], self.counts)
        notes = "".join(f"\n{note}" for note in self.notes)
        verdict = "OK: no problems found." if not self.problems else \
            f"{len(self.problems)} problem(s):\n" + "\n".join(f"- {p}" for p in self.problems)
        return f"{table}\n{notes}\n\n{verdict}"


def _check_audio(lists: dict[str, list[Utterance]], manifests: dict[str, Path], sample_rate: int | None,
                 workers: int | None, result: Validation) -> None:
    """Decode every distinct file once, in parallel; name the first list and utterance using it."""
    first_use: dict[tuple[str, int, float], tuple[str, Utterance]] = {}
    for name, utts in lists.items():
        for utt in utts:
            first_use.setdefault((utt.path, utt.sample_rate, utt.duration), (name, utt))
            if sample_rate is not None and utt.sample_rate != sample_rate:
                result.problems.append(f"{manifests[name]}: utterance {utt.id}: {utt.sample_rate} Hz, "
                                       f"data.sample_rate is {sample_rate} Hz")
    jobs = list(first_use)
    for name, utt in first_use.values():
        if utt.duration < SHORTEST_SECONDS:
            result.problems.append(f"{manifests[name]}: utterance {utt.id}: {1000 * utt.duration:.0f} ms of audio "
                                   f"({utt.path}), shorter than the {1000 * SHORTEST_SECONDS:.0f} ms fbank window "
                                   f"the shipped attackers need")
    for job, problem in zip(jobs, process_map(decode_check, jobs, "validate: decoding", workers)):
        if problem:
            name, utt = first_use[job]
            result.problems.append(f"{manifests[name]}: utterance {utt.id}: {problem}")
    result.notes.append(f"Decoded {len(jobs)} audio file(s).")


def _check_ids(lists: dict[str, list[Utterance]], manifests: dict[str, Path], result: Validation) -> None:
    _check_one_value(lists, manifests, result, "id", "path", "utterance {} is {} here but {} in {}")


def _check_genders(lists: dict[str, list[Utterance]], manifests: dict[str, Path],
                   result: Validation) -> dict[str, str]:
    return _check_one_value(lists, manifests, result, "speaker", "gender", "speaker {} is '{}' here but '{}' in {}")


def _check_one_value(lists: dict[str, list[Utterance]], manifests: dict[str, Path], result: Validation,
                     key: str, field: str, problem: str) -> dict[str, str]:
    """Every `key` (utterance id, speaker) has one `field` value (path, gender) across the lists;
    a conflict is a problem named by the list where it appears. Returns key -> first value."""
    seen: dict[str, tuple[str, str]] = {}
    for name, utts in lists.items():
        for utt in utts:
            value = getattr(utt, field)
            known = seen.setdefault(getattr(utt, key), (value, name))
            if known[0] != value:
                result.problems.append(f"{manifests[name]}: " + problem.format(getattr(utt, key), value, *known))
    return {k: value for k, (value, _) in seen.items()}


def _check_trials(name: str, path: Path, enroll_list: str, trial_list: str, lists: dict[str, list[Utterance]],
                  genders: dict[str, str], train_speakers: set[str], result: Validation) -> None:
    enrolled = {u.speaker for u in lists[enroll_list]}
    tried = {u.id: u for u in lists[trial_list]}
    both = {u.id for u in lists[enroll_list]} & set(tried)
    if both:
        result.problems.append(f"{path}: utterances {sorted(both)[:5]} are both enrolment ({enroll_list}) and "
                               f"trial ({trial_list}) utterances")
    enrolled_files = {os.path.realpath(u.path): u.id for u in lists[enroll_list]}
    shared = sorted(f"{enrolled_files[file]} = {u.id}" for u in tried.values() if u.id not in both and
                    (file := os.path.realpath(u.path)) in enrolled_files)
    if shared:  # a target trial scoring a recording against itself
        result.problems.append(f"{path}: the same audio file enrols and is tried under two ids ({', '.join(shared[:3])}"
                               f"{', ...' if len(shared) > 3 else ''}; {enroll_list} = {trial_list})")
    try:
        trials = read_trials(path, result.problems)
    except VpevalError as error:
        result.problems.append(str(error))
        return
    first: dict[tuple[str, str], int] = {}
    for number, trial in enumerate(trials, start=1):
        first.setdefault((trial.enroll, trial.test), number)
        if trial.enroll not in enrolled:
            result.problems.append(f"{path}:{number}: enrolment speaker {trial.enroll} is not in {enroll_list}")
        elif trial.test not in tried:
            result.problems.append(f"{path}:{number}: trial utterance {trial.test} is not in {trial_list}")
        elif genders[trial.enroll] != tried[trial.test].gender and not name.endswith(f"_{MIXED}"):
            result.problems.append(f"{path}:{number}: mixed-gender trial {trial.enroll} vs {trial.test}")
        elif trial.target != (tried[trial.test].speaker == trial.enroll):
            result.problems.append(f"{path}:{number}: label '{'target' if trial.target else 'nontarget'}' "
                                   f"contradicts the speakers of {trial.enroll} and {trial.test}")
        elif first[trial.enroll, trial.test] != number:  # scored twice, it would count twice
            result.problems.append(f"{path}:{number}: trial {trial.enroll} {trial.test} repeats line "
                                   f"{first[trial.enroll, trial.test]}")
    n_target = sum(t.target for t in trials)
    if n_target == 0 or n_target == len(trials):
        result.problems.append(f"{path}: needs both target and non-target trials "
                               f"({n_target} target of {len(trials)})")
    leaked = (enrolled | {u.speaker for u in tried.values()}) & train_speakers
    if leaked and name != "val_trials":
        result.problems.append(f"{path}: speakers {sorted(leaked)[:5]} are in the attacker's training data")
    result.counts.append([name, "", "", f"{n_target} / {len(trials) - n_target}"])


def validate_lists(manifests: dict[str, Path], trial_lists: dict[str, tuple[Path, str, str]],
                   train: str = "train", *, sample_rate: int | None = None,
                   workers: int | None = None) -> Validation:
    """Check `manifests` (name -> path) and `trial_lists` (name -> (path, enroll list, trial list));
    `sample_rate`, when given, is the rate every utterance must have."""
    result = Validation()
    lists: dict[str, list[Utterance]] = {}
    for name, path in manifests.items():
        try:
            lists[name] = read_manifest(path, result.problems)
        except VpevalError as error:
            result.problems.append(str(error))
            continue
        result.counts.append([name, len(lists[name]), len({u.speaker for u in lists[name]}), ""])
    _check_audio(lists, manifests, sample_rate, workers, result)
    _check_ids(lists, manifests, result)
    genders = _check_genders(lists, manifests, result)
    train_speakers = {u.speaker for u in lists.get(train, [])}
    for name, (path, enroll_list, trial_list) in trial_lists.items():
        if enroll_list in lists and trial_list in lists:
            _check_trials(name, path, enroll_list, trial_list, lists, genders, train_speakers, result)
    return result


def check(prepared: Path, splits: tuple[str, ...] | None = None, workers: int | None = None) -> Validation:
    """Validate every evaluation set of a prepare-stage folder and its training list; `splits`
    (e.g. the experiment's `eval_splits`) must be among the prepared sets."""

    prepared = Path(prepared)
    summary = summary_of(prepared)
    params = json.loads((prepared / PARAMS).read_text())["params"]
    sets = summary.get("eval_sets", list(SPLITS))
    lists = {s: [g for g in (*GENDERS, MIXED) if g in summary.get(s, {g: 0 for g in GENDERS})] for s in sets}
    names = ["train"] + [f"{s}_{kind}" for s in sets for kind in ("enrolls", *(f"trials_{g}" for g in lists[s]))]
    manifests = {n: manifest_path(prepared, n) for n in names}
    trial_lists = {f"{s}_trials_{g}": (trials_path(prepared, f"{s}_trials_{g}"), f"{s}_enrolls", f"{s}_trials_{g}")
                   for s in sets for g in lists[s]}
    result = validate_lists(manifests, trial_lists, sample_rate=params.get("sample_rate"), workers=workers)
    missing = [s for s in (splits or ()) if s not in sets]
    if missing:
        result.problems.append(f"{prepared}: evaluation split(s) {missing} were not prepared; "
                               f"this corpus has {sets}")
    skipped = summary.get("skipped", {})
    if any(skipped.values()):
        result.notes.append(f"Preparation skipped {skipped['utterances']} bad utterance(s) and "
                            f"{skipped['trials']} trial(s) (data.skip_bad): {prepared / SKIP_LIST}")
    if summary.get("converted"):
        result.notes.append(f"{summary['converted']} file(s) were converted to mono {params.get('sample_rate')} Hz "
                            f"FLAC under {prepared / 'audio'}.")
    return result


def run(prepared: Path, cache: Cache, splits: tuple[str, ...] = SPLITS) -> Validation:
    """Validate once per prepared folder (cached); raises a VpevalError naming the problems."""
    def build(out: Path) -> dict:
        result = check(prepared, splits)
        if result.problems:
            shown = "; ".join(result.problems[:5])
            more = f" (and {len(result.problems) - 5} more; run `vpeval validate` for all)" \
                if len(result.problems) > 5 else ""
            raise VpevalError(f"{prepared}: {len(result.problems)} validation problem(s): {shown}{more}")
        return {"lists": result.counts, "notes": result.notes}

    out = cache.build("validate", {"splits": list(splits)}, {"prepared": Path(prepared).name}, build, code=__name__)
    summary = summary_of(out)
    return Validation(counts=summary["lists"], notes=summary.get("notes", []))
