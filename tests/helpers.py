"""In-code fixtures shared by tests: tiny corpora written with generated audio."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from pipeline.data.audio import write_audio
from pipeline.data.manifest import Utterance


def tone(seconds: float, f0: float, rate: int = 16000, seed: int = 0) -> np.ndarray:
    """A harmonic tone with a little noise: cheap, decodable, speaker-ish audio."""
    t = np.arange(int(seconds * rate)) / rate
    wav = sum(np.sin(2 * np.pi * f0 * k * t) / k for k in range(1, 6))
    wav += 0.01 * np.random.default_rng(seed).standard_normal(t.size)
    return (0.3 * wav / np.abs(wav).max()).astype(np.float32)


def librispeech_tree(root: Path, speakers: dict[str, dict[str, str]], utterances: int = 4,
                     seconds: float = 0.5) -> Path:
    """Write a LibriSpeech-layout tree. `speakers`: subset -> {speaker id: 'F' | 'M'}."""
    rows = [";ID  |SEX| SUBSET           |MINUTES| NAME"]
    for subset, genders in speakers.items():
        for n, (spk, sex) in enumerate(genders.items()):
            rows.append(f"{spk} | {sex} | {subset} | 1.00 | Reader {spk}")
            chapter = root / subset / spk / "100"
            chapter.mkdir(parents=True, exist_ok=True)
            lines = []
            for i in range(utterances):
                utt = f"{spk}-100-{i:04d}"
                write_audio(chapter / f"{utt}.flac", tone(seconds, 100 + 20 * n + 5 * i, seed=i), 16000)
                lines.append(f"{utt} WORDS OF {spk} NUMBER {i}")
            (chapter / f"{spk}-100.trans.txt").write_text("\n".join(lines) + "\n")
    (root / "SPEAKERS.TXT").write_text("\n".join(rows) + "\n")
    return root


def utterances(speakers: dict[str, str], n: int) -> list[Utterance]:
    """`n` fake utterances per speaker (`speakers`: id -> 'f' | 'm'); paths are not real."""
    return [Utterance(f"{spk}-1-{i:04d}", spk, g, f"/x/{spk}-{i}.flac", 1.0)
            for spk, g in speakers.items() for i in range(n)]
