"""Attacker speed: training throughput in crops/s, achieved TFLOP/s, extraction utterances/s.

Training goes through `train_attacker` itself (int16 audio cache, crop loader, fbank on the
device, autocast, AAM head, Adam, scheduler) for two epochs of `--steps` steps on a cache of
noise utterances (throughput does not depend on what the audio says); the second epoch is
timed, the first warms up (cuDNN autotuning, torch.compile). FLOPs per crop are counted with
torch.utils.flop_counter.FlopCounterMode on one forward + backward of encoder and head
(convolutions and matrix products; the fbank FFT is not counted). Extraction embeds
`--extract-utterances` WAV files of random length with `embed_utterances` (reading threads,
bucketed padded lengths), from their decoded int16 cache (built first, not timed) unless
`--extract-from files`, timed after a warm-up batch; `--extract-utterances 0` skips it.

    python benchmarks/bench_attacker.py                                   # CPU: small sizes
    python benchmarks/bench_attacker.py --device cuda --batch-size 256 --steps 100 \\
        --precision bf16 --peak-tflops 989 --extract-utterances 6000 --extract-precision bf16  # H200
    python benchmarks/bench_attacker.py --device cuda ... --compile       # with torch.compile
    python benchmarks/bench_attacker.py --device cuda ... --compile reduce-overhead  # + CUDA graphs
    python benchmarks/bench_attacker.py --device cuda ... --extract-compile reduce-overhead  # extraction too
    python benchmarks/bench_attacker.py ... +attacker.training.optimizer.fused=true   # any attacker override
    python benchmarks/bench_attacker.py --attacker ecapa_ssl_tiny --random-wavlm   # VPC 2026's ecapa_ssl, tiny
    python benchmarks/bench_attacker.py --attacker ecapa_ssl --random-wavlm --device cuda --batch-size 32 \
        --precision bf16 --steps 20 --extract-precision bf16               # at VPC 2026 sizes (WavLM-Large)

`--random-wavlm` gives an attacker with a `wavlm` key a random-weight WavLM (transformers'
`WavLMModel`, WavLM-Large's structure, hidden size and depth the attacker's) written into the
work folder: speed does not depend on the weights. For such an attacker the FLOPs are also
split into the frozen WavLM's forward, the rest of the forward and the backward.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from hydra.utils import instantiate
from torch.utils.flop_counter import FlopCounterMode

from pipeline.asv.audio_cache import build_audio_cache, cache_key, write_audio_cache
from pipeline.asv.embed import embed_utterances
from pipeline.asv.model import AAMSoftmaxHead
from pipeline.asv.train import attacker_settings, train_attacker
from pipeline.core.config import compose
from pipeline.core.devices import resolve_device
from pipeline.data.audio import write_audio
from pipeline.data.manifest import Utterance

RATE = 16000


def attacker_config(name: str, overrides: list[str]):
    return compose([f"attacker={name}", *overrides]).attacker


def training_overrides(batch_size: int, compile_mode: str, precision: str | None, workers: int | None,
                       workdir: Path) -> list[str]:
    """The attacker overrides of the timed training: two epochs, no checkpoints, random initial
    weights (`finetune=false`: a fine-tuning step, as `ecapa_ssl`'s, costs the same as one from
    scratch, and the bench has no pretrained folder)."""
    overrides = [f"attacker.training.batch_size={batch_size}", "attacker.training.epochs=2",
                 "attacker.training.checkpoint_every=null", "attacker.training.examples_per_epoch=chunks",
                 f"attacker.training.compile={compile_mode}", "attacker.finetune=false",
                 f"attacker.training.cache_dir={workdir / 'cache'}"]
    if precision:
        overrides.append(f"attacker.training.precision={precision}")
    if workers is not None:
        overrides.append(f"attacker.training.num_workers={workers}")
    return overrides


def noise_cache(folder: Path, utterances: int, seconds: float, speakers: int) -> list[Utterance]:
    """A complete audio cache of `utterances` noise utterances (slices of one noise buffer)."""
    rng = np.random.default_rng(0)
    buffer = np.clip(rng.normal(0, 3000, 60 * RATE), -32768, 32767).astype(np.int16)
    length = int(seconds * RATE)
    utts = [Utterance(f"bench-{i:07d}", f"spk{i % speakers:04d}", "fm"[i % 2], f"/nowhere/bench-{i}.flac", seconds)
            for i in range(utterances)]
    starts = rng.integers(0, len(buffer) - length, size=utterances)
    write_audio_cache(folder, cache_key(utts, RATE), utts, (buffer[s:s + length] for s in starts), sample_rate=RATE)
    return utts


def training_throughput(cfg, utts: list[Utterance], device: torch.device, workdir: Path) -> dict:
    """Crops/s of the second of two epochs of train_attacker."""
    out = workdir / "train"
    shutil.rmtree(out, ignore_errors=True)
    train_attacker(attacker_settings(cfg), utts, out, seed=1986, device=device, validate=lambda encoder: 0.5)
    last = json.loads((out / "training_log.jsonl").read_text().splitlines()[-1])
    return {"steps": last["steps"], "crops": last["crops"], "seconds": last["seconds"],
            "crops_per_s": last["crops"] / last["seconds"]}


def flops_per_crop(cfg, speakers: int) -> dict:
    """Forward + backward FLOPs of encoder and AAM head for one training crop (counted on 2
    crops on CPU; an encoder with a training context, `ecapa_ssl`, gets its WavLM context too):
    {"total", "forward", and for an encoder with a frozen WavLM "wavlm" (its forward)}."""
    model = instantiate(cfg.model)
    head = AAMSoftmaxHead(model.embedding_dim, speakers)
    wavs = torch.randn(2, round(cfg.training.crop_seconds * RATE)) * 0.1
    context = torch.randn(2, model.context_samples) if getattr(model, "context_samples", 0) else None
    with FlopCounterMode(display=False) as forward:
        loss, _ = head(model(wavs) if context is None else model(wavs, context=context), torch.tensor([0, 1]))
    with FlopCounterMode(display=False) as backward:
        loss.backward()
    flops = {"forward": forward.get_total_flops() / 2}
    flops["total"] = flops["forward"] + backward.get_total_flops() / 2
    if context is not None:
        with FlopCounterMode(display=False) as wavlm:
            model.wavlm_layers(context, torch.full((2,), context.shape[1]))
        flops["wavlm"] = wavlm.get_total_flops() / 2
    return flops


def random_wavlm(folder: Path, hidden: int, layers: int) -> Path:
    """A random-weight WavLM with WavLM-Large's structure, `hidden` wide and `layers` deep, as a
    Hugging Face folder."""
    from transformers import WavLMConfig, WavLMModel

    torch.manual_seed(0)
    WavLMModel(WavLMConfig(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=max(1, hidden // 64),
                           intermediate_size=4 * hidden, conv_dim=(min(512, hidden),) * 7, feat_extract_norm="layer",
                           do_stable_layer_norm=True, conv_bias=False)).save_pretrained(folder)
    return folder


def extraction_speed(cfg, device: torch.device, workdir: Path, count: int, seconds: tuple[float, float],
                     precision: str, batch_seconds: Sequence[float], workers: int, from_cache: bool,
                     compile_mode: str | None = None) -> list[dict]:
    """Utterances/s of embed_utterances on `count` WAV files at each of `batch_seconds`, each
    the second pass over all of them (the first, untimed, meets every batch shape once)."""
    rng = np.random.default_rng(1)
    folder = workdir / "wavs"
    folder.mkdir(exist_ok=True)
    buffer = (rng.normal(0, 0.1, 60 * RATE)).astype(np.float32)
    utts = []
    for i, duration in enumerate(rng.uniform(*seconds, size=count)):
        length = int(duration * RATE)
        start = int(rng.integers(0, len(buffer) - length))
        path = write_audio(folder / f"u{i:06d}.wav", buffer[start:start + length], RATE)
        utts.append(Utterance(f"u{i:06d}", f"s{i % 40}", "f", str(path), length / RATE))
    encoder = instantiate(cfg.model).to(device).eval()
    if from_cache:
        build_audio_cache(utts, workdir / "extraction_cache" / cache_key(utts, RATE)[:24], sample_rate=RATE,
                          workers=workers, progress=False)
    audio, results = sum(utt.duration for utt in utts), []
    for budget in batch_seconds:
        options = dict(device=device, precision=precision, batch_seconds=budget, workers=workers, progress=False,
                       audio_cache=workdir / "extraction_cache" if from_cache else None, compile=compile_mode)
        embed_utterances(encoder, utts, **options)
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        embed_utterances(encoder, utts, **options)
        elapsed = time.perf_counter() - start
        results.append({"batch_seconds": budget, "utterances": count, "audio_hours": audio / 3600, "seconds": elapsed,
                        "utterances_per_s": count / elapsed, "audio_seconds_per_s": audio / elapsed})
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attacker", default="ecapa", help="conf/attacker config (default: ecapa, the VPC size)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--batch-size", type=int, help="crops per step (default: the config's on CUDA, 8 on CPU)")
    parser.add_argument("--steps", type=int, help="steps per epoch (default: 100 on CUDA, 4 on CPU)")
    parser.add_argument("--precision", help="training autocast (default: the config's)")
    parser.add_argument("--compile", nargs="?", const="default", default="false", metavar="MODE",
                        help="torch.compile the training forward (MODE: default, reduce-overhead = CUDA graphs, ...)")
    parser.add_argument("--workers", type=int, help="crop loader processes (default: the config's)")
    parser.add_argument("--speakers", type=int, default=921, help="training speakers (train-clean-360: 921)")
    parser.add_argument("--utterance-seconds", type=float, default=12.0, help="length of the training utterances")
    parser.add_argument("--peak-tflops", type=float, help="the device's peak TFLOP/s at this precision (H200 bf16: 989)")
    parser.add_argument("--extract-utterances", type=int, help="utterances to embed (default: 3000 CUDA, 48 CPU)")
    parser.add_argument("--extract-seconds", type=float, nargs=2, default=(2.0, 14.0), help="length range, uniform")
    parser.add_argument("--extract-precision", default="fp32")
    parser.add_argument("--extract-compile", nargs="?", const="default", metavar="MODE",
                        help="torch.compile extraction (attacker.extraction.compile; MODE: default, reduce-overhead)")
    parser.add_argument("--extract-from", choices=["cache", "files"], default="cache",
                        help="extraction reads the decoded int16 cache (default) or decodes the files")
    parser.add_argument("--batch-seconds", type=float, nargs="+",
                        help="extraction batch budgets, each timed (default: the config's)")
    parser.add_argument("--workdir", help="folder for the cache and audio (default: a temporary folder)")
    parser.add_argument("--random-wavlm", action="store_true",
                        help="give the attacker's `wavlm` key a random-weight WavLM of its sizes (ecapa_ssl)")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                        help="more attacker overrides, after the bench's own (e.g. +attacker.training.optimizer.fused=true)")
    args = parser.parse_args()

    device = resolve_device(args.device)
    on_gpu = device.type == "cuda"
    base = attacker_config(args.attacker, [])
    batch_size = args.batch_size or (int(base.training.batch_size) if on_gpu else 8)
    steps = args.steps or (100 if on_gpu else 4)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench_attacker_"))
    overrides = training_overrides(batch_size, args.compile, args.precision, args.workers, workdir) + args.overrides
    if args.random_wavlm:
        wavlm = random_wavlm(workdir / "wavlm", int(base.model.channels[0]), int(base.model.wavlm_layers))
        overrides.append(f"attacker.model.wavlm={wavlm}")
    cfg = attacker_config(args.attacker, overrides)
    crop = float(cfg.training.crop_seconds)
    per_utterance = max(1, int(args.utterance_seconds // crop))
    utterances = math.ceil(steps * batch_size / per_utterance)

    print(f"# {datetime.datetime.now().isoformat(timespec='seconds')}  {' '.join(sys.argv)}")
    print(f"# torch {torch.__version__}, {torch.cuda.get_device_name(device) if on_gpu else platform.processor() or 'cpu'}"
          f", {torch.get_num_threads()} threads, {os.cpu_count()} CPUs")
    print(f"attacker {args.attacker}: {batch_size} x {crop:g}-s crops per step, precision "
          f"{cfg.training.precision if on_gpu else 'fp32 (CPU)'}, compile {args.compile}, "
          f"{cfg.training.num_workers} loader workers, {args.speakers} speakers")
    start = time.perf_counter()
    utts = noise_cache(workdir / "cache", utterances, args.utterance_seconds, args.speakers)
    print(f"noise cache: {utterances} utterances of {args.utterance_seconds:g} s in {time.perf_counter() - start:.1f} s")
    training = training_throughput(cfg, utts, device, workdir)
    flops = flops_per_crop(cfg, args.speakers)
    achieved = flops["total"] * training["crops_per_s"] / 1e12
    line = (f"training: {training['crops_per_s']:.1f} crops/s ({training['crops']} crops in {training['seconds']:.2f} s, "
            f"second epoch); {flops['total'] / 1e9:.2f} GFLOP per crop (fwd+bwd) -> {achieved:.3f} TFLOP/s")
    if args.peak_tflops:
        line += f" = {100 * achieved / args.peak_tflops:.1f} % of {args.peak_tflops:g}"
    print(line)
    if "wavlm" in flops:
        print(f"  per crop: WavLM forward {flops['wavlm'] / 1e9:.2f} GFLOP, the rest of the forward "
              f"{(flops['forward'] - flops['wavlm']) / 1e9:.2f} GFLOP, backward {(flops['total'] - flops['forward']) / 1e9:.2f} GFLOP")
    train_clean_360 = 363.6 * 3600 / crop  # crops per epoch of train-clean-360, one crop per `crop` s of audio
    print(f"  10 epochs of train-clean-360 ({train_clean_360:,.0f} crops each) would take "
          f"{10 * train_clean_360 / training['crops_per_s'] / 60:,.1f} min")
    count = (3000 if on_gpu else 48) if args.extract_utterances is None else args.extract_utterances
    if count:
        budgets = args.batch_seconds or [float(cfg.extraction.batch_seconds)]
        for extraction in extraction_speed(cfg, device, workdir, count, tuple(args.extract_seconds),
                                           args.extract_precision, budgets, int(cfg.extraction.workers),
                                           args.extract_from == "cache", args.extract_compile):
            print(f"extraction: {extraction['utterances_per_s']:.1f} utterances/s in batches of "
                  f"{extraction['batch_seconds']:g} s, {extraction['audio_seconds_per_s']:.0f} s of audio per s "
                  f"({count} utterances, {extraction['audio_hours']:.2f} h, precision {args.extract_precision}, "
                  f"compile {args.extract_compile or 'false'}, audio from {args.extract_from}, second pass)")
    if not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
