"""Config plumbing shared by the CLI and the tests: resolvers and composition.

>>> cfg = compose(["data=synthetic_tiny", "attacker=ecapa_tiny"])
>>> cfg.attacker.name, cfg.data.sample_rate
('ecapa_tiny', 16000)
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from hydra.core.plugins import Plugins
from omegaconf import DictConfig, ListConfig, OmegaConf

from pipeline.core.config_tree import CONFIG_DIR, INSTALLED, RECIPES_SOURCE, REPO_ROOT, did_you_mean, group_options
from pipeline.core.recipe_source import RecipeConfigSource
from pipeline.core.schemas import register_schemas, type_problems, typed_key


def default_data_dir() -> Path:
    """Where data, caches and runs go without $VPEVAL_DATA: a clone's data/ folder, else the
    user's data folder ($XDG_DATA_HOME/vpeval, by default ~/.local/share/vpeval)."""
    if not INSTALLED:
        return REPO_ROOT / "data"
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "vpeval"


def register_resolvers() -> None:
    """The `vpeval_*` resolvers and the recipe config source that conf/config.yaml uses, and the
    config schemas (pipeline.core.schemas); every entry point that composes it (the CLI's Hydra apps,
    `compose`) needs them first."""
    register_schemas()
    if not OmegaConf.has_resolver("vpeval_data"):
        OmegaConf.register_new_resolver("vpeval_data", lambda: str(default_data_dir()))
    if not OmegaConf.has_resolver("vpeval_slurm_gpus"):  # device=cpu asks Slurm for no GPU (no gres)
        OmegaConf.register_new_resolver("vpeval_slurm_gpus", lambda device, gpus: None if device == "cpu" else gpus)
    if not OmegaConf.has_resolver("vpeval_recipes"):
        OmegaConf.register_new_resolver("vpeval_recipes", lambda: RECIPES_SOURCE)
        Plugins.instance().register(RecipeConfigSource)


register_resolvers()


def compose(overrides: list[str] | None = None, config_name: str = "config") -> DictConfig:
    """Compose the experiment config outside a Hydra run (tests, notebooks, the CLI's check).

    A bad override (unknown key, unknown group option, bad syntax) raises a one-line VpevalError
    naming it; so does a value of the wrong type: `config` is checked against its schemas
    (pipeline.core.schemas, e.g. `seed=abc: must be an integer`), the keys no schema types against
    their option's defaults (`check_value_types`).
    """
    overrides = list(overrides or [])
    cfg = _compose(overrides, config_name)
    found = type_problems(cfg) if config_name == "config" else []
    if found:
        raise config_error(f"config: {len(found)} problem(s): " + "; ".join(found))
    check_value_types(overrides, config_name)
    if config_name == "config":
        check_added_keys(overrides)
    return cfg


def check_added_keys(overrides: list[str]) -> None:
    """Refuse an override that adds a top-level key nothing reads: `+sed=5` for `seed=5` would
    run with the default seed and exit 0. A key is known when the default config, a config group
    (`+experiment=...`, `+asr=...`) or Hydra has it, or when the other overrides (a recipe) add it.

    >>> check_added_keys(["+experiment=noe2022", "+hydra.job.env_set.X=1"])
    >>> check_added_keys(["+sed=5"])
    Traceback (most recent call last):
    pipeline.core.config.config_error.<locals>.ConfigError: config override '+sed=5': adds the top-level key 'sed', which vpeval does not read (did you mean 'seed'?)
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser

    groups = {group.split("/")[0] for group in group_options()} | {"hydra"}
    added = [o for o in OverridesParser.create().parse_overrides(overrides) if o.is_add() or o.is_force_add()]
    added = [o for o in added if o.key_or_group.split(".")[0] not in groups]
    if not added:
        return
    known = {key.split(".")[0] for key in known_keys()} | groups
    for override in added:
        top = override.key_or_group.split(".")[0]
        if top in known or top in _compose([o for o in overrides if o != override.input_line], "config"):
            continue
        raise config_error(f"config override '{override.input_line}': adds the top-level key '{top}', which vpeval "
                           f"does not read{did_you_mean(top, sorted(known))}")


def config_error(message: str):
    """A one-line VpevalError that is also Hydra's ConfigCompositionException (what callers of
    Hydra's own compose expect)."""
    from hydra.errors import ConfigCompositionException

    from pipeline.core.errors import VpevalError

    class ConfigError(VpevalError, ConfigCompositionException):
        pass

    return ConfigError(message)


