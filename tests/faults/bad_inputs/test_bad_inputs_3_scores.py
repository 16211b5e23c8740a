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


def test_repeated_trials_stop_at_the_first_repeat(tmp_path):
    """Regression (issue 38): a 200 MB file of one repeated trial got its error after 153 s and
    6 GB, the whole file read first. The read streams: the bad byte at the end is never reached."""
    path = tmp_path / "scores.txt"
    path.write_bytes(b"e1 u1 2.5 target\n" * 200_000 + b"\xff\n")
    record("repeated-trials-streamed", "a score file of one trial repeated 200 000 times (and a bad byte at its end)",
           "evaluate (score reader, at the second line)", raised(read_scores, path), tmp_path, "scores.txt:2",
           "repeats line 1")


def test_speaker_names_print_as_text(tmp_path):
    """Regression (issue 38): the bootstrap's error printed `np.str_('s1')`."""
    path = write_lines(tmp_path / "scores.txt", GOOD_SCORES)
    utt2spk = write_lines(tmp_path / "utt2spk", ["u1 s1", "u2 s1"])
    message = cli_message(vpeval("metrics", str(path), "--bootstrap", "10", "--utt2spk", str(utt2spk), tmp=tmp_path))
    assert "np.str_" not in message
    record("utt2spk-other-names", "`vpeval metrics --utt2spk` naming speakers other than the enrolment ids",
           "CLI (exit 2)", message, tmp_path, "scores.txt", "'e1'", "'s1'")


def test_flipped_labels_get_a_hint(tmp_path, capsys):
    """Regression (issue 38): EER 50.00 (ROCCH) beside EER-VPC 87.78 with no hint."""
    from pipeline.app import metrics_cli

    flipped = [" ".join([*line.split()[:3], "nontarget" if line.endswith(" target") else "target"])
               for line in GOOD_SCORES]
    assert metrics_cli.main([str(write_lines(tmp_path / "scores.txt", flipped))]) == 0
    (hint,) = [line for line in capsys.readouterr().out.splitlines() if ": labels: " in line]
    record("flipped-labels", "a score file whose labels are flipped (exit 0: the metrics are printed)",
           "metrics CLI (a note under the table)", hint, tmp_path, "flipped", "EER-VPC 100.00 %")
