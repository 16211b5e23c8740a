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
    printed = re.findall(r"^== (.+?)\s+[\d.]+ s\s+[\d.]+ s CPU\s+\d+ \w+ .*peak RSS \d+ MiB", out, re.MULTILINE)
    assert tuple(printed) == STAGES
    assert re.search(r"^disk use: corpus \d+ MiB, .*train \d+ MiB", out, re.MULTILINE)


def test_scales_are_compared_per_item(capsys):
    rows = lambda seconds, items: [{"stage": "split", "seconds": seconds, "cpu_seconds": seconds / 2,  # noqa: E731
                                    "items": items}]
    bench_scale.compare([{"scale": 0.1, "rows": rows(4.0, 1000)}, {"scale": 0.02, "rows": rows(0.2, 200)}])
    assert capsys.readouterr().out.splitlines()[-1].split() == ["split", "1.000", "/", "0.500", "4.000", "/", "2.000",
                                                                 "4.00x", "/", "4.00x"]
