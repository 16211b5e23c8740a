"""Sweep aggregation over hand-written job folders: EER matrix, detection, failed points."""
import json
from pathlib import Path

import pytest
from hydra.core.utils import JobReturn, JobStatus
from hydra.types import RunMode
from omegaconf import OmegaConf

from pipeline.app.aggregate import aggregate, main
from pipeline.app.sweep import AggregateCallback, error_line, record_failure
from pipeline.core.errors import VpevalError
from pipeline.metrics.results import JudgedPair, RunSummary
from tests.helpers import run_summary

SYSTEMS = {"s1": (0.20, 0.185), "s2": (0.27, 0.262), "s3": (0.33, 0.318), "s4": (0.40, 0.391)}  # (EER_test, EER_val)


def records(evaluated: str, attacker: str, eer_val: float, eer_test: float) -> list[dict]:
    base = {"attack": "AA", "anonymizer": evaluated, "attacker_anonymizer": attacker, "n_target": 10}
    return [{**base, "set": "test_f", "eer": eer_test}, {**base, "set": "test_m", "eer": eer_test},
            *({**base, "anonymizer": attacker, "set": f"val_{g}", "eer": eer_val} for g in "fm")]


def write_job(sweep: Path, num: int | str, evaluated: str, attacker: str, eer_val: float, eer_test: float,
              seed: int = 0, group: str = "synthetic/ecapa_tiny/cosine#abc123", test_speakers: int | None = None,
              ) -> None:
    job = sweep / str(num)
    (job / ".hydra").mkdir(parents=True, exist_ok=True)
    (job / ".hydra" / "overrides.yaml").write_text(
        f"- anonymizer={evaluated}\n- anonymizer@attacker_anonymizer={attacker}\n")
    oo = {"attack": "OO", "anonymizer": "original", "attacker_anonymizer": "original", "eer_val": 0.01,
          "eer_test": 0.02, "relative_drop": 0.5}
    aa = {"attack": "AA", "anonymizer": evaluated, "attacker_anonymizer": attacker, "eer_val": eer_val,
          "eer_test": eer_test, "relative_drop": (eer_test - eer_val) / eer_test, "gap_var": 1e-5,
          "test_speakers": test_speakers}
    run_summary(records(evaluated, attacker, eer_val, eer_test), [oo, aa], config_hash=f"h{num}",
                anonymizer=evaluated, attacker_anonymizer=attacker, seed=seed, detection_group=group,
                trusted="s1, s2, s3, s4", similarity={"test_f": voice_similarity(evaluated)},
                ).to_json(job / "report" / "results.json")


def voice_similarity(evaluated: str) -> dict:
    """A similarity-stage result as a job's results.json holds it; its folder depends only on
    the evaluated system (the attacker trained on original data measures it)."""
    level = 0.1 * int(evaluated[1:])
    return {"folder": f"/cache/similarity/{evaluated}", "speakers": ["a", "b"], "calibrated": True,
            "n_trials": {"oo": 4, "op": 4, "pp": 4}, "deid": {"geometric_mean": level},
            "g_vd": {"geometric_mean": -level * 10}, "d_diag": {"geometric_mean": {"oo": 0.9, "op": 0.5, "pp": 0.7}},
            "d_ece_op_oo": 0.5, "cllr_min_op_oo": 0.5, "g_dece_pp_oo": -1.0, "g_cllr_pp_oo": -1.0}


@pytest.fixture
def sweep(tmp_path) -> Path:
    sweep = tmp_path / "multirun"
    for num, (system, (eer_test, eer_val)) in enumerate(SYSTEMS.items()):
        write_job(sweep, num, system, system, eer_val, eer_test)
    write_job(sweep, 4, "s2", "s4", 0.09, 0.44)  # mismatched: its own system learnt, test fails
    failed = sweep / "5"
    (failed / ".hydra").mkdir(parents=True)
    (failed / ".hydra" / "overrides.yaml").write_text("- anonymizer=s3\n- anonymizer@attacker_anonymizer=s1\n")
    record_failure(failed, VpevalError("train: out of memory at batch 3"), [])
    return sweep


