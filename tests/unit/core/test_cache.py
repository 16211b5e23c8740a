import json

import pytest

from pipeline.core.cache import DONE, Cache, content_hash, is_complete, summary_of
from pipeline.core.config import REPO_ROOT
from pipeline.core.errors import VpevalError
from pipeline.core.fileio import is_temporary


def test_hash_ignores_key_order_and_changes_with_values():
    assert content_hash({"a": 1, "b": 2}) == content_hash({"b": 2, "a": 1})
    assert content_hash({"a": 1}) != content_hash({"a": 2})


def test_build_once_then_reuse(tmp_path):
    cache = Cache(tmp_path)
    calls = []

    def builder(out):
        calls.append(out)
        (out / "x.txt").write_text("hello")
        return {"n": 1}

    first = cache.build("stage", {"p": 1}, {"in": "abc"}, builder, code=())
    second = cache.build("stage", {"p": 1}, {"in": "abc"}, builder, code=())
    assert first == second and len(calls) == 1
    assert [e.reused for e in cache.events] == [False, True]
    assert summary_of(first) == {"n": 1}
    assert json.loads((first / "_params.json").read_text())["params"] == {"p": 1}


def test_changed_parameter_gets_new_folder(tmp_path):
    cache = Cache(tmp_path)
    a = cache.build("stage", {"alpha": 0.8}, {}, lambda out: None, code=())
    b = cache.build("stage", {"alpha": 0.7}, {}, lambda out: None, code=())
    assert a != b and is_complete(a) and is_complete(b)


def test_failed_builder_leaves_folder_incomplete_and_resumable(tmp_path):
    cache = Cache(tmp_path)

    def crashing(out):
        (out / "part-1").write_text("done")
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        cache.build("stage", {}, {}, crashing, code=())
    out = cache.path("stage", {}, {}, code=())
    assert not is_complete(out) and (out / "part-1").exists()

    def resuming(out):
        assert (out / "part-1").exists()  # earlier work is handed back
        (out / "part-2").write_text("done")

    assert cache.build("stage", {}, {}, resuming, code=()) == out and is_complete(out)


def test_summary_of_incomplete_folder_is_an_error(tmp_path):
    with pytest.raises(VpevalError, match=DONE):
        summary_of(tmp_path)


def test_fault_hook_kills_at_the_named_point(tmp_path):
    """`VPEVAL_FAULT=<stage>.<event>:<n>` SIGKILLs the process at the n-th such point; `_DONE`
    is never written for the stage it killed."""
    import os
    import signal
    import subprocess
    import sys

    script = ("from pathlib import Path\nfrom pipeline.core.cache import Cache\n"
              "from pipeline.core.fileio import write_text\n"
              "def build(out):\n    for i in range(3):\n        write_text(out / f'f{i}.txt', 'x')\n"
              f"Cache(Path({str(tmp_path)!r})).build('stage', {{}}, {{}}, build, code=())\n")
    env = {**os.environ, "VPEVAL_FAULT": "stage.write:3", "VPEVAL_FAULT_TRACE": str(tmp_path / "trace")}
    env.pop("VPEVAL_FAULT_PID", None)
    done = subprocess.run([sys.executable, "-c", script], env=env, cwd=REPO_ROOT, check=False)
    assert done.returncode == -signal.SIGKILL
    out = Cache(tmp_path).path("stage", {}, {}, code=())
    names = sorted(p.name for p in out.iterdir())
    assert [n for n in names if not is_temporary(n)] == ["_params.json", "f0.txt"]
    assert len(names) == 3  # f1.txt killed between its write and its rename
    assert not is_complete(out)
    # the 3rd write inside the stage: _params.json, f0.txt, then f1.txt
    assert (tmp_path / "trace").read_text().split() == ["stage.write", "stage.start", "stage.write", "stage.write"]


def test_a_wait_and_a_resume_are_logged(tmp_path, caplog):
    """Regression (issue 27): a run waiting on another run's lock printed nothing for
    minutes, and a resumed build looked like a fresh one."""
    import logging
    import threading
    import time

    from pipeline.core.cache import file_lock

    caplog.set_level(logging.INFO, logger="pipeline.core.cache")
    cache = Cache(tmp_path)
    out = cache.path("stage", {}, {}, code=())
    held, release = threading.Event(), threading.Event()

    def other_run():
        with file_lock(out.parent / f"{out.name}.lock"):
            held.set()
            release.wait(5)

    thread = threading.Thread(target=other_run)
    thread.start()
    held.wait(5)
    threading.Timer(0.3, release.set).start()
    out.mkdir(parents=True)
    (out / "part.txt").write_text("left by a killed run")
    cache.build("stage", {}, {}, lambda folder: None, code=())
    thread.join()
    messages = [r.getMessage() for r in caplog.records]
    assert any("waiting: another run holds" in m for m in messages)
    assert any(m.startswith(f"stage {out.name}: waited") for m in messages)
    assert any("resuming an interrupted build in" in m for m in messages)
