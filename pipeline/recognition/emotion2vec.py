"""emotion2vec+ through FunASR, the emotion recogniser of VPC 2026 Track 2 (`emotion=emotion2vec`).

`emotion.folder` is a FunASR model folder saved on disk, the files FunASR's loader reads from a
local folder: `config.yaml`, `model.pt`, `tokens.txt` (the hubs' emotion2vec+ large folder itself
was not available to check); nothing is downloaded.
Each waveform gets the label emotion2vec+ scores highest among its nine (`tokens.txt`, e.g.
`生气/angry` ... `<unk>`), mapped onto IEMOCAP's four as VPC's `emotion2vec_ser.py` maps them
(`iemocap_label`: disgusted -> ang, fearful -> sad, surprised, other and unknown -> neu).
VPC hands FunASR a file path, vpeval the same samples decoded by soundfile (float32, as FunASR
reads them). Needs FunASR (`pip install 'vpeval[emotion2vec]'`).

>>> iemocap_label("厌恶/disgusted"), iemocap_label("<unk>"), iemocap_label(3)
('ang', 'neu', 'hap')
"""
from __future__ import annotations

import contextlib
import io
import logging
import random
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from pipeline.core.checks import Checked
from pipeline.core.errors import VpevalError
from pipeline.recognition.asr import folder_fingerprint, model_folder

log = logging.getLogger(__name__)
FOLDER_KEY, KIND = "emotion.folder", "FunASR emotion2vec"
MODEL_FILES = ("config.yaml", "model.pt", "tokens.txt")
NINE = ("angry", "disgusted", "fearful", "happy", "neutral", "other", "sad", "surprised", "unknown")
TO_IEMOCAP = {"angry": "ang", "disgusted": "ang", "fearful": "sad", "happy": "hap", "neutral": "neu",
              "other": "neu", "sad": "sad", "surprised": "neu", "unknown": "neu"}  # VPC's EMOTION2VEC_TO_IEMOCAP


class Emotion2vecClassifier(Checked):
    """An emotion2vec+ folder: waveforms -> IEMOCAP label names (one model, no folds)."""

    def __init__(self, folder: str | None, device: str = "cpu"):
        from pipeline.core.devices import resolve_device

        self.folder = model_folder(folder, FOLDER_KEY, MODEL_FILES, KIND)
        self.model = load_model(self.folder, str(resolve_device(device)))  # FunASR falls back to the CPU silently

    def classify(self, waves: list[np.ndarray], folds: list[str] | None = None) -> list[str]:
        """The IEMOCAP label of each 16 kHz waveform (`folds` plays no part)."""
        labels = []
        for wave in waves:
            found = self.model.generate(np.asarray(wave, np.float32), granularity="utterance",
                                        extract_embedding=False)[0]
            labels.append(iemocap_label(found["labels"][int(np.argmax(found["scores"]))]))
        return labels

    @staticmethod
    def fold_list(folds: list[str] | None, count: int) -> list[None]:
        """One model classifies every waveform."""
        return [None] * count

    @classmethod
    def fingerprint_of(cls, settings: Mapping) -> dict:
        """The model folder's files (a cached list's key), without loading FunASR."""
        return {"files": folder_fingerprint(model_folder(settings.get("folder"), FOLDER_KEY, MODEL_FILES, KIND))}


def load_model(folder: Path, device: str):
    """FunASR's AutoModel of the folder, leaving the process as it found it (FunASR seeds every
    generator, sets torch's thread count, prints to stdout, configures logging); one line
    without FunASR, or for weights the folder's model.pt lacks, which FunASR would leave random
    with a printed warning."""
    import torch

    with kept_random_state(torch), quiet(), contextlib.redirect_stdout(io.StringIO()) as printed:
        try:
            from funasr import AutoModel
        except ImportError as error:
            raise VpevalError(f"emotion=emotion2vec needs FunASR ({error}): pip install 'vpeval[emotion2vec]'") \
                from error
        model = AutoModel(model=str(folder), device=device, ncpu=torch.get_num_threads(), disable_update=True,
                          disable_pbar=True)
    log.debug("FunASR printed: %s", printed.getvalue().strip())
    check_weights(folder, model.model.state_dict(), torch)
    return model


def check_weights(folder: Path, expected: Mapping, torch) -> None:
    """One line naming the parameters of the built model that the folder's model.pt does not hold
    (FunASR's loader matches names with and without a `module.` prefix). The file is memory-mapped:
    only its names are read, not again the weights FunASR has just loaded."""
    try:
        saved = torch.load(folder / "model.pt", map_location="cpu", weights_only=False, mmap=True)
    except RuntimeError:  # a checkpoint in torch's legacy format cannot be mapped
        saved = torch.load(folder / "model.pt", map_location="cpu", weights_only=False)
    for key in ("state_dict", "model_state_dict", "model"):
        saved = saved.get(key, saved) if isinstance(saved, Mapping) else saved
    names = {name.removeprefix("module.") for name in saved}
    missing = [name for name in expected if name not in names]
    if missing:
        raise VpevalError(f"{folder / 'model.pt'}: no weights for {len(missing)} of the model's {len(expected)} "
                          f"parameters (e.g. {missing[0]}); FunASR would leave them random")


def iemocap_label(raw) -> str:
    """VPC's mapping of an emotion2vec+ label (an index, a digit string, `<chinese>/<english>`,
    `<unk>`) onto IEMOCAP's ang, hap, neu, sad; anything else is `neu`, as VPC's."""
    if isinstance(raw, int) and 0 <= raw < len(NINE):
        raw = NINE[raw]
    elif isinstance(raw, str):
        if raw.isdigit():
            raw = NINE[int(raw)] if int(raw) < len(NINE) else "unknown"
        elif "/" in raw:
            raw = raw.split("/")[-1]
        raw = "unknown" if raw == "<unk>" else raw.lower().strip()
    else:
        raw = "unknown"
    return TO_IEMOCAP.get(raw, "neu")


@contextlib.contextmanager
def kept_random_state(torch):
    """Python's, numpy's and torch's generators as they were before (FunASR seeds them all)."""
    states = random.getstate(), np.random.get_state(), torch.get_rng_state()
    try:
        yield
    finally:
        random.setstate(states[0])
        np.random.set_state(states[1])
        torch.set_rng_state(states[2])


@contextlib.contextmanager
def quiet():
    """FunASR's log lines (hub, checkpoint, remote code) out of vpeval's log while the model
    loads, and the root logger's level and handlers as they were after (its `logging.basicConfig`
    adds a handler where there is none)."""
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    root.setLevel(max(level, logging.ERROR))
    try:
        yield
    finally:
        for handler in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(handler)
        root.setLevel(level)
