"""Where the config tree lies (a clone, or an installed wheel) and what it offers: the config
groups and their options, and the "did you mean" hint of the CLI and the config check."""
from __future__ import annotations

import difflib
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent
# A wheel ships conf/ and recipes/ inside the package (pipeline/conf, pipeline/recipes, read
# through Hydra's pkg:// search path); a clone keeps them at the top level.
INSTALLED = (PACKAGE_DIR / "conf").is_dir()
CONFIG_DIR = (PACKAGE_DIR if INSTALLED else REPO_ROOT) / "conf"
RECIPES_DIR = (PACKAGE_DIR if INSTALLED else REPO_ROOT) / "recipes"
CONFIG_SOURCE = "pkg://pipeline.conf" if INSTALLED else str(CONFIG_DIR)
RECIPES_SOURCE = "pkg://pipeline.recipes" if INSTALLED else f"file://{RECIPES_DIR}"

TRAINING_GROUPS = {"vc": "voice-converter training configs (python -m anonymizers.vc.train --config-name vc/<name>)"}


def group_options() -> dict[str, list[str]]:
    """Config group -> its options, from conf/ and the recipes' extra groups (recipes/<group>/)."""
    groups: dict[str, set[str]] = {}
    for root in (CONFIG_DIR, RECIPES_DIR):
        for yaml in root.rglob("*.yaml"):
            group = yaml.parent.relative_to(root).as_posix()
            if group != "." and not group.startswith("hydra") and group not in TRAINING_GROUPS:
                groups.setdefault(group, set()).add(yaml.stem)
    return {group: sorted(options) for group, options in sorted(groups.items())}


def did_you_mean(word: str, choices) -> str:
    """' (did you mean 'x'?)' for the closest choice, or ''."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""

