"""docs/architecture.md is what the code needs.

"Adding things: what to touch": in a copy of the project (with its tests and docs), a toy
anonymiser, attacker and corpus reader (their modules in a package outside the copy, their
config files in the copy), a toy metric and a toy recipe are added by writing and editing only
the files their rows name, and one experiment uses all five. The slow test adds them one row at
a time, each followed by its "then" commands, and runs after each the tests of `make test` that
enumerate what that row adds: a row that leaves out a step `make test` needs fails it (.ci/run
runs it). The data-flow figure is the output of the script that draws it.
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
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import soundfile

ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
# What `make test` reads: the code, configs, recipes, tests, docs and scripts; the files pip builds the wheel from.
COPIED = ("pipeline", "anonymizers", "conf", "conf_train_vc", "recipes", "hydra_plugins", "tests", "docs", "scripts")
COPIED_FILES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "LICENSE", "CITATION.cff", "CHANGELOG.md",
                "constraints.txt")
SKIPPED = shutil.ignore_patterns("__pycache__", ".pytest_cache")
PLACEHOLDER = re.compile(r"<[a-z]+>")
# The tests of `make test` that enumerate what a row adds, by the folder its files are in.
ENUMERATING = {"conf/": ("tests/config", "tests/e2e/test_package.py"),
               "recipes/": ("tests/config", "tests/e2e/test_package.py"),
               "pipeline/metrics/": ("tests/unit/metrics",)}
EVERY_ROW = ("tests/e2e/test_reference_docs.py", "tests/unit/core/test_cli_usage.py")

TOY_ANONYMIZER = '''\
"""A toy system: every utterance times a gain drawn per pseudo-speaker."""
import numpy as np

from dataclasses import dataclass

from anonymizers.base import Anonymizer, Batch, Parameters
from pipeline.core.checks import setting


@dataclass
class GainParameters(Parameters):
    low: float = setting(0.3)
    high: float = setting(0.6)


class Gain(Anonymizer):
    parameters = GainParameters

    def anonymize(self, batch: Batch):
        outputs = []
        low, high = self.settings.low, self.settings.high
        for wave, seed, drawn in zip(batch.waves, batch.seeds, batch.drawn):
            drawn["gain"] = float(np.random.default_rng(seed).uniform(low, high))
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
TOY_ANONYMIZER_TEST = '''\
"""The toy system scales every utterance of a speaker by the same gain."""
import numpy as np

from toy_plugins.gain import Gain


def test_one_gain_per_speaker():
    waves = [np.full(1600, 0.5, np.float32)] * 3
    outputs = Gain(level="speaker", seed=0)(waves, ["a", "b", "c"], ["s1", "s1", "s2"], 16000, "test")
    assert outputs[0][0] == outputs[1][0] != outputs[2][0]
    assert all(0.15 <= float(output[0]) <= 0.3 for output in outputs)
'''
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
class Part:
    """What a row's toy part writes ({path in the copy: text}) and edits ((path, old, new))."""
    write: dict[str, str]
    edit: list[tuple[str, str, str]] = field(default_factory=list)

    def files(self) -> dict[str, set[str]]:
        return {"write": set(self.write), "edit": {path for path, _, _ in self.edit}}


DETECTION_RECIPES = "| recipe | command | what |\n|---|---|---|\n"
PARTS = {  # in the table's order: the recipe uses the four others
    "an anonymiser": Part({"conf/anonymizer/toy_gain.yaml": TOY_ANONYMIZER_CONFIG,
                           "tests/unit/anonymizers/test_toy_gain.py": TOY_ANONYMIZER_TEST}),
    "an attacker": Part({"conf/attacker/toy_spectrum.yaml": TOY_ATTACKER_CONFIG}),
    "a metric": Part({"pipeline/metrics/toy_share.py": TOY_METRIC}, [
        ("pipeline/metrics/registry.py", "from pipeline.metrics.contract import EMBEDDINGS, EMOTION_DATA\n",
         "from pipeline.metrics.contract import EMBEDDINGS, EMOTION_DATA\nfrom pipeline.metrics.toy_share import TOY_SHARE\n"),
        ("pipeline/metrics/registry.py", "    RANK_DISCLOSURE,\n)", "    RANK_DISCLOSURE,\n    TOY_SHARE,\n)")]),
    "a corpus": Part({"conf/data/toy_corpus.yaml": TOY_CORPUS_CONFIG}),
    "a recipe": Part({"recipes/toy/experiment.yaml": TOY_RECIPE,
                      "recipes/toy/README.md": "# toy\n\n`vpeval +experiment=toy data.root=...`: the toy parts.\n"},
                     [("docs/detection.md", DETECTION_RECIPES,
                       DETECTION_RECIPES + "| `toy` | `vpeval +experiment=toy data.root=<dir>` | the toy parts |\n")]),
}
PLUGINS = {"toy_plugins/__init__.py": "", "toy_plugins/gain.py": TOY_ANONYMIZER,  # "any importable module will do"
           "toy_plugins/spectrum.py": TOY_ATTACKER, "toy_plugins/corpus.py": TOY_READER}


