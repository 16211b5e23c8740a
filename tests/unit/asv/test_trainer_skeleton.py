"""The trainer skeleton (pipeline.runtime.trainer) on a toy regression, and where training code
lives: inference modules never import the training (`pipeline.app.train_vc`), `vpeval train-vc` runs it."""
import subprocess
import sys

import pytest
import torch
from torch import nn

from pipeline.core.errors import VpevalError
from pipeline.runtime.trainer import Trainer


class Interrupted(Exception):
    pass


class Toy(Trainer):
    """Least squares with SGD, an epoch of random batches per unit."""

    checkpoint_format, what = "toy-checkpoint-1", "toy"

    def __init__(self, path, epochs=4, width=3, lr=0.1, stop_after=None, before_settings=()):
        torch.manual_seed(0)
        self.model = nn.Linear(width, 1)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=lr)
        self.checkpoint_path, self.device, self.epochs, self.stop_after = path, torch.device("cpu"), epochs, stop_after
        self.run_identity = {"lr": lr, "width": width}
        self.loaded_before_settings = before_settings
        self.state = {"epoch": 0, "history": []}
        self.events = []

    def checkpointed(self):
        return {"model": self.model, "optimizer": self.optimizer}

    def on_fit_start(self):
        self.events.append(("start", self.state["epoch"]))

    def finished(self):
        return self.state["epoch"] >= self.epochs

    def fit_unit(self):
        if self.state["epoch"] == self.stop_after:
            raise Interrupted
        x = torch.randn(8, self.model.in_features)  # the global RNG, restored on resume
        loss = (self.model(x).squeeze(1) - x.sum(1)).pow(2).mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.state["epoch"] += 1
        self.state["history"].append(round(loss.item(), 6))
        self.save()

    def on_fit_stop(self):
        self.events.append(("stop", self.state["epoch"]))

    def on_fit_end(self):
        self.events.append(("end", self.state["epoch"]))
        return self.state["history"]


def test_interrupted_run_resumes_to_the_same_weights_and_history(tmp_path):
    straight = Toy(tmp_path / "a.pt")
    history = straight.fit()
    assert len(history) == 4 and straight.events == [("start", 0), ("stop", 4), ("end", 4)]
    interrupted = Toy(tmp_path / "b.pt", stop_after=2)
    with pytest.raises(Interrupted):
        interrupted.fit()
    # Regression: a unit's error still stops the run (the voice converter's progress bar stayed
    # open after its out-of-memory error and shifted the lines printed after it); no end.
    assert interrupted.events == [("start", 0), ("stop", 2)]
    torch.manual_seed(123)  # the checkpoint's RNG state, not this one, drives the next epochs
    resumed = Toy(tmp_path / "b.pt")
    assert resumed.fit() == history
    assert resumed.events == [("start", 2), ("stop", 4), ("end", 4)]
    assert torch.equal(resumed.model.weight, straight.model.weight)
    saved = torch.load(tmp_path / "b.pt", weights_only=True)
    assert saved["format"] == "toy-checkpoint-1" and saved["epoch"] == 4 and set(saved) >= {"model", "optimizer", "rng"}
    assert Toy(tmp_path / "b.pt").fit() == history  # finished: no unit runs


def test_resume_refuses_other_settings_and_names_another_architecture(tmp_path):
    Toy(tmp_path / "c.pt", epochs=1).fit()
    with pytest.raises(VpevalError, match=r"c\.pt: written by a run with other settings \(lr: 0\.1 -> 0\.2\)"):
        Toy(tmp_path / "c.pt", lr=0.2).fit()
    with pytest.raises(VpevalError, match=r"other settings \(width: 3 -> 5\)"):
        Toy(tmp_path / "c.pt", width=5).fit()
    with pytest.raises(VpevalError, match=r"c\.pt: model is from another architecture: .*shape mismatches"):
        Toy(tmp_path / "c.pt", width=5, before_settings=("model",)).fit()
    with pytest.raises(VpevalError, match=r"c\.pt: not a vpeval other checkpoint \(format 'toy-checkpoint-1'\)"):
        other = Toy(tmp_path / "c.pt")
        other.what, other.checkpoint_format = "other", "other-1"
        other.fit()


def test_no_checkpoint_path_trains_without_writing(tmp_path):
    assert len(Toy(None, epochs=2).fit()) == 2
    assert list(tmp_path.iterdir()) == []


def test_inference_modules_do_not_import_training():
    code = ("import sys, anonymizers.xvector, anonymizers.ohnn, anonymizers.vc.system;"
            "print([m for m in sys.modules if m.startswith('pipeline.app')])")
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert found.strip() == "[]"


@pytest.mark.parametrize(("system", "arguments"), [("vc", ["--config-name", "tiny"]),
                                                   ("ohnn", ["--config-name", "ohnn_small", "vc_model=y"])])
def test_training_commands_run_their_recipe(system, arguments):
    done = subprocess.run([sys.executable, "-m", "pipeline", "train-vc", system, "--cfg", "job", *arguments, "out=x"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "out: x" in done.stdout and "training:" in done.stdout
