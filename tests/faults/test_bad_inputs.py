"""The bad-input catalogue: one test per row of the "Bad inputs" table in docs/robustness.md.

Every row feeds one bad input to the code that meets it first and checks that it stops with
a VpevalError (or, through the CLI, exit status 2) whose message is ONE line naming the file,
line or key and the problem, and, where a file was being written, that no half-written
output is left. Each test records the message it saw; the last test checks that the table in
docs/robustness.md's "Bad inputs" section shows exactly these messages (regenerate it with
`python tests/bad_inputs_table.py`).
"""
from __future__ import annotations

import errno
import os
import pathlib
import pickle
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

from anonymizers.external import External
from pipeline.asv.checkpoint import load_checkpoint, save_checkpoint
from pipeline.asv.embed import load_encoder
from pipeline.cache import DONE, PARAMS, Cache
from pipeline.config import REPO_ROOT, compose
from pipeline.data.audio import write_audio
from pipeline.data.manifest import Trial, Utterance, write_manifest, write_trials
from pipeline.errors import VpevalError
from pipeline.fileio import write_json, write_lines, write_text
from pipeline.metrics import eer, read_scores
from pipeline.stages import prepare, validate
from pipeline.stages.prepare import manifest_path, trials_path
from tests.helpers import (
    VPC_HYPERPARAMS,
    damaged,
    edit_manifest,
    encoder_folder,
    librispeech_tree,
    speechbrain_asv_folder,
    tone,
    vpc_cfg,
)

CATALOGUE = REPO_ROOT / "docs" / "robustness.md"
SECTION = "## Bad inputs\n"
RATE = 16000
SECONDS = 0.3
OBSERVED: dict[str, tuple[str, str, str]] = {}  # row id -> (input, message, where detected)


def record(row: str, what: str, where: str, message: str, tmp: Path, *needles: str) -> str:
    """Check `message` is one line mentioning every needle, and keep it for the table."""
    message = message.strip()
    assert message and "\n" not in message, f"{row}: not one line: {message!r}"
    for needle in needles:
        assert needle in message, f"{row}: {needle!r} not in {message!r}"
    shown = message.replace(str(tmp), "<tmp>").replace(str(REPO_ROOT), "<repo>")
    OBSERVED[row] = (what, shown, where)
    return message


def raised(function, *args, **kwargs) -> str:
    with pytest.raises(VpevalError) as caught:
        function(*args, **kwargs)
    return str(caught.value)


