"""End-to-end semi-informed attack on the built-in synthetic corpus: wall time per stage.

Generates and prepares the corpus (timed on its own), then runs the default experiment
(McAdams, OO and AA attacks, dev and test) through `run_experiment` in a fresh data folder
and prints the attack's wall time (every stage after preparation), the time spent building
each stage kind (from the cache's stage events) and the EERs, so speed and signal are read
off the same run.

    python benchmarks/bench_semi_informed.py                              # CPU: tiny corpus
    python benchmarks/bench_semi_informed.py --size small                 # the default corpus
    python benchmarks/bench_semi_informed.py --size train-clean-360 --attacker ecapa \\
        --device cuda --workdir /scratch/vpeval-bench                     # H200: 921 speakers, ~364 h
    python benchmarks/bench_semi_informed.py ... distributed.gpus_per_node=8   # extra overrides
"""
from __future__ import annotations

import argparse
import datetime
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import torch

from pipeline.app.experiment import run_experiment
from pipeline.core.cache import Cache
from pipeline.core.config import compose
from pipeline.core.schemas import Data, typed
from pipeline.metrics.results import RunSummary
from pipeline.stages import prepare, validate

# Corpus sizes as overrides of conf/data/synthetic.yaml. train-clean-360: 921 speakers (439 f,
# 482 m), 104,014 utterances, 363.6 h (12.6 s on average); dev/test-clean: 40 speakers each.
SIZES = {
    "tiny": ["data=synthetic_tiny"],
    "small": ["data=synthetic"],
    "train-clean-360": [
        "data=synthetic", "data.generate.duration=[10.0,15.2]",
        "data.generate.subsets.train-synth={female: 439, male: 482, utterances: 113}",
        "data.generate.subsets.dev-synth={female: 20, male: 20, utterances: 68}",
        "data.generate.subsets.test-synth={female: 20, male: 20, utterances: 66}",
    ],
}
DEFAULT_ATTACKER = {"tiny": "ecapa_tiny", "small": "ecapa_small", "train-clean-360": "ecapa"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="tiny")
    parser.add_argument("--attacker", help="conf/attacker config (default: by size)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--workdir", help="data folder (corpus, cache, runs); default: a temporary folder")
    parser.add_argument("overrides", nargs="*", help="more Hydra overrides, e.g. distributed.gpus_per_node=2")
    args = parser.parse_args()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench_semi_informed_"))
    overrides = [*SIZES[args.size], f"attacker={args.attacker or DEFAULT_ATTACKER[args.size]}",
                 f"device={args.device}", f"paths.data={workdir}", "name=bench", *args.overrides]
    cfg = compose(overrides)
    print(f"# {datetime.datetime.now().isoformat(timespec='seconds')}  {' '.join(sys.argv)}")
    print(f"# torch {torch.__version__}, {torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU'}, "
          f"{torch.get_num_threads()} threads; overrides: {' '.join(overrides)}")
    start = time.perf_counter()
    cache = Cache(Path(cfg.paths.cache))
    validate.run(prepare.run(typed(cfg.data, Data, "data"), cache), cache, tuple(cfg.eval_splits))
    setup = time.perf_counter() - start
    start = time.perf_counter()
    report = run_experiment(cfg, workdir / "runs" / "bench")
    attack = time.perf_counter() - start
    results = RunSummary.from_json(report / "results.json")
    seconds, counts = defaultdict(float), defaultdict(int)
    for event in results.stages:
        if not event.reused:
            seconds[event.stage] += event.seconds
            counts[event.stage] += 1
    for stage in seconds:
        print(f"{stage:>10}: {seconds[stage]:8.1f} s  ({counts[stage]} built)")
    print(f"corpus generation + preparation: {setup:.1f} s; semi-informed attack (every later stage): {attack:.1f} s")
    for record in results.records:
        print(f"{record.attack} {record.set:>7}: EER {100 * record.eer:.1f} %")
    print(report)


if __name__ == "__main__":
    main()
