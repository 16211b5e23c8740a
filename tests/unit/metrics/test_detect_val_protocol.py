"""EER_val measured as EER_test is (issue 37): the mean of the per-gender validation EERs with
the mean-of-genders interval, a gender without validation trials said in the row's notes, and
the verdict `undetermined` for a validation protocol that cannot judge."""
import numpy as np
import pytest

from pipeline.metrics.detection import UNDETERMINED, OVERESTIMATED, Trusted, assess, pairs
from pipeline.metrics.eer import eer
from pipeline.metrics.results import ConditionResult
from tests.helpers import condition

FEMALE = (np.linspace(0.2, 1.2, 40), np.linspace(-0.2, 0.8, 160))  # (target, non-target): hard, scores high
MALE = (np.linspace(-0.5, 0.5, 40), np.linspace(-2.0, -0.2, 160))  # easy, scores low


def record(attack: str, set_name: str, value: float, system: str = "s1", **extra) -> ConditionResult:
    return condition({"attack": attack, "anonymizer": system, "attacker_anonymizer": system, "set": set_name,
                      "eer": value, "eer_ci_low": max(0.0, value - 0.02), "eer_ci_high": value + 0.03,
                      "n_target": 40, "n_nontarget": 160, "eer_speakers": 4, **extra})


def test_eer_val_is_the_mean_of_the_genders_not_the_pooled_eer():
    """The fixture's genders score on different scales: pooled, the male non-targets fill the
    low end and the female targets the top, so the pooled EER is no mean of the two."""
    female, male = eer(*FEMALE), eer(*MALE)
    pooled = eer(np.concatenate([FEMALE[0], MALE[0]]), np.concatenate([FEMALE[1], MALE[1]]))
    assert abs(pooled - (female + male) / 2) > 0.03  # the fixture does tell them apart
    records = [record("AA", "test_f", 0.2), record("AA", "test_m", 0.1),
               record("AA", "val_f", female), record("AA", "val_m", male)]
    (row,) = pairs(records)
    assert row.eer_val == pytest.approx((female + male) / 2) and row.eer_test == pytest.approx(0.15)
    assert row.eer_by_set == {"val_f": female, "val_m": male, "test_f": 0.2, "test_m": 0.1} and row.notes == []
    # the interval the test mean gets: distances below and above add in quadrature, halved
    low, high = row.eer_val_ci
    below = np.hypot(female - max(0.0, female - 0.02), male - max(0.0, male - 0.02)) / 2
    assert low == pytest.approx(row.eer_val - below) and high == pytest.approx(row.eer_val + np.hypot(0.03, 0.03) / 2)
    assert row.val_trials == [80, 320] and row.val_speakers == 4


def test_val_replicates_are_the_mean_of_the_genders_replicates():
    rng = np.random.default_rng(0)
    replicates = {f"AA/{s}": list(v + rng.normal(0, 0.01, 400))
                  for s, v in (("val_f", 0.3), ("val_m", 0.1), ("test_f", 0.25), ("test_m", 0.15))}
    records = [record("AA", s, v) for s, v in (("val_f", 0.3), ("val_m", 0.1), ("test_f", 0.25), ("test_m", 0.15))]
    (row,) = pairs(records, replicates=replicates)
    assert np.mean(row.eer_val_replicates) == pytest.approx(0.2, abs=0.002)
    assert np.var(row.eer_val_replicates) == pytest.approx(0.01 ** 2 / 2, rel=0.2)  # independent genders


def test_a_gender_without_validation_trials_is_said_never_pooled():
    (row,) = pairs([record("AA", "test_f", 0.2), record("AA", "test_m", 0.1), record("AA", "val_m", 0.05)])
    assert row.eer_val == 0.05 and "val_f" not in row.eer_by_set
    (note,) = row.notes
    assert note.startswith("EER_val is the male validation EER only: no female validation trials")


def test_a_protocol_that_cannot_judge_gives_undetermined_with_its_reason():
    """split.holdout=speaker (recipes/noe2022, vpc2024, vpc2026) validates on training speakers."""
    from pipeline.app.experiment import protocol_problem
    from pipeline.core.config import compose
    from tests.helpers import split_of

    assert protocol_problem(split_of(compose([]))) is None
    reason = protocol_problem(split_of(compose(["split.holdout=speaker"])))
    assert reason.startswith("split.holdout=speaker cannot judge (") and "split.holdout=unseen" in reason
    assert protocol_problem(split_of(compose(["split.holdout=list"]))).startswith("split.holdout=list cannot judge")
    matched = [{"attack": "AA", "anonymizer": f"s{i}", "attacker_anonymizer": f"s{i}", "eer_test": x,
                "eer_val": 0.0, "gap": x, "relative_drop": 1.0, "protocol_problem": reason}
               for i, x in enumerate((0.1, 0.2, 0.3, 0.4))]
    judged, _ = assess(matched, trusted=Trusted(systems=("s0", "s1", "s2")))
    assert {r["verdict"] for r in judged} == {UNDETERMINED} and {r["reason"] for r in judged} == {reason}
    # the column test does not read EER_val: a better attacker on the same trials still flags
    column = [{**row, "anonymizer": "s1", "enroll": "anonymized", "trials": "anonymized",
               "eer_test_replicates": list(np.full(200, row["eer_test"]) + np.linspace(-0.01, 0.01, 200))}
              for row in matched[:2]]
    judged, _ = assess(column, trusted=Trusted(systems=()))
    assert judged[1]["verdict"] == OVERESTIMATED and "reaches an EER_test" in judged[1]["reason"]


def test_noe2022_recipe_keeps_its_protocol_and_says_it_cannot_judge():
    from pipeline.app.experiment import protocol_problem, validation_protocol
    from pipeline.core.config import compose
    from tests.helpers import split_of

    cfg = compose(["+experiment=noe2022", "data.root=/nowhere"])
    assert cfg.split.holdout == "speaker"
    assert protocol_problem(split_of(cfg)).startswith("split.holdout=speaker cannot judge")
    assert validation_protocol(cfg, split_of(cfg)).endswith("eer_val=gender_mean")


def test_the_protocol_names_corpus_attacker_and_backend():
    """A trusted CSV from another corpus, attacker or backend measures another gap: its
    protocol line differs, so it is refused (regression: only the split settings were named)."""
    from pipeline.app.experiment import validation_protocol
    from pipeline.core.config import compose
    from tests.helpers import split_of

    base = validation_protocol(compose([]), split_of(compose([])))
    assert "corpus=synthetic attacker=ecapa_small backend=cosine" in base
    for override in ("data=synthetic_tiny", "attacker=ecapa_tiny", "backend=plda"):
        assert validation_protocol(compose([override]), split_of(compose([override]))) != base, override