def test_aggregate_reports_matrix_detection_and_failed_points(sweep):
    out = aggregate(sweep)
    found = json.loads((out / "results.json").read_text())
    assert [j["job"] for j in found["jobs"]] == ["0", "1", "2", "3", "4"]
    assert found["failed"] == [{"job": "5", "error": "train: out of memory at batch 3",
                                "overrides": ["anonymizer=s3", "anonymizer@attacker_anonymizer=s1"]}]
    pairs = {(d["anonymizer"], d["attacker_anonymizer"]): d for d in found["detection"]}
    assert len(found["detection"]) == 6  # OO once, 4 matched, 1 mismatched
    assert pairs[("s2", "s4")]["verdict"] == "overestimated"
    assert all(pairs[(s, s)]["verdict"] == "trustworthy" for s in SYSTEMS)
    assert pairs[("original", "original")]["verdict"] == "undetermined"
    (fit,) = found["detection_fit"]
    assert fit["n_points"] == 4 and fit["source"] == "trusted pairs"
    assert len(found["records"]) == 20 and all("job" in r for r in found["records"])
    text = (out / "report.md").read_text()
    assert "## Failed points" in text and "out of memory" in text and "anonymizer=s3" in text
    assert "| s4 | – | 44.00 | – | 40.00 |" in text  # EER matrix row of attacker s4: on s2 and on s4
    assert (out / "figures" / "eer_matrix.png").is_file() and (out / "figures" / "detection.png").is_file()
    assert "data:image/png;base64," in (out / "report.html").read_text()
    assert (out / "results.csv").read_text().splitlines()[0].startswith("job,attack,")
    # voice similarity: once per evaluated system (s2 is evaluated by jobs 1 and 4)
    table = (out / "similarity.csv").read_text().splitlines()
    assert len(table) == 5 and table[0].startswith("job,anonymizer,set,folder,")
    assert "## Voice similarity per evaluated system" in text and "| s3 | test_f | 2 | 30.00 | -3.00 |" in text


def test_a_pair_from_too_few_test_speakers_is_undetermined_as_in_a_single_run(sweep):
    """Regression: the aggregate's hand-kept key list dropped `test_speakers`, so a sweep judged a
    pair whose EER_test came from fewer speakers than the bootstrap needs (a single run did not)."""
    write_job(sweep, 4, "s2", "s4", 0.09, 0.44, test_speakers=3)
    found = json.loads((aggregate(sweep) / "results.json").read_text())
    (pair,) = [d for d in found["detection"] if (d["anonymizer"], d["attacker_anonymizer"]) == ("s2", "s4")]
    assert pair["verdict"] == "undetermined" and "3 speaker(s)" in pair["reason"]


def test_jobs_in_sub_folders_count_in_number_order(sweep):
    write_job(sweep / "extra", 0, "s5", "s5", 0.44, 0.45)
    write_job(sweep, 10, "s1", "s3", 0.05, 0.3)
    found = json.loads((aggregate(sweep) / "results.json").read_text())
    assert [j["job"] for j in found["jobs"]] == ["0", "1", "2", "3", "4", "10", "extra/0"]
    assert found["detection_fit"][0]["n_points"] == 4  # s5 is matched but not trusted: judged only
    (s5,) = [d for d in found["detection"] if d["anonymizer"] == "s5"]
    assert s5["role"] == "judged" and s5["verdict"] == "trustworthy"


def test_rerun_in_place_replaces_the_failure(sweep):
    write_job(sweep, 5, "s3", "s1", 0.07, 0.45)
    (sweep / "5" / "failed.json").unlink()
    found = json.loads((aggregate(sweep) / "results.json").read_text())
    assert found["failed"] == [] and len(found["jobs"]) == 6


