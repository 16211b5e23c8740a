"""Audio produced outside vpeval (an external command, a precomputed folder), read back and
checked against the inputs: every utterance present, decodable, mono, finite, at the input's
sample rate and of a plausible length. All problems of a batch are reported in one line that
names the utterances.
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import torch

from anonymizers.base import Batch
from pipeline.core.checks import Check, non_negative
from pipeline.core.errors import VpevalError
from pipeline.data.audio import NonFiniteAudio, audio_info, read_audio

# Output length may differ from the input's by `length_tolerance` (a fraction) plus this.
LENGTH_SLACK_SECONDS = 0.05
AUDIO_SUFFIXES = (".wav", ".flac")
IDS_SHOWN = 5
LENGTH_TOLERANCE = Check("a number in [0, 1)", lambda v: non_negative(v) and v < 1)


def check_file_ids(utt_ids: list[str]) -> None:
    """Utterance ids become file names and list-file fields: no whitespace, '/', or leading dot."""
    bad = [u for u in utt_ids if not u or u.startswith(".") or "/" in u or "\\" in u or any(c.isspace() for c in u)]
    if bad:
        raise VpevalError(f"utterance ids unusable as file names (whitespace, '/', or leading '.'): {shown(bad)}")


def load_checked(paths: dict[str, Path | None], batch: Batch, source: str, length_tolerance: float) -> list[torch.Tensor]:
    """Read `paths[utt]` for every utterance of `batch`, in order, as float32 tensors.

    Raises one VpevalError starting with `source` that lists every problem with the ids it
    concerns, e.g. ``external command output: missing for 2 utterance(s): u1, u2``.
    """
    problems: dict[str, list[str]] = defaultdict(list)
    outputs = []
    for utt, wave in zip(batch.utt_ids, batch.waves):
        path = paths.get(utt)
        if path is None or not Path(path).is_file():
            problems["missing"].append(utt)
            continue
        problem, detail, audio = read_checked(Path(path), len(wave), batch.sample_rate, length_tolerance)
        if problem:
            problems[problem].append(f"{utt} ({detail})" if detail else utt)
        else:
            outputs.append(audio)
    if problems:
        details = "; ".join(f"{problem} for {len(ids)} utterance(s): {shown(ids)}" for problem, ids in problems.items())
        raise VpevalError(f"{source}: {details}")
    return outputs


def read_checked(path: Path, input_length: int, sample_rate: int,
                 length_tolerance: float) -> tuple[str, str, torch.Tensor | None]:
    """(problem, detail, None) or ("", "", audio) for one file."""
    try:
        rate, frames, channels = audio_info(path)
        if rate != sample_rate:
            return f"sample rate not {sample_rate} Hz", f"{rate} Hz", None
        if channels != 1:
            return "not mono", f"{channels} channels", None
        allowed = length_tolerance * input_length + LENGTH_SLACK_SECONDS * sample_rate
        if abs(frames - input_length) > allowed:
            return (f"length off by more than {length_tolerance:.0%} + {LENGTH_SLACK_SECONDS} s",
                    f"{frames / sample_rate:.2f} s for {input_length / sample_rate:.2f} s", None)
        audio = torch.from_numpy(read_audio(path))
    except NonFiniteAudio:
        return "non-finite samples", "", None
    except VpevalError:
        return "not decodable audio", "", None
    return "", "", audio


def find_output(folder: Path, utt: str) -> Path | None:
    """`<folder>/<utt>.wav`, else `<folder>/<utt>.flac`, else None."""
    for suffix in AUDIO_SUFFIXES:
        candidate = folder / f"{utt}{suffix}"
        if candidate.is_file():
            return candidate
    return None


def shown(ids: list[str]) -> str:
    """'a, b, c' or 'a, b, c, d, e and 7 more'."""
    head = ", ".join(ids[:IDS_SHOWN])
    return head if len(ids) <= IDS_SHOWN else f"{head} and {len(ids) - IDS_SHOWN} more"
