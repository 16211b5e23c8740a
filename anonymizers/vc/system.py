"""What the speaker-embedding anonymisers (x-vector, OHNN, OHNN-rand) share.

Every utterance is analysed by a trained `VoiceConverter` (content, F0, voicing) and embedded
by the ECAPA-TDNN it was trained with; a subclass chooses the pseudo-speaker (embedding and
log-F0 statistics) of each source; the utterance's F0 is moved from the source's log-F0
statistics to the pseudo-speaker's, and the vocoder resynthesises it with the pseudo-speaker's
embedding.

The source is the utterance at utterance level, the speaker at speaker level. At speaker
level the source embedding and F0 statistics are those of the whole speaker (all of its
utterances in the manifest), computed in `prepare`, which the anonymize stage calls once
before any batch, so targets never depend on batching. The source speakers' genders also
come from `prepare` (same-gender target selection needs them).

Config keys (see conf/anonymizer/xvector.yaml): `vc_model` (a folder written by the training
recipe), `pool` (`source`: null for the pool stored with the model, or a manifest /
LibriSpeech-layout folder with `subsets`; `cache_dir` for extracted pools), `precision`.
"""
from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch
import torch.nn.functional as F

from anonymizers.base import Anonymizer, Batch, Parameters
from anonymizers.targets import Source
from anonymizers.vc.checkpoints import VC_RECIPE, WEIGHTS, read_spec, require_folder
from anonymizers.vc.model import MODEL_FORMAT, load_voice_converter, model_pitch
from pipeline.runtime.seeds import stable_seed
from pipeline.signal.f0 import LogF0Stats, log_f0_stats, map_f0
from anonymizers.vc.pool import (
    SpeakerPool,
    SpeakerStatistics,
    load_or_build_pool,
    load_pool,
    pool_key,
    pool_utterances,
    speaker_genders,
    speaker_statistics,
)
from pipeline.core.checks import PRECISION, SECONDS, Check, setting
from pipeline.core.devices import module_device
from pipeline.core.errors import VpevalError
from pipeline.data.manifest import Utterance, file_digest
from pipeline.runtime.precision import autocast_dtype

RECIPE_POOL = "pool.pt"


POOL_KEYS = ("source", "subsets", "cache_dir")
POOL = Check(f"a mapping of {', '.join(POOL_KEYS)} (subsets: null or a list of names)",
             lambda v: isinstance(v, Mapping) and set(v) <= set(POOL_KEYS)
             and (v.get("subsets") is None or (isinstance(v["subsets"], Sequence) and not isinstance(v["subsets"], str)
                                               and all(isinstance(x, str) for x in v["subsets"]))))


@dataclass
class SpeakerEmbeddingParameters(Parameters):
    """What the speaker-embedding systems share (conf/anonymizer/xvector.yaml).

    vc_model: folder of a trained voice converter (`vpeval train-vc vc`).
    pool: {source, subsets, cache_dir}; source null: the pool stored with the model.
    precision: fp32 | bf16 | fp16 (autocast on CUDA; CPU runs fp32).
    statistics_batch_seconds: audio per batch when computing speaker statistics.
    """

    vc_model: str | None = setting(None)
    pool: dict = setting({}, POOL)
    precision: str = setting("fp32", PRECISION)
    statistics_batch_seconds: float = setting(120.0, SECONDS)

    model_folders: ClassVar[tuple[str, ...]] = ("vc_model",)
    recipes: ClassVar[dict[str, str]] = {"vc_model": VC_RECIPE}  # what trains each of `model_folders`

    def file_problems(self, key: str = "anonymizer") -> list[str]:
        found = []
        for name in self.model_folders:
            try:
                require_folder(getattr(self, name), f"{key}.{name}", self.recipes[name])
            except VpevalError as error:
                found.append(str(error))
        return found

    def fingerprint(self, source_speakers: Mapping[str, str] | None) -> dict[str, str]:
        """The voice converter's weights, its speaker encoder's and the target pool's key, read
        from the model folder and the pool's source (no model is built)."""
        model_dir = Path(self.vc_model)
        spec = read_spec(model_dir, MODEL_FORMAT)
        if "speaker_encoder_sha256" not in spec:
            raise VpevalError(f"{model_dir / 'model.json'}: no speaker_encoder_sha256 (not written by "
                              f"`vpeval train-vc vc`?); retrain it with {VC_RECIPE}")
        encoder_digest = str(spec["speaker_encoder_sha256"])
        pool = dict(self.pool or {})
        if pool.get("source") is None:
            key = load_pool(stored_pool(model_dir)).key
        else:
            key = pool_key(pool_utterances(pool["source"], pool.get("subsets")), encoder_digest,
                           model_pitch(spec["model"]))
        return {"vc_model": file_digest(model_dir / WEIGHTS), "speaker_encoder": encoder_digest, "pool": key}


def stored_pool(model_dir: Path) -> Path:
    """The target pool stored with a voice converter (`pool.source: null`)."""
    path = model_dir / RECIPE_POOL
    if not path.is_file():
        raise VpevalError(f"{path}: the model folder holds no target pool; set anonymizer.pool.source "
                          f"to a manifest or a LibriSpeech-layout folder")
    return path


