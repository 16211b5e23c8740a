"""Speaker embeddings of whole utterances, batched over length-sorted buckets.

>>> ids, embeddings = extract_embeddings("runs/attacker", utts, device="cpu")  # doctest: +SKIP
>>> embeddings.shape                                                          # doctest: +SKIP
(len(utts), 192)

With a `World` of several ranks the buckets are dealt round-robin (longest first) to the
ranks, each embeds its own, and a sum over ranks (every row comes from exactly one rank,
zeros elsewhere) gives every rank all embeddings in manifest order: the same buckets, so
the same numbers as one process.

A batch that does not fit the device's memory is embedded in halves, down to one utterance;
one utterance that does not fit is a one-line error naming attacker.extraction.batch_seconds
and the memory (`pipeline.core.devices.out_of_memory`).

With `compile` (attacker.extraction.compile: true or a torch.compile mode) the encoder's
`embed_samples` is compiled with dynamic shapes: the bucket lengths and batch sizes are
symbols, so a corpus compiles two or three graphs (the first shape's, the dynamic one, one for
batches of a single utterance), not one per shape; the embeddings equal eager ones to float
rounding.
"""
from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from torch import nn
from tqdm import tqdm

from pipeline.asv.audio_cache import INT16_SCALE, AudioCache, build_audio_cache, cache_key
from pipeline.asv.encoder import check_encoder, check_module_targets, class_path
from pipeline.core.devices import autocast, compile_failed, compile_mode, module_device, out_of_memory
from pipeline.core.errors import VpevalError
from pipeline.core.fileio import read_text, write_json
from pipeline.data.audio import read_audio
from pipeline.data.manifest import Utterance
from pipeline.runtime.checkpoint import load_checkpoint, load_state_checked, save_checkpoint
from pipeline.runtime.distributed import World
from pipeline.runtime.ordered import ordered_map
from pipeline.runtime.precision import autocast_dtype

log = logging.getLogger(__name__)


def load_encoder(model_dir: str | Path, device: str | torch.device) -> nn.Module:
    """Rebuild the encoder from `model_dir/model.json` and load `model.pt` (weights only), in eval mode."""
    model_dir = Path(model_dir)
    spec_path = model_dir / "model.json"
    if not spec_path.is_file():
        raise VpevalError(f"{spec_path}: attacker model description not found")
    try:
        spec = json.loads(read_text(spec_path))["model"]
        check_module_targets(spec, spec_path)
        encoder = check_encoder(instantiate(spec), f"{spec_path}: 'model'")
    except (json.JSONDecodeError, KeyError, TypeError, InstantiationException) as exc:
        raise VpevalError(f"{spec_path}: cannot rebuild the encoder ({str(exc).splitlines()[0]})") from None
    weights_path = model_dir / "model.pt"
    load_state_checked(encoder, load_checkpoint(weights_path), weights_path, "model")
    return encoder.to(device).eval()


def save_encoder(model_dir: str | Path, encoder: nn.Module, **info) -> Path:
    """Write an attacker folder: `model.pt` (weights only), then `model.json` (how to rebuild it,
    plus `info`), which `load_encoder` reads back."""
    model_dir = Path(model_dir)
    save_checkpoint(model_dir / "model.pt", {name: tensor.detach().to("cpu", copy=True)
                                             for name, tensor in encoder.state_dict().items()})
    write_json(model_dir / "model.json", {**info, "model": {"_target_": class_path(encoder), **encoder.architecture}})
    return model_dir


def extract_embeddings(model_dir: str | Path, utts: Sequence[Utterance], *, device: str | torch.device | None = None,
                       batch_seconds: float = 400.0, precision: str = "fp32", workers: int = 2,
                       progress: bool | None = None, world: World | None = None,
                       audio_cache: str | Path | None = None,
                       compile: bool | str | None = None) -> tuple[list[str], np.ndarray]:
    """Embeddings (N x D float32, in the order of `utts`) with the encoder saved in `model_dir`,
    on `device`, or shared by the ranks of `world` on its device (see the module doc)."""
    world = world or World.single(device)
    encoder = load_encoder(model_dir, world.device)
    return embed_utterances(encoder, utts, batch_seconds=batch_seconds, precision=precision, workers=workers,
                            progress=progress, world=world, audio_cache=audio_cache, compile=compile)


BUCKETS_PER_OCTAVE = 8  # padded lengths: at most 10 % (about 4.5 % on average) of padding
SHORTEST_BUCKET = 64  # hops (0.64 s at 16 kHz): shorter batches are padded to it


