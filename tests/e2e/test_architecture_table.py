"""docs/architecture.md is what the code needs.

"Adding things: what to touch": in a copy of the project, a toy anonymiser, attacker and
corpus reader (their modules in a package outside the copy, their config files in the copy),
a toy metric and a toy recipe are added by writing and editing only the files their rows
name, and one experiment uses all five. The data-flow figure is the output of the script
that draws it.
"""
from __future__ import annotations

import filecmp
import json
import os
import re
import runpy
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import soundfile

ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
COPIED = ("pipeline", "anonymizers", "conf", "recipes")
SKIPPED = shutil.ignore_patterns("__pycache__")
PLACEHOLDER = re.compile(r"<[a-z]+>")

TOY_ANONYMIZER = '''\
"""A toy system: every utterance times a gain drawn per pseudo-speaker."""
import numpy as np

from anonymizers.base import Anonymizer, Batch


class Gain(Anonymizer):
    def __init__(self, low: float = 0.3, high: float = 0.6, **common):
        super().__init__(**common)
        self.low, self.high = float(low), float(high)

    def anonymize(self, batch: Batch):
        outputs = []
        for wave, seed, drawn in zip(batch.waves, batch.seeds, batch.drawn):
            drawn["gain"] = float(np.random.default_rng(seed).uniform(self.low, self.high))
            outputs.append(wave * drawn["gain"])
        return outputs
'''
TOY_ANONYMIZER_CONFIG = """\
name: toy_gain
_target_: toy_plugins.gain.Gain
level: speaker
low: 0.3
high: 0.6
batch_seconds: 300
"""
TOY_ATTACKER = '''\
"""A toy speaker encoder: the mean log power spectrum of a waveform's frames, projected."""
import torch
from torch import nn


class MeanSpectrum(nn.Module):
    def __init__(self, sample_rate: int = 16000, embedding_dim: int = 32, frame: int = 400):
        super().__init__()
        self.sample_rate, self.embedding_dim = sample_rate, embedding_dim
        self.min_samples = self.frame_hop = frame
        self.architecture = {"sample_rate": sample_rate, "embedding_dim": embedding_dim, "frame": frame}
        self.project = nn.Linear(frame // 2 + 1, embedding_dim)

    def forward(self, wavs, wav_lens=None):
        return self.embed_samples(wavs, torch.full((len(wavs),), wavs.shape[1]))

    def embed_samples(self, wavs, num_samples):
        spectra = [torch.fft.rfft(wave[:int(n)].unfold(0, self.min_samples, self.frame_hop)).abs().pow(2)
                   .add(1e-8).log().mean(0) for wave, n in zip(wavs, num_samples)]
        return self.project(torch.stack(spectra))
'''
TOY_ATTACKER_CONFIG = """\
defaults:
  - scheduler@training.scheduler: one_cycle
  - augment@training.augment: none
  - _self_
name: toy_spectrum
pretrained: null
pretrained_on: original
init: null
finetune: null
model:
  _target_: toy_plugins.spectrum.MeanSpectrum
  embedding_dim: 24
head: {margin: 0.2, scale: 30.0}
training:
  epochs: 2
  batch_size: 16
  crop_seconds: 1.0
  examples_per_epoch: utterances
  optimizer: {_target_: torch.optim.Adam, _partial_: true, lr: 0.01, weight_decay: 0.0}
  precision: fp32
  compile: null
  sync_batchnorm: false
  checkpoint_every: 1000
  log_every: 1
  num_workers: 0
  cache_workers: 1
  cache_dir: null
extraction: {batch_seconds: 30, precision: fp32, workers: 1, audio_cache: null}
"""
TOY_READER = '''\
"""A toy corpus: every FLAC file under `<root>/<subset>/<speaker>/`, genders in a `<speaker> <f|m>` list."""
from pathlib import Path

from pipeline.data.corpus import Entry


class FlacFolders:
    def __init__(self, root: str, genders: str = "genders.txt"):
        self.root = Path(root)
        self.genders = dict(line.split() for line in (self.root / genders).read_text().splitlines())

    def entries(self, subset: str) -> list[Entry]:
        return [Entry(id=path.stem, speaker=path.parent.name, gender=self.genders[path.parent.name],
                      path=str(path), where=str(path)) for path in sorted((self.root / subset).glob("*/*.flac"))]
'''
TOY_CORPUS_CONFIG = """\
name: toy_corpus
tag: toy
root: ???
sample_rate: 16000
convert_audio: true
skip_bad: false
eval_trials: same_gender
mixed_seed: 0
workers: null
reader:
  _target_: toy_plugins.corpus.FlacFolders
generate: null
subsets:
  train: [train]
  dev: dev
  test: test
protocol:
  _target_: pipeline.data.protocol.GeneratedProtocol
  seed: 0
  enroll_fraction: 0.67
  enroll_utterances: 2
"""
TOY_METRIC = '''\
"""A toy metric: the share of target trials."""
from pipeline.metrics.contract import SCORES, Column, Metric


def target_share(condition) -> dict:
    return {"toy_target_share": len(condition.target) / (len(condition.target) + len(condition.nontarget))}


TOY_SHARE = Metric("toy_target_share", SCORES, (Column("toy_target_share", "Toy target share", digits=4),),
                   target_share)
'''
TOY_RECIPE = """\
# @package _global_
defaults:
  - override /data: toy_corpus
  - override /attacker: toy_spectrum
  - override /anonymizer: toy_gain
  - override /attacks: lazy_informed
name: toy
device: cpu
eval_splits: [test]
similarity: false
utility: {pitch_correlation: false, wer: false}
"""


