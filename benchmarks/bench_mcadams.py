"""McAdams throughput: the batched torch implementation against the per-frame numpy/scipy
reference, in the same run, on speech-like audio (`anonymizers.signals`).

    python benchmarks/bench_mcadams.py                       # CPU: batched vs reference
    python benchmarks/bench_mcadams.py --device cuda --seconds 36000 --batch-seconds 3600

Prints seconds of audio per second for both and their ratio; with a GPU, also hours of audio
anonymised per minute. Audio is built from `--distinct` different utterances repeated under
different ids (so every copy gets its own α), to keep generation time small.

On a shared machine the load changes from second to second, so `--repeats` runs the batched
implementation and the reference alternately, each repeat giving its own ratio, and the
summary gives the range over repeats. The batched time spent in the CPU root finder (LAPACK
eigenvalues of the companion matrices) is measured on the way and reported as a share.
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import time
from collections.abc import Callable

import numpy as np
import torch

import anonymizers.mcadams as mcadams_module
from anonymizers.mcadams import DEFAULT_CHUNK_FRAMES, McAdams
from anonymizers.mcadams_reference import mcadams_reference
from anonymizers.signals import speech_like

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


class Stopwatch:
    """Wraps a function and adds up the wall time spent in it."""

    def __init__(self, function: Callable):
        self.function, self.seconds = function, 0.0

    def __call__(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return self.function(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start


def time_reference(waves: list[np.ndarray]) -> tuple[float, float]:
    """(wall, process CPU) seconds for the per-frame reference on `waves`."""
    start, start_cpu = time.perf_counter(), time.process_time()
    for wave in waves:
        mcadams_reference(wave, 0.7)
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
    parser.add_argument("--repeats", type=int, default=3, help="alternating batched/reference runs")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    anonymizer = McAdams(alpha=[0.5, 0.9], device=args.device, chunk_frames=args.chunk_frames)
    waves = corpus(args.seconds, args.utterance_seconds, args.distinct)
    audio_seconds = sum(len(w) for w in waves) / RATE
    reference_waves = corpus(args.reference_seconds, args.utterance_seconds, args.distinct)
    reference_audio = sum(len(w) for w in reference_waves) / RATE
    time_batched(anonymizer, waves[:1], args.batch_seconds)  # warm-up: allocations, CUDA context
    eigenvalues = Stopwatch(mcadams_module.companion_eigenvalues)
    mcadams_module.companion_eigenvalues = eigenvalues

    device = anonymizer.device
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or platform.machine()
    chunk = args.chunk_frames or DEFAULT_CHUNK_FRAMES[device.type]
    print(f"date: {datetime.date.today()}  torch {torch.__version__}  device: {device} ({name})  "
          f"cpu threads: {torch.get_num_threads()}  chunk_frames: {chunk}  cores: {os.cpu_count()}")
    print(f"batched: {audio_seconds:.1f} s of audio per repeat; reference: {reference_audio:.1f} s per repeat")
    rates, reference_rates, ratios, cpu_ratios, loads, root_shares = [], [], [], [], [], []
    for repeat in range(args.repeats):
        eigenvalues.seconds = 0.0
        batched, batched_cpu = time_batched(anonymizer, waves, args.batch_seconds)
        root_shares.append(eigenvalues.seconds / batched)
        reference, reference_cpu = time_reference(reference_waves)
        rates.append(audio_seconds / batched)
        reference_rates.append(reference_audio / reference)
        ratios.append(rates[-1] / reference_rates[-1])
        cpu_ratios.append((reference_cpu / reference_audio) / (batched_cpu / audio_seconds))
        loads.append(os.getloadavg()[0])
        print(f"repeat {repeat + 1}: batched {rates[-1]:8.1f} s/s ({batched:.2f} s wall, {batched_cpu:.2f} s CPU, "
              f"{100 * root_shares[-1]:.0f} % in LAPACK roots)  reference {reference_rates[-1]:6.1f} s/s "
              f"({reference:.2f} s wall, {reference_cpu:.2f} s CPU)  speed-up {ratios[-1]:.1f}x wall, "
              f"{cpu_ratios[-1]:.1f}x CPU  load {loads[-1]:.1f}", flush=True)
    print(f"batched torch : {span(rates)} s of audio per s = {span([r / 60 for r in rates], 2)} h of audio per minute")
    print(f"reference     : {span(reference_rates)} s/s (numpy/scipy, one frame at a time)")
    print(f"speed-up      : {span(ratios)}x wall, {span(cpu_ratios)}x in CPU time")
    if device.type == "cpu":
        print(f"LAPACK roots  : {span([100 * r for r in root_shares], 0)} % of the batched wall time (summed over threads)")
    print(f"load average  : {span(loads)} (1-minute, after each repeat)")


if __name__ == "__main__":
    main()