def vpeval(*args: str, tmp: Path) -> subprocess.CompletedProcess:
    """`python -m pipeline ARGS` in a subprocess; returns the finished process."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "VPEVAL_DATA": str(tmp / "vpeval_data")}
    return subprocess.run([sys.executable, "-m", "pipeline", *args], cwd=REPO_ROOT, env=env, capture_output=True,
                          text=True, timeout=300, check=False)


def cli_message(process: subprocess.CompletedProcess) -> str:
    """The CLI's error line: exit status 2 and stderr ending in exactly one `vpeval: error:` /
    `error:` line (log lines before it are allowed)."""
    assert process.returncode == 2, (process.returncode, process.stderr[-2000:])
    lines = [line for line in process.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith(("vpeval: error:", "error:"))]
    assert len(errors) == 1 and errors[0] == lines[-1], process.stderr[-2000:]
    assert "Traceback" not in process.stderr
    return errors[0]


# ---------------------------------------------------------------- a small prepared folder

TRAIN = {"t1": "f", "t2": "m"}
EVAL = {"e1": "f", "e2": "f", "e3": "m", "e4": "m"}


def utt(tmp: Path, uid: str, speaker: str, gender: str) -> Utterance:
    path = tmp / "audio" / f"{uid}.flac"
    if not path.exists():
        write_audio(path, tone(SECONDS, 100 + 7 * len(uid) + sum(map(ord, uid)) % 50), RATE)
    return Utterance(uid, speaker, gender, str(path), SECONDS, RATE)


@pytest.fixture
def prepared(tmp_path) -> Path:
    """A prepare-stage folder (what `validate` reads) that passes validation: 2 training
    speakers; 4 evaluation speakers, each enrolling with one utterance and tried with another."""
    folder = tmp_path / "prepared"
    lists = {"train": [utt(tmp_path, f"{s}-{i}", s, g) for s, g in TRAIN.items() for i in range(2)],
             "test_enrolls": [utt(tmp_path, f"{s}-enr", s, g) for s, g in EVAL.items()]}
    trials = {}
    for g in ("f", "m"):
        speakers = [s for s, sg in EVAL.items() if sg == g]
        lists[f"test_trials_{g}"] = [utt(tmp_path, f"{s}-tri", s, g) for s in speakers]
        trials[g] = [Trial(a, f"{b}-tri", a == b) for a in speakers for b in speakers]
    for name, items in lists.items():
        write_manifest(manifest_path(folder, name), items)
    for g, items in trials.items():
        write_trials(trials_path(folder, f"test_trials_{g}"), items)
    write_json(folder / PARAMS, {"stage": "prepare", "params": {"sample_rate": RATE}})
    write_json(folder / DONE, {"summary": {"eval_sets": ["test"]}})
    return folder


def validation_error(prepared: Path) -> str:
    return raised(validate.run, prepared, Cache(prepared.parent / "cache"), ("test",))


def point_audio(prepared: Path, uid: str, path: Path, **changes) -> None:
    """Make utterance `uid` of test_trials_f use `path` (with other manifest `changes`)."""
    edit_manifest(prepared, "test_trials_f",
                  lambda r: [{**r, "path": str(path), **changes} if r["id"] == uid else r])


def append_line(path: Path, line: str) -> None:
    path.write_text(path.read_text() + line + "\n")


def test_clean_prepared_folder_validates(prepared):
    validate.run(prepared, Cache(prepared.parent / "cache"), ("test",))


# ---------------------------------------------------------------- audio files

def test_corrupt_audio(prepared, tmp_path):
    path = tmp_path / "corrupt.flac"
    good = (tmp_path / "audio" / "e1-tri.flac").read_bytes()
    path.write_bytes(good[:64] + bytes(np.random.default_rng(0).integers(0, 256, len(good) - 64, dtype=np.uint8)))
    point_audio(prepared, "e1-tri", path)
    record("corrupt", "corrupt audio file (valid FLAC header, garbage frames)", "validate (decodes every file)",
           validation_error(prepared), tmp_path, "corrupt.flac", "e1-tri")


def test_empty_audio(prepared, tmp_path):
    path = tmp_path / "empty.wav"
    sf.write(path, np.zeros(0, dtype=np.float32), RATE)
    point_audio(prepared, "e1-tri", path)
    record("empty", "empty audio file (0 samples)", "validate", validation_error(prepared), tmp_path,
           "empty.wav", "0 samples")


def test_stereo_audio(prepared, tmp_path):
    path = tmp_path / "stereo.flac"
    sf.write(path, np.stack([tone(SECONDS, 120)] * 2, axis=1), RATE)
    point_audio(prepared, "e1-tri", path)
    record("stereo", "stereo audio file", "validate", validation_error(prepared), tmp_path,
           "stereo.flac", "2 channels")


def test_wrong_rate_audio(prepared, tmp_path):
    path = tmp_path / "narrowband.flac"
    sf.write(path, tone(SECONDS, 120, rate=8000), 8000)
    point_audio(prepared, "e1-tri", path, sample_rate=8000)
    record("wrong-rate", "audio at 8 kHz where the corpus is 16 kHz", "validate", validation_error(prepared),
           tmp_path, "e1-tri", "8000 Hz")


def test_header_rate_disagrees_with_manifest(prepared, tmp_path):
    path = tmp_path / "resampled.flac"
    sf.write(path, tone(SECONDS, 120, rate=22050), 22050)
    point_audio(prepared, "e1-tri", path)
    record("rate-mismatch", "audio whose header rate differs from its manifest entry", "validate",
           validation_error(prepared), tmp_path, "resampled.flac", "22050 Hz")


def test_truncated_audio(prepared, tmp_path):
    path = tmp_path / "truncated.wav"
    sf.write(path, tone(SECONDS, 120), RATE, subtype="PCM_16")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # the header still promises the full length
    point_audio(prepared, "e1-tri", path)
    record("truncated", "truncated audio file (header promises more samples)", "validate",
           validation_error(prepared), tmp_path, "truncated.wav")


def test_non_finite_audio(prepared, tmp_path):
    path = tmp_path / "diverged.wav"
    samples = tone(SECONDS, 120).astype(np.float32)
    samples[100] = np.nan
    sf.write(path, samples, RATE, subtype="FLOAT")
    point_audio(prepared, "e1-tri", path)
    record("non-finite", "float audio file with a NaN sample", "validate", validation_error(prepared), tmp_path,
           "diverged.wav", "non-finite", "sample 100")


def test_non_finite_audio_read_directly(tmp_path):
    """Stages that read audio without validation (and the library API) refuse it too."""
    from pipeline.data.audio import read_audio

    path = tmp_path / "loud.wav"
    samples = tone(SECONDS, 120).astype(np.float32)
    samples[7] = np.inf
    sf.write(path, samples, RATE, subtype="FLOAT")
    record("non-finite-read", "float audio file with an infinite sample, read by a stage", "any stage (audio reader)",
           raised(read_audio, path), tmp_path, "loud.wav", "sample 7")


def test_non_audio_file(prepared, tmp_path):
    path = tmp_path / "transcript.flac"
    path.write_text("THIS IS A TRANSCRIPT NOT AUDIO\n")
    point_audio(prepared, "e1-tri", path)
    record("non-audio", "a text file where audio is expected", "validate", validation_error(prepared), tmp_path,
           "transcript.flac", "cannot decode")


def test_missing_audio_file(prepared, tmp_path):
    point_audio(prepared, "e1-tri", tmp_path / "nowhere" / "e1-tri.flac")
    record("missing-audio", "manifest entry whose audio file does not exist", "validate",
           validation_error(prepared), tmp_path, "e1-tri.flac", "missing")


# ---------------------------------------------------------------- manifests and trial lists

def test_missing_manifest(prepared, tmp_path):
    manifest_path(prepared, "test_enrolls").unlink()
    record("missing-manifest", "a manifest the prepared folder should hold is missing", "validate",
           validation_error(prepared), tmp_path, "test_enrolls.jsonl", "not found")


def test_missing_trial_list(prepared, tmp_path):
    trials_path(prepared, "test_trials_m").unlink()
    record("missing-trials", "a trial list is missing", "validate", validation_error(prepared), tmp_path,
           "test_trials_m.txt", "not found")


def test_manifest_line_not_json(prepared, tmp_path):
    append_line(manifest_path(prepared, "train"), "t1-9 t1 f /x.flac")
    record("manifest-json", "manifest line that is not JSON", "validate (manifest reader)",
           validation_error(prepared), tmp_path, "train.jsonl:5", "not a JSON object")


def test_manifest_missing_field(prepared, tmp_path):
    edit_manifest(prepared, "train", lambda r: [{k: v for k, v in r.items() if k != "speaker"}])
    record("manifest-field", "manifest record without a required field", "validate (manifest reader)",
           validation_error(prepared), tmp_path, "train.jsonl:1", "speaker")


def test_duplicate_utterance_id(prepared, tmp_path):
    edit_manifest(prepared, "train", lambda r: [r, r] if r["id"] == "t1-0" else [r])
    record("duplicate-id", "the same utterance id twice in one manifest", "validate (manifest reader)",
           validation_error(prepared), tmp_path, "train.jsonl:2", "duplicate utterance id 't1-0'")


def test_one_id_two_files(prepared, tmp_path):
    other = tmp_path / "audio" / "t1-0.flac"
    edit_manifest(prepared, "test_trials_f", lambda r: [{**r, "id": "t1-0"} if r["id"] == "e1-tri" else r])
    record("id-two-files", "one utterance id naming different files in two lists", "validate",
           validation_error(prepared), tmp_path, "t1-0", str(other).replace(str(tmp_path), ""))


def test_speaker_with_two_genders(prepared, tmp_path):
    edit_manifest(prepared, "test_enrolls", lambda r: [{**r, "gender": "m"} if r["speaker"] == "e1" else r])
    record("two-genders", "a speaker listed as female in one list and male in another", "validate",
           validation_error(prepared), tmp_path, "speaker e1")


def test_trial_names_unknown_speaker(prepared, tmp_path):
    append_line(trials_path(prepared, "test_trials_f"), "e9 e1-tri nontarget")
    record("unknown-speaker", "trial naming a speaker who does not enrol", "validate", validation_error(prepared),
           tmp_path, "test_trials_f.txt:5", "e9")


def test_trial_names_unknown_utterance(prepared, tmp_path):
    append_line(trials_path(prepared, "test_trials_f"), "e1 e2-xyz nontarget")
    record("unknown-utterance", "trial naming an utterance not in the trial manifest", "validate",
           validation_error(prepared), tmp_path, "test_trials_f.txt:5", "e2-xyz")


def prepare_vpc_error(vpc_folder: Path, tmp: Path, dir_name: str, file_name: str, edit) -> str:
    """The prepare stage's error on a copy of the VPC recipe folder with one file edited."""
    data = damaged(vpc_folder, tmp, {(dir_name, file_name): [edit]})
    return raised(prepare.run, vpc_cfg(data, workers=1), Cache(tmp / "cache"))


