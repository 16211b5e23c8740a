"""Audio I/O through soundfile: mono float32 at a fixed rate, atomic writes.

>>> import tempfile
>>> path = write_audio(Path(tempfile.mkdtemp()) / "a.flac", np.full(1600, 0.25), 16000)
>>> wav = read_audio(path, sample_rate=8000)
>>> wav.dtype, wav.shape, round(float(wav[400]), 3)
(dtype('float32'), (800,), 0.25)
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import soundfile as sf

from pipeline.core.errors import VpevalError
from pipeline.core.fileio import atomic_path

DURATION_TOLERANCE = 0.01  # seconds a manifest's duration may differ from its file's (`decode_problem`)

@lru_cache(maxsize=16)
def _resampler(orig: int, new: int):
    import torchaudio.transforms as T

    return T.Resample(orig, new)


def resample(wav: np.ndarray, orig: int, new: int) -> np.ndarray:
    """Band-limited resampling (torchaudio's sinc interpolation)."""
    if orig == new:
        return wav
    import torch

    return _resampler(orig, new)(torch.from_numpy(wav)[None])[0].numpy()


class NonFiniteAudio(VpevalError):
    """Audio holding NaN or infinite samples (a float file can)."""


def read_audio(path: str | Path, sample_rate: int | None = None, *, mix: bool = False) -> np.ndarray:
    """Read a file as mono float32 in [-1, 1], resampled to `sample_rate` when given.

    Multi-channel audio is an error unless `mix` is set, in which case channels are averaged.
    """
    try:
        wav, rate = sf.read(str(path), dtype="float32", always_2d=True)
    except (sf.LibsndfileError, RuntimeError, OSError) as exc:
        reason = "file not found" if not Path(path).exists() else f"cannot decode audio ({exc})"
        raise VpevalError(f"{path}: {reason}") from None
    if wav.shape[0] == 0:
        raise VpevalError(f"{path}: empty audio (0 samples)")
    if (first := first_non_finite(wav)) is not None:
        raise NonFiniteAudio(f"{path}: non-finite samples (NaN or inf), first at sample {first}")
    if wav.shape[1] > 1 and not mix:
        raise VpevalError(f"{path}: {wav.shape[1]} channels, expected mono")
    wav = wav.mean(axis=1) if wav.shape[1] > 1 else wav[:, 0]
    if sample_rate is not None and rate != sample_rate:
        wav = resample(wav, rate, sample_rate)
    return np.ascontiguousarray(wav, dtype=np.float32)


def first_non_finite(samples: np.ndarray) -> int | None:
    """Index of the first sample (row) holding a NaN or an infinity, or None.

    >>> first_non_finite(np.array([0.0, np.nan, np.inf]))
    1
    """
    bad = ~np.isfinite(samples)
    if samples.ndim > 1:
        bad = bad.any(axis=tuple(range(1, samples.ndim)))
    return int(np.argmax(bad)) if bad.any() else None


def audio_info(path: str | Path) -> tuple[int, int, int]:
    """(sample rate, frames, channels) from the header, without decoding."""
    try:
        with sf.SoundFile(str(path)) as handle:
            return handle.samplerate, handle.frames, handle.channels
    except (sf.LibsndfileError, RuntimeError, OSError) as exc:
        reason = "file not found" if not Path(path).exists() else f"cannot read audio header ({exc})"
        raise VpevalError(f"{path}: {reason}") from None


def write_audio(path: str | Path, wav, sample_rate: int) -> Path:
    """Write mono audio atomically; the format follows the suffix (.flac or .wav), 16-bit PCM."""
    wav = np.asarray(wav, dtype=np.float32)
    with atomic_path(path) as tmp:
        sf.write(str(tmp), np.clip(wav, -1.0, 1.0), sample_rate, subtype="PCM_16")
    return Path(path)


def decode_problem(path: str | Path, sample_rate: int, duration: float,
                   tolerance: float = DURATION_TOLERANCE) -> str | None:
    """What is wrong with a manifest entry's audio after decoding it fully, or None.

    Checks that the file exists and decodes to the end, is mono, non-empty, finite (a float
    file can hold NaN or inf), at `sample_rate`, and `duration` seconds long (within
    `tolerance`), which catches truncated files whose header still promises the full length.
    """
    if not Path(path).is_file():
        return f"audio file {path} is missing"
    frames, first_bad = 0, None
    try:
        with sf.SoundFile(str(path)) as handle:
            rate, channels = handle.samplerate, handle.channels
            for block in handle.blocks(1 << 16, dtype="float32", always_2d=True):
                if first_bad is None and (bad := first_non_finite(block)) is not None:
                    first_bad = frames + bad
                frames += len(block)
    except (sf.LibsndfileError, RuntimeError, OSError) as exc:
        return f"cannot decode {path} ({exc})"
    if first_bad is not None:
        return f"{path} has non-finite samples (NaN or inf), first at sample {first_bad}"
    if frames == 0:
        return f"{path} is empty (0 samples)"
    if channels != 1:
        return f"{path} has {channels} channels, expected mono"
    if rate != sample_rate:
        return f"{path} is {rate} Hz, the manifest says {sample_rate} Hz"
    if abs(frames / rate - duration) > tolerance:
        return f"{path} decodes to {frames / rate:.3f} s, the manifest says {duration} s (truncated?)"
    return None


def convert_audio(source: str | Path, target: str | Path, sample_rate: int) -> int:
    """Write `source` as mono 16-bit FLAC at `sample_rate` (channels averaged); returns its frames."""
    wav = read_audio(source, sample_rate, mix=True)
    write_audio(target, wav, sample_rate)
    return int(wav.shape[0])
