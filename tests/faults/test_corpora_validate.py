"""`vpeval validate` on a prepared folder: each kind of problem is found and named."""
import json
import re
import shutil

import numpy as np
import pytest
import soundfile as sf

from pipeline.core.cache import Cache
from pipeline.core.config import compose
from pipeline.core.errors import VpevalError
from pipeline.core.schemas import Data, typed
from pipeline.data.audio import write_audio
from pipeline.stages import prepare, validate
from pipeline.stages.prepare import manifest_path, trials_path
from tests.helpers import edit_manifest, librispeech_tree, tone

SPEAKERS = {
    "train-clean-360": {"11": "F", "12": "F", "13": "M", "14": "M"},
    "dev-clean": {"21": "F", "22": "F", "23": "M", "24": "M"},
    "test-clean": {"31": "F", "32": "F", "33": "M", "34": "M"},
}


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    root = librispeech_tree(tmp_path_factory.mktemp("libri"), SPEAKERS)
    data = compose([f"data.root={root}", "data.protocol.enroll_fraction=0.5", "data.protocol.enroll_utterances=2"],
                   config_name="data/librispeech").data
    return prepare.run(typed(data, Data, "data"), Cache(tmp_path_factory.mktemp("cache")))


def audio_swap(utt_id, make):
    """Point `utt_id` at a file written by `make(path)`."""
    def edit(folder):
        path = folder / "audio" / f"{utt_id}.flac"
        path.parent.mkdir(exist_ok=True)
        make(path)
        for name in ("train", "dev_enrolls", "dev_trials_f", "dev_trials_m"):
            edit_manifest(folder, name, lambda r: [{**r, "path": str(path)} if r["id"] == utt_id else r])
    return edit


def append_trial(list_name, line):
    def edit(folder):
        path = trials_path(folder, list_name)
        path.write_text(path.read_text() + line + "\n")
    return edit


def copy_record(source, target, **changes):
    """Append the first female record of list `source` to list `target`, with `changes`."""
    def edit(folder):
        records = [json.loads(line) for line in manifest_path(folder, source).read_text().splitlines()]
        record = next(r for r in records if r["gender"] == "f")
        path = manifest_path(folder, target)
        path.write_text(path.read_text() + json.dumps({**record, **changes}) + "\n")
    return edit


def broken(path):
    write_audio(path, tone(0.5, 100), 16000)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def first_trial(list_name, folder):
    return trials_path(folder, list_name).read_text().splitlines()[0].split()


