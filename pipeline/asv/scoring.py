"""Scoring backends (plugins by config, `conf/backend/*.yaml`) and trial scoring.

A backend is fitted on the attacker's training embeddings, builds a model of each enrolled
speaker from its utterance embeddings, and scores aligned (speaker model, test) pairs::

    backend = instantiate(cfg.backend).fit(train_embeddings, train_speakers)
    model = backend.enrol(speaker_embeddings)                 # (n, D) -> one vector
    scores = backend.score(models, test_vectors)              # one score per row pair

The cosine backend's speaker model follows a named rule (`enrolment`, see `ENROLMENT_RULES`):
`mean_normalised`, the mean of the length-normalised utterance embeddings (every utterance
weighs the same), or `mean_raw`, the mean of the raw embeddings (VPC 2024's and VPC 2026's
`convert_to_spk_level`). Cosine scoring itself ignores the scale of either side, so the rules
differ only in how much each enrolment utterance weighs. `embedding: sign`
first replaces every utterance embedding, enrolment and test, by its signs (+1 / -1), what VPC
2026's `ecapa_ssl` extractor returns (`extract_vector` calls `F.normalize(vec, dim=1)` on a
(1, 1, D) output: each element divided by its own magnitude; tests/fixtures/vpc2026_ssl). PLDA
(`pipeline.asv.plda`) keeps what its multi-enrolment LLR needs. `score_trials` scores a trial list; `write_scores` writes
`enroll test score target|nontarget` lines, the file every metric reads.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np

from pipeline.core.checks import Checked, choice
from pipeline.core.errors import VpevalError
from pipeline.core.schemas import require
from pipeline.core.fileio import write_lines
from pipeline.data.manifest import Trial, Utterance

TRIAL_CHUNK = 65536


def length_normalise(embeddings: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (all-zero rows stay zero)."""
    embeddings = np.asarray(embeddings, dtype=np.float64)
    norms = np.linalg.norm(embeddings, axis=-1, keepdims=True)
    return embeddings / np.where(norms > 0, norms, 1.0)


def mean_of_normalised(embeddings: np.ndarray) -> np.ndarray:
    """The mean of length-normalised embeddings (rows): every utterance weighs the same.

    >>> mean_of_normalised(np.array([[3.0, 0.0], [0.0, 1.0]]))
    array([0.5, 0.5])
    """
    return length_normalise(as_matrix(embeddings, "enrolment embeddings")).mean(axis=0)


def mean_of_raw(embeddings: np.ndarray) -> np.ndarray:
    """The mean of the raw embeddings (rows): longer vectors weigh more.

    >>> mean_of_raw(np.array([[3.0, 0.0], [0.0, 1.0]]))
    array([1.5, 0.5])
    """
    return as_matrix(embeddings, "enrolment embeddings").mean(axis=0)


ENROLMENT_RULES = {"mean_normalised": mean_of_normalised, "mean_raw": mean_of_raw}
# What an utterance embedding is before enrolment and scoring: as extracted, or its signs
# (+1 / -1; 0 stays 0), VPC 2026's `ecapa_ssl` vectors
EMBEDDINGS = {"raw": lambda embeddings: embeddings, "sign": np.sign}


class ScoringBackend(Checked, ABC):
    """fit(training embeddings, their speakers) once, enrol(a speaker's embeddings), then
    score(speaker models, test embeddings) row pairs.

    `name` is the label reports use (the config's `name:` key).
    """

    def __init__(self, name: str):
        self.name = name

    @property
    def needs_fit(self) -> bool:
        """Whether `score` depends on `fit` (so the training embeddings must be extracted)."""
        return True

    @abstractmethod
    def fit(self, embeddings: np.ndarray, speaker_ids: Sequence[str]) -> "ScoringBackend":
        """Learn whatever the backend needs from the attacker's training embeddings; return self."""

    def enrol(self, embeddings: np.ndarray) -> np.ndarray:
        """A speaker's model from its (n, D) enrolment embeddings (default: `mean_of_normalised`)."""
        return mean_of_normalised(embeddings)

    @abstractmethod
    def score(self, enroll: np.ndarray, test: np.ndarray) -> np.ndarray:
        """(N, ...) speaker models (from `enrol`) and (N, D) test embeddings -> (N,) scores, higher =
        more likely the same speaker."""


