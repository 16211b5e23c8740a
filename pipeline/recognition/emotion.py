"""Emotion recognition for the utility metric UAR (VPC 2024/2026, `pipeline.metrics.uar`):
SpeechBrain classifier folders.

`emotion.folder` is either one classifier folder (a SpeechBrain `hyperparams.yaml` with the
weights and label encoder it names) or VPC's SER models folder: `fold_<n>/CKPT+<epoch>/`, one
classifier per IEMOCAP fold, each speaker classified by the model of its fold (`spk2fold` of the
data dir), the checkpoint of each fold picked as VPC's `scan_checkpoint` picks it
(`checkpoint`: `valid_loss`, VPC 2026's rule, or `last`, VPC 2024's; `fold_checkpoint`). A
folder is loaded by `interface`: a class path (default
`speechbrain.inference.classifiers.EncoderClassifier`, the interface of SpeechBrain's emotion
recipes) or `<file>.py:<class>`, a Python file in the folder that SpeechBrain's `foreign_class`
imports (VPC's `custom_interface.py:CustomEncoderWav2vec2Classifier`; it runs the folder's
code, as VPC does). Each waveform gets the label the model scores highest. `read_emotion_data`
reads a Kaldi-style data dir with emotion labels, e.g. VPC's IEMOCAP dirs: wav.scp, utt2spk,
spk2gender, utt2emo (`<utt> <label>`) and, for fold models, spk2fold (`<speaker> <fold>`).

>>> EmotionClassifier("models/emotion").classify([np.zeros(16000, np.float32)])  # doctest: +SKIP
['neu']
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from pipeline.core.checks import Checked, choice
from pipeline.core.errors import VpevalError, input_error
from pipeline.data.audio import audio_info
from pipeline.data.corpus import listed_once
from pipeline.data.kaldi import table_lines
from pipeline.data.manifest import Utterance
from pipeline.data.vpc import VoicePrivacyDirs
from pipeline.recognition.asr import HYPERPARAMS, folder_fingerprint, load_speechbrain

LABELS, FOLDS = "utt2emo", "spk2fold"
EMOTION_FOLDER = ("emotion.folder", "SpeechBrain emotion")  # its config key, its name in errors
FOLD_FOLDER, CHECKPOINT = re.compile(r"fold_(.+)"), re.compile(r"CKPT\+?(\d+)")
VALID_LOSS = re.compile(r"epoch:\s*(\d+).*?valid loss:\s*([\d.e+-]+)")  # a line of SpeechBrain's train_log.txt
CHECKPOINT_RULES = ("valid_loss", "last")  # emotion.checkpoint: VPC 2026's scan_checkpoint, VPC 2024's


class EmotionClassifier(Checked):
    """A SpeechBrain emotion classifier folder, or VPC's fold models: waveforms -> label names."""

    settings_checks = {"checkpoint": choice(CHECKPOINT_RULES)}

    def __init__(self, folder: str | None, interface: str = "speechbrain.inference.classifiers.EncoderClassifier",
                 device: str = "cpu", overrides: Mapping | None = None, checkpoint: str = "valid_loss"):
        import torch

        self.folder, self.checkpoints = classifier_folders(folder, checkpoint)
        self.interface, self.device, self.overrides, self.torch = interface, device, dict(overrides or {}), torch

    def classify(self, waves: list[np.ndarray], folds: list[str] | None = None) -> list[str]:
        """The label of each waveform; with fold models, `folds` gives each waveform's fold and
        each fold's model is loaded once, used for its waveforms, then let go."""
        folds = self.fold_list(folds, len(waves))
        labels = [""] * len(waves)
        for fold in dict.fromkeys(folds):
            model = load_speechbrain(self.checkpoints[fold], *EMOTION_FOLDER, self.interface, self.device,
                                     self.overrides)
            for i in (i for i, f in enumerate(folds) if f == fold):
                with self.torch.no_grad():
                    _, _, _, text = model.classify_batch(self.torch.as_tensor(np.asarray(waves[i], np.float32))[None])
                labels[i] = str(text[0])
        return labels

    def fold_list(self, folds: list[str] | None, count: int) -> list[str | None]:
        """Each waveform's model key, checked before any model loads: a fold model for every fold."""
        if None in self.checkpoints:
            return [None] * count
        if folds is None:
            raise VpevalError(f"{self.folder}: emotion.folder holds fold models ({', '.join(self.checkpoints)}); "
                              f"emotion.data needs {FOLDS} (`<speaker> <fold>` lines) to say which model "
                              "classifies whom")
        missing = sorted(set(folds) - set(self.checkpoints))
        if missing:
            raise VpevalError(f"{self.folder}: no model for fold {', '.join(missing)} named in {FOLDS} "
                              f"(the folder has fold_{', fold_'.join(self.checkpoints)})")
        return list(folds)

    @classmethod
    def folds_of(cls, settings: Mapping) -> list[str]:
        """The folds of the configured fold models, [] for one classifier folder."""
        return [fold for fold in classifier_folders(settings.get("folder"), settings.get("checkpoint", "valid_loss"))[1]
                if fold is not None]

    @classmethod
    def fingerprint_of(cls, settings: Mapping) -> dict:
        """The model folder's files and the checkpoint each fold uses, from the settings, without
        loading a model (a cached list's key)."""
        folder, checkpoints = classifier_folders(settings.get("folder"), settings.get("checkpoint", "valid_loss"))
        return {"files": folder_fingerprint(folder),
                "checkpoints": {str(fold): str(path.relative_to(folder)) for fold, path in checkpoints.items()}}


