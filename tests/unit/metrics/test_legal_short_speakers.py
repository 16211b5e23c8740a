"""Singling out with a test speaker of fewer than M+1 conversations: vauquier2025's footnote 4
("When a speaker has 2 <= K < 10 x-vectors only, K-1 are used for calibration and 1 for test.
The threshold is then equal to the average of the (K-1)-th and K-th similarity scores"), and
the rule before issue 35 (`short_speakers="drop"`) kept as an option."""
import itertools
import math

import numpy as np
import pytest

from pipeline.core.errors import VpevalError
from pipeline.metrics.legal import conversations_of, predicate_threshold, singling_out_rate


def by_scores(first: float, second: float) -> np.ndarray:
    """A unit 3-D embedding whose cosine with e1 (speaker c's enrolment) is `first` and with e2
    (speaker a's) is `second`."""
    return np.array([first, second, math.sqrt(1 - first ** 2 - second ** 2)])


def hand_fixture():
    """M = 3, L = 1. Speakers a and b give 4 identical utterances (K = 4); c gives 2 (K = 2).
    Cosines (with c's enrolment, with a's): a (0.7, 0.6), b (0.1, 0.2), c's two (0.9, 0.3) and
    (0.5, 0.5). Every speaker's utterances are all used, and c's K = 2 divides the M+1 = 4 folds,
    so the rate is the same for every draw."""
    test = np.stack([by_scores(0.7, 0.6)] * 4 + [by_scores(0.1, 0.2)] * 4 + [by_scores(0.9, 0.3), by_scores(0.5, 0.5)])
    speakers = np.array(["a"] * 4 + ["b"] * 4 + ["c"] * 2)
    return test, speakers, np.eye(3)[[1, 0]], np.array(["a", "c"])


def test_short_speaker_takes_part_calibrated_on_k_minus_one():
    """By hand. Owner c (K = 2, threshold between the 1st and 2nd highest calibration score):
    - c tests 0.9, calibrates on 0.5; calibration 0.7 0.7 0.7 0.5 0.1 0.1 0.1: t = 0.7; only c's
      0.9 > t: isolated;
    - c tests 0.5, calibrates on 0.9: t = (0.9 + 0.7) / 2 = 0.8; nothing fires: not isolated.
    Owner a (K = 4, threshold between the 3rd and 4th):
    - c tests 0.3, calibrates on 0.5: 0.6 0.6 0.6 0.5 ...: t = 0.55; only a's 0.6 fires: isolated;
    - c tests 0.5, calibrates on 0.3: t = (0.6 + 0.3) / 2 = 0.45; a's 0.6 and c's 0.5 fire: not.
    Each of c's conversations is tested in 2 of the 4 folds: 1/2 for each owner."""
    for seed in range(3):
        rate, left_out = singling_out_rate(*hand_fixture(), population=3, length=1, calibration_conversations=3,
                                           runs=2, seed=seed)
        assert rate.per_speaker == {"a": 0.5, "c": 0.5} and rate.value == 0.5
        assert rate.calibrated_on_fewer == 1 and left_out == {"test": 0, "enrolled": 0}


def test_keeping_m_for_the_short_owner_would_give_another_value():
    """What the footnote changes: owner c's threshold between the M-th and (M+1)-th (3rd and
    4th) of its calibration would isolate in neither fold (0.9 and a's 0.7 fire against
    t = (0.7 + 0.5) / 2; nothing fires against t = 0.7)."""
    assert predicate_threshold(np.array([0.7, 0.7, 0.7, 0.5, 0.1, 0.1, 0.1]), 3) == pytest.approx(0.6)
    assert predicate_threshold(np.array([0.7, 0.7, 0.7, 0.9, 0.1, 0.1, 0.1]), 3) == pytest.approx(0.7)


def test_drop_leaves_the_short_speaker_out():
    """`short_speakers="drop"`: c (2 < M+1 = 4 utterances) is not a test speaker nor an owner;
    a's population is a and b only, whose 4 folds all isolate a (t = 0.4 between a's 0.6 and b's
    0.2; only a's 0.6 fires)."""
    rate, left_out = singling_out_rate(*hand_fixture(), population=2, length=1, calibration_conversations=3,
                                       runs=2, short_speakers="drop")
    assert rate.per_speaker == {"a": 1.0} and rate.calibrated_on_fewer == 0
    assert left_out == {"test": 1, "enrolled": 1}
    with pytest.raises(ValueError, match="population 3: 2 eligible test speakers"):
        singling_out_rate(*hand_fixture(), population=3, length=1, calibration_conversations=3,
                          short_speakers="drop")


