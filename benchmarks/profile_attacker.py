"""Where an attacker's time goes: `torch.profiler` traces of three steps (issue 36).

1. `ecapa_train`: one `ecapa` training step (forward, AAM loss, backward, optimiser), compiled
   with `--compile` (on CUDA, `scripts/gpu_check.py`'s profile step compiles it);
2. `extraction`: one extraction batch of whole utterances (`embed_samples`, inference mode);
3. `ecapa_ssl_train`: one `ecapa_ssl` training step with a random-weight WavLM (the crop to the
   fbank branch, a 10-s context to WavLM, as in training).

Each is warmed up, then `--steps` steps are profiled; under `--out` each gets a Chrome trace
(`<name>.json`, for chrome://tracing or Perfetto) and its top-20 operators by self time
(`<name>_top20.txt`), printed too:

    python benchmarks/profile_attacker.py --device cuda --out /tmp/gc/profile --precision bf16 --compile \\
        --batch-size 256 --ssl-batch-size 32 --steps 3
    python benchmarks/profile_attacker.py --device cpu --ecapa ecapa_tiny --ssl ecapa_ssl_tiny --batch-size 4 \\
        --extract-seconds 2 --steps 2 --out /tmp/profile
"""
from __future__ import annotations

import argparse
import runpy
import tempfile
from pathlib import Path
from typing import Callable

import torch
from hydra.utils import instantiate
from torch.profiler import ProfilerActivity, profile

from pipeline.asv.model import AAMSoftmaxHead
from pipeline.core.config import compose
from pipeline.core.devices import resolve_device

RATE = 16000
SPEAKERS = 921  # the AAM head of train-clean-360


def attacker(name: str, overrides: list[str]):
    return compose([f"attacker={name}", *overrides]).attacker


def training_step(cfg, device: torch.device, batch_size: int, dtype: torch.dtype | None,
                  compiled: bool) -> Callable[[], None]:
    """One training step of `cfg`'s encoder from random weights on random crops (and contexts)."""
    model = instantiate(cfg.model).to(device).train()
    head = AAMSoftmaxHead(model.embedding_dim, SPEAKERS).to(device)
    optimizer = torch.optim.AdamW([p for p in (*model.parameters(), *head.parameters()) if p.requires_grad])
    crops = torch.randn(batch_size, round(cfg.training.crop_seconds * RATE), device=device) * 0.1
    samples = getattr(model, "context_samples", 0)
    context = torch.randn(batch_size, samples, device=device) if samples else None
    labels = torch.randint(0, SPEAKERS, (batch_size,), device=device)
    forward = torch.compile(model) if compiled else model

    def step() -> None:
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            embeddings = forward(crops) if context is None else forward(crops, context=context)
        loss, _ = head(embeddings, labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return step


def extraction_step(cfg, device: torch.device, batch_size: int, seconds: float,
                    dtype: torch.dtype | None) -> Callable[[], None]:
    """One extraction batch of `batch_size` utterances of about `seconds` s (ragged lengths)."""
    model = instantiate(cfg.model).to(device).eval()
    samples = round(seconds * RATE)
    wavs = torch.randn(batch_size, samples, device=device) * 0.1
    lengths = torch.linspace(samples // 2, samples, batch_size, device=device).long()

    def step() -> None:
        with torch.inference_mode(), torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            model.embed_samples(wavs, lengths)
    return step


def profiled(name: str, step: Callable[[], None], device: torch.device, steps: int, out: Path) -> str:
    """Warm up, profile `steps` steps, write `<name>.json` and `<name>_top20.txt`; the table."""
    for _ in range(2):
        step()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    synchronise = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    synchronise()
    with profile(activities=activities, record_shapes=True) as prof:
        for _ in range(steps):
            step()
        synchronise()
    prof.export_chrome_trace(str(out / f"{name}.json"))
    sort_by = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    table = prof.key_averages().table(sort_by=sort_by, row_limit=20)
    (out / f"{name}_top20.txt").write_text(table + "\n")
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--ecapa", default="ecapa", help="the ecapa attacker config (default: VPC 2024's size)")
    parser.add_argument("--ssl", default="ecapa_ssl", help="the ecapa_ssl attacker config")
    parser.add_argument("--wavlm-layers", type=int, help="random WavLM depth (default: the config's)")
    parser.add_argument("--batch-size", type=int, default=32, help="crops of the ecapa step, utterances of extraction")
    parser.add_argument("--ssl-batch-size", type=int, help="crops of the ecapa_ssl step (default: --batch-size)")
    parser.add_argument("--extract-seconds", type=float, default=10.0)
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    parser.add_argument("--compile", action="store_true", help="torch.compile the ecapa training step")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("profile"))
    args = parser.parse_args()
    device = resolve_device(args.device)
    dtype = torch.bfloat16 if args.precision == "bf16" else None
    ssl_batch = args.ssl_batch_size or args.batch_size
    args.out.mkdir(parents=True, exist_ok=True)
    ecapa = attacker(args.ecapa, [])
    ssl_cfg = attacker(args.ssl, ["attacker.model.wavlm=/none"])
    hidden, layers = ssl_cfg.model.channels[0], args.wavlm_layers or ssl_cfg.model.wavlm_layers
    random_wavlm = runpy.run_path(str(Path(__file__).with_name("bench_attacker.py")))["random_wavlm"]
    with tempfile.TemporaryDirectory() as folder:
        wavlm = random_wavlm(Path(folder) / "wavlm", hidden, layers)
        ssl_cfg = attacker(args.ssl, [f"attacker.model.wavlm={wavlm}", f"attacker.model.wavlm_layers={layers}"])
        runs = {"ecapa_train": lambda: training_step(ecapa, device, args.batch_size, dtype, args.compile),
                "extraction": lambda: extraction_step(ecapa, device, args.batch_size, args.extract_seconds, dtype),
                "ecapa_ssl_train": lambda: training_step(ssl_cfg, device, ssl_batch, dtype, False)}
        for name, build in runs.items():
            batch = ssl_batch if name == "ecapa_ssl_train" else args.batch_size
            table = profiled(name, build(), device, args.steps, args.out)
            print(f"== {name} ({device}, {args.precision}, batch {batch}, {args.steps} steps)\n{table}", flush=True)


if __name__ == "__main__":
    main()
