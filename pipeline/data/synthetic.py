"""Built-in synthetic speech corpus in the LibriSpeech layout, deterministic from a seed.

Speech-like audio comes from a source-filter synthesiser: a Rosenberg glottal pulse train
(with jitter, shimmer and breathiness) and noise sources, shaped by a cascade of formant
resonators (updated every 10 ms from 5 ms parameter tracks) whose targets follow a random
phone sequence. Speaker identity lives in
the source and the vocal tract (F0 level and range, vocal tract length and per-formant
offsets, bandwidths, spectral tilt, open and speed quotient, breathiness, jitter, shimmer);
the content is a fresh phone sequence with prosody for every utterance; every chapter adds a
mild channel (EQ, high-pass, noise floor, level) and session (F0, formants) variation.

Files under `root` (LibriSpeech's layout, plus one alignment file per chapter)::

    SPEAKERS.TXT                                   ;-header, then "ID | SEX | SUBSET | MINUTES | NAME"
    <subset>/<spk>/<chapter>/<spk>-<chapter>-<utt:04d>.flac   16-bit mono FLAC
    <subset>/<spk>/<chapter>/<spk>-<chapter>.trans.txt        "<utt-id> <UPPERCASE TEXT>"
    <subset>/<spk>/<chapter>/<spk>-<chapter>.align.txt        "<utt-id> <start_s> <end_s> <label>"
    synthetic.json                                 generation options, written last

An alignment file lists, for each utterance in order, its segments as contiguous intervals
in seconds (millisecond precision) from 0 to the utterance's duration; labels are ARPAbet-like
phone symbols (a stop is one segment: closure, burst and aspiration) and `SIL` for silence.
The transcript's words are the spellings of the same phones.

>>> generate_corpus("data/corpora/synthetic", seed=0)  # doctest: +SKIP
PosixPath('data/corpora/synthetic')
"""
from __future__ import annotations

import glob
import json
import multiprocessing
import os
import re
import secrets
import shutil
import signal
import socket
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

import numpy as np
from scipy.signal import lfilter
from tqdm import tqdm

from pipeline.data.audio import write_audio
from pipeline.errors import VpevalError
from pipeline.fileio import write_json, write_lines, write_text

FORMAT_VERSION = 1
MARKER = "synthetic.json"
DEFAULT_SUBSETS = MappingProxyType({
    "train-synth": MappingProxyType({"female": 20, "male": 20, "utterances": 30}),
    "dev-synth": MappingProxyType({"female": 8, "male": 8, "utterances": 16}),
    "test-synth": MappingProxyType({"female": 8, "male": 8, "utterances": 16}),
})
SUBSET_KEYS = ("female", "male", "utterances")

FRAME_MS = 5  # parameter frame period
FILTER_STEP = 2  # parameter frames per filter update (10 ms)
FORMANT_BANDWIDTHS = (70.0, 100.0, 130.0, 220.0, 300.0, 400.0, 500.0)
HIGH_FORMANTS = (3300.0, 4300.0, 5400.0, 6500.0)  # male reference F4..F7, fixed per speaker


@dataclass(frozen=True)
class Phone:
    """One entry of the shared segment inventory.

    `formants` holds male reference targets (F1, F2, F3) in Hz, two for a diphthong;
    `voicing` the voiced source level; `frication` (centre Hz, bandwidth Hz, level) of the
    noise source (the burst, for a stop); `aspiration` the level of noise through the tract.
    """

    label: str
    kind: str  # vowel | nasal | liquid | fricative | stop | aspirate | silence
    spelling: str
    formants: tuple
    voicing: float = 0.0
    frication: tuple = ()
    aspiration: float = 0.0


