"""The wheel: configs and recipes inside the package, usable from outside any clone."""
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from pipeline.core.config import REPO_ROOT
from pipeline.core.recipe_source import recipe_options


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out),
                    str(REPO_ROOT)], check=True, capture_output=True)
    return next(out.glob("vpeval-*.whl"))


def test_wheel_holds_configs_recipes_and_licence(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {p.relative_to(REPO_ROOT).as_posix() for folder in ("conf", "conf_train_vc", "recipes")
               for p in (REPO_ROOT / folder).rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert {f"pipeline/{name}" for name in shipped} <= names
    assert {"pipeline/conf/__init__.py", "pipeline/conf_train_vc/__init__.py", "pipeline/recipes/__init__.py"} <= names
    assert any(name.endswith(".dist-info/LICENSE") or "licenses/LICENSE" in name for name in names)


def test_installed_package_composes_from_its_own_configs(wheel, tmp_path):
    """Unpacked as pip installs it and run from a folder outside the clone: configs come from
    pkg://pipeline.conf, recipes from the package's recipes folder, data from $XDG_DATA_HOME/vpeval."""
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    recipes = sorted(recipe_options(REPO_ROOT / "recipes")["experiment"])
    probe = ("import json, pipeline, pipeline.core.config as c, pipeline.core.config_tree as t;"
             f"names = [c.compose(['+experiment=' + r]).name for r in {recipes!r}];"
             "cfg = c.compose(['+experiment=smoke']);"
             "print(json.dumps([pipeline.__file__, t.CONFIG_SOURCE, cfg.name, cfg.data.name, cfg.paths.data, names]))")
    env = {"PYTHONPATH": str(site), "XDG_DATA_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path),
           "PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    module, source, name, data, data_dir, names = json.loads(result.stdout)
    assert len(names) == len(recipes) >= 7  # every recipe composes from the package
    assert Path(module).is_relative_to(site)
    assert (source, name) == ("pkg://pipeline.conf", "smoke")
    assert data == "synthetic_tiny"
    assert Path(data_dir) == tmp_path / "xdg" / "vpeval"


def test_installed_train_vc_composes_from_the_packaged_configs(wheel, tmp_path):
    """`vpeval train-vc` outside any clone: its configs from pkg://pipeline.conf_train_vc, their
    corpus and attacker groups from pkg://pipeline.conf."""
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    result = subprocess.run([sys.executable, "-m", "pipeline", "train-vc", "vc", "--cfg", "job", "--config-name", "tiny",
                             "out=x"], cwd=tmp_path, capture_output=True, text=True,
                            env={"PYTHONPATH": str(site), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    assert "out: x" in result.stdout and "name: synthetic_tiny" in result.stdout


def test_torch_bounds_are_speechbrains():
    """Our torch/torchaudio lower bounds are the ones SpeechBrain (pinned) itself requires."""
    import importlib.metadata as metadata
    import tomllib

    import re

    def by_name(requirements):
        return {re.split(r"[<>=!]", r, maxsplit=1)[0].strip(): r.replace(" ", "") for r in requirements}

    ours = by_name(tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["dependencies"])
    theirs = by_name(r for r in metadata.requires("speechbrain") if "extra ==" not in r)
    assert ours["torch"] == theirs["torch"] and ours["torchaudio"] == theirs["torchaudio"]
    assert ours["speechbrain"] == f"speechbrain=={metadata.version('speechbrain')}"


def test_installed_help_lists_the_packaged_recipes(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    result = subprocess.run([sys.executable, "-m", "pipeline", "--help"], cwd=tmp_path, capture_output=True, text=True,
                            env={"PYTHONPATH": str(site), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    recipes = [recipe.strip() for recipe in result.stdout.split("recipes (+experiment=RECIPE):\n", 1)[1].splitlines()[0]
               .split(",")]
    assert recipes == sorted(recipe_options(REPO_ROOT / "recipes")["experiment"]) and "smoke" in recipes
    assert f"paths.data={tmp_path}/.local/share/vpeval" in result.stdout
