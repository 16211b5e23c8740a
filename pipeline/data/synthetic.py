"""Built-in synthetic speech corpus in the LibriSpeech layout, deterministic from a seed.

Speech-like audio comes from a source-filter synthesiser: a Rosenberg glottal pulse train
(with jitter, shimmer and breathiness) and noise sources, shaped by a cascade of formant
resonators (updated every 10 ms from 5 ms parameter tracks) whose targets follow a random
phone sequence. Speaker identity lives in
the source and the vocal tract (F0 level and range, vocal tract length and per-formant
offsets, bandwidths, spectral tilt, open and speed quotient, breathiness, jitter, shimmer);
the content is a fresh phone sequence with prosody for every utterance; every chapter adds a
mild channel (EQ, high-pass, noise floor, level) and session (F0, formants) variation.
Utterances are planned by `pipeline.data.phones` and rendered by `pipeline.signal.synthesis`;
this module draws the speakers and sessions and writes the corpus.

Files under `root` (LibriSpeech's layout, plus one alignment file per chapter)::

    SPEAKERS.TXT                                   ;-header, then "ID | SEX | SUBSET | MINUTES | NAME"
    <subset>/<spk>/<chapter>/<spk>-<chapter>-<utt:04d>.flac   16-bit mono FLAC
    <subset>/<spk>/<chapter>/<spk>-<chapter>.trans.txt        "<utt-id> <UPPERCASE TEXT>"
    <subset>/<spk>/<chapter>/<spk>-<chapter>.align.txt        "<utt-id> <start_s> <end_s> <label>"
    synthetic.json                                 generation options, written last

An alignment file lists, for each utterance in order, its segments as contiguous intervals
in seconds (millisecond precision) from 0 to the utterance's duration; labels are ARPAbet-like
phone symbols (a stop is one segment: closure, burst and aspiration) and `SIL` for silence.
The transcript's words are the spellings of the same phones.

>>> generate_corpus("data/corpora/synthetic", seed=0)  # doctest: +SKIP
PosixPath('data/corpora/synthetic')
"""
from __future__ import annotations

import glob
import json
import multiprocessing
import os
import re
import secrets
import shutil
import signal
import socket
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

import numpy as np
from tqdm import tqdm

from pipeline.core.errors import VpevalError
from pipeline.core.fileio import write_json, write_lines, write_text
from pipeline.core.schemas import Generate, GeneratedSubset, check_of, require
from pipeline.data.audio import write_audio
from pipeline.data.phones import VOWELS, frame_tracks, plan_utterance
from pipeline.signal.synthesis import Session, Voice, frame_count, synthesise
from pipeline.runtime.cpus import usable_cpus

FORMAT_VERSION = 1
MARKER = "synthetic.json"
DEFAULT_SUBSETS = MappingProxyType({
    "train-synth": MappingProxyType({"female": 20, "male": 20, "utterances": 30}),
    "dev-synth": MappingProxyType({"female": 8, "male": 8, "utterances": 16}),
    "test-synth": MappingProxyType({"female": 8, "male": 8, "utterances": 16}),
})
SUBSET_KEYS = ("female", "male", "utterances")


@dataclass(frozen=True)
class SpeakerTask:
    """Everything a worker needs to synthesise one speaker's chapters."""

    folder: str
    subset: str
    speaker: int
    gender: str
    chapters: tuple  # (chapter id, number of utterances) pairs
    seed: int
    sample_rate: int
    duration: tuple


