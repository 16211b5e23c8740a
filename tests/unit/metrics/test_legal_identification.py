"""Identification rate (the legal-eval "linkability", not D<->sys): the exact hypergeometric
estimator against enumeration of every candidate set, the tie rule, conversations, and values
equal to the legal-eval reference's on a shared fixture."""
import itertools
import math

import numpy as np
import pytest
from test_legal_singling_out import REFERENCE, load_reference, shared_fixture, speaker_fixture

from pipeline.metrics.legal import (
    Grid,
    conversation,
    identification_probability,
    identification_rate,
    legal_metrics,
    unit_rows,
)


def enumerated_probability(true_score, other_scores, candidates):
    """Share of all (K-1 choose N'-1) candidate sets in which the true score beats every other
    strictly."""
    sets = list(itertools.combinations(other_scores, candidates - 1))
    return sum(all(true_score > s for s in chosen) for chosen in sets) / len(sets)


def test_exact_estimator_equals_enumeration_with_ties():
    rng = np.random.default_rng(0)
    others = np.round(rng.normal(size=(30, 7)), 1)  # rounded: many ties with the true score
    true = np.round(rng.normal(size=30), 1)
    for candidates in range(1, 9):
        exact = identification_probability(true, others, candidates)
        assert exact == pytest.approx([enumerated_probability(t, o, candidates) for t, o in zip(true, others)])


def test_a_tie_is_a_failure_and_chance_is_one_over_n():
    assert identification_probability(np.array([0.5]), np.array([[0.5, 0.1, 0.2]]), 4)[0] == 0
    rng = np.random.default_rng(1)
    scores = rng.normal(size=(20000, 9))
    for candidates in (2, 5, 9):
        rate = identification_probability(scores[:, 0], scores[:, 1:], candidates).mean()
        assert abs(rate - 1 / candidates) < 4 * math.sqrt((1 / candidates) / 20000)


def test_reference_value_on_shared_fixture():
    """legal-eval's LinkabilityMetric.compute (commit a98d149, test i against enrolment i, strict
    `>` over all other enrolled speakers) gave 5/12 on the shared fixture (12 speakers, so
    N' = K = 12), and 0.5 on a 4-speaker fixture where speaker 1 enrols with speaker 0's
    embedding (a tie for speaker 0 and speaker 1 alike)."""
    test, enrolled, _ = shared_fixture()
    assert reference_like(test, enrolled) == pytest.approx(5 / 12, abs=1e-12)
    test, enrolled = speaker_fixture(4, 1, 6, 0.3, 0.2), speaker_fixture(4, 1, 6, 1.1, 0.2)
    enrolled[1] = enrolled[0]
    assert reference_like(test, enrolled) == 0.5


def reference_like(test, enrolled):
    """The identification rate over every enrolled speaker (N' = K), test row i of speaker i,
    through identification_rate on one-utterance conversations."""
    names = [f"s{i:02d}" for i in range(len(test))]
    rate, _ = identification_rate(test, names, enrolled, names, candidates=len(names), length=1, runs=1)
    return rate.value


@pytest.mark.skipif(not (REFERENCE / "HEAD").exists(), reason="legal-eval mirror absent")
def test_reference_runs_equal_on_varied_fixtures(tmp_path):
    reference = load_reference(tmp_path).LinkabilityMetric()
    for speakers, phase, spread in itertools.product((4, 9, 15), (0.2, 0.9), (0.6, 1.4)):
        test, enrolled = speaker_fixture(speakers, 1, 6, phase, spread), speaker_fixture(speakers, 1, 6, phase + 1, spread)
        assert reference_like(test, enrolled) == pytest.approx(reference.compute(test, enrolled), abs=1e-12)


def test_conversation_is_normalised_mean_and_rate_uses_it():
    """L = 3 with exactly 3 test utterances: the one conversation per speaker is fixed, so the
    rate equals enumeration over candidate sets of its cosine scores."""
    test = speaker_fixture(5, 3, 6, 0.4, 1.6)
    enrol = speaker_fixture(5, 4, 6, 2.4, 1.6)
    names = np.repeat([f"s{i}" for i in range(5)], 3)
    enrol_names = np.repeat([f"s{i}" for i in range(5)], 4)
    conv = conversation(test.reshape(5, 3, 6))
    assert np.allclose(conv, unit_rows(test.reshape(5, 3, 6).mean(axis=1)))
    scores = conv @ conversation(enrol.reshape(5, 4, 6)).T
    for candidates in (2, 3, 5):
        expected = np.mean([enumerated_probability(scores[i, i], np.delete(scores[i], i), candidates)
                            for i in range(5)])
        rate, left_out = identification_rate(test, names, enrol, enrol_names, candidates, length=3, runs=4)
        assert rate.value == pytest.approx(expected) and rate.chance == 1 / candidates and left_out == {"test": 0}


def test_left_out_counted_and_interval_brackets_value():
    rng = np.random.default_rng(2)
    means = rng.normal(size=(8, 6))
    names = np.repeat([f"s{i}" for i in range(8)], 6)
    test = means[np.repeat(np.arange(8), 6)] + rng.normal(size=(48, 6))
    enrol = means[:6] + 0.5 * rng.normal(size=(6, 6))
    rate, left_out = identification_rate(test, names, enrol, [f"s{i}" for i in range(6)], 4, length=2, runs=5)
    assert left_out == {"test": 2} and rate.units == 6
    assert rate.low <= rate.value <= rate.high


def test_grid_keys_name_n_prime_and_l():
    rng = np.random.default_rng(3)
    names = np.repeat([f"s{i}" for i in range(4)], 10)
    found = legal_metrics(rng.normal(size=(40, 5)), names, rng.normal(size=(8, 5)), np.repeat(names[::10], 2),
                          Grid(populations=(3,), candidates=(2, 4), lengths=(1,), calibration_conversations=4,
                               runs=2))
    assert set(found["singling_out_rate"]) == {"N=3,L=1"}
    assert set(found["identification_rate"]) == {"N'=2,L=1", "N'=4,L=1"}
    assert found["identification_rate"]["N'=2,L=1"]["chance"] == 0.5
