"""McAdams: the compiled CPU kernel and the batched torch steps (what runs on CUDA) against
scipy, librosa, LAPACK and the per-frame numpy reference, and against each other (batching
and order, threads, CUDA)."""
import numpy as np
import pytest
import scipy.linalg
import scipy.signal
import torch

from anonymizers import mcadams_kernel
from anonymizers.mcadams import (
    ROOT_MAX_ITERATIONS,
    ROOT_TOLERANCE,
    McAdams,
    batched_overlap_added_frames,
    mcadams_waves,
    warp_pole_angles,
)
from pipeline.signal.lpc import (
    aberth_roots,
    all_pole_filter,
    burg_lpc,
    fir_filter,
    levinson_durbin,
    polynomial_from_roots,
    polynomial_roots,
)
from tests.helpers import waves
from tests.oracles.mcadams_reference import mcadams_reference
from tests.oracles.signals import speech_like

RATE = 16000


def windowed_speech_frames(count=300, seed=0):
    """Hann-windowed 20 ms frames (rows) of a speech-like signal, float64."""
    signal = speech_like(count * 0.01 + 0.02, seed).astype(np.float64)
    return torch.from_numpy(signal).unfold(0, 320, 160)[:count] * torch.hann_window(320, dtype=torch.float64)


def lpc_of_speech_frames(count=300, seed=0):
    """LPC polynomials (order 20) of Hann-windowed 20 ms frames of a speech-like signal."""
    frames = windowed_speech_frames(count, seed)
    autocorrelation = torch.stack([(frames[:, : 320 - k] * frames[:, k:]).sum(1) for k in range(21)], 1)
    autocorrelation[:, 0] += 1e-12
    return levinson_durbin(autocorrelation)


def test_levinson_matches_scipy_toeplitz_solve():
    rng = np.random.default_rng(0)
    signal = rng.standard_normal(400)
    r = np.correlate(signal, signal, "full")[399:399 + 11]
    expected = np.concatenate([[1.0], scipy.linalg.solve_toeplitz(r[:-1], -r[1:])])
    np.testing.assert_allclose(levinson_durbin(torch.from_numpy(r)[None])[0].numpy(), expected, atol=1e-12)


def test_filters_match_scipy_lfilter():
    lpc = lpc_of_speech_frames(8)
    signal = torch.from_numpy(np.random.default_rng(1).standard_normal((8, 320)))
    residual = fir_filter(signal, lpc)
    resynthesised = all_pole_filter(residual, lpc)
    for row in range(8):
        expected = scipy.signal.lfilter(lpc[row].numpy(), [1.0], signal[row].numpy())
        np.testing.assert_allclose(residual[row].numpy(), expected, atol=1e-12)
        np.testing.assert_allclose(resynthesised[row].numpy(), signal[row].numpy(), atol=1e-8)


def lapack_roots(lpc):
    """np.roots (companion-matrix eigenvalues, LAPACK) of each row, zero roots put back."""
    return torch.from_numpy(np.stack([np.concatenate([np.roots(row), np.zeros(20 - len(np.roots(row)))])
                                      for row in lpc.numpy()]))


def compiled_roots(lpc, max_iterations=80):
    """The compiled kernel's roots of each row, and whether each converged."""
    roots = np.empty((len(lpc), lpc.shape[1] - 1), np.complex128)
    converged = [mcadams_kernel.polynomial_roots(row, out, 1e-12, max_iterations)
                 for row, out in zip(lpc.numpy(), roots)]
    return torch.from_numpy(roots), converged


def compiled_burg(frames):
    """The compiled kernel's Burg LPC of each row."""
    lpc = np.empty((len(frames), 21))
    scratch = np.empty(frames.shape[1] - 1), np.empty(frames.shape[1] - 1)
    for row, out in zip(frames.numpy(), lpc):
        mcadams_kernel.burg(np.concatenate([row, np.zeros(20)]), len(row), out, *scratch)
    return lpc


