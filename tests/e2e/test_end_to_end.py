"""The whole experiment on a tiny synthetic corpus with a tiny attacker: every stage's
outputs, the signal (OO well below chance, AA above OO), a second run that does no stage
work, a changed parameter that re-runs only what depends on it, and a sweep that reaches a
fitted detection line."""
import json
from pathlib import Path

import pytest

from pipeline.app.aggregate import aggregate
from pipeline.app.experiment import run_experiment
from pipeline.app.utility import NO_WORDS
from pipeline.core.cache import DONE
from pipeline.core.config import REPO_ROOT, compose
from pipeline.data.audio import write_audio
from pipeline.data.manifest import read_manifest, read_trials
from pipeline.metrics.detection import VERDICTS
from pipeline.metrics.registry import unlisted_utility_keys
from pipeline.metrics.results import RunSummary, SweepSummary
from tests.helpers import EMOTIONS, emotion_folder, kaldi_dir, schema_problems, tone

STAGES = {"prepare", "validate", "anonymize", "split", "train", "extract", "score", "evaluate", "confidence",
          "similarity", "pitch"}
SCHEMA = REPO_ROOT / "docs" / "results.schema.json"
SETS = ["dev_f", "dev_m", "test_f", "test_m", "val_f", "val_m"]


def overrides(data: Path, *extra: str) -> list[str]:
    return [f"paths.data={data}", "data=synthetic_tiny", "attacker=ecapa_tiny", "device=cpu", *extra]


def results(report: Path) -> RunSummary:
    return RunSummary.from_json(report / "results.json")