@dataclass
class ToyRun:
    copy: Path  # the project with the toy parts
    per_row: dict[str, dict[str, set[str]]]  # {row of the table: {"write" / "edit": the files}}
    report: Path
    cache: Path
    utterances: set[str]  # the toy corpus's utterance ids


def adding_table() -> dict[str, dict[str, list[re.Pattern]]]:
    """{thing to add: {"write" / "edit": path patterns}} of the table in docs/architecture.md."""
    section = ARCHITECTURE.read_text().split("## Adding things", 1)[1].split("\n## ", 1)[0]
    rows = [line.split(" | ") for line in section.splitlines() if line.startswith("| a")]
    assert rows, "no 'to add' rows in docs/architecture.md"

    def patterns(cell: str) -> list[re.Pattern]:
        paths = [path for path in re.findall(r"`([^`]+)`", cell) if "/" in path and " " not in path]
        return [re.compile(PLACEHOLDER.sub("[^/]+", re.escape(path)) + "$") for path in paths]

    return {row[0].strip("| "): {"write": patterns(row[1]), "edit": patterns(row[2])} for row in rows}


def touched(copy: Path) -> dict[str, set[str]]:
    """Files of the copy that are new ("write") or differ ("edit") from the repository's."""
    found: dict[str, set[str]] = {"write": set(), "edit": set()}
    for folder in COPIED:
        for path in (copy / folder).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                relative = path.relative_to(copy).as_posix()
                original = ROOT / relative
                if not original.is_file():
                    found["write"].add(relative)
                elif not filecmp.cmp(path, original, shallow=False):
                    found["edit"].add(relative)
    return found


def write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def edit(root: Path, relative: str, old: str, new: str) -> None:
    path = root / relative
    text = path.read_text()
    assert text.count(old) == 1, f"{relative}: {old!r} not found once"
    path.write_text(text.replace(old, new))


