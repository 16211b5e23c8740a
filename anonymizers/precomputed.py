"""Audio the user has already anonymised, looked up by utterance id and checked.

How files are found in `folder`:

- if `folder/wav.scp` exists, it is the index: Kaldi-style `<utt_id> <path>` lines, relative
  paths taken from `folder` (piped commands are not supported);
- otherwise every `*.wav` and `*.flac` file anywhere under `folder` is indexed by its name
  without the suffix (`folder/19/198/19-198-0001.flac` is utterance `19-198-0001`); two
  files with the same id are an error;
- with `suffix`, `folder` is a VoicePrivacy `data/` folder holding one or several systems'
  anonymised Kaldi dirs `<list>_<suffix>` (`libri_dev_enrolls_b2`, ..., `train-clean-360_b2`)
  beside the original `<list>` dirs: the `wav.scp` of every dir named `*_<suffix>` is the
  index (paths as in VPC's `wav.scp`: relative ones from the recipe folder, `folder/..`; the
  `flac -c -d -s PATH |` / `sox PATH -t wav - |` forms give PATH, never run), or, in a dir
  without one, its audio files by name (VPC's `<dir>/wav/<utt>.wav`). Other systems' dirs
  are not read. An utterance in no such dir names the dir expected for it: the original
  dir that lists it, with the suffix.

Every utterance of a batch must be found, decodable, mono, at the input's sample rate and
within `length_tolerance` (+ 0.05 s) of the input's length; the error names the utterances.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Sequence

import torch

from anonymizers.base import Anonymizer, Batch, Parameters
from anonymizers.checked_audio import AUDIO_SUFFIXES, LENGTH_TOLERANCE, load_checked, shown
from pipeline.core.checks import setting
from pipeline.core.errors import VpevalError, input_error
from pipeline.core.fileio import macos_metadata, read_text
from pipeline.data.kaldi import table_lines, wav_scp_path
from pipeline.data.manifest import Utterance


@dataclass
class PrecomputedParameters(Parameters):
    """Where the anonymised audio is (conf/anonymizer/precomputed.yaml).

    folder: the folder of anonymised audio (see the module docstring for the lookup).
    suffix: the system's suffix in a VoicePrivacy data folder of `<list>_<suffix>` dirs; None:
        `folder` holds one system's audio.
    length_tolerance: allowed relative change of an utterance's length (0.1 = 10 %).
    `level` and `batch_seconds` are unused beyond the interface, since the audio exists already.
    """

    folder: str | None = setting(None)
    suffix: str | None = setting(None)
    length_tolerance: float = setting(0.1, LENGTH_TOLERANCE)

    @property
    def system_suffix(self) -> str | None:
        return str(self.suffix).lstrip("_") if self.suffix else None

    def system_dirs(self) -> list[Path]:
        """The `<list>_<suffix>` dirs of the system (with `suffix`)."""
        suffix = f"_{self.system_suffix}"
        return sorted(d for d in Path(self.folder).iterdir() if d.is_dir() and d.name.endswith(suffix))

    def file_problems(self, key: str = "anonymizer") -> list[str]:
        folder = Path(str(self.folder))
        if self.folder is None or not folder.is_dir():
            return [f"{key}.folder: {folder} is not a folder"]
        if self.system_suffix is not None and not self.system_dirs():
            found = sorted(d.name for d in folder.iterdir() if d.is_dir())
            return [f"{key}.folder: {folder} has no data dir named *_{self.system_suffix} "
                    f"({key}.suffix={self.suffix}); data dirs there: {shown(found) or 'none'}"]
        return []

    def fingerprint(self, source_speakers=None) -> dict[str, str]:
        """What the system's dirs (with `suffix`) or its folder list (wav.scp, else their audio
        files' names, sizes and times), so re-anonymised data at the same place are not taken
        for the old."""
        digest = hashlib.sha256()
        for folder in self.system_dirs() if self.system_suffix is not None else [Path(self.folder)]:
            scp = folder / "wav.scp"
            listing = scp.read_bytes() if scp.is_file() else "\n".join(
                f"{path.relative_to(folder)} {path.stat().st_size} {path.stat().st_mtime_ns}"
                for path in sorted(scan_audio(folder).values())).encode()
            digest.update(folder.name.encode() + b"\0" + listing + b"\0")
        return {"precomputed_dirs": digest.hexdigest()}


class Precomputed(Anonymizer):
    """Returns the already-anonymised version of each utterance from `folder`; its parameters
    are `PrecomputedParameters`, with `seed`, `device` (see `Anonymizer`)."""

    parameters = PrecomputedParameters

    def __init__(self, **settings):
        super().__init__(**settings)
        self.folder = Path(self.settings.folder)
        self.length_tolerance = float(self.settings.length_tolerance)
        self.suffix = self.settings.system_suffix

    def system_dirs(self) -> list[Path]:
        """The `<list>_<suffix>` dirs of the system (with `suffix`)."""
        return self.settings.system_dirs()

    @cached_property
    def index(self) -> dict[str, Path]:
        """Utterance id -> audio file, built once from wav.scp, the system's dirs or by scanning the folder."""
        if self.suffix is not None:
            return vpc_index(self.system_dirs(), self.folder.resolve().parent)
        scp = self.folder / "wav.scp"
        return read_wav_scp(scp) if scp.is_file() else scan_audio(self.folder)

    def prepare(self, utterances: Sequence[Utterance]) -> None:
        """With `suffix`: every utterance of the list must be in the system's dirs; else name the
        dir expected, `<original dir>_<suffix>`, where the original dir is the one listing most
        of the list's utterances (fewest others, then the shortest name, on ties)."""
        missing = [utt.id for utt in utterances if utt.id not in self.index]
        if self.suffix is None or not missing:
            return
        wanted, best, system_dirs = {utt.id for utt in utterances}, None, self.system_dirs()
        for folder in self.folder.iterdir():
            if folder.is_dir() and (folder / "wav.scp").is_file() and folder not in system_dirs:
                listed = {utt for _, utt, _ in table_lines(folder / "wav.scp")}
                key = (-len(wanted & listed), len(listed), len(folder.name))
                if key[0] < 0 and (best is None or key < best[0]):
                    best = (key, folder)
        expected = f"expected {best[1]}_{self.suffix}/wav.scp, the anonymised {best[1].name}" if best else \
            "no original dir lists them either"
        raise VpevalError(f"precomputed folder {self.folder}: {len(missing)} utterance(s) in no *_{self.suffix} "
                          f"dir ({shown(missing)}): {expected}")

    def anonymize(self, batch: Batch) -> list[torch.Tensor]:
        paths = {utt: self.index.get(utt) for utt in batch.utt_ids}
        return load_checked(paths, batch, f"precomputed folder {self.folder}", self.length_tolerance)


