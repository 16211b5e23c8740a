"""Two-covariance PLDA backend: reference formulas, EM, calibration on data drawn from the model, options."""
import numpy as np
import pytest
from scipy.stats import multivariate_normal

from pipeline.asv.plda import PLDABackend, TwoCovariancePLDA
from pipeline.asv.scoring import CosineBackend, length_normalise, score_trials
from pipeline.core.config import compose, instantiate
from pipeline.core.errors import VpevalError
from pipeline.data.manifest import Trial, Utterance
from pipeline.metrics import cllr, eer, min_cllr

DIM = 8


def true_model(seed: int = 0) -> TwoCovariancePLDA:
    """A known two-covariance model whose within-speaker variation is large along a few directions
    (where cosine scoring suffers) and whose speakers differ along others."""
    rng = np.random.default_rng(seed)
    rotation, _ = np.linalg.qr(rng.standard_normal((DIM, DIM)))
    between = rotation @ np.diag(np.geomspace(3.0, 0.3, DIM)) @ rotation.T
    within = rotation @ np.diag(np.geomspace(0.05, 4.0, DIM)) @ rotation.T
    return TwoCovariancePLDA(rng.normal(2.0, 1.0, DIM), between, within)


def draw(model: TwoCovariancePLDA, speakers: int, per_speaker: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(vectors, speaker labels) drawn from `model`."""
    rng = np.random.default_rng(seed)
    centres = rng.multivariate_normal(model.mean, model.between, size=speakers)
    labels = np.repeat(np.arange(speakers), per_speaker)
    return centres[labels] + rng.multivariate_normal(np.zeros(DIM), model.within, size=len(labels)), labels


def reference_llr(model: TwoCovariancePLDA, enrolment: np.ndarray, test: np.ndarray) -> float:
    """log p(enrolment, test | one speaker) - log p(enrolment | one speaker) - log p(test), from the
    joint Gaussians of the stacked vectors (the textbook definition)."""
    n = len(enrolment)

    def joint(count: int):
        covariance = np.kron(np.ones((count, count)), model.between) + np.kron(np.eye(count), model.within)
        return multivariate_normal(np.tile(model.mean, count), covariance)

    stacked = np.concatenate([enrolment.ravel(), test])
    return float(joint(n + 1).logpdf(stacked) - joint(n).logpdf(enrolment.ravel()) - joint(1).logpdf(test))


def reference_em_step(model: TwoCovariancePLDA, vectors: np.ndarray, labels: np.ndarray) -> TwoCovariancePLDA:
    """One EM iteration written speaker by speaker, straight from the equations."""
    between_precision, within_precision = np.linalg.inv(model.between), np.linalg.inv(model.within)
    posterior_means, posterior_covariances = [], []
    for speaker in np.unique(labels):
        own = vectors[labels == speaker]
        covariance = np.linalg.inv(between_precision + len(own) * within_precision)
        posterior_means.append(covariance @ (between_precision @ model.mean + within_precision @ own.sum(axis=0)))
        posterior_covariances.append(covariance)
    mean = np.mean(posterior_means, axis=0)
    between = np.mean([c + np.outer(m, m) for m, c in zip(posterior_means, posterior_covariances)], axis=0)
    within = np.zeros((DIM, DIM))
    for speaker, m, c in zip(np.unique(labels), posterior_means, posterior_covariances):
        for x in vectors[labels == speaker]:
            within += np.outer(x - m, x - m) + c
    return TwoCovariancePLDA(mean, between - np.outer(mean, mean), within / len(vectors))


def plda_space(backend: PLDABackend, x: np.ndarray) -> np.ndarray:
    """The vectors the backend's PLDA model describes (after centring, LDA, whitening, length norm)."""
    z = (x - backend.center) @ backend.projection
    return length_normalise(z) * np.sqrt(z.shape[1]) if backend.length_norm else z


@pytest.mark.parametrize("length_norm", [False, True])
@pytest.mark.parametrize("enrolled", [1, 3])
def test_llrs_equal_the_joint_gaussian_definition(length_norm, enrolled):
    vectors, labels = draw(true_model(), speakers=60, per_speaker=5, seed=1)
    backend = PLDABackend(length_norm=length_norm).fit(vectors, labels.tolist())
    enrolment, tests = draw(true_model(), speakers=4, per_speaker=enrolled + 1, seed=2)
    for speaker in range(4):
        own = enrolment[tests == speaker]
        for test in (own[-1], enrolment[tests == (speaker + 1) % 4][0]):
            fast = backend.score(backend.enrol(own[:enrolled])[None], test[None])[0]
            slow = reference_llr(backend.plda, plda_space(backend, own[:enrolled]), plda_space(backend, test[None])[0])
            assert fast == pytest.approx(slow, abs=1e-7)


def test_em_step_matches_the_per_speaker_equations():
    vectors, labels = draw(true_model(), speakers=30, per_speaker=1, seed=3)
    more, more_labels = draw(true_model(), speakers=30, per_speaker=4, seed=4)
    vectors, labels = np.concatenate([vectors, more]), np.concatenate([labels, more_labels + 30])  # counts 1 and 4
    start = TwoCovariancePLDA.fit(vectors, labels, iterations=1)
    after = TwoCovariancePLDA.fit(vectors, labels, iterations=2)
    expected = reference_em_step(start, vectors, labels)
    for name in ("mean", "between", "within"):
        np.testing.assert_allclose(getattr(after, name), getattr(expected, name), rtol=1e-9, atol=1e-12)


def test_em_recovers_the_model_it_was_drawn_from():
    model = true_model()
    vectors, labels = draw(model, speakers=2000, per_speaker=6, seed=5)
    fitted = TwoCovariancePLDA.fit(vectors, labels)
    np.testing.assert_allclose(fitted.within, model.within, atol=0.05 * np.abs(model.within).max())
    np.testing.assert_allclose(fitted.between, model.between, atol=0.1 * np.abs(model.between).max())


def trial_scores(backend, model: TwoCovariancePLDA, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(target, non-target) scores: 200 unseen speakers enrolled with 3 vectors, 2 test vectors each,
    every test vector against its own speaker and 5 others."""
    vectors, labels = draw(model, speakers=200, per_speaker=5, seed=seed)
    models = np.stack([backend.enrol(vectors[labels == s][:3]) for s in range(200)])
    tests = np.stack([vectors[labels == s][3:] for s in range(200)])  # (200, 2, DIM)
    target, nontarget = [], []
    for speaker in range(200):
        for test in tests[speaker]:
            target.append(backend.score(models[speaker][None], test[None])[0])
            others = (speaker + np.arange(1, 6)) % 200
            nontarget.extend(backend.score(models[others], np.repeat(test[None], 5, axis=0)))
    return np.array(target), np.array(nontarget)


def test_plda_llrs_are_calibrated_and_beat_cosine_on_two_covariance_data():
    model = true_model()
    train, labels = draw(model, speakers=400, per_speaker=6, seed=6)
    plda = PLDABackend(length_norm=False).fit(train, labels.tolist())
    target, nontarget = trial_scores(plda, model, seed=7)
    cosine_target, cosine_nontarget = trial_scores(CosineBackend(), model, seed=7)
    assert eer(target, nontarget) < 0.6 * eer(cosine_target, cosine_nontarget)
    calibration_loss = cllr(target, nontarget) - min_cllr(target, nontarget)  # bits
    assert calibration_loss < 0.03
    assert cllr(target + 5.0, nontarget + 5.0) - min_cllr(target, nontarget) > 0.15  # what a 5-nat offset costs
    # LLRs of the fitted model agree with those of the true one
    truth = [reference_llr(model, *pair) for pair in [(train[:3], train[3]), (train[:3], train[7])]]
    fitted = [plda.score(plda.enrol(train[:3])[None], test[None])[0] for test in (train[3], train[7])]
    np.testing.assert_allclose(fitted, truth, rtol=0.05, atol=0.5)


def test_multi_enrolment_differs_from_averaging_only_with_several_utterances():
    vectors, labels = draw(true_model(), speakers=50, per_speaker=4, seed=8)
    multi = PLDABackend().fit(vectors, labels.tolist())
    mean = PLDABackend(enrolment="mean").fit(vectors, labels.tolist())
    test = vectors[5][None]
    assert multi.score(multi.enrol(vectors[:1])[None], test) == pytest.approx(mean.score(mean.enrol(vectors[:1])[None], test))
    assert multi.score(multi.enrol(vectors[:4])[None], test) != pytest.approx(mean.score(mean.enrol(vectors[:4])[None], test))


def test_lda_keeps_at_most_speakers_minus_one_dimensions():
    vectors, labels = draw(true_model(), speakers=5, per_speaker=10, seed=9)
    backend = PLDABackend(lda_dim=6).fit(vectors, labels.tolist())
    assert backend.projection.shape == (DIM, 4) and backend.basis.shape == (4, 4)
    reduced = PLDABackend(lda_dim=3, length_norm=False).fit(vectors, labels.tolist())
    assert reduced.projection.shape == (DIM, 3)
    z = plda_space(reduced, vectors)
    np.testing.assert_allclose(np.cov(z.T, bias=True), np.eye(3), atol=1e-5)  # whitened after LDA (up to the ridge)
    scores = reduced.score(np.stack([reduced.enrol(vectors[:3])] * 2), vectors[[3, 15]])
    assert scores[0] > scores[1]


@pytest.mark.parametrize("lda_dim, length_norm, enrolment", [(None, True, "multi"), (4, False, "mean"), (4, True, "multi")])
def test_option_combinations_separate_speakers(lda_dim, length_norm, enrolment):
    model = true_model()
    train, labels = draw(model, speakers=150, per_speaker=5, seed=10)
    backend = PLDABackend(lda_dim=lda_dim, length_norm=length_norm, enrolment=enrolment).fit(train, labels.tolist())
    target, nontarget = trial_scores(backend, model, seed=11)
    assert np.isfinite(target).all() and np.isfinite(nontarget).all()
    assert eer(target, nontarget) < 0.15


def test_bad_input_is_refused_clearly():
    vectors, labels = draw(true_model(), speakers=5, per_speaker=3, seed=12)
    with pytest.raises(VpevalError, match="call fit"):
        PLDABackend().enrol(vectors[:2])
    with pytest.raises(VpevalError, match="at least 2 training speakers and one with several utterances"):
        PLDABackend().fit(vectors[:3], ["a", "a", "a"])
    with pytest.raises(VpevalError, match="at least 2 training speakers and one with several utterances"):
        PLDABackend().fit(vectors[:3], ["a", "b", "c"])
    with pytest.raises(VpevalError, match="^backend.enrolment=average: must be multi or mean$"):
        PLDABackend(enrolment="average")
    with pytest.raises(VpevalError, match=r"^backend.lda_dim=0: must be null or an integer >= 1 \(dimensions\)$"):
        PLDABackend(lda_dim=0)
    backend = PLDABackend().fit(vectors, labels.tolist())
    with pytest.raises(VpevalError, match="4-d embeddings, but fitted on 8-d"):
        backend.enrol(vectors[:2, :4])
    with pytest.raises(VpevalError, match="build them with enrol"):
        backend.score(vectors[:2], vectors[:2])


@pytest.mark.parametrize("name, lda_dim", [("plda", None), ("plda_lda", 128)])
def test_plda_configs_instantiate_and_score_trials(name, lda_dim):
    backend = instantiate(compose([f"backend={name}"]).backend)
    assert isinstance(backend, PLDABackend) and backend.needs_fit and backend.name == name
    assert backend.lda_dim == lda_dim and backend.enrolment == "multi" and backend.length_norm
    vectors, labels = draw(true_model(), speakers=40, per_speaker=6, seed=13)
    backend.fit(vectors[:180], [f"s{label}" for label in labels[:180]])
    utts = [Utterance(f"u{i}", f"t{labels[i]}", "f", f"/x/u{i}.flac", 1.0) for i in range(180, 240)]
    enrolls = [u for i, u in enumerate(utts) if i % 6 < 3]
    tests = {u.id: vectors[180 + i] for i, u in enumerate(utts) if i % 6 >= 3}
    trials = [Trial(f"t{s}", utt, labels[int(utt[1:])] == s) for s in range(30, 40) for utt in tests]
    scores = score_trials(backend, enrolls, np.stack([vectors[int(u.id[1:])] for u in enrolls]), tests, trials)
    target = np.array([t.target for t in trials])
    assert eer(scores[target], scores[~target]) < 0.15
