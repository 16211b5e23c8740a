"""OHNN anonymisation (Miao et al. 2023; system C1 of panariello2025) with neural resynthesis.

The pseudo-speaker embedding is a learnt orthogonal Householder map of the source embedding
(`anonymizers.vc.householder`, trained by `vpeval train-vc ohnn`); its log-F0
statistics are those of the `f0_neighbours` pool speakers closest to it.

Because the map is deterministic, utterances of one speaker, whose embeddings are close,
land on nearly the same pseudo-speaker: at utterance level OHNN behaves like speaker-level
anonymisation. An attacker trained on such data learns the source -> pseudo-speaker mapping
rather than robust cues, which overestimates privacy; the C1-rand attacker (`ohnn_rand`:
the same voice converter with a random pool speaker per utterance) does not.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch

from anonymizers.targets import Source
from anonymizers.vc.checkpoints import OHNN_RECIPE, VC_RECIPE, WEIGHTS, load_module
from anonymizers.vc.householder import OHNN_FORMAT, HouseholderMap
from anonymizers.vc.system import SpeakerEmbeddingAnonymizer, SpeakerEmbeddingParameters
from pipeline.core.checks import COUNT, setting
from pipeline.core.devices import module_device
from pipeline.core.errors import VpevalError
from pipeline.data.manifest import file_digest


@dataclass
class OHNNParameters(SpeakerEmbeddingParameters):
    """OHNN's parameters (conf/anonymizer/ohnn.yaml), beyond the shared ones.

    ohnn_model: folder written by `vpeval train-vc ohnn`, trained on the embeddings of the
        voice converter's speaker encoder.
    f0_neighbours: pool speakers whose log-F0 statistics the pseudo-speaker takes (at most the
        pool's speakers with F0 statistics, checked when the pool is loaded).
    """

    ohnn_model: str | None = setting(None)
    f0_neighbours: int = setting(5, COUNT)

    model_folders: ClassVar[tuple[str, ...]] = ("vc_model", "ohnn_model")
    recipes: ClassVar[dict[str, str]] = {"vc_model": VC_RECIPE, "ohnn_model": OHNN_RECIPE}

    def fingerprint(self, source_speakers: Mapping[str, str] | None) -> dict[str, str]:
        return {**super().fingerprint(source_speakers), "ohnn_model": file_digest(Path(self.ohnn_model) / WEIGHTS)}


class OHNN(SpeakerEmbeddingAnonymizer):
    """Pseudo-speaker = OHNN(source embedding); parameters: `OHNNParameters`."""

    parameters = OHNNParameters

    def __init__(self, **settings):
        super().__init__(**settings)
        self.ohnn_dir = Path(self.settings.ohnn_model)
        self.ohnn, spec = load_module(self.ohnn_dir, OHNN_FORMAT, HouseholderMap, "OHNN", self.device)
        module_device(self.ohnn, self.device, what="the OHNN")
        if spec.get("speaker_encoder_sha256") != self.encoder_digest:
            raise VpevalError(f"{self.ohnn_dir}: trained on another speaker encoder's embeddings than "
                              f"{self.model_dir}'s (speaker_encoder_sha256 differs); retrain it with {OHNN_RECIPE}")
        usable = int(np.isfinite(self.pool.f0_mean).sum())
        self.f0_neighbours = int(self.settings.f0_neighbours)
        if self.f0_neighbours > usable:
            raise VpevalError(f"anonymizer.f0_neighbours={self.f0_neighbours}: the pool has {usable} speakers with F0 "
                              f"statistics; f0_neighbours can be at most {usable}")

    def pseudo_speakers(self, sources: list[Source], drawn: list[dict]) -> tuple[np.ndarray, np.ndarray]:
        embeddings = torch.as_tensor(np.stack([s.embedding for s in sources]), dtype=torch.float32, device=self.device)
        mapped = self.ohnn(embeddings).cpu().numpy()
        return mapped, np.array([self.pool.f0_near(e, self.f0_neighbours) for e in mapped])
