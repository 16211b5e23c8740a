"""Kill and resume: the tiny experiment is SIGKILLed inside every stage, rerun, and must end
bitwise equal to an uninterrupted run, with no stage folder marked complete (`_DONE`) over
partial contents and no finished work redone.

Kill points come from `pipeline.core.faults` (`VPEVAL_FAULT=<stage>.<event>:<n>`): a stage folder
just created, a file written but not yet renamed, a training step, a checkpoint (checkpoint.pt or model.pt) half-written,
a builder finished but `_DONE` not yet written. A chain of runs is killed one point after the
other (each rerun resumes what the killed one left, and is killed at the next point), then a
last run completes. The default run exercises `DEFAULT_POINTS`; `pytest -m faults` runs
`MANY_POINTS` and a chain of kills at seeded random times (`RANDOM_KILLS`).

Every run is a `python -m pipeline` subprocess on a shared, pre-generated synthetic corpus;
the uninterrupted reference run (module fixture, traced to count the kill points it passes)
also serves the determinism and concurrency-free comparisons.
"""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from pipeline.core.cache import DONE, PARAMS
from pipeline.core.config import REPO_ROOT
from pipeline.core.fileio import is_temporary
from pipeline.data.manifest import read_manifest

# The tiny experiment made tinier: 4 training speakers x 10 utterances (too few to select the
# model on other validation speakers than those of EER_val), 2 epochs of 4 steps
# with a checkpoint every 2 steps, the test split only, the anonymised-attacker attack (AA)
# only. Every stage still runs: prepare, validate, anonymize, split, train, extract, score,
# evaluate, report.
EXPERIMENT = [
    "data=synthetic_tiny", "attacker=ecapa_tiny", "device=cpu", "eval_splits=[test]", "~attacks.OO",
    "data.generate.subsets.train-synth.female=2", "data.generate.subsets.train-synth.male=2",
    "data.generate.subsets.train-synth.utterances=10", "split.holdout=speaker", "split.val_fraction=0.2",
    "split.select_fraction=null",
    "attacker.training.epochs=2", "attacker.training.batch_size=8", "attacker.training.checkpoint_every=2",
]
# In execution order; each applies to a fresh process resuming what the previous one left.
DEFAULT_POINTS = [
    "prepare.write:5",      # manifests half written
    "validate.start:1",
    "anonymize.write:20",   # half the training set anonymised, one file not yet renamed
    "split.write:2",
    "train.step:3",         # mid-epoch, one step after the step-2 checkpoint
    "train.checkpoint:1",   # checkpoint.pt of step 4 half written (resumes from step 2 again)
    "train.checkpoint:2",   # step 4's checkpoint.pt done, the best epoch's model.pt half written
    "train.end:1",          # training done, _DONE not yet written
    "extract.write:1",      # embeddings written, not renamed
    "score.write:1",
    "evaluate.end:1",
    "report.write:1",       # results.json written, not renamed
]
MANY_POINTS = [
    "prepare.start:1", "prepare.write:1", "prepare.write:20", "prepare.end:1",
    "validate.start:1", "validate.end:1",
    "anonymize.start:1", "anonymize.write:1", "anonymize.write:15", "anonymize.end:1",
    "split.start:1", "split.write:1", "split.write:4", "split.end:1",
    "train.start:1", "train.write:1", "train.write:3", "train.step:1", "train.step:2", "train.checkpoint:1",
    "train.step:2", "train.checkpoint:2", "train.step:3", "train.checkpoint:2", "train.end:1",
    "anonymize.start:1", "anonymize.write:3", "anonymize.end:1",
    "extract.start:1", "extract.write:1", "extract.write:2", "extract.end:1",
    "score.start:1", "score.write:1", "score.end:1",
    "evaluate.start:1", "evaluate.write:1", "evaluate.end:1",
    "extract.end:1", "score.end:1", "evaluate.end:1",
    "report.write:1", "report.write:2",
]
RANDOM_KILLS = 8
RANDOM_SEED = 2024


