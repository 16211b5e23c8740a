"""Singling out (vauquier2025): predicate calibration, isolation, baselines, the grid check,
and values equal to the legal-eval reference's on a shared fixture."""
import importlib.util
import itertools
import math
import subprocess
from pathlib import Path

import numpy as np
import pytest

from pipeline.core.errors import VpevalError
from pipeline.metrics.legal import (
    Grid,
    calibrated_null_singling_out,
    check_grid,
    conversation,
    isolation_rate,
    predicate_threshold,
    singling_out_rate,
    trivial_singling_out,
    unit_rows,
)

REFERENCE = Path("/work/.mirror/brijmohan+voice-anonymization-legal-eval/repo")
REFERENCE_COMMIT = "a98d149a2cf78e345bd7ccdd40873872bcadaa5f"


def speaker_fixture(speakers, per_speaker, dim, phase, spread=1.1):
    """Deterministic embeddings (no RNG): speaker means plus a sine pattern."""
    means = np.cos(np.outer(np.arange(1, speakers + 1), np.arange(1, dim + 1)) * 0.9)
    rows = np.arange(speakers * per_speaker * dim).reshape(speakers * per_speaker, dim)
    return np.repeat(means, per_speaker, axis=0) + spread * np.sin(rows * 1.37 + phase)


def shared_fixture():
    """12 test, 12 enrolment and 9 x 12 calibration embeddings (dimension 10)."""
    return (speaker_fixture(12, 1, 10, 0.3), speaker_fixture(12, 1, 10, 1.1), speaker_fixture(12, 9, 10, 2.0))


def test_reference_value_on_shared_fixture():
    """legal-eval's SinglingOutMetric._compute_isolation_probability (commit REFERENCE_COMMIT,
    threshold between the 9th and 10th highest calibration similarities, strict `>`) gave 7/12
    on this fixture, computed once with the reference's own file."""
    assert isolation_rate(*shared_fixture(), fires_on=9) == pytest.approx(7 / 12, abs=1e-12)


def load_reference(tmp_path):
    source = subprocess.run(["git", "-C", str(REFERENCE), "show", f"{REFERENCE_COMMIT}:legal_eval/metrics.py"],
                            capture_output=True, text=True, check=True).stdout
    path = tmp_path / "legal_eval_metrics.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("legal_eval_metrics", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # numpy only
    return module


@pytest.mark.skipif(not (REFERENCE / "HEAD").exists() and not (REFERENCE / ".git").exists(),
                    reason="legal-eval mirror absent")
def test_reference_runs_equal_on_varied_fixtures(tmp_path):
    reference = load_reference(tmp_path).SinglingOutMetric()
    for speakers, phase in itertools.product((5, 8, 12), (0.1, 0.7)):
        test, enrolled = speaker_fixture(speakers, 1, 6, phase), speaker_fixture(speakers, 1, 6, phase + 1)
        calibration = speaker_fixture(speakers, 9, 6, phase + 2)
        assert isolation_rate(test, enrolled, calibration, 9) == pytest.approx(
            reference._compute_isolation_probability(test, enrolled, calibration), abs=1e-12)


def brute_force_isolation(test, enrolled, calibration, fires_on):
    """Loops over every predicate and entry, the threshold by sorting a Python list."""
    def cos(a, b):
        return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))
    isolated = 0
    for e in enrolled:
        ranked = sorted((cos(e, c) for c in calibration), reverse=True)
        threshold = (ranked[fires_on - 1] + ranked[fires_on]) / 2
        isolated += sum(cos(e, t) > threshold for t in test) == 1
    return isolated / len(enrolled)


@pytest.mark.parametrize("fires_on", [1, 3, 9])
def test_isolation_rate_equals_brute_force(fires_on):
    rng = np.random.default_rng(fires_on)
    test, enrolled, calibration = rng.normal(size=(7, 5)), rng.normal(size=(4, 5)), rng.normal(size=(7 * fires_on, 5))
    assert isolation_rate(test, enrolled, calibration, fires_on) == brute_force_isolation(
        test, enrolled, calibration, fires_on)


def test_threshold_fires_on_one_nth_of_calibration():
    scores = np.random.default_rng(0).normal(size=9 * 20)
    assert np.count_nonzero(scores > predicate_threshold(scores, 9)) == 9
    with pytest.raises(ValueError, match="more than 9"):
        predicate_threshold(scores[:9], 9)


def test_trivial_baseline_matches_its_formula_and_tends_to_inverse_e():
    for n in (2, 5, 20, 1000):
        assert trivial_singling_out(n) == pytest.approx(n * (1 / n) * (1 - 1 / n) ** (n - 1))
    values = [trivial_singling_out(n) for n in (2, 10, 100, 10_000, 10**7)]
    assert all(a > b for a, b in zip(values, values[1:]))
    assert values[-1] == pytest.approx(math.exp(-1), abs=1e-7)


def test_calibrated_null_equals_enumeration_of_orders():
    """Every arrangement of N test and M·N calibration entries equally likely: count them."""
    for n, m in ((2, 1), (3, 2), (2, 3)):
        hits = total = 0
        for test_positions in itertools.combinations(range(n * (m + 1)), n):  # ranks, 0 = highest
            calibration_ranks = [r for r in range(n * (m + 1)) if r not in test_positions]
            cut = calibration_ranks[m]  # the (M+1)-th highest calibration entry
            hits += sum(r < cut for r in test_positions) == 1
            total += 1
        assert calibrated_null_singling_out(n, m) == pytest.approx(hits / total)