def test_trusted_file_and_cli(sweep, tmp_path, capsys, caplog):
    caplog.set_level("INFO", logger="pipeline.metrics.detection")
    reference = tmp_path / "ref.csv"
    reference.write_text("eer_test,eer_val\n0.2,0.08\n")
    assert main([str(sweep), "--trusted", str(reference), "--out", str(tmp_path / "bad")]) == 0
    (logged,) = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert "ref.csv:1: missing column(s) protocol" in logged
    found = json.loads((tmp_path / "bad" / "results.json").read_text())
    assert {d["verdict"] for d in found["detection"]} == {"undetermined"}
    assert all("ref.csv:1: missing column(s)" in d["reason"] for d in found["detection"] if d["anonymizer"] != "original")
    # the aggregate's own trusted.csv calibrates a later aggregate
    trusted_csv = tmp_path / "agg0" / "trusted.csv"
    assert main([str(sweep), "--out", str(tmp_path / "agg0")]) == 0 and trusted_csv.is_file()
    assert main([str(sweep), "--trusted", str(trusted_csv), "--method", "gap_re", "--out", str(tmp_path / "csv")]) == 0
    found = json.loads((tmp_path / "csv" / "results.json").read_text())
    assert found["detection_fit"][0]["method"] == "gap_re" and found["detection_fit"][0]["n_points"] == 4
    assert main([str(sweep), "--trusted", "s1,s2,s9", "--out", str(tmp_path / "absent")]) == 0
    # an expected condition of sweeps: one INFO line per process (issue 38), not an ERROR
    (absent,) = [r for r in caplog.records if "detect.trusted names s9" in r.getMessage()]
    assert absent.levelname == "INFO"
    capsys.readouterr()
    assert main([str(sweep), "--out", str(tmp_path / "agg")]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "agg")


def write_two_seed_sweep(sweep, extra_job) -> int:
    """Seeds 1 and 2 (EER_val shifted by -/+0.004) of every system in SYSTEMS plus one job
    `extra_job(seed, shift)` -> (anonymizer, attacker_anonymizer, eer_val, eer_test) per seed;
    returns the next job number."""
    num = 0
    for seed, shift in ((1, -0.004), (2, 0.004)):
        for system, (eer_test, eer_val) in SYSTEMS.items():
            write_job(sweep, num, system, system, eer_val + shift, eer_test, seed=seed)
            num += 1
        write_job(sweep, num, *extra_job(seed, shift), seed=seed)
        num += 1
    return num


def test_two_seed_sweep_keeps_every_row_and_summarises_the_seeds(tmp_path):
    """Regression: one row was kept per (attack, evaluated, attacker): `-m seed=1,2` kept
    seed 1 only, and sweeps over corpus, attacker or backend collapsed into one line."""
    sweep = tmp_path / "multirun"
    num = write_two_seed_sweep(sweep, lambda seed, shift: ("s2", "s4", 0.09 + shift, 0.44))
    for system, (eer_test, eer_val) in SYSTEMS.items():  # another attacker: its own line, 10 points higher
        write_job(sweep, num, system, system, eer_val + 0.1, eer_test, seed=1, group="synthetic/ecapa_small/cosine#def456")
        num += 1
    out = aggregate(sweep)
    found = json.loads((out / "results.json").read_text())
    rows = [d for d in found["detection"] if d["attack"] == "AA"]
    assert len(rows) == 14 and sorted({d["seed"] for d in rows}) == [1, 2]
    assert len([d for d in found["detection"] if d["attack"] == "OO"]) == 3  # once per (group, seed)
    fits = {(f["group"], f["seed"]): f for f in found["detection_fit"]}  # a model per group and seed
    assert len(fits) == 3 and fits[("synthetic/ecapa_tiny/cosine#abc123", 2)]["n_points"] == 4
    assert fits[("synthetic/ecapa_small/cosine#def456", 1)]["mean_gap"] == pytest.approx(
        fits[("synthetic/ecapa_tiny/cosine#abc123", 1)]["mean_gap"] - 0.104, abs=1e-6)  # seed 1: val - 0.004
    seeds = {(s["anonymizer"], s["attacker_anonymizer"]): s for s in found["seeds"] if s["attack"] == "AA"}
    assert len(seeds) == 5 and seeds[("s2", "s4")]["eer_val_mean"] == pytest.approx(0.09)
    assert seeds[("s2", "s4")]["eer_val_std"] == pytest.approx(0.008 / 2 ** 0.5) and seeds[("s2", "s4")]["flagged"] == 2
    text = (out / "report.md").read_text()
    assert "## Seeds" in text and "| synthetic/ecapa_tiny/cosine#abc123 | AA | s2 | s4 | 2 | 9.00 ± 0.57 |" in text
    assert (out / "figures" / "detection_1.png").is_file()