LABIAL, ALVEOLAR, POSTALVEOLAR, VELAR = (300, 900, 2200), (300, 1700, 2600), (300, 1900, 2500), (300, 1800, 2300)
NEUTRAL = (500, 1500, 2500)
PHONES = (
    # vowels: Hillenbrand et al. (1995) men's averages; diphthongs glide between two targets
    Phone("IY", "vowel", "EE", ((342, 2322, 3000),), 1.0),
    Phone("IH", "vowel", "I", ((427, 2034, 2684),), 1.0),
    Phone("EY", "vowel", "AY", ((476, 2089, 2691), (360, 2250, 2900)), 1.0),
    Phone("EH", "vowel", "E", ((580, 1799, 2605),), 1.0),
    Phone("AE", "vowel", "A", ((588, 1952, 2601),), 1.0),
    Phone("AA", "vowel", "O", ((768, 1333, 2522),), 1.0),
    Phone("AO", "vowel", "AW", ((652, 997, 2538),), 1.0),
    Phone("OW", "vowel", "OA", ((497, 910, 2459), (400, 850, 2350)), 1.0),
    Phone("UH", "vowel", "OU", ((469, 1122, 2434),), 1.0),
    Phone("UW", "vowel", "OO", ((378, 997, 2343),), 1.0),
    Phone("AH", "vowel", "U", ((623, 1200, 2550),), 1.0),
    Phone("ER", "vowel", "ER", ((474, 1379, 1710),), 1.0),
    Phone("AY", "vowel", "IGH", ((768, 1333, 2522), (420, 2000, 2600)), 1.0),
    Phone("AW", "vowel", "OW", ((768, 1333, 2522), (450, 1000, 2400)), 1.0),
    Phone("OY", "vowel", "OY", ((560, 900, 2500), (420, 1900, 2600)), 1.0),
    # sonorant consonants
    Phone("M", "nasal", "M", ((250, 1100, 2200),), 0.35),
    Phone("N", "nasal", "N", ((250, 1600, 2500),), 0.35),
    Phone("L", "liquid", "L", ((360, 1300, 2700),), 0.7),
    Phone("R", "liquid", "R", ((330, 1060, 1380),), 0.7),
    Phone("W", "liquid", "W", ((290, 610, 2150),), 0.7),
    Phone("Y", "liquid", "Y", ((260, 2070, 3020),), 0.7),
    # fricatives: noise shaped by a resonance; voiced ones add the glottal source
    Phone("F", "fricative", "F", (LABIAL,), 0.0, (4000, 6000, 0.25)),
    Phone("TH", "fricative", "TH", (ALVEOLAR,), 0.0, (5000, 5000, 0.15)),
    Phone("S", "fricative", "S", (ALVEOLAR,), 0.0, (5500, 1800, 0.9)),
    Phone("SH", "fricative", "SH", (POSTALVEOLAR,), 0.0, (3000, 1400, 2.0)),
    Phone("V", "fricative", "V", (LABIAL,), 0.35, (4000, 6000, 0.14)),
    Phone("Z", "fricative", "Z", (ALVEOLAR,), 0.35, (5500, 1800, 0.5)),
    Phone("HH", "aspirate", "H", (NEUTRAL,), 0.0, (), 0.3),
    # stops: closure (voice bar when voiced), burst, aspiration when voiceless
    Phone("P", "stop", "P", (LABIAL,), 0.0, (1000, 2000, 0.8), 0.4),
    Phone("T", "stop", "T", (ALVEOLAR,), 0.0, (4000, 2500, 1.0), 0.4),
    Phone("K", "stop", "K", (VELAR,), 0.0, (2000, 1200, 1.0), 0.4),
    Phone("B", "stop", "B", (LABIAL,), 0.1, (1000, 2000, 0.5)),
    Phone("D", "stop", "D", (ALVEOLAR,), 0.1, (4000, 2500, 0.6)),
    Phone("G", "stop", "G", (VELAR,), 0.1, (2000, 1200, 0.6)),
)
SILENCE = Phone("SIL", "silence", "", (NEUTRAL,))
VOWELS = tuple(p for p in PHONES if p.kind == "vowel")
ONSETS = tuple(p for p in PHONES if p.kind != "vowel")
CODAS = tuple(p for p in PHONES if p.kind in ("nasal", "fricative", "stop") or p.label in ("L", "R"))
CLUSTER_SECONDS = tuple(p for p in PHONES if p.label in ("L", "R", "W"))
CLUSTER_FIRSTS = tuple(p for p in PHONES if p.kind == "stop" or p.label in ("F", "S"))
DURATION_MS = MappingProxyType({  # (low, high) of a uniform draw, before the tempo factor
    "vowel": (55, 110), "nasal": (45, 85), "liquid": (40, 80), "fricative": (70, 135),
    "aspirate": (45, 80), "silence": (80, 250),
})
STOP_MS = MappingProxyType({"closure": (40, 80), "burst": (8, 14), "aspiration": (25, 55)})


@dataclass(frozen=True)
class Voice:
    """A speaker's source and vocal-tract properties (everything that identifies them)."""

    gender: str
    f0_hz: float
    f0_range_st: float
    formant_scale: tuple  # F1..F7 multipliers: vocal tract length times speaker offsets
    vowel_offsets: tuple  # per vowel of VOWELS, (F1, F2, F3) multipliers (articulatory habits)
    bandwidth_scale: float
    tilt: float  # one-pole low-pass coefficient on the glottal source
    open_quotient: float
    speed_quotient: float
    breathiness: float
    jitter: float
    shimmer: float
    tempo: float  # duration multiplier


@dataclass(frozen=True)
class Session:
    """A chapter's recording conditions and the speaker's state that day."""

    eq_db: tuple  # cosine coefficients of a smooth EQ curve over log frequency
    highpass_hz: float
    snr_db: float
    level_dbfs: float
    f0_shift_st: float
    formant_shift: float


@dataclass(frozen=True)
class Segment:
    """One phone of an utterance plan, in milliseconds from the start."""

    phone: Phone
    start_ms: int
    end_ms: int
    stressed: bool = False
    parts_ms: tuple = ()  # stops: (closure, burst, aspiration) durations


