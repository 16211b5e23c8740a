"""pipeline.asv.encoder: the speaker-encoder protocol, front-end nodes, model.json builders."""
import json

import pytest
import torch
from torch import nn

from pipeline.asv.embed import load_encoder, save_encoder
from pipeline.asv.encoder import check_encoder, check_module_targets, frontend_spec
from pipeline.asv.model import SpeakerEncoder
from pipeline.core.errors import VpevalError

SMALL = dict(channels=[16, 16, 48], kernel_sizes=[5, 3, 1], dilations=[1, 2, 1], attention_channels=8, se_channels=8,
             embedding_dim=12)


@pytest.mark.parametrize("target", ["subprocess.Popen", "os.system", "builtins.eval", "no.such.Module"])
def test_model_descriptions_build_only_module_classes(target):
    with pytest.raises(VpevalError, match=rf"^model.json: refused builder '{target}' \(not an"):
        check_module_targets({"_target_": "pipeline.asv.model.SpeakerEncoder", "frontend": {"_target_": target}},
                             "model.json")
    check_module_targets({"_target_": "torch.nn.Linear", "x": [{"_target_": "pipeline.asv.features.KaldiFbank"}]},
                         "model.json")


def test_a_module_without_the_protocol_is_one_line():
    with pytest.raises(VpevalError, match=r"^attacker.model._target_: builds a Linear, not a speaker encoder "
                                          r"\(missing sample_rate, embedding_dim, architecture, min_samples"):
        check_encoder(nn.Linear(2, 2), "attacker.model._target_")


def test_front_end_is_a_node_and_old_class_paths_still_load(tmp_path):
    node = {"_target_": "pipeline.asv.speechbrain_fbank.SpeechBrainFbank", "_partial_": True}
    assert frontend_spec("pipeline.asv.speechbrain_fbank.SpeechBrainFbank") == node
    encoder = SpeakerEncoder(frontend=node, **SMALL).eval()
    save_encoder(tmp_path, encoder, name="x")
    spec = json.loads((tmp_path / "model.json").read_text())
    assert spec["model"]["frontend"] == node
    spec["model"]["frontend"] = node["_target_"]  # an attacker folder written before front ends were nodes
    (tmp_path / "model.json").write_text(json.dumps(spec))
    wavs = torch.randn(2, 8000) * 0.1
    with torch.inference_mode():
        torch.testing.assert_close(load_encoder(tmp_path, "cpu")(wavs), encoder(wavs))