@pytest.mark.parametrize("estimator", ["torch", "compiled"])
def test_burg_matches_librosa(estimator):
    """`lpc: burg` against `librosa.lpc` (the VPC B2 code's call) on the same frames, silent
    frames included. Both sum in another order than librosa (partial sums), and the Burg
    recursion amplifies rounding on voiced frames: measured 0.8-2.3e-10 of the largest
    coefficient (|a| reaches 31-43) for both. Tolerance 1e-8 of each row's largest."""
    frames = windowed_speech_frames(300)
    librosa = pytest.importorskip("librosa")  # a test extra; the CUDA image has none (gpu tests still run)
    expected = librosa.lpc(frames.numpy(), order=20, axis=1)
    lpc = burg_lpc(frames, 20).numpy() if estimator == "torch" else compiled_burg(frames)
    scale = np.abs(expected).max(1, keepdims=True)
    assert (np.abs(lpc - expected) / scale).max() < 1e-8
    assert (frames == 0).all(1).any()  # digital silence: A(z) = 1, as librosa gives


@pytest.mark.parametrize("estimator", ["torch", "compiled"])
def test_burg_of_a_flat_frame_stays_stable(estimator):
    """Regression (real voices, issue 35): digital silence with a DC offset (7 LSB) made the
    compiled Burg's reflection coefficients exceed 1 and B2's output NaN, and the anonymise
    stage crashed writing it. The recursion now stops at the stable polynomial it has."""
    frames = torch.full((1, 320), 7 / 32768, dtype=torch.float64) * torch.hann_window(320, dtype=torch.float64)
    lpc = burg_lpc(frames, 20).numpy() if estimator == "torch" else compiled_burg(frames)
    assert np.isfinite(lpc).all() and np.abs(np.roots(lpc[0])).max() < 1.0
    output = mcadams_waves([torch.full((16000,), 7 / 32768, dtype=torch.float64)], [0.8], RATE, lpc="burg")[0]
    assert torch.isfinite(output).all()


@pytest.mark.parametrize("finder", ["torch", "compiled"])
def test_aberth_roots_match_lapack(finder):
    """Both Aberth root finders (batched torch: CUDA; compiled: CPU) against LAPACK on the
    same LPC polynomials: the warped polynomials agree to 1e-9 (relative to the largest
    coefficient)."""
    lpc = lpc_of_speech_frames(300)
    alpha = torch.full((len(lpc),), 0.7, dtype=torch.float64)
    roots = aberth_roots(lpc, ROOT_TOLERANCE, ROOT_MAX_ITERATIONS)[0] if finder == "torch" else compiled_roots(lpc)[0]
    from_aberth = polynomial_from_roots(warp_pole_angles(roots, alpha))
    from_lapack = polynomial_from_roots(warp_pole_angles(lapack_roots(lpc), alpha))
    scale = from_lapack.abs().amax(1, keepdim=True)
    assert ((from_aberth - from_lapack).abs() / scale).max() < 1e-9


def test_monomial_has_zero_roots():
    coefficients = torch.zeros(2, 21, dtype=torch.float64)
    coefficients[:, 0] = 1.0
    roots, converged = aberth_roots(coefficients, ROOT_TOLERANCE, ROOT_MAX_ITERATIONS)
    assert torch.equal(roots, torch.zeros(2, 20, dtype=torch.complex128)) and converged.all()
    roots, converged = compiled_roots(coefficients)
    assert torch.equal(roots, torch.zeros(2, 20, dtype=torch.complex128)) and all(converged)


@pytest.fixture(params=["compiled", "batched torch"])
def implementation(request, monkeypatch):
    """McAdams on CPU as vpeval runs it (the compiled kernel), or with the batched torch
    steps that run on CUDA."""
    if request.param == "batched torch":
        monkeypatch.setattr("anonymizers.mcadams.overlap_added_frames", batched_overlap_added_frames)
    return request.param


