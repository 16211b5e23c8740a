"""What bf16 does to an `ecapa_ssl` attacker's embeddings and EER (issue 35, docs/attacker.md "bf16 WavLM").

Embeds the enrolment and trial utterances of prepared trial lists three ways with a trained
`ecapa_ssl` attacker folder and scores them with `backend=cosine` and `cosine_vpc2026`:

- `fp32`: everything in float32 (VPC 2026's precision);
- `bf16`: bf16 autocast over the ECAPA, WavLM in float32 (`training.precision` /
  `extraction.precision: bf16` with the default `model.wavlm_autocast: false`);
- `bf16+wavlm`: WavLM under the same autocast (`model.wavlm_autocast: true`).

CPU autocast (bfloat16) stands in for CUDA's: the same dtype, other kernels. Prints, per
variant, the per-utterance cosine to `fp32` (min, median) and the ROCCH-EER of every list:

    python benchmarks/bench_ssl_precision.py --attacker <cache>/train/<hash> \\
        --prepared <cache>/prepare/<hash> --lists dev_trials_mixed test_trials_mixed test_trials_f
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from pipeline.asv.embed import load_encoder
from pipeline.asv.scoring import CosineBackend, score_trials
from pipeline.core.layout import manifest_path, trials_path
from pipeline.data.audio import read_audio
from pipeline.data.manifest import read_manifest, read_trials
from pipeline.metrics.eer import eer

BACKENDS = {"cosine": CosineBackend(), "cosine_vpc2026": CosineBackend(enrolment="mean_raw", embedding="sign")}


def embed(encoder, utts, variant: str) -> dict[str, np.ndarray]:
    """Each utterance alone (batching does not change an embedding) under the variant's autocast
    (`embed_utterances` runs CPU extraction in float32 whatever its precision)."""
    encoder.wavlm_autocast = variant == "bf16+wavlm"
    found = {}
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=variant != "fp32"):
        for utt in utts:
            wav = torch.from_numpy(read_audio(utt.path, encoder.sample_rate))[None]
            found[utt.id] = encoder.embed_samples(wav, torch.tensor([wav.shape[1]])).float()[0].numpy()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attacker", type=Path, required=True, help="a trained ecapa_ssl attacker folder")
    parser.add_argument("--prepared", type=Path, required=True, help="the prepare stage's folder")
    parser.add_argument("--lists", nargs="+", required=True, help="trial lists (dev_trials_mixed, test_trials_f, ...)")
    args = parser.parse_args()
    encoder = load_encoder(args.attacker, "cpu")
    lists, needed = {}, {}
    for name in args.lists:
        enroll = read_manifest(manifest_path(args.prepared, f"{name.split('_trials')[0]}_enrolls"))
        lists[name] = (enroll, read_trials(trials_path(args.prepared, name)))
        needed |= {utt.id: utt for utt in [*enroll, *read_manifest(manifest_path(args.prepared, name))]}
    utts = list(needed.values())
    print(f"{len(utts)} utterances, {sum(u.duration for u in utts) / 60:.1f} min, attacker {args.attacker}")
    found = {}
    for variant in ("fp32", "bf16", "bf16+wavlm"):
        started = time.perf_counter()
        found[variant] = embed(encoder, utts, variant)
        cosines = np.array([np.dot(found[variant][u], found["fp32"][u]) / np.linalg.norm(found[variant][u])
                            / np.linalg.norm(found["fp32"][u]) for u in needed])
        print(f"\n{variant}: {time.perf_counter() - started:.0f} s; cosine to fp32 min {cosines.min():.6f} "
              f"median {np.median(cosines):.6f}")
        for backend_name, backend in BACKENDS.items():
            row = []
            for name, (enroll, trials) in lists.items():
                enroll_emb = np.stack([found[variant][u.id] for u in enroll])
                scores = score_trials(backend, enroll, enroll_emb, found[variant], trials)
                target = np.array([t.target for t in trials])
                row.append(f"{name} {100 * eer(scores[target], scores[~target]):.2f}")
            print(f"  {backend_name:15s} EER %: " + ", ".join(row))


if __name__ == "__main__":
    main()