def test_enrolment_list_names_unknown_utterance(vpc_folder, tmp_path):
    message = prepare_vpc_error(vpc_folder, tmp_path, "libri_dev_enrolls", "enrolls", lambda t: t + "21-100-0007\n")
    record("unknown-enrolment", "VPC `enrolls` list naming an utterance the enrolment dir does not have",
           "prepare (Kaldi dirs, before any audio is read)", message, tmp_path, "enrolls:5", "21-100-0007")


def test_data_list_command_is_never_run(vpc_folder, tmp_path):
    marker = tmp_path / "executed"
    message = prepare_vpc_error(vpc_folder, tmp_path, "libri_dev_trials_f", "wav.scp",
                                lambda t: t.replace("\n", f"\n21-100-0009 touch {marker} |\n", 1))
    assert not marker.exists()
    record("wav-scp-command", "wav.scp entry that is a shell command other than a flac/sox decode",
           "prepare (paths from data lists are never executed)", message, tmp_path, "wav.scp:2", "21-100-0009")


def test_mixed_gender_trial(prepared, tmp_path):
    append_line(trials_path(prepared, "test_trials_f"), "e3 e1-tri nontarget")
    edit_manifest(prepared, "test_trials_f", lambda r: [r])
    record("mixed-gender", "male enrolment speaker tried on a female utterance (same-gender protocol)",
           "validate", validation_error(prepared), tmp_path, "test_trials_f.txt:5", "mixed-gender")


