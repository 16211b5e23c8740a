"""A plugin checks its own settings: an anonymiser in a package of its own (written here, outside
pipeline/ and anonymizers/) is validated by its parameter dataclass (field ranges, `relations`,
`model_folders`), with no edit to pipeline/."""
import inspect
import sys

import pytest
from omegaconf import OmegaConf, open_dict

import pipeline.app.settings
from pipeline.app.settings import problems
from pipeline.core.config import compose

TOY = '''
from dataclasses import dataclass

from anonymizers.base import Anonymizer, Parameters
from pipeline.core.checks import Check, positive, setting


@dataclass
class LouderParameters(Parameters):
    weights: str | None = setting(None)
    gain: float = setting(2.0, Check("a number > 1", lambda v: positive(v) and v > 1))

    model_folders = ("weights",)

    def relations(self, key):
        return [f"{key}.gain=2: not at speaker level"] if self.gain == 2 and self.level == "speaker" else []


class Louder(Anonymizer):
    """Scales the signal by `gain` with the weights in `weights` (never built by the settings check)."""

    parameters = LouderParameters

    def __init__(self, **settings):
        raise AssertionError("built by the settings check")

    def anonymize(self, batch):
        return batch.waves
'''


@pytest.fixture
def toy_package(tmp_path, monkeypatch):
    (tmp_path / "toy_system").mkdir()
    (tmp_path / "toy_system" / "__init__.py").write_text(TOY)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "toy_system.Louder"
    sys.modules.pop("toy_system", None)


def with_plugin(group: str, settings: dict, overrides=("device=cpu",)):
    cfg = compose(list(overrides))
    with open_dict(cfg):
        cfg[group] = OmegaConf.create(settings)
    return cfg


def louder(target, **settings):
    return {"name": "louder", "_target_": target, "level": "utterance", "batch_seconds": 60, "weights": None,
            "gain": 2.0, **settings}


@pytest.mark.parametrize("group", ["anonymizer", "attacker_anonymizer"])
def test_a_new_anonymiser_checks_its_own_settings(toy_package, group):
    cfg = with_plugin(group, louder(toy_package, gain=0.5, batch_seconds=0))
    assert problems(cfg) == [f"{group}.batch_seconds=0: must be a number of seconds > 0",
                             f"{group}.gain=0.5: must be a number > 1"]
    speaker_level = with_plugin(group, louder(toy_package, level="speaker"))
    assert problems(speaker_level) == [f"{group}.gain=2: not at speaker level"]


def test_a_new_anonymisers_model_folders_are_checked_and_it_is_not_built(toy_package, tmp_path):
    assert problems(with_plugin("anonymizer", louder(toy_package)), build=True) == [
        "anonymizer.weights=None: must be a trained model folder (recipes/train_vc/README.md)"]
    assert problems(with_plugin("anonymizer", louder(toy_package, weights=str(tmp_path))), build=True) == []


def test_mcadams_keys_are_checked_by_mcadams_alone(toy_package):
    mcadams = compose(["anonymizer.lpc=covariance"])
    mcadams.anonymizer.deterministic = 2  # (an override of it stops in compose, on its default's type)
    assert problems(mcadams) == ["anonymizer.lpc=covariance: must be levinson or burg",
                                 "anonymizer.deterministic=2: must be true or false"]
    assert problems(with_plugin("anonymizer", louder(toy_package, lpc="covariance", deterministic=2))) == [
        "anonymizer.deterministic: not a parameter of this system "
        "(its parameters: level, batch_seconds, weights, gain)"]


def test_the_settings_check_names_no_plugin_class():
    """No registry of class paths: what a plugin needs checked comes from its class."""
    source = inspect.getsource(pipeline.app.settings)
    assert "anonymizers." not in source and "XVector" not in source and "OHNN" not in source
