"""Where the config tree lies (a clone, or an installed wheel) and what it offers: the config
groups and their options, and the "did you mean" hint of the CLI and the config check."""
from __future__ import annotations

import difflib
from pathlib import Path

from pipeline.core.recipe_source import recipe_options

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # pipeline/
REPO_ROOT = PACKAGE_DIR.parent
# A wheel ships conf/ and recipes/ inside the package (pipeline/conf, pipeline/recipes; conf/ read
# through Hydra's pkg:// search path); a clone keeps them at the top level.
INSTALLED = (PACKAGE_DIR / "conf").is_dir()
CONFIG_DIR = (PACKAGE_DIR if INSTALLED else REPO_ROOT) / "conf"
RECIPES_DIR = (PACKAGE_DIR if INSTALLED else REPO_ROOT) / "recipes"
CONFIG_SOURCE = "pkg://pipeline.conf" if INSTALLED else str(CONFIG_DIR)
RECIPES_SOURCE = f"vpeval-recipes://{RECIPES_DIR}"  # one folder per recipe, read by pipeline.core.recipe_source
# The config root of `vpeval train-vc` (pipeline.app.train_vc), apart from the experiment's: its
# configs take their corpus, attacker and paths from conf/'s groups, found through CONFIG_SEARCHPATH.
TRAIN_VC_CONFIG_DIR = (PACKAGE_DIR if INSTALLED else REPO_ROOT) / "conf_train_vc"
TRAIN_VC_CONFIG_SOURCE = "pkg://pipeline.conf_train_vc" if INSTALLED else str(TRAIN_VC_CONFIG_DIR)
CONFIG_SEARCHPATH = CONFIG_SOURCE if INSTALLED else f"file://{CONFIG_DIR}"


def group_options() -> dict[str, list[str]]:
    """Config group -> its options, from conf/ and the recipes' groups (pipeline.core.recipe_source)."""
    groups: dict[str, set[str]] = {}
    for yaml in CONFIG_DIR.rglob("*.yaml"):
        group = yaml.parent.relative_to(CONFIG_DIR).as_posix()
        if group != "." and not group.startswith("hydra"):
            groups.setdefault(group, set()).add(yaml.stem)
    for group, options in recipe_options(RECIPES_DIR).items():
        groups.setdefault(group, set()).update(options)
    return {group: sorted(options) for group, options in sorted(groups.items())}


def did_you_mean(word: str, choices) -> str:
    """' (did you mean 'x'?)' for the closest choice, or ''."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""

