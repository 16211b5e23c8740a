"""Hydra config source of the recipes: one folder per recipe, read as config groups.

`recipes/<recipe>/experiment.yaml` is option `<recipe>` of the group `experiment`
(`vpeval +experiment=<recipe>`), and `recipes/<recipe>/<group>/<option>.yaml` is option
`<option>` of `<group>` (a recipe's variants: `experiment/mismatch_synthetic.yaml`, its own
anonymisers `anonymizer/mcadams_a05_07.yaml`). The source is `vpeval-recipes://<folder>`.
"""
from __future__ import annotations

from pathlib import Path

from hydra.core.object_type import ObjectType
from hydra.plugins.config_source import ConfigLoadError, ConfigResult, ConfigSource
from omegaconf import OmegaConf


def recipe_options(root: Path) -> dict[str, dict[str, Path]]:
    """Group -> option -> file, of every recipe folder under `root`."""
    found: dict[str, dict[str, Path]] = {}
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        if (folder / "experiment.yaml").is_file():
            found.setdefault("experiment", {})[folder.name] = folder / "experiment.yaml"
        for yaml in sorted(folder.glob("*/*.yaml")):
            found.setdefault(yaml.parent.name, {})[yaml.stem] = yaml
    return found


class RecipeConfigSource(ConfigSource):
    """The recipes folder seen by Hydra as groups of options (see the module docstring)."""

    @staticmethod
    def scheme() -> str:
        return "vpeval-recipes"

    def _options(self) -> dict[str, dict[str, Path]]:
        return recipe_options(Path(self.path))

    def _file(self, config_path: str) -> Path | None:
        group, _, name = self._normalize_file_name(config_path).rpartition("/")
        return self._options().get(group, {}).get(name[:-len(".yaml")])

    def load_config(self, config_path: str) -> ConfigResult:
        path = self._file(config_path)
        if path is None:
            raise ConfigLoadError(f"Config not found : {config_path} in {self.full_path()}")
        text = path.read_text(encoding="utf-8-sig")  # a BOM would hide a `# @package` header
        return ConfigResult(config=OmegaConf.create(text), path=self.full_path(), provider=self.provider,
                            header=ConfigSource._get_header_dict(text[:512]))

    def available(self) -> bool:
        return Path(self.path).is_dir()

    def is_group(self, config_path: str) -> bool:
        return config_path.strip("/") in ("", *self._options())

    def is_config(self, config_path: str) -> bool:
        return self._file(config_path) is not None

    def list(self, config_path: str, results_filter: ObjectType | None) -> list[str]:
        group = config_path.strip("/")
        groups = sorted(self._options()) if group == "" else []
        configs = sorted(self._options().get(group, {}))
        return sorted({*(groups if results_filter in (None, ObjectType.GROUP) else []),
                       *(configs if results_filter in (None, ObjectType.CONFIG) else [])})
