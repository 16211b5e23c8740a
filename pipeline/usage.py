"""`vpeval --help` and the "did you mean" hints of the CLI and the config check.

The help is built from what is installed: the config groups and their options (conf/ and the
recipes' groups), the recipes, and the defaults of the most used keys.
"""
from __future__ import annotations

from omegaconf import OmegaConf

from pipeline.config import compose
from pipeline.config_tree import TRAINING_GROUPS, did_you_mean, group_options

# The keys a user sets most, shown with their defaults.
MAIN_KEYS = ("name", "seed", "device", "eval_splits", "paths.data", "data.root", "split.val_fraction",
             "distributed.gpus_per_node", "detect.false_alarm")
COMMANDS = (
    ("vpeval [OVERRIDE...]", "run an experiment; prints its report folder (-m: a sweep, one job per point)"),
    ("vpeval validate [OVERRIDE...]", "prepare and check the configured corpus only; lists every problem"),
    ("vpeval metrics FILE... [--json F]", "privacy metrics of score files (vpeval metrics --help)"),
    ("vpeval aggregate DIR", "one report of every job of a sweep folder (vpeval aggregate --help)"),
    ("vpeval export data|attacker ...", "anonymised data as VPC/Kaldi data dirs, an attacker as a SpeechBrain folder (vpeval export --help)"),
    ("vpeval --version", "vpeval's version"),
    ("vpeval --cfg job [OVERRIDE...]", "print the composed config and stop (--hydra-help: Hydra's flags)"),
)
DOCS = ("README.md in the vpeval repository; an installed package holds the same text as its long "
        "description (importlib.metadata.metadata('vpeval')['Description'])")


def usage() -> str:
    defaults = compose([])
    width = max(len(command) for command, _ in COMMANDS)
    lines = ["usage:"] + [f"  {command:<{width}}  {what}" for command, what in COMMANDS]
    groups = group_options()
    recipes = groups.pop("experiment", [])
    lines += ["", "An OVERRIDE is GROUP=OPTION, KEY=VALUE or +experiment=RECIPE (Hydra syntax; -m sweeps "
              "comma-separated values).", "", "config groups (GROUP=OPTION; `anonymizer@attacker_anonymizer` "
              "takes the anonymizer options):"]
    gwidth = max(len(group) for group in groups)
    lines += [f"  {group:<{gwidth}}  {', '.join(options)}" for group, options in groups.items()]
    lines += [f"  {group:<{gwidth}}  ({what})" for group, what in TRAINING_GROUPS.items()]
    lines += ["", "recipes (+experiment=RECIPE):", f"  {', '.join(recipes)}", "", "main keys (default):"]
    for key in MAIN_KEYS:
        value = OmegaConf.select(defaults, key, throw_on_resolution_failure=False)
        shown = OmegaConf.to_container(value) if OmegaConf.is_config(value) else value
        lines.append(f"  {key}={shown}")
    lines += ["", f"docs: {DOCS}"]
    return "\n".join(lines)


def unknown_command(word: str, commands: list[str]) -> str:
    return (f"unknown command '{word}'{did_you_mean(word, commands)}; commands: {', '.join(commands)}; "
            f"an experiment takes GROUP=OPTION and KEY=VALUE overrides (vpeval --help)")
