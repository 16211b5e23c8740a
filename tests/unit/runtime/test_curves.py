"""Training curves (pipeline.runtime.curves): the values logged are read back from each
backend's own store; a missing or unknown backend is one line; rank > 0 and `none` log nothing."""
import logging
from pathlib import Path

import pytest

from pipeline.core.errors import VpevalError
from pipeline.runtime import curves as curves_module
from pipeline.runtime.curves import CurveLogger, chosen_backend, open_curves, written

VALUES = {1: {"train/loss": 2.5, "train/accuracy": 0.25}, 2: {"train/loss": 1.5, "train/accuracy": 0.5},
          4: {"train/loss": 0.75, "train/accuracy": 0.875, "epoch/val_eer": 0.125}}


def tensorboard_scalars(folder) -> dict[str, list[tuple[int, float]]]:
    """tag -> [(step, value)] of the event files in `folder`, as TensorBoard reads them."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder))
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def log_all(logger: CurveLogger, values: dict) -> None:
    with logger:
        for step, scalars in values.items():
            logger.log(step, **scalars)


def test_tensorboard_curves_read_back(tmp_path):
    pytest.importorskip("tensorboard")
    log_all(open_curves({"backend": "tensorboard"}, tmp_path, "attacker_x"), VALUES)
    assert tensorboard_scalars(tmp_path / "attacker_x") == {
        "train/loss": [(1, 2.5), (2, 1.5), (4, 0.75)], "train/accuracy": [(1, 0.25), (2, 0.5), (4, 0.875)],
        "epoch/val_eer": [(4, 0.125)]}
    assert written(tmp_path) == [{"name": "attacker_x", "backend": "tensorboard",
                                  "location": str(tmp_path / "attacker_x"),
                                  "command": f"tensorboard --logdir {tmp_path}"}]


def test_tensorboard_resumed_run_replaces_the_interrupted_steps(tmp_path):
    """A run resumed from step 2 logs steps 3.. again: TensorBoard shows each step once, the new value."""
    pytest.importorskip("tensorboard")
    for values in ({step: {"loss": float(step)} for step in (1, 2, 3, 4)},
                   {step: {"loss": 10.0 + step} for step in (3, 4, 5)}):
        log_all(open_curves({"backend": "tensorboard"}, tmp_path, "run"), values)
    assert tensorboard_scalars(tmp_path / "run") == {"loss": [(1, 1.0), (2, 2.0), (3, 13.0), (4, 14.0), (5, 15.0)]}


def test_auto_is_tensorboard_when_installed_else_none_said_once(monkeypatch, caplog):
    monkeypatch.setattr(curves_module, "installed", lambda module: True)
    assert chosen_backend("auto") == "tensorboard"
    monkeypatch.setattr(curves_module, "installed", lambda module: False)
    curves_module._without_tensorboard.cache_clear()
    with caplog.at_level(logging.INFO, logger=curves_module.__name__):
        assert chosen_backend("auto") == chosen_backend("auto") == "none"
    assert [r.getMessage() for r in caplog.records] == [
        "curves: TensorBoard is not installed, so no training curves (pip install 'vpeval[curves]')"]


@pytest.mark.parametrize("backend, message", [
    ("tensorboard", "curves.backend=tensorboard needs the tensorboard package (pip install 'vpeval[curves]'), "
                    "or set curves.backend=none"),
    ("wandb", "curves.backend=wandb needs the wandb package (pip install wandb), or set curves.backend=none"),
    ("mlflow", "curves.backend=mlflow needs the mlflow package (pip install mlflow), or set curves.backend=none")])
def test_a_named_backend_without_its_package_is_one_line(monkeypatch, backend, message):
    monkeypatch.setattr(curves_module, "installed", lambda module: False)
    with pytest.raises(VpevalError) as raised:
        chosen_backend(backend)
    assert str(raised.value) == message


def test_unknown_backend_is_one_line():
    with pytest.raises(VpevalError) as raised:
        chosen_backend("tensorbord")
    assert str(raised.value) == "curves.backend=tensorbord: must be one of auto, tensorboard, wandb, mlflow, none"


@pytest.mark.parametrize("settings, main", [({"backend": "none"}, True), ({"backend": "tensorboard"}, False)])
def test_none_and_other_ranks_write_nothing(tmp_path, settings, main):
    pytest.importorskip("tensorboard")
    log_all(open_curves(settings, tmp_path / "curves", "run", main=main), VALUES)
    assert not (tmp_path / "curves").exists() and written(tmp_path / "curves") == []


def test_wandb_offline_run_holds_the_values(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    logger = open_curves({"backend": "wandb", "project": "vpeval-test"}, tmp_path, "attacker_x")
    for step, scalars in VALUES.items():
        logger.log(step, **scalars)
    # W&B commits a step when the next begins (the last at finish) and has no reader of an offline
    # run's file: its summary holds step 2's values here
    assert {key: logger.run.summary[key] for key in ("train/loss", "train/accuracy", "_step")} == \
        {"train/loss": 1.5, "train/accuracy": 0.5, "_step": 2}
    logger.close()
    [record] = written(tmp_path)
    run_folder = Path(record["location"])
    assert record["backend"] == "wandb" and run_folder.parent == tmp_path / "wandb"
    assert record["command"] == f"wandb sync {run_folder}" and list(run_folder.glob("run-*.wandb"))


def test_mlflow_store_holds_the_values(tmp_path):
    pytest.importorskip("mlflow")
    from mlflow import MlflowClient

    log_all(open_curves({"backend": "mlflow", "project": "vpeval-test"}, tmp_path, "attacker_x"), VALUES)
    [record] = written(tmp_path)
    uri = f"sqlite:///{tmp_path.resolve() / 'mlflow.db'}"
    assert record["backend"] == "mlflow" and record["location"].startswith(f"{uri} (run ")
    assert record["command"] == f"mlflow ui --backend-store-uri {uri}"
    client = MlflowClient(tracking_uri=uri)
    [run] = client.search_runs([client.get_experiment_by_name("vpeval-test").experiment_id])
    assert run.info.run_name == "attacker_x" and run.info.status == "FINISHED"
    for tag in ("train/loss", "train/accuracy", "epoch/val_eer"):
        assert [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, tag)] == \
            [(step, scalars[tag]) for step, scalars in VALUES.items() if tag in scalars]
