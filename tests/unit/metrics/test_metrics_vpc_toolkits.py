"""vpeval's metrics against what the VoicePrivacy toolkits' own code computed on fixed inputs
(tests/fixtures/vpc_metrics/README.md: VPC 2024's metric modules and VPC 2022's voice
similarity scripts, run outside the repository). Equal where the toolkits are right; where
they differ, the difference is pinned with its cause (docs/metrics.md, "Against the
VoicePrivacy toolkits' own code")."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from pipeline.metrics.cllr import cllr, min_cllr, pav_llrs
from pipeline.metrics.eer import eer
from pipeline.metrics.linkability import linkability
from pipeline.metrics.similarity import TrialTable, similarity_metrics
from pipeline.metrics.zebra import zebra
from pipeline.stages.similarity import trial_tables

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "vpc_metrics"
EXPECTED = json.loads((FIXTURES / "expected.json").read_text())
SCORES = np.load(FIXTURES / "scores.npz")
TIED = ("half_point_ties", "integer_ties", "identical")  # tied target and non-target scores
CASES = list(EXPECTED["metrics"])
MONOTONICITY = 1e-6  # VPC's optimal_llr adds i * 1e-6 / N to the i-th sorted LLR


def scores(case: str) -> tuple[np.ndarray, np.ndarray]:
    return SCORES[f"{case}/tar"], SCORES[f"{case}/non"]


@pytest.mark.parametrize("case", CASES)
def test_linkability_zebra_and_cllr_equal_vpc2024(case):
    tar, non = scores(case)
    vpc = EXPECTED["metrics"][case]
    assert linkability(tar, non) == pytest.approx(vpc["linkability"], rel=1e-12, abs=1e-15)
    found = zebra(tar, non)
    assert found.d_ece == pytest.approx(vpc["d_ece"], abs=MONOTONICITY)
    assert found.l_w == pytest.approx(vpc["max_abs_llr"], rel=1e-9)
    assert found.tag == vpc["tag"]
    if case == "underflow":  # a posterior underflows to 0 in the toolkit: inf; vpeval stays finite
        assert vpc["cllr"] == math.inf and 100 < cllr(tar, non) < math.inf
    else:
        assert cllr(tar, non) == pytest.approx(vpc["cllr"], rel=1e-12)


@pytest.mark.parametrize("case", [c for c in CASES if c not in TIED])
def test_min_cllr_rocch_eer_and_calibration_equal_vpc2024_without_ties(case):
    tar, non = scores(case)
    vpc = EXPECTED["metrics"][case]
    assert min_cllr(tar, non) == pytest.approx(vpc["min_cllr"], abs=MONOTONICITY)
    assert eer(tar, non) == pytest.approx(vpc["rocch_eer"], abs=1e-15)
    for ours, theirs in zip(pav_llrs(tar, non, laplace=True), (SCORES[f"{case}/tar_llr"], SCORES[f"{case}/non_llr"])):
        assert np.abs(ours - theirs).max() <= MONOTONICITY


@pytest.mark.parametrize("case", TIED)
def test_on_ties_vpc2024_min_cllr_and_rocch_eer_favour_the_attacker(case):
    """The toolkit's optimal_llr sorts [non-targets, targets] stably, so tied non-targets lie
    below tied targets and PAV never pools them: its min Cllr and ROCCH-EER are those of the
    scores with every tie broken for the attacker. vpeval pools ties (BOSARIS)."""
    tar, non = scores(case)
    vpc = EXPECTED["metrics"][case]
    assert min_cllr(tar, non) > vpc["min_cllr"] + 0.02 and eer(tar, non) > vpc["rocch_eer"] + 0.01
    broken = tar + 1e-9 * np.maximum(1.0, np.abs(tar))  # each tied target nudged above its tied non-targets
    assert min_cllr(broken, non) == pytest.approx(vpc["min_cllr"], abs=MONOTONICITY)
    assert eer(broken, non) == pytest.approx(vpc["rocch_eer"], abs=1e-12)
    if case == "identical":  # two equal score sets carry no evidence
        assert (eer(tar, non), min_cllr(tar, non)) == pytest.approx((0.5, 1.0))


SIMILARITY = np.load(FIXTURES / "similarity.npz")
IDS, SPEAKERS = SIMILARITY["ids"], SIMILARITY["speakers"]
VPC_TABLES = {"oo": "osp_osp", "op": "osp_psp", "pp": "psp_psp"}


def vpc_table(name: str) -> TrialTable:
    """The trial list VPC 2022's create_trial.py wrote, with the scores the fixture gave it."""
    a, b = SIMILARITY[f"{name}/a"], SIMILARITY[f"{name}/b"]
    return TrialTable(SPEAKERS[a], IDS[a], SPEAKERS[b], IDS[b], score=SIMILARITY[f"{name}/score"])


def test_similarity_on_vpc2022_trial_lists_equals_its_matrices_deid_and_gvd():
    result = similarity_metrics(*(vpc_table(VPC_TABLES[name]) for name in ("oo", "op", "pp")))
    vpc = EXPECTED["similarity"]
    for ours, theirs in VPC_TABLES.items():
        assert result.speakers == SIMILARITY[f"{theirs}/speakers"].tolist()
        mine, matrix = result.matrices["sigmoid_mean_llr"][ours], SIMILARITY[f"{theirs}/matrix"]
        upper = np.triu_indices(len(matrix))
        assert np.abs(mine[upper] - matrix[upper]).max() < 1e-6
        if ours == "op":  # VPC lists (original i, anonymised j) for i <= j only and mirrors the cell
            assert np.isnan(mine[np.tril_indices(len(matrix), -1)]).all()
        else:
            assert np.abs(mine - matrix).max() < 1e-6
    assert result.deid["sigmoid_mean_llr"] == pytest.approx(vpc["deid"], abs=1e-6)
    assert result.g_vd["sigmoid_mean_llr"] == pytest.approx(vpc["g_vd"], abs=1e-6)


