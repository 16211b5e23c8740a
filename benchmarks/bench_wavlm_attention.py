"""WavLM's attention through SDPA against transformers' own path, on this machine (issue 36).

A random-weight WavLM of WavLM-Large's width (1024, 16 heads) and `--layers` layers; a batch
of `--batch` utterances of `--seconds` s, one of them padded (the attention mask); the mean
wall time of `--repeats` forwards under inference mode for each path, and the largest
difference between their layer outputs:

    python benchmarks/bench_wavlm_attention.py --layers 2 --batch 4 --seconds 10 --repeats 3
"""
from __future__ import annotations

import argparse
import runpy
import tempfile
import time
import warnings
from pathlib import Path

import torch

from pipeline.asv.wavlm import layer_outputs, load_wavlm

RATE = 16000


def timed(model, wavs: torch.Tensor, mask: torch.Tensor, repeats: int) -> tuple[float, torch.Tensor]:
    with torch.inference_mode(), warnings.catch_warnings():  # transformers' path mixes a bool mask with a float bias
        warnings.filterwarnings("ignore", message="Support for mismatched key_padding_mask")
        out = layer_outputs(model, wavs, mask)  # warm-up
        started = time.perf_counter()
        for _ in range(repeats):
            out = layer_outputs(model, wavs, mask)
    return (time.perf_counter() - started) / repeats, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    random_wavlm = runpy.run_path(str(Path(__file__).with_name("bench_attacker.py")))["random_wavlm"]
    folder = random_wavlm(Path(tempfile.mkdtemp()) / "wavlm", 1024, args.layers)
    samples = int(args.seconds * RATE)
    wavs = torch.randn(args.batch, samples, generator=torch.Generator().manual_seed(0)).to(args.device)
    mask = torch.ones_like(wavs, dtype=torch.long)
    mask[-1, samples // 2:] = 0
    wavs = wavs * mask
    results = {}
    for name, sdpa in (("transformers", False), ("sdpa", True)):
        model = load_wavlm(folder, sdpa=sdpa).to(args.device)
        results[name] = timed(model, wavs, mask, args.repeats)
        print(f"{name:12s} {results[name][0] * 1000:9.1f} ms per batch "
              f"({args.batch} x {args.seconds:g} s, {args.layers} layers, {args.device})")
    frames = int(load_wavlm(folder)._get_feat_extract_output_lengths(samples // 2))
    full, half = results["sdpa"][1], results["transformers"][1]
    difference = max((full[:, :-1] - half[:, :-1]).abs().max().item(),
                     (full[:, -1, :frames] - half[:, -1, :frames]).abs().max().item())
    print(f"speed-up {results['transformers'][0] / results['sdpa'][0]:.2f}x; largest difference of the layer "
          f"outputs {difference:.2e} (largest output {half.abs().max().item():.1f})")


if __name__ == "__main__":
    main()
