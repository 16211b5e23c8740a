"""McAdams: the properties every anonymiser run relies on (length, the voice changed, seeding,
fixed, random and speaker-level alpha), its config checks and the inputs it refuses."""
import numpy as np
import pytest
import torch

from anonymizers.mcadams import McAdams, compute_device
from pipeline.core.errors import VpevalError
from tests.helpers import waves
from tests.oracles.signals import speech_like

RATE = 16000


@pytest.mark.parametrize("length", [0, 1, 159, 160, 161, 320, 4801])
def test_length_is_preserved(length):
    wave = speech_like(0.4, 4)[:length]
    (output,) = McAdams(alpha=0.8, device="cpu")([wave], ["u"], ["s"], RATE)
    assert output.shape == (length,) and output.dtype == torch.float32


def test_alpha_one_returns_the_input():
    """Periodic Hann overlap-adds to 1 and A(z)/A(z) = 1: only rounding remains (float64
    inside, ~1e-10; the float32 output adds up to 6e-8). Tolerance 1e-6 absolute."""
    inputs = waves((1.0, 5), (0.25, 6))
    outputs = McAdams(alpha=1.0, device="cpu")(inputs, ["a", "b"], ["s", "s"], RATE)
    for wave, output in zip(inputs, outputs):
        assert np.abs(output.numpy() - wave).max() < 1e-6


def test_output_changes_the_voice_and_keeps_the_peak():
    wave = speech_like(1.0, 7)
    (output,) = McAdams(alpha=0.8, device="cpu")([wave], ["u"], ["s"], RATE)
    assert np.linalg.norm(output.numpy() - wave) > 0.2 * np.linalg.norm(wave)
    assert abs(np.abs(output.numpy()).max() - np.abs(wave).max()) < 1e-6


def test_silence_stays_silence():
    (output,) = McAdams(alpha=0.8, device="cpu")([np.zeros(1000, np.float32)], ["u"], ["s"], RATE)
    assert torch.equal(output, torch.zeros(1000))


def test_same_seed_same_output_other_seed_other_alpha():
    inputs = waves((0.5, 8))
    first = McAdams(alpha=[0.5, 0.9], seed=3, device="cpu")(inputs, ["u1"], ["s1"], RATE)[0]
    again = McAdams(alpha=[0.5, 0.9], seed=3, device="cpu")(inputs, ["u1"], ["s1"], RATE)[0]
    other = McAdams(alpha=[0.5, 0.9], seed=4, device="cpu")(inputs, ["u1"], ["s1"], RATE)[0]
    assert torch.equal(first, again)
    assert not torch.allclose(first, other, atol=1e-3)


def test_fixed_alpha_is_the_same_for_every_utterance():
    anonymizer = McAdams(alpha=0.8, device="cpu")
    assert {anonymizer.alpha_for(seed) for seed in range(50)} == {0.8}
    wave = speech_like(0.3, 12)
    first, second = anonymizer([wave, wave], ["u1", "u2"], ["s1", "s2"], RATE)
    assert (first - second).abs().max() < 1e-6  # same α; a different one differs by > 1e-3


def test_random_alpha_is_drawn_per_utterance_in_range():
    anonymizer = McAdams(alpha=[0.5, 0.9], device="cpu")
    alphas = [anonymizer.alpha_for(seed) for seed in range(200)]
    assert min(alphas) >= 0.5 and max(alphas) <= 0.9 and max(alphas) - min(alphas) > 0.3
    wave = speech_like(0.3, 12)
    first, second = anonymizer([wave, wave], ["u1", "u2"], ["s1", "s1"], RATE)
    assert not torch.allclose(first, second, atol=1e-3)


def test_speaker_level_gives_one_alpha_per_speaker():
    anonymizer = McAdams(alpha=[0.5, 0.9], level="speaker", seed=2, device="cpu")
    wave = speech_like(0.3, 13)
    a1, a2, b1 = anonymizer([wave, wave, wave], ["a-1", "a-2", "b-1"], ["a", "a", "b"], RATE)
    assert (a1 - a2).abs().max() < 1e-6
    assert not torch.allclose(a1, b1, atol=1e-3)


@pytest.mark.parametrize("alpha", [0, -0.5, [0.9, 0.5], "x", [0.5], [0.5, float("inf")]])
def test_bad_alpha_is_a_config_error(alpha):
    with pytest.raises(VpevalError, match="anonymizer.alpha"):
        McAdams(alpha=alpha, device="cpu")


@pytest.mark.parametrize("lpc_order", [0, 101, 2.5, "20", True])
def test_bad_lpc_order_is_a_config_error(lpc_order):
    with pytest.raises(VpevalError, match="anonymizer.lpc_order"):
        McAdams(lpc_order=lpc_order, device="cpu")


@pytest.mark.parametrize(("key", "value"), [("lpc", "Burg"), ("lpc", None), ("deterministic", "yes"),
                                            ("deterministic", 1)])
def test_bad_lpc_or_deterministic_is_a_config_error(key, value):
    with pytest.raises(VpevalError, match=rf"^anonymizer.{key}={value}: must be "):
        McAdams(**{key: value}, device="cpu")


def test_deterministic_mode_runs_on_cpu_whatever_the_device():
    """Deterministic mode runs the compiled CPU kernel (its output bitwise independent of
    batching, tested above); otherwise McAdams runs on the inputs' device."""
    for device in ("cpu", "cuda:1", "meta"):
        assert compute_device(torch.device(device), True) == torch.device("cpu")
        assert compute_device(torch.device(device), False) == torch.device(device)


def test_non_finite_input_is_refused_by_name():
    """Regression: a NaN sample reached the compiled kernel's LAPACK fallback and surfaced as
    a bare numpy LinAlgError; every anonymiser now refuses it, naming the utterance."""
    wave = speech_like(0.2, 19)
    wave[50] = np.nan
    with pytest.raises(VpevalError, match="utterance bad1 has non-finite samples"):
        McAdams(device="cpu")([wave], ["bad1"], ["s"], RATE)


def test_wrong_sample_rate_is_refused():
    with pytest.raises(VpevalError, match="16000 Hz"):
        McAdams(device="cpu")([np.zeros(800, np.float32)], ["u"], ["s"], 8000)