def classifier_folders(folder: str | None, checkpoint: str = "valid_loss") -> tuple[Path, dict[str | None, Path]]:
    """(the checked `emotion.folder`, {fold: checkpoint folder by the `checkpoint` rule}): {None:
    folder} for one classifier folder; one line for a folder that is neither kind."""
    key, kind = EMOTION_FOLDER
    if not folder:
        raise VpevalError(f"{key}: no model folder given (set {key}=/path/to/folder)")
    path = Path(folder)
    if not path.is_dir():
        raise VpevalError(f"{path}: {key} folder not found")
    if (path / HYPERPARAMS).is_file():
        return path, {None: path}
    folds = sorted((p for p in path.iterdir() if p.is_dir() and FOLD_FOLDER.fullmatch(p.name)), key=fold_order)
    if not folds:
        raise VpevalError(f"{path}: not a {kind} folder (no {HYPERPARAMS}, and no fold_<n> folders of VPC's "
                          "SER models)")
    return path, {FOLD_FOLDER.fullmatch(p.name).group(1): fold_checkpoint(p, checkpoint) for p in folds}


def fold_order(folder: Path) -> tuple:
    name = FOLD_FOLDER.fullmatch(folder.name).group(1)
    return (0, int(name), "") if name.isdigit() else (1, 0, name)


def fold_checkpoint(fold: Path, rule: str = "valid_loss") -> Path:
    """The checkpoint VPC's `scan_checkpoint(fold, 'CKPT')` picks. VPC 2026 (`valid_loss`):
    `CKPT+<e>` for the epoch e of the lowest valid loss in `train_log.txt` (the first such line),
    when that folder exists; else, and always in VPC 2024 (`last`), the `CKPT+<e>` folder of the
    highest epoch. One line when there is none."""
    epochs = {int(match.group(1)): p for p in fold.iterdir()
              if p.is_dir() and (match := CHECKPOINT.fullmatch(p.name))}
    best = best_epoch(fold / "train_log.txt") if rule == "valid_loss" else None
    if best is not None and (fold / f"CKPT+{best}").is_dir():
        return fold / f"CKPT+{best}"
    if not epochs:
        raise VpevalError(f"{fold}: no checkpoint folder CKPT+<epoch> (VPC's SER fold layout)")
    return epochs[max(epochs)]


def best_epoch(log: Path) -> int | None:
    """The epoch of the lowest `valid loss` in a SpeechBrain `train_log.txt` (the first on ties;
    None without the file, such a line or with a loss that is not a number, as VPC).

    >>> import tempfile; log = Path(tempfile.mkdtemp()) / "train_log.txt"
    >>> _ = log.write_text("epoch: 1, lr: 1e-04 - train loss: 2.1 - valid loss: 1.5\\n"
    ...                    "epoch: 2, lr: 1e-04 - train loss: 1.2 - valid loss: 1.7\\n")
    >>> best_epoch(log)
    1
    """
    if not log.is_file():
        return None
    try:  # as VPC: a loss that is not a number makes the whole log unusable
        found = [(float(m.group(2)), int(m.group(1))) for line in log.read_text(errors="replace").splitlines()
                 if (m := VALID_LOSS.search(line))]
    except ValueError:
        return None
    return min(found, key=lambda loss_epoch: loss_epoch[0])[1] if found else None


def read_emotion_data(folder: str | Path) -> tuple[list[Utterance], dict[str, str]]:
    """Utterances and their labels of a Kaldi-style dir with `utt2emo`, relative `wav.scp` paths
    read from the folder above the dir's parent, where VPC's scripts run (`$VPC` for
    `$VPC/data/IEMOCAP_dev`, as `data=vpc`); one line naming the file for a missing file, a bad
    line or an utterance without a label."""
    folder = Path(folder)
    entries = VoicePrivacyDirs(folder.parent).entries(folder.name)
    labels_file = folder / LABELS
    if not labels_file.is_file():
        raise input_error(labels_file, "not found: an emotion dataset needs `<utt> <label>` lines")
    labels = two_field_table(labels_file, "`<utt> <label>`", "utterance", "as {}")
    utterances = []
    for entry in entries:
        if entry.problem:
            raise VpevalError(f"{entry.where}: {entry.problem}")
        if entry.id not in labels:
            raise input_error(labels_file, f"utterance {entry.id} ({entry.where}) has no emotion label")
        rate, frames, _ = audio_info(entry.path)
        utterances.append(entry.utterance(frames / rate, rate))
    return utterances, {u.id: labels[u.id] for u in utterances}


def read_folds(folder: str | Path, speakers: set[str]) -> dict[str, str] | None:
    """The fold of every speaker (`spk2fold` of a data dir), None without the file; one line
    naming the file for a bad line or a speaker without a fold."""
    path = Path(folder) / FOLDS
    if not path.is_file():
        return None
    folds = two_field_table(path, "`<speaker> <fold>`", "speaker", "in fold {}")
    missing = sorted(speakers - set(folds))
    if missing:
        raise input_error(path, f"speaker {missing[0]} (utt2spk) has no fold")
    return {speaker: folds[speaker] for speaker in sorted(speakers)}


def two_field_table(path: Path, form: str, what: str, listed: str) -> dict[str, str]:
    """`<key> <value>` lines; one line naming the file and line for another form, or for a key
    listed again with another value (`listed_once`: never the last value silently)."""
    rows = table_lines(path)
    for number, key, value in rows:
        if not value or " " in value:
            raise input_error(path, f"expected {form}, got {key!r} {value!r}", number)
    return {key: value for key, (value, _) in listed_once(path, rows, what, listed).items()}
