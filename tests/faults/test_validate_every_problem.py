"""`vpeval validate` lists every problem of one run: every bad line, settings and corpus together."""
import json

import pytest

from pipeline.app import cli
from pipeline.core.errors import VpevalError
from pipeline.data.manifest import read_manifest, read_trials


def test_manifest_reader_lists_every_bad_line(tmp_path):
    good = {"id": "a", "speaker": "s", "gender": "f", "path": "a.flac", "duration": 1.0, "sample_rate": 16000}
    lines = [json.dumps(good), "{not json", json.dumps({**good, "id": "b", "gender": "x"}), json.dumps(good)]
    path = tmp_path / "m.jsonl"
    path.write_text("\n".join(lines) + "\n")
    problems: list[str] = []
    assert [u.id for u in read_manifest(path, problems)] == ["a"]
    assert [p.split(": ", 1)[0] for p in problems] == [f"{path}:2", f"{path}:3", f"{path}:4"]
    assert "duplicate utterance id 'a'" in problems[2]
    with pytest.raises(VpevalError, match=r"m.jsonl:2: not a JSON object"):
        read_manifest(path)  # without a list: the first bad line raises, as before


def test_trial_reader_lists_every_bad_line(tmp_path):
    path = tmp_path / "trials"
    path.write_text("s1 u1 target\ns1 u2\ns2 u1 maybe\ns2 u2 nontarget\n")
    problems: list[str] = []
    assert len(read_trials(path, problems)) == 2
    assert [p.split(": ", 1)[0] for p in problems] == [f"{path}:2", f"{path}:3"]


def test_validate_lists_settings_and_corpus_problems_in_one_run(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("VPEVAL_DATA", str(tmp_path))
    with pytest.raises(SystemExit) as stopped:
        cli.main(["validate", "data=librispeech", f"data.root={tmp_path / 'none'}", "split.val_fraction=2",
                  "detect.false_alarm=0.9", f"hydra.run.dir={tmp_path / 'run'}"])
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("vpeval: error:")]
    assert stopped.value.code == 2
    assert errors == ["vpeval: error: split.val_fraction=2: must be a number in (0, 1)",
                      "vpeval: error: detect.false_alarm=0.9: must be a number in (0, 0.5)",
                      f"vpeval: error: {tmp_path / 'none'}: corpus folder not found (set data.root=...)"]


def test_validate_names_five_planted_faults_of_a_vpc_folder_in_one_run(vpc_folder, tmp_path, monkeypatch, capsys):
    """Regression (issue 27): VoicePrivacy data dirs with 5 planted faults; `vpeval validate`
    named only the first (a test speaker among the training speakers, raised while preparing)."""
    from tests.helpers import damaged

    empty = tmp_path / "empty.flac"
    empty.write_bytes(b"")
    train = lambda text: text + text.splitlines()[0].replace("11-100-0000", "31-100-0009") + "\n"  # noqa: E731
    data = damaged(vpc_folder, tmp_path, {
        ("libri_dev_trials_f", "wav.scp"): [
            lambda t: t.replace(t.splitlines()[0].split(maxsplit=1)[1], str(tmp_path / "gone.flac"), 1),  # missing
            lambda t: t + t.splitlines()[1] + "\n"],  # the second utterance listed twice
        ("libri_dev_trials_m", "wav.scp"): [
            lambda t: t.replace(t.splitlines()[0].split(maxsplit=1)[1], str(empty), 1)],  # empty audio
        ("libri_test_trials_f", "trials"): [lambda t: t + "31 31-100-9999 target\n"],  # unknown utterance
        ("train-clean-360", "wav.scp"): [lambda t: t + f"31-100-0009 {tmp_path / 'gone.flac'}\n"],
        ("train-clean-360", "utt2spk"): [lambda t: t + "31-100-0009 31\n"],  # a test speaker in training
        ("train-clean-360", "spk2gender"): [lambda t: t + "31 f\n"],
    })
    monkeypatch.setenv("VPEVAL_DATA", str(tmp_path / "vpeval"))
    with pytest.raises(SystemExit) as stopped:
        cli.main(["validate", "data=vpc", f"data.root={data}", f"hydra.run.dir={tmp_path / 'run'}"])
    errors = "\n".join(line for line in capsys.readouterr().err.splitlines() if line.startswith("vpeval: error:"))
    assert stopped.value.code == 2
    for needle in ("wav.scp:1: audio file gone.flac is missing", "empty.flac: cannot read audio header",
                   "duplicate utterance id '21-100-0003'", "trial utterance 31-100-9999 is not in",
                   "test speakers ['31'] are also in the attacker's training data"):
        assert needle in errors, (needle, errors)


def test_validate_shows_twenty_problems_then_how_many_more_and_where(vpc_folder, tmp_path, monkeypatch, capsys):
    """Regression: one mistake repeated on every line of a trial list printed one error line per
    line of the file (608 for a VPC trial list)."""
    from tests.helpers import damaged

    data = damaged(vpc_folder, tmp_path, {("libri_dev_trials_f", "trials"): [
        lambda t: "".join(f"{line} maybe\n" for line in t.splitlines()) * 6]})  # 24 bad lines
    monkeypatch.setenv("VPEVAL_DATA", str(tmp_path / "vpeval"))
    with pytest.raises(SystemExit) as stopped:
        cli.main(["validate", "data=vpc", f"data.root={data}", f"hydra.run.dir={tmp_path / 'run'}"])
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("vpeval: error:")]
    assert stopped.value.code == 2 and len(errors) == cli.SHOWN_PROBLEMS + 1
    listing = next((tmp_path / "vpeval" / "cache" / "prepare").glob("*/problems.txt"))
    assert errors[-1] == f"vpeval: error: ... and 4 more problems (24 in all, all listed in {listing})"
    assert len(listing.read_text().splitlines()) == 24
