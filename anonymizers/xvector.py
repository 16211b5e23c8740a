"""x-vector based anonymisation (VoicePrivacy B1 family) with neural resynthesis.

The pseudo-speaker of each source (an utterance, or a speaker at speaker level) comes from a
target-selection strategy of `anonymizers.targets` over a pool of target speakers:
farthest-N / average-N* (VPC 2020), CONST, PERM or RAND (maouche2020 §5.1), optionally
same-gender. Its log-F0 statistics are the mean of those of the pool speakers it was made
from. The voice converter (content + F0 + ECAPA embedding -> HiFi-GAN-NSF) is the one of
`anonymizers.vc`, trained by `vpeval train-vc vc`.

>>> XVector(vc_model="runs/vc/vc_model", strategy=partial(FarthestAverage, n_farthest=10, n_average=5),
...         level="utterance", seed=0, device="cpu")  # doctest: +SKIP
"""
from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from anonymizers.targets import Source, Strategy
from anonymizers.vc.system import SpeakerEmbeddingAnonymizer, SpeakerEmbeddingParameters
from pipeline.core.checks import Check, setting


def maps_speakers(strategy: Callable[..., Strategy]) -> bool:
    """Whether the strategy draws over the source speakers as a whole (PERM)."""
    return "source_speakers" in inspect.signature(strategy).parameters


@dataclass
class XVectorParameters(SpeakerEmbeddingParameters):
    """The x-vector system's parameters (conf/anonymizer/xvector.yaml), beyond the shared ones.

    strategy: builds the `Strategy` (from config: a `_partial_: true` node naming
        `anonymizers.targets.FarthestAverage`, `Constant`, `Permutation` or `Random`); a builder
        taking `source_speakers` (PERM) gets the {speaker: gender} of every source speaker of
        the corpus (`Anonymizer`'s `source_speakers`, the same for every list, so that a
        speaker keeps one pool speaker in every list and no two speakers share one), or of the
        manifest being anonymised when none are given.
    """

    strategy: Callable[..., Strategy] | None = setting(None, Check("a target-selection strategy (a `_partial_` node)",
                                                                   lambda v: callable(v) or isinstance(v, Mapping)))

    def fingerprint(self, source_speakers: Mapping[str, str] | None) -> dict[str, str]:
        found = super().fingerprint(source_speakers)
        if maps_speakers(self.strategy) and source_speakers is not None:
            listed = "".join(f"{s}\t{g}\n" for s, g in sorted((str(s), str(g)) for s, g in source_speakers.items()))
            found["source_speakers"] = hashlib.sha256(listed.encode()).hexdigest()
        return found


class XVector(SpeakerEmbeddingAnonymizer):
    """Speaker-embedding anonymisation with pool targets; parameters: `XVectorParameters`."""

    parameters = XVectorParameters

    def __init__(self, **settings):
        super().__init__(**settings)
        self.strategy_builder = self.settings.strategy
        self.strategy: Strategy | None = None
        self.maps_speakers = maps_speakers(self.strategy_builder)

    def check_targets(self, genders: dict[str, str]) -> None:
        speakers = genders if self.source_speakers is None else self.source_speakers
        self.strategy = self.strategy_builder(**({"source_speakers": speakers} if self.maps_speakers else {}))
        probe_embedding = self.target_pool.embeddings.mean(0)
        self.strategy.select(self.target_pool, [Source(f"check-{s}", s, g, probe_embedding)
                                                for s, g in sorted(genders.items())], seed=self.seed)

    def pseudo_speakers(self, sources: list[Source], drawn: list[dict]) -> tuple[np.ndarray, np.ndarray]:
        targets = self.strategy.select(self.target_pool, sources, seed=self.seed)
        for record, target in zip(drawn, targets):
            record["target_speakers"] = list(target.speakers)
        embeddings = np.stack([t.embedding for t in targets])
        return embeddings, np.array([self.pool.f0_of(t.speakers) for t in targets])
