"""The whole semi-informed attack with VPC 2026's attacker at tiny size (`attacker=ecapa_ssl_tiny`,
a random-weight tiny WavLM) on the built-in corpus: the attacks carry signal, the attacker folder
holds no WavLM weights and is rebuilt from its path."""
import json

import torch

from pipeline.app.experiment import run_experiment
from pipeline.asv.embed import load_encoder
from pipeline.core.config import compose
from pipeline.metrics.results import RunSummary
from tests.helpers import wavlm_hf_folder


def test_semi_informed_attack_with_ecapa_ssl_carries_signal(tmp_path):
    wavlm = wavlm_hf_folder(tmp_path / "wavlm_tiny")
    cfg = compose([f"paths.data={tmp_path / 'data'}", "data=synthetic_tiny", "attacker=ecapa_ssl_tiny",
                   f"attacker.model.wavlm={wavlm}", "device=cpu", "similarity=false"])
    report = run_experiment(cfg, tmp_path / "runs" / "ssl")
    found = RunSummary.from_json(report / "results.json")
    test = {(r.attack, r.set): r.eer for r in found.records if r.set.startswith("test_")}
    oo = (test[("OO", "test_f")] + test[("OO", "test_m")]) / 2
    aa = (test[("AA", "test_f")] + test[("AA", "test_m")]) / 2
    assert oo < 0.35 and aa > oo, test
    folders = [p.parent for p in (tmp_path / "data" / "cache" / "train").glob("*/model.json")]
    assert len(folders) == 2  # trained on original (OO) and on anonymised (AA) speech
    folder = folders[0]
    assert json.loads((folder / "model.json").read_text())["name"] == "ecapa_ssl_tiny"
    state = torch.load(folder / "model.pt", weights_only=True)
    assert state and not any("wavlm" in name for name in state)  # the frozen WavLM stays at its path
    encoder = load_encoder(folder, "cpu")
    assert encoder.architecture["wavlm"] == str(wavlm) and not encoder.wavlm.training
