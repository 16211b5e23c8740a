r"""Score files, trials files and utt2spk maps as text: a leading byte-order mark changes no number
(it made the first speaker "\ufeff1272": 11 speakers instead of 10, 59/721 trials instead of
60/720), and an utterance given two speakers is an error naming both lines."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pipeline.app.metrics_cli import main
from pipeline.core.errors import VpevalError
from pipeline.metrics import read_scores
from pipeline.metrics.scorefiles import read_utt2spk

BOM = "\ufeff"
SPEAKERS = ["1272", "174", "251", "422", "652", "777", "1462", "1673", "1919", "1988"]


def write(path: Path, lines: list[str], bom: bool = False) -> Path:
    path.write_text((BOM if bom else "") + "".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


def trial_lines(seed: int = 0) -> list[str]:
    """`enroll test score label` lines over LibriSpeech ids, speaker 1272 first."""
    rng = np.random.default_rng(seed)
    return [f"{e} {t}-100-{k:04d} {rng.normal(2 if e == t else 0):.4f} {'target' if e == t else 'nontarget'}"
            for e in SPEAKERS for t in SPEAKERS for k in range(2)]


def table_lines(seed: int) -> list[str]:
    """An OO / PP-like trial table over the segments of SPEAKERS, speaker 1272 first."""
    rng = np.random.default_rng(seed)
    segments = [(s, f"{s}-100-{k:04d}") for s in SPEAKERS for k in range(2)]
    return [f"{sa} {ga} {sb} {gb} {rng.normal(2 if sa == sb else 0):.4f}"
            for i, (sa, ga) in enumerate(segments) for sb, gb in segments[i + 1:]]


def metrics(tmp_path: Path, name: str, *args: str) -> dict:
    """`vpeval metrics ARGS --json`, without the file paths."""
    out = tmp_path / f"{name}.json"
    assert main([*args, "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    for entry in report["files"]:
        del entry["path"]
    report.get("similarity", {}).pop("files", None)
    return report


def test_a_bom_changes_no_number_of_a_trial_score_file(tmp_path, capsys):
    lines = trial_lines()
    plain, marked = write(tmp_path / "plain.txt", lines), write(tmp_path / "marked.txt", lines, bom=True)
    expected = metrics(tmp_path, "plain", str(plain), "--bootstrap", "20", "--zoo")
    assert metrics(tmp_path, "marked", str(marked), "--bootstrap", "20", "--zoo") == expected
    assert expected["files"][0]["bootstrap"]["n_speakers"] == 10
    found = read_scores(marked)
    assert set(found.target_speakers) == set(SPEAKERS) and len(found.target_scores) == 20
    capsys.readouterr()


def test_a_bom_changes_no_number_of_trial_tables(tmp_path, capsys):
    plain = [write(tmp_path / f"{name}.txt", table_lines(seed)) for seed, name in enumerate(("oo", "op", "pp"))]
    marked = [write(tmp_path / f"{name}_bom.txt", table_lines(seed), bom=True)
              for seed, name in enumerate(("oo", "op", "pp"))]
    expected = metrics(tmp_path, "plain", *map(str, plain))
    assert metrics(tmp_path, "marked", *map(str, marked)) == expected
    found = read_scores(marked[0])
    assert set(found.target_speakers) == set(SPEAKERS)
    assert (len(found.target_scores), len(found.nontarget_scores)) == (10, 180)
    capsys.readouterr()


@pytest.mark.parametrize("marked", ["scores", "trials", "both"])
def test_a_bom_in_a_vpc_score_file_or_its_trials_file_changes_nothing(tmp_path, marked):
    rows = [line.split() for line in trial_lines()]
    four = write(tmp_path / "four.txt", trial_lines())
    scores = write(tmp_path / "scores", [f"{e} {t} {s}" for e, t, s, _ in rows], bom=marked in ("scores", "both"))
    trials = write(tmp_path / "trials", [f"{e} {t} {label}" for e, t, _, label in rows],
                   bom=marked in ("trials", "both"))
    expected, found = read_scores(four), read_scores(scores, trials)
    for field in ("target_scores", "nontarget_scores", "target_speakers", "nontarget_speakers",
                  "target_test_speakers", "nontarget_test_speakers"):
        np.testing.assert_array_equal(getattr(found, field), getattr(expected, field))


def test_utt2spk_with_a_bom_reads_as_without(tmp_path):
    lines = ["u1 1272", "u2 174", "u1 1272"]  # a repeat with the same speaker is accepted
    assert read_utt2spk(write(tmp_path / "marked", lines, bom=True)) == {"u1": "1272", "u2": "174"}


def test_an_utterance_given_two_speakers_names_both_lines(tmp_path):
    path = write(tmp_path / "utt2spk", ["u1 1272", "u2 174", "", "u1 251"])
    with pytest.raises(VpevalError, match=r"utt2spk:4: utterance u1 is listed with speaker 251 here and with "
                                          r"speaker 1272 at line 1$"):
        read_utt2spk(path)