def _compose(overrides: list[str], config_name: str) -> DictConfig:
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import HydraException

    null = null_group_problem(overrides)
    if null:
        raise config_error(null)
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        try:
            return hydra_compose(config_name=config_name, overrides=overrides)
        except HydraException as error:
            problem = error
    raise config_error(_override_problem(problem, overrides)) from None


def null_group_problem(overrides: list[str]) -> str | None:
    """A config group given null (`anonymizer@attacker_anonymizer=null`), which Hydra's compose
    ends in a raw ValueError, as one line with the group's options; None when there is none.

    >>> null_group_problem(["anonymizer@attacker_anonymizer=null"])[:100]
    "config override 'anonymizer@attacker_anonymizer=null': a config group takes an option name, not null"
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser

    for override in OverridesParser.create().parse_overrides(overrides):
        group = override.key_or_group
        if override.value() is None and not override.is_delete() and group in group_options():
            return (f"config override '{override.input_line}': a config group takes an option name, not null "
                    f"(leave the override out for the config's default); options: {', '.join(group_options()[group])}")
    return None


def _override_problem(error: Exception, overrides: list[str]) -> str:
    """Hydra's (multi-line) composition error as one line naming the override."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]

    unknown = re.match(r"Could not override '([^']+)'", lines[0]) if lines else None
    if unknown and any(line.startswith("To append") for line in lines):
        key = unknown.group(1)
        given = next((o for o in overrides if o.split("=", 1)[0] == key), key)
        if key in group_options():  # a group the defaults list leaves out (experiment): not a misspelling
            return f"config override '{given}': {key} is not in the config's defaults; add it with '+{given}'"
        add = f"; '+{given}' adds a new key" if typed_key(key) is not None else ""  # not under a schema without it
        return (f"config override '{given}': unknown key '{key}'{did_you_mean(key, known_keys())} "
                f"(check the spelling{add})")
    option = re.search(r"Could not find '([^']+)/([^'/]+)'", lines[0]) if lines else None
    listed = next((i for i, line in enumerate(lines) if line.startswith("Available options in")), None)
    if option and listed is not None:
        group, name = option.groups()
        options = [line for line in lines[listed + 1:] if " " not in line]
        given = next((o for o in overrides if o.split("=", 1)[0].lstrip("+~").split("@")[0] == group), name)
        return (f"config override '{given}': {group} has no option '{name}'{did_you_mean(name, options)}; "
                f"options: {', '.join(options)}")
    if "Config search path:" in lines:
        lines = lines[:lines.index("Config search path:")]
    return "config: " + " ".join(lines)


def known_keys() -> list[str]:
    """Every dotted key of the default config and every config group (for "did you mean")."""
    def walk(node, prefix=""):
        for key, value in node.items():
            yield f"{prefix}{key}"
            if isinstance(value, dict):
                yield from walk(value, f"{prefix}{key}.")

    cfg = OmegaConf.to_container(_compose([], "config"))
    return [*walk(cfg), *group_options()]


def _group_choice(key: str) -> bool:
    return (CONFIG_DIR / key.split("@", 1)[0]).is_dir()