@dataclass
class Row:
    """A row of the table: the path patterns of its "write", "edit" and "then" cells, and the
    commands of its "then" cell (`python <script> ...`)."""
    write: list[re.Pattern]
    edit: list[re.Pattern]
    then: list[re.Pattern]
    commands: list[list[str]]


@dataclass
class ToyRun:
    copy: Path  # the project with the toy parts
    report: Path
    cache: Path
    utterances: set[str]  # the toy corpus's utterance ids


def adding_table() -> dict[str, Row]:
    """{thing to add: its row} of the table in docs/architecture.md."""
    section = ARCHITECTURE.read_text().split("## Adding things", 1)[1].split("\n## ", 1)[0]
    rows = [line.split(" | ") for line in section.splitlines() if line.startswith("| a")]
    assert rows, "no 'to add' rows in docs/architecture.md"

    def patterns(cell: str) -> list[re.Pattern]:
        paths = [path for path in re.findall(r"`([^`]+)`", cell) if "/" in path and " " not in path]
        return [re.compile(PLACEHOLDER.sub("[^/]+", re.escape(path)) + "$") for path in paths]

    return {row[0].strip("| "): Row(patterns(row[1]), patterns(row[2]), patterns(row[3]),
                                    [command.split() for command in re.findall(r"`python ([^`]+)`", row[3])])
            for row in rows}


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


def add(copy: Path, part: Part) -> None:
    for relative, text in part.write.items():
        write(copy, relative, text)
    for relative, old, new in part.edit:
        edit(copy, relative, old, new)


def project_copy(tmp: Path) -> tuple[Path, dict[str, str]]:
    """A copy of the project and the toy plugin package beside it; the environment that imports both."""
    copy, plugins = tmp / "project", tmp / "plugins"
    for folder in COPIED:
        shutil.copytree(ROOT / folder, copy / folder, ignore=SKIPPED)
    for name in COPIED_FILES:
        shutil.copy(ROOT / name, copy / name)
    for relative, text in PLUGINS.items():
        write(plugins, relative, text)
    return copy, {**os.environ, "PYTHONPATH": os.pathsep.join([str(copy), str(plugins)])}


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


def uncovered(files: set[str], allowed: list[re.Pattern]) -> set[str]:
    """The files no pattern of `allowed` matches."""
    return {file for file in files if not any(pattern.match(file) for pattern in allowed)}


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    """`+experiment=toy` run in a copy of the project with the toy parts."""
    tmp = tmp_path_factory.mktemp("architecture")
    copy, env = project_copy(tmp)
    for part in PARTS.values():
        add(copy, part)
    utterances = toy_corpus(tmp / "corpus")
    run = subprocess.run([sys.executable, "-m", "pipeline", "+experiment=toy", f"data.root={tmp / 'corpus'}",
                          f"paths.data={tmp / 'data'}"], cwd=tmp, capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    return ToyRun(copy, Path(run.stdout.strip().splitlines()[-1]), tmp / "data" / "cache", utterances)


def test_the_toy_parts_touch_only_the_files_their_rows_name(toy_run):
    table = adding_table()
    assert list(table) == list(PARTS)
    for row, part in PARTS.items():
        for kind, files in part.files().items():
            assert uncovered(files, getattr(table[row], kind)) == set(), f"{row}: {kind} not named in its row"
    expected = {kind: set().union(*(part.files()[kind] for part in PARTS.values())) for kind in ("write", "edit")}
    assert touched(toy_run.copy) == expected  # nothing else was written or edited


@pytest.mark.slow  # five runs of the enumerating tests: ~11 min on 2 shared cores; .ci/run runs it
def test_make_test_stays_green_after_each_row(tmp_path):
    """Each row's part is added with exactly its row's steps, its "then" commands run, then the
    tests of `make test` that enumerate what it added: all pass, and the row names every file
    that changed."""
    copy, env = project_copy(tmp_path)
    table = adding_table()
    for row, part in PARTS.items():
        before = touched(copy)
        add(copy, part)
        for command in table[row].commands:
            run = subprocess.run([sys.executable, *command], cwd=copy, env=env, capture_output=True, text=True)
            assert run.returncode == 0, f"{row}: python {' '.join(command)}\n{run.stderr[-3000:]}"
        after = touched(copy)
        changed = (after["write"] - before["write"]) | (after["edit"] - before["edit"])
        named = table[row].write + table[row].edit + table[row].then
        assert uncovered(changed, named) == set(), f"{row}: changed files its row does not name"
        tests = {test for folder, enumerating in ENUMERATING.items()
                 if any(path.startswith(folder) for path in changed) for test in enumerating}
        tests |= {*EVERY_ROW, *(path for path in changed if path.startswith("tests/") and path.endswith(".py"))}
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                              f"--basetemp={tmp_path / 'pytest'}", *sorted(tests)],
                             cwd=copy, env=env, capture_output=True, text=True)
        assert run.returncode == 0, f"{row}: make test fails after its row's steps\n{run.stdout[-6000:]}"


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
