"""McAdams-coefficient anonymisation (VoicePrivacy B2), batched.

Every 20 ms frame (10 ms shift) of every utterance in a batch is processed in chunks of
frames: LPC of order 20 by autocorrelation and Levinson-Durbin (or by Burg's method, as the
VPC code's `librosa.lpc`), the poles of 1/A(z) by Aberth-Ehrlich iterations (companion-matrix
eigenvalues for a frame they leave unconverged), each complex pole's angle φ moved to sign(φ)·min(|φ|^α, π) (real
poles kept), the LPC residual re-synthesised through the new all-pole filter, and the frames
overlap-added. On CUDA every step runs on a whole chunk at once in torch
(`batched_mcadams_frames`); on CPU a chunk goes through the same steps frame by frame in a
compiled kernel (`anonymizers.mcadams_kernel`), which is about 4x cheaper there than the
batched torch steps, and chunks run on several threads. In deterministic mode the compiled
kernel runs whatever the device, so a frame's output depends on that frame alone.

Numerics (see `tests/oracles/mcadams_reference.py` for the per-frame numpy version and how both
differ from the VPC code): float64 throughout; periodic Hann analysis/synthesis window
sqrt(hann / K) with K = sum(hann) / shift, which overlap-adds to exactly 1, and the signal is
padded so that every sample lies under two frames, hence α = 1 returns the input; the output
is scaled to the input's peak level (VPC 2024 scales to full scale), so it never exceeds it.

>>> anonymizer = McAdams(alpha=[0.5, 0.9], level="utterance", seed=0, device="cpu")
>>> out = anonymizer([torch.randn(16000) * 0.1], ["utt1"], ["spk1"], 16000)
>>> out[0].shape, out[0].dtype
(torch.Size([16000]), torch.float32)
"""
from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from anonymizers.base import Anonymizer, Batch
from pipeline.errors import VpevalError

WINDOW_SECONDS = 0.02
SHIFT_SECONDS = 0.01
LPC_ORDER = 20  # the default, as in the VPC code (`lp_order`)
# Autocorrelation regularisation: r[0] * (1 + WHITE_NOISE_CORRECTION) + AUTOCORRELATION_FLOOR,
# i.e. white noise at -90 dB under the frame, and a floor that keeps all-zero frames defined.
WHITE_NOISE_CORRECTION = 1e-9
AUTOCORRELATION_FLOOR = 1e-12
# A pole whose imaginary part is at most this is real and kept as it is.
REAL_POLE_TOLERANCE = 1e-9
ROOT_TOLERANCE = 1e-12
ROOT_MAX_ITERATIONS = 80
DEFAULT_CHUNK_FRAMES = {"cpu": 4096, "cuda": 131072}
LPC_METHODS = ("levinson", "burg")


def frame_geometry(sample_rate: int) -> tuple[int, int]:
    """(window length, shift) in samples: 20 ms and 10 ms, floored as in the VPC code."""
    return math.floor(WINDOW_SECONDS * sample_rate), math.floor(SHIFT_SECONDS * sample_rate)


def analysis_window(win_length: int, shift: int) -> np.ndarray:
    """sqrt(hann / K), K = sum(hann) / shift, periodic Hann: applied at analysis and at
    synthesis, the squared windows overlap-add to exactly 1 when `shift` divides the length
    into an integer number of hops."""
    hann = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(win_length) / win_length)
    return np.sqrt(hann / (hann.sum() / shift))


