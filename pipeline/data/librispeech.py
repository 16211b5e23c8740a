"""Read a LibriSpeech-layout corpus (real LibriSpeech or the built-in synthetic corpus).

Layout: `root/SPEAKERS.TXT` (genders), `root/<subset>/<spk>/<chapter>/<spk>-<chapter>-<n>.flac`
and `<spk>-<chapter>.trans.txt` with `<utt-id> <TEXT>` lines.

>>> LibriSpeech("/corpora/LibriSpeech").utterances("dev-clean")  # doctest: +SKIP
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tqdm import tqdm

from pipeline.data.audio import audio_info
from pipeline.data.manifest import Utterance
from pipeline.errors import VpevalError, input_error


def read_speakers(path: Path) -> dict[str, str]:
    """Speaker id -> 'f' | 'm' from SPEAKERS.TXT (`ID | SEX | SUBSET | MINUTES | NAME`)."""
    if not path.is_file():
        raise input_error(path, "SPEAKERS.TXT not found; is data.root a LibriSpeech folder?")
    genders = {}
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not raw.strip() or raw.lstrip().startswith(";"):
            continue
        fields = [f.strip() for f in raw.split("|", maxsplit=4)]
        if len(fields) < 3 or fields[1].upper() not in ("F", "M"):
            raise input_error(path, f"expected 'ID | SEX | SUBSET | ...' with SEX F or M, got {raw!r}", number)
        genders[fields[0]] = fields[1].lower()
    return genders


class LibriSpeech:
    """A LibriSpeech-layout corpus under `root`."""

    def __init__(self, root: str | Path, workers: int = 8):
        self.root = Path(root)
        self.workers = workers
        if not self.root.is_dir():
            raise VpevalError(f"{self.root}: corpus folder not found (set data.root)")

    def utterances(self, subset: str) -> list[Utterance]:
        """All utterances of one subset, with genders, texts and durations (from headers)."""
        folder = self.root / subset
        if not folder.is_dir():
            raise VpevalError(f"{folder}: subset folder not found")
        genders = read_speakers(self.root / "SPEAKERS.TXT")
        entries = []  # (id, speaker, path, text)
        for trans in sorted(folder.glob("*/*/*.trans.txt")):
            speaker = trans.parent.parent.name
            if speaker not in genders:
                raise input_error(self.root / "SPEAKERS.TXT", f"speaker {speaker} of {trans} is not listed")
            for number, raw in enumerate(trans.read_text(encoding="utf-8").splitlines(), start=1):
                if not raw.strip():
                    continue
                utt_id, _, text = raw.partition(" ")
                audio = trans.parent / f"{utt_id}.flac"
                if not utt_id.startswith(f"{speaker}-"):
                    raise input_error(trans, f"utterance {utt_id!r} does not belong to speaker {speaker}", number)
                if not audio.is_file():
                    raise input_error(trans, f"audio file {audio.name} is missing", number)
                entries.append((utt_id, speaker, audio, text.strip()))
        if not entries:
            raise VpevalError(f"{folder}: no '<spk>/<chapter>/*.trans.txt' transcripts found")
        with ThreadPoolExecutor(self.workers) as pool:
            infos = list(tqdm(pool.map(lambda e: audio_info(e[2]), entries), total=len(entries),
                              desc=f"reading {subset}", unit="file", leave=False))
        return [
            Utterance(id=utt_id, speaker=speaker, gender=genders[speaker], path=str(audio.resolve()),
                      duration=round(frames / rate, 4), sample_rate=rate, text=text)
            for (utt_id, speaker, audio, text), (rate, frames, _) in zip(entries, infos)
        ]
