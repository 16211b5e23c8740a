"""Every config group composes, resolves and instantiates (lightning-hydra-template style)."""
from pathlib import Path

import pytest
from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf

from pipeline.core.config import CONFIG_DIR, compose, instantiate, without
from pipeline.core.errors import VpevalError
from pipeline.core.recipe_source import recipe_options

# Mandatory values (???) each option needs to compose, besides a corpus's `data.root` (`with_root`).
REQUIRED = {
    ("anonymizer", "external"): ["anonymizer.command=[python,x.py]"],
    ("anonymizer", "precomputed"): ["anonymizer.folder=/anon"],
    ("attacker", "ecapa_ssl"): ["attacker.model.wavlm=/models/WavLM-Large.pt"],
    ("attacker", "ecapa_ssl_tiny"): ["attacker.model.wavlm=/models/wavlm_tiny"],
}
# Systems that need trained weights: without them they stop naming the key and the recipe
# (built with weights in tests/unit/anonymizers/test_neural_system.py).
NEEDS_TRAINING = {"xvector": "vc_model", "xvector_speaker": "vc_model", "ohnn": "vc_model", "ohnn_rand": "vc_model",
                  "xvector_b1": "vc_model"}


RECIPES_DIR = CONFIG_DIR.parent / "recipes"


def with_root(cfg: DictConfig) -> DictConfig:
    """`cfg`, with a stand-in folder where its corpus leaves `data.root: ???` to the user."""
    if OmegaConf.is_missing(cfg.data, "root"):
        cfg.data.root = "/corpora/x"
    return cfg


def options(group: str, folder: Path = CONFIG_DIR) -> list[str]:
    return sorted(p.stem for p in (folder / group).glob("*.yaml"))


GROUPS = [(g, o) for g in ("data", "anonymizer", "attacker", "backend", "attacks", "paths") for o in options(g)]


def test_every_group_has_options():
    assert {g for g, _ in GROUPS} == {"data", "anonymizer", "attacker", "backend", "attacks", "paths"}


@pytest.mark.parametrize("group,option", GROUPS)
def test_group_option_composes_and_resolves(group, option):
    cfg = with_root(compose([f"{group}={option}", *REQUIRED.get((group, option), [])]))
    resolved = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    assert resolved[group] is not None


@pytest.mark.parametrize("option", options("anonymizer") + sorted(recipe_options(RECIPES_DIR)["anonymizer"]))  # conf/, recipes/
def test_anonymizers_instantiate(option, tmp_path):
    extra = ["anonymizer.folder=" + str(tmp_path)] if option == "precomputed" else REQUIRED.get(("anonymizer", option), [])
    cfg = compose([f"anonymizer={option}", *extra])
    assert cfg.anonymizer.name == option
    if option in NEEDS_TRAINING:
        with pytest.raises(VpevalError, match=rf"anonymizer\.{NEEDS_TRAINING[option]} is not set: .* vpeval train-vc "):
            instantiate(without(cfg.anonymizer, "name"), seed=0, device="cpu")
        return
    assert callable(instantiate(without(cfg.anonymizer, "name"), seed=0, device="cpu"))


@pytest.mark.parametrize("option", options("anonymizer"))
def test_attacker_anonymizer_selects_any_system(option):
    required = [r.replace("anonymizer.", "attacker_anonymizer.") for r in REQUIRED.get(("anonymizer", option), [])]
    cfg = compose([f"anonymizer@attacker_anonymizer={option}", *required])
    assert cfg.attacker_anonymizer.name == option and cfg.anonymizer.name == "mcadams"


def test_attacker_anonymizer_defaults_to_the_evaluated_system():
    assert compose(["anonymizer=mcadams_fixed"]).get("attacker_anonymizer") is None


@pytest.mark.parametrize("option", options("attacker"))
def test_attacker_models_instantiate(option, tiny_wavlm):
    cfg = compose([f"attacker={option}", *([f"attacker.model.wavlm={tiny_wavlm}"] if "ssl" in option else [])])
    if option == "ecapa_ssl":  # VPC sizes need WavLM-Large: a tiny one is refused, naming the file
        with pytest.raises(VpevalError, match=rf"^{tiny_wavlm}: WavLM of hidden size 32 with 2 layers, but "
                                              r"attacker.model needs channels\[0\]=1024 and wavlm_layers=24$"):
            instantiate(cfg.attacker.model)
        return
    model = instantiate(cfg.attacker.model)
    assert model.embedding_dim == cfg.attacker.model.embedding_dim


@pytest.fixture(scope="module")
def tiny_wavlm(tmp_path_factory) -> Path:
    from tests.helpers import wavlm_hf_folder

    return wavlm_hf_folder(tmp_path_factory.mktemp("wavlm") / "tiny")


@pytest.mark.parametrize("option", options("backend"))
def test_backends_instantiate(option):
    backend = instantiate(compose([f"backend={option}"]).backend)
    assert hasattr(backend, "score")