CASES = {
    "missing file": (audio_swap("11-100-0000", lambda p: None),
                     r"train.jsonl: utterance 11-100-0000: audio file .* is missing"),
    "corrupt file": (audio_swap("11-100-0001", lambda p: p.write_bytes(b"junk" * 50)), r"11-100-0001: cannot decode"),
    "truncated file": (audio_swap("12-100-0000", broken), r"12-100-0000: cannot decode .*12-100-0000.flac"),
    "stereo": (audio_swap("12-100-0001", lambda p: sf.write(str(p), np.zeros((8000, 2), np.float32), 16000)),
               r"12-100-0001: .* has 2 channels, expected mono"),
    "wrong rate": (audio_swap("13-100-0000", lambda p: write_audio(p, tone(0.5, 100, 8000), 8000)),
                   r"13-100-0000: .* is 8000 Hz, the manifest says 16000 Hz"),
    "zero length": (audio_swap("13-100-0001", lambda p: sf.write(str(p), np.zeros(0, np.float32), 16000, format="WAV")),
                    r"13-100-0001: .* is empty \(0 samples\)"),
    "shorter than listed": (audio_swap("14-100-0000", lambda p: write_audio(p, tone(0.2, 100), 16000)),
                            r"14-100-0000: .* decodes to 0.200 s, the manifest says 0.5 s"),
    "manifest rate": (lambda f: edit_manifest(f, "train", lambda r: [{**r, "sample_rate": 8000}]),
                      r"train.jsonl: utterance 11-100-0000: 8000 Hz, data.sample_rate is 16000 Hz"),
    "duplicate id": (lambda f: edit_manifest(f, "train", lambda r: [r, r] if r["id"] == "11-100-0002" else [r]),
                     r"train.jsonl:4: duplicate utterance id '11-100-0002'"),
    "two paths for one id": (copy_record("dev_enrolls", "test_enrolls", path="/elsewhere.flac"),
                             r"test_enrolls.jsonl: utterance 2\d-100-\d+ is /elsewhere.flac here but .* in "
                             r"dev_enrolls"),
    "gender": (lambda f: edit_manifest(f, "dev_enrolls", lambda r: [{**r, "gender": "f"}]),
               r"dev_trials_m.jsonl: speaker 2\d is 'm' here but 'f' in dev_enrolls"),
    "training speaker": (lambda f: edit_manifest(f, "train", lambda r: [r, {**r, "id": "x", "speaker": "31"}]
                                                 if r["id"] == "11-100-0000" else [r]),
                         r"test_trials_f.txt: speakers \['31'\] are in the attacker's training data"),
    "unknown enrolment speaker": (append_trial("test_trials_f", "39 31-100-0003 nontarget"),
                                  r"test_trials_f.txt:\d+: enrolment speaker 39 is not in test_enrolls"),
    "unknown trial utterance": (append_trial("dev_trials_m", "23 99-100-0000 nontarget"),
                                r"dev_trials_m.txt:\d+: trial utterance 99-100-0000 is not in dev_trials_m"),
    "mixed gender": (lambda f: append_trial("dev_trials_f", f"{first_trial('dev_trials_m', f)[0]} "
                                                            f"{first_trial('dev_trials_f', f)[1]} nontarget")(f),
                     r"dev_trials_f.txt:\d+: mixed-gender trial"),
    "wrong label": (lambda f: trials_path(f, "test_trials_m").write_text(
                        trials_path(f, "test_trials_m").read_text().replace("nontarget", "target", 1)),
                    r"test_trials_m.txt:\d+: label 'target' contradicts the speakers"),
    "no target trials": (lambda f: trials_path(f, "dev_trials_f").write_text("".join(
                             l + "\n" for l in trials_path(f, "dev_trials_f").read_text().splitlines()
                             if l.endswith("nontarget"))),
                         r"dev_trials_f.txt: needs both target and non-target trials \(0 target of"),
    "enrolment utterance tried": (copy_record("dev_enrolls", "dev_trials_f"),
                                  r"dev_trials_f.txt: utterances \[.*\] are both enrolment \(dev_enrolls\) and trial"),
    "malformed trial line": (append_trial("test_trials_m", "33 only-two"),
                             r"test_trials_m.txt:\d+: expected 'enroll test"),
}


@pytest.mark.parametrize("case", CASES)
def test_each_problem_is_named(prepared, tmp_path, case):
    edit, message = CASES[case]
    folder = tmp_path / prepared.name
    shutil.copytree(prepared, folder)
    edit(folder)
    result = validate.check(folder, workers=2)
    assert any(re.search(message, p) for p in result.problems), result.problems
    assert "problem(s):" in result.render()


def test_a_clean_folder_passes_and_missing_sets_are_named(prepared, tmp_path):
    result = validate.check(prepared, ("dev", "test"), workers=2)
    assert result.problems == [] and "OK: no problems found." in result.render()
    assert "Decoded 48 audio file(s)." in result.render()
    result = validate.check(prepared, ("dev", "test", "dev_common"), workers=2)
    assert result.problems == [f"{prepared}: evaluation split(s) ['dev_common'] were not prepared; "
                               "this corpus has ['dev', 'test']"]
    assert validate.run(prepared, Cache(tmp_path)).counts
    with pytest.raises(VpevalError, match=r"1 validation problem\(s\): .*dev_common"):
        validate.run(prepared, Cache(tmp_path), ("dev", "dev_common"))
