"""McAdams-coefficient anonymisation (VoicePrivacy B2), batched.

Every 20 ms frame (10 ms shift) of every utterance in a batch is processed in chunks of
frames: LPC of order 20 by autocorrelation and Levinson-Durbin (or by Burg's method, as the
VPC code's `librosa.lpc`), the poles of 1/A(z) by Aberth-Ehrlich iterations (companion-matrix
eigenvalues for a frame they leave unconverged), each complex pole's angle φ moved to sign(φ)·min(|φ|^α, π) (real
poles kept), the LPC residual re-synthesised through the new all-pole filter, and the frames
overlap-added. On CUDA every step runs on a whole chunk at once in torch
(`batched_mcadams_frames`, on the LPC, root and filter steps of `pipeline.signal.lpc`); on
CPU a chunk goes through the same steps frame by frame in a compiled kernel (`anonymizers.mcadams_kernel`), which is about 4x cheaper there than the
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
from dataclasses import dataclass

import numpy as np
import torch

from anonymizers.base import Anonymizer, Batch, Parameters
from pipeline.core.checks import BOOLEAN, Check, between, choice, integer, optional, setting
from pipeline.core.errors import VpevalError
from pipeline.signal.lpc import (
    all_pole_filter,
    burg_lpc,
    fir_filter,
    levinson_durbin,
    polynomial_from_roots,
    polynomial_roots,
)

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


def warp_pole_angles(poles: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """Each complex pole's angle φ -> sign(φ) min(|φ|^α, π) at the same radius (α per row);
    real poles (|imag| <= REAL_POLE_TOLERANCE) are kept, made exactly real."""
    angle = poles.angle()
    new_angle = angle.sign() * angle.abs().pow(alpha[:, None]).clamp(max=math.pi)
    warped = torch.polar(poles.abs(), new_angle)
    is_real = poles.imag.abs() <= REAL_POLE_TOLERANCE
    return torch.where(is_real, poles.real.to(poles.dtype), warped)


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
    roots = polynomial_roots(polynomial, ROOT_TOLERANCE, ROOT_MAX_ITERATIONS)
    new_lpc = polynomial_from_roots(warp_pole_angles(roots, alpha))
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


def is_alpha(alpha) -> bool:
    """A coefficient in (0, inf) or a [low, high] pair with 0 < low <= high."""
    try:
        low, high = parse_alpha(alpha)
    except (TypeError, ValueError):
        return False
    return 0 < low <= high and math.isfinite(high)


@dataclass
class McAdamsParameters(Parameters):
    """McAdams' parameters (conf/anonymizer/mcadams.yaml).

    alpha: a number (fixed coefficient, VPC 2020: 0.8) or [low, high] (drawn uniformly per
        utterance or per speaker, following `level`, from the batch seed; VPC 2024: [0.5, 0.9]
        per utterance).
    lpc_order: order of the LPC analysis (VPC: 20); the poles of its all-pole model are the
        ones warped.
    lpc: "levinson" (autocorrelation method, the default) or "burg" (as `librosa.lpc`, the VPC
        B2 code's estimator).
    deterministic: run the compiled CPU kernel whatever the device, so that the output is the
        same bit for bit whatever the batching (on CUDA the batched torch steps can differ in
        the last bit).
    chunk_frames: frames processed together; None: 4096 on CPU, 131072 on CUDA (about 5 GB of
        GPU memory; larger amortises kernel launches further).
    """

    alpha: float | list[float] = setting(0.8, Check("a number > 0 or a [low, high] pair with 0 < low <= high",
                                                    is_alpha))
    lpc_order: int = setting(LPC_ORDER, Check("an integer from 1 to 100", between(1, 100)))
    lpc: str = setting("levinson", choice(LPC_METHODS))
    deterministic: bool = setting(False, BOOLEAN)
    chunk_frames: int | None = setting(None, Check("null or an integer >= 1", optional(integer(1))))


class McAdams(Anonymizer):
    """McAdams-coefficient anonymisation (VPC 2020/2024 baseline B2); its parameters are
    `McAdamsParameters`, with `seed`, `device` (see `Anonymizer`)."""

    parameters = McAdamsParameters
    on_ranks = True  # the copies share only read-only files

    def __init__(self, **settings):
        super().__init__(**settings)
        self.alpha_range = parse_alpha(self.settings.alpha)
        self.lpc_order = self.settings.lpc_order
        self.chunk_frames = self.settings.chunk_frames
        self.lpc = self.settings.lpc
        self.deterministic = self.settings.deterministic

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
    """`0.8` -> (0.8, 0.8); `[0.5, 0.9]` -> (0.5, 0.9); anything else raises TypeError or ValueError."""
    if isinstance(alpha, (bool, str)):
        raise TypeError(f"not a coefficient: {alpha!r}")
    if isinstance(alpha, (int, float)):
        return float(alpha), float(alpha)
    low, high = (float(v) for v in alpha)
    return low, high