class CosineBackend(ScoringBackend):
    """Cosine similarity of speaker models built by the `enrolment` rule (`ENROLMENT_RULES`);
    with `mean_subtraction`, embeddings are length-normalised and the mean of the
    length-normalised training embeddings is subtracted before the cosine.

    >>> CosineBackend().fit(np.eye(2), ["a", "b"]).score(np.array([[1.0, 0.0]]), np.array([[1.0, 1.0]]))
    array([0.70710678])
    """

    settings_checks = {"enrolment": choice(ENROLMENT_RULES),
                       "embedding": choice(EMBEDDINGS)}

    def __init__(self, mean_subtraction: bool = False, enrolment: str = "mean_normalised", name: str = "cosine",
                 embedding: str = "raw"):
        super().__init__(name)
        for key, value in (("enrolment", enrolment), ("embedding", embedding)):
            require(self.settings_checks[key], value, f"backend.{key}")
        self.mean_subtraction = bool(mean_subtraction)
        self.enrolment = enrolment
        self.embedding = EMBEDDINGS[embedding]
        self.mean: np.ndarray | None = None

    def enrol(self, embeddings: np.ndarray) -> np.ndarray:
        """A speaker's model by the `enrolment` rule."""
        return ENROLMENT_RULES[self.enrolment](self.embedding(as_matrix(embeddings, "enrolment embeddings")))

    @property
    def needs_fit(self) -> bool:
        return self.mean_subtraction

    def fit(self, embeddings: np.ndarray, speaker_ids: Sequence[str]) -> "CosineBackend":
        embeddings = as_matrix(embeddings, "training embeddings")
        if len(speaker_ids) != len(embeddings):
            raise VpevalError(f"backend fit: {len(embeddings)} embeddings but {len(speaker_ids)} speaker ids")
        self.mean = length_normalise(self.embedding(embeddings)).mean(axis=0)
        return self

    def score(self, enroll: np.ndarray, test: np.ndarray) -> np.ndarray:
        enroll, test = as_matrix(enroll, "enrolment embeddings"), self.embedding(as_matrix(test, "test embeddings"))
        if enroll.shape != test.shape:
            raise VpevalError(f"backend score: enrolment {enroll.shape} and test {test.shape} are not aligned pairs")
        if self.mean_subtraction:
            if self.mean is None:
                raise VpevalError("cosine backend with mean_subtraction: call fit() on training embeddings first")
            enroll = length_normalise(enroll) - self.mean
            test = length_normalise(test) - self.mean
        return np.einsum("nd,nd->n", length_normalise(enroll), length_normalise(test))


def enrolment_vectors(enroll_utts: Sequence[Utterance], enroll_emb: np.ndarray,
                      backend: ScoringBackend | None = None) -> dict[str, np.ndarray]:
    """Speaker -> its model by `backend.enrol` (default: mean of its length-normalised utterance embeddings)."""
    enroll_emb = as_matrix(enroll_emb, "enrolment embeddings")
    if len(enroll_utts) != len(enroll_emb):
        raise VpevalError(f"{len(enroll_utts)} enrolment utterances but {len(enroll_emb)} embeddings")
    enrol = backend.enrol if backend is not None else mean_of_normalised
    rows: dict[str, list[int]] = {}
    for row, utt in enumerate(enroll_utts):
        rows.setdefault(utt.speaker, []).append(row)
    return {speaker: enrol(enroll_emb[indices]) for speaker, indices in rows.items()}


def score_trials(backend: ScoringBackend, enroll_utts: Sequence[Utterance], enroll_emb: np.ndarray,
                 trial_emb_by_id: Mapping[str, np.ndarray], trials: Sequence[Trial]) -> np.ndarray:
    """One score per trial (float64, in trial order), scored in chunks to bound memory."""
    enrolment = enrolment_vectors(enroll_utts, enroll_emb, backend)
    scores = np.empty(len(trials), dtype=np.float64)
    for start in range(0, len(trials), TRIAL_CHUNK):
        chunk = trials[start:start + TRIAL_CHUNK]
        for trial in chunk:
            if trial.enroll not in enrolment:
                raise VpevalError(f"trial '{trial.line()}': no enrolment utterances for speaker {trial.enroll!r}")
            if trial.test not in trial_emb_by_id:
                raise VpevalError(f"trial '{trial.line()}': no embedding for test utterance {trial.test!r}")
        enroll = np.stack([enrolment[trial.enroll] for trial in chunk])
        test = np.stack([np.asarray(trial_emb_by_id[trial.test], dtype=np.float64) for trial in chunk])
        scores[start:start + len(chunk)] = backend.score(enroll, test)
    return scores


def write_scores(path: str | Path, trials: Sequence[Trial], scores: np.ndarray) -> Path:
    """Write `enroll test score target|nontarget` lines atomically."""
    if len(trials) != len(scores):
        raise VpevalError(f"{path}: {len(trials)} trials but {len(scores)} scores")
    return write_lines(path, (f"{t.enroll} {t.test} {float(s):.9g} {'target' if t.target else 'nontarget'}"
                              for t, s in zip(trials, scores)))


def as_matrix(embeddings: Iterable, what: str) -> np.ndarray:
    matrix = np.asarray(embeddings, dtype=np.float64)
    if matrix.ndim != 2 or not np.isfinite(matrix).all():
        raise VpevalError(f"{what}: expected a finite 2-D array, got shape {matrix.shape}")
    return matrix
