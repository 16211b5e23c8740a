"""Read a LibriSpeech-layout corpus (real LibriSpeech or the built-in synthetic corpus).

Layout: `root/SPEAKERS.TXT` (genders), `root/<subset>/<spk>/<chapter>/<spk>-<chapter>-<n>.flac`
and `<spk>-<chapter>.trans.txt` with `<utt-id> <TEXT>` lines.

>>> LibriSpeech("/corpora/LibriSpeech").utterances("dev-clean")  # doctest: +SKIP
"""
from __future__ import annotations

import logging
from pathlib import Path

from pipeline.core.errors import VpevalError, input_error
from pipeline.core.fileio import macos_metadata, read_text
from pipeline.data.corpus import Entry, listed_once
from pipeline.data.manifest import Utterance
from pipeline.data.screening import probe, thread_map

log = logging.getLogger(__name__)


def read_speakers(path: Path) -> dict[str, str]:
    """Speaker id -> 'f' | 'm' from SPEAKERS.TXT (`ID | SEX | SUBSET | MINUTES | NAME`); a
    speaker listed twice with two sexes is an error."""
    if not path.is_file():
        raise input_error(path, "SPEAKERS.TXT not found; is data.root a LibriSpeech folder?")
    rows = []
    for number, raw in enumerate(read_text(path).splitlines(), start=1):
        if not raw.strip() or raw.lstrip().startswith(";"):
            continue
        fields = [f.strip() for f in raw.split("|", maxsplit=4)]
        if len(fields) < 3 or fields[1].upper() not in ("F", "M"):
            raise input_error(path, f"expected 'ID | SEX | SUBSET | ...' with SEX F or M, got {raw!r}", number)
        rows.append((number, fields[0], fields[1].upper()))
    return {speaker: sex.lower() for speaker, (sex, _) in listed_once(path, rows, "speaker", "as {}").items()}


class LibriSpeech:
    """A LibriSpeech-layout corpus under `root`."""

    def __init__(self, root: str | Path, workers: int = 8):
        self.root = Path(root)
        self.workers = workers
        if not self.root.is_dir():
            raise VpevalError(f"{self.root}: corpus folder not found (set data.root)")

    def entries(self, subset: str) -> list[Entry]:
        """Every transcript line of a subset as an entry, without opening the audio."""
        folder = self.root / subset
        if not folder.is_dir():
            below = [p for p in sorted(self.root.glob(f"*/{subset}")) if p.is_dir()]
            hint = f" (there is {below[0]}: data.root={below[0].parent}?)" if below else ""
            raise VpevalError(f"{folder}: subset folder not found{hint}")
        genders = read_speakers(self.root / "SPEAKERS.TXT")
        files = [p for p in folder.glob("*/*/*") if not macos_metadata(p.name)]  # the chapters, listed once
        entries = []
        for trans in sorted(p for p in files if p.name.endswith(".trans.txt")):
            speaker = trans.parent.parent.name
            if speaker not in genders:
                raise input_error(self.root / "SPEAKERS.TXT", f"speaker {speaker} of {trans} is not listed")
            chapter = trans.parent.resolve()
            for number, raw in enumerate(read_text(trans).splitlines(), start=1):
                if not raw.strip():
                    continue
                utt_id, _, text = raw.partition(" ")
                if not utt_id.startswith(f"{speaker}-"):
                    raise input_error(trans, f"utterance {utt_id!r} does not belong to speaker {speaker}", number)
                entries.append(Entry(id=utt_id, speaker=speaker, gender=genders[speaker],
                                     path=str(chapter / f"{utt_id}.flac"), text=text.strip(),
                                     where=f"{trans}:{number}"))
        if not entries:
            raise VpevalError(f"{folder}: no '<spk>/<chapter>/*.trans.txt' transcripts found")
        listed = {Path(entry.path).name for entry in entries}
        unlisted = sorted(p for p in files if p.suffix == ".flac" and p.name not in listed)
        if unlisted:
            log.warning("%s: %d audio file(s) have no transcript line and are not read, e.g. %s", folder,
                        len(unlisted), unlisted[0])
        return entries

    def utterances(self, subset: str) -> list[Utterance]:
        """All utterances of one subset, with genders, texts and durations (from headers);
        the first missing or unreadable file is an error."""
        entries = self.entries(subset)
        headers = thread_map(probe, entries, f"reading {subset}", self.workers)
        for entry, header in zip(entries, headers):
            if isinstance(header, str):
                raise VpevalError(f"{entry.where}: {header}")
        return [entry.utterance(frames / rate, rate) for entry, (rate, frames, _) in zip(entries, headers)]