def built(report: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for event in results(report).stages:
        if not event.reused:
            out.setdefault(event.stage, []).append(event.path)
    return out


@pytest.fixture(scope="module")
def first(tmp_path_factory):
    data = tmp_path_factory.mktemp("data")
    return data, run_experiment(compose(overrides(data)), data / "runs" / "first")


def test_report_has_every_condition(first):
    _, report = first
    found = results(report)
    assert [(r.attack, r.set) for r in found.records] == [(a, s) for a in ("OO", "AA") for s in SETS]
    for record in found.records:
        assert 0 <= record.eer <= 1 and record.metrics["n_target"] > 0 and record.metrics["n_nontarget"] > 0
        assert {"eer_threshold", "cllr", "min_cllr"} <= record.metrics.keys()
    oo, aa = (r for r in found.records if r.set == "test_f")
    assert (oo.anonymizer, oo.attacker_anonymizer) == ("original", "original")
    assert (aa.anonymizer, aa.attacker_anonymizer) == ("mcadams", "mcadams")
    assert [d.attack for d in found.detection] == ["OO", "AA"]
    assert found.detection[0].relative_drop is not None
    assert found.detection[1].verdict == "undetermined"  # too few validation speakers, and detect.trusted not set
    assert "detect.trusted" in found.detection[1].reason, found.detection[1].reason
    low, high = found.detection[1].relative_drop_ci
    assert low <= found.detection[1].relative_drop <= high
    assert all(r.eer_ci_low <= r.eer <= r.eer_ci_high for r in found.records)
    text = (report / "report.md").read_text()
    assert "| AA | test_m | mcadams | mcadams |" in text and "EER_val" in text
    assert (report / "results.csv").read_text().count("\n") == len(found.records) + 1
    assert "data:image/png;base64," in (report / "report.html").read_text()
    assert {"detection.png", "det.png", "ece_profiles.png"} <= {p.name for p in (report / "figures").iterdir()}


def test_results_json_fits_the_published_schema(first):
    """docs/results.schema.json (generated from `pipeline.metrics.results`) describes what a run writes."""
    _, report = first
    assert schema_problems(json.loads((report / "results.json").read_text()), json.loads(SCHEMA.read_text())) == []


def test_attacks_carry_signal(first):
    """OO well below chance; anonymisation makes the attack harder (AA above OO)."""
    _, report = first
    test = {(r.attack, r.set): r.eer for r in results(report).records if r.set.startswith("test_")}
    oo = (test[("OO", "test_f")] + test[("OO", "test_m")]) / 2
    aa = (test[("AA", "test_f")] + test[("AA", "test_m")]) / 2
    assert oo < 0.35 < 0.5
    assert aa > oo


def test_per_speaker_risk_of_every_condition(first):
    """Every condition lists its speakers' EERs and ZEBRA; the attack on original speech works
    for the average speaker too (clipped mean well below chance)."""
    _, report = first
    records = results(report).records
    for r in records:
        assert r.metrics["speakers"] == len(r.metrics["speaker_eers"]) == len(r.metrics["speaker_zebra"]) > 0
        assert 0 <= r.metrics["eer_speaker_clipped_mean"] <= min(0.5, r.metrics["eer_speaker_mean"] + 1e-12)
        assert r.metrics["least_protected_speakers"] and r.metrics["zebra_least_protected"]
        assert max(s["l_w"] for s in r.metrics["speaker_zebra"]) == r.metrics["l_w"]
    oo = [r.metrics["eer_speaker_clipped_mean"] for r in records if r.attack == "OO" and r.set.startswith("test_")]
    assert sum(oo) / len(oo) < 0.35
    assert "## Per-speaker risk" in (report / "report.md").read_text()
    assert (report / "figures" / "speaker_eer.png").is_file()


def test_a_sweep_reaches_a_fitted_line(first):
    """Three trusted matched systems calibrate the gap model; a mismatched pair is judged
    against it, and against the matched attacker scored on the same trials (column test)."""
    data, _ = first
    sweep = data / "runs" / "sweep"
    points = [("mcadams", "mcadams"), ("mcadams_fixed", "mcadams_fixed"), ("mcadams_a07_09", "mcadams_a07_09"),
              ("mcadams", "mcadams_fixed")]
    trusted = "detect.trusted=[mcadams,mcadams_fixed,mcadams_a07_09]"
    # 12 training speakers per gender: without a selection protocol 5 per gender give EER_val, the
    # speakers a per-gender bootstrap needs (with select_fraction 0.5 only 3 would); EER_test needs
    # as many test speakers (synthetic_tiny has 3 per gender), or no pair is judged
    for number, (evaluated, attacker) in enumerate(points):
        cfg = compose(overrides(data, f"anonymizer={evaluated}", f"anonymizer@attacker_anonymizer={attacker}",
                                "eval_splits=[test]", "similarity=false", "~attacks.OO", "split.select_fraction=null",
                                "data.generate.subsets.test-synth.female=5",
                                "data.generate.subsets.test-synth.male=5", trusted))
        run_experiment(cfg, sweep / str(number))
    path = aggregate(sweep) / "results.json"
    assert schema_problems(json.loads(path.read_text()), json.loads(SCHEMA.read_text())) == []
    found = SweepSummary.from_json(path)
    (fit,) = found.detection_fit
    assert fit["n_points"] == 3 and fit["method"] == "gap" and "mean_gap" in fit
    (judged,) = [d for d in found.detection if d.attacker_anonymizer != d.anonymizer]
    assert judged.role == "judged" and judged.verdict in VERDICTS and judged.margin > 0
    assert judged.residual_ci[0] <= judged.residual <= judged.residual_ci[1]
    assert judged.column["other"] == "mcadams (AA)" and judged.column["comparisons"] == 2


def test_report_has_voice_similarity_of_every_set(first):
    _, report = first
    similarity = results(report).similarity
    assert list(similarity) == SETS[:-2]
    for name, sim in similarity.items():
        assert {"deid", "g_vd", "d_diag", "d_ece_op_oo", "cllr_min_op_oo", "g_dece_pp_oo", "g_cllr_pp_oo"} <= sim.keys()
        assert set(sim["deid"]) == {"sigmoid_mean_llr", "geometric_mean", "mean_llr"}
        n = sim["n_trials"]["oo"]
        assert sim["n_trials"] == {"oo": n, "op": 2 * n, "pp": n} and n > 0
        assert (report / "figures" / f"similarity_{name}.png").is_file()
        assert all((Path(sim["folder"]) / f"{t}.txt").is_file() for t in ("oo", "op", "pp"))
    assert "## Voice similarity matrices" in (report / "report.md").read_text()
    assert (report / "similarity.csv").read_text().count("\n") == len(similarity) + 1
    assert results(report).config.similarity is True


def test_report_has_utility_beside_privacy_and_says_what_was_skipped(first):
    _, report = first
    utility = results(report).utility
    assert list(utility["sets"]) == SETS[:-2] and list(utility["splits"]) == ["dev", "test"]
    assert all(-1 <= values["pitch_correlation"] <= 1 and values["utterances"] > 0 for values in utility["sets"].values())
    assert utility["skipped"]["wer"] == NO_WORDS
    assert utility["skipped"]["emotion"].startswith("off: set emotion.folder")
    assert unlisted_utility_keys(utility) == []  # every value has its column in the metric contract
    text = (report / "report.md").read_text()
    assert (text.index("## Verdicts") < text.index("## Overestimation") < text.index("## Privacy metrics")
            < text.index("## Utility metrics") < text.index("## Settings"))
    assert f"wer skipped: {NO_WORDS}." in text
    assert (report / "figures" / "privacy_utility.png").is_file()


def test_a_bad_emotion_model_is_skipped_and_privacy_completes(first, tmp_path):
    data, report = first
    labelled = tmp_path / "iemocap"
    rows = [(f"e{i}", f"s{i}", "f", str(write_audio(labelled / f"e{i}.flac", tone(0.5, 120 + 10 * i), 16000)))
            for i in range(2)]
    kaldi_dir(labelled, rows)
    (labelled / "utt2emo").write_text("e0 ang\ne1 neu\n")
    run = run_experiment(compose(overrides(data, f"emotion.folder={tmp_path / 'nomodel'}", f"emotion.data={labelled}")),
                         data / "runs" / "bad_emotion")
    assert results(run).records == results(report).records
    assert results(run).utility["skipped"]["emotion"] == f"{tmp_path / 'nomodel'}: emotion.folder folder not found"
    assert f"emotion skipped: {tmp_path / 'nomodel'}: emotion.folder folder not found." in (run / "report.md").read_text()


def test_vpcs_fold_models_classify_each_speaker_in_a_run(first, tmp_path):
    """emotion=vpc_ser on the SER fixture (VPC's fold layout, tests/fixtures/vpc_ser) through a
    whole run: McAdams anonymises the IEMOCAP-layout data, each speaker is classified by the model
    of its fold, and the report says so."""
    import shutil

    from tests.helpers import FIXTURES

    data, report = first
    vpc = Path(shutil.copytree(FIXTURES / "vpc_ser", tmp_path / "vpc"))
    run = run_experiment(compose(overrides(data, "emotion=vpc_ser", "utility.uar_rule=vpc",
                                           f"emotion.folder={vpc / 'exp' / 'ser'}",
                                           f"emotion.data={vpc / 'data' / 'IEMOCAP_dev'}",
                                           f"+emotion.overrides.wav2vec2_hub={vpc / 'wav2vec2_hub'}")),
                         data / "runs" / "emotion_folds")
    emotion = results(run).utility["emotion"]
    expected = json.loads((vpc / "expected.json").read_text())["evaluate_ser"]["original"]["UAR"]
    assert 100 * emotion["uar_original"] == pytest.approx(expected, abs=1e-3)  # VPC's value, as in the unit test
    assert 0 <= emotion["uar_anonymized"] <= 1 and emotion["models"] == "3 folds (spk2fold)"
    assert "| 3 folds (spk2fold) |" in (run / "report.md").read_text()
    assert results(run).records == results(report).records


def test_a_working_emotion_model_gives_the_uar_of_both_sides(first, tmp_path):
    """Regression: with a model that loads, the emotion stage's anonymisation call lacked its list
    name and the run died with a TypeError before the report (only a bad model was tested)."""
    data, report = first
    labelled = tmp_path / "iemocap"
    kaldi_dir(labelled, [(f"e{i}", f"s{i % 2}", "fm"[i % 2], str(write_audio(labelled / f"e{i}.flac",
                                                                          tone(0.5, 120 + 10 * i), 16000)))
                         for i in range(4)])
    (labelled / "utt2emo").write_text("".join(f"e{i} {emotion}\n" for i, emotion in enumerate(EMOTIONS)))
    run = run_experiment(compose(overrides(data, f"emotion.folder={emotion_folder(tmp_path / 'model')}",
                                           f"emotion.data={labelled}")),
                         data / "runs" / "emotion")
    emotion = results(run).utility["emotion"]
    assert emotion["utterances"] == 4 and set(emotion["classes"]) <= set(EMOTIONS)
    assert 0 <= emotion["uar_original"] <= 1 and 0 <= emotion["uar_anonymized"] <= 1 and emotion["uar_rule"] == "pooled"
    assert unlisted_utility_keys(results(run).utility) == []
    assert results(run).records == results(report).records


def test_every_stage_wrote_complete_outputs(first):
    _, report = first
    stages = built(report)
    assert set(stages) == STAGES
    for paths in stages.values():
        assert all((Path(p) / DONE).is_file() for p in paths)
    assert len(stages["train"]) == 2  # original and anonymised attackers
    for folder in stages["anonymize"]:
        utts = read_manifest(Path(folder) / "manifest.jsonl")
        assert all(Path(u.path).is_file() and Path(u.path).is_relative_to(folder) for u in utts)
    for folder in stages["train"]:
        assert (Path(folder) / "model.pt").is_file() and (Path(folder) / "model.json").is_file()
    for folder in stages["score"]:
        lines = (Path(folder) / "scores.txt").read_text().splitlines()
        assert lines and all(len(line.split()) == 4 for line in lines)
    prepared = Path(stages["prepare"][0])
    assert (prepared / "kaldi" / "synth_test_trials_f" / "trials").is_file()
    assert read_trials(prepared / "trials" / "test_trials_m.txt")


def test_second_run_does_no_stage_work(first):
    data, report = first
    again = run_experiment(compose(overrides(data)), data / "runs" / "second")
    assert built(again) == {}
    assert results(again).records == results(report).records
    assert results(again).config_hash == results(report).config_hash


def test_training_curves_are_linked_and_change_no_stage(first):
    """The attackers trained by the run log TensorBoard curves in its folder, named in the report;
    a run with curves off reuses every stage, computes the same and names the training logs."""
    pytest.importorskip("tensorboard")
    data, report = first
    curves = report.parent / "curves"
    trained = sorted(Path(path).name for path in built(report)["train"])
    assert sorted(p.name for p in curves.iterdir() if p.is_dir()) == [f"attacker_{name}" for name in trained]
    assert all(list((curves / f"attacker_{name}").glob("events.out.tfevents.*")) for name in trained)
    text = (report / "report.md").read_text()
    assert "## Training curves" in text and f"`tensorboard --logdir {curves}`" in text
    off = run_experiment(compose(overrides(data, "curves.backend=none")), data / "runs" / "no_curves")
    assert built(off) == {} and results(off).records == results(report).records
    assert results(off).config_hash == results(report).config_hash
    assert not (off.parent / "curves").exists()
    assert "/training_log.jsonl`" in (off / "report.md").read_text()


def test_changed_alpha_reruns_anonymisation_and_what_follows_only(first):
    data, report = first
    changed = run_experiment(compose(overrides(data, "anonymizer.alpha=[0.6,0.7]")), data / "runs" / "alpha")
    stages = built(changed)
    assert "prepare" not in stages and "validate" not in stages
    assert {"anonymize", "split", "train", "extract", "score", "evaluate", "confidence", "pitch"} <= set(stages)
    assert len(stages["train"]) == 1  # the attacker on original data is reused
    before = {(r.attack, r.set): r.eer for r in results(report).records}
    after = {(r.attack, r.set): r.eer for r in results(changed).records}
    assert all(after[k] == before[k] for k in before if k[0] == "OO")


def test_similarity_off_builds_nothing_and_reports_none(first):
    data, _ = first
    off = run_experiment(compose(overrides(data, "similarity=false")), data / "runs" / "no_similarity")
    assert built(off) == {}
    assert results(off).similarity is None and not (off / "similarity.csv").exists()
    assert results(off).config.similarity is False


def test_mixed_gender_trials_are_reported_apart_and_carry_signal(tmp_path):
    """data.eval_trials=both: the rows <split>_mixed beside <split>_f and _m; the mixed list holds
    both same-gender lists and cross-gender non-targets, which the attacker scores lower than
    same-gender ones (the genders are easy to tell apart)."""
    report = run_experiment(compose(overrides(tmp_path, "data.eval_trials=both", "eval_splits=[test]",
                                              "~attacks.AA", "similarity=false", "utility.wer=false",
                                              "utility.pitch_correlation=false")), tmp_path / "runs" / "mixed")
    found = results(report)
    rows = {r.set: r.metrics for r in found.records}
    assert [r.set for r in found.records] == ["test_f", "test_m", "test_mixed", "val_f", "val_m"]
    mixed = rows["test_mixed"]
    assert mixed["n_target"] == rows["test_f"]["n_target"] + rows["test_m"]["n_target"]
    assert mixed["n_nontarget"] > rows["test_f"]["n_nontarget"] + rows["test_m"]["n_nontarget"]
    assert mixed["eer"] < 0.35
    lines = [line.split() for line in Path(found.score_files["OO/test_mixed"]).read_text().splitlines()]
    same = {(t.enroll, t.test) for g in "fm" for t in read_trials(next(tmp_path.glob(f"cache/prepare/*/trials/"
                                                                                       f"test_trials_{g}.txt")))}
    cross = [float(s) for e, t, s, label in lines if (e, t) not in same]
    same_nontarget = [float(s) for e, t, s, label in lines if (e, t) in same and label == "nontarget"]
    assert cross and sum(cross) / len(cross) < sum(same_nontarget) / len(same_nontarget)
    assert "test_mixed" in (report / "report.md").read_text()


def test_reidentification_on_builds_only_evaluate_and_carries_signal(first):
    """The rates join every condition's record and only the evaluate stage is built again (and
    validate, keyed by the evaluation splits, unless an earlier test validated [test]); on
    original speech the true speaker beats a random other enrolled speaker more often than
    chance and its similarity rank discloses information."""
    data, _ = first
    grid = ["reidentification.enabled=true", "reidentification.populations=[2]", "reidentification.candidates=[2]",
            "reidentification.lengths=[1]", "reidentification.calibration_conversations=1", "eval_splits=[test]"]
    run = run_experiment(compose(overrides(data, *grid)), data / "runs" / "reidentification")
    assert set(built(run)) - {"validate"} == {"evaluate"}
    records = [r for r in results(run).records if r.set.startswith("test_")]
    for r in records:
        singling_out, identification = r.rates  # one grid cell each: N = N' = 2, L = 1
        assert (singling_out.metric, singling_out.n, singling_out.length) == ("singling_out_rate", 2, 1)
        assert 0 <= singling_out.low <= singling_out.value <= singling_out.high
        assert (identification.metric, identification.n, identification.estimate["chance"]) == ("identification_rate",
                                                                                                 2, 0.5)
    oo = [r for r in records if r.attack == "OO"]
    assert sum(r.rates[1].value for r in oo) / len(oo) > 0.5
    # on average: with 2 candidates and 8 items one list's ranks can split 4 / 4 (0 bits) for this tiny attacker
    assert sum(r.metrics["rank_disclosure_bits"] for r in oo) / len(oo) > 0, [(r.set, r.metrics["rank_disclosure_bits"])
                                                                             for r in oo]
    assert "## Re-identification" in (run / "report.md").read_text() and (run / "figures" / "reidentification.png").is_file()
