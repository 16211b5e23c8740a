"""Emotion recognition for the utility metric UAR (VPC 2024, `pipeline.metrics.uar`): a SpeechBrain classifier folder.

The folder holds a SpeechBrain `hyperparams.yaml` (with `label_encoder.txt` and the weights
it names), loaded by `interface` (default `speechbrain.inference.classifiers.EncoderClassifier`,
the interface of SpeechBrain's emotion recipes); each waveform gets the label the model
scores highest. `EmotionData` reads a Kaldi-style data dir with emotion labels, e.g. VPC
2024's IEMOCAP dirs: wav.scp, utt2spk, spk2gender and utt2emo (`<utt> <label>`).

>>> EmotionClassifier("models/emotion").classify([np.zeros(16000, np.float32)])  # doctest: +SKIP
['neu']
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from pipeline.core.errors import VpevalError, input_error
from pipeline.data.audio import audio_info
from pipeline.data.kaldi import table_lines
from pipeline.data.manifest import Utterance
from pipeline.data.vpc import VoicePrivacyDirs
from pipeline.recognition.asr import HYPERPARAMS, folder_fingerprint, model_folder, speechbrain_folder

LABELS = "utt2emo"
EMOTION_FOLDER = ("emotion.folder", "SpeechBrain emotion")  # its config key, its name in errors


class EmotionClassifier:
    """A SpeechBrain emotion classifier folder: waveforms -> label names."""

    def __init__(self, folder: str | None, interface: str = "speechbrain.inference.classifiers.EncoderClassifier",
                 device: str = "cpu"):
        import torch

        self.folder, self.model = speechbrain_folder(folder, *EMOTION_FOLDER, interface, device)
        self.device, self.torch = device, torch

    def classify(self, waves: list[np.ndarray]) -> list[str]:
        labels = []
        for wave in waves:
            with self.torch.no_grad():
                _, _, _, text = self.model.classify_batch(self.torch.as_tensor(np.asarray(wave, np.float32))[None])
            labels.append(str(text[0]))
        return labels

    @classmethod
    def fingerprint_of(cls, settings: Mapping) -> dict:
        """The model folder's files, from the settings, without loading the model (a cached list's key)."""
        return folder_fingerprint(model_folder(settings.get("folder"), EMOTION_FOLDER[0], HYPERPARAMS,
                                               EMOTION_FOLDER[1]))


def read_emotion_data(folder: str | Path) -> tuple[list[Utterance], dict[str, str]]:
    """Utterances and their labels of a Kaldi-style dir with `utt2emo`; one line naming the
    file for a missing file, a bad line or an utterance without a label."""
    folder = Path(folder)
    entries = VoicePrivacyDirs(folder.parent, path_root=folder.parent).entries(folder.name)
    labels_file = folder / LABELS
    if not labels_file.is_file():
        raise input_error(labels_file, "not found: an emotion dataset needs `<utt> <label>` lines")
    labels = {}
    for number, utt, label in table_lines(labels_file):
        if not label or " " in label:
            raise input_error(labels_file, f"expected `<utt> <label>`, got {utt!r} {label!r}", number)
        labels[utt] = label
    utterances = []
    for entry in entries:
        if entry.problem:
            raise VpevalError(f"{entry.where}: {entry.problem}")
        if entry.id not in labels:
            raise input_error(labels_file, f"utterance {entry.id} ({entry.where}) has no emotion label")
        rate, frames, _ = audio_info(entry.path)
        utterances.append(entry.utterance(frames / rate, rate))
    return utterances, {u.id: labels[u.id] for u in utterances}
