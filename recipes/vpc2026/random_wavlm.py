"""Write a random-weight WavLM (a Hugging Face folder) for `+experiment=vpc2026_synthetic`, which
checks the VPC 2026 pipeline on the built-in corpus without VPC's WavLM-Large:

    python recipes/vpc2026/random_wavlm.py /tmp/wavlm_tiny
    vpeval +experiment=vpc2026_synthetic attacker.model.wavlm=/tmp/wavlm_tiny

Sizes as `attacker=ecapa_ssl_tiny` expects (hidden size 32 = its first channel count, 2 layers).
"""
import argparse
import runpy
from pathlib import Path

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_attacker.py"

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--layers", type=int, default=2)
    args = parser.parse_args()
    print(runpy.run_path(str(BENCHMARK))["random_wavlm"](args.folder, args.hidden, args.layers))
