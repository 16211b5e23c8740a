"""Bad inputs: score files and scores."""
import numpy as np
import pytest

from pipeline.core.fileio import write_lines
from pipeline.metrics import eer, read_scores
from tests.faults.bad_inputs.catalogue import GOOD_SCORES, cli_message, raised, record, vpeval

SCORE_READER_ROWS = [  # row, input, lines of scores.txt, needles
    ("nan-score", "score file with a score of nan", GOOD_SCORES[:2] + ["e2 u2 nan target"] + GOOD_SCORES[3:],
     ("scores.txt:3", "'nan' is not finite")),
    ("inf-score", "score file with a score of inf", GOOD_SCORES[:2] + ["e2 u2 inf target"] + GOOD_SCORES[3:],
     ("scores.txt:3", "'inf' is not finite")),
    ("one-class-scores", "score file with target trials only",
     [line for line in GOOD_SCORES if line.endswith(" target")], ("scores.txt", "no non-target trials")),
    ("empty-scores", "empty score file", [], ("scores.txt", "empty")),
    ("nan-text-score", "score field that is not a number",
     GOOD_SCORES[:1] + ["e1 u2 high nontarget"] + GOOD_SCORES[2:], ("scores.txt:2", "'high'")),
    ("repeated-trial", "score file listing one trial twice", GOOD_SCORES + ["e1 u1 2.0 target"],
     ("scores.txt:5", "repeats line 1")),
]


@pytest.mark.parametrize("row, what, lines, needles", SCORE_READER_ROWS, ids=[row[0] for row in SCORE_READER_ROWS])
def test_score_reader_rows(tmp_path, row, what, lines, needles):
    path = write_lines(tmp_path / "scores.txt", lines)
    record(row, what, "evaluate (score reader)", raised(read_scores, path), tmp_path, *needles)


def test_nan_in_metric_arrays(tmp_path):
    message = raised(eer, np.array([1.0, np.nan]), np.array([0.0, -1.0]))
    record("nan-array", "NaN among the scores given to a metric function", "metrics (as_scores)", message, tmp_path,
           "NaN or infinite", "index 1")


def test_cli_metrics_one_class(tmp_path):
    path = write_lines(tmp_path / "scores.txt", [line for line in GOOD_SCORES if line.endswith("nontarget")])
    message = cli_message(vpeval("metrics", str(path), tmp=tmp_path))
    record("cli-one-class", "`vpeval metrics` on a score file with non-target trials only", "CLI (exit 2)",
           message, tmp_path, "scores.txt", "no target trials")


def test_cli_metrics_bootstrap_without_test_speakers(tmp_path):
    path = write_lines(tmp_path / "scores.txt", GOOD_SCORES)
    message = cli_message(vpeval("metrics", str(path), "--bootstrap", "10", tmp=tmp_path))
    record("cli-no-test-speakers", "`vpeval metrics --bootstrap` on test utterance ids that do not name their "
           "speaker (`u1`)", "CLI (exit 2)", message, tmp_path, "scores.txt", "--utt2spk", "--bootstrap-unit trials")


def test_cli_metrics_utt2spk_missing_an_utterance(tmp_path):
    path = write_lines(tmp_path / "scores.txt", GOOD_SCORES)
    utt2spk = write_lines(tmp_path / "utt2spk", ["u1 e1"])
    message = cli_message(vpeval("metrics", str(path), "--bootstrap", "10", "--utt2spk", str(utt2spk), tmp=tmp_path))
    record("utt2spk-missing", "`vpeval metrics --utt2spk` whose file lacks a test utterance", "CLI (exit 2)",
           message, tmp_path, "scores.txt:2", "u2", "utt2spk")
