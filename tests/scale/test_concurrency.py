"""Two processes sharing the cache: one builds a stage folder, the other waits and reuses it;
outputs are identical and never corrupted, and a builder killed while holding the lock hands
the folder over to the waiting one."""
from __future__ import annotations

import multiprocessing
import os
import signal
import time
from pathlib import Path

from pipeline.core.cache import DONE, Cache
from pipeline.core.fileio import write_text

PARAMS = {"alpha": 0.8}
INPUTS = {"manifest": "0123abcd"}


def slow_builder(log: Path, pause: float):
    def build(out: Path) -> dict:
        with open(log, "a") as handle:  # O_APPEND: one line per build, whoever runs it
            handle.write(f"{os.getpid()}\n")
        for i in range(5):
            if not (out / f"part{i}.txt").exists():  # resumes from what an earlier builder left
                write_text(out / f"part{i}.txt", f"part {i} of {PARAMS}\n" * 1000)
            time.sleep(pause)
        return {"parts": 5}
    return build


def build_in_process(root: str, log: str, pause: float, start, results) -> None:
    start.wait()
    cache = Cache(Path(root))
    out = cache.build("anonymize", PARAMS, INPUTS, slow_builder(Path(log), pause), code=())
    event = cache.events[-1]
    results.put((os.getpid(), str(out), event.reused, {p.name: p.read_bytes() for p in sorted(out.iterdir())
                                                        if p.name != DONE}))


def spawn(target, *args):
    context = multiprocessing.get_context("spawn")
    process = context.Process(target=target, args=args)
    process.start()
    return process


def race(target, *args) -> list:
    """Run `target(*args, start, results)` in two processes released at once; what they put in
    `results`, in the order it arrived (each process exits cleanly)."""
    context = multiprocessing.get_context("spawn")
    start, results = context.Event(), context.Queue()
    workers = [spawn(target, *args, start, results) for _ in range(2)]
    start.set()
    found = [results.get(timeout=300) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    return found


def test_two_processes_build_one_folder_once(tmp_path):
    log = tmp_path / "builds.log"
    found = race(build_in_process, str(tmp_path / "cache"), str(log), 0.2)
    assert len(log.read_text().split()) == 1  # built once
    (_, out_a, reused_a, files_a), (_, out_b, reused_b, files_b) = found
    assert out_a == out_b and sorted([reused_a, reused_b]) == [False, True]
    assert files_a == files_b and len(files_a) == 6  # 5 parts and _params.json, identical for both
    assert (Path(out_a) / DONE).is_file()
    assert not [p for p in Path(out_a).iterdir() if p.name.startswith(".")]


def test_builder_killed_while_holding_the_lock_hands_over(tmp_path):
    context = multiprocessing.get_context("spawn")
    start, results = context.Event(), context.Queue()
    log, root = tmp_path / "builds.log", str(tmp_path / "cache")
    first = spawn(build_in_process, root, str(log), 3.0, start, results)  # slow: killed mid-build
    start.set()
    deadline = time.monotonic() + 120
    while not (log.exists() and log.read_text().strip()):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    second = spawn(build_in_process, root, str(log), 0.01, start, results)
    time.sleep(2.0)  # the second one is waiting on the lock by now (or still starting)
    os.kill(first.pid, signal.SIGKILL)
    first.join()
    pid, out, reused, files = results.get(timeout=300)
    second.join(timeout=60)
    assert second.exitcode == 0 and pid == second.pid and reused is False
    builders = log.read_text().split()
    assert builders == [str(first.pid), str(second.pid)]  # the second resumed the folder the first left
    assert len(files) == 6 and (Path(out) / DONE).is_file()


def anonymize_in_process(root: str, manifest: str, start, results) -> None:
    from pipeline.core.config import compose
    from pipeline.stages import anonymize

    start.wait()
    cache = Cache(Path(root))
    system = compose(["anonymizer=mcadams"]).anonymizer
    out = anonymize.run(system, Path(manifest), cache, list_name="train", seed=7, device="cpu")
    results.put((str(out), cache.events[-1].reused,
                 {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*"))
                  if p.is_file() and p.name != DONE}))


def test_two_experiments_need_the_same_anonymised_set(tmp_path):
    """The real anonymize stage in two processes at once (as two sweep points would run it)."""
    from pipeline.data.audio import write_audio
    from pipeline.data.manifest import Utterance, write_manifest
    from tests.helpers import tone

    utts = []
    for i, (speaker, gender) in enumerate([("s1", "f"), ("s1", "f"), ("s2", "m"), ("s2", "m")]):
        path = write_audio(tmp_path / "audio" / f"{speaker}-{i}.flac", tone(0.5, 110 + 30 * i), 16000)
        utts.append(Utterance(f"{speaker}-{i}", speaker, gender, str(path), 0.5))
    manifest = write_manifest(tmp_path / "train.jsonl", utts)
    found = race(anonymize_in_process, str(tmp_path / "cache"), str(manifest))
    (out_a, reused_a, files_a), (out_b, reused_b, files_b) = found
    assert out_a == out_b and sorted([reused_a, reused_b]) == [False, True]
    assert files_a == files_b and sum(name.endswith(".flac") for name in files_a) == 4