@pytest.mark.parametrize("alpha", [0.5, 0.8, 0.9, 1.3])
def test_matches_per_frame_reference(implementation, alpha):
    """All float64. The LPC normal equations of voiced frames are ill-conditioned, so
    Levinson here and scipy's Toeplitz solver differ by up to ~1e-8 in the coefficients; the
    outputs agree to a few 1e-8 of the peak on these signals. Tolerance: 1e-6 of the peak."""
    inputs = waves((0.6, 1), (0.33, 2), (0.011, 3))
    outputs = mcadams_waves([torch.from_numpy(x) for x in inputs], [alpha] * 3, RATE)
    for wave, output in zip(inputs, outputs):
        reference = mcadams_reference(wave, alpha)
        assert output.shape == reference.shape
        assert np.abs(output.numpy() - reference).max() <= 1e-6 * np.abs(wave).max()


@pytest.mark.parametrize("alpha", [0.5, 0.9])
def test_burg_matches_per_frame_reference(implementation, alpha):
    """`lpc="burg"` in both implementations against the reference, whose Burg is
    `librosa.lpc` itself. Measured 3e-8 of the peak at α = 0.5; tolerance 1e-6 of the peak."""
    inputs = waves((0.6, 1), (0.011, 3))
    outputs = mcadams_waves([torch.from_numpy(x) for x in inputs], [alpha] * 2, RATE, lpc="burg")
    for wave, output in zip(inputs, outputs):
        reference = mcadams_reference(wave, alpha, lpc_method="burg")
        assert np.abs(output.numpy() - reference).max() <= 1e-6 * np.abs(wave).max()
    levinson = mcadams_reference(inputs[0], alpha)
    assert np.abs(outputs[0].numpy() - levinson).max() > 1e-2 * np.abs(inputs[0]).max()  # measured 0.1-0.3


@pytest.mark.parametrize("lpc_order", [8, 12])
def test_other_lpc_order_matches_reference(implementation, lpc_order):
    """`lpc_order` reaches every step of both implementations (tolerance as above)."""
    wave = speech_like(0.4, 21)
    (output,) = mcadams_waves([torch.from_numpy(wave)], [0.7], RATE, lpc_order=lpc_order)
    reference = mcadams_reference(wave, 0.7, lpc_order=lpc_order)
    assert np.abs(output.numpy() - reference).max() <= 1e-6 * np.abs(wave).max()
    assert np.abs(reference - mcadams_reference(wave, 0.7)).max() > 1e-3 * np.abs(wave).max()


def test_compiled_kernel_falls_back_to_lapack_for_unconverged_roots():
    """One Aberth sweep converges no speech frame (digital silence needs none)."""
    lpc = lpc_of_speech_frames(50)
    silent = (lpc[:, 1:] == 0).all(1).tolist()
    assert compiled_roots(lpc, max_iterations=1)[1] == silent


def test_batched_roots_fall_back_to_eigenvalues_for_unconverged_rows_only():
    """Regression (the torch path, used on CUDA, kept unconverged Aberth roots): with 10
    sweeps 214 of 300 rows converge; those keep their Aberth roots and only the others take
    the companion matrix's eigenvalues. Every row then agrees with LAPACK as in
    `test_aberth_roots_match_lapack` (1e-9 of the largest coefficient)."""
    lpc = lpc_of_speech_frames(300)
    aberth, converged = aberth_roots(lpc, ROOT_TOLERANCE, 10)
    assert 0 < int(converged.sum()) < len(lpc)
    roots = polynomial_roots(lpc, ROOT_TOLERANCE, 10)
    assert torch.equal(roots[converged], aberth[converged])
    assert not torch.equal(roots[~converged], aberth[~converged])
    alpha = torch.full((len(lpc),), 0.7, dtype=torch.float64)
    warped = polynomial_from_roots(warp_pole_angles(roots, alpha))
    expected = polynomial_from_roots(warp_pole_angles(lapack_roots(lpc), alpha))
    assert ((warped - expected).abs() / expected.abs().amax(1, keepdim=True)).max() < 1e-9


