"""pipeline.core.recipe_source: a recipe folder is read as config groups (`experiment.yaml` is the
experiment named after the folder; `<group>/<option>.yaml` adds an option to a group)."""
from pathlib import Path

from hydra.core.object_type import ObjectType

from pipeline.core.config import compose
from pipeline.core.recipe_source import RecipeConfigSource, recipe_options


def make_recipes(root: Path) -> Path:
    (root / "alpha" / "anonymizer").mkdir(parents=True)
    (root / "alpha" / "experiment").mkdir()
    (root / "alpha" / "experiment.yaml").write_text("# @package _global_\nname: alpha\n")
    (root / "alpha" / "experiment" / "alpha_small.yaml").write_text("defaults:\n  - alpha\nname: alpha_small\n")
    (root / "alpha" / "anonymizer" / "mine.yaml").write_text("name: mine\n")
    (root / "alpha" / "README.md").write_text("# alpha\n")
    (root / "scripts_only").mkdir()
    (root / "scripts_only" / "simulate.py").write_text("")
    return root


def test_recipe_options_maps_folders_to_groups(tmp_path):
    found = recipe_options(make_recipes(tmp_path))
    assert found == {"experiment": {"alpha": tmp_path / "alpha" / "experiment.yaml",
                                    "alpha_small": tmp_path / "alpha" / "experiment" / "alpha_small.yaml"},
                     "anonymizer": {"mine": tmp_path / "alpha" / "anonymizer" / "mine.yaml"}}


def test_source_lists_loads_and_keeps_the_package_header(tmp_path):
    source = RecipeConfigSource("test", f"vpeval-recipes://{make_recipes(tmp_path)}")
    assert source.available() and source.is_group("") and source.is_group("experiment")
    assert not source.is_group("alpha") and not source.is_group("data")
    assert source.list("", ObjectType.GROUP) == ["anonymizer", "experiment"]
    assert source.list("experiment", ObjectType.CONFIG) == ["alpha", "alpha_small"]
    assert source.is_config("anonymizer/mine") and not source.is_config("experiment/beta")
    loaded = source.load_config("experiment/alpha.yaml")
    assert loaded.config.name == "alpha" and loaded.header["package"] == "_global_"


def test_a_recipe_variant_and_a_recipe_anonymizer_compose_together():
    cfg = compose(["+experiment=mismatch_synthetic", "anonymizer=mcadams_b2r"])
    assert (cfg.name, cfg.anonymizer.name, cfg.detect.trusted[0]) == ("mismatch_synthetic", "mcadams_b2r", "mcadams")
