"""Source-filter speech synthesis from per-frame parameter tracks.

A Rosenberg glottal pulse train (with jitter, shimmer and breathiness) and noise sources,
shaped by a cascade of formant resonators updated every 10 ms from 5 ms parameter tracks, an
F0 contour with declination and pitch accents, and a chapter's channel (EQ, high-pass, noise
floor, level). What is said comes in as tracks (`synthesise`); the speaker as a `Voice`, the
recording as a `Session`. Used by the built-in synthetic corpus (`pipeline.data.synthetic`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.signal import lfilter

FRAME_MS = 5  # parameter frame period
FILTER_STEP = 2  # parameter frames per filter update (10 ms)
FORMANT_BANDWIDTHS = (70.0, 100.0, 130.0, 220.0, 300.0, 400.0, 500.0)
HIGH_FORMANTS = (3300.0, 4300.0, 5400.0, 6500.0)  # male reference F4..F7, fixed per speaker


@dataclass(frozen=True)
class Voice:
    """A speaker's source and vocal-tract properties (everything that identifies them)."""

    gender: str
    f0_hz: float
    f0_range_st: float
    formant_scale: tuple  # F1..F7 multipliers: vocal tract length times speaker offsets
    vowel_offsets: tuple  # per vowel of the planner's inventory, (F1, F2, F3) multipliers (articulatory habits)
    bandwidth_scale: float
    tilt: float  # one-pole low-pass coefficient on the glottal source
    open_quotient: float
    speed_quotient: float
    breathiness: float
    jitter: float
    shimmer: float
    tempo: float  # duration multiplier (the planner's)


@dataclass(frozen=True)
class Session:
    """A chapter's recording conditions and the speaker's state that day."""

    eq_db: tuple  # cosine coefficients of a smooth EQ curve over log frequency
    highpass_hz: float
    snr_db: float
    level_dbfs: float
    f0_shift_st: float
    formant_shift: float


def smooth(x: np.ndarray, frames: int) -> np.ndarray:
    """Hann-window moving average along axis 0, edges extended."""
    if frames <= 1:
        return x
    kernel = np.hanning(frames + 2)[1:-1]
    kernel /= kernel.sum()
    pad = frames // 2
    padded = np.pad(x, [(pad, frames - 1 - pad)] + [(0, 0)] * (x.ndim - 1), mode="edge")
    windows = np.lib.stride_tricks.sliding_window_view(padded, frames, axis=0)
    return windows @ kernel


def frame_count(n_samples: int, sample_rate: int) -> int:
    """Parameter frames (one every FRAME_MS ms, from sample 0) of a waveform of `n_samples`."""
    return n_samples // round(sample_rate * FRAME_MS / 1000) + 1


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
    semitones = semitones + smooth(rng.normal(0.0, 1.0, n), 15) * 1.2
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


def synthesise(rng: np.random.Generator, voice: Voice, session: Session, tracks: dict[str, np.ndarray],
               n_samples: int, sample_rate: int) -> np.ndarray:
    """Render parameter tracks (`frame_count(n_samples, sample_rate)` frames of FRAME_MS ms) to
    `n_samples` of waveform (float32, peak below 1). `tracks`: the source levels `voicing`,
    `aspiration`, `frication`; `formants` (F1, F2, F3 in Hz, before the voice's scaling);
    `fric_centre` and `fric_bandwidth` (Hz) of the frication filter; `stress` (bool, where F0
    may carry a pitch accent)."""
    hop = round(sample_rate * FRAME_MS / 1000)
    n_frames = n_samples // hop + 1
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
