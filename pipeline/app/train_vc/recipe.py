"""Steps shared by the training recipes (`vc`, `ohnn`):
the corpus through the pipeline's own prepare stage, the speaker encoder (given, or trained
with the pipeline's own attacker training on the original speech), utterance embeddings
cached by content, and resumable-run bookkeeping."""
from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from omegaconf import DictConfig
from omegaconf.errors import MissingMandatoryValue

from anonymizers.vc.checkpoints import WEIGHTS
from anonymizers.vc.pool import utterances_key
from pipeline.asv.embed import embed_utterances
from pipeline.asv.model import SpeakerEncoder
from pipeline.asv.train import attacker_settings
from pipeline.core.cache import Cache, plain
from pipeline.core.errors import VpevalError
from pipeline.core.layout import manifest_path
from pipeline.core.schemas import Data, Split, typed
from pipeline.data.manifest import Utterance, file_digest, read_manifest
from pipeline.runtime.checkpoint import load_checkpoint, save_checkpoint
from pipeline.stages import prepare, split, train

EMBEDDINGS_FORMAT = "vpeval-utterance-embeddings-1"


@contextmanager
def user_errors(recipe: str) -> Iterator[None]:
    """A recipe's VpevalError, or a required key left unset (`out`, `data.root`), as one
    `vpeval: error:` line and exit status 2, as every vpeval command."""
    try:
        yield
    except VpevalError as error:
        print(f"vpeval: error: {recipe} training: {error}", file=sys.stderr)
        sys.exit(2)
    except MissingMandatoryValue as error:
        print(f"vpeval: error: {recipe} training: {error.full_key} is required (add {error.full_key}=...)",
              file=sys.stderr)
        sys.exit(2)


def prepared_corpus(cfg: DictConfig, cache: Cache) -> Path:
    """The recipe corpus (`cfg.data`, a conf/data node) through the prepare stage."""
    return prepare.run(typed(cfg.data, Data, "data"), cache)


def training_utterances(prepared: Path) -> list[Utterance]:
    return read_manifest(manifest_path(prepared, "train"))


def speaker_encoder_dir(cfg: DictConfig, cache: Cache, prepared: Path, device: str) -> Path:
    """`cfg.speaker_encoder.model_dir`, or an ECAPA-TDNN trained here on the corpus's original
    training speech by the pipeline's split and train stages (`cfg.speaker_encoder.attacker`),
    its training curves beside the recipe's (`<out>/curves`)."""
    given = cfg.speaker_encoder.get("model_dir")
    if given:
        folder = Path(str(given))
        if not (folder / "model.json").is_file() or not (folder / WEIGHTS).is_file():
            raise VpevalError(f"speaker_encoder.model_dir={folder}: no model.json and model.pt (an attacker folder)")
        return folder
    split_settings = typed(cfg.speaker_encoder.split, Split, "speaker_encoder.split")
    held_out = split.run(split_settings, manifest_path(prepared, "train"), cache, seed=int(cfg.seed))
    curves = {**plain(cfg.get("curves") or {}), "folder": str(cache.root.parent / "curves")}  # beside the recipe's own
    attacker = attacker_settings(cfg.speaker_encoder.attacker, "speaker_encoder.attacker")
    return train.run(attacker, held_out, cache, seed=int(cfg.seed), device=device, curves=curves)


def utterance_embeddings(utterances: Sequence[Utterance], encoder: SpeakerEncoder, encoder_dir: Path,
                         cache_file: Path, *, device: torch.device, batch_seconds: float = 120.0) -> np.ndarray:
    """(N, D) L2-normalised embeddings in the order of `utterances`, cached in `cache_file`
    under a key of the utterances and the encoder weights."""
    key = utterances_key(utterances, EMBEDDINGS_FORMAT, file_digest(encoder_dir / WEIGHTS))
    if cache_file.is_file():
        state = load_checkpoint(cache_file)
        if state.get("key") == key:
            return state["embeddings"].numpy()
    _, embeddings = embed_utterances(encoder, utterances, device=device, batch_seconds=batch_seconds)
    embeddings = F.normalize(torch.from_numpy(embeddings), dim=-1)
    save_checkpoint(cache_file, {"format": EMBEDDINGS_FORMAT, "key": key, "embeddings": embeddings})
    return embeddings.numpy()
