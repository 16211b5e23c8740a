"""Per-speaker risk (EER clipped at 50 %, linkability share), ZEBRA at the speaker level and
the log-domain diagonal dominance (noe2022 §8): hand-computed cases and exact decompositions
of the condition-level values."""
import math

import numpy as np
import pytest

from pipeline.metrics import linkability, similarity_metrics, zebra
from pipeline.metrics.contract import Condition
from pipeline.metrics.similarity import TrialTable
from pipeline.metrics.speaker_risk import SPEAKER_RISK, least_protected, speaker_risk
from pipeline.metrics.speaker_zebra import SPEAKER_ZEBRA, speaker_disclosure, trial_worst_case
from pipeline.metrics.zebra import MONOTONICITY_EPSILON


def test_an_inverted_speaker_counts_50_percent_in_the_clipped_mean():
    # a: targets above its non-targets (EER 0); b: targets below (sweep EER 100 %, ROCCH 50 %)
    tar, tar_spk = [3.0, 4.0, 1.0, 2.0], ["a", "a", "b", "b"]
    non, non_spk = [1.0, 2.0, 3.0, 4.0], ["a", "a", "b", "b"]
    risks, left_out = speaker_risk(tar, non, tar_spk, non_spk)
    by = {r.speaker: r for r in risks}
    assert left_out == [] and by["a"].eer == 0.0 and by["b"].eer == 1.0
    assert by["b"].eer_clipped == 0.5 and by["b"].eer_rocch == 0.5
    found = SPEAKER_RISK.compute(Condition(tar, non, np.array(tar_spk), np.array(non_spk)))
    assert found["eer_speaker_mean"] == 0.5 and found["eer_speaker_clipped_mean"] == 0.25
    assert found["least_protected_speakers"][0] == "a (0.0)"


def test_a_speaker_without_targets_is_left_out_and_counted():
    found = SPEAKER_RISK.compute(Condition([2.0, 3.0], [0.0, 1.0, 0.5], np.array(["a", "a"]), np.array(["a", "c", "c"])))
    assert found["speakers"] == 1 and found["speakers_left_out"] == 1


def _population(seed=4, n_speakers=9):
    rng = np.random.default_rng(seed)
    shift = rng.normal(0, 1.2, n_speakers)  # speakers differ in how well the attacker separates them
    tar_spk = np.repeat(np.arange(n_speakers), 25).astype(str)
    non_spk = np.repeat(np.arange(n_speakers), 120).astype(str)
    tar = np.round(1.5 + shift[tar_spk.astype(int)] + rng.normal(size=len(tar_spk)), 2)
    non = np.round(rng.normal(-1, 1, len(non_spk)), 2)  # rounded: ties between classes
    return tar, non, tar_spk, non_spk


def test_speaker_linkability_shares_average_to_the_condition_d_sys():
    tar, non, tar_spk, non_spk = _population()
    risks, _ = speaker_risk(tar, non, tar_spk, non_spk)
    weights = np.array([r.n_target for r in risks])
    shares = np.array([r.linkability for r in risks])
    assert np.sum(weights * shares) / weights.sum() == pytest.approx(linkability(tar, non), rel=1e-12)
    assert shares.max() - shares.min() > 0.2  # polarised speakers: the average hides the spread
    worst = least_protected(risks, 1)[0]
    assert worst.eer_clipped == min(r.eer_clipped for r in risks)


def test_speaker_zebra_by_hand():
    # sorted: non 0, tar 1, non 2, tar 3. PAV (no Laplace): bins {0}, {1, 2}, {3}: LLR -inf, 0, +inf.
    # a = (tar 3, non 0): Z(+inf) + Z(+inf) = 1 -> 1 / (2 ln 2) bits; b = (tar 1, non 2): Z(0) + Z(0) = 0.
    # l_w (reference: Laplace pseudo trials, + i 1e-6 / 4 at position i): bins {p, 0}, {1, 2}, {3, p} with
    # target fractions 1/3, 1/2, 2/3, LLR -ln 2, 0, ln 2; a: (ln 2 + 3 step) / ln 10; b: 2 step / ln 10.
    found, left_out = speaker_disclosure([1.0, 3.0], [0.0, 2.0], ["b", "a"], ["a", "b"])
    by = {d.speaker: d for d in found}
    step = MONOTONICITY_EPSILON / 4
    assert by["a"].d_ece == pytest.approx(1 / (2 * math.log(2)), rel=1e-12) and by["b"].d_ece == 0.0
    assert by["a"].l_w == pytest.approx((math.log(2) + 3 * step) / math.log(10), rel=1e-12)
    assert by["b"].l_w == pytest.approx(2 * step / math.log(10), rel=1e-9)
    assert by["a"].tag == "A" and by["b"].tag == "A" and left_out == []
    whole = zebra([1.0, 3.0], [0.0, 2.0])
    assert whole.d_ece == pytest.approx((by["a"].d_ece + by["b"].d_ece) / 2, rel=1e-12)
    assert whole.l_w == by["a"].l_w


