"""vpeval's ρF0 against the VoicePrivacy 2022 code, utterance by utterance.

    python benchmarks/compare_vpc_pitch.py --vpc-file PATH/baseline/local/pitch_correlation.py \\
        ORIGINAL.jsonl ANONYMISED.jsonl [ORIGINAL.jsonl ANONYMISED.jsonl ...]

`--vpc-file` is `baseline/local/pitch_correlation.py` of a Voice-Privacy-Challenge-2022 checkout;
only its function `pitchCorr` is taken from it (the module imports kaldiio to read wav.scp
lists), and called as the toolkit calls it: on the int16 samples of the original and the
anonymised utterance. Each pair of arguments is an original manifest and its anonymised
version (vpeval manifests: a prepare-stage `manifests/<list>.jsonl` and the anonymize-stage
`manifest.jsonl` made from it); utterances are paired by id. Needs praat-parselmouth (the praat
extra; `make setup` installs it with the test extra) and pandas, which the toolkit's function
uses and vpeval does not install (the figures of docs/utility.md were run with pandas 2.2.3 on
PYTHONPATH).

Prints, per pair of manifests, the mean and standard deviation of ρF0 over its utterances by
the toolkit's `pitchCorr` and by vpeval's three other settings, so that the difference splits
into its two causes (`utility.pitch_tracker`, `utility.pitch_rule`):

- `VPC 2022`: the toolkit's `pitchCorr` (Praat's F0, the anonymised track shifted by the lag
  of the largest cross-correlation, unvoiced frames entering the correlation as zeros);
- `praat, vpc2022`: vpeval with the toolkit's tracker and rule (should equal the first);
- `praat, voiced`: the toolkit's tracker, vpeval's rule (frames voiced in both, no shift);
- `yin_viterbi, voiced`: vpeval's default, what a run reports unless told otherwise;
- `yin, voiced`: the default until 2026-11-29 (YIN frame by frame);

and, utterance by utterance, the largest |praat, vpc2022 - VPC 2022|, and the median and largest
|yin_viterbi, voiced - VPC 2022| with their Pearson correlation.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import parselmouth
import soundfile
from scipy.interpolate import interp1d

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.vpc_code import toolkit_function  # noqa: E402
from pipeline.data.manifest import read_manifest  # noqa: E402
from pipeline.metrics.pitch_correlation import correlation, track  # noqa: E402

RATE = 16000


def vpc_pitch_corr(path: Path):
    """The function `pitchCorr` of the VPC file, compiled alone with the names it uses."""
    return toolkit_function(path, "pitchCorr", {"np": np, "pd": pd, "parselmouth": parselmouth, "interp1d": interp1d},
                            "VPC 2022's baseline/local/pitch_correlation.py")


def int16_samples(path: str) -> np.ndarray:
    samples, rate = soundfile.read(path, dtype="int16")
    if rate != RATE:
        raise SystemExit(f"{path}: {rate} Hz; the toolkit asserts {RATE} Hz")
    return samples


SETTINGS = (("praat", "vpc2022"), ("praat", "voiced"), ("yin_viterbi", "voiced"), ("yin", "voiced"))
DEFAULT = "yin_viterbi, voiced"


def compare(original: Path, anonymised: Path, pitch_corr) -> dict[str, np.ndarray]:
    """ρF0 of every utterance: {"VPC 2022": ..., "<tracker>, <rule>": ...}."""
    versions = {u.id: u for u in read_manifest(anonymised)}
    rows = []
    for utt in read_manifest(original):
        if utt.id not in versions:
            raise SystemExit(f"{anonymised}: no anonymised version of {utt.id}")
        a, b = int16_samples(utt.path), int16_samples(versions[utt.id].path)
        tracks = {tracker: [track((x / 2**15).astype(np.float32), RATE, tracker) for x in (a, b)]
                  for tracker in dict.fromkeys(tracker for tracker, _ in SETTINGS)}
        rows.append([pitch_corr(a, b), *(correlation(*tracks[tracker], rule) for tracker, rule in SETTINGS)])
    values = np.array(rows, dtype=np.float64)
    return {"VPC 2022": values[:, 0], **{f"{t}, {r}": values[:, i + 1] for i, (t, r) in enumerate(SETTINGS)}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vpc-file", type=Path, required=True)
    parser.add_argument("manifests", type=Path, nargs="+", help="ORIGINAL.jsonl ANONYMISED.jsonl, repeated")
    args = parser.parse_args()
    if len(args.manifests) % 2:
        parser.error("manifests come in pairs: ORIGINAL.jsonl ANONYMISED.jsonl")
    pitch_corr = vpc_pitch_corr(args.vpc_file)
    print(f"| original list | utterances | VPC 2022 | {' | '.join(f'{t}, {r}' for t, r in SETTINGS)} | largest "
          f"|praat, vpc2022 - VPC| | median / largest |{DEFAULT} - VPC| | Pearson r |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for original, anonymised in zip(args.manifests[::2], args.manifests[1::2]):
        found = compare(original, anonymised, pitch_corr)
        cells = [f"{v.mean():.3f} ± {v.std():.3f}" for v in found.values()]
        exact = np.abs(found["praat, vpc2022"] - found["VPC 2022"]).max()
        gap = np.abs(found[DEFAULT] - found["VPC 2022"])
        r = np.corrcoef(found[DEFAULT], found["VPC 2022"])[0, 1]
        print(f"| {original.stem} | {len(gap)} | {' | '.join(cells)} | {exact:.1e} | {np.median(gap):.3f} / "
              f"{gap.max():.3f} | {r:.2f} |")


if __name__ == "__main__":
    main()
