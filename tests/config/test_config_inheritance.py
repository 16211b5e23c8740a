"""Every composed config equals its stored expectation (tests/fixtures/configs/composed.json),
so variants that inherit (`defaults: [<base>, _self_]` plus the keys that change) compose to
exactly what their full copies did. Regenerate after an intended change of a config:

    python tests/config/test_config_inheritance.py
"""
import json
import sys
from pathlib import Path

import pytest
from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from omegaconf import OmegaConf

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository, when run as a script
from pipeline.app.train_vc.command import SEARCHPATH_OVERRIDE  # noqa: E402
from pipeline.app.usage import group_options
from pipeline.core.config import CONFIG_DIR
from pipeline.core.config_tree import TRAIN_VC_CONFIG_DIR
from tests.helpers import FIXTURES  # noqa: E402

EXPECTED = FIXTURES / "configs" / "composed.json"
GROUPS = ("paths", "data", "anonymizer", "attacker", "backend", "attacks", "asr", "emotion", "attacker/scheduler")


def cases() -> dict[str, tuple[str, list[str]]]:
    """label -> (config name, overrides): every option of every group, experiment and training
    config (`vpeval train-vc`'s, conf_train_vc/<name>.yaml, labelled vc/<name>)."""
    target = {"attacker/scheduler": "attacker/scheduler@attacker.training.scheduler"}
    found = {f"{group}={option}": ("config", [f"{target.get(group, group)}={option}"])
             for group in GROUPS for option in group_options()[group]}
    found.update({f"+experiment={name}": ("config", [f"+experiment={name}"]) for name in group_options()["experiment"]})
    found.update({f"vc/{p.stem}": (p.stem, [SEARCHPATH_OVERRIDE]) for p in sorted(TRAIN_VC_CONFIG_DIR.glob("*.yaml"))})
    return found


def composed(config_name: str, overrides: list[str]) -> dict:
    """The unresolved config, with the multirun sweep of a recipe (hydra.sweeper.params); a
    config other than the experiment's is a training config, of its own root."""
    config_dir = CONFIG_DIR if config_name == "config" else TRAIN_VC_CONFIG_DIR
    with initialize_config_dir(config_dir=str(config_dir), version_base="1.3"):
        cfg = hydra_compose(config_name=config_name, overrides=overrides, return_hydra_config=True)
    params = OmegaConf.select(cfg, "hydra.sweeper.params")
    sweep = OmegaConf.to_container(params) if params is not None else {}
    plain = OmegaConf.to_container(cfg)
    plain.pop("hydra", None)
    return {"config": plain, "sweep": sweep}


STORED = json.loads(EXPECTED.read_text()) if EXPECTED.is_file() else {}


def test_every_option_of_today_is_stored():
    assert set(cases()) >= set(STORED) and len(STORED) >= 50, sorted(set(STORED) - set(cases()))


@pytest.mark.parametrize("label", sorted(STORED))
def test_composed_config_equals_stored(label):
    config_name, overrides = cases()[label]
    assert composed(config_name, overrides) == STORED[label]


if __name__ == "__main__":
    EXPECTED.parent.mkdir(parents=True, exist_ok=True)
    EXPECTED.write_text(json.dumps({label: composed(*case) for label, case in sorted(cases().items())}, indent=1) + "\n")
    print(f"{EXPECTED}: {len(cases())} configs")
