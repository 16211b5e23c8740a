"""Speaker statistics for speaker-embedding anonymisation: the target-speaker pool.

`speaker_statistics` reads utterances once, in length-sorted batches, and gives every speaker
the mean of its utterances' L2-normalised ECAPA embeddings and the mean / standard deviation
of its log-F0 over all voiced frames. A `SpeakerPool` holds those rows for the pool corpus;
`load_or_build_pool` extracts them once and caches them in `<cache_dir>/pool-<key>.pt`, the
key being a hash of the pool utterances (ids, speakers, genders, file sizes and times), the
speaker encoder's weights and the F0 tracker settings, so a changed pool or encoder never
reuses stale rows.

Pool sources: a vpeval utterance manifest (`.jsonl`) or a LibriSpeech-layout folder
(`SPEAKERS.TXT`, `<subset>/<spk>/<chapter>/...`) with the subsets to read.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from anonymizers.targets import TargetPool
from pipeline.asv.embed import length_buckets, padded_batch
from pipeline.asv.model import SpeakerEncoder
from pipeline.core.devices import module_device
from pipeline.core.errors import VpevalError
from pipeline.data.librispeech import LibriSpeech
from pipeline.data.manifest import Utterance, read_manifest
from pipeline.runtime.checkpoint import load_checkpoint, save_checkpoint
from pipeline.runtime.ordered import ordered_map
from pipeline.signal.f0 import MIN_VOICED_FRAMES, STD_FLOOR, YinPitch

POOL_FORMAT = "vpeval-vc-pool-1"


@dataclass(frozen=True)
class SpeakerStatistics:
    """Per-speaker rows, speakers sorted by id."""

    speaker_ids: list[str]
    genders: list[str]
    embeddings: np.ndarray  # (S, D) mean of L2-normalised utterance embeddings
    f0_mean: np.ndarray     # (S,) log-F0 mean over voiced frames (NaN: too few voiced frames)
    f0_std: np.ndarray      # (S,) log-F0 standard deviation

    def row(self, speaker: str) -> int:
        return self.speaker_ids.index(speaker)


@dataclass(frozen=True)
class SpeakerPool(SpeakerStatistics):
    """Target speakers for anonymisation, with the key of the data they were extracted from."""

    key: str = ""

    def target_pool(self) -> TargetPool:
        return TargetPool(self.embeddings, self.speaker_ids, self.genders)

    def f0_of(self, speakers: Sequence[str]) -> tuple[float, float]:
        """Mean log-F0 mean and std of some pool speakers (those with statistics)."""
        rows = [self.row(s) for s in speakers]
        means, stds = self.f0_mean[rows], self.f0_std[rows]
        usable = np.isfinite(means)
        if not usable.any():
            return float("nan"), float("nan")
        return float(means[usable].mean()), float(stds[usable].mean())

    def f0_near(self, embedding: np.ndarray, neighbours: int) -> tuple[float, float]:
        """F0 statistics of the `neighbours` pool speakers closest (cosine) to `embedding`."""
        usable = np.flatnonzero(np.isfinite(self.f0_mean))
        unit = self.embeddings[usable] / np.linalg.norm(self.embeddings[usable], axis=1, keepdims=True).clip(1e-12)
        query = embedding / max(float(np.linalg.norm(embedding)), 1e-12)
        nearest = usable[np.argsort(-(unit @ query), kind="stable")[:neighbours]]
        return float(self.f0_mean[nearest].mean()), float(self.f0_std[nearest].mean())


def pool_utterances(source: str | Path, subsets: Sequence[str] | None = None) -> list[Utterance]:
    """The utterances of a pool source: a manifest file, or a LibriSpeech-layout folder's subsets."""
    source = Path(source)
    if source.is_file():
        return read_manifest(source)
    if not source.is_dir():
        raise VpevalError(f"anonymizer.pool.source={source}: neither a manifest file nor a corpus folder")
    if not subsets:
        raise VpevalError(f"anonymizer.pool.subsets: name the subsets of {source} to use as the pool")
    reader = LibriSpeech(source)
    return [utt for subset in subsets for utt in reader.utterances(subset)]


def utterances_key(utterances: Sequence[Utterance], *parts: str) -> str:
    """sha256 over the utterances' ids, speakers, genders, files (size, mtime) and `parts`."""
    sha = hashlib.sha256("\n".join(parts).encode())
    for utt in sorted(utterances, key=lambda u: u.id):
        stat = os.stat(utt.path) if os.path.exists(utt.path) else None
        size, mtime = (stat.st_size, stat.st_mtime_ns) if stat else (-1, -1)
        sha.update(f"{utt.id}\t{utt.speaker}\t{utt.gender}\t{utt.path}\t{size}\t{mtime}\n".encode())
    return sha.hexdigest()


def speaker_genders(utterances: Sequence[Utterance]) -> dict[str, str]:
    """{speaker: gender}; a speaker listed with two genders is an error."""
    genders: dict[str, str] = {}
    for utt in utterances:
        if genders.setdefault(utt.speaker, utt.gender) != utt.gender:
            raise VpevalError(f"speaker {utt.speaker!r} is listed as both {genders[utt.speaker]!r} and {utt.gender!r}")
    return genders