def draw_voice(rng: np.random.Generator, gender: str) -> Voice:
    """Draw a speaker; female and male differ in F0 (about an octave) and vocal tract length."""
    female = gender == "f"
    vtl_scale = (1.17 if female else 1.0) * np.exp(rng.normal(0.0, 0.07))
    formant_offsets = np.exp(rng.normal(0.0, [0.07, 0.06, 0.05, 0.05, 0.05, 0.05, 0.05]))
    return Voice(
        gender=gender,
        f0_hz=float((205.0 if female else 115.0) * np.exp(rng.normal(0.0, 0.13))),
        f0_range_st=float(rng.uniform(1.5, 4.5)),
        formant_scale=tuple(float(x) for x in vtl_scale * formant_offsets),
        vowel_offsets=tuple(tuple(float(x) for x in np.exp(rng.normal(0.0, 0.035, 3))) for _ in VOWELS),
        bandwidth_scale=float(np.exp(rng.normal(0.0, 0.2))),
        tilt=float(rng.uniform(0.0, 0.5)),
        open_quotient=float(rng.uniform(0.45, 0.8)),
        speed_quotient=float(rng.uniform(1.5, 3.5)),
        breathiness=float(rng.uniform(0.02, 0.25 if female else 0.15)),
        jitter=float(rng.uniform(0.002, 0.015)),
        shimmer=float(rng.uniform(0.02, 0.10)),
        tempo=float(np.exp(rng.normal(0.0, 0.08))),
    )


def speaker_voice(seed: int, speaker: int, gender: str) -> Voice:
    """The voice of speaker `speaker` in the corpus generated with `seed`."""
    return draw_voice(np.random.default_rng([seed, 1, speaker]), gender)


def draw_session(rng: np.random.Generator) -> Session:
    """Draw a chapter's mild channel and session variation."""
    return Session(
        eq_db=tuple(float(x) for x in rng.normal(0.0, 1.0, 3)),
        highpass_hz=float(rng.uniform(40.0, 150.0)),
        snr_db=float(rng.uniform(35.0, 50.0)),
        level_dbfs=float(rng.uniform(-28.0, -20.0)),
        f0_shift_st=float(rng.normal(0.0, 0.5)),
        formant_shift=float(np.exp(rng.normal(0.0, 0.01))),
    )


def synthesise_speaker(task: SpeakerTask) -> tuple[int, float]:
    """Write one speaker's chapters (audio, transcripts, alignments); return (speaker, seconds).

    Random streams are keyed (seed, role, speaker[, chapter, utterance]), so a speaker's audio
    depends on nothing else: not on the other speakers, nor on the order or number of workers.
    """
    voice = speaker_voice(task.seed, task.speaker, task.gender)
    total_seconds = 0.0
    low_ms, high_ms = (round(1000 * x) for x in task.duration)
    for chapter_index, (chapter, n_utterances) in enumerate(task.chapters):
        session = draw_session(np.random.default_rng([task.seed, 2, task.speaker, chapter_index]))
        folder = Path(task.folder) / task.subset / str(task.speaker) / str(chapter)
        transcripts, alignments = [], []
        for utt_index in range(n_utterances):
            rng = np.random.default_rng([task.seed, 3, task.speaker, chapter_index, utt_index])
            total_ms = int(rng.integers(low_ms, high_ms + 1))
            segments, words = plan_utterance(rng, voice, total_ms)
            n_samples = round(segments[-1].end_ms * task.sample_rate / 1000)
            tracks = frame_tracks(segments, voice, frame_count(n_samples, task.sample_rate))
            utt_id = f"{task.speaker}-{chapter}-{utt_index:04d}"
            write_audio(folder / f"{utt_id}.flac", synthesise(rng, voice, session, tracks, n_samples, task.sample_rate),
                        task.sample_rate)
            transcripts.append(f"{utt_id} {' '.join(words)}")
            alignments += [f"{utt_id} {s.start_ms / 1000:.3f} {s.end_ms / 1000:.3f} {s.phone.label}" for s in segments]
            total_seconds += total_ms / 1000
        write_lines(folder / f"{task.speaker}-{chapter}.trans.txt", transcripts)
        write_lines(folder / f"{task.speaker}-{chapter}.align.txt", alignments)
    return task.speaker, total_seconds


