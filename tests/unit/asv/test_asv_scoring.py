"""Scoring backends, enrolment means, trial scoring and score files."""
import hydra
import numpy as np
import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from pipeline.asv.scoring import (
    CosineBackend,
    enrolment_vectors,
    length_normalise,
    score_trials,
    write_scores,
)
from pipeline.core.config import REPO_ROOT, compose
from pipeline.core.errors import VpevalError
from pipeline.data.manifest import Trial, Utterance
from pipeline.metrics import read_scores

CONF = REPO_ROOT / "conf"


def utterance(utt_id: str, speaker: str) -> Utterance:
    return Utterance(utt_id, speaker, "f", f"/nowhere/{utt_id}.flac", 1.0)


def test_cosine_values():
    backend = CosineBackend()
    enroll = np.array([[1.0, 0.0], [3.0, 4.0], [1.0, 1.0]])
    test = np.array([[2.0, 0.0], [-3.0, -4.0], [1.0, -1.0]])
    np.testing.assert_allclose(backend.score(enroll, test), [1.0, -1.0, 0.0], atol=1e-12)


def test_mean_subtraction_uses_the_mean_of_length_normalised_training_embeddings():
    train = np.array([[10.0, 0.0], [0.0, 1.0], [0.0, 3.0]])
    backend = CosineBackend(mean_subtraction=True).fit(train, ["a", "b", "b"])
    mean = np.array([1.0, 2.0]) / 3  # normalised rows: (1, 0), (0, 1), (0, 1)
    np.testing.assert_allclose(backend.mean, mean)
    enroll, test = np.array([[2.0, 1.0]]), np.array([[1.0, 3.0]])
    a = enroll[0] / np.linalg.norm(enroll[0]) - mean
    b = test[0] / np.linalg.norm(test[0]) - mean
    expected = a @ b / np.linalg.norm(a) / np.linalg.norm(b)
    np.testing.assert_allclose(backend.score(enroll, test), [expected])
    assert abs(expected - CosineBackend().score(enroll, test)[0]) > 0.05


def test_mean_subtraction_needs_fit():
    with pytest.raises(VpevalError, match="fit"):
        CosineBackend(mean_subtraction=True).score(np.ones((1, 2)), np.ones((1, 2)))


def test_enrolment_vector_is_mean_of_length_normalised_embeddings():
    utts = [utterance("a1", "A"), utterance("b1", "B"), utterance("a2", "A")]
    embeddings = np.array([[4.0, 0.0], [0.0, 2.0], [0.0, 1.0]])
    vectors = enrolment_vectors(utts, embeddings)
    np.testing.assert_allclose(vectors["A"], [0.5, 0.5])
    np.testing.assert_allclose(vectors["B"], [0.0, 1.0])


def test_score_trials_in_trial_order_and_unknown_names():
    utts = [utterance("a1", "A"), utterance("a2", "A"), utterance("b1", "B")]
    embeddings = np.array([[1.0, 0.0], [10.0, 0.0], [0.0, 1.0]])
    tests = {"t1": np.array([1.0, 0.0]), "t2": np.array([1.0, 1.0])}
    trials = [Trial("A", "t1", True), Trial("B", "t1", False), Trial("B", "t2", True)]
    scores = score_trials(CosineBackend(), utts, embeddings, tests, trials)
    np.testing.assert_allclose(scores, [1.0, 0.0, np.sqrt(0.5)])
    with pytest.raises(VpevalError, match="speaker 'C'"):
        score_trials(CosineBackend(), utts, embeddings, tests, [Trial("C", "t1", True)])
    with pytest.raises(VpevalError, match="test utterance 't3'"):
        score_trials(CosineBackend(), utts, embeddings, tests, [Trial("A", "t3", True)])


def test_score_file_round_trip(tmp_path):
    trials = [Trial("A", "t1", True), Trial("B", "t1", False)]
    path = write_scores(tmp_path / "scores", trials, np.array([0.123456789, -0.5]))
    assert path.read_text().splitlines() == ["A t1 0.123456789 target", "B t1 -0.5 nontarget"]
    parsed = read_scores(path)
    np.testing.assert_allclose(parsed.target_scores, [0.123456789])
    np.testing.assert_allclose(parsed.nontarget_scores, [-0.5])


@pytest.mark.parametrize("name, mean_subtraction", [("cosine", False), ("cosine_mean", True)])
def test_backend_configs_instantiate(name, mean_subtraction):
    backend = instantiate(OmegaConf.load(CONF / "backend" / f"{name}.yaml"))
    assert isinstance(backend, CosineBackend)
    assert backend.mean_subtraction is mean_subtraction and backend.name == name