@pytest.mark.parametrize("sweeps", [1, 10])
def test_output_with_fallback_frames_matches_reference(implementation, monkeypatch, sweeps):
    """With 1 sweep every speech frame falls back, with 10 some do (a third in torch): both
    implementations still match the reference (tolerance 1e-6 of the peak, as above)."""
    monkeypatch.setattr("anonymizers.mcadams.ROOT_MAX_ITERATIONS", sweeps)
    wave = speech_like(0.4, 18)
    (output,) = mcadams_waves([torch.from_numpy(wave)], [0.7], RATE)
    assert np.abs(output.numpy() - mcadams_reference(wave, 0.7)).max() <= 1e-6 * np.abs(wave).max()


def test_result_does_not_depend_on_batching_or_order(implementation):
    """Each frame is processed on its own: on CPU (compiled kernel) batch composition, order
    and chunking change nothing, bit for bit; the batched torch steps' vectorised kernels
    can round the last bit by a row's position, so there the float32 outputs agree to 1e-6."""
    inputs = waves((0.5, 9), (0.2, 10), (0.35, 11))
    ids, speakers = ["u1", "u2", "u3"], ["s1", "s2", "s1"]
    together = McAdams(alpha=[0.5, 0.9], seed=1, device="cpu")(inputs, ids, speakers, RATE)
    chunked = McAdams(alpha=[0.5, 0.9], seed=1, device="cpu", chunk_frames=40)(inputs, ids, speakers, RATE)
    alone = [McAdams(alpha=[0.5, 0.9], seed=1, device="cpu")([w], [u], [s], RATE)[0]
             for w, u, s in zip(inputs, ids, speakers)]
    reversed_order = McAdams(alpha=[0.5, 0.9], seed=1, device="cpu")(inputs[::-1], ids[::-1], speakers[::-1], RATE)[::-1]
    for expected, *others in zip(together, chunked, alone, reversed_order):
        for other in others:
            if implementation == "compiled":
                assert torch.equal(expected, other)
            else:
                assert (expected - other).abs().max() < 1e-6


@pytest.mark.gpu
@pytest.mark.parametrize("lpc", ["levinson", "burg"])
def test_cuda_deterministic_mode_equals_cpu_bit_for_bit(lpc):
    """Deterministic mode on CUDA inputs: computed by the CPU kernel, returned on CUDA."""
    inputs = [torch.from_numpy(x) for x in waves((1.0, 14), (0.5, 15))]
    on_gpu = mcadams_waves([x.cuda() for x in inputs], [0.6, 0.8], RATE, lpc=lpc, deterministic=True)
    on_cpu = mcadams_waves(inputs, [0.6, 0.8], RATE, lpc=lpc)
    for gpu, cpu in zip(on_gpu, on_cpu):
        assert gpu.device.type == "cuda" and torch.equal(gpu.cpu(), cpu)


@pytest.mark.gpu
@pytest.mark.parametrize("lpc", ["levinson", "burg"])
def test_cuda_matches_cpu(lpc):
    """CUDA runs the batched torch steps, CPU the compiled kernel: the same float64 algorithm.
    Tolerance 1e-6."""
    inputs = waves((1.0, 14), (0.5, 15))
    on_gpu = McAdams(alpha=[0.5, 0.9], lpc=lpc, device="cuda")(inputs, ["u1", "u2"], ["s1", "s2"], RATE)
    on_cpu = McAdams(alpha=[0.5, 0.9], lpc=lpc, device="cpu")(inputs, ["u1", "u2"], ["s1", "s2"], RATE)
    for gpu, cpu in zip(on_gpu, on_cpu):
        assert (gpu - cpu).abs().max() < 1e-6


def test_chunks_on_several_threads_give_the_same_output_bit_for_bit():
    """With several torch threads, CPU chunks run on that many Python threads (intra-op
    threads off for the duration); chunks are independent and overlap-added in order."""
    inputs = [torch.from_numpy(x) for x in waves((0.5, 23), (0.3, 24))]
    previous = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        serial = mcadams_waves(inputs, [0.6, 0.8], RATE, chunk_frames=16)
        torch.set_num_threads(2)
        threaded = mcadams_waves(inputs, [0.6, 0.8], RATE, chunk_frames=16)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(previous)
    for expected, output in zip(serial, threaded):
        assert torch.equal(expected, output)