def speaker_statistics(utterances: Sequence[Utterance], encoder: SpeakerEncoder, pitch: YinPitch, *,
                       device: torch.device | None = None, batch_seconds: float = 120.0,
                       workers: int = 2) -> SpeakerStatistics:
    """Embeddings and log-F0 statistics of every speaker of `utterances` (one pass over the audio),
    on the encoder's device (another `device` is an error)."""
    if not utterances:
        raise VpevalError("speaker statistics: no utterances")
    device = module_device(encoder, device, what="the speaker encoder")
    genders = speaker_genders(utterances)
    speakers = sorted(genders)
    row = {s: i for i, s in enumerate(speakers)}
    sums = np.zeros((len(speakers), encoder.embedding_dim))
    log_f0 = np.zeros((len(speakers), 3))  # count, sum, sum of squares
    batches = length_buckets([u.duration for u in utterances], batch_seconds)

    def load(batch: list[int]) -> tuple[np.ndarray, np.ndarray]:
        return padded_batch([utterances[i] for i in batch], encoder.sample_rate, encoder.fbank.window_size)

    encoder.eval()
    with torch.inference_mode():
        for batch, (padded, lengths) in zip(batches, ordered_map(load, batches, workers=workers)):
            padded, lengths = torch.from_numpy(padded).to(device), torch.from_numpy(lengths).to(device)
            embeddings = F.normalize(encoder(padded, lengths / padded.shape[1]).float(), dim=-1).cpu().numpy()
            f0, voiced = pitch(padded, lengths)
            logs = torch.where(voiced, f0.clamp_min(1.0).log(), torch.zeros_like(f0)).double()
            stats = torch.stack([voiced.sum(1).double(), logs.sum(1), logs.pow(2).sum(1)], 1).cpu().numpy()
            for i, index in enumerate(batch):
                r = row[utterances[index].speaker]
                sums[r] += embeddings[i]
                log_f0[r] += stats[i]
    counts = np.bincount([row[u.speaker] for u in utterances], minlength=len(speakers))
    count, total, squares = log_f0.T
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(count >= MIN_VOICED_FRAMES, total / count, np.nan)
        variance = (squares - count * mean ** 2) / np.maximum(count - 1, 1)
        std = np.where(count >= MIN_VOICED_FRAMES, np.sqrt(np.maximum(variance, 0)).clip(STD_FLOOR), np.nan)
    return SpeakerStatistics(speakers, [genders[s] for s in speakers], (sums / counts[:, None]).astype(np.float32),
                             mean, std)


def save_pool(path: str | Path, pool: SpeakerPool) -> Path:
    return save_checkpoint(path, {
        "format": POOL_FORMAT, "key": pool.key, "speaker_ids": list(pool.speaker_ids), "genders": list(pool.genders),
        "embeddings": torch.from_numpy(np.asarray(pool.embeddings, dtype=np.float32)),
        "f0_mean": torch.from_numpy(np.asarray(pool.f0_mean, dtype=np.float64)),
        "f0_std": torch.from_numpy(np.asarray(pool.f0_std, dtype=np.float64))})


def load_pool(path: str | Path) -> SpeakerPool:
    state = load_checkpoint(path)
    if state.get("format") != POOL_FORMAT:
        raise VpevalError(f"{path}: not a target-speaker pool file (format {state.get('format')!r})")
    return SpeakerPool(list(state["speaker_ids"]), list(state["genders"]), state["embeddings"].numpy(),
                       state["f0_mean"].numpy(), state["f0_std"].numpy(), key=str(state["key"]))


def build_pool(utterances: Sequence[Utterance], encoder: SpeakerEncoder, pitch: YinPitch, key: str, *,
               device: torch.device | None = None, batch_seconds: float = 120.0) -> SpeakerPool:
    stats = speaker_statistics(utterances, encoder, pitch, device=device, batch_seconds=batch_seconds)
    return SpeakerPool(stats.speaker_ids, stats.genders, stats.embeddings, stats.f0_mean, stats.f0_std, key=key)


def pool_key(utterances: Sequence[Utterance], encoder_digest: str, pitch: YinPitch) -> str:
    """What a pool depends on: its utterances, the speaker encoder's weights, the pitch tracker."""
    return utterances_key(utterances, POOL_FORMAT, encoder_digest, repr(sorted(vars(pitch).items())))


def load_or_build_pool(utterances: Sequence[Utterance], encoder: SpeakerEncoder, encoder_digest: str,
                       pitch: YinPitch, cache_dir: str | Path, *, device: torch.device | None = None,
                       batch_seconds: float = 120.0) -> SpeakerPool:
    """The pool of `utterances`, from `cache_dir` when extracted before with the same inputs."""
    key = pool_key(utterances, encoder_digest, pitch)
    path = Path(cache_dir) / f"pool-{key[:24]}.pt"
    if path.is_file():
        pool = load_pool(path)
        if pool.key == key:
            return pool
    pool = build_pool(utterances, encoder, pitch, key, device=device, batch_seconds=batch_seconds)
    save_pool(path, pool)
    return pool
