"""The anonymize stage's work around the anonymiser: per utterance, reading its FLAC file, two
speech screens (output and input, `pipeline.signal.speech.screen`) and one FLAC write, done one
after the other (as before 2026-11-29) and on a thread pool of 1..N threads (`ordered_map`, as
the stage and `Anonymizer.run_batch` now do), in the same run, on speech-like audio.

On the H200 of 2026-11-29 the stage anonymised 1-s utterances at 7.5 ms each with as much CPU
time as wall time (one core busy, the GPU idle): this work, not McAdams, bounded it.

    python benchmarks/bench_anonymize_io.py --utterances 300 --seconds 1
    python benchmarks/bench_anonymize_io.py --utterances 40 --seconds 12.6
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pipeline.data.audio import read_audio, write_audio  # noqa: E402
from pipeline.runtime.ordered import ordered_map  # noqa: E402
from pipeline.signal.speech import screen  # noqa: E402
from tests.oracles.signals import speech_like  # noqa: E402

RATE = 16000


def finish(pair: tuple[Path, Path]) -> bool:
    """What the stage does around the anonymiser for one utterance: read it, two screens (output
    and input, here the same wave), one FLAC write."""
    source, target = pair
    wave = read_audio(source, RATE)
    verdict = screen(wave, RATE).speech and screen(wave, RATE).speech
    write_audio(target, wave, RATE)
    return verdict


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--utterances", type=int, default=400)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--threads", type=int, nargs="+", default=sorted({1, 2, len(os.sched_getaffinity(0))}))
    args = parser.parse_args()
    waves = [speech_like(args.seconds, seed=i % 20) for i in range(args.utterances)]
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}, {len(os.sched_getaffinity(0))} CPUs, load average "
          f"{os.getloadavg()[0]:.1f}: {args.utterances} utterances of {args.seconds:g} s")
    with tempfile.TemporaryDirectory() as folder:
        sources = [write_audio(Path(folder) / f"in-{i}.flac", wave, RATE) for i, wave in enumerate(waves)]

        def pairs(run: str) -> list[tuple[Path, Path]]:  # each run writes new files, as the stage does
            (Path(folder) / run).mkdir()
            return [(source, Path(folder) / run / source.name) for source in sources]

        [finish(pair) for pair in pairs("warm-up")[:3]]
        start = time.perf_counter()
        serial = [finish(pair) for pair in pairs("serial")]
        base = time.perf_counter() - start
        print(f"one after the other: {1e3 * base / len(waves):.2f} ms per utterance")
        for threads in args.threads:
            todo = pairs(f"pool-{threads}")
            start = time.perf_counter()
            pooled = list(ordered_map(finish, todo, workers=threads))
            took = time.perf_counter() - start
            assert pooled == serial
            print(f"thread pool of {threads:2d}: {1e3 * took / len(waves):.2f} ms per utterance, "
                  f"{base / took:.2f}x")

if __name__ == "__main__":
    main()
