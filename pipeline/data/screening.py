"""Screening listed utterances before any long work: headers, bad input, conforming audio.

Headers are read in a thread pool (cheap, I/O bound); full decodes run in a process pool,
only where they are needed: converting audio that is not mono at the configured rate into
FLAC copies, and checking that files decode (validation, or preparation with
`data.skip_bad`). Every pool shows a progress bar.

>>> screened = screen(entries, problems, sample_rate=16000, convert=True)      # doctest: +SKIP
>>> utts = [u for u in screened.utterances if u is not None]                  # doctest: +SKIP
>>> ready = conform(utts, out / "audio", problems, sample_rate=16000,
...                 multichannel=screened.multichannel)                        # doctest: +SKIP

Worker processes re-import the main module, as with any `spawn`/`forkserver` pool: a
script that prepares or validates needs the usual `if __name__ == "__main__":` guard.
"""
from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Sequence, TypeVar

from tqdm import tqdm

from pipeline.core.errors import VpevalError
from pipeline.data.audio import audio_info, convert_audio, decode_problem
from pipeline.data.corpus import Entry, Problems
from pipeline.data.manifest import Utterance, audio_stamp
from pipeline.runtime.cpus import usable_cpus

T = TypeVar("T")
R = TypeVar("R")
HEADER_THREADS = 8


def default_workers(workers: int | None) -> int:
    """`workers`, or one per usable CPU (pipeline.runtime.cpus: affinity, cgroup quota, Slurm)."""
    return max(1, workers or usable_cpus()[0])


def _single_threaded() -> None:
    """Process-pool initializer: one torch thread per worker, as the pool is the parallelism."""
    import torch

    torch.set_num_threads(1)


def thread_map(fn: Callable[[T], R], items: Sequence[T], desc: str, threads: int = HEADER_THREADS,
               chunk: int = 64) -> list[R]:
    """`fn` over `items` in threads, `chunk` items per task (a task per item costs more than a header read)."""
    chunks = [items[i:i + chunk] for i in range(0, len(items), chunk)]
    results: list[R] = []
    with ThreadPoolExecutor(threads) as pool, tqdm(total=len(items), desc=desc, unit="file", leave=False) as bar:
        for done in pool.map(lambda part: [fn(item) for item in part], chunks):
            results += done
            bar.update(len(done))
    return results


def process_map(fn: Callable[[T], R], items: Sequence[T], desc: str, workers: int | None = None) -> list[R]:
    """`fn` over `items` in worker processes, forked from a clean server process that has
    imported the audio libraries once (safe even when the caller has used torch threads)."""
    if not items:
        return []
    workers = default_workers(workers)
    chunk = max(1, min(256, len(items) // (workers * 16)))
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["pipeline.data.audio", "torch", "torchaudio.transforms"])
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_single_threaded) as pool:
        return list(tqdm(pool.map(fn, items, chunksize=chunk), total=len(items), desc=desc, unit="file",
                         leave=False))


def probe(entry: Entry) -> tuple[int, int, int] | str:
    """(rate, frames, channels) from the header, or what is wrong."""
    if entry.problem:
        return entry.problem
    path = Path(entry.path)
    if not path.is_file():
        return f"audio file {path.name} is missing (looked in {path.parent})"
    try:
        return audio_info(path)
    except VpevalError as error:
        return str(error)


def _stamped_probe(entry: Entry) -> tuple[tuple[int, int, int] | str, str]:
    """`probe` and, for a readable file, its `audio_stamp` (in the same thread)."""
    header = probe(entry)
    return header, "" if isinstance(header, str) else audio_stamp(entry.path)


@dataclass
class Screened:
    """Per entry its utterance (duration and rate from the header), or None where it is bad."""

    utterances: list[Utterance | None]
    multichannel: set[str] = field(default_factory=set)  # ids of audio with more than one channel


