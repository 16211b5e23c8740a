"""Pitch correlation ρF0 (VoicePrivacy 2022): how well anonymisation keeps the intonation.

ρF0 of an utterance is the Pearson correlation between the F0 track of the original and
of its anonymised version, over the frames voiced in both; a set's ρF0 is the mean over its
utterances (VPC 2022 asks for ρF0 > 0.3). As in the VPC 2022 toolkit
(`pitch_correlation.py`): F0 every 10 ms searched in 75-500 Hz, the shorter track linearly
interpolated to the length of the longer, and a frame counts as voiced when its F0 lies in
75-500 Hz after that interpolation; an undefined correlation (fewer than two common voiced
frames, or a constant track: spanning under 1 Hz) is 0, as the toolkit's `fillna(0)` makes it.

That is the default (`utility.pitch_tracker=yin_viterbi`: vpeval's YIN, its track the Viterbi
path of `pipeline.signal.f0.YinPitch.path`; `yin`, YIN frame by frame, makes octave errors on
female voices; `utility.pitch_rule=voiced`). The toolkit itself differs in two ways
(docs/utility.md, "ρF0 against the VPC 2022 toolkit", measures both): its tracker is Praat's
(`pitch_tracker=praat`, `praat_f0_track`, through the optional praat-parselmouth package) and
its correlation takes every frame, unvoiced ones as zeros, after shifting the anonymised track
to the lag of the largest cross-correlation (`pitch_rule=vpc2022`, `vpc2022_correlation`). Both
together give the toolkit's value.

>>> round(pitch_correlation(np.array([100., 120, 0, 140]), np.array([200., 240, 250, 280])), 6)
1.0
"""
from __future__ import annotations

import numpy as np

from pipeline.core.errors import VpevalError

F0_MIN = 75.0     # Hz, VPC 2022's pitch floor and voicing rule
F0_MAX = 500.0    # Hz, VPC 2022's pitch ceiling and voicing rule
FRAME_SECONDS = 0.01
# A voiced track spanning less than this is constant (its correlation undefined): on a steady
# 150 Hz tone the tracker's interpolation and its edge frames leave a 0.2 Hz spread, which would
# otherwise give a steady voice a noise-driven correlation; 1 Hz is under the F0 difference
# listeners hear and far under any intonation.
CONSTANT_SPAN_HZ = 1.0
TRACKERS = ("yin_viterbi", "yin", "praat")  # utility.pitch_tracker
PITCH_RULES = ("voiced", "vpc2022")  # utility.pitch_rule
PRAAT_MISSING = ("utility.pitch_tracker=praat needs the praat-parselmouth package (GPL-3.0): "
                 "pip install -c constraints.txt -e '.[praat]'")


def f0_track(wave: np.ndarray, sample_rate: int, path: bool = True) -> np.ndarray:
    """F0 in Hz every 10 ms (0 where unvoiced) by the YIN tracker of `pipeline.signal.f0`,
    searched in 75-500 Hz: its Viterbi path (`YinPitch.path`), or frame by frame (`path=False`)."""
    import torch

    from pipeline.signal.f0 import YinPitch

    tracker = YinPitch(sample_rate=sample_rate, hop_length=round(FRAME_SECONDS * sample_rate),
                       f0_min=F0_MIN, f0_max=F0_MAX)
    waves = torch.as_tensor(np.asarray(wave, dtype=np.float32))[None]
    f0, _ = tracker.path(waves) if path else tracker(waves)
    return f0[0].double().numpy()


def praat_version() -> str | None:
    """The installed praat-parselmouth's version, None without it."""
    try:
        import parselmouth
    except ImportError:
        return None
    return parselmouth.__version__


def praat_f0_track(wave: np.ndarray, sample_rate: int) -> np.ndarray:
    """F0 in Hz every 10 ms (0 where unvoiced) by Praat's autocorrelation method with the VPC 2022
    toolkit's settings (`Sound.to_pitch`, time step 10 ms, floor 75 Hz, ceiling 500 Hz). Audio
    too short for Praat's analysis window (about 40 ms at a 75 Hz floor) has no voiced frame."""
    if praat_version() is None:
        raise VpevalError(PRAAT_MISSING)
    import parselmouth

    sound = parselmouth.Sound(np.asarray(wave, dtype=np.float64), sampling_frequency=float(sample_rate),
                              start_time=0.0)
    try:
        pitch = sound.to_pitch(time_step=FRAME_SECONDS, pitch_floor=F0_MIN, pitch_ceiling=F0_MAX)
    except parselmouth.PraatError:  # shorter than one analysis window
        return np.zeros(max(1, round(len(wave) / (FRAME_SECONDS * sample_rate))))
    return np.asarray(pitch.selected_array["frequency"], dtype=np.float64)


