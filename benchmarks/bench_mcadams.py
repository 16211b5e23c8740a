"""McAdams throughput: the batched torch implementation against the per-frame numpy/scipy
reference, in the same run, on speech-like audio (`anonymizers.signals`).

    python benchmarks/bench_mcadams.py                       # CPU: batched vs reference
    python benchmarks/bench_mcadams.py --device cuda --seconds 36000 --batch-seconds 3600

Prints seconds of audio per second for both and their ratio; with a GPU, also hours of audio
anonymised per minute. Audio is built from `--distinct` different utterances repeated under
different ids (so every copy gets its own α), to keep generation time small.
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import time

import numpy as np
import torch

from anonymizers.mcadams import DEFAULT_CHUNK_FRAMES, McAdams
from anonymizers.mcadams_reference import mcadams_reference
from anonymizers.signals import speech_like

RATE = 16000


def corpus(total_seconds: float, utterance_seconds: float, distinct: int) -> list[np.ndarray]:
    """Utterances of `utterance_seconds` adding up to `total_seconds`."""
    count = max(1, int(round(total_seconds / utterance_seconds)))
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
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    anonymizer = McAdams(alpha=[0.5, 0.9], device=args.device, chunk_frames=args.chunk_frames)
    waves = corpus(args.seconds, args.utterance_seconds, args.distinct)
    audio_seconds = sum(len(w) for w in waves) / RATE
    time_batched(anonymizer, waves[:1], args.batch_seconds)  # warm-up: allocations, CUDA context
    batched, batched_cpu = time_batched(anonymizer, waves, args.batch_seconds)

    reference_waves = corpus(args.reference_seconds, args.utterance_seconds, args.distinct)
    reference_audio = sum(len(w) for w in reference_waves) / RATE
    start, start_cpu = time.perf_counter(), time.process_time()
    for wave in reference_waves:
        mcadams_reference(wave, 0.7)
    reference, reference_cpu = time.perf_counter() - start, time.process_time() - start_cpu

    batched_rate, reference_rate = audio_seconds / batched, reference_audio / reference
    device = anonymizer.device
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or platform.machine()
    chunk = args.chunk_frames or DEFAULT_CHUNK_FRAMES[device.type]
    print(f"date: {datetime.date.today()}  torch {torch.__version__}  device: {device} ({name})  "
          f"cpu threads: {torch.get_num_threads()}  chunk_frames: {chunk}  load average: {os.getloadavg()[0]:.1f}")
    print(f"batched torch : {audio_seconds:9.1f} s of audio in {batched:8.2f} s wall ({batched_cpu:8.2f} s CPU)"
          f" = {batched_rate:9.1f} s/s = {batched_rate / 60:8.2f} h of audio per minute")
    print(f"reference     : {reference_audio:9.1f} s of audio in {reference:8.2f} s wall ({reference_cpu:8.2f} s CPU)"
          f" = {reference_rate:9.1f} s/s (numpy/scipy, one frame at a time)")
    print(f"speed-up      : {batched_rate / reference_rate:.1f}x wall, "
          f"{(reference_cpu / reference_audio) / (batched_cpu / audio_seconds):.1f}x in CPU time")

if __name__ == "__main__":
    main()
