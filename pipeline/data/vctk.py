"""VCTK 0.92 (`VCTK-Corpus-0.92`): speaker sets, and the VoicePrivacy structure of its protocol.

Layout under `root`: `speaker-info.txt` (`ID AGE GENDER ACCENTS REGION COMMENTS`),
`txt/<spk>/<spk>_<nnn>.txt` and `wav48_silence_trimmed/<spk>/<spk>_<nnn>_<mic>.flac`
(48 kHz; preparation converts it to `data.sample_rate`). An utterance is a recording of
the chosen microphone (`mic1` or `mic2`); its id is `<spk>_<nnn>`.

The known gaps of 0.92 follow from that rule, and each is logged with its count:
- p315 has no transcripts: its utterances have empty text (ASV does not use text);
- p280 has no mic2 recordings: with mic2 it is not part of the corpus, and naming it in a
  speaker set is an error;
- some p362 transcripts have no recording: those sentences are not utterances.

Subsets are the configured speaker sets (`speaker_sets`, e.g. dev and test, each a list of
speakers or per-gender counts drawn with `seed`) and `train`, every other speaker.

>>> VCTK("/corpora/VCTK-Corpus-0.92", speaker_sets={"dev": {"f": 15, "m": 15}}).entries("dev")  # doctest: +SKIP
"""
from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path

import numpy as np

from pipeline.core.errors import VpevalError, input_error
from pipeline.core.fileio import read_text
from pipeline.data.corpus import MAIN, Entry, Problems, Reader, listed_once
from pipeline.data.manifest import GENDERS, Trial, Utterance, by_speaker
from pipeline.data.protocol import Protocol, cross_trials, mixed_trials

log = logging.getLogger(__name__)
MICS = ("mic1", "mic2")
TRAIN = "train"


def read_speaker_info(path: Path) -> dict[str, str]:
    """Speaker id -> 'f' | 'm' from VCTK's speaker-info.txt; a speaker listed twice with two
    genders is an error."""
    if not path.is_file():
        raise input_error(path, "not found; is data.root a VCTK 0.92 folder?")
    rows = []
    for number, raw in enumerate(read_text(path).splitlines(), start=1):
        fields = raw.split()
        if not fields or fields[0] == "ID":
            continue
        if len(fields) < 3 or fields[2].upper() not in ("F", "M"):
            raise input_error(path, f"expected 'ID AGE GENDER ...' with GENDER F or M, got {raw!r}", number)
        rows.append((number, fields[0], fields[2].upper()))
    return {speaker: sex.lower() for speaker, (sex, _) in listed_once(path, rows, "speaker", "as {}").items()}


class VCTK:
    """Reader of a VCTK 0.92 folder; subsets are `train` and the names of `speaker_sets`."""

    def __init__(self, root: str | Path, mic: str = "mic2", audio_dir: str = "wav48_silence_trimmed",
                 speaker_sets: Mapping | None = None, seed: int = 0):
        self.root = Path(root)
        if mic not in MICS:
            raise VpevalError(f"data.reader.mic must be one of {MICS}, got {mic!r}")
        self.mic = mic
        self.audio_root = self.root / audio_dir
        if not self.audio_root.is_dir():
            raise VpevalError(f"{self.audio_root}: VCTK audio folder not found (set data.root)")
        self.speaker_sets = dict(speaker_sets or {})
        if TRAIN in self.speaker_sets:
            raise VpevalError(f"data.reader.speaker_sets: '{TRAIN}' is every speaker outside the sets; "
                              "it cannot be a set itself")
        self.seed = seed

    @cached_property
    def genders(self) -> dict[str, str]:
        return read_speaker_info(self.root / "speaker-info.txt")

    @cached_property
    def recordings(self) -> dict[str, dict[str, Path]]:
        """Speaker -> sentence number (`nnn`) -> recording of the chosen microphone."""
        pattern = re.compile(rf"^(?P<speaker>[^_]+)_(?P<number>\d+)_{self.mic}\.flac$")
        found: dict[str, dict[str, Path]] = {}
        for folder in sorted(p for p in self.audio_root.iterdir() if p.is_dir()):
            files = {m["number"]: folder / m[0] for m in map(pattern.match, sorted(os.listdir(folder)))
                     if m and m["speaker"] == folder.name}
            if not files:
                continue
            if folder.name not in self.genders:
                raise input_error(self.root / "speaker-info.txt", f"speaker {folder.name} ({folder}) is not listed")
            found[folder.name] = files
        if not found:
            raise VpevalError(f"{self.audio_root}: no '<spk>/<spk>_<nnn>_{self.mic}.flac' recordings found")
        self._log_gaps(found)
        return found

    def _log_gaps(self, found: dict[str, dict[str, Path]]) -> None:
        silent = sorted(set(self.genders) - set(found))
        if silent:
            log.info("VCTK: no %s recordings of %s; left out", self.mic, ", ".join(silent))
        for speaker, files in found.items():
            texts = {p.stem.rsplit("_", 1)[-1] for p in (self.root / "txt" / speaker).glob(f"{speaker}_*.txt")}
            untranscribed, unrecorded = len(set(files) - texts), len(texts - set(files))
            if untranscribed:
                log.info("VCTK: %d recordings of %s have no transcript; their text is empty", untranscribed, speaker)
            if unrecorded:
                log.info("VCTK: %d transcripts of %s have no %s recording; left out", unrecorded, speaker, self.mic)

    @cached_property
    def subsets(self) -> dict[str, list[str]]:
        """Speakers of every subset: listed sets, then drawn sets (in config order), then train."""
        taken: set[str] = set()
        chosen: dict[str, list[str]] = {}
        for name, spec in self.speaker_sets.items():
            if not isinstance(spec, Mapping):
                chosen[name] = self._listed(name, [str(s) for s in spec], taken)
        rng = np.random.default_rng(self.seed)
        for name, spec in self.speaker_sets.items():
            if isinstance(spec, Mapping):
                chosen[name] = self._drawn(name, spec, taken, rng)
        chosen[TRAIN] = sorted(set(self.recordings) - taken)
        return chosen

    def _listed(self, name: str, speakers: list[str], taken: set[str]) -> list[str]:
        for speaker in speakers:
            if speaker not in self.recordings:
                why = "is not in speaker-info.txt" if speaker not in self.genders else \
                    f"has no {self.mic} recordings under {self.audio_root}"
                raise VpevalError(f"data.reader.speaker_sets.{name}: speaker {speaker} {why}")
            if speaker in taken:
                raise VpevalError(f"data.reader.speaker_sets.{name}: speaker {speaker} is in two sets")
            taken.add(speaker)
        return sorted(speakers)

    def _drawn(self, name: str, spec: Mapping, taken: set[str], rng: np.random.Generator) -> list[str]:
        unknown = set(spec) - set(GENDERS)
        if unknown:
            raise VpevalError(f"data.reader.speaker_sets.{name}: keys must be 'f' and 'm', got {sorted(unknown)}")
        speakers = []
        for gender in GENDERS:
            pool = sorted(s for s in self.recordings if self.genders[s] == gender and s not in taken)
            wanted = int(spec.get(gender, 0))
            if wanted > len(pool):
                raise VpevalError(f"data.reader.speaker_sets.{name}: {wanted} '{gender}' speakers wanted, "
                                  f"{len(pool)} left")
            speakers += rng.choice(pool, size=wanted, replace=False).tolist()
        taken.update(speakers)
        return sorted(speakers)

    def entries(self, subset: str) -> list[Entry]:
        if subset not in self.subsets:
            raise VpevalError(f"VCTK subset {subset!r} unknown; subsets are {sorted(self.subsets)} "
                              "(train and data.reader.speaker_sets)")
        entries = []
        for speaker in self.subsets[subset]:
            for number, path in sorted(self.recordings[speaker].items()):
                utt = f"{speaker}_{number}"
                transcript = self.root / "txt" / speaker / f"{utt}.txt"
                text = read_text(transcript).strip() if transcript.is_file() else ""
                entries.append(Entry(id=utt, speaker=speaker, gender=self.genders[speaker], path=str(path),
                                     text=text, where=str(path)))
        return entries