def test_trial_label_contradicts_speakers(prepared, tmp_path):
    append_line(trials_path(prepared, "test_trials_f"), "e1 e2-tri target")
    record("wrong-label", "trial labelled target for two different speakers", "validate",
           validation_error(prepared), tmp_path, "test_trials_f.txt:5", "contradicts")


def test_bad_trial_label(prepared, tmp_path):
    append_line(trials_path(prepared, "test_trials_f"), "e1 e1-tri maybe")
    record("bad-label", "trial list line with an unknown label", "validate (trial reader)",
           validation_error(prepared), tmp_path, "test_trials_f.txt:5", "'maybe'")


def test_one_class_trial_list(prepared, tmp_path):
    path = trials_path(prepared, "test_trials_m")
    path.write_text("".join(f"{line}\n" for line in path.read_text().splitlines() if line.endswith(" target")))
    record("one-class-trials", "trial list with target trials only", "validate", validation_error(prepared),
           tmp_path, "test_trials_m.txt", "both target and non-target")


def test_utterance_both_enrols_and_is_tried(prepared, tmp_path):
    edit_manifest(prepared, "test_trials_f", lambda r: [r, {**r, "id": "e2-enr", "path": str(tmp_path / "audio" /
                                                                                                  "e2-enr.flac")}]
                  if r["id"] == "e2-tri" else [r])
    record("enrol-and-trial", "an utterance used both to enrol and as a trial", "validate",
           validation_error(prepared), tmp_path, "e2-enr", "both enrolment")


def test_evaluation_speaker_in_training_data(prepared, tmp_path):
    edit_manifest(prepared, "train", lambda r: [r, {**r, "id": "e1-extra", "speaker": "e1", "gender": "f",
                                                    "path": str(tmp_path / "audio" / "e1-enr.flac")}]
                  if r["id"] == "t1-0" else [r])
    record("seen-speaker", "an evaluation speaker in the attacker's training data", "validate",
           validation_error(prepared), tmp_path, "test_trials_f.txt", "'e1'", "training data")


# ---------------------------------------------------------------- scores

GOOD_SCORES = ["e1 u1 2.5 target", "e1 u2 -1.0 nontarget", "e2 u2 1.5 target", "e2 u1 -0.5 nontarget"]
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


# ---------------------------------------------------------------- config

CONFIG_ROWS = [  # row, input, where detected, override, needles
    ("unknown-key", "override of a key the config does not have (`attacker.trainig.epochs=3`)",
     "config (compose, before any work)", "attacker.trainig.epochs=3", ("attacker.trainig.epochs=3", "unknown key")),
    ("wrong-type", "override with a value of the wrong type (`seed=abc`)", "config (compose)", "seed=abc",
     ("seed=abc", "must be a number")),
    ("wrong-list", "a scalar where a list is expected (`eval_splits=test`)", "config (compose)", "eval_splits=test",
     ("eval_splits", "must be a list")),
    ("unknown-option", "a config group option that does not exist (`anonymizer=mcadam`)", "config (compose)",
     "anonymizer=mcadam", ("anonymizer=mcadam", "did you mean 'mcadams'")),
]


@pytest.mark.parametrize("row, what, where, override, needles", CONFIG_ROWS, ids=[row[0] for row in CONFIG_ROWS])
def test_config_rows(tmp_path, row, what, where, override, needles):
    record(row, what, where, raised(compose, [override]), tmp_path, *needles)