def test_enrolment_rules_on_a_hand_computed_case():
    """Speaker A enrols with (4, 0) and (0, 1), tried against (1, 1). VPC 2026 (mean of the
    L2-normalised rows): model (0.5, 0.5), cosine 1. VPC 2024 (mean of the raw rows): model
    (2, 0.5), cosine 2.5 / (sqrt(4.25) sqrt(2))."""
    utts = [utterance("a1", "A"), utterance("a2", "A")]
    embeddings = np.array([[4.0, 0.0], [0.0, 1.0]])
    trials, tests = [Trial("A", "t", True)], {"t": np.array([1.0, 1.0])}
    normalised = CosineBackend(enrolment="mean_normalised")
    raw = CosineBackend(enrolment="mean_raw")
    np.testing.assert_allclose(enrolment_vectors(utts, embeddings, normalised)["A"], [0.5, 0.5])
    np.testing.assert_allclose(enrolment_vectors(utts, embeddings, raw)["A"], [2.0, 0.5])
    np.testing.assert_allclose(score_trials(normalised, utts, embeddings, tests, trials), [1.0])
    np.testing.assert_allclose(score_trials(raw, utts, embeddings, tests, trials), [2.5 / np.sqrt(4.25 * 2)])
    # one enrolment utterance: both rules give the same cosine (it ignores scale)
    one = [utterance("a1", "A")]
    assert score_trials(raw, one, embeddings[:1], tests, trials) == pytest.approx(
        score_trials(normalised, one, embeddings[:1], tests, trials))


def test_unknown_enrolment_rule_names_the_key():
    with pytest.raises(VpevalError, match="^backend.enrolment=median: must be mean_normalised or mean_raw$"):
        CosineBackend(enrolment="median")


@pytest.mark.parametrize("overrides, line", [
    (["backend.enrolment=median"], "backend.enrolment=median: must be mean_normalised or mean_raw"),
    (["backend=plda", "backend.enrolment=avg"], "backend.enrolment=avg: must be multi or mean"),
    (["backend=plda", "backend.lda_dim=0"], "backend.lda_dim=0: must be null or an integer >= 1 (dimensions)"),
])
def test_the_settings_check_refuses_a_bad_backend_before_any_stage(overrides, line):
    """Regression: a backend value the class refuses was met only when the first condition was
    scored, after the attacker had trained; the class's checks now run with the settings check."""
    from pipeline.app.settings import problems

    assert problems(compose(overrides)) == [line]


def test_sign_embeddings_on_a_hand_computed_case():
    """VPC 2026's ecapa_ssl vectors: A enrols with (4, -0.1) and (-2, 3) -> signs (1, -1) and
    (-1, 1), mean (0, 0)... so use a third, (0.5, 2) -> (1, 1): mean (1/3, 1/3); the test
    (-0.2, 5) -> (-1, 1): cosine 0. Raw embeddings would give another score."""
    utts = [utterance("a1", "A"), utterance("a2", "A"), utterance("a3", "A")]
    embeddings = np.array([[4.0, -0.1], [-2.0, 3.0], [0.5, 2.0]])
    trials, tests = [Trial("A", "t", True)], {"t": np.array([-0.2, 5.0])}
    sign = CosineBackend(enrolment="mean_raw", embedding="sign")
    np.testing.assert_allclose(enrolment_vectors(utts, embeddings, sign)["A"], [1 / 3, 1 / 3])
    np.testing.assert_allclose(score_trials(sign, utts, embeddings, tests, trials), [0.0], atol=1e-12)
    assert score_trials(CosineBackend(enrolment="mean_raw"), utts, embeddings, tests, trials)[0] > 0.5
    with pytest.raises(VpevalError, match="^backend.embedding=binary: must be raw or sign$"):
        CosineBackend(embedding="binary")


@pytest.mark.parametrize("name, rule, embedding", [
    ("cosine", "mean_normalised", np.ndarray), ("cosine_vpc2024", "mean_raw", np.ndarray),
    ("cosine_vpc2026", "mean_raw", np.sign), ("cosine_mean", "mean_normalised", np.ndarray)])
def test_named_scoring_rules_compose(name, rule, embedding):
    with hydra.initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = hydra.compose("config", overrides=[f"backend={name}"])
    backend = instantiate(cfg.backend)
    assert isinstance(backend, CosineBackend) and backend.enrolment == rule and backend.name == name
    assert (backend.embedding is np.sign) == (embedding is np.sign)


def test_vpc2024_recipe_scores_by_vpc2024_rule():
    with hydra.initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = hydra.compose("config", overrides=["+experiment=vpc2024", "data.root=/nowhere"])
    assert cfg.backend.name == "cosine_vpc2024" and cfg.backend.enrolment == "mean_raw"


def test_length_normalise_keeps_zero_rows():
    np.testing.assert_allclose(length_normalise(np.array([[0.0, 0.0], [3.0, 4.0]])), [[0, 0], [0.6, 0.8]])
