"""emotion2vec+ through FunASR for the emotion UAR of VPC 2026 Track 2 (`emotion=emotion2vec`,
`utility.uar_rule=vpc_track2`).

`tests/fixtures/vpc_emotion2vec` holds a random-weight emotion2vec model built and saved with
FunASR's own class, a data folder in the layout of VPC's `emodata_track2_dev` (original and
anonymised) and what VPC 2026's own `evaluate_ser` (emotion2vec backend) computed on them
(`expected.json`; how it was made: tests/fixtures/vpc_emotion2vec/README.md)."""
from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from pipeline.app.utility import emotion_recognition
from pipeline.core.cache import Cache
from pipeline.core.config import compose
from pipeline.core.errors import VpevalError
from pipeline.data.audio import read_audio
from pipeline.data.manifest import read_manifest
from pipeline.metrics.uar import emotion_recall
from pipeline.recognition.emotion2vec import Emotion2vecClassifier, iemocap_label
from pipeline.stages import emotion
from tests.helpers import FIXTURES, fixture_copy, utility_experiment

torch = pytest.importorskip("torch")
pytest.importorskip("funasr")

FIXTURE = FIXTURES / "vpc_emotion2vec"
EXPECTED = json.loads((FIXTURE / "expected.json").read_text(encoding="utf-8"))
KINDS = {"original": "emodata_track2_dev", "anonymized": "emodata_track2_dev_anon"}


@pytest.fixture(scope="module")
def vpc(tmp_path_factory) -> Path:
    return fixture_copy(tmp_path_factory, "vpc_emotion2vec")


def settings(vpc: Path, folder: Path | None = None):
    return compose(["emotion=emotion2vec", f"emotion.folder={folder or vpc / 'emotion2vec'}",
                    f"emotion.data={vpc / 'data' / KINDS['original']}"]).emotion


def labelled(vpc: Path, cfg, cache: Cache) -> dict:
    """Per kind: ({utt: truth}, {utt: predicted}, {utt: speaker}) of the stage on the fixture's dirs."""
    found = {}
    for kind, name in KINDS.items():
        prepared = emotion.prepare(vpc / "data" / name, cache)
        speakers = {u.id: u.speaker for u in read_manifest(prepared / "manifest.jsonl")}
        predicted = emotion.load(emotion.run(cfg, prepared / "manifest.jsonl", cache))
        found[kind] = (emotion.load(prepared, emotion.LABELS), predicted, speakers)
    return found


def test_labels_and_uar_are_vpc_track2s(vpc, tmp_path):
    found = labelled(vpc, settings(vpc), Cache(tmp_path / "cache"))
    for kind, (truth, predicted, speakers) in found.items():
        assert predicted == {key.split("/")[1]: value["label"] for key, value in EXPECTED["utterances"].items()
                             if key.split("/")[0] == KINDS[kind]}  # every utterance's label, as the toolkit's
        uar, recalls = emotion_recall(list(truth.values()), [predicted[u] for u in truth],
                                      [speakers[u] for u in truth], "vpc_track2")
        expected = EXPECTED["evaluate_ser"][kind]
        assert 100 * uar == pytest.approx(expected["UAR"], abs=1e-3)
        assert {f"ACC_{c}": 100 * r for c, r in recalls.items()} == pytest.approx(
            {c: v for c, v in expected.items() if c != "UAR"}, abs=1e-3)
        scored = [u for u in truth if truth[u] != "fru"]
        pooled, _ = emotion_recall([truth[u] for u in scored], [predicted[u] for u in scored], ["s"] * len(scored),
                                   "pooled")
        assert 100 * pooled > expected["UAR"] + 5  # the fixture tells the rules apart: sad predicted, never true


def test_scores_of_decoded_samples_equal_funasrs_own_file_reading(vpc):
    """vpeval hands FunASR soundfile's float32 samples where VPC hands it the file path."""
    model = Emotion2vecClassifier(str(vpc / "emotion2vec")).model
    for key in list(EXPECTED["utterances"])[:6]:
        name, utt = key.split("/")
        path = next(line.split()[1] for line in (vpc / "data" / name / "wav.scp").read_text().splitlines()
                    if line.split()[0] == utt)
        scores = model.generate(read_audio(str(vpc / path), 16000), granularity="utterance")[0]["scores"]
        assert scores == pytest.approx(EXPECTED["utterances"][key]["scores"], abs=1e-6)


