"""Cache keys follow the code: a stage's folder changes when the code computing it changes
(not when a comment or docstring does), checked on a copy of the packages."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.core.code_version import ROOT, code_digest, plugin_modules

ZEBRA = Path("pipeline/metrics/zebra.py")


@pytest.fixture
def packages(tmp_path) -> Path:
    """A copy of the project's packages, to edit."""
    for package in ("pipeline", "anonymizers"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def edit(root: Path, relative: Path, old: str, new: str) -> None:
    path = root / relative
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def test_a_metric_change_reaches_the_stages_that_use_it_and_only_those(packages):
    stages = ("pipeline.stages.evaluate", "pipeline.stages.train", "pipeline.stages.split")
    before = {stage: code_digest([stage], root=packages) for stage in stages}
    assert before == {stage: code_digest([stage]) for stage in stages}  # the copy is the same code
    edit(packages, ZEBRA, '"""', '"""Edited docstring.\n')  # the module docstring: no code change
    edit(packages, ZEBRA, "\nimport", "\n# a comment\nimport")
    assert {stage: _fresh_digest(stage, packages) for stage in stages} == before
    edit(packages, ZEBRA, "def ", "LIMIT = 1\n\n\ndef ")  # code
    after = {stage: _fresh_digest(stage, packages) for stage in stages}
    assert after["pipeline.stages.evaluate"] != before["pipeline.stages.evaluate"]
    assert after["pipeline.stages.train"] == before["pipeline.stages.train"]  # training uses no ZEBRA
    assert after["pipeline.stages.split"] == before["pipeline.stages.split"]


def _fresh_digest(stage: str, root: Path) -> str:
    """The digest computed by a new process (the module caches per process)."""
    code = f"from pathlib import Path; from pipeline.core.code_version import code_digest; " \
           f"print(code_digest([{stage!r}], root=Path({str(root)!r})))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout.strip()


@pytest.mark.parametrize(("module", "library"), [
    ("anonymizers.mcadams", "pipeline/signal/lpc.py"),  # the anonymize stage's plugin class
    ("pipeline.stages.prepare", "pipeline/signal/synthesis.py"),  # the synthetic corpus
    ("pipeline.stages.prepare", "pipeline/data/phones.py"),
])
def test_moved_signal_code_counts_where_it_runs(packages, module, library):
    """The code that left anonymizers/mcadams.py and pipeline/data/synthetic.py still keys the
    outputs it computes."""
    before = _fresh_digest(module, packages)
    edit(packages, Path(library), "\ndef ", "\nLIMIT = 1\n\n\ndef ")
    assert _fresh_digest(module, packages) != before


def test_plugin_classes_named_in_settings_count():
    found = plugin_modules({"_target_": "anonymizers.mcadams.McAdams", "model": {"frontend": "pipeline.asv.features.KaldiFbank"},
                            "name": "mcadams", "other": ["numpy.mean", "pipeline.no_such.Thing"]})
    assert found == {"anonymizers.mcadams", "pipeline.asv.features"}


EVALUATE = """
import sys
from pathlib import Path
from pipeline.core.cache import Cache
from pipeline.stages import evaluate
evaluate.run(Path(sys.argv[1]), Cache(Path(sys.argv[2])))
print(sorted(p.name for p in (Path(sys.argv[2]) / "evaluate").iterdir() if p.is_dir())[-1])
"""


def test_the_evaluate_stage_rebuilds_after_a_metric_changes(packages, tmp_path):
    """Regression (issue 27): stages were keyed by a hand-kept VERSION, and a changed ZEBRA
    worst case was served from the cache of the earlier code."""
    scores = tmp_path / "scores.txt"
    scores.write_text("".join(f"e{i % 3} u{i} {i % 7 - 2.5} {'target' if i % 3 == 0 else 'nontarget'}\n"
                              for i in range(60)))
    cache = tmp_path / "cache"

    def run() -> set[str]:
        subprocess.run([sys.executable, "-c", EVALUATE, str(scores), str(cache)], check=True, capture_output=True,
                       env={**os.environ, "PYTHONPATH": str(packages)}, cwd=tmp_path)
        return {p.name for p in (cache / "evaluate").iterdir() if p.is_dir()}

    first = run()
    assert run() == first  # reused
    edit(packages, ZEBRA, '"""', '"""Only the docstring changed.\n')
    assert run() == first
    edit(packages, ZEBRA, "def ", "LIMIT = 1\n\n\ndef ")
    second = run()
    assert len(second) == 2 and first < second  # built again under a new key