def vpeval(data: Path, run_dir: Path, corpora: Path, *, fault: str | None = None, trace: Path | None = None,
           kill_after: float | None = None) -> subprocess.CompletedProcess:
    """One run of the experiment in a subprocess, killed at `fault` or after `kill_after` s."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VPEVAL_")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    if fault:
        env["VPEVAL_FAULT"] = fault
    if trace:
        env["VPEVAL_FAULT_TRACE"] = str(trace)
    argv = [sys.executable, "-m", "pipeline", f"paths.data={data}", f"paths.corpora={corpora}",
            f"hydra.run.dir={run_dir}", *EXPERIMENT]
    process = subprocess.Popen(argv, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)
    try:
        out, err = process.communicate(timeout=kill_after if kill_after is not None else 900)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # the run and any worker it started, as a pre-emption would
        out, err = process.communicate()
    return subprocess.CompletedProcess(argv, process.returncode, out, err)


def report_of(run_dir: Path) -> dict:
    return json.loads((run_dir / "report" / "results.json").read_text())


@pytest.fixture(scope="module")
def corpora(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("corpora")


@pytest.fixture(scope="module")
def reference(tmp_path_factory, corpora):
    """The uninterrupted run (it also generates the shared corpus); its trace lists every kill point passed."""
    data = tmp_path_factory.mktemp("reference")
    trace = data / "trace.txt"
    started = time.monotonic()
    done = vpeval(data, data / "run", corpora, trace=trace)
    assert done.returncode == 0, done.stderr[-3000:]
    points = [line for line in trace.read_text().split() if not line.startswith("none.")]
    return {"data": data, "run": data / "run", "points": points, "seconds": time.monotonic() - started}


# ---------------------------------------------------------------- checks

def complete_folders(cache: Path) -> dict[Path, dict[str, int]]:
    """Every complete stage folder: its files (relative path -> mtime_ns)."""
    return {done.parent: {str(p.relative_to(done.parent)): p.stat().st_mtime_ns
                          for p in done.parent.rglob("*") if p.is_file()}
            for done in cache.glob(f"*/*/{DONE}")}


def check_complete_folders(cache: Path) -> None:
    """No folder marked complete holds partial contents: no temporaries, nothing written after
    `_DONE`, every file its stage promises present and consistent."""
    for folder, files in complete_folders(cache).items():
        stage = folder.parent.name
        assert not [f for f in files if is_temporary(Path(f).name)], (folder, files)
        assert max(files.values()) == files[DONE], f"{folder}: a file is newer than {DONE}"
        assert PARAMS in files
        required = {"prepare": ["manifests/train.jsonl", "manifests/test_enrolls.jsonl", "trials/test_trials_f.txt"],
                    "anonymize": ["manifest.jsonl"], "split": ["manifests/val_trials_f.jsonl", "trials/val_trials_m.txt"],
                    "train": ["model.pt", "model.json", "training_log.jsonl"],
                    "extract": ["embeddings.npy", "ids.txt"], "score": ["scores.txt"],
                    "evaluate": ["metrics.json"]}.get(stage, [])
        assert set(required) <= set(files), (folder, sorted(set(required) - set(files)))
        if stage == "anonymize":
            assert all(Path(u.path).is_file() for u in read_manifest(folder / "manifest.jsonl"))
        if stage == "extract":
            import numpy as np

            ids = (folder / "ids.txt").read_text().split()
            assert np.load(folder / "embeddings.npy").shape[0] == len(ids)
        if stage == "train":
            log = (folder / "training_log.jsonl").read_text().splitlines()
            assert len(log) == 2 and json.loads((folder / DONE).read_text())["summary"]


def same_tensors(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same_tensors(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same_tensors(x, y) for x, y in zip(a, b))
    return a == b


def without_seconds(text: str) -> list:
    rows = [json.loads(line) for line in text.splitlines()]
    return [{k: v for k, v in row.items() if k != "seconds"} for row in rows]


def compare_folders(ref: Path, got: Path, ref_cache: Path, got_cache: Path) -> None:
    """Bitwise equality of what a stage computed (paths into each cache made relative)."""
    ref_files = {str(p.relative_to(ref)) for p in ref.rglob("*") if p.is_file()}
    got_files = {str(p.relative_to(got)) for p in got.rglob("*") if p.is_file()}
    assert ref_files == got_files, (got, sorted(ref_files ^ got_files))
    for name in sorted(ref_files):
        a, b = ref / name, got / name
        base = Path(name).name
        if base in (PARAMS, "checkpoint.pt", "cache.json"):
            continue  # their inputs name each run's own cache paths / hold timings and RNG states
        if base == DONE:
            assert json.loads(a.read_text())["summary"] == json.loads(b.read_text())["summary"], b
        elif base == "model.pt":
            assert same_tensors(torch.load(a, weights_only=True), torch.load(b, weights_only=True)), b
        elif base == "training_log.jsonl":
            assert without_seconds(a.read_text()) == without_seconds(b.read_text()), b
        elif base.endswith(".jsonl"):
            assert a.read_text().replace(str(ref_cache), "<cache>") == b.read_text().replace(str(got_cache), "<cache>"), b
        else:
            assert a.read_bytes() == b.read_bytes(), b


def compare_runs(ref_data: Path, ref_run: Path, data: Path, run: Path) -> int:
    """The run in `data`/`run` computed exactly what the reference did; returns the folders compared."""
    ref, got = report_of(ref_run), report_of(run)
    assert got["records"] == ref["records"]
    assert got["detection"] == ref["detection"]
    assert got["config_hash"] == ref["config_hash"]
    ref_events, got_events = ref["stages"], got["stages"]
    assert [e["stage"] for e in got_events] == [e["stage"] for e in ref_events]
    folders = {(a["path"], b["path"]) for a, b in zip(ref_events, got_events)}
    for a, b in sorted(folders):
        compare_folders(Path(a), Path(b), ref_data / "cache", data / "cache")
    return len(folders)


def run_chain(reference, data: Path, corpora: Path, points: list[str] | None = None,
              delays: list[float] | None = None) -> dict:
    """Kill a run at each point (or after each delay), checking the cache after every kill; then
    complete it and compare with the reference. Returns what happened."""
    cache, run = data / "cache", data / "run"
    kills, finished_before = 0, {}
    for spec in points if points is not None else delays:
        before = complete_folders(cache) if cache.exists() else {}
        if points is not None:
            done = vpeval(data, run, corpora, fault=spec)
            assert done.returncode == -signal.SIGKILL, (
                f"kill point {spec} was not reached (exit {done.returncode}): {done.stderr[-2000:]}")
        else:
            done = vpeval(data, run, corpora, kill_after=spec)
            if done.returncode == 0:
                break  # the run finished before its kill time
            assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
        kills += 1
        check_complete_folders(cache)
        after = complete_folders(cache)
        for folder, files in before.items():  # finished work is never redone or touched
            assert after.get(folder) == files, f"{folder} changed after the kill at {spec}"
        finished_before.update(before)
    before = complete_folders(cache)
    done = vpeval(data, run, corpora)
    assert done.returncode == 0, done.stderr[-3000:]
    check_complete_folders(cache)
    events = report_of(run)["stages"]
    rebuilt = [e["path"] for e in events if not e["reused"] and Path(e["path"]) in before]
    assert rebuilt == [], f"complete folders were rebuilt: {rebuilt}"
    for folder, files in before.items():
        assert complete_folders(cache)[folder] == files
    compared = compare_runs(reference["data"], reference["run"], data, run)
    return {"kills": kills, "compared": compared}


def test_kill_points_cover_every_stage(reference):
    """The traced reference run passes kill points in every stage (the faults suite's universe)."""
    stages = {point.split(".")[0] for point in reference["points"]}
    assert {"prepare", "validate", "anonymize", "split", "train", "extract", "score", "evaluate",
            "report"} <= stages
    events = {point.split(".")[1] for point in reference["points"]}
    assert {"start", "write", "step", "checkpoint", "end"} <= events
    print(f"\nreference run: {reference['seconds']:.0f} s, {len(reference['points'])} kill points passed")


def test_killed_in_every_stage_and_resumed_equals_uninterrupted_run(reference, corpora, tmp_path):
    result = run_chain(reference, tmp_path / "killed", corpora, points=DEFAULT_POINTS)
    assert result["kills"] == len(DEFAULT_POINTS)
    print(f"\n{result['kills']} kill points, {result['compared']} stage folders equal to the reference")


def test_same_seed_gives_bitwise_equal_runs(reference, corpora, tmp_path):
    """Determinism on CPU: a second uninterrupted run in a fresh cache equals the reference."""
    data = tmp_path / "again"
    done = vpeval(data, data / "run", corpora)
    assert done.returncode == 0, done.stderr[-3000:]
    assert compare_runs(reference["data"], reference["run"], data, data / "run") > 10


@pytest.mark.faults
def test_many_kill_points(reference, corpora, tmp_path):
    result = run_chain(reference, tmp_path / "killed", corpora, points=MANY_POINTS)
    assert result["kills"] == len(MANY_POINTS)
    print(f"\n{result['kills']} kill points, {result['compared']} stage folders equal to the reference")


@pytest.mark.faults
def test_kills_at_random_times(reference, corpora, tmp_path):
    rng = random.Random(RANDOM_SEED)
    span = max(reference["seconds"], 20.0)
    delays = [rng.uniform(0.15, 0.6) * span for _ in range(RANDOM_KILLS)]
    result = run_chain(reference, tmp_path / "killed", corpora, delays=delays)
    print(f"\n{result['kills']} random-time kills (seed {RANDOM_SEED}, delays {[round(d) for d in delays]} s), "
          f"{result['compared']} stage folders equal to the reference")
    assert result["kills"] >= 1
