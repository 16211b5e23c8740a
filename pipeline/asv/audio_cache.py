"""Audio decoded once into one int16 array + an index, memory-mapped by training.

A cache folder holds::

    audio.npy     int16, every utterance's samples back to back (16-bit PCM scale)
    offsets.npy   int64, N + 1 boundaries: utterance i is audio[offsets[i]:offsets[i + 1]]
    labels.npy    int64, N speaker labels (index into `speakers`, sorted speaker ids)
    cache.json    written last: the key of the inputs, sample rate, utterance ids, speakers

Every file is written atomically and `cache.json` last, so a folder whose `cache.json`
matches the inputs is complete. The key covers each utterance's id, speaker, path, file size
and modification time, and the sample rate; any change rebuilds the cache.

Audio is decoded in a thread pool (libsndfile and resampling release the GIL) and streamed to
disk in manifest order, so memory stays bounded whatever the corpus size. Before decoding, a
cache that would not fit the free space of its disk is refused (`check_free_space`).
"""
from __future__ import annotations

import hashlib
import io
import json
import math
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
from tqdm import tqdm

from pipeline.core.errors import VpevalError, byte_size
from pipeline.core.fileio import atomic_path, write_json, write_npy
from pipeline.data.audio import DURATION_TOLERANCE, read_audio
from pipeline.data.manifest import Utterance
from pipeline.runtime.ordered import ordered_map

INT16_SCALE = 32768.0
CACHE_VERSION = 1
SPACE_MARGIN = 0.05  # free space asked for beyond the estimate, as a fraction of it


def to_int16(wav: np.ndarray) -> np.ndarray:
    """Float audio in [-1, 1] -> int16 (exact for audio that was 16-bit PCM)."""
    return np.clip(np.round(wav * INT16_SCALE), -32768, 32767).astype(np.int16)


@dataclass(frozen=True)
class AudioCache:
    """A complete cache folder, memory-mapped."""

    folder: Path
    audio: np.ndarray
    offsets: np.ndarray
    labels: np.ndarray
    utterance_ids: list[str]
    speakers: list[str]
    sample_rate: int

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def __len__(self) -> int:
        return len(self.utterance_ids)

    def waveform(self, index: int) -> np.ndarray:
        """Utterance `index` as float32 in [-1, 1]."""
        return self.audio[self.offsets[index]:self.offsets[index + 1]].astype(np.float32) / INT16_SCALE


def cache_key(utterances: Sequence[Utterance], sample_rate: int) -> str:
    """sha256 over what the cache content depends on (ids, speakers, files, rate)."""
    digest = hashlib.sha256(f"v{CACHE_VERSION} {sample_rate}\n".encode())
    for utt in utterances:
        stat = os.stat(utt.path) if os.path.exists(utt.path) else None
        size, mtime = (stat.st_size, stat.st_mtime_ns) if stat else (-1, -1)
        digest.update(f"{utt.id}\t{utt.speaker}\t{utt.path}\t{size}\t{mtime}\n".encode())
    return digest.hexdigest()


def open_audio_cache(folder: str | Path) -> AudioCache:
    """Memory-map a complete cache folder (see `build_audio_cache`)."""
    folder = Path(folder)
    meta = json.loads((folder / "cache.json").read_text())
    return AudioCache(
        folder=folder,
        audio=np.load(folder / "audio.npy", mmap_mode="r"),
        offsets=np.load(folder / "offsets.npy"),
        labels=np.load(folder / "labels.npy"),
        utterance_ids=meta["utterances"],
        speakers=meta["speakers"],
        sample_rate=meta["sample_rate"],
    )


def cache_bytes(utterances: Sequence[Utterance], sample_rate: int) -> int:
    """The bytes a cache of `utterances` will take, from the manifest alone (nothing decoded).

    Every manifest line has a duration (`validate` checks it against the decoded file within
    DURATION_TOLERANCE); a manifest may not have been validated, so each utterance is counted
    that much longer, and the index (offsets, labels, ids) as 80 bytes per utterance.
    """
    samples = sum(math.ceil((utt.duration + DURATION_TOLERANCE) * sample_rate) for utt in utterances)
    return 2 * samples + 80 * len(utterances)