def test_no_speaker_information_gives_the_calibrated_null():
    """Embeddings of pure noise: the rate is the calibrated null (measured: within 4 standard
    errors over 8 x 40 x 10 isolations), not the trivial baseline."""
    rng = np.random.default_rng(3)
    speakers = np.repeat([f"s{i}" for i in range(10)], 10)
    rate, _ = singling_out_rate(rng.normal(size=(100, 8)), speakers, rng.normal(size=(40, 8)),
                                np.repeat([f"s{i}" for i in range(8)], 5), population=10, length=1,
                                calibration_conversations=9, runs=40, seed=1)
    expected = calibrated_null_singling_out(10, 9)
    assert abs(rate.value - expected) < 4 * math.sqrt(expected * (1 - expected) / (8 * 40 * 10))
    assert rate.chance == trivial_singling_out(10)


def test_rate_converges_to_the_enumerated_expectation():
    """N = every eligible speaker and exactly M+1 = 3 utterances each (L = 1): the rate's
    expectation is the mean over all 3^3 choices of one test utterance per speaker; 3000 runs
    land within 4 standard errors of it."""
    emb = speaker_fixture(3, 3, 4, 0.5, spread=0.9)
    speakers = np.repeat(["a", "b", "c"], 3)
    enrol = speaker_fixture(3, 2, 4, 1.5, spread=0.9)
    enrol_speakers = np.repeat(["a", "b", "c"], 2)
    by = {s: np.flatnonzero(speakers == s) for s in "abc"}
    outcomes = {}
    for owner in "abc":
        probe = conversation(enrol[enrol_speakers == owner])
        hits = []
        for choice in itertools.product(range(3), repeat=3):
            test = [by[s][c] for s, c in zip("abc", choice)]
            calibration = [i for i in range(9) if i not in test]
            threshold = predicate_threshold(unit_rows(emb[calibration]) @ probe, 2)
            hits.append(np.count_nonzero(unit_rows(emb[test]) @ probe > threshold) == 1)
        outcomes[owner] = np.mean(hits)
    expected = np.mean(list(outcomes.values()))
    rate, left_out = singling_out_rate(emb, speakers, enrol, enrol_speakers, population=3, length=1,
                                       calibration_conversations=2, runs=1000, seed=0)
    assert 0 < expected < 1 and left_out == {"test": 0, "enrolled": 0}
    assert abs(rate.value - expected) < 4 * math.sqrt(expected * (1 - expected) / 9000)


def test_speakers_left_out_are_counted():
    """Speaker c has 4 < M+1 = 10 utterances: it takes part calibrated on 3 (footnote 4) by
    default, and is left out under `short_speakers="drop"` (the rule before issue 35)."""
    rng = np.random.default_rng(0)
    speakers = np.array(["a"] * 10 + ["b"] * 10 + ["c"] * 4 + ["d"] * 10 + ["f"])
    enrolled = np.array(["a", "b", "c", "e"])
    data = (rng.normal(size=(35, 4)), speakers, rng.normal(size=(4, 4)), enrolled)
    rate, left_out = singling_out_rate(*data, population=3, length=1, runs=2)
    assert left_out == {"test": 1, "enrolled": 1} and rate.units == 3 and rate.calibrated_on_fewer == 1
    rate, left_out = singling_out_rate(*data, population=3, length=1, runs=2, short_speakers="drop")
    assert left_out == {"test": 2, "enrolled": 2} and rate.units == 2 and set(rate.per_speaker) == {"a", "b"}
    assert rate.calibrated_on_fewer == 0


@pytest.mark.parametrize("grid, message", [
    (Grid(populations=(5,), candidates=(2,), lengths=(1,)),
     "reidentification.populations: N=5 but at L=1 only 4 test speakers have 2*L=2 utterances (N must be in 2..4)"),
    (Grid(populations=(5,), candidates=(2,), lengths=(1,), short_speakers="drop"),
     "reidentification.populations: N=5 but at L=1 only 3 test speakers have (M+1)*L=10 utterances "
     "(N must be in 2..3)"),
    (Grid(populations=(2,), candidates=(2,), lengths=(13,)),
     "reidentification.lengths: L=13 but the test speakers have at most 12 utterances"),
    (Grid(populations=(2,), candidates=(2,), lengths=(6,)),
     "reidentification.lengths: at L=6 a speaker needs 2*L=12 test utterances for singling out, and no enrolled "
     "test speaker has that many (they have at most 10: L <= 5)"),
    (Grid(populations=(2,), candidates=(2,), lengths=(2,), short_speakers="drop"),
     "reidentification.calibration_conversations=9: at L=2 a speaker needs (M+1)*L=20 test utterances for singling "
     "out, and no enrolled test speaker has that many (they have at most 10: M <= 4)"),
    (Grid(populations=(2,), candidates=(4,), lengths=(1,)),
     "reidentification.candidates: N'=4 but 3 speakers are enrolled (N' must be in 2..3)"),
    (Grid(populations=(), candidates=(2,), lengths=(11,)),
     "reidentification.lengths: L=11 but no enrolled test speaker has that many utterances"),
    (Grid(populations=(2,), candidates=(2,), lengths=(1,), short_speakers="keep"),
     "reidentification.short_speakers=keep: must be calibrate or drop"),
])
def test_grid_the_data_cannot_serve_is_refused_in_one_line(grid, message):
    counts = {"a": 12, "b": 10, "c": 10, "d": 3}
    with pytest.raises(VpevalError) as error:
        check_grid(grid, counts, {"b", "c", "x"})
    assert str(error.value).startswith(message + "; the largest grid that fits: ")
    with pytest.raises(VpevalError, match=r"^reidentification.populations \(dev_f\): N=5"):
        check_grid(Grid(populations=(5,), candidates=(2,), lengths=(1,)), counts, {"a"}, data="dev_f")