def toy_corpus(root: Path) -> set[str]:
    """1 s harmonic tones, a pitch and a spectral tilt per speaker, in the toy reader's layout;
    the utterance ids written. Sizes as data=synthetic_tiny (12 + 12 training speakers)."""
    written, genders = set(), []
    rng = np.random.default_rng(0)
    time = np.arange(16000) / 16000
    for subset, per_gender, utterances in (("train", 12, 8), ("dev", 2, 6), ("test", 3, 6)):
        for gender in "fm":
            for n in range(per_gender):
                speaker = f"{subset}{gender}{n}"
                genders.append(f"{speaker} {gender}")
                pitch = rng.uniform(180, 260) if gender == "f" else rng.uniform(90, 150)
                tilt = rng.uniform(0.3, 0.9)
                for u in range(utterances):
                    phase = 2 * np.pi * np.cumsum(pitch * (1 + 0.05 * np.sin(2 * np.pi * rng.uniform(1, 4) * time)))
                    wave = sum(tilt ** k * np.sin(k * phase / 16000) for k in range(1, 12))
                    wave = wave + 0.02 * rng.standard_normal(16000)
                    path = root / subset / speaker / f"{speaker}-{u}.flac"
                    path.parent.mkdir(parents=True, exist_ok=True)
                    soundfile.write(path, 0.3 * wave / np.abs(wave).max(), 16000)
                    written.add(path.stem)
    (root / "genders.txt").write_text("\n".join(genders) + "\n")
    return written


def covered(files: set[str], allowed: list[re.Pattern]) -> set[str]:
    """The files no pattern of `allowed` matches."""
    return {file for file in files if not any(pattern.match(file) for pattern in allowed)}


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    """`+experiment=toy` run in a copy of the project with the toy parts."""
    tmp = tmp_path_factory.mktemp("architecture")
    copy, plugins = tmp / "project", tmp / "plugins"
    for folder in COPIED:
        shutil.copytree(ROOT / folder, copy / folder, ignore=SKIPPED)
    write(plugins, "toy_plugins/__init__.py", "")
    write(plugins, "toy_plugins/gain.py", TOY_ANONYMIZER)  # "any importable module will do"
    write(plugins, "toy_plugins/spectrum.py", TOY_ATTACKER)
    write(plugins, "toy_plugins/corpus.py", TOY_READER)
    per_row = {
        "an anonymiser": {"write": {"conf/anonymizer/toy_gain.yaml"}, "edit": set()},
        "an attacker": {"write": {"conf/attacker/toy_spectrum.yaml"}, "edit": set()},
        "a corpus": {"write": {"conf/data/toy_corpus.yaml"}, "edit": set()},
        "a metric": {"write": {"pipeline/metrics/toy_share.py"}, "edit": {"pipeline/metrics/registry.py"}},
        "a recipe": {"write": {"recipes/toy/experiment.yaml", "recipes/toy/README.md"}, "edit": set()},
    }
    write(copy, "conf/anonymizer/toy_gain.yaml", TOY_ANONYMIZER_CONFIG)
    write(copy, "conf/attacker/toy_spectrum.yaml", TOY_ATTACKER_CONFIG)
    write(copy, "conf/data/toy_corpus.yaml", TOY_CORPUS_CONFIG)
    write(copy, "pipeline/metrics/toy_share.py", TOY_METRIC)
    edit(copy, "pipeline/metrics/registry.py", "from pipeline.metrics.contract import EMBEDDINGS\n",
         "from pipeline.metrics.contract import EMBEDDINGS\nfrom pipeline.metrics.toy_share import TOY_SHARE\n")
    edit(copy, "pipeline/metrics/registry.py", "    RANK_DISCLOSURE,\n)", "    RANK_DISCLOSURE,\n    TOY_SHARE,\n)")
    write(copy, "recipes/toy/experiment.yaml", TOY_RECIPE)
    write(copy, "recipes/toy/README.md", "# toy\n\n`vpeval +experiment=toy data.root=...`: the toy parts.\n")
    utterances = toy_corpus(tmp / "corpus")
    run = subprocess.run([sys.executable, "-m", "pipeline", "+experiment=toy", f"data.root={tmp / 'corpus'}",
                          f"paths.data={tmp / 'data'}"],
                         cwd=tmp, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join([str(copy), str(plugins)])})
    assert run.returncode == 0, run.stderr[-3000:]
    return ToyRun(copy, per_row, Path(run.stdout.strip().splitlines()[-1]), tmp / "data" / "cache", utterances)


