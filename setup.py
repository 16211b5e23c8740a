"""Ships conf/, conf_train_vc/ and recipes/ inside the wheel as pipeline/conf, pipeline/conf_train_vc
and pipeline/recipes (package data: the configs read through Hydra's pkg:// search path, recipes/
by pipeline.core.recipe_source), so the clone keeps its top-level layout."""
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SHIPPED = ("conf", "conf_train_vc", "recipes")


class BuildWithConfigs(build_py):
    def run(self):
        super().run()
        for name in SHIPPED:
            target = Path(self.build_lib) / "pipeline" / name
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(name, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            (target / "__init__.py").write_text("")  # Hydra's pkg:// wants a regular package


setup(cmdclass={"build_py": BuildWithConfigs})
