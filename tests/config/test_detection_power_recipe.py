"""recipes/detection_power: the simulation's generative model and the power study's counting
on a sweep's aggregate (no audio)."""
import json

import numpy as np

from pipeline.metrics.results import JudgedPair, SweepJob, SweepSummary
from tests.helpers import recipe_script, run_config

TRUSTED = ["mcadams", "mcadams_fixed", "mcadams_a05_07", "mcadams_a07_09"]


def row(evaluated, attacker, eer_test, eer_val, seed, gap_var):
    return JudgedPair("AA", evaluated, attacker, eer_test=eer_test, eer_val=eer_val, seed=seed, group="g",
                      gap_var=gap_var)


def sweep(tmp_path, sd=0.003):
    """Two seeds of trusted, hidden-mismatch and mismatched rows; each gap's bootstrap
    standard deviation `sd`."""
    rows = []
    for seed in (1, 2):
        gaps = (0.004, -0.003, 0.001, -0.002) if seed == 1 else (-0.002, 0.003, -0.004, 0.001)
        rows += [row(s, s, x, x - g, seed, sd ** 2) for s, x, g in zip(TRUSTED, (0.17, 0.09, 0.12, 0.09), gaps)]
        rows.append(row("mcadams_speaker", "mcadams_speaker", 0.30, 0.08, seed, sd ** 2))  # the hidden mismatch
        rows.append(row("mcadams", "mcadams_fixed", 0.27, 0.09, seed, sd ** 2))  # 10 points above its column's matched pair
        rows.append(row("mcadams_fixed", "mcadams", 0.12, 0.17, seed, sd ** 2))  # 3 points above: not counted
    results = tmp_path / "sweep" / "aggregate" / "results.json"
    job = SweepJob("0", [], run_config(trusted=", ".join(TRUSTED)), "h")
    SweepSummary(sweep="sweep", jobs=[job], failed=[], unfinished=[], records=[], detection=rows, detection_fit=[],
                 seeds=[]).to_json(results)
    return tmp_path / "sweep"


def test_power_study_counts_each_class_per_variant(tmp_path, capsys):
    power = recipe_script("detection_power", "power")
    assert power.main([str(sweep(tmp_path))]) == 0
    found = json.loads((tmp_path / "sweep" / "aggregate" / "power.json").read_text())
    gap = found["measured"]["gap"]
    assert {name: entry["n"] for name, entry in gap.items()} == {
        "false alarms on matched pairs": 8, "hidden mismatch": 2, "full mismatches": 2}
    assert gap["hidden mismatch"]["flagged"] == 2 and gap["full mismatches"]["flagged"] == 2
    assert gap["false alarms on matched pairs"]["flagged"] == 0
    assert set(found["measured"]) == {"line", "gap", "gap_re", "column (α/2)", "gap + column (default)"}
    assert "| gap | 0 [0, 32] (0/8) | 100 [34, 100] (2/2) |" in capsys.readouterr().out
    assert (tmp_path / "sweep" / "aggregate" / "power.png").read_bytes()[:4] == b"\x89PNG"


def test_false_alarms_count_only_the_pairs_that_could_have_been_flagged(tmp_path):
    """With 4-point sampling deviations no EER_val >= 0 flags a trusted pair at EER_test 9 %:
    those pairs are left out of the false-alarm count."""
    power = recipe_script("detection_power", "power")
    assert power.main([str(sweep(tmp_path, sd=0.04))]) == 0
    found = json.loads((tmp_path / "sweep" / "aggregate" / "power.json").read_text())["measured"]["gap"]
    counted = found["false alarms on matched pairs"]
    assert 0 < counted["n"] < 8 and all("mcadams_fixed" not in name for name in counted["rows"])


def test_simulated_rows_have_the_known_mismatch():
    simulate = recipe_script("detection_power", "simulate")
    rows = simulate.rows_of_a_draw(np.random.default_rng(0), 3, tau=0.0, shift=0.5, sigma=1e-6)
    by_pair = {(r["anonymizer"], r["attacker_anonymizer"]): r for r in rows}
    assert len(rows) == 5 and by_pair[("new", "other")]["gap"] - by_pair[("new", "new")]["gap"] > 0.49