SETTINGS_ROWS = [  # row, input, override, needles (pipeline.settings, before any stage)
    ("out-of-range", "a fraction outside its open interval (`split.val_fraction=1.5`)", "split.val_fraction=1.5",
     ("split.val_fraction=1.5", "(0, 1)")),
    ("no-such-device", "a device name torch does not know (`device=gpu`)", "device=gpu", ("device=gpu", "cuda:N")),
    ("count-below-one", "a count below 1 (`attacker.training.epochs=0`)", "attacker.training.epochs=0",
     ("attacker.training.epochs=0", ">= 1")),
    ("split-not-in-corpus", "an evaluation split the corpus does not have (`eval_splits=[test,tst]`)",
     "eval_splits=[test,tst]", ("eval_splits", "'tst'", "data=synthetic")),
    ("too-few-held-out", "a validation fraction that holds out fewer than 2 utterances per speaker "
     "(`split.val_fraction=0.02`)", "split.val_fraction=0.02", ("split.val_fraction=0.02", "at least 2")),
    ("required-unset", "a required value left unset (`anonymizer=external` without `anonymizer.command`)",
     "anonymizer=external", ("anonymizer.command", "required")),
]


@pytest.mark.parametrize("row, what, override, needles", SETTINGS_ROWS, ids=[row[0] for row in SETTINGS_ROWS])
def test_settings_rows(tmp_path, row, what, override, needles):
    from pipeline.settings import check_settings

    record(row, what, "settings (pipeline.settings, before any stage)",
           raised(check_settings, compose([override])), tmp_path, *needles)


def test_cli_every_bad_setting_at_once(tmp_path):
    message = cli_message(vpeval("seed=-1", "split.val_fraction=2", "device=gpu", tmp=tmp_path))
    record("cli-bad-settings", "`vpeval seed=-1 split.val_fraction=2 device=gpu` (three bad settings)",
           "CLI (exit 2, before Hydra starts)", message, tmp_path, "3 problem(s)", "seed=-1", "split.val_fraction=2",
           "device=gpu")


def test_cli_misspelt_command(tmp_path):
    message = cli_message(vpeval("valdate", tmp=tmp_path))
    record("cli-misspelt-command", "`vpeval valdate` (a misspelt subcommand)", "CLI (exit 2)", message, tmp_path,
           "did you mean 'validate'")


def test_slurm_without_the_extra(tmp_path, monkeypatch):
    from pipeline import slurm

    real = slurm.importlib.util.find_spec
    monkeypatch.setattr(slurm.importlib.util, "find_spec",
                        lambda name, *a: None if name.startswith("hydra_plugins") else real(name, *a))
    record("slurm-extra-missing", "`vpeval -m hydra/launcher=slurm ...` from a wheel installed without the slurm extra",
           "CLI (exit 2, before anything is submitted)",
           raised(slurm.check_slurm_sweep, ["-m", "hydra/launcher=slurm", "seed=1,2"]), tmp_path, "vpeval[slurm]")


def test_cli_unknown_key(tmp_path):
    message = cli_message(vpeval("data=synthetic_tiny", "split.val_fractoin=0.2", tmp=tmp_path))
    record("cli-unknown-key", "`vpeval split.val_fractoin=0.2` (misspelt key)", "CLI (exit 2, before Hydra starts)",
           message, tmp_path, "split.val_fractoin", "unknown key")


def test_cli_sweep_unknown_option(tmp_path):
    """Regression: a sweep (-m) skipped the check, so a misspelt value failed in Hydra's multi-line error."""
    message = cli_message(vpeval("-m", "anonymizer=mcadams,mcadams_fixd", tmp=tmp_path))
    record("cli-sweep-unknown-option", "`vpeval -m anonymizer=mcadams,mcadams_fixd` (a misspelt sweep value)",
           "CLI (exit 2, before Hydra starts a job)", message, tmp_path, "mcadams_fixd")


def test_cli_wrong_type(tmp_path):
    message = cli_message(vpeval("validate", "split.val_fraction=half", tmp=tmp_path))
    record("cli-wrong-type", "`vpeval validate split.val_fraction=half`", "CLI (exit 2, before Hydra starts)",
           message, tmp_path, "split.val_fraction", "must be a number")


def test_cli_missing_corpus(tmp_path):
    message = cli_message(vpeval("validate", "data=librispeech", f"data.root={tmp_path / 'LibriSpeech'}",
                                 tmp=tmp_path))
    record("cli-missing-corpus", "`vpeval validate data=librispeech` with a corpus folder that does not exist",
           "CLI / prepare (exit 2)", message, tmp_path, "LibriSpeech", "not found")