def test_empty_folder_is_a_clear_error(tmp_path):
    with pytest.raises(VpevalError, match="no job folder here"):
        aggregate(tmp_path)


def test_callback_records_a_failed_job_and_aggregates(sweep):
    job = sweep / "6"
    config = OmegaConf.create({"detect": {"trusted": None, "false_alarm": 0.05},
                               "hydra": {"mode": RunMode.MULTIRUN, "runtime": {"output_dir": str(job)},
                                         "sweep": {"dir": str(sweep)}}})
    ret = JobReturn(overrides=["anonymizer=s4"], status=JobStatus.FAILED)
    ret.return_value = RuntimeError("CUDA error\nmore")
    AggregateCallback().on_job_end(config, ret)
    assert json.loads((job / "failed.json").read_text()) == {"error": "RuntimeError: CUDA error",
                                                             "overrides": ["anonymizer=s4"]}
    found = json.loads((sweep / "aggregate" / "results.json").read_text())
    assert {f["job"] for f in found["failed"]} == {"5", "6"}
    assert error_line(VpevalError("a: b")) == "a: b"


def test_utility_once_per_evaluated_system_with_the_privacy_utility_figure(sweep):
    for job in sorted(p for p in sweep.iterdir() if (p / "report" / "results.json").is_file()):
        path = job / "report" / "results.json"
        found = RunSummary.from_json(path)
        level = int(found.config.anonymizer[1:])
        pooled = {"pitch_correlation": 1 - 0.2 * level, "wer_original": 0.05, "wer_anonymized": 0.1 * level}
        found.utility = {"sets": {"test_f": {**pooled, "utterances": 3}}, "splits": {"test": pooled},
                         "emotion": {}, "skipped": {"emotion": "off: set emotion.folder"}, "asr": "pocketsphinx"}
        found.to_json(path)
    out = aggregate(sweep)
    rows = (out / "utility.csv").read_text().splitlines()
    assert len(rows) == 1 + 2 * 4  # s1..s4, a set and a pooled split each (s2 of the mismatched job left out)
    text = (out / "report.md").read_text()
    assert "## Utility metrics" in text and "| s3 | test (pooled) | 0.400 | – | – | – | 5.00 | 30.00 |" in text
    assert "emotion (s1) skipped: off: set emotion.folder." in text
    assert (out / "figures" / "privacy_utility.png").is_file()


def test_every_launched_point_is_finished_failed_or_did_not_finish(sweep):
    """A point killed from outside (scancel, time limit, OOM, node lost) leaves neither results
    nor failed.json: it is listed as "did not finish", whether or not its folder was created."""
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep)},
                                         "overrides": {"task": ["anonymizer=s1,s2,s3,s4", "seed=1,2"]}}})
    AggregateCallback().on_multirun_start(config)
    (sweep / "6" / ".hydra").mkdir(parents=True)  # started, then killed
    found = json.loads((aggregate(sweep) / "results.json").read_text())
    assert len(found["jobs"]) + len(found["failed"]) + len(found["unfinished"]) == 8
    assert [(u["job"], u["overrides"]) for u in found["unfinished"]] == [
        ("6", ["anonymizer=s4", "seed=1"]), ("7", ["anonymizer=s4", "seed=2"])]
    assert "did not finish" in found["unfinished"][0]["error"]
    report = (sweep / "aggregate" / "report.md").read_text()
    assert "5 finished, 1 failed, 2 did not finish" in report and "Points that did not finish" in report


def test_started_folder_without_launch_record_did_not_finish(sweep):
    (sweep / "6" / ".hydra").mkdir(parents=True)
    found = json.loads((aggregate(sweep) / "results.json").read_text())
    assert [u["job"] for u in found["unfinished"]] == ["6"]