def _options(seed: int, sample_rate: int, subsets: Mapping, duration, chapters_per_speaker: int) -> dict:
    """Check the generation options and return them in the form stored in the marker file."""
    require(check_of(Generate, "seed"), seed, "data.generate.seed")
    if isinstance(sample_rate, bool) or not isinstance(sample_rate, int) or sample_rate < 8000:
        raise VpevalError(f"synthetic corpus: sample_rate must be an integer >= 8000, got {sample_rate!r}")
    require(check_of(Generate, "duration"), list(duration), "data.generate.duration")
    low, high = (float(x) for x in duration)
    require(check_of(Generate, "chapters_per_speaker"), chapters_per_speaker, "data.generate.chapters_per_speaker")
    if not subsets:
        raise VpevalError("synthetic corpus: subsets is empty")
    checked = {}
    for name, sizes in subsets.items():
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", str(name)):
            raise VpevalError(f"synthetic corpus: subset name {name!r} is not a plain folder name")
        if set(sizes) != set(SUBSET_KEYS):
            raise VpevalError(f"synthetic corpus: subsets.{name} needs exactly the keys {', '.join(SUBSET_KEYS)}, got {', '.join(sorted(sizes))}")
        values = {key: sizes[key] for key in SUBSET_KEYS}
        for key, value in values.items():
            require(check_of(GeneratedSubset, key), value, f"data.generate.subsets.{name}.{key}")
        if values["female"] + values["male"] == 0:
            raise VpevalError(f"synthetic corpus: subsets.{name} has no speakers")
        if values["utterances"] < chapters_per_speaker:
            raise VpevalError(f"synthetic corpus: subsets.{name}.utterances ({values['utterances']}) is below chapters_per_speaker ({chapters_per_speaker})")
        checked[str(name)] = values
    return {"format_version": FORMAT_VERSION, "seed": seed, "sample_rate": sample_rate, "subsets": checked,
            "duration": [low, high], "chapters_per_speaker": chapters_per_speaker}


def plan_speakers(options: dict, folder: Path) -> list[SpeakerTask]:
    """Draw disjoint numeric speaker ids, chapter ids and genders for every subset."""
    rng = np.random.default_rng([options["seed"], 0])
    sizes = [(name, s["female"], s["male"], s["utterances"]) for name, s in options["subsets"].items()]
    n_speakers = sum(f + m for _, f, m, _ in sizes)
    n_chapters = n_speakers * options["chapters_per_speaker"]
    speaker_ids = rng.choice(np.arange(10, max(10_000, 10 * n_speakers)), n_speakers, replace=False)
    chapter_ids = rng.choice(np.arange(100, max(200_000, 10 * n_chapters)), n_chapters, replace=False)
    tasks, next_speaker = [], 0
    for name, female, male, utterances in sizes:
        per_chapter = np.diff(np.linspace(0, utterances, options["chapters_per_speaker"] + 1).round().astype(int))
        for gender in ["f"] * female + ["m"] * male:
            chapters = chapter_ids[next_speaker * len(per_chapter):(next_speaker + 1) * len(per_chapter)]
            tasks.append(SpeakerTask(
                folder=str(folder), subset=name, speaker=int(speaker_ids[next_speaker]), gender=gender,
                chapters=tuple((int(c), int(n)) for c, n in zip(chapters, per_chapter)),
                seed=options["seed"], sample_rate=options["sample_rate"], duration=tuple(options["duration"]),
            ))
            next_speaker += 1
    return tasks


def speakers_table(tasks: list[SpeakerTask], seconds: dict[int, float]) -> str:
    """SPEAKERS.TXT in LibriSpeech's format."""
    lines = [
        "; Speakers of the vpeval synthetic corpus (pipeline/data/synthetic.py).",
        "; SEX is the synthetic voice's gender; MINUTES is the speaker's total audio.",
        ";ID  |SEX| SUBSET           |MINUTES| NAME",
    ]
    for task in sorted(tasks, key=lambda t: t.speaker):
        lines.append(f"{task.speaker:<5}| {task.gender.upper()} | {task.subset:<17}| {seconds[task.speaker] / 60:5.2f} | Synthetic {task.speaker}")
    return "\n".join(lines) + "\n"