def test_cli_evaluation_speaker_in_training_data(tmp_path):
    root = librispeech_tree(tmp_path / "LibriSpeech", {
        "train-clean-360": {"11": "F", "13": "M"}, "dev-clean": {"21": "F", "23": "M"},
        "test-clean": {"11": "F", "33": "M"}}, utterances=2, seconds=0.2)
    message = cli_message(vpeval("validate", "data=librispeech", f"data.root={root}", tmp=tmp_path))
    record("cli-seen-speaker", "`vpeval validate` on a corpus whose test speaker 11 is also a training speaker",
           "CLI / prepare (exit 2, before any audio is read)", message, tmp_path, "['11']", "training data")


# ---------------------------------------------------------------- checkpoints

class Payload:
    """Pickled code: unpickling it creates `marker` (what a malicious checkpoint would do)."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (pathlib.Path.touch, (pathlib.Path(self.marker),))


def test_checkpoint_with_pickled_code_is_refused_not_run(tmp_path):
    control = tmp_path / "control_marker"
    pickle.loads(pickle.dumps(Payload(control)))
    assert control.exists()  # the payload is live: plain unpickling runs it
    marker = tmp_path / "pwned_marker"
    path = tmp_path / "model.pt"
    torch.save({"model": {"w": torch.zeros(2)}, "extra": Payload(marker)}, path)
    message = raised(load_checkpoint, path)
    assert not marker.exists()
    record("pickled-code", "checkpoint holding pickled code (a `__reduce__` payload)",
           "checkpoint loader (torch.load weights_only=True)", message, tmp_path, "model.pt", "refused to load")


def test_checkpoint_of_another_architecture(tmp_path):
    cfg = compose(["attacker=ecapa_tiny"]).attacker.model
    from hydra.utils import instantiate

    encoder_folder(tmp_path, instantiate(cfg), embedding_dim=48, channels=[64, 64, 64, 64, 192])
    message = raised(load_encoder, tmp_path, "cpu")
    record("other-architecture", "model.pt of another architecture than model.json describes",
           "extract (encoder loader)", message, tmp_path, "model.pt", "another architecture")


def test_checkpoint_not_a_torch_file(tmp_path):
    path = tmp_path / "checkpoint.pt"
    path.write_bytes(b"\x00garbage" * 100)
    record("not-a-checkpoint", "checkpoint file that is not a torch file", "checkpoint loader",
           raised(load_checkpoint, path), tmp_path, "checkpoint.pt", "not a readable torch checkpoint")


def test_checkpoint_of_another_run(tmp_path):
    from pipeline.asv.checkpoint import check_same_run

    saved = {"architecture": {"embedding_dim": 32}, "seed": 1, "training": {"epochs": 4}}
    current = {"architecture": {"embedding_dim": 32}, "seed": 2, "training": {"epochs": 4}}
    record("other-run", "resuming a training checkpoint written with other settings", "train (resume)",
           raised(check_same_run, tmp_path / "checkpoint.pt", saved, current), tmp_path, "checkpoint.pt",
           "seed: 1 -> 2")


# ---------------------------------------------------------------- external anonymiser

SYSTEM = """
import sys, time
import soundfile as sf
list_file, output_dir, mode = sys.argv[1], sys.argv[2], sys.argv[3]
if mode == "fail":
    print("loading model"); print("RuntimeError: CUDA out of memory", file=sys.stderr); sys.exit(3)
if mode == "hang":
    time.sleep(600)