def check_value_types(overrides: list[str], config_name: str = "config") -> None:
    """Refuse a value override of a key no schema types (a plugin's: `anonymizer.batch_seconds`,
    `data.reader.seed`, ...; every key of a config other than `config`) that cannot be what the
    key's default is: a non-number for a number (`anonymizer.batch_seconds=abc`; a list of
    numbers is allowed, as McAdams' alpha range), a non-boolean for a boolean, a scalar for a
    mapping. Null is always allowed; string and list defaults take anything."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    typed = (lambda key: typed_key(key) not in (Any, None)) if config_name == "config" else (lambda key: False)
    parsed = [o for o in OverridesParser.create().parse_overrides(overrides)
              if not (o.is_delete() or o.is_add() or o.is_force_add() or o.is_sweep_override() or typed(o.key_or_group)
                      or o.package is not None or _group_choice(o.key_or_group) or o.key_or_group.startswith("hydra."))]
    if not parsed:
        return
    defaults = _compose([o for o in overrides if _group_choice(o.split("=", 1)[0].lstrip("~+"))], config_name)
    for override in parsed:
        key, value = override.key_or_group, override.value()
        try:
            default = OmegaConf.select(defaults, key, throw_on_resolution_failure=False)
        except Exception:  # noqa: BLE001, S112  (an interpolation that cannot resolve here: no check)
            continue
        expected = _expected_kind(default)
        if value is not None and expected and not _is_kind(value, expected):
            shown = OmegaConf.to_container(default) if isinstance(default, (DictConfig, ListConfig)) else default
            raise config_error(f"config override '{override.input_line}': {key} must be {expected} "
                               f"(default {shown!r}), got {value!r}")


def _expected_kind(default) -> str | None:
    if isinstance(default, bool):
        return "true or false"
    if isinstance(default, (int, float)):
        return "a number"
    if isinstance(default, DictConfig):
        return "a mapping"
    return None


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_kind(value, expected: str) -> bool:
    if expected == "true or false":
        return isinstance(value, bool)
    if expected == "a number":
        return _number(value) or (isinstance(value, list) and all(_number(v) for v in value))
    return isinstance(value, dict)


def without(cfg: DictConfig, *keys: str) -> dict:
    """A resolved plain dict of `cfg` minus `keys` (e.g. a plugin's `name`)."""
    return {k: v for k, v in OmegaConf.to_container(cfg, resolve=True).items() if k not in keys}


MODEL_PLUGIN = "an importable model class with fingerprint_of (e.g. pipeline.recognition.asr.Whisper)"


def plugin_with(node: DictConfig, key: str, attribute: str, what: str) -> type:
    """The class a stage's plugin names (`key._target_`), which keys a cached result without
    being built through `attribute` (an anonymiser's `parameters`, a recogniser's
    `fingerprint_of`); one line saying it must name `what` where it names no such class."""
    from pipeline.core.errors import VpevalError

    found = plugin_class(node)
    if getattr(found, attribute, None) is None:
        raise VpevalError(f"{key}._target_={node.get('_target_')}: must name {what}")
    return found


def plugin_class(node: DictConfig | dict) -> type | None:
    """The class a plugin's `_target_` names, None where it names none (a bad `_target_` is
    reported when the plugin is built)."""
    import importlib

    module, _, name = str(node.get("_target_")).rpartition(".")
    try:  # not hydra's get_class, which logs an error line for a bad path before raising
        found = getattr(importlib.import_module(module), name)
    except Exception:  # noqa: BLE001  (whatever importing a wrong path raises)
        return None
    return found if isinstance(found, type) else None


def instantiate(cfg, **kwargs):
    """`hydra.utils.instantiate` that lets a plugin's own VpevalError through unwrapped, and
    turns a bad `_target_` or argument into a one-line VpevalError naming the key."""
    from hydra.errors import InstantiationException
    from hydra.utils import instantiate as hydra_instantiate

    from pipeline.core.errors import VpevalError

    try:
        return hydra_instantiate(cfg, **kwargs)
    except InstantiationException as error:
        if isinstance(error.__cause__, VpevalError):
            raise error.__cause__ from None
        first = str(error).strip().splitlines()
        raise VpevalError(f"cannot build {cfg.get('_target_', 'plugin')}: {' '.join(first)}") from None
