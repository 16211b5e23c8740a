"""recipes/noe2022: its systems as the paper defines them, and the C_ECE of two anonymisation seeds."""
import json

import numpy as np
import pytest

from pipeline.core.config import compose
from pipeline.metrics import calibration_extension
from tests.helpers import recipe_script, run_summary



def test_b2r_and_b1_are_the_papers_systems():
    b2r = compose(["+experiment=noe2022_synthetic", "anonymizer=mcadams_b2r"]).anonymizer
    assert b2r.level == "speaker" and list(b2r.alpha) == [0.7, 0.9]  # per speaker from U(0.7, 0.9)
    b1 = compose(["+experiment=noe2022", "data.root=/corpora/LibriSpeech", "anonymizer=xvector_b1"]).anonymizer
    assert b1.level == "speaker" and b1.strategy.n_farthest == 200 and b1.strategy.n_average == 100
    assert compose(["+experiment=noe2022_synthetic", "anonymizer=mcadams_fixed"]).anonymizer.alpha == 0.8


def write_job(sweep, num, system, anonymization_seed, shift):
    job = sweep / str(num)
    (job / "report").mkdir(parents=True)
    rng = np.random.default_rng(num)
    files = {}
    for label in ("OA/test_f", "OO/test_f", "AA/val_f", "AA/test_f"):
        path = job / f"{label.replace('/', '_')}.txt"
        lines = [f"s{i % 5} u{i} {rng.normal(shift if i % 3 == 0 else 0, 1):.4f} "
                 f"{'target' if i % 3 == 0 else 'nontarget'}" for i in range(300)]
        path.write_text("\n".join(lines) + "\n")
        files[label] = str(path)
    run_summary(anonymizer=system, attacker_anonymizer=system, data="synthetic_small", seed=1986, attacks="OO, OA",
                anonymization_seed=anonymization_seed, score_files=files).to_json(job / "report" / "results.json")
    return files


def test_c_ece_pairs_the_two_anonymisation_seeds_of_a_system(tmp_path, capsys):
    sweep = tmp_path / "multirun"
    run0 = write_job(sweep, 0, "mcadams_b2r", 1, 2.0)
    run1 = write_job(sweep, 1, "mcadams_b2r", 2, 1.0)
    write_job(sweep, 2, "mcadams_fixed", 1, 2.0)  # one seed only: no pair
    script = recipe_script("noe2022", "c_ece")
    assert script.main([str(sweep)]) == 0
    (row,) = json.loads((sweep / "aggregate" / "c_ece.json").read_text())  # not AA: two attackers, one per seed
    assert (row["anonymizer"], row["attack"], row["set"], row["anonymization_seeds"]) == ("mcadams_b2r", "OA",
                                                                                         "test_f", [1, 2])
    from pipeline.metrics import read_scores
    a, b = read_scores(run0["OA/test_f"]), read_scores(run1["OA/test_f"])
    expected = calibration_extension(a.target_scores, a.nontarget_scores, b.target_scores, b.nontarget_scores)
    assert row["c_ece_linear"] == pytest.approx(expected.c_ece_linear)
    assert "| mcadams_b2r | OA | test_f |" in capsys.readouterr().out


def test_c_ece_without_two_seeds_says_how_to_get_them(tmp_path, capsys):
    write_job(tmp_path, 0, "mcadams_b2r", 1, 2.0)
    assert recipe_script("noe2022", "c_ece").main([str(tmp_path)]) == 2
    assert "sweep anonymization_seed=1,2" in capsys.readouterr().err
