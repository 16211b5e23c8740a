"""Stage 2 — anonymize: run an anonymisation system over one utterance manifest.

Output folder: `audio/<speaker>/<utt>.flac` and `manifest.jsonl` (same ids, new paths).
The folder is keyed by the system's config, the seed and the input manifest's content, so
another experiment needing the same anonymised set reuses it, and a changed parameter
never reuses stale audio. An interrupted run resumes: finished files are kept (each is
written atomically) and only the missing ones are processed.
"""
from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

from omegaconf import DictConfig
from tqdm import tqdm

from anonymizers.base import Anonymizer
from pipeline.asv.audio_cache import ordered_map
from pipeline.cache import Cache
from pipeline.config import instantiate, without
from pipeline.data.audio import audio_info, read_audio, write_audio
from pipeline.data.manifest import Utterance, file_digest, read_manifest, write_manifest

log = logging.getLogger(__name__)
VERSION = 1
LABEL_KEYS = ("name", "batch_seconds")  # change nothing in the output


def output_path(out: Path, utt: Utterance) -> Path:
    return out / "audio" / utt.speaker / f"{utt.id}.flac"


def run(system: DictConfig, manifest: Path, cache: Cache, *, seed: int, device: str,
        sample_rate: int = 16000) -> Path:
    """Anonymise the utterances of `manifest` with `system` (a conf/anonymizer node)."""
    anonymizer = instantiate(without(system, "name"), seed=seed, device=device)
    params = {"system": without(system, *LABEL_KEYS), "seed": seed, "sample_rate": sample_rate}
    inputs = {"manifest": file_digest(manifest), **anonymizer.fingerprint()}
    return cache.build("anonymize", params, inputs,
                       lambda out: _build(out, system.name, anonymizer, Path(manifest), sample_rate), VERSION)


def _batches(utts: list[Utterance], seconds: float) -> list[list[Utterance]]:
    """Length-sorted batches of at most `seconds` of audio (at least one utterance each)."""
    batches, current, total = [], [], 0.0
    for utt in sorted(utts, key=lambda u: (u.duration, u.id)):
        if current and total + utt.duration > seconds:
            batches.append(current)
            current, total = [], 0.0
        current.append(utt)
        total += utt.duration
    return batches + [current] if current else batches


def _written(out: Path, utt: Utterance) -> Utterance:
    """The manifest entry of an anonymised file: new path, its own rate and duration."""
    rate, frames, _ = audio_info(output_path(out, utt))
    return replace(utt, path=str(output_path(out, utt)), sample_rate=rate, duration=round(frames / rate, 4))


def _build(out: Path, name: str, anonymizer: Anonymizer, manifest: Path, sample_rate: int) -> dict:
    utts = read_manifest(manifest)
    todo = [u for u in utts if not output_path(out, u).is_file()]
    if todo:
        anonymizer.prepare(utts)
        log.info("anonymize: %s on %d/%d utterances of %s", name, len(todo), len(utts), manifest)
        batches = _batches(todo, anonymizer.batch_seconds)
        load = lambda batch: [read_audio(u.path, sample_rate) for u in batch]  # noqa: E731
        with tqdm(total=len(todo), desc=f"anonymize {name}", unit="utt") as bar:
            # the next batch is read while this one is anonymised
            for batch, waves in zip(batches, ordered_map(load, batches, workers=1, lookahead=2)):
                outputs = anonymizer(waves, [u.id for u in batch], [u.speaker for u in batch], sample_rate)
                for utt, wav in zip(batch, outputs):
                    write_audio(output_path(out, utt), wav.numpy(), sample_rate)
                bar.update(len(batch))
    anonymized = [_written(out, u) for u in utts]
    write_manifest(out / "manifest.jsonl", anonymized)
    return {"utterances": len(utts), "system": name}