def test_drop_reproduces_the_rule_before_issue_35():
    """Regression: on a fixture with one speaker of 5 < 10 utterances, `drop` gives the values
    vpeval computed before issue 35 (captured from that code at a81fd94, same seed)."""
    i = np.arange(48 * 6).reshape(48, 6)
    means = np.cos(np.outer(np.arange(1, 5), np.arange(1, 7)) * 0.9)
    emb = np.repeat(means, 12, axis=0) + 1.1 * np.sin(i * 1.37 + 0.4)
    keep = np.r_[0:41]  # d keeps 5 of its 12
    enrol = np.repeat(means, 3, axis=0) + 1.1 * np.sin(np.arange(72).reshape(12, 6) * 1.37 + 2.1)
    data = (emb[keep], np.repeat(list("abcd"), 12)[keep], enrol, np.repeat(list("abcd"), 3))
    rate, left_out = singling_out_rate(*data, population=3, length=1, runs=3, seed=4, short_speakers="drop")
    assert rate.per_speaker == pytest.approx({"a": 8 / 15, "b": 0.6, "c": 1.0}, abs=1e-12)
    assert left_out == {"test": 1, "enrolled": 1}
    rate, left_out = singling_out_rate(*data, population=3, length=1, runs=3, seed=4)
    assert set(rate.per_speaker) == set("abcd") and left_out == {"test": 0, "enrolled": 0}


def test_rate_converges_to_the_enumerated_expectation_with_a_short_speaker():
    """M = 2, L = 1; a and b give 3 utterances, c gives 2 (K = 2). The expectation, by brute
    force: every order of every speaker's utterances (the draw), every fold f (a speaker of K
    conversations tests its (f mod K)-th), the threshold between the (K_e-1)-th and K_e-th of
    the other conversations. 1000 runs land within 4 standard errors of it."""
    rng = np.random.default_rng(7)
    counts = {"a": 3, "b": 3, "c": 2}
    speakers = np.repeat(list(counts), list(counts.values()))
    emb = rng.normal(size=(8, 4)) + 0.8 * np.repeat(rng.normal(size=(3, 4)), list(counts.values()), axis=0)
    enrol, enrol_speakers = rng.normal(size=(6, 4)) + np.repeat(emb[[0, 3, 6]], 2, axis=0), np.repeat(list("abc"), 2)

    def cos(x, y):
        return float(x @ y / np.linalg.norm(x) / np.linalg.norm(y))

    expected = {}
    for owner in "abc":
        probe = enrol[enrol_speakers == owner].mean(axis=0)
        rows = {s: np.flatnonzero(speakers == s) for s in "abc"}
        hits = []
        for orders in itertools.product(*(itertools.permutations(rows[s]) for s in "abc")):
            for fold in range(3):
                tested = [order[fold % len(order)] for order in orders]
                calibration = sorted((cos(emb[i], probe) for order in orders for i in order if i not in tested),
                                     reverse=True)
                fires = counts[owner] - 1
                threshold = (calibration[fires - 1] + calibration[fires]) / 2
                hits.append(sum(cos(emb[i], probe) > threshold for i in tested) == 1)
        expected[owner] = np.mean(hits)
    mean = np.mean(list(expected.values()))
    rate, _ = singling_out_rate(emb, speakers, enrol, enrol_speakers, population=3, length=1,
                                calibration_conversations=2, runs=1000, seed=0)
    assert 0 < mean < 1 and rate.calibrated_on_fewer == 1
    assert abs(rate.value - mean) < 4 * math.sqrt(mean * (1 - mean) / 9000)


def test_conversations_per_speaker():
    assert [conversations_of(n, 3, 9, "calibrate") for n in (5, 6, 29, 30, 31, 300)] == [0, 2, 9, 10, 10, 10]
    assert [conversations_of(n, 3, 9, "drop") for n in (6, 29, 30)] == [0, 0, 10]
    with pytest.raises(VpevalError, match="^reidentification.short_speakers=keep: must be calibrate or drop$"):
        conversations_of(10, 1, 9, "keep")
