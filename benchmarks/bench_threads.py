"""Threads on a loaded machine: training steps of the tiny attacker at torch's default thread
count against the count `pipeline.runtime.cpus` computes, while other processes keep CPUs busy.

The job is given `--cpus` CPUs the way a cluster gives them without binding the job to cores
(SLURM_CPUS_PER_TASK, or a cgroup quota): torch's default still starts one thread per core of
the affinity mask; vpeval sets the allocation's count. `--load` busy processes (pure-Python
loops) stand for the other jobs on the node. Each measurement runs in a fresh process (torch
fixes its thread pool at start), the two settings alternate `--repeats` times; the median
seconds per step is printed. Under three minutes on the 2-core development machine:

    python benchmarks/bench_threads.py                 # --cpus 1 --load 1 --steps 12 --repeats 2
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def steps_per_second(mode: str, steps: int) -> dict:
    """In this process: `steps` training steps (forward, backward, Adam) of ecapa_tiny on
    random crops after one warm-up step; torch threads left at their default or set by
    pipeline.runtime.cpus."""
    import logging

    import torch
    from hydra.utils import instantiate

    from pipeline.asv.model import AAMSoftmaxHead
    from pipeline.core.config import compose
    from pipeline.runtime.cpus import use_usable_cpus

    if mode == "computed":
        use_usable_cpus(logging.getLogger("bench"))
    cfg = compose(["attacker=ecapa_tiny"]).attacker
    torch.manual_seed(0)
    model = instantiate(cfg.model)
    head = AAMSoftmaxHead(model.embedding_dim, 20)
    optimizer = torch.optim.Adam([*model.parameters(), *head.parameters()], lr=1e-3)
    batch = int(cfg.training.batch_size)
    wavs = torch.randn(batch, round(float(cfg.training.crop_seconds) * 16000)) * 0.1
    labels = torch.randint(0, 20, (batch,))

    def step():
        loss, _ = head(model(wavs), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    step()
    started = time.perf_counter()
    for _ in range(steps):
        step()
    return {"mode": mode, "threads": torch.get_num_threads(), "seconds_per_step": (time.perf_counter() - started) / steps}


def measure(mode: str, cpus: int, steps: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SLURM_CPUS_PER_TASK": str(cpus)}
    env.pop("OMP_NUM_THREADS", None)
    done = subprocess.run([sys.executable, __file__, "--worker", mode, "--steps", str(steps)], env=env, cwd=ROOT,
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpus", type=int, default=1, help="the job's allocation (SLURM_CPUS_PER_TASK)")
    parser.add_argument("--load", type=int, default=1, help="busy processes beside the job")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--worker", choices=("default", "computed"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(steps_per_second(args.worker, args.steps)))
        return
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.load)]
    try:
        results = [measure(mode, args.cpus, args.steps) for _ in range(args.repeats) for mode in ("default", "computed")]
    finally:
        for process in busy:
            process.kill()
    print(f"{datetime.date.today()}  {platform.processor() or platform.machine()}, {len(os.sched_getaffinity(0))} "
          f"CPUs in the affinity mask, job allocation {args.cpus} CPU(s), {args.load} busy process(es) beside it, "
          f"load average (1 min) at the end: {os.getloadavg()[0]:.1f}")
    for mode in ("default", "computed"):
        runs = [r for r in results if r["mode"] == mode]
        per_step = [r["seconds_per_step"] for r in runs]
        print(f"{mode:>8}: {runs[0]['threads']} torch thread(s), median {statistics.median(per_step):.3f} s/step "
              f"(runs: {', '.join(f'{s:.3f}' for s in per_step)}; {args.steps} steps of ecapa_tiny each)")


if __name__ == "__main__":
    main()
