"""The scale rehearsal (`benchmarks/bench_scale.py`) runs every stage at a minuscule size."""
import re
import sys

import pytest

from benchmarks import bench_scale

pytestmark = pytest.mark.usefixtures("single_thread")  # a busy machine slows multi-threaded kernels most
STAGES = ("generate", "prepare", "validate", "anonymize train", "anonymize eval", "split", "train (1 epoch)", "extract",
          "score + metrics")


def test_every_stage_prints_its_time_and_peak_memory(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", [
        "bench_scale.py", "--scale", "0.02", "--utterances", "4", "--eval-speakers", "8", "--eval-utterances", "6",
        "--workers", "1", "--workdir", str(tmp_path), "data.protocol.enroll_utterances=2"])
    bench_scale.main()
    out = capsys.readouterr().out
    printed = re.findall(r"^== (.+?)\s+[\d.]+ s\s+\d+ \w+ .*peak RSS \d+ MiB", out, re.MULTILINE)
    assert tuple(printed) == STAGES
    assert re.search(r"^disk use: corpus \d+ MiB, .*train \d+ MiB", out, re.MULTILINE)