def test_speaker_zebra_decomposes_the_condition_zebra():
    tar, non, tar_spk, non_spk = _population()
    found, _ = speaker_disclosure(tar, non, tar_spk, non_spk)
    whole = zebra(tar, non)
    assert max(d.l_w for d in found) == whole.l_w
    tar_lw, non_lw = trial_worst_case(tar, non)
    assert max(tar_lw.max(), non_lw.max()) == whole.l_w
    # equal trial counts per speaker: D_ECE is the mean of the speakers' D_ECE
    assert np.mean([d.d_ece for d in found]) == pytest.approx(whole.d_ece, rel=1e-10)
    values = SPEAKER_ZEBRA.compute(Condition(tar, non, tar_spk, non_spk))
    assert values["d_ece_speaker_max"] == max(d.d_ece for d in found)
    assert len(values["zebra_least_protected"]) == 3 and len(values["speaker_zebra"]) == 9


def _rows(segments, llr, pairs):
    return TrialTable.from_rows([(segments[x], x, segments[y], y, llr(segments[x], segments[y])) for x, y in pairs])


def test_log_domain_diagonal_dominance_by_hand():
    segments = {"a1": "a", "a2": "a", "b1": "b", "b2": "b"}
    names = sorted(segments)
    within = [(x, y) for i, x in enumerate(names) for y in names[i + 1:]]
    between = [(x, y) for x in names for y in names if x != y]
    oo_llr = {("a", "a"): 4.0, ("b", "b"): 2.0}
    op_llr = {("a", "a"): 1.0, ("b", "b"): 0.0}
    pp_llr = {("a", "a"): 2.0, ("b", "b"): 2.0}
    oo = _rows(segments, lambda s, t: oo_llr.get((s, t), -1.0), within)   # L_OO = [[4, -1], [-1, 2]]: D = 4
    op = _rows(segments, lambda s, t: op_llr.get((s, t), -0.5), between)  # L_OP = [[1, -.5], [-.5, 0]]: D = 1
    pp = _rows(segments, lambda s, t: pp_llr.get((s, t), 0.0), within)    # L_PP = [[2, 0], [0, 2]]: D = 2
    result = similarity_metrics(oo, op, pp, calibrated=False)
    np.testing.assert_allclose(result.matrices["mean_llr"]["oo"], [[4, -1], [-1, 2]])
    assert result.d_diag["mean_llr"] == pytest.approx({"oo": 4.0, "op": 1.0, "pp": 2.0})
    assert result.deid["mean_llr"] == pytest.approx(0.75)
    assert result.g_vd["mean_llr"] == pytest.approx(10 * math.log10(0.5))
    # the posterior-domain variant of the same matrices compresses the strong OO evidence
    sig = lambda v: 1 / (1 + math.exp(-v))
    d_oo = (sig(4) + sig(2)) / 2 - sig(-1)
    d_op = (sig(1) + sig(0)) / 2 - sig(-0.5)
    assert result.deid["sigmoid_mean_llr"] == pytest.approx(1 - d_op / d_oo)
    assert result.deid["sigmoid_mean_llr"] != pytest.approx(result.deid["mean_llr"], abs=0.1)


def test_the_report_lists_the_least_protected_speakers_and_draws_them(tmp_path):
    from pipeline.metrics.registry import METRICS
    from pipeline.metrics.results import ConditionResult
    from pipeline.metrics.summary import evaluate
    from pipeline.report.run_report import metrics_sections

    tar, non, tar_spk, non_spk = _population()
    metrics = evaluate(Condition(tar, non, tar_spk, non_spk), METRICS)
    records = [ConditionResult.measured(metrics, METRICS, attack="OO", set=name, anonymizer="original",
                                        attacker_anonymizer="original", enroll="original", trials="original")
               for name in ("test_f", "dev_f")]
    privacy, speakers = metrics_sections(records, "cosine", tmp_path)
    assert privacy.title == "Privacy metrics" and "EER CI %" in privacy.tables[0][0]
    headers, rows = speakers.tables[0]
    worst = least_protected(speaker_risk(tar, non, tar_spk, non_spk)[0], 3)
    cell = rows[0][headers.index("least protected speakers (clipped EER %)")]
    assert cell == ", ".join(f"{r.speaker} ({100 * r.eer_clipped:.1f})" for r in worst)
    assert speakers.figures == [tmp_path / "speaker_eer.png"] and speakers.figures[0].stat().st_size > 10_000


def test_vpeval_metrics_gives_the_speaker_metrics_of_a_file_that_names_speakers(tmp_path, capsys):
    from pipeline.app.metrics_cli import main

    tar, non, tar_spk, non_spk = _population()
    trials = tmp_path / "trials.txt"
    trials.write_text("".join(f"{s} u{i} {v} target\n" for i, (s, v) in enumerate(zip(tar_spk, tar)))
                      + "".join(f"{s} n{i} {v} nontarget\n" for i, (s, v) in enumerate(zip(non_spk, non))))
    labels = tmp_path / "labels.txt"
    labels.write_text("".join(f"{v} 1\n" for v in tar) + "".join(f"{v} 0\n" for v in non))
    assert main([str(trials), str(labels), "--json", str(tmp_path / "m.json")]) == 0
    printed = capsys.readouterr().out
    worst = least_protected(speaker_risk(tar, non, tar_spk, non_spk)[0], 3)
    assert "spkEERclip%" in printed and ", ".join(f"{r.speaker} ({100 * r.eer_clipped:.1f})" for r in worst) in printed
    assert "labels.txt: speaker_risk: needs the enrolment speaker" in printed