@dataclass(frozen=True)
class SpeakerTask:
    """Everything a worker needs to synthesise one speaker's chapters."""

    folder: str
    subset: str
    speaker: int
    gender: str
    chapters: tuple  # (chapter id, number of utterances) pairs
    seed: int
    sample_rate: int
    duration: tuple


def draw_voice(rng: np.random.Generator, gender: str) -> Voice:
    """Draw a speaker; female and male differ in F0 (about an octave) and vocal tract length."""
    female = gender == "f"
    vtl_scale = (1.17 if female else 1.0) * np.exp(rng.normal(0.0, 0.07))
    formant_offsets = np.exp(rng.normal(0.0, [0.07, 0.06, 0.05, 0.05, 0.05, 0.05, 0.05]))
    return Voice(
        gender=gender,
        f0_hz=float((205.0 if female else 115.0) * np.exp(rng.normal(0.0, 0.13))),
        f0_range_st=float(rng.uniform(1.5, 4.5)),
        formant_scale=tuple(float(x) for x in vtl_scale * formant_offsets),
        vowel_offsets=tuple(tuple(float(x) for x in np.exp(rng.normal(0.0, 0.035, 3))) for _ in VOWELS),
        bandwidth_scale=float(np.exp(rng.normal(0.0, 0.2))),
        tilt=float(rng.uniform(0.0, 0.5)),
        open_quotient=float(rng.uniform(0.45, 0.8)),
        speed_quotient=float(rng.uniform(1.5, 3.5)),
        breathiness=float(rng.uniform(0.02, 0.25 if female else 0.15)),
        jitter=float(rng.uniform(0.002, 0.015)),
        shimmer=float(rng.uniform(0.02, 0.10)),
        tempo=float(np.exp(rng.normal(0.0, 0.08))),
    )


def speaker_voice(seed: int, speaker: int, gender: str) -> Voice:
    """The voice of speaker `speaker` in the corpus generated with `seed`."""
    return draw_voice(np.random.default_rng([seed, 1, speaker]), gender)


def draw_session(rng: np.random.Generator) -> Session:
    """Draw a chapter's mild channel and session variation."""
    return Session(
        eq_db=tuple(float(x) for x in rng.normal(0.0, 1.0, 3)),
        highpass_hz=float(rng.uniform(40.0, 150.0)),
        snr_db=float(rng.uniform(35.0, 50.0)),
        level_dbfs=float(rng.uniform(-28.0, -20.0)),
        f0_shift_st=float(rng.normal(0.0, 0.5)),
        formant_shift=float(np.exp(rng.normal(0.0, 0.01))),
    )


def plan_utterance(rng: np.random.Generator, voice: Voice, total_ms: int) -> tuple[list[Segment], list[str]]:
    """Draw words (syllables of phones) filling `total_ms`; return the segments and the words."""
    tempo = voice.tempo * np.exp(rng.normal(0.0, 0.07))
    lead, trail = rng.uniform(*DURATION_MS["silence"]), rng.uniform(120.0, 300.0)
    silence_share = min(1.0, 0.4 * total_ms / (lead + trail))  # short utterances: shorter silences
    lead, trail = lead * silence_share, trail * silence_share
    budget = total_ms - lead - trail
    words: list[list[tuple]] = []  # per word: (phone, duration, stressed, stop parts)
    spoken = 0.0
    while spoken < budget:
        word = _draw_word(rng, tempo)
        if rng.random() < 0.12 and words:
            word.insert(0, (SILENCE, rng.uniform(80.0, 250.0), False, ()))
        length = sum(item[1] for item in word)
        if words and spoken + length / 2 > budget:
            break
        words.append(word)
        spoken += length
    scale = budget / spoken
    items = [(SILENCE, lead, False, ())]
    items += [(p, d * scale, s, tuple(x * scale for x in parts)) for word in words for p, d, s, parts in word]
    items.append((SILENCE, trail, False, ()))
    bounds = np.round(np.cumsum([0.0] + [item[1] for item in items])).astype(int)
    bounds[-1] = total_ms
    segments = [
        Segment(p, int(a), int(b), s, _round_parts(parts, int(b - a)))
        for (p, _, s, parts), a, b in zip(items, bounds[:-1], bounds[1:])
    ]
    text = ["".join(p.spelling for p, *_ in word) for word in words]
    return segments, text


def _round_parts(parts: tuple, total: int) -> tuple:
    """Whole milliseconds for the parts of a stop, summing to `total`."""
    if not parts:
        return ()
    edges = np.round(np.cumsum(parts) * total / sum(parts)).astype(int)
    return tuple(int(x) for x in np.diff(np.concatenate([[0], edges])))


def _draw_word(rng: np.random.Generator, tempo: float) -> list[tuple]:
    n_syllables = int(rng.choice([1, 2, 3], p=[0.5, 0.35, 0.15]))
    stressed = int(rng.integers(n_syllables))
    word = []
    for index in range(n_syllables):
        shape = rng.random()
        onset = [] if shape < 0.1 else [ONSETS[rng.integers(len(ONSETS))]]
        if shape > 0.9:
            onset = [CLUSTER_FIRSTS[rng.integers(len(CLUSTER_FIRSTS))], CLUSTER_SECONDS[rng.integers(len(CLUSTER_SECONDS))]]
        coda = [CODAS[rng.integers(len(CODAS))]] if rng.random() < 0.4 else []
        vowel = VOWELS[rng.integers(len(VOWELS))]
        for phone in onset + [vowel] + coda:
            word.append(_timed(rng, phone, tempo, index == stressed))
    return word


