"""Scale rehearsal: a semi-informed attack on a LibriSpeech-shaped corpus, time and memory per stage.

Writes a LibriSpeech tree through the built-in synthesiser (`pipeline.data.synthetic`):
train-clean-360's speakers (439 f, 482 m) with 113 utterances each (104,073; the real subset
has 104,014), and dev-clean / test-clean of VPC's size (40 speakers, 68 / 66 utterances each:
2,720 / 2,640; LibriSpeech 2,703 / 2,620), every utterance `--seconds` long. `--scale` shrinks
the training speakers (the evaluation sets keep their size). It then runs, through the
pipeline's own stage functions and `Experiment` (`data=librispeech`, McAdams, `ecapa_tiny`, one
epoch, the AA condition), prepare, validate, anonymisation, split, training, extraction and
scoring with every metric, and prints per stage: wall time, what it processed, time per item,
its CPU time (this process and its finished worker processes; validation's decoding workers
belong to a forkserver and are not counted), the peak RSS of this process in the stage (VmHWM,
reset before each stage; it counts the pages of the memory-mapped training cache that were
read) and of its largest worker process, and the disk use of the corpus and of each cache stage.

Several scales run one after the other, each in its own process (memory figures stay
apart), followed by a table of time per item by scale: a stage whose time per item grows
with the size is not linear.

    python benchmarks/bench_scale.py --scale 0.02 0.05 0.1 --workdir /tmp/scale   # rehearsals
    python benchmarks/bench_scale.py --scale 1 --workdir /scratch/scale           # full size
    python benchmarks/bench_scale.py --scale 1 --utterances 12 --eval-utterances 20 --workdir /tmp/gc2/scale \\
        device=cuda attacker=ecapa attacker.training.precision=bf16 attacker.extraction.precision=bf16   # on a GPU
    python benchmarks/bench_scale.py --scale 0.02 --utterances 4 --eval-utterances 4 --random-wavlm \\
        --workdir /tmp/scale_ssl attacker=ecapa_ssl_tiny   # ecapa_ssl from scratch over a random WavLM

(`device=cpu` unless an override says otherwise; every stage then uses the experiment's device.)
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import runpy
import subprocess
import sys
import time
from pathlib import Path

import torch
from omegaconf import OmegaConf

from pipeline.app.experiment import Experiment
from pipeline.core.cache import Cache
from pipeline.core.config import compose
from pipeline.core.schemas import Data, typed
from pipeline.data.manifest import GENDERS, read_manifest
from pipeline.data.synthetic import generate_corpus
from pipeline.stages import prepare, split, train, validate

TRAIN_SPEAKERS = {"female": 439, "male": 482}  # train-clean-360
TRAIN_UTTERANCES = 113  # per speaker: 921 x 113 = 104,073 (train-clean-360: 104,014)
EVAL_UTTERANCES = {"dev-clean": 68, "test-clean": 66}  # per speaker, 20 f + 20 m each


class Stages:
    """Runs stages one at a time and keeps, for each, seconds, items and peak memory."""

    def __init__(self):
        self.rows: list[dict] = []

    def run(self, name: str, action, count, unit: str = "utt"):
        """`action()`; `count(result)` gives the items it processed (utterances, crops, trials)."""
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
        workers_before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        start, cpu = time.perf_counter(), cpu_seconds()
        result = action()
        seconds, cpu = time.perf_counter() - start, cpu_seconds() - cpu
        gpu = f", GPU {torch.cuda.max_memory_allocated() / 2**20:.0f} MiB" if torch.cuda.is_available() else ""
        hwm = int(re.search(r"VmHWM:\s+(\d+) kB", Path("/proc/self/status").read_text()).group(1))
        workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        items = count(result)
        worker_peak = workers / 1024 if workers > workers_before else None
        self.rows.append({"stage": name, "seconds": seconds, "cpu_seconds": cpu, "items": items, "unit": unit,
                          "peak_mib": hwm / 1024, "worker_peak_mib": worker_peak})
        row = self.rows[-1]
        per_item = f"{1e3 * seconds / items:8.3f} ms/{unit}" if items else ""
        worker = f", worker {row['worker_peak_mib']:.0f} MiB" if row["worker_peak_mib"] else ""
        print(f"== {name:<16} {seconds:8.1f} s  {cpu:8.1f} s CPU  {items:9d} {unit:<6} {per_item}  "
              f"peak RSS {row['peak_mib']:.0f} MiB{worker}{gpu}", flush=True)
        return result


def cpu_seconds() -> float:
    """User + system CPU time of this process and its finished workers."""
    usages = map(resource.getrusage, (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return sum(usage.ru_utime + usage.ru_stime for usage in usages)


def disk_use(path: Path) -> int:
    """Bytes allocated under `path` (hard links counted once)."""
    seen, total = set(), 0
    for folder, _, files in os.walk(path):
        for name in files:
            info = os.lstat(os.path.join(folder, name))
            if (info.st_dev, info.st_ino) not in seen:
                seen.add((info.st_dev, info.st_ino))
                total += info.st_blocks * 512
    return total


def subsets(scale: float, utterances: int, eval_speakers: int, eval_utterances: int | None) -> dict:
    """The synthesiser's `subsets`: training speakers scaled by `scale` (both genders kept)."""
    train = {gender: max(1, round(n * scale)) for gender, n in TRAIN_SPEAKERS.items()}
    evaluation = {name: {"female": eval_speakers // 2, "male": eval_speakers - eval_speakers // 2,
                         "utterances": eval_utterances or n} for name, n in EVAL_UTTERANCES.items()}
    return {"train-clean-360": {**train, "utterances": utterances}, **evaluation}


