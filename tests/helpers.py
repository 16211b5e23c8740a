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


def vctk_tree(root: Path, speakers: dict[str, str], sentences: int = 9, seconds: float = 0.3,
              rate: int = 48000, no_text: tuple[str, ...] = (), no_mic2: tuple[str, ...] = (),
              unrecorded: dict[str, tuple[int, ...]] | None = None) -> Path:
    """Write a VCTK 0.92 tree (`speakers`: id -> 'F' | 'M'), sentences 1..`sentences`, both mics.

    Quirks: speakers in `no_text` get no transcripts (as p315), those in `no_mic2` no mic2
    audio (as p280), and `unrecorded` sentences keep their transcript but lose both
    recordings (as some of p362's).
    """
    unrecorded = unrecorded or {}
    rows = ["ID  AGE  GENDER  ACCENTS  REGION COMMENTS "]
    for n, (spk, sex) in enumerate(speakers.items()):
        rows.append(f"{spk}  23  {sex}    English    Somewhere")
        audio, text = root / "wav48_silence_trimmed" / spk, root / "txt" / spk
        audio.mkdir(parents=True, exist_ok=True)
        for i in range(1, sentences + 1):
            utt = f"{spk}_{i:03d}"
            if spk not in no_text:
                text.mkdir(parents=True, exist_ok=True)
                (text / f"{utt}.txt").write_text(f"Sentence {i} read by {spk}.\n")
            if i in unrecorded.get(spk, ()):
                continue
            for mic in ("mic1", "mic2"):
                if mic == "mic2" and spk in no_mic2:
                    continue
                write_audio(audio / f"{utt}_{mic}.flac", tone(seconds, 90 + 15 * n + 3 * i, rate, seed=i), rate)
    (root / "speaker-info.txt").write_text("\n".join(rows) + "\n")
    return root


def kaldi_dir(folder: Path, rows: list[tuple[str, str, str, str]], enrolls: list[str] | None = None,
              trials: list[str] | None = None) -> Path:
    """Write a Kaldi data dir; `rows` are (utterance, speaker, gender, wav.scp value)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "wav.scp").write_text("".join(f"{utt} {value}\n" for utt, _, _, value in rows))
    (folder / "utt2spk").write_text("".join(f"{utt} {spk}\n" for utt, spk, _, _ in rows))
    genders = dict((spk, g) for _, spk, g, _ in rows)
    (folder / "spk2gender").write_text("".join(f"{spk} {g}\n" for spk, g in sorted(genders.items())))
    if enrolls is not None:
        (folder / "enrolls").write_text("".join(f"{utt}\n" for utt in enrolls))
    if trials is not None:
        (folder / "trials").write_text("".join(f"{line}\n" for line in trials))
    return folder
