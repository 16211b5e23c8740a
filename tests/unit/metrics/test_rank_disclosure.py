"""Similarity rank disclosure: ranks, histogram and beta-binomial estimators against a direct
computation, ties, additivity over independent features."""
import math

import numpy as np
import pytest
from scipy.stats import betabinom

from pipeline.metrics.rank_disclosure import (
    beta_binomial_fit,
    combined,
    disclosure,
    embedding_rank_disclosure,
    rank_disclosure,
    rank_histogram,
)


def test_small_case_equals_direct_computation():
    """3 enrolled speakers, 4 test utterances: ranks by sorting each row, disclosure by its sum."""
    scores = np.array([[0.9, 0.1, 0.3],   # true speaker column 0: rank 1
                       [0.2, 0.8, 0.1],   # true 0: rank 2
                       [0.7, 0.6, 0.5],   # true 0: rank 1
                       [0.1, 0.4, 0.9]])  # true 0: rank 3
    ranks = [1 + int(np.flatnonzero(np.argsort(-row) == 0)[0]) for row in scores]
    assert ranks == [1, 2, 1, 3]
    counts = rank_histogram(scores[:, 0], scores[:, 1:])
    assert counts.tolist() == [2, 1, 1]
    p = np.array([0.5, 0.25, 0.25])
    direct = sum(q * math.log2(3 * q) for q in p)
    average, worst = disclosure(counts)
    assert average == pytest.approx(direct) and average == pytest.approx(math.log2(3) - 1.5)
    assert worst == pytest.approx(math.log2(1.5))


def test_ties_share_their_ranks_so_a_constant_feature_discloses_nothing():
    counts = rank_histogram(np.zeros(5), np.zeros((5, 3)))
    assert counts.tolist() == [1.25] * 4
    assert disclosure(counts) == (0.0, 0.0)
    assert rank_histogram(np.array([0.5]), np.array([[0.9, 0.5, 0.1]])).tolist() == [0, 0.5, 0.5, 0]


def test_beta_binomial_fit_recovers_parameters_and_is_the_likelihood_maximum():
    k = 20
    counts = 100_000 * betabinom.pmf(np.arange(k), k - 1, 0.4, 2.5)
    alpha, beta = beta_binomial_fit(counts)
    assert alpha == pytest.approx(0.4, rel=1e-3) and beta == pytest.approx(2.5, rel=1e-3)
    sample = np.bincount(np.random.default_rng(0).integers(0, 6, 40), minlength=6)

    def likelihood(a, b):
        return np.sum(sample * betabinom.logpmf(np.arange(6), 5, a, b))
    best = likelihood(*beta_binomial_fit(sample))
    grid = np.exp(np.linspace(-3, 4, 60))
    assert best >= max(likelihood(a, b) for a in grid for b in grid) - 1e-9


def test_estimators_agree_on_much_data_and_uniform_ranks_disclose_nothing():
    rng = np.random.default_rng(1)
    scores = rng.normal(size=(50_000, 16))
    found = rank_disclosure(scores[:, 0], scores[:, 1:])
    assert found["candidates"] == 16 and found["items"] == 50_000
    assert found["histogram"]["average"] < 0.001 and found["beta_binomial"]["average"] < 0.001
    informative = rank_disclosure(scores[:, 0] + 1.5, scores[:, 1:])
    assert informative["histogram"]["average"] == pytest.approx(informative["beta_binomial"]["average"], abs=0.05)
    assert informative["histogram"]["worst"] == pytest.approx(informative["beta_binomial"]["worst"], abs=0.1)


def test_independent_features_add():
    """Two features independent given the speaker: the disclosure of their joint rank (K^2
    cells against uniform) equals the sum of theirs (measured: within 0.02 bits at 200 000
    items)."""
    rng = np.random.default_rng(2)
    k, n = 6, 200_000
    first = rng.normal(size=(n, k)) + np.r_[1.0, np.zeros(k - 1)]
    second = rng.normal(size=(n, k)) + np.r_[0.5, np.zeros(k - 1)]
    rank = [(row[:, 1:] > row[:, :1]).sum(axis=1) for row in (first, second)]
    joint = np.bincount(rank[0] * k + rank[1], minlength=k * k)
    parts = [rank_disclosure(f[:, 0], f[:, 1:]) for f in (first, second)]
    assert disclosure(joint)[0] == pytest.approx(combined(parts)["average"], abs=0.02)
    assert combined(parts)["average"] == pytest.approx(sum(p["histogram"]["average"] for p in parts))


def test_embeddings_rank_against_enrolled_speakers_only():
    rng = np.random.default_rng(3)
    means = rng.normal(size=(5, 8))
    names = np.repeat([f"s{i}" for i in range(5)], 20)
    test = means[np.repeat(np.arange(5), 20)] + 0.3 * rng.normal(size=(100, 8))
    enrol_names = np.repeat([f"s{i}" for i in range(4)], 3)
    enrol = means[np.repeat(np.arange(4), 3)] + 0.3 * rng.normal(size=(12, 8))
    found, left_out = embedding_rank_disclosure(test, names, enrol, enrol_names)
    assert left_out == {"test": 1} and found["candidates"] == 4 and found["items"] == 80
    assert found["histogram"]["average"] == pytest.approx(2.0)  # every utterance ranks its speaker first