def test_the_toy_parts_touch_only_the_files_their_rows_name(toy_run):
    table = adding_table()
    for row, files in toy_run.per_row.items():
        for kind in ("write", "edit"):
            assert covered(files[kind], table[row][kind]) == set(), f"{row}: {kind} not named in its row"
    rows = toy_run.per_row.values()
    expected = {kind: set().union(*(files[kind] for files in rows)) for kind in ("write", "edit")}
    assert touched(toy_run.copy) == expected  # nothing else was written or edited


def test_the_experiment_reports_the_toy_metric_for_every_condition(toy_run):
    records = json.loads((toy_run.report / "results.json").read_text())["records"]
    assert {record["attack"] for record in records} == {"OO", "AA-lazy"}
    for record in records:
        metrics = record["metrics"]
        share = metrics["n_target"] / (metrics["n_target"] + metrics["n_nontarget"])
        assert metrics["toy_target_share"] == pytest.approx(share)
    assert "Toy target share" in (toy_run.report / "report.md").read_text()
    assert "toy_target_share" in (toy_run.report / "results.csv").read_text().splitlines()[0]


def test_the_experiment_anonymises_with_the_toy_system(toy_run):
    records = json.loads((toy_run.report / "results.json").read_text())["records"]
    evaluated = {record["anonymizer"] for record in records if record["attack"] == "AA-lazy" and not record["set"].startswith("val")}
    assert evaluated == {"toy_gain"}  # val: the attacker's own validation speakers, original here
    originals = {entry["id"]: entry["path"] for manifest in (toy_run.cache / "prepare").glob("*/manifests/*.jsonl")
                 for entry in map(json.loads, manifest.read_text().splitlines())}
    anonymized = [entry for manifest in (toy_run.cache / "anonymize").glob("*/manifest.jsonl")
                  for entry in map(json.loads, manifest.read_text().splitlines())]
    assert anonymized
    for entry in anonymized[:5]:
        gain = entry["pseudo_speaker"]["gain"]
        assert 0.3 <= gain <= 0.6
        original, _ = soundfile.read(originals[entry["id"]])
        output, _ = soundfile.read(entry["path"])
        np.testing.assert_allclose(output, gain * original, atol=2 / 32768)


def test_the_experiment_trains_and_uses_the_toy_attacker(toy_run):
    assert json.loads((toy_run.report / "results.json").read_text())["config"]["attacker"] == "toy_spectrum"
    models = [json.loads(path.read_text()) for path in (toy_run.cache / "train").glob("*/model.json")]
    assert [model["model"] for model in models] == [
        {"_target_": "toy_plugins.spectrum.MeanSpectrum", "sample_rate": 16000, "embedding_dim": 24, "frame": 400}]


def test_the_experiment_reads_the_toy_corpus(toy_run):
    assert json.loads((toy_run.report / "results.json").read_text())["config"]["data"] == "toy_corpus"
    prepared = {entry["id"] for manifest in (toy_run.cache / "prepare").glob("*/manifests/*.jsonl")
                for entry in map(json.loads, manifest.read_text().splitlines())}
    assert prepared == toy_run.utterances


def test_the_data_flow_figure_is_the_script_output():
    figure = runpy.run_path(str(ROOT / "scripts" / "draw_dataflow.py"))["figure"]()
    assert (ROOT / "docs" / "dataflow.svg").read_text() == figure, "run python scripts/draw_dataflow.py"
    assert "![" in ARCHITECTURE.read_text() and "(dataflow.svg)" in ARCHITECTURE.read_text()