def test_similarity_with_every_op_pair_keeps_oo_pp_and_gvd_but_not_vpc2022s_deid():
    """vpeval's stage scores every (original, anonymised) pair; VPC 2022 half of them, mirrored."""
    tables = trial_tables(SIMILARITY["original"], SIMILARITY["anonymised"])
    result = similarity_metrics(*(TrialTable(SPEAKERS[a], IDS[a], SPEAKERS[b], IDS[b], score=score)
                                  for a, b, score in (tables[name] for name in ("oo", "op", "pp"))))
    for name in ("oo", "pp"):
        assert np.abs(result.matrices["sigmoid_mean_llr"][name] - SIMILARITY[f"{VPC_TABLES[name]}/matrix"]).max() < 1e-6
    assert result.g_vd["sigmoid_mean_llr"] == pytest.approx(EXPECTED["similarity"]["g_vd"], abs=1e-6)
    assert result.n_trials["op"] == 2 * len(SIMILARITY["osp_psp/score"])
    assert result.deid["sigmoid_mean_llr"] == pytest.approx(0.5425, abs=1e-4)  # VPC 2022: 0.7312


def speed(samples: np.ndarray, factor: float) -> np.ndarray:
    """Nearest-sample resampling, `factor` times faster: integer indexing, exact anywhere."""
    return samples[(np.arange(int(len(samples) / factor)) * factor).astype(int)]


def test_praat_tracker_and_vpc2022_rule_equal_the_toolkits_pitch_correlation():
    """VPC 2022's pitchCorr on five pairs of int16 utterances (pitch.json); vpeval reads audio
    as int16 / 2**15 in float32, which is exact."""
    pytest.importorskip("parselmouth")
    import soundfile

    from pipeline.metrics.pitch_correlation import correlation, track

    speech = FIXTURES.parent / "speech"
    wav = {name: soundfile.read(speech / f"{name}.flac", dtype="int16")[0] for name in ("speech1", "speech2", "speech3")}
    pairs = {"speech1 / 1.1x faster": (wav["speech1"], speed(wav["speech1"], 1.1)),
             "speech2 / 0.9x slower": (wav["speech2"], speed(wav["speech2"], 0.9)),
             "speech3 / itself": (wav["speech3"], wav["speech3"]),
             "speech1 / speech2": (wav["speech1"], wav["speech2"]),
             "speech3 / reversed": (wav["speech3"], wav["speech3"][::-1].copy())}
    expected = json.loads((FIXTURES / "pitch.json").read_text())["pitchCorr"]
    for name, (a, b) in pairs.items():
        tracks = [track((x / 2**15).astype(np.float32), 16000, "praat") for x in (a, b)]
        assert correlation(*tracks, "vpc2022") == pytest.approx(expected[name], abs=1e-12), name
    # the rule alone decides much: the reversed utterance correlates +0.27 by the toolkit's rule, -0.78 over
    # frames voiced in both
    reversed_tracks = [track((x / 2**15).astype(np.float32), 16000, "praat") for x in pairs["speech3 / reversed"]]
    assert correlation(*reversed_tracks, "voiced") < -0.7


def test_uar_rule_vpc_equals_the_toolkits_evaluate_ser():
    """VPC 2026's evaluate_ser (SpeechBrain backend; its classifier answering fixed labels) on 7
    speakers in 5 folds (uar.json): a UAR per speaker, sklearn's macro recall over the labels of
    its truth and predictions, then the mean; each ACC_<label> per speaker, then the mean. The
    toolkit rounds each speaker's values to 0.001 %."""
    from pipeline.metrics.uar import class_recalls, emotion_recall

    fixture = json.loads((FIXTURES / "uar.json").read_text())
    rows = fixture["utterances"]
    truth, speakers = [r["truth"] for r in rows], [r["speaker"] for r in rows]
    for kind, vpc in fixture["evaluate_ser"].items():
        uar, recalls = emotion_recall(truth, [r[kind] for r in rows], speakers, "vpc")
        assert 100 * uar == pytest.approx(vpc["UAR"], abs=1e-3)
        assert {c: 100 * v for c, v in recalls.items()} == pytest.approx({c: vpc[c] for c in recalls}, abs=1e-3)
        pooled, _ = emotion_recall(truth, [r[kind] for r in rows], speakers, "pooled")
        assert abs(100 * pooled - vpc["UAR"]) > 0.9  # the default pools: 76.77 / 47.43 against 73.21 / 46.43
    # spk3 never has `ang` but is predicted it: over its true emotions alone the original UAR would be 75.60
    original = [r["original"] for r in rows]
    truth_only = np.mean([np.mean(list(class_recalls([t for t, s in zip(truth, speakers) if s == k],
                                                     [p for p, s in zip(original, speakers) if s == k]).values()))
                          for k in sorted(set(speakers))])
    assert 100 * truth_only - fixture["evaluate_ser"]["original"]["UAR"] > 2