def rehearse(args, scale: float) -> dict:
    """Every stage at one scale; returns the rows and the disk use."""
    work = Path(args.workdir) / f"scale-{scale:g}"
    root = work / "LibriSpeech"
    overrides = ["data=librispeech", f"data.root={root}", "anonymizer=mcadams", "attacker=ecapa_tiny",
                 "attacker.training.epochs=1", "device=cpu", f"paths.data={work}", "name=bench_scale", *args.overrides]
    if args.random_wavlm:  # ecapa_ssl from scratch: its WavLM random, no fine-tuning start
        model = compose(overrides).attacker.model
        random_wavlm = runpy.run_path(str(Path(__file__).with_name("bench_attacker.py")))["random_wavlm"]
        wavlm = random_wavlm(work / "wavlm", int(model.channels[0]), int(model.wavlm_layers))
        overrides += [f"attacker.model.wavlm={wavlm}", "attacker.finetune=false"]
    cfg = compose(overrides)
    OmegaConf.update(cfg, "attacks", {"AA": cfg.attacks.AA}, merge=False)  # the semi-informed attack alone
    cache, stages = Cache(Path(cfg.paths.cache)), Stages()
    plan = subsets(scale, args.utterances, args.eval_speakers, args.eval_utterances)
    files = sum((s["female"] + s["male"]) * s["utterances"] for s in plan.values())
    stages.run("generate", lambda: generate_corpus(root, seed=0, subsets=plan, duration=(args.seconds, args.seconds),
                                                   workers=args.workers), lambda _: files)
    prepared = stages.run("prepare", lambda: prepare.run(typed(cfg.data, Data, "data"), cache), lambda _: files)
    stages.run("validate", lambda: validate.run(prepared, cache, tuple(cfg.eval_splits)), lambda _: files)
    experiment = Experiment(cfg)  # prepared and validated: both reused
    eval_lists = [f"{s}_enrolls" for s in cfg.eval_splits] + [f"{s}_trials_{g}" for s in cfg.eval_splits
                                                                for g in GENDERS]
    anonymized = lambda name: experiment.data("anonymized", name, experiment.evaluated)  # noqa: E731
    training = stages.run("anonymize train", lambda: anonymized("train"), lambda m: len(read_manifest(m)))
    stages.run("anonymize eval", lambda: [anonymized(name) for name in eval_lists],
               lambda ms: sum(len(read_manifest(m)) for m in ms))
    held_out = stages.run("split", lambda: split.run(experiment.split, training, cache, seed=cfg.seed),
                          lambda _: len(read_manifest(training)))
    model = stages.run("train (1 epoch)", lambda: train.run(experiment.attacker_settings, held_out, cache,
                                                            seed=cfg.seed, device=experiment.device),
                       lambda out: json.loads((out / "training_log.jsonl").read_text().splitlines()[-1])["crops"],
                       unit="crop")
    if experiment.attacker("anonymized") != (model, held_out):  # the stages above, reused from the cache
        raise SystemExit("the experiment's attacker is not the one timed above")
    embedded = [anonymized(name) for name in eval_lists] + sorted(
        p for p in (held_out / "manifests").glob("val_*.jsonl"))
    stages.run("extract", lambda: [experiment.embed(model, m) for m in embedded],
               lambda _: sum(len(read_manifest(m)) for m in embedded))
    records = stages.run("score + metrics", experiment.records,
                         lambda _: sum(len(Path(scores).read_text().splitlines())
                                       for scores in experiment.score_files.values()), unit="trial")
    disk = {"corpus": disk_use(root), **{p.name: disk_use(p) for p in sorted(Path(cfg.paths.cache).iterdir())}}
    print("disk use: " + ", ".join(f"{name} {size / 2**20:.0f} MiB" for name, size in disk.items()))
    for record in records:
        print(f"{record.attack} {record.set:>7}: EER {100 * record.eer:.1f} %")
    return {"scale": scale, "rows": stages.rows, "disk": disk}