def check_free_space(folder: Path, needed: int, folder_key: str) -> None:
    """Refuse, in one line, a cache of `needed` bytes (plus SPACE_MARGIN) that the free space
    of `folder`'s disk cannot hold; `folder_key` is the setting that moves the cache."""
    existing = next(path for path in (folder, *folder.parents) if path.exists())
    needed = math.ceil(needed * (1 + SPACE_MARGIN))
    free = shutil.disk_usage(existing).free
    if needed > free:
        raise VpevalError(f"{folder}: the decoded audio cache needs {byte_size(needed)}, {byte_size(free)} free: "
                          f"free space or set {folder_key} to a folder on another disk")


def build_audio_cache(utterances: Sequence[Utterance], folder: str | Path, *, sample_rate: int = 16000,
                      workers: int = 4, progress: bool | None = None,
                      folder_key: str = "paths.cache") -> AudioCache:
    """Decode `utterances` into `folder` unless a complete cache of the same inputs is there;
    one that would not fit the disk is refused first, naming `folder_key` (what moves `folder`).

    >>> cache = build_audio_cache(utts, "run/audio_cache")  # doctest: +SKIP
    >>> cache.waveform(0).shape                              # doctest: +SKIP
    """
    folder = Path(folder)
    key = cache_key(utterances, sample_rate)
    marker = folder / "cache.json"
    if marker.is_file() and json.loads(marker.read_text()).get("key") == key:
        return open_audio_cache(folder)
    check_free_space(folder, cache_bytes(utterances, sample_rate), folder_key)
    decoded = ordered_map(lambda utt: to_int16(read_audio(utt.path, sample_rate)), utterances, workers=workers)
    return write_audio_cache(folder, key, utterances, tqdm(decoded, total=len(utterances), desc="caching audio",
                                                           unit="utt",
                                                           disable=None if progress is None else not progress),
                             sample_rate=sample_rate)


def write_audio_cache(folder: str | Path, key: str, utterances: Sequence[Utterance], samples: Iterable[np.ndarray],
                      *, sample_rate: int) -> AudioCache:
    """Stream the int16 `samples` of `utterances` (in order) into a cache folder marked with `key`."""
    folder = Path(folder)
    speakers = sorted({utt.speaker for utt in utterances})
    label_of = {speaker: label for label, speaker in enumerate(speakers)}
    offsets = np.zeros(len(utterances) + 1, dtype=np.int64)
    with atomic_path(folder / "audio.npy") as tmp, open(tmp, "wb") as out:
        header_size = _write_npy_header(out, 0)
        written = 0
        for waveform in samples:
            written += 1
            out.write(waveform.astype("<i2", copy=False).tobytes())
            offsets[written] = offsets[written - 1] + len(waveform)
        if written != len(utterances):
            raise ValueError(f"{written} waveforms for {len(utterances)} utterances")
        out.seek(0)
        if _write_npy_header(out, int(offsets[-1])) != header_size:
            raise RuntimeError("npy header size changed while streaming audio.npy")
    write_npy(folder / "offsets.npy", offsets)
    write_npy(folder / "labels.npy", np.array([label_of[u.speaker] for u in utterances], dtype=np.int64))
    write_json(folder / "cache.json", {"key": key, "version": CACHE_VERSION, "sample_rate": sample_rate,
                                       "samples": int(offsets[-1]), "speakers": speakers,
                                       "utterances": [utt.id for utt in utterances]})
    return open_audio_cache(folder)


def _write_npy_header(out, num_samples: int) -> int:
    """Write an int16 1-D .npy header at the current position; return its size in bytes."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<i2", "fortran_order": False, "shape": (num_samples,)})
    out.write(header.getvalue())
    return len(header.getvalue())


