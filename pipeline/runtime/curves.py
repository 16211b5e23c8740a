"""Training curves (loss, accuracy, validation EER, learning rate): side effects of a training,
never part of a cache key or a result.

`open_curves(settings, folder, name)` gives a `CurveLogger` for one training run, its backend
chosen by the `curves` config (`backend`: auto | tensorboard | wandb | mlflow | none):

- tensorboard: event files in `<folder>/<name>/` (`tensorboard --logdir <folder>`);
- wandb: a W&B run `name` in project `curves.project`, its files under `<folder>/wandb/`
  (`WANDB_MODE=offline` keeps it on this machine, until `wandb sync`);
- mlflow: an MLflow run `name` in experiment `curves.project`, tracked at
  `curves.tracking_uri` (null: the SQLite store `<folder>/mlflow.db`);
- auto: tensorboard when the package is installed, else none (said once in the log).

A backend switched on by name whose package is missing stops with one line naming the package.
Each run also leaves `<folder>/<name>.json` (backend, where to look), which `written` reads
back for the report. Only the process given `main=True` (rank 0) logs anything.

>>> import tempfile
>>> folder = Path(tempfile.mkdtemp())
>>> with open_curves({"backend": "none"}, folder, "attacker") as curves:
...     curves.log(1, loss=2.5)
>>> written(folder)
[]
"""
from __future__ import annotations

import importlib.util
import json
import logging
from functools import cache
from pathlib import Path
from typing import Any, Mapping

from pipeline.core.errors import VpevalError
from pipeline.core.fileio import write_json

log = logging.getLogger(__name__)

BACKENDS = ("auto", "tensorboard", "wandb", "mlflow", "none")
# backend -> (module imported, what to install)
PACKAGES = {"tensorboard": ("tensorboard", "pip install 'vpeval[curves]'"),
            "wandb": ("wandb", "pip install wandb"), "mlflow": ("mlflow", "pip install mlflow")}
DEFAULT_PROJECT = "vpeval"


class CurveLogger:
    """Where one training run's scalars go; this base class drops them (backend none).
    `location`: where to look at them (a folder, a URL); `command`: what shows them, if any."""

    backend = "none"
    location: str = ""
    command: str | None = None

    def log(self, step: int, **scalars: float) -> None:
        """Record `scalars` (name -> value; `group/name` groups them) at optimiser step or epoch `step`."""

    def close(self) -> None:
        """Flush and end the run."""

    def __enter__(self) -> CurveLogger:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


class TensorBoardCurves(CurveLogger):
    """Event files in `folder`; the writer opens at the first step logged, discarding (purge_step)
    what an interrupted earlier run logged from that step on, so a resumed run's curves do not fold back."""

    backend = "tensorboard"

    def __init__(self, folder: Path):
        self.folder, self.writer = folder, None
        self.location, self.command = str(folder), f"tensorboard --logdir {folder.parent}"

    def log(self, step: int, **scalars: float) -> None:
        if self.writer is None:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(self.folder), purge_step=step or None)
        for tag, value in scalars.items():
            self.writer.add_scalar(tag, float(value), global_step=step)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


class WandbCurves(CurveLogger):
    backend = "wandb"

    def __init__(self, folder: Path, name: str, project: str):
        import wandb

        folder.mkdir(parents=True, exist_ok=True)
        self.run = wandb.init(project=project, name=name, dir=str(folder), reinit="create_new")
        # offline (WANDB_MODE=offline): no URL, the run's folder, which `wandb sync` uploads
        self.location = self.run.url or str(Path(self.run.dir).parent)
        self.command = None if self.run.url else f"wandb sync {self.location}"

    def log(self, step: int, **scalars: float) -> None:
        self.run.log({tag: float(value) for tag, value in scalars.items()}, step=step)

    def close(self) -> None:
        self.run.finish()


class MlflowCurves(CurveLogger):
    backend = "mlflow"

    def __init__(self, name: str, project: str, tracking_uri: str):
        from mlflow import MlflowClient

        self.client = MlflowClient(tracking_uri=tracking_uri)
        experiment = self.client.get_experiment_by_name(project)
        experiment_id = experiment.experiment_id if experiment else self.client.create_experiment(project)
        self.run_id = self.client.create_run(experiment_id, run_name=name).info.run_id
        self.location = f"{tracking_uri} (run {self.run_id})"
        self.command = None if tracking_uri.startswith(("http:", "https:")) else \
            f"mlflow ui --backend-store-uri {tracking_uri}"

    def log(self, step: int, **scalars: float) -> None:
        for tag, value in scalars.items():
            self.client.log_metric(self.run_id, tag, float(value), step=step)

    def close(self) -> None:
        self.client.set_terminated(self.run_id)


def open_curves(settings: Mapping[str, Any] | None, folder: str | Path, name: str, *, main: bool = True) -> CurveLogger:
    """The curve logger of training run `name` under `folder`, as `settings` (the `curves`
    config; None: auto) asks; a do-nothing logger when `main` is false (ranks other than 0)."""
    settings = dict(settings or {})
    backend = chosen_backend(str(settings.get("backend") or "auto"))
    if not main or backend == "none":
        return CurveLogger()
    folder = Path(folder)
    project = str(settings.get("project") or DEFAULT_PROJECT)
    if backend == "tensorboard":
        curves: CurveLogger = TensorBoardCurves(folder / name)
    elif backend == "wandb":
        curves = WandbCurves(folder, name, project)
    else:
        curves = MlflowCurves(name, project, str(settings.get("tracking_uri") or mlflow_store(folder)))
    write_json(folder / f"{name}.json", {"name": name, "backend": backend, "location": curves.location,
                                         "command": curves.command})
    log.info("curves: %s of %s at %s", backend, name, curves.location)
    return curves


def mlflow_store(folder: Path) -> str:
    """MLflow's default store of a run folder: SQLite (MLflow 3 refuses a new file store)."""
    folder.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{(folder / 'mlflow.db').resolve()}"


def chosen_backend(backend: str) -> str:
    """`backend` itself, checked and its package present, or auto's choice."""
    if backend not in BACKENDS:
        raise VpevalError(f"curves.backend={backend}: must be one of {', '.join(BACKENDS)}")
    if backend == "auto":
        return "tensorboard" if installed("tensorboard") else _without_tensorboard()
    if backend != "none" and not installed(PACKAGES[backend][0]):
        module, install = PACKAGES[backend]
        raise VpevalError(f"curves.backend={backend} needs the {module} package ({install}), "
                          "or set curves.backend=none")
    return backend


def installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


@cache
def _without_tensorboard() -> str:
    log.info("curves: TensorBoard is not installed, so no training curves (pip install 'vpeval[curves]')")
    return "none"


def written(folder: str | Path) -> list[dict]:
    """The runs whose curves went under `folder` (what `open_curves` recorded), by name."""
    return [json.loads(path.read_text()) for path in sorted(Path(folder).glob("*.json"))]
