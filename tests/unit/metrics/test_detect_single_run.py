"""Issue 37: a single run (no sweep) gets a verdict from `detect.trusted=<csv>` measured with
its validation protocol, and `undetermined` naming both protocols from a CSV of another."""
import csv

import numpy as np

from pipeline.app.experiment import validation_protocol
from pipeline.core.config import compose
from pipeline.metrics.detection import UNDETERMINED, VERDICTS
from pipeline.stages import detect
from tests.helpers import condition, split_of

SETS = {"val_f": 0.20, "val_m": 0.16, "test_f": 0.22, "test_m": 0.18}


def run_records():
    """OO and AA of one single run: every set with 8 speakers and paired bootstrap replicates."""
    rng = np.random.default_rng(3)
    records, replicates = [], {}
    for attack, system, shift in (("OO", "original", -0.12), ("AA", "mcadams", 0.0)):
        for name, value in SETS.items():
            value += shift
            records.append(condition({"attack": attack, "set": name, "anonymizer": system,
                                      "attacker_anonymizer": system, "eer": value, "eer_ci_low": value - 0.05,
                                      "eer_ci_high": value + 0.05, "n_target": 60, "n_nontarget": 400,
                                      "eer_speakers": 8, "enroll": name, "trials": name}))
            replicates[f"{attack}/{name}"] = list(np.clip(value + rng.normal(0, 0.025, 1000), 0, 1))
    return records, replicates


def write_csv(path, protocol):
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["anonymizer", "eer_test", "eer_val", "gap_var", "protocol"])
        for system, test, val in (("mcadams_fixed", 0.17, 0.16), ("mcadams_a05_07", 0.24, 0.22),
                                  ("mcadams_a07_09", 0.12, 0.115)):
            writer.writerow([system, test, val, 0.0009, protocol])
    return str(path)


def protocol_of(cfg) -> str:
    return validation_protocol(cfg, split_of(cfg))


def test_a_single_run_gets_a_verdict_from_a_csv_of_its_protocol(tmp_path):
    protocol = protocol_of(compose([]))
    records, replicates = run_records()
    rows, (fit,) = detect.run(records, trusted=write_csv(tmp_path / "trusted.csv", protocol),
                              replicates=replicates, protocol=protocol, seeds=(1986, 1986))
    oo, aa = rows
    assert "reason" not in fit and fit["n_points"] == 3
    assert aa.verdict in VERDICTS and aa.verdict != UNDETERMINED, aa.reason
    assert aa.predicted_eer_val is not None and oo.verdict == UNDETERMINED  # OO: no anonymisation


def test_a_csv_of_another_protocol_gives_undetermined_naming_both(tmp_path):
    protocol = protocol_of(compose([]))
    other = protocol_of(compose(["split.val_fraction=0.3"]))
    records, replicates = run_records()
    rows, (fit,) = detect.run(records, trusted=write_csv(tmp_path / "other.csv", other),
                              replicates=replicates, protocol=protocol)
    aa = rows[1]
    assert aa.verdict == UNDETERMINED
    assert f"'{other}'" in aa.reason and f"'{protocol}'" in aa.reason and fit["reason"] == aa.reason
