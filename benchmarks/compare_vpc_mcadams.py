"""vpeval's McAdams against the VoicePrivacy 2024 B2 code on one utterance, end to end.

    python benchmarks/compare_vpc_mcadams.py --vpc-file PATH/anonymise_dir_mcadams_rand_seed.py
    python benchmarks/compare_vpc_mcadams.py --vpc-file ... --wav some_16k_utterance.wav --alpha 0.7

`--vpc-file` is `anonymization/modules/mcadams/anonymise_dir_mcadams_rand_seed.py` of a
Voice-Privacy-Challenge-2024 checkout; only its function `anonym_v2` is taken from it (the
module itself starts a multiprocessing context and imports the toolkit's `utils`), and run as
the toolkit runs it: on the utterance's float samples, the result scaled to the int16 peak
32766 and written as int16 (read back here as int16 / 32768). Needs librosa (test extra).

Prints, for vpeval with `lpc: levinson` and `lpc: burg` at the same α, where the outputs
differ: the level (VPC normalises to full scale, vpeval keeps the input's peak), the edges
(VPC's first 10 ms and its tail after the last complete frame), and the interior: the
signal-to-difference ratio after the best gain, in dB (higher: closer; int16 quantisation
alone allows about 90 dB at full scale).
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import librosa
import librosa.core.spectrum  # noqa: F401  (anonym_v2 calls its __overlap_add, as the VPC module imports it)
import numpy as np
import scipy.signal
import soundfile
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: tests/oracles/
from anonymizers.mcadams import frame_geometry, mcadams_waves  # noqa: E402
from benchmarks.vpc_code import toolkit_function  # noqa: E402
from tests.oracles.signals import speech_like  # noqa: E402

RATE = 16000


def vpc_anonym_v2(path: Path):
    """The function `anonym_v2` of the VPC file, compiled alone with the names it uses."""
    return toolkit_function(path, "anonym_v2", {"np": np, "scipy": scipy, "librosa": librosa},
                            "VPC 2024's anonymise_dir_mcadams_rand_seed.py")


def vpc_output(anonym_v2, wave: np.ndarray, alpha: float) -> np.ndarray:
    """The toolkit's `process_wav` without the files: anonymise, scale to int16, read back."""
    samples = anonym_v2(freq=RATE, samples=wave, winLengthinms=20, shiftLengthinms=10, lp_order=20, mcadams=alpha)
    quantised = (samples / np.max(np.abs(samples)) * (np.iinfo(np.int16).max - 1)).astype(np.int16)
    return quantised / (np.iinfo(np.int16).max + 1)


def difference_db(ours: np.ndarray, theirs: np.ndarray) -> tuple[float, float]:
    """(best gain g for `theirs`, 10 log10(|ours|^2 / |ours - g theirs|^2))."""
    gain = float(ours @ theirs / (theirs @ theirs))
    residual = ours - gain * theirs
    return gain, 10 * math.log10((ours @ ours) / max(residual @ residual, 1e-300))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vpc-file", type=Path, required=True, help="VPC 2024's anonymise_dir_mcadams_rand_seed.py")
    parser.add_argument("--wav", type=Path, help="a 16 kHz mono utterance (default: 4.005 s of speech-like audio)")
    parser.add_argument("--alpha", type=float, default=0.8)
    args = parser.parse_args()
    anonym_v2 = vpc_anonym_v2(args.vpc_file)
    if args.wav:
        wave, rate = soundfile.read(args.wav, dtype="float32")
        if rate != RATE or wave.ndim != 1:
            raise SystemExit(f"{args.wav}: needs 16 kHz mono, got {rate} Hz, shape {wave.shape}")
    else:
        wave = speech_like(4.005, 3)
    win_length, shift = frame_geometry(RATE)
    frames = 1 + (len(wave) - win_length) // shift
    covered = (frames - 1) * shift + win_length  # VPC: nothing after the last complete frame
    interior = slice(win_length, covered - win_length)
    theirs = vpc_output(anonym_v2, wave, args.alpha)
    source = args.wav or "speech_like(4.005, seed=3)"
    print(f"{source}: {len(wave) / RATE:.2f} s, input peak {np.abs(wave).max():.3f}, alpha {args.alpha}")
    print(f"VPC 2024 B2: output peak {np.abs(theirs).max():.3f} (full scale), {len(wave) - covered} tail samples "
          f"silent, first {shift} samples under one frame only")
    for lpc in ("levinson", "burg"):
        (ours,) = mcadams_waves([torch.from_numpy(wave)], [args.alpha], RATE, lpc=lpc)
        ours = ours.numpy()
        gain, interior_db = difference_db(ours[interior], theirs[interior])
        _, head_db = difference_db(ours[:shift], theirs[:shift])
        print(f"vpeval lpc={lpc:8s}: output peak {np.abs(ours).max():.3f}; interior "
              f"({interior.start}..{interior.stop}): {interior_db:5.1f} dB signal/difference after gain {gain:.3f}; "
              f"first {shift} samples: {head_db:5.1f} dB")


if __name__ == "__main__":
    main()
