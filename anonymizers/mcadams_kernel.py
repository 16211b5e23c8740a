"""McAdams on CPU: the same per-frame algorithm as the batched torch steps of
`anonymizers.mcadams`, compiled with numba and run frame by frame.

On CPU the batched torch steps are bound by memory traffic (every step streams the whole
chunk through the caches) and by LAPACK's eigenvalue solver for the roots (50-60 µs per
frame); here a frame stays in L1 from windowing to resynthesis and the roots come from
Aberth-Ehrlich iterations in scalar arithmetic, about 4x less CPU per frame in all
(README.md, "McAdams speed"). Loops are ordered so that the compiler vectorises them
without reassociating sums (no fast-math), and every frame starts its root search from the
same circle, so a frame's output depends on that frame alone: not on the batch, its order,
the chunking or the thread. The kernel releases the GIL, so chunks in several Python
threads run in parallel. Compiled on first use and cached next to this file (numba's cache).

>>> import numpy as np
>>> roots = np.empty(2, np.complex128)
>>> polynomial_roots(np.array([1.0, 0.0, -0.25]), roots, 1e-12, 80)
True
>>> sorted(roots.real.round(12).tolist())
[-0.5, 0.5]
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

LANES = 8  # independent partial sums in Burg's correlation (see `burg`)


@njit(cache=True, nogil=True)
def overlap_added_frames(signal, frame_index, alphas, window, shift, order, use_burg, white_noise_correction,
                         autocorrelation_floor, real_pole_tolerance, root_tolerance, max_iterations, segment):
    """Anonymise the frames `frame_index` (ascending) of `signal` (frame m: samples from
    m * shift, float64) with one α each, window them and overlap-add them, in order, into
    `segment` (zeros in; sample 0 is sample frame_index[0] * shift of the signal). LPC by
    Burg's method when `use_burg`, else by autocorrelation (regularised r[0]) and
    Levinson-Durbin. The constants are arguments (those of `anonymizers.mcadams`), so that
    numba's cache never keeps stale ones."""
    length = len(window)
    first = frame_index[0] * shift
    windowed = np.zeros(length + order)  # zero tail: lags and filter states read past the end
    autocorrelation = np.empty(order + 1)
    lpc = np.empty(order + 1)
    new_lpc = np.empty(order + 1)
    poles = np.empty(order, np.complex128)
    filtered = np.empty(length + order)
    forward, backward = np.empty(length - 1), np.empty(length - 1)
    for row in range(len(frame_index)):
        start = frame_index[row] * shift
        frame, out = signal[start:start + length], segment[start - first:start - first + length]
        for n in range(length):
            windowed[n] = frame[n] * window[n]
        if use_burg:
            burg(windowed, length, lpc, forward, backward)
        else:
            autocorrelate(windowed, length, autocorrelation)
            autocorrelation[0] = autocorrelation[0] * (1.0 + white_noise_correction) + autocorrelation_floor
            levinson_durbin(autocorrelation, lpc)
        if not polynomial_roots(lpc, poles, root_tolerance, max_iterations):
            poles[:] = companion_eigenvalues(lpc)
        warp_pole_angles(poles, alphas[row], real_pole_tolerance)
        polynomial_from_roots(poles, new_lpc)
        fir_filter(windowed, length, lpc, filtered)
        all_pole_filter(filtered, length, new_lpc)
        for n in range(length):
            out[n] += filtered[n] * window[n]


@njit(cache=True, nogil=True)
def autocorrelate(windowed, length, autocorrelation):
    """r[k] = sum_n x[n] x[n+k] for k = 0..order; `windowed` has `order` zeros after
    `length`. The lag loop is innermost: independent sums, vectorised, each summed in n order
    (here and below, inner loops index views from 0: numba's wraparound handling of computed
    indices such as n + k keeps LLVM from vectorising)."""
    autocorrelation[:] = 0.0
    lags = len(autocorrelation)
    for n in range(length):
        sample, ahead = windowed[n], windowed[n:n + lags]
        for k in range(lags):
            autocorrelation[k] += sample * ahead[k]


@njit(cache=True, nogil=True)
def levinson_durbin(autocorrelation, lpc):
    """LPC polynomial A(z) = 1 + a1 z^-1 + ... from autocorrelation r[0..p] (like
    `anonymizers.mcadams.levinson_durbin`, one row)."""
    order = len(autocorrelation) - 1
    lpc[:] = 0.0
    lpc[0] = 1.0
    error = autocorrelation[0]
    previous = np.empty(order + 1)
    for i in range(1, order + 1):
        acc = 0.0
        for j in range(i):
            acc += lpc[j] * autocorrelation[i - j]
        reflection = -acc / error
        previous[:i] = lpc[:i]
        for m in range(1, i + 1):
            lpc[m] += reflection * previous[i - m]
        error *= 1.0 - reflection * reflection


