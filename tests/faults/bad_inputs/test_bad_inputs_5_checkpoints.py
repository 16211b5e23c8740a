"""Bad inputs: checkpoints and model folders."""
import pathlib
import pickle
from pathlib import Path

import torch

from pipeline.asv.embed import load_encoder
from pipeline.core.config import compose
from pipeline.runtime.checkpoint import load_checkpoint
from tests.faults.bad_inputs.catalogue import raised, record
from tests.helpers import encoder_folder


class Payload:
    """Pickled code: unpickling it creates `marker` (what a malicious checkpoint would do)."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (pathlib.Path.touch, (pathlib.Path(self.marker),))


def test_checkpoint_with_pickled_code_is_refused_not_run(tmp_path):
    control = tmp_path / "control_marker"
    pickle.loads(pickle.dumps(Payload(control)))
    assert control.exists()  # the payload is live: plain unpickling runs it
    marker = tmp_path / "pwned_marker"
    path = tmp_path / "model.pt"
    torch.save({"model": {"w": torch.zeros(2)}, "extra": Payload(marker)}, path)
    message = raised(load_checkpoint, path)
    assert not marker.exists()
    record("pickled-code", "checkpoint holding pickled code (a `__reduce__` payload)",
           "checkpoint loader (torch.load weights_only=True)", message, tmp_path, "model.pt", "refused to load")


def test_checkpoint_of_another_architecture(tmp_path):
    cfg = compose(["attacker=ecapa_tiny"]).attacker.model
    from hydra.utils import instantiate

    encoder_folder(tmp_path, instantiate(cfg), embedding_dim=48, channels=[64, 64, 64, 64, 192])
    message = raised(load_encoder, tmp_path, "cpu")
    record("other-architecture", "model.pt of another architecture than model.json describes",
           "extract (encoder loader)", message, tmp_path, "model.pt", "another architecture")


def test_checkpoint_not_a_torch_file(tmp_path):
    path = tmp_path / "checkpoint.pt"
    path.write_bytes(b"\x00garbage" * 100)
    record("not-a-checkpoint", "checkpoint file that is not a torch file", "checkpoint loader",
           raised(load_checkpoint, path), tmp_path, "checkpoint.pt", "not a readable torch checkpoint")


def test_checkpoint_of_another_run(tmp_path):
    from pipeline.runtime.checkpoint import check_same_run

    saved = {"architecture": {"embedding_dim": 32}, "seed": 1, "training": {"epochs": 4}}
    current = {"architecture": {"embedding_dim": 32}, "seed": 2, "training": {"epochs": 4}}
    record("other-run", "resuming a training checkpoint written with other settings", "train (resume)",
           raised(check_same_run, tmp_path / "checkpoint.pt", saved, current), tmp_path, "checkpoint.pt",
           "seed: 1 -> 2")
