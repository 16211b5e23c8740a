"""Speaker embeddings of whole utterances, batched over length-sorted buckets.

>>> ids, embeddings = extract_embeddings("runs/attacker", utts, device="cpu")  # doctest: +SKIP
>>> embeddings.shape                                                          # doctest: +SKIP
(len(utts), 192)

With a `World` of several ranks the buckets are dealt round-robin (longest first) to the
ranks, each embeds its own, and a sum over ranks (every row comes from exactly one rank,
zeros elsewhere) gives every rank all embeddings in manifest order: the same buckets, so
the same numbers as one process.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from tqdm import tqdm

from pipeline.asv.audio_cache import ordered_map
from pipeline.asv.checkpoint import check_builders, load_checkpoint, load_state_checked, save_checkpoint
from pipeline.asv.distributed import World
from pipeline.asv.model import SpeakerEncoder, autocast_dtype
from pipeline.data.audio import read_audio
from pipeline.data.manifest import Utterance
from pipeline.devices import module_device
from pipeline.errors import VpevalError
from pipeline.fileio import write_json

ENCODER_BUILDERS = ("pipeline.asv.",)  # what an attacker folder's model.json may name


def load_encoder(model_dir: str | Path, device: str | torch.device) -> SpeakerEncoder:
    """Rebuild the encoder from `model_dir/model.json` and load `model.pt` (weights only), in eval mode."""
    model_dir = Path(model_dir)
    spec_path = model_dir / "model.json"
    if not spec_path.is_file():
        raise VpevalError(f"{spec_path}: attacker model description not found")
    try:
        spec = json.loads(spec_path.read_text())["model"]
        check_builders(spec, spec_path, ENCODER_BUILDERS)
        encoder = instantiate(spec)
    except (json.JSONDecodeError, KeyError, TypeError, InstantiationException) as exc:
        raise VpevalError(f"{spec_path}: cannot rebuild the encoder ({str(exc).splitlines()[0]})") from None
    if not isinstance(encoder, SpeakerEncoder):
        raise VpevalError(f"{spec_path}: 'model' builds a {type(encoder).__name__}, not a SpeakerEncoder")
    weights_path = model_dir / "model.pt"
    load_state_checked(encoder, load_checkpoint(weights_path), weights_path, "model")
    return encoder.to(device).eval()


def save_encoder(model_dir: str | Path, encoder: SpeakerEncoder, **info) -> Path:
    """Write an attacker folder: `model.pt` (weights only), then `model.json` (how to rebuild it,
    plus `info`), which `load_encoder` reads back."""
    model_dir = Path(model_dir)
    save_checkpoint(model_dir / "model.pt", {name: tensor.detach().to("cpu", copy=True)
                                             for name, tensor in encoder.state_dict().items()})
    target = f"{type(encoder).__module__}.{type(encoder).__qualname__}"
    write_json(model_dir / "model.json", {**info, "model": {"_target_": target, **encoder.architecture}})
    return model_dir


def extract_embeddings(model_dir: str | Path, utts: Sequence[Utterance], *, device: str | torch.device | None = None,
                       batch_seconds: float = 400.0, precision: str = "fp32", workers: int = 2,
                       progress: bool | None = None, world: World | None = None) -> tuple[list[str], np.ndarray]:
    """Embeddings (N x D float32, in the order of `utts`) with the encoder saved in `model_dir`,
    on `device`, or shared by the ranks of `world` on its device (see the module doc)."""
    world = world or World.single(device)
    encoder = load_encoder(model_dir, world.device)
    return embed_utterances(encoder, utts, batch_seconds=batch_seconds, precision=precision, workers=workers,
                            progress=progress, world=world)


def padded_batch(utts: Sequence[Utterance], sample_rate: int, min_samples: int) -> tuple[np.ndarray, np.ndarray]:
    """(zero-padded float32 audio (B, longest), int64 lengths) of `utts` read at `sample_rate`;
    an utterance shorter than `min_samples` (one fbank window) is an error naming it."""
    wavs = [read_audio(utt.path, sample_rate) for utt in utts]
    for utt, wav in zip(utts, wavs):
        if len(wav) < min_samples:
            raise VpevalError(f"{utt.path}: utterance {utt.id!r} has {len(wav)} samples, "
                              f"fewer than one {min_samples}-sample fbank window")
    lengths = np.array([len(wav) for wav in wavs], dtype=np.int64)
    padded = np.zeros((len(wavs), lengths.max()), dtype=np.float32)
    for row, wav in enumerate(wavs):
        padded[row, :len(wav)] = wav
    return padded, lengths


def length_buckets(durations: Sequence[float], batch_seconds: float) -> list[list[int]]:
    """Index batches, longest utterances first, each with (count x longest) <= batch_seconds
    (an utterance longer than that is a batch of its own).

    >>> length_buckets([1.0, 4.0, 2.0, 3.0], batch_seconds=6.5)
    [[1], [3, 2], [0]]
    """
    batches: list[list[int]] = []
    for index in sorted(range(len(durations)), key=lambda i: (-durations[i], i)):
        if batches and (len(batches[-1]) + 1) * durations[batches[-1][0]] <= batch_seconds:
            batches[-1].append(index)
        else:
            batches.append([index])
    return batches


def embed_utterances(encoder: SpeakerEncoder, utts: Sequence[Utterance], *, device: str | torch.device | None = None,
                     batch_seconds: float = 400.0, precision: str = "fp32", workers: int = 2,
                     progress: bool | None = None, world: World | None = None) -> tuple[list[str], np.ndarray]:
    """Embed whole utterances with `encoder` (eval mode, no grad; autocast on CUDA for bf16/fp16).

    Audio is read by `workers` threads ahead of the model; batches hold utterances of similar
    length, padded, with relative lengths, so results do not depend on `batch_seconds`.
    Runs on the encoder's device (a `device`, or a `world` on another device, is an error);
    with `world` every rank calls this with the same utterances, embeds its share of the
    buckets and returns all embeddings.
    """
    device = module_device(encoder, world.device if world else device, what="the speaker encoder")
    world = world or World.single(device)
    dtype = autocast_dtype(precision, device, config_key="attacker.extraction.precision")
    encoder.eval()
    min_samples = encoder.fbank.window_size
    embeddings = np.zeros((len(utts), encoder.embedding_dim), dtype=np.float32)
    batches = length_buckets([utt.duration for utt in utts], batch_seconds)[world.rank::world.size]

    def load(batch: list[int]) -> tuple[np.ndarray, np.ndarray]:
        return padded_batch([utts[i] for i in batch], encoder.sample_rate, min_samples)

    show = progress if world.is_main else False
    bar = tqdm(total=sum(map(len, batches)), desc="embedding", unit="utt", disable=None if show is None else not show)
    with torch.inference_mode():
        for batch, (padded, lengths) in zip(batches, ordered_map(load, batches, workers=workers)):
            wavs = torch.from_numpy(padded).to(device, non_blocking=True)
            wav_lens = torch.from_numpy(lengths / padded.shape[1]).to(device)
            with torch.autocast(device_type=device.type, dtype=dtype, enabled=dtype is not None):
                output = encoder(wavs, wav_lens)
            embeddings[batch] = output.float().cpu().numpy()
            bar.update(len(batch))
    bar.close()
    if world.size > 1:
        embeddings = world.sum(torch.from_numpy(embeddings).to(device)).cpu().numpy()
    return [utt.id for utt in utts], embeddings