class SpeakerEmbeddingAnonymizer(Anonymizer):
    """Base of the speaker-embedding systems; subclasses implement `pseudo_speakers`. Parameters:
    `SpeakerEmbeddingParameters`, with `seed`, `device` (see `Anonymizer`)."""

    parameters = SpeakerEmbeddingParameters
    on_ranks = True  # the copies share only read-only files

    def __init__(self, **settings):
        super().__init__(**settings)
        self.model_dir = Path(self.settings.vc_model)
        self.model, self.encoder, spec = load_voice_converter(self.model_dir, self.device)
        for module, what in ((self.model, "the voice converter"), (self.encoder, "its speaker encoder")):
            module_device(module, self.device, what=what)
        self.sample_rate = self.model.sample_rate
        self.encoder_digest = str(spec["speaker_encoder_sha256"])
        self.amp_dtype = autocast_dtype(self.settings.precision, self.device, config_key="anonymizer.precision")
        self.statistics_batch_seconds = float(self.settings.statistics_batch_seconds)
        self.pool = self._load_pool(dict(self.settings.pool or {}))
        self.target_pool = self.pool.target_pool()
        self.genders: dict[str, str] | None = None
        self.speaker_stats: SpeakerStatistics | None = None

    def _load_pool(self, pool: dict) -> SpeakerPool:
        if pool.get("source") is None:
            return load_pool(stored_pool(self.model_dir))
        utterances = pool_utterances(pool["source"], pool.get("subsets"))
        cache_dir = Path(pool.get("cache_dir") or self.model_dir / "pools")
        return load_or_build_pool(utterances, self.encoder, self.encoder_digest, self.model.pitch, cache_dir,
                                  device=self.device, batch_seconds=self.statistics_batch_seconds)

    def prepare(self, utterances: Sequence[Utterance]) -> None:
        genders = speaker_genders(utterances)
        self.check_targets(genders)
        if self.level == "speaker":
            self.speaker_stats = speaker_statistics(utterances, self.encoder, self.model.pitch, device=self.device,
                                                    batch_seconds=self.statistics_batch_seconds)
        self.genders = genders

    def check_targets(self, genders: dict[str, str]) -> None:
        """Stop before any audio work when the pool cannot serve the source speakers
        ({speaker: gender}), e.g. too few pool speakers for N."""

    @abstractmethod
    def pseudo_speakers(self, sources: list[Source], drawn: list[dict]) -> tuple[np.ndarray, np.ndarray]:
        """(B, D) pseudo-speaker embeddings and (B, 2) log-F0 (mean, std), one per source;
        what was drawn for source i goes into `drawn[i]` (see `Batch.drawn`)."""

    def anonymize(self, batch: Batch) -> list[torch.Tensor]:
        if self.genders is None:
            raise VpevalError(f"{type(self).__name__}: call prepare(utterances) with the manifest first "
                              f"(the anonymize stage does)")
        unknown = sorted({s for s in batch.speaker_ids if s not in self.genders})
        if unknown:
            raise VpevalError(f"{type(self).__name__}: speaker(s) {unknown[:5]} were not among the prepared utterances")
        hop = self.model.hop_length
        lengths = torch.tensor([len(w) for w in batch.waves], device=self.device)
        padded = torch.zeros(len(batch.waves), int(-(-int(lengths.max()) // hop) * hop), device=self.device)
        for i, wave in enumerate(batch.waves):
            padded[i, :len(wave)] = wave
        noise = torch.stack([torch.randn(padded.shape[1], generator=torch.Generator().manual_seed(
            stable_seed(self.seed, f"noise:{utt}"))) for utt in batch.utt_ids]).to(self.device)
        with torch.inference_mode(), torch.autocast(self.device.type, dtype=self.amp_dtype,
                                                    enabled=self.amp_dtype is not None):
            analysis = self.model.analyse(padded, lengths)
            embeddings, source_f0 = self.source_statistics(batch, padded, lengths, analysis)
            sources = [Source(key, spk, self.genders[spk], emb)
                       for key, spk, emb in zip(batch.keys, batch.speaker_ids, embeddings)]
            target_embeddings, target_f0 = self.pseudo_speakers(sources, batch.drawn)
            target_f0 = torch.as_tensor(target_f0, dtype=torch.float32, device=self.device)
            f0 = map_f0(analysis.f0, analysis.voiced, source_f0, LogF0Stats(target_f0[:, 0], target_f0[:, 1]))
            speaker = torch.as_tensor(np.asarray(target_embeddings), dtype=torch.float32, device=self.device)
            output = self.model.synthesise(analysis.content.features, f0, analysis.voiced, speaker,
                                           analysis.frames, noise)
        return [output[i, :n].float() for i, n in enumerate(lengths.tolist())]

    def source_statistics(self, batch: Batch, padded: torch.Tensor, lengths: torch.Tensor,
                          analysis) -> tuple[np.ndarray, LogF0Stats]:
        """Source embeddings (B, D) and log-F0 statistics: the utterance's, or its speaker's."""
        if self.level == "utterance":
            embeddings = F.normalize(self.encoder(padded, lengths / padded.shape[1]).float(), dim=-1)
            return embeddings.cpu().numpy(), log_f0_stats(analysis.f0, analysis.voiced)
        rows = [self.speaker_stats.row(s) for s in batch.speaker_ids]
        stats = self.speaker_stats
        to_tensor = lambda values: torch.as_tensor(values[rows], dtype=torch.float32, device=self.device)  # noqa: E731
        return stats.embeddings[rows], LogF0Stats(to_tensor(stats.f0_mean), to_tensor(stats.f0_std))
