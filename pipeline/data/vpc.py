"""VoicePrivacy Challenge data dirs (2020-2024): Kaldi-style dirs that bring their own protocol.

`data.root` is the VPC recipe's `data/` folder, e.g.

    train-clean-360/         the attacker's training data: wav.scp, utt2spk, spk2gender [, text]
    libri_dev_enrolls/       enrolment utterances, listed again in `enrolls`
    libri_dev_trials_f/      trial utterances of one gender and their `trials`
    vctk_dev_trials_f_common/   VCTK's common-sentence trials (VPC 2020 and 2022)

`wav.scp` values are paths or the pipe forms `flac -c -d -s PATH |` and `sox PATH -t wav - |`
(see `pipeline.data.kaldi.wav_scp_path`); only the path is used, nothing is ever run.
Relative paths are resolved against `path_root`, by default the recipe folder
(`data.root/..`), where the VPC scripts run from.

>>> reader = VoicePrivacyDirs("/vpc/data")                                   # doctest: +SKIP
>>> GivenProtocol().build(utts, reader=reader, subset="libri_dev", ...)      # doctest: +SKIP
"""
from __future__ import annotations

from pathlib import Path

from pipeline.core.errors import VpevalError, input_error
from pipeline.data.corpus import MAIN, Entry, Problems, listed_once
from pipeline.data.kaldi import WAV_SCP_FORMS, table_lines, wav_scp_path
from pipeline.data.manifest import GENDERS, Trial, Utterance
from pipeline.data.protocol import Protocol, mixed_trials

REQUIRED_FILES = ("wav.scp", "utt2spk", "spk2gender")


class VoicePrivacyDirs:
    """Reader of the Kaldi data dirs under `root`; a subset is a dir name."""

    def __init__(self, root: str | Path, path_root: str | Path | None = None):
        self.root = Path(root)
        if not self.root.is_dir():
            raise VpevalError(f"{self.root}: VoicePrivacy data folder not found (set data.root)")
        self.path_root = Path(path_root) if path_root else self.root.resolve().parent

    def folder(self, name: str) -> Path:
        folder = self.root / name
        if not folder.is_dir():
            raise VpevalError(f"{folder}: data dir not found")
        for required in REQUIRED_FILES:
            if not (folder / required).is_file():
                raise input_error(folder / required, f"not found; a Kaldi data dir needs {', '.join(REQUIRED_FILES)}")
        if (folder / "segments").exists():
            raise input_error(folder / "segments", "segment-level data dirs are not supported; "
                                                   "give one audio file per utterance")
        return folder

    def entries(self, name: str) -> list[Entry]:
        """The utterances of one data dir, in `wav.scp` order; lines that cannot be used carry a problem."""
        folder = self.folder(name)
        speakers = self._speakers(folder / "utt2spk")
        genders = self._genders(folder / "spk2gender")
        texts = self._texts(folder / "text")
        scp = folder / "wav.scp"
        entries, listed = [], set()
        for number, utt, value in table_lines(scp):
            listed.add(utt)
            speaker = speakers.get(utt, ("", ""))[0]
            path, problem = self._path(value)
            if problem:
                problem = f"cannot use the audio of {utt}: {problem}; expected {WAV_SCP_FORMS} (never run)"
            elif not speaker:
                problem = f"utterance {utt} has no speaker in {folder / 'utt2spk'}"
            elif speaker not in genders:
                problem = f"speaker {speaker} of {utt} has no gender in {folder / 'spk2gender'}"
            entries.append(Entry(id=utt, speaker=speaker, gender=genders.get(speaker, ""), path=path,
                                 text=texts.get(utt, ""), where=f"{scp}:{number}", problem=problem))
        for utt, (speaker, where) in speakers.items():
            if utt not in listed:
                entries.append(Entry(id=utt, speaker=speaker, gender="", path="", where=where,
                                     problem=f"utterance {utt} is in utt2spk but not in {scp}"))
        if not listed:
            raise input_error(scp, "no utterances listed")
        return entries

    def utterance_ids(self, name: str) -> list[str]:
        return [utt for _, utt, _ in table_lines(self.folder(name) / "wav.scp")]

    def enrolls(self, name: str) -> list[tuple[str, str]] | None:
        """(utterance id, where) of the dir's `enrolls` list, or None when it has none."""
        listing = self.folder(name) / "enrolls"
        if not listing.is_file():
            return None
        return [(utt, f"{listing}:{number}") for number, utt, _ in table_lines(listing)]

    def trials(self, name: str) -> list[tuple[str, Trial | None, str]]:
        """(where, trial, problem) for every line of the dir's `trials` list."""
        listing = self.folder(name) / "trials"
        if not listing.is_file():
            raise input_error(listing, "not found; a trial dir needs its 'trials' list")
        rows = []
        for number, enroll, rest in table_lines(listing):
            fields = rest.split()
            where = f"{listing}:{number}"
            if len(fields) != 2 or fields[1] not in ("target", "nontarget"):
                rows.append((where, None, f"expected 'enroll_speaker test_utterance target|nontarget', "
                                          f"got {enroll} {rest!r}"))
            else:
                rows.append((where, Trial(enroll, fields[0], fields[1] == "target"), ""))
        return rows

    def _path(self, value: str) -> tuple[str, str]:
        """(absolute path, "") of a wav.scp value, or ("", why it cannot be used)."""
        try:
            path = Path(wav_scp_path(value))
        except ValueError as exc:
            return "", str(exc)
        return str(path if path.is_absolute() else self.path_root / path), ""

    @staticmethod
    def _speakers(path: Path) -> dict[str, tuple[str, str]]:
        """Utterance -> (speaker, where) from `utt2spk`; an utterance given two speakers is an error."""
        rows = table_lines(path)
        for number, utt, rest in rows:
            if len(rest.split()) != 1:
                raise input_error(path, f"expected 'utterance speaker', got {utt} {rest!r}", number)
        return {utt: (speaker, f"{path}:{number}")
                for utt, (speaker, number) in listed_once(path, rows, "utterance", "with speaker {}").items()}

    @staticmethod
    def _genders(path: Path) -> dict[str, str]:
        """Speaker -> 'f' | 'm' from `spk2gender`; a speaker given two genders is an error."""
        rows = table_lines(path)
        for number, speaker, rest in rows:
            if rest.lower() not in GENDERS:
                raise input_error(path, f"expected 'speaker f|m', got {speaker} {rest!r}", number)
        rows = [(number, speaker, rest.lower()) for number, speaker, rest in rows]
        return {speaker: gender for speaker, (gender, _) in listed_once(path, rows, "speaker", "as {}").items()}

    @staticmethod
    def _texts(path: Path) -> dict[str, str]:
        """Utterance -> transcript from the optional `text`; an utterance given two transcripts is an error."""
        if not path.is_file():
            return {}
        texts = listed_once(path, table_lines(path), "utterance", "with text {!r}")
        return {utt: text for utt, (text, _) in texts.items()}