@pytest.mark.parametrize("option", options("data"))
def test_data_readers_and_protocols_build(option):
    cfg = with_root(compose([f"data={option}"]))
    assert instantiate(cfg.data.protocol) is not None
    assert callable(get_class(cfg.data.reader._target_))


def test_default_paths_live_in_the_repository(monkeypatch):
    monkeypatch.delenv("VPEVAL_DATA", raising=False)
    cfg = compose()
    assert Path(cfg.paths.data) == CONFIG_DIR.parent / "data"
    assert Path(cfg.paths.cache) == CONFIG_DIR.parent / "data" / "cache"


def test_unknown_key_override_is_refused():
    from hydra.errors import ConfigCompositionException

    with pytest.raises(ConfigCompositionException):
        compose(["anonymizer.alpah=0.7"])


# Recipes (recipes/<name>/experiment.yaml, `+experiment=<name>`) and their mandatory values besides `data.root`.
RECIPE_REQUIRED = {**{name: ["attacker.pretrained=/vpc/exp/asv_ssl",
                             "attacker.model.wavlm=/vpc/exp/asv_ssl/WavLM-Large.pt"]
                      for name in ("vpc2026", "vpc2026_track2")},
                   "vpc2026_synthetic": ["attacker.model.wavlm=/models/wavlm_tiny"]}
SWEEP_TARGETS = {"+vpc2026_language": "data.language"}  # a swept group of _global_ options: the key it sets
RECIPE_FILES = recipe_options(RECIPES_DIR)["experiment"]
RECIPES = sorted(RECIPE_FILES)


def test_every_recipe_folder_has_a_readme_and_the_papers_recipes_exist():
    assert {"vpc2024", "vpc2026", "vpc2026_track2", "mismatch_full", "mismatch_partial", "mismatch_hidden",
            "noe2022"} <= set(RECIPES)
    for name in ("vpc2024", "vpc2026", "vpc2026_track2", "mismatch_full", "mismatch_partial", "mismatch_hidden",
                 "noe2022", "maouche2020"):
        assert (RECIPES_DIR / name / "README.md").is_file(), name


@pytest.mark.parametrize("recipe", RECIPES)
def test_recipe_composes_and_resolves(recipe):
    cfg = with_root(compose([f"+experiment={recipe}", *RECIPE_REQUIRED.get(recipe, [])]))
    resolved = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    assert resolved["name"] == recipe
    assert set(resolved["attacks"]) >= {"OO"}


@pytest.mark.parametrize("recipe", RECIPES)
def test_recipe_sweep_points_compose(recipe):
    """Every value a recipe sweeps is an option of its group (conf/ or recipes/)."""
    params = OmegaConf.select(OmegaConf.load(RECIPE_FILES[recipe]), "hydra.sweeper.params")
    for key, values in (params or {}).items():
        for value in str(values).split(","):
            cfg = with_root(compose([f"+experiment={recipe}", f"{key}={value}", *RECIPE_REQUIRED.get(recipe, [])]))
            target = "attacker_anonymizer" if key.endswith("@attacker_anonymizer") else SWEEP_TARGETS.get(key, key)
            node = OmegaConf.select(cfg, target)
            assert (node.name if OmegaConf.is_config(node) else str(node)) == value


def test_noe2022_names_the_voice_converter_once_for_its_sweep():
    cfg = compose(["+experiment=noe2022", "anonymizer=xvector_b1", "vc_model=runs/vc/vc_model"])
    assert cfg.anonymizer.vc_model == "runs/vc/vc_model"


@pytest.mark.parametrize("option", options("attacks"))
def test_attack_models_name_their_data(option):
    attacks = compose([f"attacks={option}"]).attacks
    assert "OO" in attacks
    for spec in attacks.values():
        assert spec.enroll in ("original", "anonymized") and spec.trials in ("original", "anonymized")
        assert spec.attacker in ("original", "anonymized")


def test_all_attacks_hold_every_attack_model():
    attacks = compose(["attacks=all"]).attacks
    assert {k: (v.enroll, v.trials, v.attacker) for k, v in attacks.items()} == {
        "OO": ("original", "original", "original"), "OA": ("original", "anonymized", "original"),
        "AA-lazy": ("anonymized", "anonymized", "original"), "AA": ("anonymized", "anonymized", "anonymized")}


def test_detect_defaults():
    detect = compose([]).detect
    assert detect.trusted is None and detect.false_alarm == 0.05 and detect.bootstrap.unit == "speakers"


def test_sweep_variants_use_every_value_once_with_the_others_at_their_first():
    from pipeline.app.sweep import sweep_variants

    assert sweep_variants(["seed=1,2,3", "anonymizer=mcadams,mcadams_fixed", "~attacks.OO"]) == [
        ["seed=1", "anonymizer=mcadams", "~attacks.OO"],
        ["seed=2", "anonymizer=mcadams", "~attacks.OO"],
        ["seed=3", "anonymizer=mcadams", "~attacks.OO"],
        ["seed=1", "anonymizer=mcadams_fixed", "~attacks.OO"],
    ]
    assert sweep_variants(["anonymizer=glob(mc*)"]) == []  # left to Hydra
