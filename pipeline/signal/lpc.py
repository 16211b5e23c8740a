"""Linear prediction and all-pole filtering on rows of frames, every step on all rows at once
(torch, any device): LPC by Levinson-Durbin or Burg's method, polynomial roots (Aberth-Ehrlich
iterations, companion-matrix eigenvalues where they do not converge) and back, FIR and all-pole
filters. The McAdams anonymiser (`anonymizers.mcadams`) is built on them.

>>> lpc = levinson_durbin(torch.tensor([[1.0, 0.5, 0.25]], dtype=torch.float64))
>>> lpc.tolist()
[[1.0, -0.5, 0.0]]
"""
from __future__ import annotations

import math

import torch


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
    `librosa.lpc` computes it (see `anonymizers.mcadams_kernel.burg`), all rows at once; a row
    whose reflection coefficient reaches 1 in magnitude keeps the stable polynomial it has."""
    lpc = torch.zeros(windowed.shape[0], order + 1, dtype=windowed.dtype, device=windowed.device)
    lpc[:, 0] = 1.0
    forward, backward = windowed[:, 1:], windowed[:, :-1]
    den = (forward * forward + backward * backward).sum(1)
    tiny = torch.finfo(windowed.dtype).tiny
    active = torch.ones(windowed.shape[0], 1, dtype=torch.bool, device=windowed.device)
    for i in range(order):
        reflection = (-2.0 * (backward * forward).sum(1) / (den + tiny))[:, None]
        active = active & (reflection.abs() < 1.0)
        reflection = torch.where(active, reflection, torch.zeros_like(reflection))
        lpc[:, 1:i + 2] = lpc[:, 1:i + 2] + reflection * lpc[:, :i + 1].flip(1)
        forward, backward = forward + reflection * backward, backward + reflection * forward
        den = (1.0 - reflection[:, 0] ** 2) * den - backward[:, -1] ** 2 - forward[:, 0] ** 2
        forward, backward = forward[:, 1:], backward[:, :-1]
    return lpc


def polynomial_roots(coefficients: torch.Tensor, tolerance: float, max_iterations: int) -> torch.Tensor:
    """Roots of monic polynomials (rows, highest degree first) on any device: Aberth-Ehrlich
    iterations on all rows at once, then, for the rows they leave unconverged, the
    eigenvalues of the companion matrix (as the compiled kernel falls back to LAPACK)."""
    roots, converged = aberth_roots(coefficients, tolerance, max_iterations)
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


def aberth_roots(coefficients: torch.Tensor, tolerance: float,
                 max_iterations: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(roots, converged per row) by simultaneous Aberth-Ehrlich iterations on all rows at
    once (any device).

    Starts on a circle of radius |a_n|^(1/n); a row stops once its largest correction is
    below `tolerance`, so its roots depend on that row alone, not on the batch; a row still
    moving (or not finite) after `max_iterations` sweeps is not converged. Rows z^n get exact
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
    for _ in range(max_iterations):
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
        active = active[~(correction.abs().amax(1) <= tolerance)]  # NaN: still active
    converged = torch.ones(len(coefficients), dtype=torch.bool, device=coefficients.device)
    converged[active] = False
    return roots, converged


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
