"""`vpeval export`: anonymised lists as VPC data dirs with a suffix, attackers as SpeechBrain folders."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from pipeline.app.cli import main as vpeval
from pipeline.app.experiment import Experiment
from pipeline.app.export import main
from pipeline.asv.model import SpeakerEncoder
from pipeline.asv.speechbrain_folder import EMBEDDING_WEIGHTS, HYPERPARAMS, load_speechbrain_encoder
from pipeline.core.config import compose
from pipeline.data.audio import read_audio
from pipeline.data.manifest import read_manifest
from tests.helpers import encoder_folder

LISTS = ["libri_dev_enrolls", "libri_dev_trials_f", "libri_dev_trials_m", "libri_test_enrolls",
         "libri_test_trials_f", "libri_test_trials_m", "train-clean-360"]


def table(path: Path) -> dict[str, str]:
    return dict(line.split(maxsplit=1) for line in path.read_text().splitlines())


def test_export_data_writes_vpc_dirs_that_precomputed_reads_back(vpc_folder, tmp_path, capsys):
    out = tmp_path / "exported"
    run = [f"paths.data={tmp_path / 'runs'}", "data=vpc", f"data.root={vpc_folder / 'data'}", "anonymizer=mcadams",
           "device=cpu"]
    assert main(["data", str(out), "--suffix", "_vp", *run]) == 0
    assert capsys.readouterr().out.split() == [str(out / f"{name}_vp") for name in
                                               ["train-clean-360", *LISTS[:6]]]
    assert sorted(p.name for p in out.iterdir()) == [f"{name}_vp" for name in LISTS]
    original = vpc_folder / "data"
    for name in LISTS:
        assert table(out / f"{name}_vp" / "utt2spk") == table(original / name / "utt2spk")
        assert table(out / f"{name}_vp" / "spk2gender") == table(original / name / "spk2gender")
        assert all(Path(path).is_file() for path in table(out / f"{name}_vp" / "wav.scp").values())
    assert (out / "libri_dev_trials_f_vp" / "trials").read_text() == (original / "libri_dev_trials_f" / "trials").read_text()
    assert (out / "libri_dev_enrolls_vp" / "enrolls").read_text().split() == \
        sorted((original / "libri_dev_enrolls" / "enrolls").read_text().split())
    # the exported dirs are one system's VPC data: anonymizer=precomputed finds vpeval's own audio in them
    back = Experiment(compose([*run, "anonymizer=precomputed", f"anonymizer.folder={out}", "anonymizer.suffix=vp"]))
    mcadams = Experiment(compose(run))
    for name in ("train", "test_trials_m"):
        exported = read_manifest(mcadams.data("anonymized", name, mcadams.evaluated))
        for ours, theirs in zip(exported, read_manifest(back.data("anonymized", name, back.evaluated))):
            np.testing.assert_allclose(read_audio(theirs.path, 16000), read_audio(ours.path, 16000), atol=1e-6)


def test_export_never_overwrites_another_systems_export(vpc_folder, tmp_path, capsys):
    """Regression (issue 27): `export data` with an existing --suffix and another anonymiser
    overwrote the earlier export."""
    out = tmp_path / "exported"
    run = [f"paths.data={tmp_path / 'runs'}", "data=vpc", f"data.root={vpc_folder / 'data'}", "device=cpu",
           "eval_splits=[test]"]
    assert main(["data", str(out), "--suffix", "b", *run, "anonymizer=mcadams"]) == 0
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert main(["data", str(out), "--suffix", "b", *run, "anonymizer=mcadams_fixed"]) == 2
    assert "holds the export of another system (mcadams #" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert main(["data", str(out), "--suffix", "b", *run, "anonymizer=mcadams"]) == 0  # the same system again
    (tmp_path / "mine" / "libri_test_enrolls_c").mkdir(parents=True)
    assert main(["data", str(tmp_path / "mine"), "--suffix", "c", *run, "anonymizer=mcadams"]) == 2
    assert "was not written by vpeval export" in capsys.readouterr().err


def test_export_attacker_through_the_vpeval_command(tmp_path, capsys):
    torch.manual_seed(0)
    encoder = SpeakerEncoder(channels=[16, 16, 48], kernel_sizes=[5, 3, 1], dilations=[1, 2, 1],
                             attention_channels=8, se_channels=8, embedding_dim=12).eval()
    attacker = encoder_folder(tmp_path / "attacker", encoder)
    try:
        vpeval(["export", "attacker", str(attacker), str(tmp_path / "sb")])
    except SystemExit as stop:
        assert stop.code == 0
    assert {p.name for p in (tmp_path / "sb").iterdir()} == {HYPERPARAMS, EMBEDDING_WEIGHTS}
    reloaded = load_speechbrain_encoder(tmp_path / "sb")
    assert all(torch.equal(t, encoder.state_dict()[k]) for k, t in reloaded.state_dict().items())
    assert main(["attacker", str(tmp_path / "missing"), str(tmp_path / "x")]) == 2
    assert "missing/model.json: attacker model description not found" in capsys.readouterr().err
