"""The speech screen of the output check (`pipeline.signal.speech`): how often it refuses real
anonymised speech, and how often it catches output that is not speech.

    python benchmarks/speech_screen.py --corpus synthetic=data/corpora/synthetic/<hash> \\
        --corpus voices=/tmp/voices/LibriSpeech --per-speaker 8

For each corpus (a LibriSpeech-layout folder: every `*.flac` under it; `--per-speaker` keeps
the first N of each speaker, sorted by id) it screens

- the original speech and its output by each shipped anonymiser that runs on CPU without
  trained weights (`--systems`, conf/anonymizer and recipes/vpc2024/anonymizer: McAdams in its
  variants; the x-vector and OHNN systems need a trained voice converter and are not run);
  an output that fails where its input passes (what the output check counts) is a **false
  refusal**: per utterance, and per system as the share of `--list-size`-utterance lists
  (consecutive, by id) that `output_check.max_non_speech` would refuse (the `original` row: how
  many inputs fail, which the check leaves out);
- non-speech of the same lengths, one per utterance: white noise at -70 dBFS and at -20 dBFS,
  silence with ±1 LSB dither, 8 clicks on silence, a steady tone (100-1000 Hz, seeded), brown
  noise, and the time-reversed original (which the screen counts as speech, see its module
  docstring); passes there are **misses**.

Each rate is printed with its count and a 95 % Wilson interval.
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from anonymizers.base import MAX_NON_SPEECH  # noqa: E402
from pipeline.core.config import compose, instantiate, without  # noqa: E402
from pipeline.data.audio import read_audio  # noqa: E402
from pipeline.signal.speech import screen  # noqa: E402

RATE = 16000
SYSTEMS = ("mcadams", "mcadams_fixed", "mcadams_speaker", "mcadams_b2")


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95 % Wilson score interval of a binomial proportion k / n."""
    if n == 0:
        return float("nan"), float("nan")
    p, denominator = k / n, 1 + z * z / n
    centre, half = (p + z * z / (2 * n)) / denominator, z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def rate(k: int, n: int) -> str:
    low, high = wilson(k, n)
    return f"{k:5d}/{n:<5d} = {100 * k / n:6.2f} %  [{100 * low:5.2f}, {100 * high:5.2f}]"


def utterances(root: Path, per_speaker: int) -> list[tuple[str, str, np.ndarray]]:
    """(id, speaker, wave) of the first `per_speaker` utterances of each speaker under `root`."""
    found = defaultdict(list)
    for path in sorted(root.rglob("*.flac")):
        found[path.stem.split("-")[0]].append(path)
    return [(path.stem, speaker, read_audio(path, RATE)) for speaker in sorted(found)
            for path in found[speaker][:per_speaker]]


def non_speech(wave: np.ndarray, seed: int) -> dict[str, np.ndarray]:
    """Non-speech of `wave`'s length (and `wave` reversed)."""
    rng, n = np.random.default_rng(seed), len(wave)
    clicks = np.zeros(n)
    clicks[rng.integers(0, n, 8)] = rng.choice([-0.8, 0.8], 8)
    t = np.arange(n) / RATE
    return {
        "white noise -70 dBFS": rng.normal(0, 10 ** (-70 / 20), n),
        "white noise -20 dBFS": rng.normal(0, 10 ** (-20 / 20), n),
        "silence + dither": rng.integers(-1, 2, n) / 32768,
        "clicks": clicks,
        "steady tone": 0.3 * np.sin(2 * np.pi * rng.uniform(100, 1000) * t),
        "brown noise": np.cumsum(rng.normal(0, 1e-3, n)),
        "time-reversed speech": wave[::-1].copy(),
    }


def anonymised(name: str, data: list[tuple[str, str, np.ndarray]]) -> list[np.ndarray]:
    recipe = ["hydra.searchpath=[file://recipes/vpc2024]"] if name == "mcadams_b2" else []
    system = compose([f"anonymizer={name}", "device=cpu", *recipe]).anonymizer
    anonymizer = instantiate(without(system, "name"), seed=1986, device="cpu")
    out = []
    for first in range(0, len(data), 32):
        part = data[first:first + 32]
        out += [w.numpy() for w in anonymizer([w for _, _, w in part], [u for u, _, _ in part],
                                              [s for _, s, _ in part], RATE, "bench")]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", action="append", required=True, help="name=folder (LibriSpeech layout)")
    parser.add_argument("--per-speaker", type=int, default=8)
    parser.add_argument("--systems", nargs="*", default=list(SYSTEMS))
    parser.add_argument("--list-size", type=int, default=20)
    args = parser.parse_args()
    print(f"speech screen, {time.strftime('%Y-%m-%d')}; max_non_speech = {MAX_NON_SPEECH:g}; "
          f"per system: lists of {args.list_size} utterances; 95 % Wilson intervals")
    for spec in args.corpus:
        name, folder = spec.split("=", 1)
        data = utterances(Path(folder), args.per_speaker)
        seconds = sum(len(w) for _, _, w in data) / RATE
        print(f"\n## {name}: {len(data)} utterances, {len(set(s for _, s, _ in data))} speakers, {seconds / 60:.1f} min")
        print("false refusals (speech that fails)     per utterance                            per list")
        spoken = np.array([screen(w, RATE).speech for _, _, w in data])
        print(f"  {'original (inputs)':22s} {rate(int((~spoken).sum()), len(spoken))}")
        for system in args.systems:
            start = time.perf_counter()
            fails = np.array([not screen(w, RATE).speech for w in anonymised(system, data)]) & spoken
            lists = [slice(i, i + args.list_size) for i in range(0, len(fails) - args.list_size + 1, args.list_size)]
            refused = sum(fails[part].sum() > MAX_NON_SPEECH * spoken[part].sum() for part in lists)
            ids = [data[i][0] for i in np.flatnonzero(fails)[:3]]
            print(f"  {system:22s} {rate(int(fails.sum()), int(spoken.sum()))}   {rate(refused, len(lists))}"
                  f"   {time.perf_counter() - start:5.1f} s {' '.join(ids)}")
        print("detection (non-speech that fails, in place of an input that passes)")
        cases = defaultdict(list)
        for seed, (_, _, wave) in enumerate(data):
            if not spoken[seed]:
                continue
            for case, signal in non_speech(wave, seed).items():
                cases[case].append(not screen(signal, RATE).speech)
        for case, fails in cases.items():
            print(f"  {case:22s} {rate(int(sum(fails)), len(fails))}")


if __name__ == "__main__":
    main()