class GivenProtocol:
    """Protocol source: the enrolment and trial lists the corpus gives, found by dir-name patterns.

    `enrolls` and `trials` are patterns of the enrolment dir and the per-gender trial dirs
    (`{subset}`, `{g}`); `extra_trials` names more trial dirs per variant, e.g.
    `{common: "{subset}_trials_{g}_common"}` gives the evaluation set `<split>_common`,
    enrolled like the split itself. `mixed_trials` is the pattern of the mixed-gender trial
    dir (VPC 2026: `{subset}_trials_mixed`), read when `data.eval_trials` asks for it; null
    draws the mixed list from the female and male lists (`pipeline.data.protocol.mixed_trials`).
    With `trials: null` the mixed dir is the only trial dir (VPC 2026 Track 2's MLS dirs).
    """

    def __init__(self, enrolls: str = "{subset}_enrolls", trials: str | None = "{subset}_trials_{g}",
                 extra_trials: dict[str, str] | None = None, mixed_trials: str | None = None):
        if trials is None and mixed_trials is None:
            raise VpevalError("data.protocol: trials and mixed_trials are both null; name the trial dirs")
        self.enrolls = enrolls
        self.patterns = {**({MAIN: trials} if trials is not None else {}), **dict(extra_trials or {})}
        self.mixed_pattern = mixed_trials
        self._mixed: dict[str, list[Trial]] = {}  # subset -> the mixed dir's trials, when it is the only one

    def dirs(self, subset: str) -> tuple[str, dict[str, dict[str, str]]]:
        """The enrolment dir and, per variant and gender, the trial dir of `subset`."""
        return self.enrolls.format(subset=subset), {
            variant: {g: pattern.format(subset=subset, g=g) for g in GENDERS}
            for variant, pattern in self.patterns.items()}

    def mixed_only(self) -> bool:
        """Whether the mixed dir is the split's only trial dir (VPC 2026 Track 2): the female
        and male lists are then its same-gender trials."""
        return MAIN not in self.patterns

    def entries(self, reader: VoicePrivacyDirs, subset: str) -> list[Entry]:
        enroll_dir, trial_dirs = self.dirs(subset)
        names = [enroll_dir] + [name for dirs in trial_dirs.values() for name in dirs.values()]
        if self.mixed_only():
            names.append(self.mixed_pattern.format(subset=subset))
        return [entry for name in names for entry in reader.entries(name)]

    def build(self, utterances: list[Utterance], *, reader: VoicePrivacyDirs, subset: str, name: str,
              problems: Problems) -> dict[str, Protocol]:
        ready = {u.id: u for u in utterances}
        enroll_dir, trial_dirs = self.dirs(subset)
        enrolls = self._enrolls(reader, enroll_dir, ready, problems)
        enroll_ids = {u.id for u in enrolls}
        protocols = {}
        for variant, dirs in trial_dirs.items():
            trial_utts, trials = {}, {}
            for g, trial_dir in dirs.items():
                trial_utts[g] = [ready[i] for i in reader.utterance_ids(trial_dir) if i in ready and i not in enroll_ids]
                trials[g] = self._given(reader, trial_dir, enrolls, trial_utts[g], enroll_dir, problems)
            protocols[variant] = Protocol(enrolls, trial_utts, trials)
        if self.mixed_only():
            trial_dir = self.mixed_pattern.format(subset=subset)
            tried = [ready[i] for i in reader.utterance_ids(trial_dir) if i in ready and i not in enroll_ids]
            self._mixed[subset] = self._given(reader, trial_dir, enrolls, tried, enroll_dir, problems)
            enrolled = {u.speaker: u.gender for u in enrolls}
            tested = {u.id: u.gender for u in tried}
            protocols[MAIN] = Protocol(enrolls, {g: [u for u in tried if u.gender == g] for g in GENDERS},
                                       {g: [t for t in self._mixed[subset] if enrolled[t.enroll] == tested[t.test] == g]
                                        for g in GENDERS})
        return protocols

    def mixed(self, protocol: Protocol, *, reader: VoicePrivacyDirs, subset: str, seed: int,
              problems: Problems) -> list[Trial]:
        """The trials of the given mixed dir (its utterances are those of the female and male
        trial dirs), or the list drawn by VPC's rule with `seed` when no dir is configured."""
        if subset in self._mixed:
            return self._mixed[subset]
        if self.mixed_pattern is None:
            return mixed_trials(protocol, seed)
        tried = [u for g in GENDERS for u in protocol.trial_utts[g]]
        return self._given(reader, self.mixed_pattern.format(subset=subset), protocol.enrolls, tried,
                           self.enrolls.format(subset=subset), problems)

    def _given(self, reader: VoicePrivacyDirs, trial_dir: str, enrolls: list[Utterance], tried: list[Utterance],
               enroll_dir: str, problems: Problems) -> list[Trial]:
        """The usable trials of a trial dir's `trials` list; each other line is a named trial problem."""
        enrolled = {u.speaker for u in enrolls}
        speakers = {u.id: u.speaker for u in tried}
        known = set(reader.utterance_ids(trial_dir))
        trials, first = [], {}
        for where, trial, problem in reader.trials(trial_dir):
            if not problem:
                problem = self._trial_problem(trial, enrolled, set(speakers), known, enroll_dir, trial_dir)
            if not problem and trial.target != (speakers[trial.test] == trial.enroll):
                problem = (f"label '{'target' if trial.target else 'nontarget'}' contradicts the speakers of "
                           f"{trial.enroll} and {trial.test}")
            if not problem and (trial.enroll, trial.test) in first:  # scored twice, it would count twice
                problem = f"trial {trial.enroll} {trial.test} repeats {first[trial.enroll, trial.test]}"
            if not problem:
                first[trial.enroll, trial.test] = f"line {where.rsplit(':', 1)[1]}"
            if problem:
                problems.trial(where, problem)
            else:
                trials.append(trial)
        return trials

    @staticmethod
    def _enrolls(reader: VoicePrivacyDirs, enroll_dir: str, ready: dict[str, Utterance],
                 problems: Problems) -> list[Utterance]:
        """The listed enrolment utterances (all of the dir's when it has no `enrolls` list)."""
        in_dir = reader.utterance_ids(enroll_dir)
        listed = reader.enrolls(enroll_dir) or [(utt, f"{reader.root / enroll_dir}/wav.scp") for utt in in_dir]
        enrolls, known = [], set(in_dir)
        for utt, where in listed:
            if utt not in known:
                problems.utterance(where, f"enrolment utterance {utt} is not in {reader.root / enroll_dir}/wav.scp")
            elif utt in ready:
                enrolls.append(ready[utt])
        return enrolls

    @staticmethod
    def _trial_problem(trial: Trial, enrolled: set[str], usable: set[str], listed: set[str],
                       enroll_dir: str, trial_dir: str) -> str:
        if trial.enroll not in enrolled:
            return f"enrolment speaker {trial.enroll} has no enrolment utterance in {enroll_dir}"
        if trial.test not in listed:
            return f"trial utterance {trial.test} is not in {trial_dir}/wav.scp"
        if trial.test not in usable:
            return f"trial utterance {trial.test} cannot be used (a bad utterance, or also an enrolment one)"
        return ""
