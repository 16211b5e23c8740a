"""The attacker's training curves (pipeline.runtime.curves): the values TensorBoard shows are
the training's, and curves on or off change no weight, no cache key and no config hash."""
from pathlib import Path

import pytest
import torch

from pipeline.app.experiment import config_hash
from pipeline.asv.train import attacker_settings, train_attacker
from pipeline.core.cache import Cache
from pipeline.core.config import compose
from pipeline.core.layout import manifest_path, trials_path
from pipeline.runtime.curves import open_curves, written
from pipeline.stages import train
from tests.helpers import read_log, typed_attacker, validation_eer
from tests.unit.runtime.test_curves import tensorboard_scalars

# 4 steps per epoch, the running values every 2 steps
OVERRIDES = ("attacker.training.batch_size=8", "attacker.training.epochs=2", "attacker.training.log_every=2")

pytestmark = pytest.mark.usefixtures("single_thread")


def without_seconds(path: Path) -> list[dict]:
    return [{k: v for k, v in record.items() if k != "seconds"} for record in read_log(path)]


def test_curves_are_the_trainings_values_and_change_no_weight(corpus, tmp_path):
    pytest.importorskip("tensorboard")
    train_utts, val = corpus
    cfg = typed_attacker(overrides=OVERRIDES)
    validate = lambda encoder: validation_eer(encoder, val)  # noqa: E731
    plain = train_attacker(cfg, train_utts, tmp_path / "plain", device="cpu", seed=1986, validate=validate)
    with open_curves({"backend": "tensorboard"}, tmp_path / "curves", "attacker") as curves:
        curved = train_attacker(cfg, train_utts, tmp_path / "curved", device="cpu", seed=1986, validate=validate,
                                curves=curves)
    a, b = (torch.load(folder / "model.pt", weights_only=True) for folder in (plain, curved))
    assert a.keys() == b.keys() and all(torch.equal(a[name], b[name]) for name in a)
    log = read_log(curved / "training_log.jsonl")
    assert without_seconds(plain / "training_log.jsonl") == without_seconds(curved / "training_log.jsonl")

    scalars = tensorboard_scalars(tmp_path / "curves" / "attacker")
    for key in ("loss", "accuracy", "lr", "val_eer"):  # float32 in the event files
        assert scalars[f"epoch/{key}"] == [(r["epoch"] * r["steps"], pytest.approx(r[key], rel=1e-6)) for r in log]
    assert [step for step, _ in scalars["train/loss"]] == [2, 4, 6, 8]
    # the running values at an epoch's last step are the epoch's
    assert [value for step, value in scalars["train/loss"] if step % 4 == 0] == \
        [pytest.approx(r["loss"], rel=1e-6) for r in log]
    assert [value for step, value in scalars["train/accuracy"] if step % 4 == 0] == \
        [pytest.approx(r["accuracy"], rel=1e-6) for r in log]
    assert [r["name"] for r in written(tmp_path / "curves")] == ["attacker"]


class KeyOnly(Cache):
    """A cache that records the folder `build` would use and builds nothing."""

    def build(self, stage, params, inputs, builder, *, code):
        self.events.append(self.path(stage, params, inputs, code=code))
        return self.events[-1]


def test_curves_change_no_cache_key_and_no_config_hash(tmp_path):
    held_out = tmp_path / "split"
    for name in ("train", "select_enrolls", "select_trials"):
        manifest_path(held_out, name).parent.mkdir(parents=True, exist_ok=True)
        manifest_path(held_out, name).write_text("")
    trials_path(held_out, "select_trials").parent.mkdir(parents=True, exist_ok=True)
    trials_path(held_out, "select_trials").write_text("")
    cache = KeyOnly(tmp_path / "cache")
    cfg = compose(["attacker=ecapa_tiny"])
    train.run(attacker_settings(cfg.attacker), held_out, cache, seed=1986, device="cpu")
    for backend in ("none", "tensorboard", "wandb", "mlflow"):
        train.run(attacker_settings(cfg.attacker), held_out, cache, seed=1986, device="cpu",
                  curves={"backend": backend, "folder": str(tmp_path / "run" / "curves")})
    assert len(set(cache.events)) == 1
    hashes = {config_hash(compose([f"curves.backend={backend}", f"curves.project=p{backend}"]))
              for backend in ("auto", "none", "tensorboard", "wandb", "mlflow")}
    assert hashes == {config_hash(compose([]))}
