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

import numpy as np
import torch

from anonymizers.targets import Source
from anonymizers.vc.checkpoints import OHNN_RECIPE, WEIGHTS, load_module, require_folder
from anonymizers.vc.householder import OHNN_FORMAT, HouseholderMap
from anonymizers.vc.system import SpeakerEmbeddingAnonymizer
from pipeline.core.devices import module_device
from pipeline.core.errors import VpevalError
from pipeline.data.manifest import file_digest


class OHNN(SpeakerEmbeddingAnonymizer):
    """Pseudo-speaker = OHNN(source embedding).

    Args:
        ohnn_model: folder written by `vpeval train-vc ohnn`, trained on the
            embeddings of the voice converter's speaker encoder.
        f0_neighbours: pool speakers whose log-F0 statistics the pseudo-speaker takes.
        **common: see `SpeakerEmbeddingAnonymizer` and `Anonymizer`.
    """

    model_folders = ("vc_model", "ohnn_model")

    def __init__(self, *, ohnn_model: str | None = None, f0_neighbours: int = 5, **common):
        super().__init__(**common)
        self.ohnn_dir = require_folder(ohnn_model, "anonymizer.ohnn_model", OHNN_RECIPE)
        self.ohnn, spec = load_module(self.ohnn_dir, OHNN_FORMAT, HouseholderMap, "OHNN", self.device)
        module_device(self.ohnn, self.device, what="the OHNN")
        if spec.get("speaker_encoder_sha256") != self.encoder_digest:
            raise VpevalError(f"{self.ohnn_dir}: trained on another speaker encoder's embeddings than "
                              f"{self.model_dir}'s (speaker_encoder_sha256 differs); retrain it with {OHNN_RECIPE}")
        usable = int(np.isfinite(self.pool.f0_mean).sum())
        if not 1 <= int(f0_neighbours) <= usable:
            raise VpevalError(f"anonymizer.f0_neighbours={f0_neighbours}: the pool has {usable} speakers with F0 "
                              f"statistics; need 1 <= f0_neighbours <= {usable}")
        self.f0_neighbours = int(f0_neighbours)

    def fingerprint(self) -> dict[str, str]:
        return {**super().fingerprint(), "ohnn_model": file_digest(self.ohnn_dir / WEIGHTS)}

    def pseudo_speakers(self, sources: list[Source], drawn: list[dict]) -> tuple[np.ndarray, np.ndarray]:
        embeddings = torch.as_tensor(np.stack([s.embedding for s in sources]), dtype=torch.float32, device=self.device)
        mapped = self.ohnn(embeddings).cpu().numpy()
        return mapped, np.array([self.pool.f0_near(e, self.f0_neighbours) for e in mapped])
