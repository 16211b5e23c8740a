"""Similarity rank disclosure (Bäckström et al. 2025, arXiv 2508.05250; applied to VPC 2024
systems in arXiv 2605.07291), as vpeval implements it (the definition is ours, from the
papers' abstracts; no reference code was available):

- A test item is compared with all K enrolled speakers; r is the rank of its true speaker's
  similarity (1 = most similar). Tied speakers share their ranks: an item whose true speaker
  ties t others below g better ones puts 1/(t+1) on each rank g+1 .. g+t+1 (so a feature
  that is constant discloses nothing, whatever the tie rule of a verifier).
- p(r) is the rank distribution: the histogram of the items (`histogram`), or a
  beta-binomial fit of r - 1 ~ BetaBinomial(K - 1, α, β) by maximum likelihood when data
  are scarce (`beta_binomial`).
- The disclosure of rank r is log2(K p(r)) bits: what seeing r tells about the identity,
  against the uniform ranks (log2 K bits of uncertainty) of a feature carrying none. The
  average disclosure is its expectation, sum_r p(r) log2(K p(r)) = log2 K - H(p) (the
  Kullback-Leibler divergence from uniform ranks, >= 0); the worst case is its maximum over
  the ranks that occur. Threshold-free, in bits, and additive over independent features
  (the joint rank distribution factorises), so `combined` sums the features' disclosures.
"""
from __future__ import annotations

import numpy as np
from scipy.optimize import minimize
from scipy.stats import betabinom

from pipeline.metrics.legal import conversation, unit_rows, utterances_by_speaker


def rank_histogram(true_scores, other_scores) -> np.ndarray:
    """Expected count of each rank 1..K of the true speaker (ties share their ranks), from the
    true speaker's score of each item and its K - 1 other speakers' (shape (items, K - 1))."""
    true_scores = np.asarray(true_scores, dtype=np.float64)
    other_scores = np.asarray(other_scores, dtype=np.float64)
    k = other_scores.shape[1] + 1
    better = (other_scores > true_scores[:, None]).sum(axis=1)
    ties = (other_scores == true_scores[:, None]).sum(axis=1)
    counts = np.zeros(k)
    for g, t in zip(better, ties):
        counts[g:g + t + 1] += 1 / (t + 1)
    return counts


def disclosure(pmf) -> tuple[float, float]:
    """(average, worst case) disclosure in bits of a rank distribution over K ranks.

    >>> disclosure([0.25, 0.25, 0.25, 0.25])
    (0.0, 0.0)
    >>> disclosure([1.0, 0.0, 0.0, 0.0])
    (2.0, 2.0)
    """
    pmf = np.asarray(pmf, dtype=np.float64)
    pmf = pmf / pmf.sum()
    seen = pmf > 0
    bits = np.log2(len(pmf) * pmf[seen])
    return float(np.sum(pmf[seen] * bits)), float(np.max(bits))


def beta_binomial_fit(counts) -> tuple[float, float]:
    """Maximum-likelihood (α, β) of r - 1 ~ BetaBinomial(K - 1, α, β) given (possibly
    fractional) counts of the ranks 1..K."""
    counts = np.asarray(counts, dtype=np.float64)
    values = np.arange(len(counts))

    def loss(log_ab):
        return -np.sum(counts * betabinom.logpmf(values, len(counts) - 1, *np.exp(log_ab)))

    fit = minimize(loss, np.zeros(2), method="Nelder-Mead", options={"xatol": 1e-8, "fatol": 1e-10, "maxiter": 4000})
    alpha, beta = np.exp(fit.x)
    return float(alpha), float(beta)


def rank_disclosure(true_scores, other_scores) -> dict:
    """Average and worst-case disclosure (bits) from the rank histogram and from its
    beta-binomial fit, with K (`candidates`), the items and the fitted α, β."""
    counts = rank_histogram(true_scores, other_scores)
    alpha, beta = beta_binomial_fit(counts)
    fitted = betabinom.pmf(np.arange(len(counts)), len(counts) - 1, alpha, beta)
    hist_avg, hist_worst = disclosure(counts)
    fit_avg, fit_worst = disclosure(fitted)
    return {"candidates": len(counts), "items": int(round(counts.sum())),
            "histogram": {"average": hist_avg, "worst": hist_worst},
            "beta_binomial": {"average": fit_avg, "worst": fit_worst, "alpha": alpha, "beta": beta}}


def embedding_rank_disclosure(test_emb, test_spk, enroll_emb, enroll_spk) -> tuple[dict, dict]:
    """Rank disclosure of speaker embeddings: every test utterance of an enrolled speaker
    against every enrolled speaker's mean enrolment embedding, cosine similarity; and the
    test speakers left out (not enrolled)."""
    by_enrolled = utterances_by_speaker(enroll_spk)
    names = list(by_enrolled)
    models = np.stack([conversation(np.asarray(enroll_emb, dtype=np.float64)[rows]) for rows in by_enrolled.values()])
    test_spk = np.asarray(test_spk, dtype=str)
    kept = np.isin(test_spk, names)
    scores = unit_rows(np.asarray(test_emb)[kept]) @ models.T
    true = np.array([names.index(s) for s in test_spk[kept]])
    mask = np.arange(len(names))[None, :] != true[:, None]
    others = scores[mask].reshape(len(true), len(names) - 1)
    left_out = {"test": len(set(test_spk.tolist()) - set(names))}
    return rank_disclosure(scores[np.arange(len(true)), true], others), left_out


def combined(disclosures: list[dict], estimator: str = "histogram") -> dict:
    """Disclosure of independent features together: the sum of their averages and of their
    worst cases (exact only when the features are independent given the speaker)."""
    return {key: float(sum(d[estimator][key] for d in disclosures)) for key in ("average", "worst")}
