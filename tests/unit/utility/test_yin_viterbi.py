"""YIN by its Viterbi path (`YinPitch.path`, `utility.pitch_tracker=yin_viterbi`): the path is the
best one (brute force on small cases), YIN's own voiced frames, tones as frame-wise YIN, and on
the built-in synthesiser's female speech, whose true F0 is known, fewer gross errors than YIN
frame by frame."""
from __future__ import annotations

import copy
import itertools
import math

import numpy as np
import pytest
import torch

from pipeline.data.phones import frame_tracks, plan_utterance
from pipeline.data.synthetic import draw_session, speaker_voice
from pipeline.metrics.pitch_correlation import in_range, track
from pipeline.signal.f0 import OCTAVE_JUMP_COST, YinPitch
from pipeline.signal.synthesis import f0_contour, frame_count, synthesise

RATE = 16000
pytestmark = pytest.mark.usefixtures("single_thread")


def harmonic(f0, seconds=1.0, partials=5):
    t = torch.arange(int(seconds * RATE)) / RATE
    return 0.3 * sum(torch.sin(2 * math.pi * f0 * k * t) / k for k in range(1, partials + 1)) / 2


@pytest.mark.parametrize("f0", [80.0, 110.0, 180.0, 260.0, 420.0])
def test_the_path_tracks_harmonic_tones_within_half_a_percent(f0):
    tracked, voiced = YinPitch(f0_min=75.0, f0_max=500.0).path(harmonic(f0)[None])
    inner = slice(3, -3)  # the first and last frames see the zero padding
    assert voiced[0, inner].all()
    assert (tracked[0, inner] / f0 - 1).abs().max() < 0.005


def test_the_path_keeps_yins_voicing_and_respects_lengths():
    tracker = YinPitch()
    speechlike = harmonic(180.0) * (1 + 0.5 * torch.sin(2 * math.pi * 3 * torch.arange(RATE) / RATE))
    speechlike[4000:6000] = 0.01 * torch.randn(2000, generator=torch.Generator().manual_seed(1))
    assert torch.equal(tracker.path(speechlike[None])[1], tracker(speechlike[None])[1])
    noise = 0.1 * torch.randn(1, RATE, generator=torch.Generator().manual_seed(0))
    assert tracker.path(noise)[1].float().mean() < 0.05
    assert not tracker.path(torch.zeros(1, RATE))[1].any()
    batch = torch.stack([harmonic(150.0), torch.cat([harmonic(200.0, 0.5), torch.zeros(RATE // 2)])])
    f0, voiced = tracker.path(batch, torch.tensor([RATE, RATE // 2]))
    assert f0.shape == (2, 100) and not voiced[1, 50:].any() and (f0[~voiced] == 0).all()
    solo, _ = tracker.path(harmonic(200.0, 0.5)[None])
    torch.testing.assert_close(f0[1, :50], solo[0])


def test_a_voiced_frame_without_a_dip_does_not_end_the_path(monkeypatch):
    """A frame YIN calls voiced whose d' has no local minimum in the search range (its minimum at
    the range's edge) has no candidate: it is unvoiced, and the frames after it are tracked."""
    tracker = YinPitch()
    original = tracker._dips

    def without_frame_50(cmnd):
        f0, strength = original(cmnd)
        strength[:, 50] = -math.inf
        return f0, strength

    monkeypatch.setattr(tracker, "_dips", without_frame_50)
    f0, voiced = tracker.path(harmonic(200.0)[None])
    assert not voiced[0, 50] and f0[0, 50] == 0
    assert voiced[0, 51:-3].all() and (f0[0, 51:-3] / 200 - 1).abs().max() < 0.005


def test_viterbi_finds_the_best_path_by_brute_force():
    tracker = YinPitch()
    generator = torch.Generator().manual_seed(3)
    for _ in range(20):
        frames, states = 4, 4
        candidates = 100 + 300 * torch.rand(1, frames, states - 1, generator=generator)
        f0 = torch.cat([torch.zeros(1, frames, 1), candidates], -1)
        strength = torch.rand(1, frames, states, generator=generator)
        strength[0, 1, 2] = -math.inf  # a missing candidate

        def value(path):
            total = sum(float(strength[0, t, s]) for t, s in enumerate(path))
            for t in range(1, frames):
                a, b = float(f0[0, t - 1, path[t - 1]]), float(f0[0, t, path[t]])
                total -= OCTAVE_JUMP_COST * abs(math.log2(a / b)) if a and b else 0.0
            return total

        best = max(itertools.product(range(states), repeat=frames), key=value)
        assert tuple(tracker._viterbi(f0, strength)[0].tolist()) == best


def female_utterances(count):
    """(waveform, true F0 per 5 ms frame, truly voiced) of built-in female speakers, as the
    corpus draws them (benchmarks/bench_f0_trackers.py measures more of them)."""
    for speaker in range(1, count + 1):
        voice, session = speaker_voice(0, speaker, "f"), draw_session(np.random.default_rng([0, 2, speaker, 0]))
        rng = np.random.default_rng([0, 3, speaker, 0, 0])
        segments, _ = plan_utterance(rng, voice, 3000)
        n_samples = round(segments[-1].end_ms * RATE / 1000)
        tracks = frame_tracks(segments, voice, frame_count(n_samples, RATE))
        truth = f0_contour(copy.deepcopy(rng), voice, session, tracks)
        yield synthesise(rng, voice, session, tracks, n_samples, RATE), truth, tracks["voicing"] > 0.5


def test_fewer_gross_errors_than_frame_wise_yin_on_female_speech():
    errors = {"yin_viterbi": [0, 0], "yin": [0, 0]}
    for wave, f0, voiced in female_utterances(6):
        for tracker, counts in errors.items():
            tracked = track(wave.astype(np.float32), RATE, tracker)
            index = np.clip(np.arange(len(tracked)) * 2, 0, len(f0) - 1)  # 10 ms frames on the 5 ms truth
            both = voiced[index] & in_range(tracked)
            counts[0] += int((np.abs(tracked[both] / f0[index][both] - 1) > 0.2).sum())
            counts[1] += int(both.sum())
    path, frame_wise = (errors[t][0] / errors[t][1] for t in ("yin_viterbi", "yin"))
    assert path < 0.02 and path < frame_wise / 2, (path, frame_wise)