def test_only_node_0_writes_the_aggregate(sweep, monkeypatch):
    """Regression: every node of a multi-node job ran the callback; node 1 logged an ERROR."""
    config = OmegaConf.create({"detect": {"reference": None, "false_alarm": 0.05}, "distributed": {"node_rank": None},
                               "hydra": {"mode": RunMode.MULTIRUN, "runtime": {"output_dir": str(sweep / "0")},
                                         "sweep": {"dir": str(sweep)}}})
    done = JobReturn(overrides=[], status=JobStatus.COMPLETED)
    monkeypatch.setenv("SLURM_NODEID", "1")
    AggregateCallback().on_job_end(config, done)
    assert not (sweep / "aggregate").exists()
    monkeypatch.setenv("SLURM_NODEID", "0")
    AggregateCallback().on_job_end(config, done)
    assert (sweep / "aggregate" / "results.json").is_file()


def test_matrix_cells_and_figures_of_several_seeds():
    """Regression: the EER matrix kept the last seed's EER of a cell, and every calibration
    set's figure drew the rows of all seeds."""
    from pipeline.report.run_report import eer_matrix, figure_title, fit_set

    rows = [JudgedPair("AA", "s1", "s2", eer_val=0.1, eer_test=e, seed=k) for k, e in ((1, 0.2), (2, 0.3))]
    matrix, attackers, evaluated = eer_matrix(rows)
    assert matrix.tolist() == [[pytest.approx(0.25)]] and attackers == ["s2"] and evaluated == ["s1"]
    fit = {"group": "g", "seed": 2, "anonymization_seed": 2}
    assert fit_set(fit) == ("g", 2, 2) and figure_title(fit) == "Overestimation detection: g, seed 2"


def test_trusted_csv_holds_the_trusted_systems_only_one_row_each(tmp_path):
    """Regression: trusted.csv listed every matched pair, the suspects (a speaker-level system,
    the hidden mismatch) and each seed included: calibrating on it fitted the suspects again."""
    sweep = tmp_path / "multirun"
    write_two_seed_sweep(sweep, lambda seed, shift: ("s5", "s5", 0.05, 0.45))  # matched, not trusted: a suspect
    out = aggregate(sweep)
    lines = (out / "trusted.csv").read_text().splitlines()
    assert lines[0].startswith("anonymizer,seeds,group,eer_test,eer_val")
    assert [line.split(",")[:2] for line in lines[1:]] == [[s, "2"] for s in SYSTEMS]
    assert float(lines[1].split(",")[4]) == pytest.approx(SYSTEMS["s1"][1])  # the seeds' mean EER_val


def test_a_sweep_over_emotion_data_lists_each_jobs_uar(tmp_path):
    """Regression: the aggregate kept the utility of the first job per system, so of a sweep over
    `emotion.data` (VPC's IEMOCAP dev and test) only one UAR reached its report."""
    sweep = tmp_path / "multirun"
    for num, (data, uar) in enumerate((("/vpc/data/IEMOCAP_dev", 0.6), ("/vpc/data/IEMOCAP_test", 0.7))):
        write_job(sweep, num, "s1", "s1", 0.2, 0.25)
        path = sweep / str(num) / "report" / "results.json"
        found = RunSummary.from_json(path)
        found.utility = {"sets": {}, "splits": {}, "skipped": {}, "asr": "pocketsphinx",
                         "emotion": {"uar_original": uar, "uar_anonymized": uar / 2, "class_recall_original": {},
                                     "class_recall_anonymized": {}, "utterances": 10, "classes": ["ang"],
                                     "uar_rule": "vpc", "models": "5 folds (spk2fold)", "data": data}}
        found.to_json(path)
    text = (aggregate(sweep) / "report.md").read_text()
    assert "| s1 | 60.00 | 30.00 | 10 | – | ang | vpc | 5 folds (spk2fold) | /vpc/data/IEMOCAP_dev |" in text
    assert "| s1 | 70.00 | 35.00 | 10 | – | ang | vpc | 5 folds (spk2fold) | /vpc/data/IEMOCAP_test |" in text
