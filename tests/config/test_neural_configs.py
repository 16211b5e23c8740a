"""Every training-recipe config (conf_train_vc/*.yaml) composes, resolves and builds its model, and
reads the corpus it names (no synthetic-corpus settings leaking into a real corpus)."""
import pytest
from omegaconf import OmegaConf

from anonymizers.vc.checkpoints import build
from anonymizers.vc.householder import HouseholderMap
from anonymizers.vc.model import VoiceConverter
from pipeline.core.config_tree import TRAIN_VC_CONFIG_DIR
from tests.helpers import training_config

RECIPES = sorted(p.stem for p in TRAIN_VC_CONFIG_DIR.glob("*.yaml"))
REAL_CORPUS = ["data.root=/corpora/LibriSpeech"]


def recipe(name: str):
    extra = ["vc_model=/models/vc"] if name.startswith("ohnn") else []
    cfg = training_config(name, ["out=/runs/x", *extra, *(REAL_CORPUS if "gpu" in name else [])])
    return OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)


def test_there_are_cpu_and_gpu_recipes_for_both_models():
    assert {"tiny", "small", "gpu", "ohnn_tiny", "ohnn_small", "ohnn_gpu"} <= set(RECIPES)


@pytest.mark.parametrize("name", RECIPES, ids=[f"vc-{n}" for n in RECIPES])
def test_recipe_composes_and_builds_its_model(name):
    resolved = recipe(name)
    spec = dict(resolved["model"])
    if name.startswith("ohnn"):
        assert isinstance(build({**spec, "dim": 32}, TRAIN_VC_CONFIG_DIR / f"{name}.yaml"), HouseholderMap)
    else:
        model = build({**spec, "speaker_dim": 32}, TRAIN_VC_CONFIG_DIR / f"{name}.yaml")
        assert isinstance(model, VoiceConverter) and model.hop_length == resolved["model"]["hop_length"]
    synthetic = resolved["data"]["generate"] is not None
    assert synthetic == (resolved["data"]["name"].startswith("synthetic")), resolved["data"]["name"]
