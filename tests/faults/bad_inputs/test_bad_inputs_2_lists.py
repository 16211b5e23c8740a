"""Bad inputs: manifests and trial lists."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pipeline.core.cache import Cache
from pipeline.data.audio import write_audio
from pipeline.data.librispeech import LibriSpeech
from pipeline.data.manifest import read_manifest
from pipeline.data.vctk import VCTK
from pipeline.stages import prepare
from pipeline.stages.prepare import manifest_path, trials_path
from tests.faults.bad_inputs.catalogue import RATE, append_line, raised, record, validation_error
from tests.helpers import damaged, edit_manifest, librispeech_tree, mls_tree, vctk_tree, vpc_cfg


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


def test_speakers_txt_lists_a_speaker_with_two_sexes(tmp_path):
    root = librispeech_tree(tmp_path / "LibriSpeech", {"dev-clean": {"1272": "M", "174": "M", "251": "F"}},
                            utterances=1, seconds=0.1)
    append_line(root / "SPEAKERS.TXT", "174 | F | dev-clean | 1.00 | Reader 174")
    record("speakers-two-sexes", "LibriSpeech SPEAKERS.TXT listing a speaker twice, as M and as F",
           "prepare (LibriSpeech reader)", raised(LibriSpeech(root).entries, "dev-clean"), tmp_path,
           "SPEAKERS.TXT:5", "speaker 174 is listed as F here and as M at line 3")


def test_speaker_info_lists_a_speaker_with_two_genders(tmp_path):
    root = vctk_tree(tmp_path / "vctk", {"p225": "F", "p226": "M"}, sentences=1, seconds=0.05, rate=RATE)
    append_line(root / "speaker-info.txt", "p226  22  F    English    Somewhere")
    record("speaker-info-two-genders", "VCTK speaker-info.txt listing a speaker twice, as M and as F",
           "prepare (VCTK reader)", raised(VCTK(root).entries, "train"), tmp_path,
           "speaker-info.txt:4", "speaker p226 is listed as F here and as M at line 3")


KALDI_CONFLICT_ROWS = [  # row, input, file, appended line, needles
    ("spk2gender-two-genders", "Kaldi spk2gender listing a speaker twice, as m and as f", "spk2gender", "23 f",
     ("spk2gender:3", "speaker 23 is listed as f here and as m at line 1")),
    ("utt2spk-two-speakers", "Kaldi utt2spk giving one utterance two speakers", "utt2spk", "23-100-0002 24",
     ("utt2spk:5", "utterance 23-100-0002 is listed with speaker 24 here and with speaker 23 at line 1")),
    ("text-two-transcripts", "Kaldi text giving one utterance two transcripts", "text", "23-100-0002 GOODBYE",
     ("text:2", "utterance 23-100-0002 is listed with text 'GOODBYE' here and with text 'HELLO' at line 1")),
]


@pytest.mark.parametrize("row, what, file_name, line, needles", KALDI_CONFLICT_ROWS,
                         ids=[row[0] for row in KALDI_CONFLICT_ROWS])
def test_kaldi_key_with_two_values(vpc_folder, tmp_path, row, what, file_name, line, needles):
    data = damaged(vpc_folder, tmp_path, {})
    listing = data / "libri_dev_trials_m" / file_name
    if not listing.exists():
        listing.write_text("23-100-0002 HELLO\n")
    append_line(listing, line)
    message = raised(prepare.run, vpc_cfg(data, workers=1), Cache(tmp_path / "cache"))
    record(row, what, "prepare (Kaldi dirs, before any audio is read)", message, tmp_path, *needles)


def test_mixed_trials_on_a_corpus_with_one_gender(tmp_path):
    root = librispeech_tree(tmp_path / "LibriSpeech", {"train-clean-360": {"11": "F", "12": "M"},
                                                       "dev-clean": {"21": "F", "22": "F"},
                                                       "test-clean": {"31": "F", "32": "M"}}, utterances=2, seconds=0.1)
    cfg = vpc_cfg(root, "data.eval_trials=mixed", config="librispeech", workers=1)
    record("mixed-one-gender", "mixed-gender trials (`data.eval_trials=mixed`) on a corpus with one gender",
           "prepare (before any audio is converted)", raised(prepare.run, cfg, Cache(tmp_path / "cache")), tmp_path,
           "data.eval_trials=mixed", "dev-clean has ['f'] speakers only")


def test_mls_tree_missing_a_split_transcripts(tmp_path):
    root = mls_tree(tmp_path / "mls", "german", utterances=2, seconds=0.1)
    (root / "mls_german" / "dev" / "transcripts.txt").unlink()
    cfg = vpc_cfg(root, "data.language=german", config="mls", workers=1)
    record("mls-no-transcripts", "an MLS language tree whose dev split has no `transcripts.txt`",
           "prepare (MLS reader, before any audio is read)", raised(prepare.run, cfg, Cache(tmp_path / "cache")),
           tmp_path, "mls_german/dev/transcripts.txt", "not found")


def test_trial_listed_twice(prepared, tmp_path):
    """Regression: a repeated trial line passed validation and stopped the run at scoring, after
    training, naming a cache file."""
    path = trials_path(prepared, "test_trials_f")
    append_line(path, path.read_text().splitlines()[0])
    record("trial-listed-twice", "the same trial twice in a trial list", "validate",
           validation_error(prepared), tmp_path, "test_trials_f.txt:5", "repeats line 1")


def test_vpc_trial_listed_twice(vpc_folder, tmp_path):
    message = prepare_vpc_error(vpc_folder, tmp_path, "libri_dev_trials_f", "trials",
                                lambda t: t + t.splitlines()[0] + "\n")
    record("vpc-trial-listed-twice", "VPC `trials` list with one trial twice", "prepare (Kaldi dirs)", message,
           tmp_path, "trials:5", "repeats line 1")


def test_utterance_shorter_than_one_fbank_window(prepared, tmp_path):
    """Regression: a 10 ms file passed validation and stopped the run at extraction, after training."""
    utt = read_manifest(manifest_path(prepared, "test_trials_f"))[0]
    write_audio(utt.path, np.zeros(160, np.float32) + 0.1, 16000)
    edit_manifest(prepared, "test_trials_f", lambda r: [{**r, "duration": 0.01} if r["id"] == utt.id else r])
    record("too-short", "an utterance of 10 ms (shorter than one fbank window)", "validate",
           validation_error(prepared), tmp_path, f"utterance {utt.id}: 10 ms of audio", "fbank window")


def test_one_file_enrols_and_is_tried_under_two_ids(prepared, tmp_path):
    """Regression: the enrol-and-trial check compared ids only; a recording listed for enrolment
    and again as a trial under another id (a target trial scoring it against itself) passed."""
    enrolment = read_manifest(manifest_path(prepared, "test_enrolls"))[0]
    edit_manifest(prepared, "test_trials_f", lambda r: [{**r, "path": enrolment.path} if r["id"] == "e1-tri" else r])
    record("enrol-and-trial-file", "one audio file enrolling and tried under another id", "validate",
           validation_error(prepared), tmp_path, "test_trials_f.txt", "e1-enr = e1-tri")
