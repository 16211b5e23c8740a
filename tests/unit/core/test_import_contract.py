"""The import contract (.importlinter): one-way layers, independent stages, no cycles. The
repository keeps it, and a planted violation of each kind breaks it, naming the import."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.core.config import REPO_ROOT

LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    """`lint-imports` on the packages under `root`, with `root`'s contract."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([str(LINT_IMPORTS), str(root / ".importlinter"), "--no-cache"], cwd=root,
                          env=env, capture_output=True, text=True, check=False)


@pytest.fixture
def tree(tmp_path) -> Path:
    """A copy of the packages' sources and the contract."""
    for package in ("pipeline", "anonymizers"):
        shutil.copytree(REPO_ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__", "conf",
                                                                                              "recipes"))
    shutil.copy(REPO_ROOT / ".importlinter", tmp_path / ".importlinter")
    return tmp_path


def plant(tree: Path, module: str, line: str) -> None:
    path = tree / (module.replace(".", "/") + ".py")
    path.write_text(path.read_text() + f"\n{line}  # planted\n")


def test_the_repository_keeps_the_contract():
    result = lint_imports(REPO_ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_the_copied_tree_keeps_the_contract(tree):
    result = lint_imports(tree)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("module, line, broken, named", [
    ("pipeline.stages.score", "from pipeline.stages import extract", "A stage never imports another stage",
     "pipeline.stages.score -> pipeline.stages.extract"),
    ("pipeline.metrics.detection", "from pipeline.stages import detect", "One-way layers",
     "pipeline.metrics.detection -> pipeline.stages.detect"),
    ("pipeline.core.layout", "from pipeline.stages.prepare import SPLITS", "One-way layers",
     "pipeline.core.layout -> pipeline.stages.prepare"),
    ("pipeline.app.aggregate", "from pipeline.app.sweep import sweep_points", "One-way layers",
     "pipeline.app.aggregate -> pipeline.app.sweep"),
    ("pipeline.data.corpus", "from pipeline.data.protocol import Protocol",
     "No import cycles between the modules of a package", "No cycles are allowed in pipeline.data"),
])
def test_a_planted_violation_breaks_the_contract(tree, module, line, broken, named):
    plant(tree, module, line)
    result = lint_imports(tree)
    assert result.returncode == 1, result.stdout + result.stderr
    assert broken in result.stdout and "BROKEN" in result.stdout
    assert named in result.stdout
