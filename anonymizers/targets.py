"""Target-speaker selection for speaker-embedding anonymisers (x-vector, OHNN, ...).

A `TargetPool` holds one embedding per target speaker (with ids and genders). A strategy
gives every source — an utterance at utterance level, a speaker at speaker level — a target
embedding:

- `Constant` (CONST, maouche2020 §5.1): every source gets the same pool speaker;
- `Permutation` (PERM): each source speaker gets its own pool speaker, no two the same;
- `Random` (RAND): each source gets a pool speaker drawn at random;
- `FarthestAverage` (VPC 2020): the `n_farthest` pool speakers farthest from the source's
  embedding (cosine distance by default; VPC used PLDA), then the mean of `n_average` of
  them drawn at random (N = 200, N* = 100).

With `same_gender` the draw is restricted to pool speakers of the source's gender. RAND and
farthest-average draw per source key (its utterance id, or `<list>/<speaker>` at speaker
level), seeded by the experiment seed and the key, CONST once per gender, so a source's
target never depends on which other sources are in the batch. PERM is keyed by the speaker,
not the list: its permutation is drawn over every source speaker of the corpus, which the
caller gives once and must give the same for every list, so that a speaker keeps its pool
speaker in every list and no two speakers ever share one.

>>> pool = TargetPool(np.eye(3), ["t1", "t2", "t3"], ["f", "m", "f"])
>>> [t.speakers for t in Random(same_gender=True).select(pool, [Source("u1", "s1", "f")], seed=0)]
[('t1',)]
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from pipeline.core.errors import VpevalError
from pipeline.runtime.seeds import stable_seed

GENDERS = ("f", "m")


@dataclass(frozen=True)
class TargetPool:
    """Target speakers: `embeddings[i]` (one row per speaker) of `speaker_ids[i]`, `genders[i]`."""

    embeddings: np.ndarray
    speaker_ids: Sequence[str]
    genders: Sequence[str]

    def __post_init__(self):
        embeddings = np.asarray(self.embeddings, dtype=np.float64)
        if embeddings.ndim != 2 or not (len(embeddings) == len(self.speaker_ids) == len(self.genders)):
            raise VpevalError(f"target pool: need one embedding row, id and gender per speaker, got {embeddings.shape} "
                              f"embeddings, {len(self.speaker_ids)} ids, {len(self.genders)} genders")
        if len(set(self.speaker_ids)) != len(self.speaker_ids):
            raise VpevalError("target pool: speaker ids are not unique")
        bad = sorted(set(self.genders) - set(GENDERS))
        if bad:
            raise VpevalError(f"target pool: genders must be 'f' or 'm', got {bad}")
        object.__setattr__(self, "embeddings", embeddings)
        object.__setattr__(self, "speaker_ids", tuple(self.speaker_ids))
        object.__setattr__(self, "genders", tuple(self.genders))

    @classmethod
    def from_utterances(cls, embeddings, utterance_speakers: Sequence[str], speaker_genders: dict[str, str]) -> "TargetPool":
        """One row per speaker: the mean of its utterances' embeddings, speakers sorted by id."""
        embeddings = np.asarray(embeddings, dtype=np.float64)
        speakers = sorted(set(utterance_speakers))
        owner = np.asarray(utterance_speakers)
        missing = [s for s in speakers if s not in speaker_genders]
        if missing:
            raise VpevalError(f"target pool: no gender for speaker(s) {missing[:5]}")
        means = np.stack([embeddings[owner == s].mean(0) for s in speakers])
        return cls(means, speakers, [speaker_genders[s] for s in speakers])

    def candidates(self, gender: str | None) -> np.ndarray:
        """Row indices of the speakers of `gender` (all speakers for None)."""
        return np.array([i for i, g in enumerate(self.genders) if gender is None or g == gender], dtype=int)


@dataclass(frozen=True)
class Source:
    """What a strategy knows of a source: its key (utterance id at utterance level,
    `<list>/<speaker>` at speaker level), speaker, gender and, for distance-based strategies,
    its embedding."""

    key: str
    speaker: str
    gender: str
    embedding: np.ndarray | None = None


@dataclass(frozen=True)
class Target:
    """A target embedding and the pool speakers it was made from."""

    embedding: np.ndarray
    speakers: tuple[str, ...]


def cosine_distance(source: np.ndarray, pool: np.ndarray) -> np.ndarray:
    """1 - cosine similarity between one embedding and each pool row."""
    source = source / max(np.linalg.norm(source), 1e-12)
    pool = pool / np.maximum(np.linalg.norm(pool, axis=1, keepdims=True), 1e-12)
    return 1.0 - pool @ source


