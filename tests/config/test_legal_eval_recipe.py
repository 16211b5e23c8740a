"""recipes/legal_eval: the paper's M and runs, a grid per corpus, and the rates built from it."""
from pipeline.core.config import compose
from pipeline.core.schemas import Reidentification, typed
from pipeline.metrics.registry import metric_list


def reidentification(cfg) -> Reidentification:
    return typed(cfg.reidentification, Reidentification, "reidentification")


def test_recipes_compose_with_the_papers_protocol_and_build_the_rates():
    real = compose(["+experiment=legal_eval", "data.root=/corpora/LibriSpeech"])
    built = compose(["+experiment=legal_eval_synthetic"])
    assert real.data.name == "librispeech" and built.data.name == "synthetic_tiny" and built.device == "cpu"
    for cfg in (real, built):
        section = cfg.reidentification
        assert section.enabled and section.calibration_conversations == 9 and section.runs == 5
    assert list(built.reidentification.lengths) == [1, 2] and built.data.generate.subsets["test-synth"].utterances == 24
    names = [m.name for m in metric_list(reidentification(built), built.seed)]
    assert names[-2:] == ["singling_out_rate", "identification_rate"]


def test_the_default_config_builds_no_rates():
    cfg = compose([])
    assert not cfg.reidentification.enabled
    assert "singling_out_rate" not in [m.name for m in metric_list(reidentification(cfg), cfg.seed)]