def track(wave: np.ndarray, sample_rate: int, tracker: str) -> np.ndarray:
    """The F0 track of `wave` by `tracker` (one of TRACKERS)."""
    if tracker not in TRACKERS:
        raise VpevalError(f"utility.pitch_tracker={tracker!r}: not a pitch tracker (one of {', '.join(TRACKERS)})")
    return praat_f0_track(wave, sample_rate) if tracker == "praat" else \
        f0_track(wave, sample_rate, path=tracker == "yin_viterbi")


def stretched(f0: np.ndarray, length: int) -> np.ndarray:
    """`f0` linearly interpolated to `length` frames, first and last frames kept (VPC 2022)."""
    f0 = np.asarray(f0, dtype=np.float64)
    if len(f0) == length or len(f0) < 2:
        return np.resize(f0, length) if len(f0) != length else f0
    return np.interp(np.linspace(0, len(f0) - 1, length), np.arange(len(f0)), f0)


def in_range(f0: np.ndarray) -> np.ndarray:
    """Frames counted as voiced: F0 within 75-500 Hz (VPC 2022's rule)."""
    return (f0 >= F0_MIN) & (f0 <= F0_MAX)


def pitch_correlation(original: np.ndarray, anonymized: np.ndarray) -> float:
    """ρF0 of two F0 tracks (Hz, 0 where unvoiced) of one utterance: Pearson over the frames
    voiced (75-500 Hz) in both after stretching the shorter to the longer; 0 when undefined."""
    length = max(len(original), len(anonymized))
    a, b = stretched(original, length), stretched(anonymized, length)
    both = in_range(a) & in_range(b)
    a, b = a[both], b[both]
    if len(a) < 2 or np.ptp(a) < CONSTANT_SPAN_HZ or np.ptp(b) < CONSTANT_SPAN_HZ:
        return 0.0
    return float(np.corrcoef(a, b)[0, 1])


def describe(tracker: str = "yin", rule: str = "voiced") -> str:
    """How ρF0 was computed, for reports (the defaults: results written before the settings).

    >>> describe("praat", "voiced")
    "Praat's F0, frames voiced in both"
    """
    source = {"yin_viterbi": "vpeval's YIN F0, its path by Viterbi",
              "yin": "vpeval's YIN F0 frame by frame (measured to lower ρF0 on female voices by octave errors: "
                     "docs/utility.md)",
              "praat": "Praat's F0"}[tracker]
    frames = {"voiced": "frames voiced in both",
              "vpc2022": "every frame, unvoiced as 0, after the VPC 2022 toolkit's cross-correlation shift"}[rule]
    return f"{source}, {frames}"


def vpc2022_correlation(original: np.ndarray, anonymized: np.ndarray) -> float:
    """ρF0 by the VPC 2022 toolkit's rule (`pitchCorr` of its pitch_correlation.py): the shorter
    track stretched to the longer, F0 outside 75-500 Hz set to 0, the anonymised track rolled
    (circularly) by the lag of the largest full cross-correlation of the two, then the Pearson
    correlation over every frame, unvoiced ones included as zeros; 0 when undefined.

    >>> vpc2022_correlation(np.array([0., 100, 120, 0]), np.array([100., 120, 0, 0]))  # shifted by one frame
    1.0
    """
    length = max(len(original), len(anonymized))
    if length < 2:
        return 0.0
    a, b = stretched(original, length), stretched(anonymized, length)
    a, b = np.where(in_range(a), a, 0.0), np.where(in_range(b), b, 0.0)
    b = np.roll(b, int(np.argmax(np.correlate(a, b, "full"))) - (length - 1))
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return 0.0
    return float(np.corrcoef(a, b)[0, 1])


def correlation(original: np.ndarray, anonymized: np.ndarray, rule: str) -> float:
    """ρF0 of two F0 tracks by `rule` (one of PITCH_RULES)."""
    if rule not in PITCH_RULES:
        raise VpevalError(f"utility.pitch_rule={rule!r}: not a ρF0 rule (one of {', '.join(PITCH_RULES)})")
    return vpc2022_correlation(original, anonymized) if rule == "vpc2022" else pitch_correlation(original, anonymized)
