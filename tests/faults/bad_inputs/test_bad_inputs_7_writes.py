"""Bad inputs: writing outputs (permissions, full disk)."""
import errno
import os
from pathlib import Path

import torch

from pipeline.asv.checkpoint import load_checkpoint, save_checkpoint
from pipeline.cache import Cache
from pipeline.fileio import write_json, write_lines, write_text
from tests.faults.bad_inputs.catalogue import GOOD_SCORES, cli_message, raised, record, vpeval


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.is_file())


def test_unwritable_output_folder(tmp_path, monkeypatch):
    folder = tmp_path / "report"
    folder.mkdir()
    folder.chmod(0o555)
    if os.geteuid() == 0:  # root writes anywhere: the refusal is simulated where the rename would be
        def refuse(source, target):
            raise PermissionError(errno.EACCES, "Permission denied")
        monkeypatch.setattr(os, "replace", refuse)
    try:
        message = raised(write_json, folder / "results.json", {"records": []})
    finally:
        folder.chmod(0o755)
    assert leftovers(folder) == []
    record("unwritable", "output folder without write permission", "every write (fileio.atomic_path)", message,
           tmp_path, "results.json", "Permission denied", "writable")


def test_cache_under_a_file(tmp_path):
    blocker = tmp_path / "cache_is_a_file"
    blocker.write_text("not a folder\n")
    message = raised(Cache(blocker).build, "prepare", {}, {}, lambda out: None)
    record("unwritable-cache", "`paths.cache` pointing below a regular file", "cache (before a stage starts)",
           message, tmp_path, "cache_is_a_file", "not a folder")


def test_full_disk_during_write(tmp_path, monkeypatch):
    real_write = Path.write_text

    def fill_disk(self, text, *args, **kwargs):
        real_write(self, text[: len(text) // 2], *args, **kwargs)  # half the bytes land, then the disk is full
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(Path, "write_text", fill_disk)
    message = raised(write_text, tmp_path / "out" / "manifest.jsonl", "x" * 10000)
    assert leftovers(tmp_path / "out") == []
    record("disk-full", "disk full in the middle of a write", "every write (fileio.atomic_path)", message, tmp_path,
           "manifest.jsonl", "No space left on device")


def test_full_disk_during_checkpoint_keeps_the_previous_one(tmp_path, monkeypatch):
    path = tmp_path / "checkpoint.pt"
    save_checkpoint(path, {"step": torch.tensor(1)})
    real_save = torch.save

    def fill_disk(obj, target, *args, **kwargs):
        real_save(obj, target, *args, **kwargs)
        Path(target).write_bytes(Path(target).read_bytes()[:100])
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(torch, "save", fill_disk)
    message = raised(save_checkpoint, path, {"step": torch.tensor(2)})
    assert leftovers(tmp_path) == ["checkpoint.pt"]
    assert int(load_checkpoint(path)["step"]) == 1
    record("disk-full-checkpoint", "disk full while a training checkpoint is written", "train (checkpoint writer)",
           message, tmp_path, "checkpoint.pt", "No space left on device")


def test_cli_output_folder_is_a_file(tmp_path):
    blocker = tmp_path / "data_is_a_file"
    blocker.write_text("not a folder\n")
    message = cli_message(vpeval("metrics", str(write_lines(tmp_path / "scores.txt", GOOD_SCORES)), "--json",
                                 str(blocker / "metrics.json"), tmp=tmp_path))
    record("cli-unwritable", "`vpeval metrics --json` into a folder that is a file", "CLI (exit 2)", message,
           tmp_path, "metrics.json", "cannot write")