def compare(results: list[dict]) -> None:
    """Wall and CPU time per item of every stage at every scale, and their growth from the
    smallest scale to the largest (CPU time is the steadier on a shared machine)."""
    results = sorted(results, key=lambda r: r["scale"])
    print("\nms per item, wall / CPU, by scale; growth = largest scale / smallest")
    print(f"{'stage':<16}" + "".join(f"{'scale ' + format(r['scale'], 'g'):>20}" for r in results) + "   growth")
    for i, row in enumerate(results[0]["rows"]):
        wall, cpu = ([1e3 * r["rows"][i][key] / max(1, r["rows"][i]["items"]) for r in results]
                     for key in ("seconds", "cpu_seconds"))
        print(f"{row['stage']:<16}" + "".join(f"{w:11.3f} / {c:6.3f}" for w, c in zip(wall, cpu))
              + f"   {wall[-1] / wall[0]:.2f}x / {cpu[-1] / max(cpu[0], 1e-9):.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, nargs="+", default=[1.0], help="fractions of the training speakers")
    parser.add_argument("--utterances", type=int, default=TRAIN_UTTERANCES, help="per training speaker")
    parser.add_argument("--seconds", type=float, default=1.0, help="duration of every utterance")
    parser.add_argument("--eval-speakers", type=int, default=40, help="per evaluation subset (VPC: 40)")
    parser.add_argument("--eval-utterances", type=int, help="per evaluation speaker (default: 68 dev, 66 test)")
    parser.add_argument("--workers", type=int, help="synthesiser processes (default: one per core; 1: in-process)")
    parser.add_argument("--workdir", type=Path, required=True, help="corpus and cache, one folder per scale")
    parser.add_argument("--json", type=Path, help="write this scale's figures here (used with several scales)")
    parser.add_argument("--random-wavlm", action="store_true",
                        help="give an ecapa_ssl attacker a random-weight WavLM of its sizes, trained from scratch")
    parser.add_argument("overrides", nargs="*", help="more Hydra overrides, e.g. data.protocol.enroll_utterances=2")
    args = parser.parse_args()
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} {platform.machine()}, {len(os.sched_getaffinity(0))} core(s), "
          f"load average {os.getloadavg()[0]:.1f}, torch {torch.__version__} ({torch.get_num_threads()} threads): "
          f"{' '.join(sys.argv[1:])}", flush=True)
    if len(args.scale) == 1:
        result = rehearse(args, args.scale[0])
        if args.json:
            args.json.write_text(json.dumps(result))
        return
    results = []
    for scale in args.scale:
        out = args.workdir / f"scale-{scale:g}.json"
        subprocess.run([sys.executable, __file__, "--scale", str(scale), "--json", str(out),
                        "--utterances", str(args.utterances), "--seconds", str(args.seconds),
                        "--eval-speakers", str(args.eval_speakers), "--workdir", str(args.workdir),
                        *(["--eval-utterances", str(args.eval_utterances)] if args.eval_utterances else []),
                        *(["--workers", str(args.workers)] if args.workers else []),
                        *(["--random-wavlm"] if args.random_wavlm else []), "--", *args.overrides], check=True)
        results.append(json.loads(out.read_text()))
    compare(results)


if __name__ == "__main__":
    main()