def test_the_experiment_step_reports_the_rule_and_what_it_left_out(vpc, tmp_path):
    experiment = utility_experiment(["emotion=emotion2vec", "utility.uar_rule=vpc_track2", "anonymizer=precomputed",
                                     f"anonymizer.folder={vpc / 'data'}", "anonymizer.suffix=anon"], tmp_path / "cache")
    experiment.cfg.emotion = settings(vpc)
    experiment = SimpleNamespace(**vars(experiment), evaluated=experiment.cfg.anonymizer, device="cpu",
                                 output_check=None)
    result = {"emotion": {}, "skipped": {}}
    emotion_recognition(experiment, result)
    for kind in KINDS:
        assert 100 * result["emotion"][f"uar_{kind}"] == pytest.approx(EXPECTED["evaluate_ser"][kind]["UAR"], abs=1e-3)
    fru = sum(line.split()[1] == "fru" for line in (vpc / "data" / KINDS["original"] / "utt2emo").read_text().splitlines())
    assert (result["emotion"]["utterances"], result["emotion"]["left_out"]) == (24 - fru, fru) and fru > 0
    assert result["emotion"]["classes"] == ["ang", "hap", "neu"] and result["emotion"]["models"] == "one"


def test_loading_leaves_generators_threads_and_logging_as_they_were(vpc, monkeypatch):
    """FunASR's AutoModel seeds Python's, numpy's and torch's generators, sets torch's thread
    count and calls logging.basicConfig (a handler on a root logger that has none)."""
    import logging

    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])  # as in a script without logging set up
    random.seed(5), np.random.seed(5), torch.manual_seed(5)
    threads = torch.get_num_threads()
    expected = (random.random(), np.random.random(), torch.rand(1).item())
    random.seed(5), np.random.seed(5), torch.manual_seed(5)
    Emotion2vecClassifier(str(vpc / "emotion2vec"))
    assert (random.random(), np.random.random(), torch.rand(1).item()) == expected
    assert torch.get_num_threads() == threads and root.handlers == []


@pytest.mark.parametrize("label, iemocap", [
    ("生气/angry", "ang"), ("厌恶/disgusted", "ang"), ("恐惧/fearful", "sad"), ("开心/happy", "hap"),
    ("中立/neutral", "neu"), ("其他/other", "neu"), ("难过/sad", "sad"), ("吃惊/surprised", "neu"), ("<unk>", "neu"),
    (0, "ang"), ("6", "sad"), ("12", "neu"), (" Happy ", "hap"), ("calm", "neu"), (None, "neu")])
def test_emotion2vec_labels_map_onto_iemocap_as_vpcs(label, iemocap):
    assert iemocap_label(label) == iemocap


def test_bad_folders_are_one_line(vpc, tmp_path):
    with pytest.raises(VpevalError, match=r"emotion.folder: no model folder given"):
        Emotion2vecClassifier(None)
    with pytest.raises(VpevalError, match=r"nowhere: emotion.folder folder not found$"):
        Emotion2vecClassifier(str(tmp_path / "nowhere"))
    partial = Path(shutil.copytree(vpc / "emotion2vec", tmp_path / "partial"))
    (partial / "model.pt").unlink()
    with pytest.raises(VpevalError, match=r"partial: not a FunASR emotion2vec folder \(no model.pt\)$"):
        Emotion2vecClassifier.fingerprint_of({"folder": str(partial)})
    saved = torch.load(vpc / "emotion2vec" / "model.pt")
    del saved["model"]["proj.weight"]
    torch.save(saved, partial / "model.pt")
    with pytest.raises(VpevalError, match=r"model.pt: no weights for 1 of the model's \d+ parameters \(e.g. "
                                          r"proj.weight\); FunASR would leave them random$"):
        Emotion2vecClassifier(str(partial))
    torch.save(saved, partial / "model.pt", _use_new_zipfile_serialization=False)  # torch's legacy format: not mapped
    with pytest.raises(VpevalError, match=r"model.pt: no weights for 1 of the model's \d+ parameters"):
        Emotion2vecClassifier(str(partial))


def test_without_funasr_the_classifier_says_how_to_get_it(vpc, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "funasr", None)
    with pytest.raises(VpevalError, match=r"emotion=emotion2vec needs FunASR .*: pip install 'vpeval\[emotion2vec\]'$"):
        Emotion2vecClassifier(str(vpc / "emotion2vec"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message of a machine without CUDA")
def test_a_cuda_device_without_cuda_is_one_line(vpc):
    """FunASR would fall back to the CPU without a word."""
    with pytest.raises(VpevalError, match=r"device='cuda' requested but CUDA is not available"):
        Emotion2vecClassifier(str(vpc / "emotion2vec"), device="cuda")


def test_a_track2_set_without_a_scored_label_is_one_line():
    with pytest.raises(VpevalError, match=r"uar_rule=vpc_track2: no utterance is labelled ang, hap, neu, sad"):
        emotion_recall(["fru", "exc"], ["ang", "hap"], ["s", "s"], "vpc_track2")
