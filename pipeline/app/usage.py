"""`vpeval --help` and the "did you mean" hints of the CLI and the config check.

The help is built from what is installed: the config groups and their options (conf/ and the
recipes' groups), the recipes, and the defaults of the most used keys.
"""
from __future__ import annotations

from omegaconf import OmegaConf

from pipeline.core.config import compose
from pipeline.core.config_tree import CONFIG_DIR, TRAIN_VC_CONFIG_DIR, did_you_mean, group_options

# The keys a user sets most, shown with their defaults.
MAIN_KEYS = ("name", "seed", "device", "eval_splits", "paths.data", "data.root", "split.val_fraction",
             "distributed.gpus_per_node", "detect.false_alarm")
COMMANDS = (
    ("vpeval [OVERRIDE...]", "run an experiment; prints its report folder (-m: a sweep, one job per point)"),
    ("vpeval validate [OVERRIDE...]", "prepare and check the configured corpus only; lists every problem"),
    ("vpeval metrics FILE... [--json F]", "privacy metrics of score files (vpeval metrics --help)"),
    ("vpeval aggregate DIR", "one report of every job of a sweep folder (vpeval aggregate --help)"),
    ("vpeval export data|attacker ...", "anonymised data as VPC/Kaldi data dirs, an attacker as a SpeechBrain folder (vpeval export --help)"),
    ("vpeval train-vc vc|ohnn ...", "train a voice converter or an OHNN map (vpeval train-vc --help)"),
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
    groups.update(hydra_groups())
    lines += ["", "An OVERRIDE is GROUP=OPTION, KEY=VALUE or +experiment=RECIPE (Hydra syntax; -m sweeps "
              "comma-separated values).", "", "config groups (GROUP=OPTION; `anonymizer@attacker_anonymizer` "
              "takes the anonymizer options):"]
    gwidth = max(len(group) for group in groups)
    lines += [f"  {group:<{gwidth}}  {', '.join(options)}" for group, options in groups.items()]
    lines.append(f"  {'vc':<{gwidth}}  {', '.join(sorted(p.stem for p in TRAIN_VC_CONFIG_DIR.glob('*.yaml')))}; "
                 "voice-converter training configs (vpeval train-vc vc|ohnn --config-name <name>)")
    lines += ["", "recipes (+experiment=RECIPE):", f"  {', '.join(recipes)}", "", "main keys (default):"]
    for key in MAIN_KEYS:
        value = OmegaConf.select(defaults, key, throw_on_resolution_failure=False)
        shown = OmegaConf.to_container(value) if OmegaConf.is_config(value) else value
        lines.append(f"  {key}={shown}")
    lines += ["", f"docs: {DOCS}"]
    return "\n".join(lines)


def hydra_groups() -> dict[str, list[str]]:
    """The Hydra groups vpeval sets options of (conf/hydra/<group>/, e.g. hydra/launcher) with every
    option Hydra finds: its own (basic), vpeval's (slurm) and those of installed plugins."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    groups = sorted({yaml.parent.relative_to(CONFIG_DIR).as_posix() for yaml in (CONFIG_DIR / "hydra").rglob("*.yaml")})
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        return {group: sorted(loader.get_group_options(group)) for group in groups}


def validate_usage() -> str:
    """`vpeval validate --help` (Hydra's generic help says nothing about validate)."""
    return "\n".join([
        "usage: vpeval validate [OVERRIDE...]",
        "",
        "Prepare the configured corpus and check it, running no other stage: the settings (as `vpeval`",
        "checks them), then preparation (the corpus read, or the synthetic one generated, into the cache,",
        "where an experiment with the same data settings reuses it), then every list of the prepared",
        "corpus: each audio file decodes to the end, mono, at data.sample_rate and as long as its manifest",
        "says; ids unique; one gender per speaker; trials naming enrolled speakers and listed utterances,",
        "with target and non-target trials; no evaluation speaker among the training speakers; every",
        "eval_splits subset prepared.",
        "",
        "Prints a table of the lists (utterances, speakers, trials) and `OK: no problems found.`, exit 0;",
        "otherwise every problem, one `vpeval: error:` line each, exit 2.",
        "",
        "arguments:",
        "  OVERRIDE    the experiment's overrides (GROUP=OPTION, KEY=VALUE; vpeval --help lists them);",
        "              validate reads data=..., data.root=..., data.*, eval_splits=... and paths.data=...,",
        "              e.g. vpeval validate data=librispeech data.root=/corpora/LibriSpeech",
        "  -h, --help  this text",
    ])


def unknown_command(word: str, commands: list[str]) -> str:
    return (f"unknown command '{word}'{did_you_mean(word, commands)}; commands: {', '.join(commands)}; "
            f"an experiment takes GROUP=OPTION and KEY=VALUE overrides (vpeval --help)")
