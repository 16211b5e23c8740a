"""Stage 1 — prepare: a corpus into manifests, VPC-style protocols and Kaldi data dirs.

Output folder:
    manifests/train.jsonl                      the attacker's training utterances
    manifests/<split>_enrolls.jsonl            enrolment utterances (both genders)
    manifests/<split>_trials_<g>.jsonl         trial utterances of gender g
    trials/<split>_trials_<g>.txt              `enroll_spk test_utt target|nontarget`
    kaldi/<tag>_<split>_{enrolls,trials_f,trials_m}/   the same as Kaldi data dirs
"""
from __future__ import annotations

import logging
from pathlib import Path

from pipeline.config import instantiate
from omegaconf import DictConfig

from pipeline.cache import Cache, content_hash, plain
from pipeline.data.kaldi import write_data_dir
from pipeline.data.manifest import GENDERS, Utterance, write_manifest, write_trials
from pipeline.data.protocol import make_protocol
from pipeline.errors import VpevalError

log = logging.getLogger(__name__)
VERSION = 1


def manifest_path(prepared: Path, name: str) -> Path:
    return Path(prepared) / "manifests" / f"{name}.jsonl"


def trials_path(prepared: Path, name: str) -> Path:
    return Path(prepared) / "trials" / f"{name}.txt"


def corpus_root(data: DictConfig) -> Path:
    """The corpus folder; the built-in corpus is generated on first use under a folder
    named after a hash of its settings, so changed settings never reuse an old corpus."""
    if data.get("generate") is None:
        if not Path(data.root).is_dir():
            raise VpevalError(f"{data.root}: corpus folder not found (set data.root=...)")
        return Path(data.root)
    from pipeline.data.synthetic import generate_corpus

    settings = plain(data.generate)
    root = Path(data.root) / content_hash(settings, length=12)
    return generate_corpus(root, sample_rate=data.sample_rate, **settings)


def fingerprint(root: Path) -> str:
    """A cheap identity of a corpus tree: every file's relative path, size and mtime."""
    entries = sorted((str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns)
                     for p in root.rglob("*") if p.is_file())
    return content_hash(entries)


def run(data: DictConfig, cache: Cache) -> Path:
    """Prepare `data` (a `conf/data/*.yaml` node); returns the stage folder."""
    root = corpus_root(data)
    params = {k: plain(data.get(k)) for k in ("reader", "subsets", "protocol", "tag", "sample_rate")}
    inputs = {"corpus": str(root), "fingerprint": fingerprint(root)}
    return cache.build("prepare", params, inputs, lambda out: _build(out, data, root), VERSION)


def _build(out: Path, data: DictConfig, root: Path) -> dict:
    reader = instantiate(data.reader, root=root)
    train = [u for subset in data.subsets.train for u in reader.utterances(subset)]
    write_manifest(manifest_path(out, "train"), train)
    train_speakers = {u.speaker for u in train}
    counts: dict = {"train": {"speakers": len(train_speakers), "utterances": len(train)}}
    for split in ("dev", "test"):
        utts = reader.utterances(data.subsets[split])
        overlap = train_speakers & {u.speaker for u in utts}
        if overlap:
            raise VpevalError(f"{root}: {split} speakers {sorted(overlap)[:5]} are also in the "
                              "attacker's training data; evaluation speakers must be unseen")
        protocol = make_protocol(utts, name=f"{root}/{data.subsets[split]}", **plain(data.protocol))
        _write_split(out, data.tag, split, protocol)
        counts[split] = protocol.counts()
        log.info("prepare: %s protocol %s", split, counts[split])
    return counts


def _write_split(out: Path, tag: str, split: str, protocol) -> None:
    enrolls: list[Utterance] = protocol.enrolls
    write_manifest(manifest_path(out, f"{split}_enrolls"), enrolls)
    write_data_dir(out / "kaldi" / f"{tag}_{split}_enrolls", enrolls, enrolls=True)
    for g in GENDERS:
        name = f"{split}_trials_{g}"
        write_manifest(manifest_path(out, name), protocol.trial_utts[g])
        write_trials(trials_path(out, name), protocol.trials[g])
        write_data_dir(out / "kaldi" / f"{tag}_{name}", protocol.trial_utts[g], trials=protocol.trials[g])