def _timed(rng: np.random.Generator, phone: Phone, tempo: float, stressed: bool) -> tuple:
    if phone.kind == "stop":
        parts = [rng.uniform(*STOP_MS["closure"]), rng.uniform(*STOP_MS["burst"])]
        parts.append(rng.uniform(*STOP_MS["aspiration"]) if phone.aspiration else 0.0)
        parts = tuple(x * tempo for x in parts)
        return phone, sum(parts), stressed, parts
    duration = rng.uniform(*DURATION_MS[phone.kind])
    if phone.kind == "vowel":
        duration *= (1.6 if stressed else 1.0) * (1.3 if len(phone.formants) > 1 else 1.0)
    return phone, duration * tempo, stressed, ()


def _smooth(x: np.ndarray, frames: int) -> np.ndarray:
    """Hann-window moving average along axis 0, edges extended."""
    if frames <= 1:
        return x
    kernel = np.hanning(frames + 2)[1:-1]
    kernel /= kernel.sum()
    pad = frames // 2
    padded = np.pad(x, [(pad, frames - 1 - pad)] + [(0, 0)] * (x.ndim - 1), mode="edge")
    windows = np.lib.stride_tricks.sliding_window_view(padded, frames, axis=0)
    return windows @ kernel


def frame_tracks(segments: list[Segment], voice: Voice, n_frames: int) -> dict[str, np.ndarray]:
    """Per-frame synthesis parameters: source levels, formant targets, frication filter."""
    voicing, aspiration, frication = (np.zeros(n_frames) for _ in range(3))
    formants = np.tile(np.array(NEUTRAL, dtype=float), (n_frames, 1))
    fric_centre, fric_bandwidth = np.full(n_frames, 4000.0), np.full(n_frames, 4000.0)
    stress = np.zeros(n_frames, dtype=bool)
    vowel_index = {p.label: i for i, p in enumerate(VOWELS)}
    for position, seg in enumerate(segments):
        a, b = -(-seg.start_ms // FRAME_MS), -(-seg.end_ms // FRAME_MS)
        if b <= a:
            continue
        phone = seg.phone
        targets = np.array(phone.formants, dtype=float)
        if phone.kind == "vowel":
            targets = targets * np.array(voice.vowel_offsets[vowel_index[phone.label]])
        if phone.kind == "aspirate" and position + 1 < len(segments):
            targets = np.array(segments[position + 1].phone.formants[:1], dtype=float)
        weights = np.linspace(0.0, 1.0, b - a)[:, None]
        formants[a:b] = targets[0] * (1 - weights) + targets[-1] * weights
        level = (1.0 if seg.stressed else 0.75) if phone.kind == "vowel" else 1.0
        if phone.kind == "stop":
            closure, burst, _ = (round(x / FRAME_MS) for x in seg.parts_ms)
            burst = max(burst, 1)
            voicing[a:a + closure] = phone.voicing
            frication[a + closure:a + closure + burst] = phone.frication[2]
            aspiration[a + closure + burst:b] = phone.aspiration
        else:
            voicing[a:b] = phone.voicing * level
            aspiration[a:b] = phone.aspiration
            frication[a:b] = phone.frication[2] if phone.frication else 0.0
        if phone.frication:
            fric_centre[a:b] = phone.frication[0] * np.sqrt(voice.formant_scale[2])
            fric_bandwidth[a:b] = phone.frication[1]
        stress[a:b] = seg.stressed and phone.kind == "vowel"
    return {
        "voicing": _smooth(voicing, 3),
        "aspiration": _smooth(aspiration, 3),
        "frication": _smooth(frication, 2),
        "formants": np.exp(_smooth(np.log(formants), 7)),
        "fric_centre": fric_centre,
        "fric_bandwidth": fric_bandwidth,
        "stress": stress,
    }


def f0_contour(rng: np.random.Generator, voice: Voice, session: Session, tracks: dict) -> np.ndarray:
    """Per-frame F0 in Hz: declination, pitch accents on stressed vowels, a final fall or rise."""
    n = len(tracks["voicing"])
    t = np.arange(n) / n
    semitones = session.f0_shift_st + rng.normal(0.0, 0.7)
    semitones = semitones + rng.uniform(0.5, 1.2) * voice.f0_range_st * (0.5 - t)
    frames = np.arange(n)
    stressed = np.flatnonzero(np.diff(tracks["stress"].astype(int)) == 1) + 1
    for start in stressed:
        if rng.random() < 0.6:  # a pitch accent peaking 30 ms into the vowel
            spread = rng.uniform(5.0, 12.5)
            height = rng.uniform(0.3, 1.0) * voice.f0_range_st * rng.choice([1.0, -0.4], p=[0.85, 0.15])
            semitones = semitones + height * np.exp(-0.5 * ((frames - start - 6) / spread) ** 2)
    final = np.clip((frames - (n - 80)) / 80.0, 0.0, 1.0)  # over the last 400 ms
    semitones = semitones + final * rng.choice([-1.0, 1.5], p=[0.85, 0.15]) * rng.uniform(0.5, 2.5)
    semitones = semitones + _smooth(rng.normal(0.0, 1.0, n), 15) * 1.2
    return np.clip(voice.f0_hz * 2.0 ** (semitones / 12.0), 50.0, 500.0)


def glottal_source(rng: np.random.Generator, voice: Voice, f0: np.ndarray, sample_rate: int) -> tuple[np.ndarray, np.ndarray]:
    """Rosenberg flow derivative with jitter and shimmer, and the open-phase indicator.

    Jitter scales each period's F0 (by at least 0.1, so the phase always advances); jittered
    periods can end later than the unjittered ones, so shimmer gets one draw per period of the
    jittered phase (the first `n_periods` draws as before, then one per extra period).
    """
    phase = np.cumsum(f0 / sample_rate)
    n_periods = int(phase[-1]) + 2
    jittered = f0 * np.maximum(1.0 + rng.normal(0.0, voice.jitter, n_periods), 0.1)[phase.astype(int)]
    phase = np.cumsum(jittered / sample_rate)
    period, position = phase.astype(int), phase % 1.0
    shimmer = rng.normal(0.0, voice.shimmer, n_periods)
    if period[-1] >= n_periods:
        shimmer = np.concatenate([shimmer, rng.normal(0.0, voice.shimmer, period[-1] + 1 - n_periods)])
    rise = voice.open_quotient * voice.speed_quotient / (1.0 + voice.speed_quotient)
    fall = voice.open_quotient - rise
    flow = np.where(position < rise, 0.5 * (1.0 - np.cos(np.pi * position / rise)), 0.0)
    closing = (position >= rise) & (position < voice.open_quotient)
    flow[closing] = np.cos(0.5 * np.pi * (position[closing] - rise) / fall)
    derivative = np.diff(flow, prepend=0.0) * np.exp(shimmer)[period]
    derivative = lfilter([1.0 - voice.tilt], [1.0, -voice.tilt], derivative)
    return derivative / (np.std(derivative) + 1e-12), (position < voice.open_quotient).astype(float)


def _all_pole(freqs: np.ndarray, bandwidths: np.ndarray, sample_rate: int, nfft: int) -> np.ndarray:
    """Frequency responses (frames x bins) of cascaded two-pole resonators, unit gain at DC.

    `freqs` and `bandwidths` are (frames, resonators) in Hz; a resonance at or above
    0.45 x `sample_rate` is left out. The denominator polynomial is evaluated with one FFT.
    """
    audible = freqs < 0.45 * sample_rate
    radius = np.where(audible, np.exp(-np.pi * bandwidths / sample_rate), 0.0)
    cosine = np.where(audible, -2.0 * radius * np.cos(2.0 * np.pi * freqs / sample_rate), 0.0)
    n_frames, n_resonators = freqs.shape
    polynomial = np.zeros((n_frames, 2 * n_resonators + 1))
    polynomial[:, 0] = 1.0
    for k in range(n_resonators):
        previous = polynomial[:, :2 * k + 1].copy()
        polynomial[:, 1:2 * k + 2] += cosine[:, k:k + 1] * previous
        polynomial[:, 2:2 * k + 3] += (radius[:, k:k + 1] ** 2) * previous
    return polynomial.sum(axis=1, keepdims=True) / np.fft.rfft(polynomial, nfft)


def channel_response(session: Session, freqs: np.ndarray, sample_rate: int) -> np.ndarray:
    """Magnitude response of a chapter's channel: smooth EQ times a one-pole high-pass."""
    lowest, nyquist = 100.0, sample_rate / 2.0
    position = np.clip(np.log(np.maximum(freqs, lowest) / lowest) / np.log(nyquist / lowest), 0.0, 1.0)
    gain_db = sum(c * np.cos(np.pi * (k + 1) * position) for k, c in enumerate(session.eq_db))
    highpass = freqs / np.sqrt(freqs ** 2 + session.highpass_hz ** 2)
    return 10.0 ** (gain_db / 20.0) * highpass


def overlap_add_filter(parts: list, hop: int, nfft: int, n_samples: int) -> np.ndarray:
    """Filter sources with time-varying responses and sum them (weighted overlap-add).

    `parts` holds (source, frames, responses): filter frame m is the source under a periodic
    Hann window of 2 x `hop` samples centred on sample m x `hop` (the windows sum to one);
    only the listed `frames` are computed, each multiplied by its row of `responses`.
    """
    window = np.hanning(2 * hop + 1)[:-1]
    n_frames = n_samples // hop + 1
    spectrum = np.zeros((n_frames, nfft // 2 + 1), dtype=complex)
    for source, frames, responses in parts:
        padded = np.pad(source, (hop, n_frames * hop - n_samples))
        index = (frames * hop)[:, None] + np.arange(2 * hop)[None, :]
        spectrum[frames] += np.fft.rfft(padded[index] * window, nfft) * responses
    blocks = np.fft.irfft(spectrum, nfft).reshape(n_frames, nfft // hop, hop)
    out = np.zeros((n_frames + nfft // hop, hop))
    for b in range(nfft // hop):
        out[b:b + n_frames] += blocks[:, b]
    return out.reshape(-1)[hop:hop + n_samples]


def _active(track: np.ndarray, step: int, n_frames: int) -> np.ndarray:
    """Filter frames (every `step` track frames) whose window touches a non-zero track value."""
    padded = np.pad(track, step)
    reach = np.max([padded[k:k + len(track)] for k in range(2 * step + 1)], axis=0)
    return np.flatnonzero(reach[::step][:n_frames] > 0)


def synthesise(rng: np.random.Generator, voice: Voice, session: Session, segments: list[Segment], sample_rate: int) -> np.ndarray:
    """Render an utterance plan to a waveform (float32, peak below 1)."""
    hop = round(sample_rate * FRAME_MS / 1000)
    n_samples = round(segments[-1].end_ms * sample_rate / 1000)
    n_frames = n_samples // hop + 1
    tracks = frame_tracks(segments, voice, n_frames)
    frame_times = np.arange(n_frames) * hop
    samples = np.arange(n_samples)
    f0 = f0_contour(rng, voice, session, tracks)
    pulses, open_phase = glottal_source(rng, voice, np.interp(samples, frame_times, f0), sample_rate)
    voicing = np.interp(samples, frame_times, tracks["voicing"])
    aspiration = np.interp(samples, frame_times, tracks["aspiration"])
    frication = np.interp(samples, frame_times, tracks["frication"])
    breath = voice.breathiness * voicing * (0.3 + 0.7 * open_phase)
    through_tract = pulses * voicing + rng.normal(0.0, 1.0, n_samples) * (breath + aspiration)
    fricated = rng.normal(0.0, 1.0, n_samples) * frication

    # filters change every FILTER_STEP parameter frames, over windows of twice that
    filter_hop, filter_frames = FILTER_STEP * hop, (n_samples // (FILTER_STEP * hop)) + 1
    nfft = 4 * filter_hop
    freqs = np.fft.rfftfreq(nfft, 1.0 / sample_rate)
    channel = channel_response(session, freqs, sample_rate)[None, :]
    voiced_frames = _active(tracks["voicing"] + tracks["aspiration"], FILTER_STEP, filter_frames)
    scale = np.array(voice.formant_scale) * session.formant_shift
    low = tracks["formants"][::FILTER_STEP][voiced_frames] * scale[:3]
    formants = np.concatenate([low, np.tile(np.array(HIGH_FORMANTS) * scale[3:], (len(low), 1))], axis=1)
    bandwidths = np.tile(np.array(FORMANT_BANDWIDTHS) * voice.bandwidth_scale, (len(low), 1))
    tract = _all_pole(formants, bandwidths, sample_rate, nfft) * channel

    fric_frames = _active(tracks["frication"], FILTER_STEP, filter_frames)
    centre = np.minimum(tracks["fric_centre"][::FILTER_STEP][fric_frames], 0.42 * sample_rate)[:, None]
    fric_bandwidth = tracks["fric_bandwidth"][::FILTER_STEP][fric_frames][:, None]
    fric = _all_pole(centre, fric_bandwidth, sample_rate, nfft)
    at_centre = np.exp(-2j * np.pi * centre / sample_rate)
    radius = np.exp(-np.pi * fric_bandwidth / sample_rate)
    cosine = -2.0 * radius * np.cos(2.0 * np.pi * centre / sample_rate)
    peak = np.abs((1.0 + cosine + radius ** 2) / (1.0 + cosine * at_centre + radius ** 2 * at_centre ** 2))
    highpass = 0.5 * (1.0 - np.exp(-2j * np.pi * freqs / sample_rate))[None, :]
    fric = fric * (highpass / peak) * channel

    parts = [(through_tract, voiced_frames, tract), (fricated, fric_frames, fric)]
    wav = overlap_add_filter(parts, filter_hop, nfft, n_samples)
    speech_rms = np.sqrt(np.mean(wav ** 2)) + 1e-12
    wav = wav + rng.normal(0.0, speech_rms * 10.0 ** (-session.snr_db / 20.0), n_samples)
    level = 10.0 ** ((session.level_dbfs + rng.normal(0.0, 1.0)) / 20.0)
    wav = wav * level / np.sqrt(np.mean(wav ** 2))
    peak = np.max(np.abs(wav))
    if peak > 0.95:
        wav *= 0.95 / peak
    return wav.astype(np.float32)


def synthesise_speaker(task: SpeakerTask) -> tuple[int, float]:
    """Write one speaker's chapters (audio, transcripts, alignments); return (speaker, seconds).

    Random streams are keyed (seed, role, speaker[, chapter, utterance]), so a speaker's audio
    depends on nothing else: not on the other speakers, nor on the order or number of workers.
    """
    voice = speaker_voice(task.seed, task.speaker, task.gender)
    total_seconds = 0.0
    low_ms, high_ms = (round(1000 * x) for x in task.duration)
    for chapter_index, (chapter, n_utterances) in enumerate(task.chapters):
        session = draw_session(np.random.default_rng([task.seed, 2, task.speaker, chapter_index]))
        folder = Path(task.folder) / task.subset / str(task.speaker) / str(chapter)
        transcripts, alignments = [], []
        for utt_index in range(n_utterances):
            rng = np.random.default_rng([task.seed, 3, task.speaker, chapter_index, utt_index])
            total_ms = int(rng.integers(low_ms, high_ms + 1))
            segments, words = plan_utterance(rng, voice, total_ms)
            utt_id = f"{task.speaker}-{chapter}-{utt_index:04d}"
            write_audio(folder / f"{utt_id}.flac", synthesise(rng, voice, session, segments, task.sample_rate), task.sample_rate)
            transcripts.append(f"{utt_id} {' '.join(words)}")
            alignments += [f"{utt_id} {s.start_ms / 1000:.3f} {s.end_ms / 1000:.3f} {s.phone.label}" for s in segments]
            total_seconds += total_ms / 1000
        write_lines(folder / f"{task.speaker}-{chapter}.trans.txt", transcripts)
        write_lines(folder / f"{task.speaker}-{chapter}.align.txt", alignments)
    return task.speaker, total_seconds


def _options(seed: int, sample_rate: int, subsets: Mapping, duration, chapters_per_speaker: int) -> dict:
    """Check the generation options and return them in the form stored in the marker file."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise VpevalError(f"synthetic corpus: seed must be a non-negative integer, got {seed!r}")
    if isinstance(sample_rate, bool) or not isinstance(sample_rate, int) or sample_rate < 8000:
        raise VpevalError(f"synthetic corpus: sample_rate must be an integer >= 8000, got {sample_rate!r}")
    low, high = (float(x) for x in duration)
    if not 0.5 <= low <= high:
        raise VpevalError(f"synthetic corpus: duration must be (min, max) seconds with 0.5 <= min <= max, got {tuple(duration)}")
    if isinstance(chapters_per_speaker, bool) or not isinstance(chapters_per_speaker, int) or chapters_per_speaker < 1:
        raise VpevalError(f"synthetic corpus: chapters_per_speaker must be a positive integer, got {chapters_per_speaker!r}")
    if not subsets:
        raise VpevalError("synthetic corpus: subsets is empty")
    checked = {}
    for name, sizes in subsets.items():
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", str(name)):
            raise VpevalError(f"synthetic corpus: subset name {name!r} is not a plain folder name")
        if set(sizes) != set(SUBSET_KEYS):
            raise VpevalError(f"synthetic corpus: subsets.{name} needs exactly the keys {', '.join(SUBSET_KEYS)}, got {', '.join(sorted(sizes))}")
        values = {key: sizes[key] for key in SUBSET_KEYS}
        if any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in values.values()):
            raise VpevalError(f"synthetic corpus: subsets.{name} sizes must be non-negative integers, got {values}")
        if values["female"] + values["male"] == 0:
            raise VpevalError(f"synthetic corpus: subsets.{name} has no speakers")
        if values["utterances"] < chapters_per_speaker:
            raise VpevalError(f"synthetic corpus: subsets.{name}.utterances ({values['utterances']}) is below chapters_per_speaker ({chapters_per_speaker})")
        checked[str(name)] = values
    return {"format_version": FORMAT_VERSION, "seed": seed, "sample_rate": sample_rate, "subsets": checked,
            "duration": [low, high], "chapters_per_speaker": chapters_per_speaker}


def plan_speakers(options: dict, folder: Path) -> list[SpeakerTask]:
    """Draw disjoint numeric speaker ids, chapter ids and genders for every subset."""
    rng = np.random.default_rng([options["seed"], 0])
    sizes = [(name, s["female"], s["male"], s["utterances"]) for name, s in options["subsets"].items()]
    n_speakers = sum(f + m for _, f, m, _ in sizes)
    n_chapters = n_speakers * options["chapters_per_speaker"]
    speaker_ids = rng.choice(np.arange(10, max(10_000, 10 * n_speakers)), n_speakers, replace=False)
    chapter_ids = rng.choice(np.arange(100, max(200_000, 10 * n_chapters)), n_chapters, replace=False)
    tasks, next_speaker = [], 0
    for name, female, male, utterances in sizes:
        per_chapter = np.diff(np.linspace(0, utterances, options["chapters_per_speaker"] + 1).round().astype(int))
        for gender in ["f"] * female + ["m"] * male:
            chapters = chapter_ids[next_speaker * len(per_chapter):(next_speaker + 1) * len(per_chapter)]
            tasks.append(SpeakerTask(
                folder=str(folder), subset=name, speaker=int(speaker_ids[next_speaker]), gender=gender,
                chapters=tuple((int(c), int(n)) for c, n in zip(chapters, per_chapter)),
                seed=options["seed"], sample_rate=options["sample_rate"], duration=tuple(options["duration"]),
            ))
            next_speaker += 1
    return tasks


def speakers_table(tasks: list[SpeakerTask], seconds: dict[int, float]) -> str:
    """SPEAKERS.TXT in LibriSpeech's format."""
    lines = [
        "; Speakers of the vpeval synthetic corpus (pipeline/data/synthetic.py).",
        "; SEX is the synthetic voice's gender; MINUTES is the speaker's total audio.",
        ";ID  |SEX| SUBSET           |MINUTES| NAME",
    ]
    for task in sorted(tasks, key=lambda t: t.speaker):
        lines.append(f"{task.speaker:<5}| {task.gender.upper()} | {task.subset:<17}| {seconds[task.speaker] / 60:5.2f} | Synthetic {task.speaker}")
    return "\n".join(lines) + "\n"


def _existing_corpus(root: Path, options: dict) -> bool:
    """True when `root` holds a complete corpus with these options; raise if it holds anything else."""
    if not root.exists():
        return False
    marker = root / MARKER
    if marker.is_file():
        try:
            stored = json.loads(marker.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise VpevalError(f"{marker}: unreadable marker of a synthetic corpus ({exc})") from None
        if stored == options:
            return True
        raise VpevalError(f"{root}: holds a synthetic corpus generated with other options ({marker}); remove it or choose another root")
    if root.is_dir() and not any(root.iterdir()):
        root.rmdir()
        return False
    raise VpevalError(f"{root}: exists but is not a complete synthetic corpus (no {MARKER}); remove it or choose another root")


def generate_corpus(
    root: str | Path,
    *,
    seed: int = 0,
    sample_rate: int = 16000,
    subsets: Mapping | None = None,
    duration: tuple[float, float] = (2.0, 5.0),
    chapters_per_speaker: int = 2,
    workers: int | None = None,
    progress: bool = True,
) -> Path:
    """Generate the corpus at `root` (or return at once if it is already there); return `root`.

    `subsets` maps a subset name to {"female": n, "male": n, "utterances": n per speaker}
    (default DEFAULT_SUBSETS). The output depends only on the options, never on `workers`
    (default: one process per CPU core). The corpus is built in a temporary sibling folder
    renamed to `root` at the end, so `root` never holds a partial corpus.
    """
    root = Path(root)
    options = _options(seed, sample_rate, DEFAULT_SUBSETS if subsets is None else subsets, duration, chapters_per_speaker)
    if _existing_corpus(root, options):
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(root)
    staging = root.parent / f"{staging_prefix(root)}{os.getpid()}-{secrets.token_hex(4)}"
    staging.mkdir()  # not tempfile.mkdtemp, whose 0700 would hide a shared VPEVAL_DATA's corpus from other users
    try:
        tasks = plan_speakers(options, staging)
        n_workers = max(1, min(workers or len(os.sched_getaffinity(0)), len(tasks)))
        seconds = {}
        with tqdm(total=len(tasks), desc=f"synthetic corpus {root.name}", unit="spk", disable=not progress) as bar:
            with _mapper(n_workers) as mapper:
                for speaker, total in mapper(synthesise_speaker, tasks):
                    seconds[speaker] = total
                    bar.update()
        write_text(staging / "SPEAKERS.TXT", speakers_table(tasks, seconds))
        write_json(staging / MARKER, options)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    try:
        os.rename(staging, root)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        if not _existing_corpus(root, options):  # another process may have finished first
            raise
    return root


def staging_prefix(root: Path) -> str:
    """Name prefix of the folders corpora are built in: `.<name>.partial-<host>-<pid>-<random>`."""
    return f".{root.name}.partial-{socket.gethostname()}-"


def remove_stale_staging(root: Path) -> None:
    """Delete the staging folders that a killed generation on this host left next to `root`
    (their process is gone); another host's, or a live process's, are left alone."""
    prefix = staging_prefix(root)
    for folder in root.parent.glob(f"{glob.escape(prefix)}*"):
        pid = folder.name[len(prefix):].split("-", 1)[0]
        if pid.isdigit() and not _process_alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        return True
    return True


@contextmanager
def _mapper(n_workers: int):
    """An unordered map over a pool of `n_workers` spawned processes, or in-process for one."""
    if n_workers == 1:
        yield map
        return
    # workers ignore Ctrl-C: the main process stops them and prints the one line
    with multiprocessing.get_context("spawn").Pool(n_workers, initializer=signal.signal,
                                                   initargs=(signal.SIGINT, signal.SIG_IGN)) as pool:
        yield pool.imap_unordered
