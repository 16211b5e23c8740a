"""Config plumbing shared by the CLI and the tests: resolvers and composition.

>>> cfg = compose(["data=synthetic_tiny", "attacker=ecapa_tiny"])  # doctest: +SKIP
"""
from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

REPO_ROOT = Path(__file__).resolve().parents[1]
CONFIG_DIR = REPO_ROOT / "conf"

if not OmegaConf.has_resolver("repo_root"):
    OmegaConf.register_new_resolver("repo_root", lambda: str(REPO_ROOT))


def compose(overrides: list[str] | None = None, config_name: str = "config") -> DictConfig:
    """Compose the experiment config outside a Hydra run (tests, notebooks)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return hydra_compose(config_name=config_name, overrides=list(overrides or []))


def without(cfg: DictConfig, *keys: str) -> dict:
    """A resolved plain dict of `cfg` minus `keys` (e.g. a plugin's `name`)."""
    return {k: v for k, v in OmegaConf.to_container(cfg, resolve=True).items() if k not in keys}


def instantiate(cfg, **kwargs):
    """`hydra.utils.instantiate` that lets a plugin's own VpevalError through unwrapped, and
    turns a bad `_target_` or argument into a one-line VpevalError naming the key."""
    from hydra.errors import InstantiationException
    from hydra.utils import instantiate as hydra_instantiate

    from pipeline.errors import VpevalError

    try:
        return hydra_instantiate(cfg, **kwargs)
    except InstantiationException as error:
        if isinstance(error.__cause__, VpevalError):
            raise error.__cause__ from None
        first = str(error).strip().splitlines()
        raise VpevalError(f"cannot build {cfg.get('_target_', 'plugin')}: {' '.join(first)}") from None
