"""The semi-informed attack on real voices: the diagonal of recipes/detection_power's sweep
(seed 3) on the 33-speaker corpus of `../shared/voices/` (each speaker one recorded person),
asserting signal, not only structure.

Runs only where `VPEVAL_VOICES` names that corpus's LibriSpeech folder; `.ci/run` builds the
corpus (`make_voices.sh`) and runs this module. The bounds come from the real-voice sweep of
recipes/detection_power (README, "On real voices": 3 seeds x 25 points, one torch thread, as
here), whose seed 3 these five points repeat:

- OO EER_test (mean of test_f and test_m) below 20 %; measured 10.63, 13.68 and 11.69 % (seeds
  1-3);
- AA EER_test above OO's on average over the five McAdams systems (seed 3: 18.71 against 11.69 %)
  and for the speaker-level system (33.14 %). Not for each system: in 2 of the sweep's 15
  matched points AA fell below OO (seed 2 `mcadams_a07_09` 13.64 against 13.68 %, seed 3
  `mcadams_a05_07` 10.73 against 11.69 %): on these voices McAdams barely protects;
- OO EER_val (male validation speakers only: the corpus's 13 training speakers are all male)
  inside the union of the three seeds' 95 % intervals, [0.7, 15.6] % (measured 7.40-8.42 %);
- the hidden mismatch (`mcadams_speaker`) gets a verdict other than `undetermined` against the
  four trusted utterance-level and fixed-alpha systems: measured `overestimated` (EER_val 24.95
  points below the prediction, margin 23.24: with no other attacker on the same trials `gap`
  has the whole α; the full sweep, whose column test takes half, says `not flagged`). In seed
  1 the detector had no power (EER_val from 6 speakers, a 25-point margin): `undetermined`.

These five points gave, here and in the sweep, the same EERs to the last digit (one torch
thread; 8 min 40 s on 2 cores shared with another run).

`split.select_fraction=null`: the corpus has 13 training speakers, so at most 6 are held out
unseen; split 3 + 3 between epoch selection and EER_val, no EER_val has the 5 speakers its
bootstrap needs and every verdict is `undetermined`. With all 6 reporting (and selecting the
epoch, which biases EER_val low alike for every system of the sweep, the trusted ones
included, so the gap model absorbs it) the detector can judge.
"""
import os
from pathlib import Path

import pytest

from pipeline.app.aggregate import aggregate
from pipeline.app.experiment import run_experiment
from pipeline.core.config import compose
from pipeline.metrics.detection import UNDETERMINED
from pipeline.metrics.results import ConditionResult, RunSummary, SweepSummary

VOICES = os.environ.get("VPEVAL_VOICES")
pytestmark = [pytest.mark.skipif(not VOICES, reason="VPEVAL_VOICES (the real-voice corpus, .ci/run) not set"),
              pytest.mark.usefixtures("single_thread")]

TRUSTED = ["mcadams", "mcadams_fixed", "mcadams_a05_07", "mcadams_a07_09"]
SYSTEMS = [*TRUSTED, "mcadams_speaker"]
OO_EER_TEST_MAX = 0.20
EER_VAL_RANGE = (0.007, 0.156)


def results(report: Path) -> RunSummary:
    return RunSummary.from_json(report / "results.json")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """The reports of the five matched points of seed 3, and their aggregate's results."""
    data = tmp_path_factory.mktemp("voices")
    folder, reports = data / "runs" / "sweep", []
    for number, system in enumerate(SYSTEMS):
        cfg = compose(["+experiment=detection_power", "data=librispeech", f"data.root={VOICES}", f"paths.data={data}",
                       "split.select_fraction=null", "seed=3",
                       f"anonymizer={system}", f"anonymizer@attacker_anonymizer={system}"])
        reports.append(run_experiment(cfg, folder / str(number)))
    return reports, SweepSummary.from_json(aggregate(folder) / "results.json")


def eer_test(record_set: list[ConditionResult], attack: str) -> float:
    found = [r.eer for r in record_set if r.attack == attack and r.set in ("test_f", "test_m")]
    assert len(found) == 2, found
    return sum(found) / 2


def test_the_original_attacker_identifies_real_voices(sweep):
    reports, _ = sweep
    records = results(reports[0]).records
    assert eer_test(records, "OO") < OO_EER_TEST_MAX


def test_mcadams_protects_more_than_no_anonymisation(sweep):
    reports, _ = sweep
    oo = eer_test(results(reports[0]).records, "OO")
    aa = {system: eer_test(results(report).records, "AA") for report, system in zip(reports, SYSTEMS)}
    assert sum(aa.values()) / len(aa) > oo + 0.03, (oo, aa)
    assert aa["mcadams_speaker"] > oo, (oo, aa)


def test_eer_val_of_the_original_attacker_is_where_it_was_measured(sweep):
    reports, _ = sweep
    (oo,) = [d for d in results(reports[0]).detection if d.attack == "OO"]
    low, high = EER_VAL_RANGE
    assert low <= oo.eer_val <= high, oo.eer_val
    assert any("male validation EER only" in note for note in oo.notes), oo.notes  # one gender, said so


def test_the_hidden_mismatch_gets_a_verdict_from_the_trusted_pairs(sweep):
    _, found = sweep
    (hidden,) = [d for d in found.detection if d.anonymizer == "mcadams_speaker" and d.attack == "AA"]
    assert hidden.role == "judged"
    assert hidden.verdict != UNDETERMINED, hidden.reason
