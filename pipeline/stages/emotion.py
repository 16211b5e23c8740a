"""Stage 6f — emotion: emotion recognition of an evaluation set with labels (VPC 2024 UAR).

`prepare` turns the user's labelled data dir (`pipeline.recognition.emotion.read_emotion_data`) into a
manifest (`manifest.jsonl`) and labels (`utt2emo`), keyed by the dir's files, so the
evaluated system anonymises it like any other list. `run` labels every utterance of a
manifest with the configured classifier (conf/emotion, `pipeline.recognition.emotion.EmotionClassifier`):
`predictions`, `<utt> <label>` lines, keyed by the classifier's config, its folder and the
manifest's content.
"""
from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig
from tqdm import tqdm

from pipeline.core.cache import Cache
from pipeline.core.config import MODEL_PLUGIN, instantiate, plugin_with, without
from pipeline.core.errors import VpevalError
from pipeline.core.fileio import write_lines
from pipeline.data.audio import read_audio
from pipeline.data.kaldi import read_text
from pipeline.data.manifest import file_digest, read_manifest, write_manifest
from pipeline.recognition.emotion import LABELS, read_emotion_data

SAMPLE_RATE = 16000
PREDICTIONS = "predictions"
DATA_FILES = ("wav.scp", "utt2spk", "spk2gender", LABELS)


def prepare(data: str | Path, cache: Cache) -> Path:
    """Manifest and labels of the emotion data dir `data`; returns the folder."""
    data = Path(data)
    if not data.is_dir():
        raise VpevalError(f"{data}: emotion.data folder not found")
    inputs = {name: file_digest(data / name) for name in DATA_FILES if (data / name).is_file()}

    def build(out: Path) -> dict:
        utterances, labels = read_emotion_data(data)
        write_manifest(out / "manifest.jsonl", utterances)
        write_lines(out / LABELS, (f"{utt} {label}" for utt, label in labels.items()))
        return {"utterances": len(utterances), "classes": sorted(set(labels.values()))}

    return cache.build("emotion_data", {"folder": str(data.resolve())}, inputs, build, code=__name__)


def run(emotion: DictConfig, manifest: Path, cache: Cache) -> Path:
    """The classifier's label of every utterance of `manifest`; returns the folder."""
    settings = without(emotion, "name", "data")
    config = {k: v for k, v in settings.items() if k != "device"}
    model = plugin_with(emotion, "emotion", "fingerprint_of", MODEL_PLUGIN).fingerprint_of(settings)

    def build(out: Path) -> dict:
        classifier = instantiate(settings)
        utts = read_manifest(manifest)
        labels = classifier.classify([read_audio(u.path, SAMPLE_RATE) for u in tqdm(utts, desc="emotion", leave=False)])
        write_lines(out / PREDICTIONS, (f"{u.id} {label}" for u, label in zip(utts, labels)))
        return {"utterances": len(utts)}

    return cache.build("emotion", config, {"manifest": file_digest(manifest), "model": model}, build, code=__name__)


def load(folder: Path, name: str = PREDICTIONS) -> dict[str, str]:
    """`<utt> <label>` lines of a stage folder (`predictions`, or `utt2emo` of `prepare`)."""
    return read_text(Path(folder) / name)