def screen(entries: list[Entry], problems: Problems, *, sample_rate: int, convert: bool,
           desc: str = "reading headers") -> Screened:
    """Read every entry's header (in threads) and name what is wrong.

    Bad: a problem the reader found, a missing or unreadable file, empty audio, a duplicate
    id (the later entries), and, unless `convert`, audio that is not mono at `sample_rate`.
    Each is recorded in `problems` with the entry's `where`. A good utterance carries its
    file's `source_stamp`.
    """
    first_seen: dict[str, Entry] = {}
    duplicate = set()
    for i, entry in enumerate(entries):
        if entry.id in first_seen:
            duplicate.add(i)
            first = first_seen[entry.id].where
            problems.utterance(entry.where, f"duplicate utterance id {entry.id!r} (first at {first})")
        else:
            first_seen[entry.id] = entry
    headers = thread_map(_stamped_probe, entries, desc)
    screened = Screened([])
    for i, (entry, (header, stamp)) in enumerate(zip(entries, headers)):
        problem = header if isinstance(header, str) else _header_problem(entry, *header, sample_rate, convert)
        if i in duplicate or problem:
            if i not in duplicate:
                problems.utterance(entry.where, problem)
            screened.utterances.append(None)
            continue
        rate, frames, channels = header
        screened.utterances.append(replace(entry.utterance(frames / rate, rate), source_stamp=stamp))
        if channels > 1:
            screened.multichannel.add(entry.id)
    return screened


def _header_problem(entry: Entry, rate: int, frames: int, channels: int, sample_rate: int,
                    convert: bool) -> str | None:
    if frames == 0:
        return f"{entry.path} is empty (0 samples)"
    if convert:
        return None
    if channels != 1:
        return f"{entry.path} has {channels} channels, expected mono (data.convert_audio=true mixes it down)"
    if rate != sample_rate:
        return f"{entry.path} is {rate} Hz, expected {sample_rate} Hz (data.convert_audio=true resamples it)"
    return None


def _kept_copy(target: str, sample_rate: int) -> int | None:
    """Frames of a conforming copy an earlier run left (writes are atomic, so it is whole)."""
    try:
        rate, frames, channels = audio_info(target)
    except VpevalError:
        return None
    return frames if rate == sample_rate and channels == 1 and frames > 0 else None


def _convert_task(job: tuple[str, str, int]) -> int | str:
    """Frames of the conforming copy (kept from an earlier run, or made now), or what failed."""
    source, target, sample_rate = job
    kept = _kept_copy(target, sample_rate) if Path(target).is_file() else None
    if kept is not None:
        return kept
    try:
        return convert_audio(source, target, sample_rate)
    except VpevalError as error:
        return str(error)


def decode_check(job: tuple[str, int, float]) -> str | None:
    """`decode_problem(path, sample_rate, duration)` for a process pool."""
    return decode_problem(*job)


def copy_path(folder: Path, utt: Utterance) -> Path:
    return folder / utt.speaker / f"{utt.id}.flac"


def conform(utterances: list[Utterance], folder: Path, problems: Problems, *, sample_rate: int,
            multichannel: set[str] = frozenset(), check_decodes: bool = False,
            workers: int | None = None) -> dict[str, Utterance]:
    """Utterances ready to use, by id: mono audio at `sample_rate`, referenced in place when it
    already is, else converted once into `folder/<speaker>/<id>.flac` (existing copies kept).
    With `check_decodes` the in-place files are fully decoded too. Failures go to `problems`.
    """
    in_place = [u for u in utterances if u.sample_rate == sample_rate and u.id not in multichannel]
    to_convert = [u for u in utterances if u.sample_rate != sample_rate or u.id in multichannel]
    ready: dict[str, Utterance] = {}
    if check_decodes:
        found = process_map(decode_check, [(u.path, u.sample_rate, u.duration) for u in in_place], "decoding", workers)
    else:
        found = [None] * len(in_place)
    for utt, problem in zip(in_place, found):
        if problem:
            problems.utterance(f"utterance {utt.id}", problem)
        else:
            ready[utt.id] = utt
    jobs = [(u.path, str(copy_path(folder, u)), sample_rate) for u in to_convert]
    for utt, job, frames in zip(to_convert, jobs, process_map(_convert_task, jobs, "converting audio", workers)):
        if isinstance(frames, str):
            problems.utterance(f"utterance {utt.id}", frames)
        else:
            ready[utt.id] = replace(utt, path=job[1], sample_rate=sample_rate,
                                    duration=round(frames / sample_rate, 4))
    return ready

