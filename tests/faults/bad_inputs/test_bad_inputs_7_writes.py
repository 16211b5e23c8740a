"""Bad inputs: writing outputs (permissions, full disk)."""
import errno
import os
from pathlib import Path

import pytest
import torch

from pipeline.core.cache import Cache
from pipeline.core.fileio import write_json, write_lines, write_text
from pipeline.runtime.checkpoint import load_checkpoint, save_checkpoint
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
    message = raised(Cache(blocker).build, "prepare", {}, {}, lambda out: None, code="pipeline.stages.prepare")
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


def test_full_disk_during_audio_write(tmp_path, monkeypatch):
    """Regression: libsndfile said `LibsndfileError: System error.`, naming neither the file nor the cause."""
    import numpy as np
    import soundfile as sf

    from pipeline.data.audio import write_audio

    real_write, disk = sf.write, os.statvfs(tmp_path)

    def fill_disk(file, data, *args, **kwargs):
        real_write(file, data[: len(data) // 2], *args, **kwargs)  # half the samples land, then the disk is full
        raise sf.LibsndfileError(2)  # what libsndfile raises: "System error.", without the errno
    monkeypatch.setattr(sf, "write", fill_disk)
    monkeypatch.setattr(os, "statvfs", lambda path: os.statvfs_result((*disk[:4], 0, *disk[5:])))  # no block free
    message = raised(write_audio, tmp_path / "out" / "1-1-0001.flac", np.zeros(16000), 16000)
    assert leftovers(tmp_path / "out") == []
    record("disk-full-audio", "disk full while audio is written (libsndfile's `System error.`)",
           "every audio write (data.audio.write_audio)", message, tmp_path, "1-1-0001.flac", "No space left on device")


def test_cli_read_only_data_folder(tmp_path, monkeypatch, capsys):
    """Regression: Hydra's creation of the run folder ended in three chained OSErrors."""
    from pipeline.app import cli

    data = tmp_path / "data"
    data.mkdir()
    real_mkdir = Path.mkdir

    def read_only(self, *args, **kwargs):  # a read-only mount (root could write into a chmod-ed folder)
        if data in self.parents:
            raise OSError(errno.EROFS, "Read-only file system", str(self))
        return real_mkdir(self, *args, **kwargs)
    monkeypatch.setattr(Path, "mkdir", read_only)
    with pytest.raises(SystemExit) as stopped:
        cli.main(["data=synthetic_tiny", f"paths.data={data}"])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and "Traceback" not in err and leftovers(data) == []
    record("cli-read-only-data", "`vpeval paths.data=<a read-only folder>`", "CLI (exit 2, before Hydra starts)",
           err, tmp_path, "paths.cache=", "Read-only file system", "paths.data")


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