def sentence_number(utt: Utterance) -> int:
    """The VCTK sentence number of `<spk>_<nnn>`."""
    number = utt.id.rsplit("_", 1)[-1]
    if not number.isdigit():
        raise VpevalError(f"utterance id {utt.id!r} is not a VCTK '<speaker>_<nnn>' id")
    return int(number)


class VctkProtocol:
    """Protocol source with VoicePrivacy's VCTK structure (tomashenko2020, §3.2).

    Every speaker of the split enrols with `enroll_utterances` of its diverse sentences
    (numbers above `common_sentences`); the split's trials are its other diverse sentences,
    and the `common` variant's trials its common sentences 1..`common_sentences`, the same
    text for every speaker. Trials pair each speaker with every trial utterance of its gender.
    """

    def __init__(self, seed: int = 0, enroll_utterances: int = 20, common_sentences: int = 24):
        self.seed = seed
        self.enroll_utterances = enroll_utterances
        self.common_sentences = common_sentences

    def entries(self, reader: Reader, subset: str) -> list[Entry]:
        return reader.entries(subset)

    def mixed(self, protocol: Protocol, *, reader: Reader, subset: str, seed: int,
              problems: Problems) -> list[Trial]:
        return mixed_trials(protocol, seed)

    def build(self, utterances: list[Utterance], *, reader: Reader, subset: str, name: str,
              problems: Problems) -> dict[str, Protocol]:
        rng = np.random.default_rng(self.seed)
        enrolls: list[Utterance] = []
        diverse = {g: [] for g in GENDERS}
        common = {g: [] for g in GENDERS}
        speakers = {g: [] for g in GENDERS}
        for speaker, utts in by_speaker(utterances).items():
            shared = [u for u in utts if sentence_number(u) <= self.common_sentences]
            own = [u for u in utts if sentence_number(u) > self.common_sentences]
            if len(own) < 2:
                raise VpevalError(f"{name}: speaker {speaker} has {len(own)} diverse sentence(s); it needs at "
                                  "least one to enrol and one to try")
            chosen = set(rng.choice(len(own), size=min(self.enroll_utterances, len(own) - 1), replace=False).tolist())
            gender = utts[0].gender
            enrolls += [u for i, u in enumerate(own) if i in chosen]
            diverse[gender] += [u for i, u in enumerate(own) if i not in chosen]
            common[gender] += shared
            speakers[gender].append(speaker)
        for gender in GENDERS:
            if len(speakers[gender]) < 2:
                raise VpevalError(f"{name}: {len(speakers[gender])} '{gender}' speaker(s); a protocol needs at "
                                  "least 2 per gender")
        return {
            MAIN: Protocol(enrolls, diverse, {g: cross_trials(speakers[g], diverse[g]) for g in GENDERS}),
            "common": Protocol(enrolls, common, {g: cross_trials(speakers[g], common[g]) for g in GENDERS}),
        }
