"""Issue 37: the "covers less than nominal" markers of EER and min Cllr intervals follow from
the measured coverage (recipes/detection_power/coverage.py; the tables in docs/metrics.md), and
a smaller simulation agrees with the tables below the markers."""
import re

import pytest

from pipeline.metrics.bootstrap import COVERED_SPEAKERS, COVERED_SPEAKERS_MIN_CLLR, MIN_SPEAKERS
from tests.helpers import REPO_ROOT, recipe_script

coverage = recipe_script("detection_power", "coverage")
SECTIONS = {"eer": "### Coverage of the EER interval on small test sets",
            "min_cllr": "### Coverage of the min Cllr interval"}
MARKERS = {"eer": COVERED_SPEAKERS, "min_cllr": COVERED_SPEAKERS_MIN_CLLR}


def documented(metric: str) -> dict[int, dict[str, float]]:
    """Speaker count -> model -> coverage, from the `metric` table of docs/metrics.md."""
    text = (REPO_ROOT / "docs" / "metrics.md").read_text().split(SECTIONS[metric])[1].split("\n#")[0]
    lines = [line for line in text.splitlines() if line.startswith("| speakers per gender") or re.match(r"\| \d+ \|", line)]
    models = [cell.split(" (true")[0].strip() for cell in lines[0].strip("|").split("|")[1:]]
    return {int(cells[0]): {m: float(c.split()[0]) for m, c in zip(models, cells[1:])}
            for cells in ([c.strip() for c in line.strip("|").split("|")] for line in lines[1:])}


@pytest.mark.parametrize("metric", list(SECTIONS))
def test_the_marker_is_what_the_rule_gives_on_the_documented_table(metric):
    """No measured count reaches the rule in every model: the marker is one past the largest
    count measured, so every count measured below it was shown to cover less than 90 %."""
    table, covered = documented(metric), MARKERS[metric]
    assert set(next(iter(table.values()))) == set(coverage.MODELS)
    found = coverage.marker(table)
    assert covered == (found if found is not None else max(table) + 1)
    assert min(table[covered - 1].values()) < coverage.RULE
    assert all(min(table[n].values()) < coverage.RULE for n in table if MIN_SPEAKERS <= n < covered)


@pytest.mark.parametrize("speakers,model", [(MIN_SPEAKERS, "goats, EER ≈ 20 %"), (20, "normal, EER ≈ 5 %")])
def test_a_smaller_simulation_also_covers_less_than_the_rule_below_the_marker(speakers, model):
    """80 intervals of 200 resamples (the tables: 150 of 1000), at the fewest speakers with an
    interval and at LibriSpeech test-clean's 20 per gender, each under the EER table's least
    covered model there; the misses are intervals below the true value."""
    assert speakers < min(MARKERS.values())
    found = coverage.coverage(model, speakers, 80, coverage.truths(model, 200_000), n_resamples=200, seed=7)
    for hits, below in found.values():
        assert hits / 80 < coverage.RULE and below > 80 - hits - below