class Strategy(ABC):
    """A target-selection strategy. `same_gender`: draw only among pool speakers of the
    source's gender."""

    label = "strategy"

    def __init__(self, same_gender: bool = True):
        self.same_gender = bool(same_gender)

    def select(self, pool: TargetPool, sources: Sequence[Source], seed: int) -> list[Target]:
        """One target per source, in order."""
        return [self.target(pool, source, seed) for source in sources]

    def eligible(self, pool: TargetPool, gender: str, needed: int) -> np.ndarray:
        """Pool rows a source of `gender` may draw from; fewer than `needed` is a clear error."""
        if self.same_gender and gender not in GENDERS:
            raise VpevalError(f"{self.label}: source gender {gender!r}, expected 'f' or 'm'")
        rows = pool.candidates(gender if self.same_gender else None)
        if len(rows) < needed:
            which = f"{gender} speakers" if self.same_gender else "speakers"
            raise VpevalError(f"{self.label}: the target pool has {len(rows)} {which}, fewer than the {needed} needed")
        return rows

    def rng(self, seed: int, key: str) -> np.random.Generator:
        return np.random.default_rng(stable_seed(seed, f"{self.label}:{key}"))

    @abstractmethod
    def target(self, pool: TargetPool, source: Source, seed: int) -> Target:
        """The target of one source."""


def single(pool: TargetPool, row: int) -> Target:
    """The target made of pool speaker `row` alone."""
    return Target(pool.embeddings[row].copy(), (pool.speaker_ids[row],))


class Constant(Strategy):
    """CONST: one pool speaker for every source (one per gender with `same_gender`)."""

    label = "const"

    def target(self, pool, source, seed):
        rows = self.eligible(pool, source.gender, 1)
        group = source.gender if self.same_gender else "all"
        return single(pool, int(self.rng(seed, group).choice(rows)))


class Random(Strategy):
    """RAND: a pool speaker drawn per source key (per utterance or per speaker)."""

    label = "rand"

    def target(self, pool, source, seed):
        rows = self.eligible(pool, source.gender, 1)
        return single(pool, int(self.rng(seed, source.key).choice(rows)))


class Permutation(Strategy):
    """PERM (maouche2020 §5.1): every source speaker gets its own pool speaker (of its gender
    with `same_gender`), no two the same: the sorted source speakers take the first rows of a
    permutation of the pool seeded by the experiment seed. The mapping is by speaker, whatever
    the level and the list, and depends only on the seed, the pool and `source_speakers`.

    Give every list the same `source_speakers`: all the source speakers of the corpus.
    Built from one list's speakers, a speaker's position in the sorted list, hence its pool
    speaker, changes with the list, and speaker B's trials can get the pool speaker that
    speaker A had in enrolment.

    Args:
        source_speakers: {speaker id: gender} of every source speaker of the corpus (every
            list anonymised), given once so that the mapping depends on neither batch nor list.
    """

    label = "perm"

    def __init__(self, source_speakers: dict[str, str], same_gender: bool = True):
        super().__init__(same_gender)
        self.source_speakers = dict(source_speakers)

    def assignment(self, pool: TargetPool, seed: int) -> dict[str, int]:
        """Source speaker -> pool row."""
        assignment = {}
        for gender in GENDERS if self.same_gender else ("all",):
            speakers = sorted(s for s, g in self.source_speakers.items() if gender in ("all", g))
            rows = self.eligible(pool, gender, len(speakers)) if speakers else []
            chosen = self.rng(seed, gender).permutation(rows)[:len(speakers)]
            assignment.update(zip(speakers, (int(row) for row in chosen)))
        return assignment

    def select(self, pool, sources, seed):
        assignment = self.assignment(pool, seed)
        return [self.mapped(pool, assignment, source) for source in sources]

    def target(self, pool, source, seed):
        return self.mapped(pool, self.assignment(pool, seed), source)

    def mapped(self, pool: TargetPool, assignment: dict[str, int], source: Source) -> Target:
        if source.speaker not in assignment:
            raise VpevalError(f"{self.label}: speaker {source.speaker!r} is not among the source speakers given")
        return single(pool, assignment[source.speaker])


class FarthestAverage(Strategy):
    """VPC 2020: the mean of `n_average` speakers drawn among the `n_farthest` pool speakers
    farthest from the source embedding. At speaker level, give each source its speaker's
    embedding over all of the speaker's utterances (not those of one batch), so that the
    target does not depend on batching.

    Args:
        n_farthest: N (VPC 2020: 200).
        n_average: N* (VPC 2020: 100), at most N.
        distance: f(source (D,), pool (S, D)) -> (S,) distances; cosine by default.
    """

    label = "farthest"

    def __init__(self, n_farthest: int = 200, n_average: int = 100, same_gender: bool = True,
                 distance: Callable[[np.ndarray, np.ndarray], np.ndarray] = cosine_distance):
        super().__init__(same_gender)
        if not 1 <= int(n_average) <= int(n_farthest):
            raise VpevalError(f"{self.label}: need 1 <= n_average <= n_farthest, got {n_average} and {n_farthest}")
        self.n_farthest, self.n_average = int(n_farthest), int(n_average)
        self.distance = distance

    def target(self, pool, source, seed):
        if source.embedding is None:
            raise VpevalError(f"{self.label}: source {source.key!r} has no embedding")
        rows = self.eligible(pool, source.gender, self.n_farthest)
        distances = self.distance(np.asarray(source.embedding, dtype=np.float64), pool.embeddings[rows])
        # stable sort: ties broken by pool order, so the choice is reproducible
        farthest = rows[np.argsort(-distances, kind="stable")[: self.n_farthest]]
        chosen = np.sort(self.rng(seed, source.key).choice(farthest, size=self.n_average, replace=False))
        return Target(pool.embeddings[chosen].mean(0), tuple(pool.speaker_ids[r] for r in chosen))