def padded_length(num_samples: int, win_length: int, shift: int) -> tuple[int, int]:
    """(number of frames, padded length) when `win_length - shift` zeros go in front and the
    end is padded so that every input sample lies under `win_length // shift` frames."""
    num_frames = -(-num_samples // shift) + (win_length // shift) - 1
    return num_frames, (num_frames - 1) * shift + win_length


def levinson_durbin(autocorrelation: torch.Tensor) -> torch.Tensor:
    """LPC polynomials A(z) = 1 + a1 z^-1 + ... (rows) from autocorrelation rows r[0..p]."""
    order = autocorrelation.shape[1] - 1
    lpc = torch.zeros_like(autocorrelation)
    lpc[:, 0] = 1.0
    error = autocorrelation[:, 0].clone()
    for i in range(1, order + 1):
        acc = (lpc[:, :i] * autocorrelation[:, 1:i + 1].flip(1)).sum(1)
        reflection = -acc / error
        lpc[:, 1:i + 1] = lpc[:, 1:i + 1] + reflection[:, None] * lpc[:, :i].flip(1)
        error = error * (1.0 - reflection * reflection)
    return lpc


def burg_lpc(windowed: torch.Tensor, order: int) -> torch.Tensor:
    """LPC polynomials (rows) of windowed frames (rows) by Burg's method, step for step as
    `librosa.lpc` computes it (see `anonymizers.mcadams_kernel.burg`), all rows at once."""
    lpc = torch.zeros(windowed.shape[0], order + 1, dtype=windowed.dtype, device=windowed.device)
    lpc[:, 0] = 1.0
    forward, backward = windowed[:, 1:], windowed[:, :-1]
    den = (forward * forward + backward * backward).sum(1)
    tiny = torch.finfo(windowed.dtype).tiny
    for i in range(order):
        reflection = (-2.0 * (backward * forward).sum(1) / (den + tiny))[:, None]
        lpc[:, 1:i + 2] = lpc[:, 1:i + 2] + reflection * lpc[:, :i + 1].flip(1)
        forward, backward = forward + reflection * backward, backward + reflection * forward
        den = (1.0 - reflection[:, 0] ** 2) * den - backward[:, -1] ** 2 - forward[:, 0] ** 2
        forward, backward = forward[:, 1:], backward[:, :-1]
    return lpc


def polynomial_roots(coefficients: torch.Tensor) -> torch.Tensor:
    """Roots of monic polynomials (rows, highest degree first) on any device: Aberth-Ehrlich
    iterations on all rows at once, then, for the rows they leave unconverged, the
    eigenvalues of the companion matrix (as the compiled kernel falls back to LAPACK)."""
    roots, converged = aberth_roots(coefficients)
    if not bool(converged.all()):
        rows = torch.nonzero(~converged).squeeze(1)
        roots[rows] = companion_eigenvalues(coefficients[rows])
    return roots


def companion_eigenvalues(coefficients: torch.Tensor) -> torch.Tensor:
    """Roots (rows) as the eigenvalues of the companion matrices, like `np.roots`."""
    count, degree = coefficients.shape[0], coefficients.shape[1] - 1
    companion = torch.zeros(count, degree, degree, dtype=coefficients.dtype, device=coefficients.device)
    companion[:, 0] = -coefficients[:, 1:]
    companion[:, 1:, :-1] += torch.eye(degree - 1, dtype=coefficients.dtype, device=coefficients.device)
    return torch.linalg.eigvals(companion)


def aberth_roots(coefficients: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(roots, converged per row) by simultaneous Aberth-Ehrlich iterations on all rows at
    once (any device).

    Starts on a circle of radius |a_n|^(1/n); a row stops once its largest correction is
    below ROOT_TOLERANCE, so its roots depend on that row alone, not on the batch; a row still
    moving (or not finite) after ROOT_MAX_ITERATIONS is not converged. Rows z^n get exact
    zeros (Aberth converges only linearly to a multiple root).
    """
    degree = coefficients.shape[1] - 1
    complex_coefficients = coefficients.to(torch.complex128)
    radius = coefficients[:, -1].abs().clamp_min(1e-300).pow(1.0 / degree).clamp(0.3, 1.0)
    start_angles = 2 * math.pi * torch.arange(degree, dtype=torch.float64, device=coefficients.device) / degree + 0.4
    roots = radius[:, None] * torch.polar(torch.ones_like(start_angles), start_angles)[None]
    monomial = (coefficients[:, 1:] == 0).all(1)
    roots[monomial] = 0
    active = torch.nonzero(~monomial).squeeze(1)
    for _ in range(ROOT_MAX_ITERATIONS):
        if active.numel() == 0:
            break
        z = roots[active]
        c = complex_coefficients[active]
        value = c[:, :1].expand_as(z).clone()
        derivative = torch.zeros_like(z)
        for k in range(1, degree + 1):
            derivative = torch.addcmul(value, derivative, z)
            value = torch.addcmul(c[:, k:k + 1], value, z)
        newton = value / derivative
        differences = z[:, :, None] - z[:, None, :]
        differences.diagonal(dim1=1, dim2=2).fill_(1.0)
        repulsion = differences.reciprocal_().sum(2) - 1.0
        correction = newton / (1.0 - newton * repulsion)
        roots[active] = z - correction
        active = active[~(correction.abs().amax(1) <= ROOT_TOLERANCE)]  # NaN: still active
    converged = torch.ones(len(coefficients), dtype=torch.bool, device=coefficients.device)
    converged[active] = False
    return roots, converged


def warp_pole_angles(poles: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """Each complex pole's angle φ -> sign(φ) min(|φ|^α, π) at the same radius (α per row);
    real poles (|imag| <= REAL_POLE_TOLERANCE) are kept, made exactly real."""
    angle = poles.angle()
    new_angle = angle.sign() * angle.abs().pow(alpha[:, None]).clamp(max=math.pi)
    warped = torch.polar(poles.abs(), new_angle)
    is_real = poles.imag.abs() <= REAL_POLE_TOLERANCE
    return torch.where(is_real, poles.real.to(poles.dtype), warped)


def polynomial_from_roots(roots: torch.Tensor) -> torch.Tensor:
    """Real parts of the coefficients of prod_k (z - roots[:, k]), highest degree first."""
    count, degree = roots.shape
    coefficients = torch.zeros(count, degree + 1, dtype=roots.dtype, device=roots.device)
    coefficients[:, 0] = 1.0
    for k in range(degree):
        coefficients[:, 1:k + 2] = coefficients[:, 1:k + 2] - roots[:, k:k + 1] * coefficients[:, :k + 1]
    return coefficients.real


def fir_filter(signal: torch.Tensor, taps: torch.Tensor) -> torch.Tensor:
    """y[n] = sum_k taps[k] x[n-k] per row, zero initial state (scipy's lfilter(b, [1], x)).

    One fused multiply-add pass per tap (`addcmul_`, 2.5x less CPU than multiply then add).
    Its vectorised body uses FMA and its scalar tail does not, so the last bit of a row can
    depend on the row's position in the batch; tests compare batchings to 1e-6, not bitwise.
    """
    out = signal * taps[:, :1]
    for k in range(1, taps.shape[1]):
        out[:, k:].addcmul_(taps[:, k:k + 1], signal[:, :-k])
    return out


def all_pole_filter(signal: torch.Tensor, denominator: torch.Tensor) -> torch.Tensor:
    """y = x / A(z) per row (monic A, zero initial state; scipy's lfilter([1], a, x)).

    Direct form, one time step at a time for all rows together (time-major layout so that
    every step reads contiguous memory), written in scatter form: once y[n] is final, one
    fused multiply-add adds its share to the next p samples (half the CPU time of gathering
    p products, summing and adding; as in `fir_filter`, the last bit can depend on the row's
    position in the batch). Measured alternatives: block recursions (blocks of
    p samples through the inverse Toeplitz matrix) lose 4-5 digits, because the clustered
    poles that α < 1 produces push |a| to 1e3, while the direct form stays within 1e-9 of a
    long-double reference; an FFT of the impulse response aliases for poles near the unit
    circle; torchaudio's lfilter with batched coefficients gives the same numbers but, without
    its C++ extension, runs 5x slower.
    """
    count, length = signal.shape
    order = denominator.shape[1] - 1
    feedback = -denominator[:, 1:].T.contiguous()  # row j - 1 multiplies y[n - j]
    history = torch.zeros(length + order, count, dtype=signal.dtype, device=signal.device)
    history[:length] = signal.T
    for n in range(length - 1):
        # y[n] is final: add its share to the next `order` samples (scatter form: one fused
        # multiply-add per step instead of multiply, reduce and add; half the CPU time).
        history[n + 1:n + 1 + order].addcmul_(feedback, history[n])
    return history[:length].T


def overlap_added_frames(signal: torch.Tensor, frame_index: torch.Tensor, alpha: torch.Tensor,
                         window: torch.Tensor, shift: int, lpc_order: int, lpc: str) -> torch.Tensor:
    """The frames `frame_index` (ascending; frame m starts at sample m * shift) of `signal`
    (float64) anonymised with one α each, windowed and overlap-added in order into one segment
    that starts at sample frame_index[0] * shift. On CPU the compiled per-frame kernel
    (`anonymizers.mcadams_kernel`, about 4x less CPU than the batched steps there), on other
    devices the batched torch steps (`batched_overlap_added_frames`)."""
    if signal.device.type != "cpu":
        return batched_overlap_added_frames(signal, frame_index, alpha, window, shift, lpc_order, lpc)
    from anonymizers import mcadams_kernel  # numba: compiled on first use, then cached

    segment = np.zeros(int(frame_index[-1] - frame_index[0]) * shift + len(window))
    mcadams_kernel.overlap_added_frames(
        signal.numpy(), frame_index.numpy(), alpha.contiguous().numpy(), window.numpy(), shift, lpc_order,
        lpc == "burg", WHITE_NOISE_CORRECTION, AUTOCORRELATION_FLOOR, REAL_POLE_TOLERANCE, ROOT_TOLERANCE,
        ROOT_MAX_ITERATIONS, segment)
    return torch.from_numpy(segment)


def batched_overlap_added_frames(signal: torch.Tensor, frame_index: torch.Tensor, alpha: torch.Tensor,
                                 window: torch.Tensor, shift: int, lpc_order: int, lpc: str) -> torch.Tensor:
    """`overlap_added_frames` with the batched torch steps (any device)."""
    frames = signal.unfold(0, len(window), shift)[frame_index]
    processed = batched_mcadams_frames(frames, alpha, window, lpc_order, lpc)
    taps = torch.arange(len(window), device=signal.device)
    positions = (frame_index - frame_index[0])[:, None] * shift + taps
    segment = torch.zeros(int(positions[-1, -1]) + 1, dtype=signal.dtype, device=signal.device)
    return segment.index_add_(0, positions.reshape(-1), processed.reshape(-1))


def batched_mcadams_frames(frames: torch.Tensor, alpha: torch.Tensor, window: torch.Tensor,
                           lpc_order: int, lpc: str = "levinson") -> torch.Tensor:
    """Raw frames (rows, float64) anonymised with one α per row by batched torch steps, every
    step on all rows at once (any device); returns windowed frames ready for overlap-add."""
    windowed = frames * window
    if lpc == "burg":
        polynomial = burg_lpc(windowed, lpc_order)
    else:
        autocorrelation = torch.stack(
            [(windowed[:, : windowed.shape[1] - k] * windowed[:, k:]).sum(1) for k in range(lpc_order + 1)], 1)
        autocorrelation[:, 0] = autocorrelation[:, 0] * (1.0 + WHITE_NOISE_CORRECTION) + AUTOCORRELATION_FLOOR
        polynomial = levinson_durbin(autocorrelation)
    new_lpc = polynomial_from_roots(warp_pole_angles(polynomial_roots(polynomial), alpha))
    residual = fir_filter(windowed, polynomial)
    return all_pole_filter(residual, new_lpc) * window


def mcadams_waves(waves: Sequence[torch.Tensor], alphas: Sequence[float], sample_rate: int,
                  chunk_frames: int | None = None, lpc_order: int = LPC_ORDER, lpc: str = "levinson",
                  deterministic: bool = False) -> list[torch.Tensor]:
    """McAdams on a list of 1-D waveforms (one α each), all frames batched together in chunks
    of `chunk_frames` (default by device, see DEFAULT_CHUNK_FRAMES); returns float64
    waveforms of the input lengths on the inputs' device. `lpc`: "levinson" or "burg".

    On CPU with several torch threads, whole chunks go to that many Python threads (the
    compiled kernel releases the GIL) and torch's intra-op threads are off for the call (see
    `single_intra_op_thread`). `deterministic`: computed on CPU by the compiled kernel
    whatever the inputs' device (see `compute_device`)."""
    if not waves:
        return []
    device = waves[0].device
    if compute_device(device, deterministic) != device:
        outputs = mcadams_waves([w.cpu() for w in waves], alphas, sample_rate, chunk_frames, lpc_order, lpc)
        return [output.to(device) for output in outputs]
    workers = torch.get_num_threads() if device.type == "cpu" else 1
    with single_intra_op_thread() if workers > 1 else contextlib.nullcontext():
        return overlap_added_waves(waves, alphas, sample_rate, chunk_frames, lpc_order, lpc, workers)


def compute_device(device: torch.device, deterministic: bool) -> torch.device:
    """Where McAdams runs for inputs on `device`: there, except in deterministic mode, which
    runs on CPU (the compiled kernel, whose output for a frame depends on that frame alone,
    bit for bit; the batched torch steps can round the last bit by a row's position)."""
    return torch.device("cpu") if deterministic else device


def overlap_added_waves(waves: Sequence[torch.Tensor], alphas: Sequence[float], sample_rate: int,
                        chunk_frames: int | None, lpc_order: int, lpc: str, workers: int) -> list[torch.Tensor]:
    """`mcadams_waves` with chunks spread over `workers` Python threads (1: in this thread)."""
    win_length, shift = frame_geometry(sample_rate)
    if win_length % shift:
        raise VpevalError(f"McAdams needs the window ({win_length}) to be a multiple of the shift ({shift})")
    device = waves[0].device
    chunk_frames = chunk_frames or DEFAULT_CHUNK_FRAMES[device.type]
    window = torch.from_numpy(analysis_window(win_length, shift)).to(device)
    # All utterances laid end to end, each padded on its own; frames straddling two
    # utterances are skipped, so a frame only ever sees its own utterance.
    geometry = [padded_length(len(w), win_length, shift) for w in waves]
    starts = np.cumsum([0] + [length for _, length in geometry])
    signal = torch.zeros(int(starts[-1]) + win_length, dtype=torch.float64, device=device)
    frame_index, frame_alpha = [], []
    for wave, (num_frames, _), start, alpha in zip(waves, geometry, starts[:-1], alphas):
        offset = int(start) + win_length - shift
        signal[offset:offset + len(wave)] = wave.to(torch.float64)
        frame_index.append(torch.arange(num_frames) + int(start) // shift)
        frame_alpha.append(torch.full((num_frames,), float(alpha), dtype=torch.float64))
    frame_index = torch.cat(frame_index).to(device)
    frame_alpha = torch.cat(frame_alpha).to(device)
    output = torch.zeros_like(signal)

    def process(begin: int) -> tuple[int, torch.Tensor]:
        index = frame_index[begin:begin + chunk_frames]
        alpha = frame_alpha[begin:begin + chunk_frames]
        return int(index[0]) * shift, overlap_added_frames(signal, index, alpha, window, shift, lpc_order, lpc)

    begins = range(0, len(frame_index), chunk_frames)
    with contextlib.ExitStack() as stack:
        if min(workers, len(begins)) > 1:
            pool = stack.enter_context(ThreadPoolExecutor(max_workers=min(workers, len(begins))))
            chunks = pool.map(process, begins)
        else:
            chunks = map(process, begins)
        for first, segment in chunks:  # in chunk order, whichever thread computed them
            output[first:first + len(segment)] += segment
    results = []
    for wave, start in zip(waves, starts[:-1]):
        offset = int(start) + win_length - shift
        out = output[offset:offset + len(wave)]
        results.append(peak_matched(out, wave.to(torch.float64)))
    return results


@contextlib.contextmanager
def single_intra_op_thread() -> Iterator[None]:
    """torch's intra-op parallelism off for the duration (restored after).

    On CPU with several torch threads, `mcadams_waves` gives whole chunks to that many Python
    threads (the compiled kernel and torch kernels release the GIL) instead of splitting
    small torch kernels over OpenMP threads: when other jobs keep the cores busy, every
    OpenMP region waits for a descheduled thread (and idle OpenMP threads spin between
    regions); with the batched torch steps on CPU, that made 2 threads 3-18x slower than 1.
    Intra-op threads stay off for the whole call, not only the chunks: a few regions before
    them left a spinning OpenMP thread that doubled the CPU time. Chunks are independent and
    overlap-added in order, so the output is the same as with one thread, bit for bit. The
    setting is process-wide: torch work in other threads during the call also runs on one
    intra-op thread.
    """
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def peak_matched(output: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """`output` scaled so that its peak equals the reference's (silence stays silence)."""
    if output.numel() == 0:
        return output
    return output * (peak_level(reference) / peak_level(output).clamp_min(torch.finfo(output.dtype).tiny))


def peak_level(signal: torch.Tensor) -> torch.Tensor:
    """max |signal| without an |signal| copy."""
    low, high = torch.aminmax(signal)
    return torch.maximum(high, -low)


class McAdams(Anonymizer):
    """McAdams-coefficient anonymisation (VPC 2020/2024 baseline B2).

    Args:
        alpha: a number (fixed coefficient, VPC 2020: 0.8) or [low, high] (drawn uniformly
            per utterance or per speaker, following `level`, from the batch seed; VPC 2024:
            [0.5, 0.9] per utterance).
        lpc_order: order of the LPC analysis (VPC: 20); the poles of its all-pole model are
            the ones warped.
        chunk_frames: frames processed together; None: 4096 on CPU, 131072 on CUDA (about 5
            GB of GPU memory; larger amortises kernel launches further).
        lpc: "levinson" (autocorrelation method, the default) or "burg" (as `librosa.lpc`,
            the VPC B2 code's estimator).
        deterministic: run the compiled CPU kernel whatever the device, so that the output
            is the same bit for bit whatever the batching (on CUDA the batched torch steps
            can differ in the last bit).
        **common: `level`, `seed`, `device`, `batch_seconds` (see `Anonymizer`).
    """

    def __init__(self, alpha: float | Sequence[float] = 0.8, lpc_order: int = LPC_ORDER,
                 chunk_frames: int | None = None, lpc: str = "levinson", deterministic: bool = False,
                 **common):
        super().__init__(**common)
        self.alpha_range = parse_alpha(alpha)
        if isinstance(lpc_order, bool) or not isinstance(lpc_order, int) or not 1 <= lpc_order <= 100:
            raise VpevalError(f"anonymizer.lpc_order must be an integer from 1 to 100, got {lpc_order!r}")
        self.lpc_order = lpc_order
        if chunk_frames is not None and int(chunk_frames) < 1:
            raise VpevalError(f"anonymizer.chunk_frames must be a positive integer or null, got {chunk_frames!r}")
        self.chunk_frames = None if chunk_frames is None else int(chunk_frames)
        if lpc not in LPC_METHODS:
            raise VpevalError(f"anonymizer.lpc must be one of {', '.join(LPC_METHODS)}, got {lpc!r}")
        self.lpc = lpc
        if not isinstance(deterministic, bool):
            raise VpevalError(f"anonymizer.deterministic must be true or false, got {deterministic!r}")
        self.deterministic = deterministic

    def alpha_for(self, seed: int) -> float:
        """The coefficient of the utterance (or speaker) whose random key is `seed`."""
        low, high = self.alpha_range
        if low == high:
            return low
        return low + (high - low) * float(np.random.default_rng(seed).random())

    def anonymize(self, batch: Batch) -> list[torch.Tensor]:
        alphas = [self.alpha_for(seed) for seed in batch.seeds]
        for drawn, alpha in zip(batch.drawn, alphas):
            drawn["alpha"] = alpha
        return mcadams_waves(batch.waves, alphas, batch.sample_rate, self.chunk_frames, self.lpc_order, self.lpc,
                             self.deterministic)


def parse_alpha(alpha) -> tuple[float, float]:
    """`0.8` -> (0.8, 0.8); `[0.5, 0.9]` -> (0.5, 0.9); anything else is a config error."""
    if isinstance(alpha, (int, float)) and not isinstance(alpha, bool):
        low = high = float(alpha)
    else:
        try:
            low, high = (float(v) for v in alpha)
        except (TypeError, ValueError):
            raise VpevalError(f"anonymizer.alpha must be a number or a [low, high] pair, got {alpha!r}") from None
    if not (0 < low <= high) or not math.isfinite(high):
        raise VpevalError(f"anonymizer.alpha must satisfy 0 < low <= high, got {alpha!r}")
    return low, high