@njit(cache=True, nogil=True)
def burg(windowed, length, lpc, forward, backward):
    """LPC polynomial A(z) of `windowed[:length]` by Burg's method, step for step as
    `librosa.lpc` computes it (the VPC B2 code's call): reflection coefficient
    k = -2 sum(b f) / (den + tiny) from the forward and backward prediction errors, the
    Levinson update of A, the error update, den by Marple's recursion. One difference: the
    correlation sum(b f) runs in LANES independent partial sums (librosa sums in sample order,
    one dependent add after the other): Burg costs about 3-5 µs per frame more than
    Levinson instead of 10, and the coefficients differ from librosa's by about 1e-10 of the
    largest (tested). Where rounding makes a reflection coefficient reach 1 in magnitude (a
frame of constant samples, e.g. a DC offset in digital silence, drives den to 0), the
recursion stops at the stable polynomial it has: librosa's would go on to an unstable A(z),
whose resynthesis is NaN. `forward` and `backward` are scratch arrays of `length - 1` entries."""
    order = len(lpc) - 1
    tiny = np.finfo(np.float64).tiny
    lpc[:] = 0.0
    lpc[0] = 1.0
    previous = np.empty(order + 1)
    count = length - 1
    den = 0.0
    for n in range(count):
        forward[n] = windowed[n + 1]
        backward[n] = windowed[n]
        den += forward[n] * forward[n] + backward[n] * backward[n]
    head = 0  # forward errors live in forward[head:head + count], backward in backward[:count]
    partial = np.empty(LANES)
    for i in range(order):
        partial[:] = 0.0
        ahead = forward[head:head + count]
        blocks = count - count % LANES
        for n in range(0, blocks, LANES):
            b, f = backward[n:n + LANES], ahead[n:n + LANES]
            for k in range(LANES):
                partial[k] += b[k] * f[k]
        acc = 0.0
        for k in range(LANES):
            acc += partial[k]
        for n in range(blocks, count):
            acc += backward[n] * ahead[n]
        reflection = -2.0 * acc / (den + tiny)
        if not abs(reflection) < 1.0:  # rounding lost the recursion (a flat frame): keep the stable order-i A(z)
            break
        previous[:] = lpc
        for j in range(1, i + 2):
            lpc[j] = previous[j] + reflection * previous[i - j + 1]
        for n in range(count):
            f = ahead[n]
            ahead[n] = f + reflection * backward[n]
            backward[n] += reflection * f
        den = (1.0 - reflection * reflection) * den - backward[count - 1] ** 2 - forward[head] ** 2
        head += 1
        count -= 1


@njit(cache=True, nogil=True)
def polynomial_roots(coefficients, roots, tolerance, max_iterations):
    """Roots of a monic real polynomial (highest degree first) into `roots` by Aberth-Ehrlich
    iterations with Gauss-Seidel updates (each new root is used at once by the ones after it)
    and per-root stopping once a root moves by at most `tolerance`. Returns False when some
    root still moved after `max_iterations` sweeps. z^n gets exact zeros.

    Each sweep first evaluates p and p' at every root by Horner's rule, all roots together
    (independent chains: vectorised), then updates the roots one after the other."""
    degree = len(coefficients) - 1
    if np.all(coefficients[1:] == 0.0):
        roots[:] = 0.0
        return True
    real = np.empty(degree)
    imag = np.empty(degree)
    value_re, value_im = np.empty(degree), np.empty(degree)
    slope_re, slope_im = np.empty(degree), np.empty(degree)
    done = np.zeros(degree, np.bool_)
    # Start on a circle of radius |a_n|^(1/n) (the geometric mean of the roots' moduli),
    # turned off the real axis.
    radius = min(max(abs(coefficients[degree]) ** (1.0 / degree), 0.3), 1.0)
    for i in range(degree):
        angle = 2.0 * math.pi * i / degree + 0.4
        real[i] = radius * math.cos(angle)
        imag[i] = radius * math.sin(angle)
    moving = degree
    sweeps = 0
    while moving and sweeps < max_iterations:
        sweeps += 1
        value_re[:] = 1.0
        value_im[:] = 0.0
        slope_re[:] = 0.0
        slope_im[:] = 0.0
        for k in range(1, degree + 1):
            for i in range(degree):
                x, y = real[i], imag[i]
                new_slope_re = slope_re[i] * x - slope_im[i] * y + value_re[i]
                slope_im[i] = slope_re[i] * y + slope_im[i] * x + value_im[i]
                slope_re[i] = new_slope_re
                new_value_re = value_re[i] * x - value_im[i] * y + coefficients[k]
                value_im[i] = value_re[i] * y + value_im[i] * x
                value_re[i] = new_value_re
        moving = 0
        for i in range(degree):
            if done[i]:
                continue
            x, y = real[i], imag[i]
            norm = slope_re[i] * slope_re[i] + slope_im[i] * slope_im[i]
            newton_re = (value_re[i] * slope_re[i] + value_im[i] * slope_im[i]) / norm
            newton_im = (value_im[i] * slope_re[i] - value_re[i] * slope_im[i]) / norm
            # Repulsion: sum over the other roots of 1 / (z - z_j), in two branch-free loops.
            repulsion_re, repulsion_im = 0.0, 0.0
            for j in range(i):
                dx, dy = x - real[j], y - imag[j]
                inverse = 1.0 / (dx * dx + dy * dy)
                repulsion_re += dx * inverse
                repulsion_im -= dy * inverse
            for j in range(i + 1, degree):
                dx, dy = x - real[j], y - imag[j]
                inverse = 1.0 / (dx * dx + dy * dy)
                repulsion_re += dx * inverse
                repulsion_im -= dy * inverse
            # Aberth step: newton / (1 - newton * repulsion).
            q_re = 1.0 - (newton_re * repulsion_re - newton_im * repulsion_im)
            q_im = -(newton_re * repulsion_im + newton_im * repulsion_re)
            q_norm = q_re * q_re + q_im * q_im
            step_re = (newton_re * q_re + newton_im * q_im) / q_norm
            step_im = (newton_im * q_re - newton_re * q_im) / q_norm
            real[i] = x - step_re
            imag[i] = y - step_im
            if step_re * step_re + step_im * step_im <= tolerance * tolerance:
                done[i] = True
            else:
                moving += 1
    for i in range(degree):
        roots[i] = complex(real[i], imag[i])
    return moving == 0