for line in open(list_file):
    utt, speaker, path = line.split()
    audio, rate = sf.read(path, dtype="float32")
    sf.write(f"{output_dir}/{utt}.wav", audio[: len(audio) // 4] if mode == "short" else audio, rate)
"""


def run_external(tmp: Path, mode: str, timeout: float = 120.0, command: list[str] | None = None) -> str:
    script = tmp / "my_system.py"
    script.write_text(SYSTEM)
    command = command or [sys.executable, str(script), "{list_file}", "{output_dir}", mode]

    def go():
        system = External(command=command, timeout_seconds=timeout, device="cpu", workdir=str(tmp))
        return system([tone(1.0, 120), tone(1.0, 150)], ["spk1-a", "spk2-a"], ["spk1", "spk2"], RATE)
    message = raised(go)
    assert not any(tmp.glob("vpeval-external-*")), "the scratch folder was left behind"
    return message.replace(sys.executable, "python")


def test_external_command_fails(tmp_path):
    record("external-fails", "external anonymiser exiting with status 3", "anonymize (external)",
           run_external(tmp_path, "fail"), tmp_path, "exit status 3", "CUDA out of memory")


def test_external_command_hangs(tmp_path):
    record("external-hangs", "external anonymiser that never finishes", "anonymize (external, timeout)",
           run_external(tmp_path, "hang", timeout=2.0), tmp_path, "timed out after 2 s", "anonymizer.timeout_seconds")


def test_external_command_wrong_lengths(tmp_path):
    record("external-lengths", "external anonymiser writing a quarter of each utterance", "anonymize (external)",
           run_external(tmp_path, "short"), tmp_path, "spk1-a", "length off")


def test_external_program_missing(tmp_path):
    record("external-missing", "external anonymiser program that does not exist", "anonymize (external)",
           run_external(tmp_path, "ok", command=["no-such-anonymiser", "{input_dir}"]), tmp_path,
           "'no-such-anonymiser' not found")


def test_external_command_as_shell_string(tmp_path):
    message = raised(External, command="python my_system.py {input_dir} | tee log", device="cpu")
    record("external-shell", "external command given as a shell string", "anonymizer config",
           message, tmp_path, "anonymizer.command", "argv list")


# ---------------------------------------------------------------- writing outputs

def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.is_file())


def test_unwritable_output_folder(tmp_path, monkeypatch):
    folder = tmp_path / "report"
    folder.mkdir()
    folder.chmod(0o555)
    if os.geteuid() == 0:  # root writes anywhere: the refusal is simulated where the rename would be
        def refuse(source, target):
            raise PermissionError(errno.EACCES, "Permission denied")
        monkeypatch.setattr(os, "replace", refuse)
    try:
        message = raised(write_json, folder / "results.json", {"records": []})
    finally:
        folder.chmod(0o755)
    assert leftovers(folder) == []
    record("unwritable", "output folder without write permission", "every write (fileio.atomic_path)", message,
           tmp_path, "results.json", "Permission denied", "writable")


def test_cache_under_a_file(tmp_path):
    blocker = tmp_path / "cache_is_a_file"
    blocker.write_text("not a folder\n")
    message = raised(Cache(blocker).build, "prepare", {}, {}, lambda out: None)
    record("unwritable-cache", "`paths.cache` pointing below a regular file", "cache (before a stage starts)",
           message, tmp_path, "cache_is_a_file", "not a folder")


def test_full_disk_during_write(tmp_path, monkeypatch):
    real_write = Path.write_text

    def fill_disk(self, text, *args, **kwargs):
        real_write(self, text[: len(text) // 2], *args, **kwargs)  # half the bytes land, then the disk is full
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(Path, "write_text", fill_disk)
    message = raised(write_text, tmp_path / "out" / "manifest.jsonl", "x" * 10000)
    assert leftovers(tmp_path / "out") == []
    record("disk-full", "disk full in the middle of a write", "every write (fileio.atomic_path)", message, tmp_path,
           "manifest.jsonl", "No space left on device")


def test_full_disk_during_checkpoint_keeps_the_previous_one(tmp_path, monkeypatch):
    path = tmp_path / "checkpoint.pt"
    save_checkpoint(path, {"step": torch.tensor(1)})
    real_save = torch.save

    def fill_disk(obj, target, *args, **kwargs):
        real_save(obj, target, *args, **kwargs)
        Path(target).write_bytes(Path(target).read_bytes()[:100])
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(torch, "save", fill_disk)
    message = raised(save_checkpoint, path, {"step": torch.tensor(2)})
    assert leftovers(tmp_path) == ["checkpoint.pt"]
    assert int(load_checkpoint(path)["step"]) == 1
    record("disk-full-checkpoint", "disk full while a training checkpoint is written", "train (checkpoint writer)",
           message, tmp_path, "checkpoint.pt", "No space left on device")


def test_cli_output_folder_is_a_file(tmp_path):
    blocker = tmp_path / "data_is_a_file"
    blocker.write_text("not a folder\n")
    message = cli_message(vpeval("metrics", str(write_lines(tmp_path / "scores.txt", GOOD_SCORES)), "--json",
                                 str(blocker / "metrics.json"), tmp=tmp_path))
    record("cli-unwritable", "`vpeval metrics --json` into a folder that is a file", "CLI (exit 2)", message,
           tmp_path, "metrics.json", "cannot write")


# ---------------------------------------------------------------- VoicePrivacy models and score files

def test_speechbrain_folder_of_another_architecture(tmp_path):
    from pipeline.asv.speechbrain_folder import load_speechbrain_encoder

    folder = speechbrain_asv_folder(tmp_path / "asv_orig", hyperparams=VPC_HYPERPARAMS.replace(
        "speechbrain.lobes.models.ECAPA_TDNN.ECAPA_TDNN", "speechbrain.lobes.models.Xvector.Xvector"))
    record("sb-architecture", "SpeechBrain model folder (`attacker.pretrained` / `init`) of another architecture",
           "attacker import (hyperparams.yaml parsed, never run)", raised(load_speechbrain_encoder, folder), tmp_path,
           "hyperparams.yaml", "another architecture", "Xvector")


def test_speechbrain_folder_missing_its_weights(tmp_path):
    from pipeline.asv.speechbrain_folder import load_speechbrain_encoder

    folder = speechbrain_asv_folder(tmp_path / "asv_orig")
    (folder / "embedding_model.ckpt").unlink()
    record("sb-missing-file", "SpeechBrain model folder without `embedding_model.ckpt`", "attacker import",
           raised(load_speechbrain_encoder, folder), tmp_path, "embedding_model.ckpt", "missing")


def test_speechbrain_checkpoint_that_does_not_fit(tmp_path):
    from pipeline.asv.speechbrain_folder import load_speechbrain_encoder

    folder = speechbrain_asv_folder(tmp_path / "asv_orig", hyperparams=VPC_HYPERPARAMS.replace(
        "lin_neurons: 12", "lin_neurons: 192"))
    record("sb-tensors", "SpeechBrain checkpoint whose tensors do not fit its hyperparams.yaml", "attacker import",
           raised(load_speechbrain_encoder, folder), tmp_path, "embedding_model.ckpt", "shape mismatches")


def test_vpc_score_file_with_a_trials_file_that_does_not_match(tmp_path):
    scores = write_lines(tmp_path / "scores", ["e1 u1 2.0", "e1 u2 -1.0", "e2 u1 0.5", "e2 u2 1.5"])
    trials = write_lines(tmp_path / "trials", ["e1 u1 target", "e1 u2 nontarget", "e2 u2 target", "e2 u1 nontarget"])
    message = cli_message(vpeval("metrics", str(scores), "--trials", str(trials), tmp=tmp_path))
    record("vpc-trials-mismatch", "VPC 3-field score file whose trials file lists other trials (`--trials`)",
           "CLI (exit 2, score reader)", message, tmp_path, "scores:3", "trials", "line for line")


# ---------------------------------------------------------------- the table

def render(rows: dict[str, tuple[str, str, str]]) -> str:
    def escape(text: str) -> str:
        return text.replace("|", "\\|")

    intro = ("Every row is a test in `tests/test_bad_inputs.py` (the row id is in the first column); the "
             "message is the one the test observed (temporary folders shown as `<tmp>`). Each stops "
             "with a non-zero exit (`VpevalError`; exit status 2 and this one line on stderr from the CLI); "
             "a failed write leaves no partial file. Regenerate with `python tests/bad_inputs_table.py`.")
    lines = ["## Bad inputs", "", intro, "",
             "| # | input | message produced | where detected |", "|---|---|---|---|"]
    for n, (row, (what, message, where)) in enumerate(rows.items(), start=1):  # the order of the tests
        lines.append(f"| {n} `{row}` | {escape(what)} | `{escape(message)}` | {escape(where)} |")
    return "\n".join(lines) + "\n"


def test_catalogue_table_is_current():
    """The whole table equals the observed one when every row ran; in a partial run (-k) every
    row that ran is still in docs/robustness.md with the message it produced."""
    table = render(OBSERVED)
    readme = CATALOGUE.read_text()
    start, end = readme_section(readme)
    if os.environ.get("VPEVAL_WRITE_TABLE"):
        CATALOGUE.write_text(readme[:start] + table + "\n" + readme[end:])
        return
    documented = readme[start:end].rstrip("\n") + "\n"
    rows = [line for line in documented.splitlines() if line.startswith("| ") and line[2].isdigit()]
    if len(OBSERVED) >= 30:  # the whole file ran
        assert documented == table, "run `python tests/bad_inputs_table.py`"
    for line in table.splitlines():
        if line.startswith("| ") and line[2].isdigit():
            row = line.split(" ", 2)[2]  # without the row number, which depends on what ran
            assert any(r.split(" ", 2)[2] == row for r in rows), f"not in docs/robustness.md: {row}"


def readme_section(readme: str) -> tuple[int, int]:
    """Where the catalogue section of docs/robustness.md starts and ends (at the next `## ` heading)."""
    start = readme.index(SECTION)
    end = readme.find("\n## ", start + len(SECTION))
    return start, len(readme) if end < 0 else end + 1


def test_messages_name_no_volatile_detail():
    for row, (_, message, _) in OBSERVED.items():
        assert not re.search(r"tmp[0-9]{3,}", message), (row, message)