def vpc_index(dirs: Sequence[Path], path_root: Path) -> dict[str, Path]:
    """Utterance id -> audio path of VPC data dirs (their wav.scp, relative paths from `path_root`,
    or their audio files by name); one id with two different files is an error naming both."""
    index: dict[str, tuple[Path, str]] = {}
    for folder in dirs:
        scp = folder / "wav.scp"
        if not scp.is_file():
            for utt, path in scan_audio(folder).items():
                if utt in index and index[utt][0] != path:
                    raise VpevalError(f"{path}: utterance {utt} is also {index[utt][0]} in {index[utt][1]}")
                index[utt] = (path, str(folder))
            continue
        for number, utt, value in table_lines(scp):
            try:
                path = path_root / wav_scp_path(value)
            except ValueError as exc:
                raise input_error(scp, f"cannot use the audio of {utt}: {exc}", number) from None
            if utt in index and index[utt][0] != path:
                raise input_error(scp, f"utterance {utt} is {path} here but {index[utt][0]} in {index[utt][1]}",
                                  number)
            index[utt] = (path, f"{scp}:{number}")
    return {utt: path for utt, (path, _) in index.items()}


def read_wav_scp(scp: Path) -> dict[str, Path]:
    """`<utt_id> <path>` lines; relative paths are relative to the scp's folder."""
    index: dict[str, Path] = {}
    for number, line in enumerate(read_text(scp).splitlines(), start=1):
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
    """Every .wav/.flac under `folder` (not macOS `._*` metadata), by file name without suffix; duplicates
    are an error."""
    index: dict[str, Path] = {}
    duplicates = []
    for path in sorted(p for p in folder.rglob("*")
                       if p.suffix.lower() in AUDIO_SUFFIXES and p.is_file() and not macos_metadata(p.name)):
        if path.stem in index:
            duplicates.append(f"{path.stem} ({index[path.stem]} and {path})")
        index.setdefault(path.stem, path)
    if duplicates:
        raise VpevalError(f"precomputed folder {folder}: several files for utterance(s) {shown(duplicates)}")
    return index
