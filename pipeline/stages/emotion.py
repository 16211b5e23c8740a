"""Stage 6f — emotion: emotion recognition of an evaluation set with labels (VPC 2024 UAR).

`prepare` turns the user's labelled data dir (`pipeline.recognition.emotion.read_emotion_data`) into a
manifest (`manifest.jsonl`), labels (`utt2emo`) and, where the dir has one, the speakers' folds
(`spk2fold`), keyed by the dir's files, so the evaluated system anonymises it like any other
list. `run` labels every utterance of a manifest with the configured classifier (conf/emotion,
`pipeline.recognition.emotion.EmotionClassifier`; fold models classify each speaker with the
model of its fold): `predictions`, `<utt> <label>` lines, keyed by the classifier's config, its
folder, the folds and the manifest's content.
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
from pipeline.recognition.emotion import FOLDS, LABELS, read_emotion_data, read_folds

SAMPLE_RATE = 16000
PREDICTIONS = "predictions"
DATA_FILES = ("wav.scp", "utt2spk", "spk2gender", LABELS, FOLDS)


def prepare(data: str | Path, cache: Cache) -> Path:
    """Manifest, labels and folds (if given) of the emotion data dir `data`; returns the folder."""
    data = Path(data)
    if not data.is_dir():
        raise VpevalError(f"{data}: emotion.data folder not found")
    inputs = {name: file_digest(data / name) for name in DATA_FILES if (data / name).is_file()}

    def build(out: Path) -> dict:
        utterances, labels = read_emotion_data(data)
        write_manifest(out / "manifest.jsonl", utterances)
        write_lines(out / LABELS, (f"{utt} {label}" for utt, label in labels.items()))
        folds = read_folds(data, {u.speaker for u in utterances})
        if folds is not None:
            write_lines(out / FOLDS, (f"{speaker} {fold}" for speaker, fold in folds.items()))
        return {"utterances": len(utterances), "classes": sorted(set(labels.values())),
                "folds": sorted(set(folds.values())) if folds else None}

    return cache.build("emotion_data", {"folder": str(data.resolve())}, inputs, build, code=__name__)


def run(emotion: DictConfig, manifest: Path, cache: Cache, folds: dict[str, str] | None = None) -> Path:
    """The classifier's label of every utterance of `manifest` (`folds`: each speaker's fold, for
    fold models); returns the folder."""
    settings = without(emotion, "name", "data")
    config = {k: v for k, v in settings.items() if k != "device"}
    if not fold_models(emotion):
        folds = None  # one classifier: spk2fold plays no part
    model = plugin_with(emotion, "emotion", "fingerprint_of", MODEL_PLUGIN).fingerprint_of(settings)

    def build(out: Path) -> dict:
        classifier = instantiate(settings)
        utts = read_manifest(manifest)
        speaker_folds = [folds[u.speaker] for u in utts] if folds is not None else None
        classifier.fold_list(speaker_folds, len(utts))  # a fold without a model stops before any audio is read
        labels = classifier.classify([read_audio(u.path, SAMPLE_RATE) for u in tqdm(utts, desc="emotion", leave=False)],
                                     speaker_folds)
        write_lines(out / PREDICTIONS, (f"{u.id} {label}" for u, label in zip(utts, labels)))
        return {"utterances": len(utts)}

    return cache.build("emotion", config, {"manifest": file_digest(manifest), "model": model, "folds": folds}, build,
                       code=__name__)


def load(folder: Path, name: str = PREDICTIONS) -> dict[str, str]:
    """`<utt> <label>` lines of a stage folder (`predictions`, or `utt2emo` of `prepare`)."""
    return read_text(Path(folder) / name)


def load_folds(folder: Path) -> dict[str, str] | None:
    """The speakers' folds that `prepare` kept, None where the data dir had no `spk2fold`."""
    return load(folder, FOLDS) if (Path(folder) / FOLDS).is_file() else None


def fold_models(emotion: DictConfig) -> list[str]:
    """The folds of the configured fold models, [] for a classifier of one model."""
    folds_of = getattr(plugin_with(emotion, "emotion", "fingerprint_of", MODEL_PLUGIN), "folds_of", None)
    return folds_of(without(emotion, "name", "data")) if folds_of else []


def classifiers(emotion: DictConfig, folds: dict[str, str] | None) -> str:
    """What classified the data, as the report names it: `one`, or `<n> folds (spk2fold)`."""
    return f"{len(set(folds.values()))} folds (spk2fold)" if folds and fold_models(emotion) else "one"
