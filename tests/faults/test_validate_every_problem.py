"""`vpeval validate` lists every problem of one run: every bad line, settings and corpus together."""
import json

import pytest

from pipeline import cli
from pipeline.data.manifest import read_manifest, read_trials
from pipeline.errors import VpevalError


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
