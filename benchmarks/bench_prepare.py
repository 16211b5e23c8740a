"""Preparation and validation speed at LibriSpeech train-clean-360 scale.

Generates a LibriSpeech-layout tree of `--files` short utterances (default 104,014 across
921 speakers, the size of train-clean-360) by hard-linking one tiny FLAC, plus small
dev-clean/test-clean subsets, then times the prepare stage (listing, fingerprint, headers
in threads, protocols, manifests, Kaldi dirs), a second prepare (reused from the cache)
and validation (every file decoded in worker processes), and prints files/s for each.
Every file is the same short FLAC, so decoding is cheaper than on real LibriSpeech
(12 s per utterance on average) and the page cache is warm: the figures measure the
per-file overhead of the code, not disk speed.

    python benchmarks/bench_prepare.py                  # full size
    python benchmarks/bench_prepare.py --files 5000     # a quick run
"""
from __future__ import annotations

import argparse
import logging
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

from pipeline.core.cache import Cache
from pipeline.core.schemas import Data, typed
from pipeline.data.audio import write_audio
from pipeline.stages import prepare, validate

EVAL_SPEAKERS, EVAL_UTTERANCES = 40, 10  # per evaluation subset (dev-clean has 40 speakers)


def tiny_flac(path: Path, seconds: float) -> Path:
    import numpy as np

    t = np.arange(int(seconds * 16000)) / 16000
    write_audio(path, 0.3 * np.sin(2 * np.pi * 150 * t), 16000)
    return path


def make_tree(root: Path, files: int, speakers: int, seconds: float) -> None:
    """Write the tree: `files` training utterances, and small dev-clean and test-clean subsets."""
    source = tiny_flac(root / "source.flac", seconds)
    for subset in ("train-clean-360", "dev-clean", "test-clean"):
        (root / subset).mkdir(parents=True)
    rows = [";ID  |SEX| SUBSET           |MINUTES| NAME"]
    plan = [("train-clean-360", 1000 + s, files // speakers + (s < files % speakers)) for s in range(speakers)]
    plan += [(subset, base + s, EVAL_UTTERANCES) for subset, base in (("dev-clean", 100), ("test-clean", 200))
             for s in range(EVAL_SPEAKERS)]
    for subset, speaker, count in plan:
        rows.append(f"{speaker} | {'FM'[speaker % 2]} | {subset} | 1.00 | Reader {speaker}")
        speaker_source = shutil.copy(source, root / subset / f"{speaker}.flac")  # an inode has < 65000 links
        for chapter in (1, 2):
            folder = root / subset / str(speaker) / str(chapter)
            folder.mkdir(parents=True, exist_ok=True)
            ids = [f"{speaker}-{chapter}-{i:04d}" for i in range(count) if i % 2 == chapter - 1]
            for utt in ids:
                os.link(speaker_source, folder / f"{utt}.flac")
            (folder / f"{speaker}-{chapter}.trans.txt").write_text("".join(f"{u} SOME WORDS\n" for u in ids))
    (root / "SPEAKERS.TXT").write_text("\n".join(rows) + "\n")
    for copy in [source, *root.glob("*/*.flac")]:
        copy.unlink()


def data_config(root: Path, workers: int | None) -> Data:
    return typed({
        "name": "librispeech", "tag": "libri", "root": str(root), "sample_rate": 16000, "generate": None,
        "convert_audio": True, "skip_bad": False, "workers": workers, "eval_trials": "same_gender", "mixed_seed": 0,
        "reader": {"_target_": "pipeline.data.librispeech.LibriSpeech"},
        "subsets": {"train": ["train-clean-360"], "dev": "dev-clean", "test": "test-clean"},
        "protocol": {"_target_": "pipeline.data.protocol.GeneratedProtocol", "seed": 0, "enroll_fraction": 0.75,
                     "enroll_utterances": 5},
    }, Data, "data")


def timed(label: str, files: int, action):
    start = time.perf_counter()
    result = action()
    seconds = time.perf_counter() - start
    print(f"{label:<34} {seconds:8.1f} s  {files / seconds:9.0f} files/s", flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=104_014, help="training utterances (train-clean-360: 104014)")
    parser.add_argument("--speakers", type=int, default=921, help="training speakers (train-clean-360: 921)")
    parser.add_argument("--seconds", type=float, default=1.0, help="duration of every file")
    parser.add_argument("--workers", type=int, default=None, help="decoding processes (default: CPU cores)")
    parser.add_argument("--workdir", type=Path, default=None, help="where to build the tree (default: a temp dir)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    workdir = Path(tempfile.mkdtemp(prefix="bench_prepare_", dir=args.workdir))
    try:
        print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPU core(s), "
              f"{time.strftime('%Y-%m-%d')}", flush=True)
        total = args.files + 2 * EVAL_SPEAKERS * EVAL_UTTERANCES
        timed(f"generate {args.files} + {total - args.files} files", total,
              lambda: make_tree(workdir / "LibriSpeech", args.files, args.speakers, args.seconds))
        data, cache = data_config(workdir / "LibriSpeech", args.workers), Cache(workdir / "cache")
        prepared = timed("prepare (headers, no decoding)", total, lambda: prepare.run(data, cache))
        timed("prepare again (reused)", total, lambda: prepare.run(data, cache))
        result = timed("validate (decodes every file)", total, lambda: validate.check(prepared, workers=args.workers))
        if result.problems:
            raise SystemExit(f"validation found {len(result.problems)} problem(s): {result.problems[:3]}")
    finally:
        shutil.rmtree(workdir)


if __name__ == "__main__":
    main()
