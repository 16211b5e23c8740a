"""docs/reference.md lists what the code holds: it is scripts/reference_docs.py's output."""
from scripts.reference_docs import PAGE, catalogue_rows, first_sentence, page


def test_the_reference_page_is_the_generators_output():
    assert PAGE.read_text() == page(), "docs/reference.md is stale: run python scripts/reference_docs.py"


def test_the_reference_lists_every_option_recipe_and_metric():
    from pipeline.core.config_tree import group_options
    from pipeline.metrics.registry import METRICS

    text = page()
    for group, options in group_options().items():
        for option in options:
            assert f"| `{option}` |" in text, (group, option)
    assert all(f"| `{metric.name}` |" in text for metric in METRICS)


def test_a_summary_stops_at_the_first_sentence_not_at_an_abbreviation():
    assert first_sentence("B2r of noe2022 (Patino et al. 2020). alpha per speaker.") == "B2r of noe2022 (Patino et al. 2020)"
    assert first_sentence("legal_eval: singling out. More.") == "legal_eval: singling out"
    assert first_sentence("A folder (save_pretrained: model), e.g. this one") == "A folder (save_pretrained: model), e.g. this one"


def test_the_catalogue_count_is_the_tables_rows():
    text = "# R\n\n## Bad inputs\n\nintro\n\n| input | message |\n|---|---|\n| a | b |\n| c | d |\n\n## Next\n| x |\n"
    assert catalogue_rows(text) == 2


def test_the_recipes_table_of_the_detection_page_names_every_recipe_folder():
    """docs/detection.md's hand-written recipe table (commands and what each is for) misses none
    (regression: 5 of 12 were missing)."""
    from pipeline.core.config_tree import RECIPES_DIR, REPO_ROOT
    from pipeline.core.recipe_source import recipe_options

    table = (REPO_ROOT / "docs" / "detection.md").read_text().split("## Recipes (", 1)[1].split("\n## ", 1)[0]
    names = {*recipe_options(RECIPES_DIR)["experiment"], *(p.name for p in RECIPES_DIR.iterdir() if p.is_dir())}
    assert {name for name in names if f"| `{name}` |" not in table} == set()
