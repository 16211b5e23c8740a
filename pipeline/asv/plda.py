"""Two-covariance PLDA scoring backend (`conf/backend/plda*.yaml`).

Model (Brümmer & de Villiers 2010; Sizov et al. 2014): a speaker's vectors are
z = y + e with the speaker variable y ~ N(mean, between) and the residual e ~ N(0, within),
both full covariances, fitted by EM on the attacker's training embeddings. Before the model,
embeddings are centred, optionally projected by LDA (at most `lda_dim` dimensions, never more
than the training speakers - 1), whitened with their total covariance and optionally
length-normalised to norm sqrt(dim) (Garcia-Romero & Espy-Wilson 2011).

Scores are log-likelihood ratios (natural log) of "same speaker" against "different
speakers". Enrolment, `enrolment: multi` (default): the by-the-book formula for n enrolment
vectors, p(test | the speaker's n vectors) / p(test), exact under the model, so a speaker
enrolled with more utterances is known more precisely. `enrolment: mean`: the mean of the
speaker's (pre-processed) vectors treated as one vector (embedding averaging).

All of it runs in the simultaneously diagonalising basis (within = I, between = diag(psi)),
where a speaker model is two vectors: the predictive mean and variance of its test vectors.

>>> rng = np.random.default_rng(0)
>>> speakers = np.repeat(np.arange(30), 6)
>>> x = 3 * rng.standard_normal((30, 4))[speakers] + rng.standard_normal((180, 4))
>>> backend = PLDABackend(length_norm=False).fit(x, speakers.tolist())
>>> same = backend.score(backend.enrol(x[:5])[None], x[5:6])[0]
>>> other = backend.score(backend.enrol(x[:5])[None], x[6:7])[0]
>>> bool(same > 0 > other)
True
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy.linalg import eigh

from pipeline.asv.scoring import ScoringBackend, as_matrix, length_normalise
from pipeline.core.checks import COUNT, Check, choice, integer, optional
from pipeline.core.errors import VpevalError
from pipeline.core.schemas import require

log = logging.getLogger(__name__)
ENROLMENTS = ("multi", "mean")
RIDGE = 1e-6  # relative to the mean variance: keeps covariance estimates invertible


@dataclass(frozen=True)
class TwoCovariancePLDA:
    """A fitted two-covariance model: speaker mean `mean`, `between` and `within` covariances."""

    mean: np.ndarray
    between: np.ndarray
    within: np.ndarray

    @classmethod
    def fit(cls, vectors: np.ndarray, labels: np.ndarray, iterations: int = 10) -> "TwoCovariancePLDA":
        """EM from moment estimates; `labels` are integer speaker indices 0..S-1."""
        vectors = np.asarray(vectors, dtype=np.float64)
        counts, sums, scatter, between_scatter = _class_statistics(vectors, labels)
        means = sums / counts[:, None]
        within = (scatter - between_scatter) / len(vectors)
        between = np.cov(means.T, bias=True).reshape(within.shape)
        model = cls(means.mean(axis=0), _ridged(between, within), _ridged(within, within))
        for _ in range(iterations):
            model = model._em_step(sums, counts, scatter, len(vectors))
        return model

    def _em_step(self, sums: np.ndarray, counts: np.ndarray, scatter: np.ndarray, total: int) -> "TwoCovariancePLDA":
        """One EM iteration; speakers with the same number of vectors share their posterior covariance."""
        between_precision, within_precision = np.linalg.inv(self.between), np.linalg.inv(self.within)
        prior = between_precision @ self.mean
        posterior_means = np.empty_like(sums)
        posterior_second = np.zeros_like(self.between)   # sum over speakers of Cov_s + y_s y_s^T
        weighted_second = np.zeros_like(self.between)    # the same, weighted by n_s
        for count in np.unique(counts):
            speakers = np.flatnonzero(counts == count)
            covariance = np.linalg.inv(between_precision + count * within_precision)
            means = (prior + sums[speakers] @ within_precision) @ covariance
            posterior_means[speakers] = means
            second = len(speakers) * covariance + means.T @ means
            posterior_second += second
            weighted_second += count * second
        mean = posterior_means.mean(axis=0)
        between = posterior_second / len(counts) - np.outer(mean, mean)
        cross = sums.T @ posterior_means
        within = (scatter - cross - cross.T + weighted_second) / total
        return TwoCovariancePLDA(mean, _symmetric(between), _symmetric(within))

    def diagonalised(self) -> tuple[np.ndarray, np.ndarray]:
        """(T, psi): u = (z - mean) @ T has within covariance I and between covariance diag(psi)."""
        psi, vectors = eigh(self.between, self.within)
        return vectors, np.clip(psi, 0.0, None)


class PLDABackend(ScoringBackend):
    """PLDA LLR scoring (see the module doc) behind the `ScoringBackend` interface."""

    settings_checks = {"enrolment": choice(ENROLMENTS),
                       "lda_dim": Check("null or an integer >= 1 (dimensions)", optional(integer(1))),
                       "iterations": COUNT}

    def __init__(self, lda_dim: int | None = None, length_norm: bool = True, enrolment: str = "multi",
                 iterations: int = 10, name: str = "plda"):
        super().__init__(name)
        for key, value in (("enrolment", enrolment), ("lda_dim", lda_dim), ("iterations", iterations)):
            require(self.settings_checks[key], value, f"backend.{key}")
        self.lda_dim = None if lda_dim is None else int(lda_dim)
        self.length_norm = bool(length_norm)
        self.enrolment = enrolment
        self.iterations = int(iterations)
        self.center: np.ndarray | None = None
        self.projection: np.ndarray | None = None  # after centring: LDA (if any) and whitening
        self.plda: TwoCovariancePLDA | None = None
        self.basis: np.ndarray | None = None       # the PLDA's diagonalising basis and between variances
        self.psi: np.ndarray | None = None

    def fit(self, embeddings: np.ndarray, speaker_ids: Sequence[str]) -> "PLDABackend":
        embeddings = as_matrix(embeddings, "training embeddings")
        if len(speaker_ids) != len(embeddings):
            raise VpevalError(f"backend fit: {len(embeddings)} embeddings but {len(speaker_ids)} speaker ids")
        speakers, labels = np.unique(np.asarray(speaker_ids), return_inverse=True)
        if len(speakers) < 2 or len(embeddings) == len(speakers):
            raise VpevalError(f"PLDA needs at least 2 training speakers and one with several utterances; got "
                              f"{len(speakers)} speaker(s) and {len(embeddings)} embedding(s)")
        self.center = embeddings.mean(axis=0)
        centred = embeddings - self.center
        projection = np.eye(embeddings.shape[1])
        if self.lda_dim is not None:
            kept = min(self.lda_dim, embeddings.shape[1], len(speakers) - 1)
            if kept < self.lda_dim:
                log.info("PLDA: LDA keeps %d dimensions (backend.lda_dim=%d; %d training speakers, %d-d embeddings)",
                         kept, self.lda_dim, len(speakers), embeddings.shape[1])
            projection = _lda(centred, labels, kept)
        self.projection = projection @ _whitening(centred @ projection)
        self.plda = TwoCovariancePLDA.fit(self._normalise(centred @ self.projection), labels, self.iterations)
        self.basis, self.psi = self.plda.diagonalised()
        return self

    def enrol(self, embeddings: np.ndarray) -> np.ndarray:
        """The speaker model [predictive mean, predictive variance] of its test vectors (in the PLDA basis)."""
        u = self.transform(as_matrix(embeddings, "enrolment embeddings"))
        count = len(u) if self.enrolment == "multi" else 1
        shrink = count * self.psi / (1.0 + count * self.psi)
        return np.concatenate([shrink * u.mean(axis=0), 1.0 + self.psi / (1.0 + count * self.psi)])

    def score(self, enroll: np.ndarray, test: np.ndarray) -> np.ndarray:
        """(N, 2d) speaker models from `enrol` and (N, D) test embeddings -> (N,) LLRs."""
        models = as_matrix(enroll, "enrolment models")
        u = self.transform(as_matrix(test, "test embeddings"))
        if models.shape != (len(u), 2 * u.shape[1]):
            raise VpevalError(f"PLDA score: enrolment models {models.shape} do not match test vectors {u.shape}; "
                              f"build them with enrol()")
        mean, variance = models[:, :u.shape[1]], models[:, u.shape[1]:]
        marginal = 1.0 + self.psi
        return 0.5 * (np.log(marginal / variance) + u ** 2 / marginal - (u - mean) ** 2 / variance).sum(axis=1)

    def transform(self, embeddings: np.ndarray) -> np.ndarray:
        """Embeddings -> the PLDA basis: centre, LDA, whiten, length-normalise, diagonalise."""
        if self.plda is None:
            raise VpevalError("PLDA backend: call fit() on the attacker's training embeddings first")
        if embeddings.shape[1] != len(self.center):
            raise VpevalError(f"PLDA: {embeddings.shape[1]}-d embeddings, but fitted on {len(self.center)}-d ones")
        return (self._normalise((embeddings - self.center) @ self.projection) - self.plda.mean) @ self.basis

    def _normalise(self, vectors: np.ndarray) -> np.ndarray:
        return length_normalise(vectors) * np.sqrt(vectors.shape[1]) if self.length_norm else vectors


def _lda(centred: np.ndarray, labels: np.ndarray, dims: int) -> np.ndarray:
    """(D, dims) LDA projection: the top generalised eigenvectors of between- vs within-class scatter."""
    _, _, scatter, between = _class_statistics(centred, labels)
    within = scatter - between
    _, vectors = eigh(between, _ridged(within, within))
    return vectors[:, ::-1][:, :dims]


def _class_statistics(vectors: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, ...]:
    """(per-class counts, per-class sums, total scatter X^T X, between-class scatter
    sum_s n_s m_s m_s^T) of `vectors` with integer class `labels` 0..S-1."""
    counts = np.bincount(labels)
    sums = np.zeros((len(counts), vectors.shape[1]))
    np.add.at(sums, labels, vectors)
    return counts, sums, vectors.T @ vectors, (sums.T / counts) @ sums


def _whitening(vectors: np.ndarray) -> np.ndarray:
    """A matrix that gives `vectors` (centred) identity covariance."""
    covariance = vectors.T @ vectors / len(vectors)
    values, basis = np.linalg.eigh(_ridged(covariance, covariance))
    return basis / np.sqrt(values)


def _ridged(matrix: np.ndarray, scale_of: np.ndarray) -> np.ndarray:
    """`matrix` plus RIDGE x the mean variance of `scale_of` on the diagonal."""
    return matrix + RIDGE * max(np.trace(scale_of) / len(scale_of), 1e-12) * np.eye(len(matrix))


def _symmetric(matrix: np.ndarray) -> np.ndarray:
    return (matrix + matrix.T) / 2
