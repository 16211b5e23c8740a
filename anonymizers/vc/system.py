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
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from anonymizers.base import Anonymizer, Batch
from anonymizers.targets import Source
from anonymizers.vc.checkpoints import VC_RECIPE, WEIGHTS, require_folder
from anonymizers.vc.model import load_voice_converter
from pipeline.runtime.seeds import stable_seed
from pipeline.signal.f0 import LogF0Stats, log_f0_stats, map_f0
from anonymizers.vc.pool import (
    SpeakerPool,
    SpeakerStatistics,
    load_or_build_pool,
    load_pool,
    pool_utterances,
    speaker_genders,
    speaker_statistics,
)
from pipeline.core.devices import module_device
from pipeline.core.errors import VpevalError
from pipeline.data.manifest import Utterance, file_digest
from pipeline.runtime.precision import autocast_dtype

RECIPE_POOL = "pool.pt"


class SpeakerEmbeddingAnonymizer(Anonymizer):
    """Base of the speaker-embedding systems; subclasses implement `pseudo_speakers`.

    Args:
        vc_model: folder of a trained voice converter (`vpeval train-vc vc`).
        pool: {source, subsets, cache_dir}; source null: the pool stored with the model.
        precision: fp32 | bf16 | fp16 (autocast on CUDA; CPU runs fp32).
        statistics_batch_seconds: audio per batch when computing speaker statistics.
    """

    model_folders = ("vc_model",)

    def __init__(self, *, vc_model: str | None = None, pool: Mapping | None = None, precision: str = "fp32",
                 statistics_batch_seconds: float = 120.0, **common):
        super().__init__(**common)
        self.model_dir = require_folder(vc_model, "anonymizer.vc_model", VC_RECIPE)
        self.model, self.encoder, spec = load_voice_converter(self.model_dir, self.device)
        for module, what in ((self.model, "the voice converter"), (self.encoder, "its speaker encoder")):
            module_device(module, self.device, what=what)
        self.sample_rate = self.model.sample_rate
        self.encoder_digest = str(spec["speaker_encoder_sha256"])
        self.amp_dtype = autocast_dtype(precision, self.device, config_key="anonymizer.precision")
        self.statistics_batch_seconds = float(statistics_batch_seconds)
        self.pool = self._load_pool(dict(pool or {}))
        self.target_pool = self.pool.target_pool()
        self.genders: dict[str, str] | None = None
        self.speaker_stats: SpeakerStatistics | None = None

    def _load_pool(self, pool: dict) -> SpeakerPool:
        if pool.get("source") is None:
            path = self.model_dir / RECIPE_POOL
            if not path.is_file():
                raise VpevalError(f"{path}: the model folder holds no target pool; set anonymizer.pool.source "
                                  f"to a manifest or a LibriSpeech-layout folder")
            return load_pool(path)
        utterances = pool_utterances(pool["source"], pool.get("subsets"))
        cache_dir = Path(pool.get("cache_dir") or self.model_dir / "pools")
        return load_or_build_pool(utterances, self.encoder, self.encoder_digest, self.model.pitch, cache_dir,
                                  device=self.device, batch_seconds=self.statistics_batch_seconds)

    def fingerprint(self) -> dict[str, str]:
        return {"vc_model": file_digest(self.model_dir / WEIGHTS), "speaker_encoder": self.encoder_digest,
                "pool": self.pool.key}

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
