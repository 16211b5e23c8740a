"""McAdams throughput: vpeval's implementation against the per-frame numpy/scipy reference,
in the same run, on speech-like audio (`tests/oracles/signals.py`).

    python benchmarks/bench_mcadams.py                       # CPU: compiled, batched torch, reference
    python benchmarks/bench_mcadams.py --device cuda --seconds 36000 --batch-seconds 3600
    python benchmarks/bench_mcadams.py --lpc levinson burg   # both LPC estimators, in turns

Prints seconds of audio per second for each and the ratios to the reference; also hours of
audio anonymised per minute. On CPU, vpeval runs the compiled per-frame kernel
(`anonymizers.mcadams_kernel`); the batched torch steps (what runs on CUDA) are timed on CPU
too, for comparison. Audio is built from `--distinct` different utterances repeated under
different ids (so every copy gets its own α), to keep generation time small.

On a shared machine the load changes from second to second, so `--repeats` runs the
implementations and the reference in turn, each repeat giving its own ratios, and the
summary gives the range over repeats.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import platform
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: tests/oracles/
import anonymizers.mcadams as mcadams_module  # noqa: E402
from anonymizers.mcadams import DEFAULT_CHUNK_FRAMES, LPC_METHODS, McAdams  # noqa: E402
from tests.oracles.mcadams_reference import mcadams_reference  # noqa: E402
from tests.oracles.signals import speech_like  # noqa: E402

RATE = 16000


def corpus(total_seconds: float, utterance_seconds: float, distinct: int) -> list[np.ndarray]:
    """Utterances of `utterance_seconds` adding up to `total_seconds`."""
    count = max(1, round(total_seconds / utterance_seconds))
    pieces = [speech_like(utterance_seconds, seed) for seed in range(min(distinct, count))]
    return [pieces[i % len(pieces)] for i in range(count)]


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_batched(anonymizer: McAdams, waves: list[np.ndarray], batch_seconds: float) -> tuple[float, float]:
    """(wall, process CPU) seconds to anonymise `waves` in batches of about `batch_seconds`."""
    per_batch = max(1, int(batch_seconds * RATE // len(waves[0])))
    synchronize(anonymizer.device)
    start, start_cpu = time.perf_counter(), time.process_time()
    for first in range(0, len(waves), per_batch):
        part = waves[first:first + per_batch]
        ids = [f"utt{first + i}" for i in range(len(part))]
        anonymizer(part, ids, ids, RATE)
    synchronize(anonymizer.device)
    return time.perf_counter() - start, time.process_time() - start_cpu


@contextlib.contextmanager
def batched_torch_steps_on_cpu() -> Iterator[None]:
    """Run the batched torch steps on CPU too (vpeval uses the compiled kernel there)."""
    compiled = mcadams_module.overlap_added_frames
    mcadams_module.overlap_added_frames = mcadams_module.batched_overlap_added_frames
    try:
        yield
    finally:
        mcadams_module.overlap_added_frames = compiled


def time_reference(waves: list[np.ndarray], lpc: str) -> tuple[float, float]:
    """(wall, process CPU) seconds for the per-frame reference on `waves` (with `lpc="burg"`,
    its LPC is `librosa.lpc`)."""
    start, start_cpu = time.perf_counter(), time.process_time()
    for wave in waves:
        mcadams_reference(wave, 0.7, lpc_method=lpc)
    return time.perf_counter() - start, time.process_time() - start_cpu


def span(values: list[float], digits: int = 1) -> str:
    """'low-high (median m)' over repeats."""
    ordered = sorted(values)
    low, high, median = ordered[0], ordered[-1], float(np.median(ordered))
    if len(ordered) == 1:
        return f"{low:.{digits}f}"
    return f"{low:.{digits}f}-{high:.{digits}f} (median {median:.{digits}f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", help="cpu or cuda[:n] for the batched implementation")
    parser.add_argument("--seconds", type=float, default=120.0, help="audio for the batched implementation")
    parser.add_argument("--reference-seconds", type=float, default=16.0, help="audio for the per-frame reference")
    parser.add_argument("--utterance-seconds", type=float, default=8.0)
    parser.add_argument("--distinct", type=int, default=8, help="distinct utterances generated")
    parser.add_argument("--batch-seconds", type=float, default=300.0, help="audio per anonymize call")
    parser.add_argument("--chunk-frames", type=int, default=None, help="frames processed together (default by device)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--lpc", nargs="+", default=["levinson"], choices=LPC_METHODS,
                        help="LPC estimators, timed in turns in each repeat")
    parser.add_argument("--repeats", type=int, default=3, help="alternating batched/reference runs")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    anonymizers = {lpc: McAdams(alpha=[0.5, 0.9], device=args.device, chunk_frames=args.chunk_frames, lpc=lpc)
                   for lpc in args.lpc}
    waves = corpus(args.seconds, args.utterance_seconds, args.distinct)
    audio_seconds = sum(len(w) for w in waves) / RATE
    reference_waves = corpus(args.reference_seconds, args.utterance_seconds, args.distinct)
    reference_audio = sum(len(w) for w in reference_waves) / RATE
    device = anonymizers[args.lpc[0]].device
    steps_by_label = {"vpeval": contextlib.nullcontext}
    if device.type == "cpu":
        steps_by_label = {"compiled kernel (vpeval on CPU)": contextlib.nullcontext,
                          "batched torch steps": batched_torch_steps_on_cpu}
    implementations = {(lpc, label): steps for lpc in args.lpc for label, steps in steps_by_label.items()}
    for (lpc, _), steps in implementations.items():  # warm-up: compilation, allocations, CUDA context
        with steps():
            time_batched(anonymizers[lpc], waves[:1], args.batch_seconds)

    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or platform.machine()
    chunk = args.chunk_frames or DEFAULT_CHUNK_FRAMES[device.type]
    print(f"date: {datetime.date.today()}  torch {torch.__version__}  device: {device} ({name})  "
          f"cpu threads: {torch.get_num_threads()}  chunk_frames: {chunk}  cores: {os.cpu_count()}")
    print(f"{audio_seconds:.1f} s of audio per repeat and implementation; reference: {reference_audio:.1f} s")
    rates = {key: [] for key in implementations}
    ratios = {key: [] for key in implementations}
    cpu_ratios = {key: [] for key in implementations}
    cpu_rates = {key: [] for key in implementations}
    reference_rates = {lpc: [] for lpc in args.lpc}
    loads = []
    for repeat in range(args.repeats):
        line = f"repeat {repeat + 1}:"
        for lpc in args.lpc:
            reference, reference_cpu = time_reference(reference_waves, lpc)
            reference_rates[lpc].append(reference_audio / reference)
            line += f" {lpc}: reference {reference_rates[lpc][-1]:5.1f} s/s"
            for label, steps in steps_by_label.items():
                key = (lpc, label)
                with steps():
                    wall, cpu = time_batched(anonymizers[lpc], waves, args.batch_seconds)
                rates[key].append(audio_seconds / wall)
                ratios[key].append(rates[key][-1] / reference_rates[lpc][-1])
                cpu_ratios[key].append((reference_cpu / reference_audio) / (cpu / audio_seconds))
                cpu_rates[key].append(audio_seconds / cpu)
                line += f" | {label.split(' (')[0]} {rates[key][-1]:7.1f} s/s, {ratios[key][-1]:.1f}x"
            line += ";"
        loads.append(os.getloadavg()[0])
        print(f"{line} load {loads[-1]:.1f}", flush=True)
    for lpc in args.lpc:
        prefix = f"lpc {lpc}: " if len(args.lpc) > 1 else ""  # one estimator: the summary lines as before
        print(f"{prefix}reference (numpy/scipy, one frame at a time): {span(reference_rates[lpc])} s of audio per s")
        for label in steps_by_label:
            key = (lpc, label)
            print(f"{prefix}{label}: {span(rates[key])} s/s = {span([r / 60 for r in rates[key]], 2)} h of audio "
                  f"per minute; {span(ratios[key])}x the reference in wall time, {span(cpu_ratios[key])}x in CPU "
                  f"time; {span(cpu_rates[key])} s of audio per CPU second")
    print(f"load average: {span(loads)} (1-minute, after each repeat)")

if __name__ == "__main__":
    main()