def _existing_corpus(root: Path, options: dict) -> bool:
    """True when `root` holds a complete corpus with these options; raise if it holds anything else."""
    if not root.exists():
        return False
    marker = root / MARKER
    if marker.is_file():
        try:
            stored = json.loads(marker.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise VpevalError(f"{marker}: unreadable marker of a synthetic corpus ({exc})") from None
        if stored == options:
            return True
        raise VpevalError(f"{root}: holds a synthetic corpus generated with other options ({marker}); remove it or choose another root")
    if root.is_dir() and not any(root.iterdir()):
        root.rmdir()
        return False
    raise VpevalError(f"{root}: exists but is not a complete synthetic corpus (no {MARKER}); remove it or choose another root")


def generate_corpus(
    root: str | Path,
    *,
    seed: int = 0,
    sample_rate: int = 16000,
    subsets: Mapping | None = None,
    duration: tuple[float, float] = (2.0, 5.0),
    chapters_per_speaker: int = 2,
    workers: int | None = None,
    progress: bool = True,
) -> Path:
    """Generate the corpus at `root` (or return at once if it is already there); return `root`.

    `subsets` maps a subset name to {"female": n, "male": n, "utterances": n per speaker}
    (default DEFAULT_SUBSETS). The output depends only on the options, never on `workers`
    (default: one process per CPU core). The corpus is built in a temporary sibling folder
    renamed to `root` at the end, so `root` never holds a partial corpus.
    """
    root = Path(root)
    options = _options(seed, sample_rate, DEFAULT_SUBSETS if subsets is None else subsets, duration, chapters_per_speaker)
    if _existing_corpus(root, options):
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(root)
    staging = root.parent / f"{staging_prefix(root)}{os.getpid()}-{secrets.token_hex(4)}"
    staging.mkdir()  # not tempfile.mkdtemp, whose 0700 would hide a shared VPEVAL_DATA's corpus from other users
    try:
        tasks = plan_speakers(options, staging)
        n_workers = max(1, min(workers or usable_cpus()[0], len(tasks)))
        seconds = {}
        with tqdm(total=len(tasks), desc=f"synthetic corpus {root.name}", unit="spk", disable=not progress) as bar:
            with _mapper(n_workers) as mapper:
                for speaker, total in mapper(synthesise_speaker, tasks):
                    seconds[speaker] = total
                    bar.update()
        write_text(staging / "SPEAKERS.TXT", speakers_table(tasks, seconds))
        write_json(staging / MARKER, options)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    try:
        os.rename(staging, root)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        if not _existing_corpus(root, options):  # another process may have finished first
            raise
    return root


def staging_prefix(root: Path) -> str:
    """Name prefix of the folders corpora are built in: `.<name>.partial-<host>-<pid>-<random>`."""
    return f".{root.name}.partial-{socket.gethostname()}-"


def remove_stale_staging(root: Path) -> None:
    """Delete the staging folders that a killed generation on this host left next to `root`
    (their process is gone); another host's, or a live process's, are left alone."""
    prefix = staging_prefix(root)
    for folder in root.parent.glob(f"{glob.escape(prefix)}*"):
        pid = folder.name[len(prefix):].split("-", 1)[0]
        if pid.isdigit() and not _process_alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        return True
    return True


@contextmanager
def _mapper(n_workers: int):
    """An unordered map over a pool of `n_workers` spawned processes, or in-process for one."""
    if n_workers == 1:
        yield map
        return
    # workers ignore Ctrl-C: the main process stops them and prints the one line
    with multiprocessing.get_context("spawn").Pool(n_workers, initializer=signal.signal,
                                                   initargs=(signal.SIGINT, signal.SIG_IGN)) as pool:
        yield pool.imap_unordered
