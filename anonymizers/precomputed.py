"""Audio the user has already anonymised, looked up by utterance id and checked.

How files are found in `folder`:

- if `folder/wav.scp` exists, it is the index: Kaldi-style `<utt_id> <path>` lines, relative
  paths taken from `folder` (piped commands are not supported);
- otherwise every `*.wav` and `*.flac` file anywhere under `folder` is indexed by its name
  without the suffix (`folder/19/198/19-198-0001.flac` is utterance `19-198-0001`); two
  files with the same id are an error.

Every utterance of a batch must be found, decodable, mono, at the input's sample rate and
within `length_tolerance` (+ 0.05 s) of the input's length; the error names the utterances.
"""
from __future__ import annotations

from functools import cached_property
from pathlib import Path

import torch

from anonymizers.base import Anonymizer, Batch
from anonymizers.checked_audio import (
    AUDIO_SUFFIXES,
    check_length_tolerance,
    load_checked,
    shown,
)
from pipeline.errors import VpevalError, input_error


class Precomputed(Anonymizer):
    """Returns the already-anonymised version of each utterance from `folder`.

    Args:
        folder: the folder of anonymised audio (see the module docstring for the lookup).
        length_tolerance: allowed relative change of an utterance's length (0.1 = 10 %).
        **common: `level`, `seed`, `device`, `batch_seconds` (see `Anonymizer`); unused here
            beyond the interface, since the audio exists already.
    """

    def __init__(self, folder: str, length_tolerance: float = 0.1, **common):
        super().__init__(**common)
        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise VpevalError(f"anonymizer.folder: {self.folder} is not a folder")
        self.length_tolerance = check_length_tolerance(length_tolerance)

    @cached_property
    def index(self) -> dict[str, Path]:
        """Utterance id -> audio file, built once from wav.scp or by scanning the folder."""
        scp = self.folder / "wav.scp"
        return read_wav_scp(scp) if scp.is_file() else scan_audio(self.folder)

    def anonymize(self, batch: Batch) -> list[torch.Tensor]:
        paths = {utt: self.index.get(utt) for utt in batch.utt_ids}
        return load_checked(paths, batch, f"precomputed folder {self.folder}", self.length_tolerance)


def read_wav_scp(scp: Path) -> dict[str, Path]:
    """`<utt_id> <path>` lines; relative paths are relative to the scp's folder."""
    index: dict[str, Path] = {}
    for number, line in enumerate(scp.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split(maxsplit=1)
        if len(fields) != 2:
            raise input_error(scp, "expected '<utt_id> <path>'", number)
        utt, location = fields[0], fields[1].strip()
        if location.endswith("|"):
            raise input_error(scp, f"piped command for {utt!r}: not supported, give a file path", number)
        if utt in index:
            raise input_error(scp, f"duplicate utterance id {utt!r}", number)
        index[utt] = scp.parent / location
    return index


def scan_audio(folder: Path) -> dict[str, Path]:
    """Every .wav/.flac under `folder`, by file name without suffix; duplicates are an error."""
    index: dict[str, Path] = {}
    duplicates = []
    for path in sorted(p for p in folder.rglob("*") if p.suffix.lower() in AUDIO_SUFFIXES and p.is_file()):
        if path.stem in index:
            duplicates.append(f"{path.stem} ({index[path.stem]} and {path})")
        index.setdefault(path.stem, path)
    if duplicates:
        raise VpevalError(f"precomputed folder {folder}: several files for utterance(s) {shown(duplicates)}")
    return index