@njit(cache=True, nogil=True)
def companion_eigenvalues(coefficients):
    """Roots as eigenvalues of the companion matrix (LAPACK, like `np.roots`): the fallback
    for a polynomial the Aberth iterations leave unconverged. The matrix is complex because
    numba's `eigvals` refuses a real matrix whose eigenvalues are not all real."""
    degree = len(coefficients) - 1
    companion = np.zeros((degree, degree), np.complex128)
    companion[0] = -coefficients[1:]
    for i in range(1, degree):
        companion[i, i - 1] = 1.0
    return np.linalg.eigvals(companion)


@njit(cache=True, nogil=True)
def warp_pole_angles(poles, alpha, real_pole_tolerance):
    """Each complex pole's angle φ -> sign(φ) min(|φ|^α, π) at the same radius; real poles
    (|imag| <= real_pole_tolerance) are kept, made exactly real."""
    for i in range(len(poles)):
        pole = poles[i]
        if abs(pole.imag) <= real_pole_tolerance:
            poles[i] = pole.real
        else:
            angle = math.atan2(pole.imag, pole.real)
            new_angle = math.copysign(min(abs(angle) ** alpha, math.pi), angle)
            radius = abs(pole)
            poles[i] = complex(radius * math.cos(new_angle), radius * math.sin(new_angle))


@njit(cache=True, nogil=True)
def polynomial_from_roots(roots, coefficients):
    """Real parts of the coefficients of prod_k (z - roots[k]), highest degree first."""
    expanded = np.zeros(len(roots) + 1, np.complex128)
    expanded[0] = 1.0
    for k in range(len(roots)):
        for m in range(k + 1, 0, -1):
            expanded[m] -= roots[k] * expanded[m - 1]
    coefficients[:] = expanded.real


@njit(cache=True, nogil=True)
def fir_filter(windowed, length, taps, out):
    """out[n] = sum_k taps[k] x[n-k], zero initial state. The sample loop is innermost
    (vectorised); each sample is summed in tap order."""
    out[:length] = 0.0
    for k in range(len(taps)):
        tap, shifted, source = taps[k], out[k:length], windowed[:length - k]
        for n in range(length - k):
            shifted[n] += tap * source[n]


@njit(cache=True, nogil=True)
def all_pole_filter(signal, length, denominator):
    """signal[:length] -> signal / A(z) in place (monic A, zero initial state), in scatter
    form: once y[n] is final it adds its share to the next p samples (vectorised);
    `signal` has p spare entries after `length`."""
    feedback = denominator[1:]
    order = len(feedback)
    signal[length:] = 0.0
    for n in range(length - 1):
        value, ahead = signal[n], signal[n + 1:n + 1 + order]
        for j in range(order):
            ahead[j] -= feedback[j] * value