def bucket_length(samples: int, hop: int) -> int:
    """The padded length of a batch whose longest utterance has `samples`: the next of the
    fixed lengths hop * ceil(64 * 2 ** (k / 8)), k = 0, 1, ... (eight per doubling from
    0.64 s at a 10 ms hop), so a corpus of 0-35 s utterances gives the GPU under 50 shapes.

    >>> [bucket_length(n, 160) for n in (400, 10240, 10241, 16000, 48000)]
    [10240, 10240, 11200, 17280, 48800]
    """
    k = max(0, math.floor(BUCKETS_PER_OCTAVE * math.log2(max(samples / hop, 1) / SHORTEST_BUCKET)))
    while (length := hop * math.ceil(SHORTEST_BUCKET * 2 ** (k / BUCKETS_PER_OCTAVE))) < samples:
        k += 1
    return length


def padded_batch(utts: Sequence[Utterance], sample_rate: int, min_samples: int, *,
                 bucket_hop: int | None = None,
                 waveforms: Sequence[np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(zero-padded audio (B, longest, or its `bucket_length` with `bucket_hop`), int64
    lengths) of `utts` read at `sample_rate` as float32, or of the given `waveforms` (their
    dtype kept); an utterance shorter than `min_samples` (the encoder's shortest input) is an error naming it."""
    wavs = waveforms if waveforms is not None else [read_audio(utt.path, sample_rate) for utt in utts]
    for utt, wav in zip(utts, wavs):
        if len(wav) < min_samples:
            raise VpevalError(f"{utt.path}: utterance {utt.id!r} has {len(wav)} samples, "
                              f"fewer than one {min_samples}-sample fbank window")
    lengths = np.array([len(wav) for wav in wavs], dtype=np.int64)
    longest = int(lengths.max())
    padded = np.zeros((len(wavs), bucket_length(longest, bucket_hop) if bucket_hop else longest), dtype=wavs[0].dtype)
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


def embed_utterances(encoder: nn.Module, utts: Sequence[Utterance], *, device: str | torch.device | None = None,
                     batch_seconds: float = 400.0, precision: str = "fp32", workers: int = 2,
                     progress: bool | None = None, world: World | None = None,
                     audio_cache: str | Path | None = None,
                     audio_cache_key: str = "attacker.extraction.audio_cache",
                     compile: bool | str | None = None) -> tuple[list[str], np.ndarray]:
    """Embed whole utterances with `encoder` (eval mode, no grad; autocast on CUDA for bf16/fp16).

    Audio is read by `workers` threads ahead of the model: decoded from the files, or, with
    `audio_cache` (a folder), from an int16 `audio_cache` of these utterances built there on
    first use (one subfolder per utterance list), so repeated extractions (validation every
    epoch) decode once; `audio_cache_key`, the setting that moves it, is named if it would not
    fit the disk. Batches hold utterances of similar length padded to one of a fixed set of
    lengths (`bucket_length`), with their sample counts, so results do not depend on
    `batch_seconds`. The embeddings stay on the device until the end: no host sync per batch.
    Runs on the encoder's device (a `device`, or a `world` on another device, is an error);
    with `world` every rank calls this with the same utterances, embeds its share of the
    buckets and returns all embeddings. `compile`: see the module doc.
    """
    device = module_device(encoder, world.device if world else device, what="the speaker encoder")
    check_lengths(encoder, utts)
    world = world or World.single(device)
    dtype = autocast_dtype(precision, device, config_key="attacker.extraction.precision")
    mode = compile_mode(compile, device, config_key="attacker.extraction.compile")
    embed = Embed(encoder, mode)
    encoder.eval()
    cache = None
    if audio_cache is not None:
        folder = Path(audio_cache) / cache_key(utts, encoder.sample_rate)[:24]
        with world.main_first():
            cache = build_audio_cache(utts, folder, sample_rate=encoder.sample_rate, workers=workers,
                                      progress=False if not world.is_main else progress, folder_key=audio_cache_key)
    batches = length_buckets([utt.duration for utt in utts], batch_seconds)[world.rank::world.size]
    embeddings = _embed_batches(embed, utts, batches, device, dtype, workers, cache,
                                progress if world.is_main else False, batch_seconds)
    if world.size > 1:
        embeddings = world.sum(embeddings)
    return [utt.id for utt in utts], embeddings.float().cpu().numpy()


def check_lengths(encoder: nn.Module, utts: Sequence[Utterance]) -> None:
    """Refuse, before any work, utterances longer than the encoder's `max_samples` (if it has one)."""
    limit = getattr(encoder, "max_samples", None)
    too_long = [utt for utt in utts if limit and utt.duration * encoder.sample_rate > limit]
    if too_long:
        longest = max(too_long, key=lambda utt: utt.duration)
        raise VpevalError(f"{longest.path}: utterance {longest.id!r} is {longest.duration:.1f} s, longer than the "
                          f"{limit / encoder.sample_rate:g} s attacker.model.max_seconds ({len(too_long)} such "
                          f"utterances); split them, or raise the bound if the device's memory allows")


class Embed:
    """`encoder.embed_samples`, compiled in torch.compile's `mode` (None: eager); a compile
    failure is one line naming attacker.extraction.compile."""

    def __init__(self, encoder: nn.Module, mode: str | None):
        self.encoder, self.mode = encoder, mode
        self.run = torch.compile(encoder.embed_samples, dynamic=True, mode=mode) if mode else encoder.embed_samples

    def __call__(self, wavs: torch.Tensor, num_samples: torch.Tensor) -> torch.Tensor:
        if not self.mode:
            return self.run(wavs, num_samples)
        torch.compiler.cudagraph_mark_step_begin()
        try:  # a copy: under CUDA graphs the next replay of this shape (an out-of-memory split's other half) reuses it
            return self.run(wavs, num_samples).clone()
        except torch._dynamo.exc.TorchDynamoException as exc:
            raise compile_failed(exc, self.mode, "attacker.extraction.compile") from None


def _embed_batches(embed: Embed, utts: Sequence[Utterance], batches: list[list[int]], device: torch.device,
                   dtype: torch.dtype | None, workers: int, cache: AudioCache | None,
                   progress: bool | None, batch_seconds: float) -> torch.Tensor:
    """(len(utts), D) embeddings on `device`, zero outside `batches`; never waits for the device
    (except to split a batch that ran out of memory, see `embed_fitting`)."""
    encoder = embed.encoder
    hop, min_samples = encoder.frame_hop, encoder.min_samples
    pin = device.type == "cuda"

    def load(batch: list[int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        chosen = [utts[i] for i in batch]
        waveforms = None if cache is None else [cache.audio[cache.offsets[i]:cache.offsets[i + 1]] for i in batch]
        padded, lengths = padded_batch(chosen, encoder.sample_rate, min_samples, bucket_hop=hop, waveforms=waveforms)
        tensors = torch.from_numpy(padded), torch.from_numpy(lengths), torch.tensor(batch)
        return tuple(t.pin_memory() for t in tensors) if pin else tensors

    embeddings = torch.zeros(len(utts), encoder.embedding_dim, device=device)
    bar = tqdm(total=sum(map(len, batches)), desc="embedding", unit="utt",
               disable=None if progress is None else not progress)
    split: list[int] = []  # sizes of the batches that were split
    with torch.inference_mode():
        for padded, lengths, rows in ordered_map(load, batches, workers=workers):
            wavs = padded.to(device, non_blocking=True)
            if wavs.dtype == torch.int16:
                wavs = wavs.float() / INT16_SCALE
            output = embed_fitting(embed, wavs, lengths.to(device, non_blocking=True), dtype, batch_seconds, split)
            embeddings.index_copy_(0, rows.to(device, non_blocking=True), output.float())
            bar.update(len(rows))
    bar.close()
    if split:
        log.warning("extraction: batches of up to %d utterances did not fit %s's memory and were embedded in "
                    "halves (%d splits); a lower attacker.extraction.batch_seconds (now %g) avoids the retries",
                    max(split), device, len(split), batch_seconds)
    return embeddings


def embed_fitting(embed: Embed, wavs: torch.Tensor, lengths: torch.Tensor, dtype: torch.dtype | None,
                  batch_seconds: float, split: list[int]) -> torch.Tensor:
    """`embed(wavs, lengths)`, in halves (recursively, each size appended to `split`) while a
    batch runs out of memory; one utterance that does not fit is a one-line error."""
    encoder = embed.encoder
    try:
        with autocast(wavs.device.type, dtype):
            return embed(wavs, lengths)
    except torch.OutOfMemoryError as error:
        if len(wavs) == 1:
            seconds = int(lengths[0]) / encoder.sample_rate
            advice = "cut such utterances shorter" + (
                ", or lower attacker.model.max_seconds to refuse them" if hasattr(encoder, "max_samples") else "") + (
                ", or set attacker.extraction.precision=bf16" if wavs.device.type == "cuda" and dtype is None else "")
            raise out_of_memory(error, wavs.device, f"embedding one {seconds:.1f} s utterance",
                                f"attacker.extraction.batch_seconds={batch_seconds:g}", advice) from None
    split.append(len(wavs))  # outside the except block: the failed attempt's tensors are freed first
    half = (len(wavs) + 1) // 2
    return torch.cat([embed_fitting(embed, wavs[:half], lengths[:half], dtype, batch_seconds, split),
                      embed_fitting(embed, wavs[half:], lengths[half:], dtype, batch_seconds, split)])
