"""Sweep bookkeeping: failure records per job and the aggregate report of a multirun.

- `record_failure(job_dir, error, overrides)` writes `<job>/failed.json` (the one-line
  error and the job's overrides); `clear_failure` removes a stale one when the job starts.
- `AggregateCallback` (conf/config.yaml `hydra.callbacks.aggregate`): in a multirun, after
  every job (Hydra 1.3's basic launcher calls `on_job_end` for failed jobs too, but skips
  `on_multirun_end` once a job failed) it records a failure and rewrites the aggregate of
  the sweep folder, so the aggregate after the last job covers every point. A single run
  is left alone. On a multi-node job only node 0 writes the aggregate. At the start of a
  multirun it writes `<sweep>/launched.json`, the overrides of every point in job-number
  order, so that a point killed from outside (scancel, time limit, out of memory, node lost),
  which leaves neither results nor `failed.json`, is still reported: as "did not finish".
"""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig

from pipeline.app.aggregate import aggregate
from pipeline.core.errors import VpevalError
from pipeline.core.fileio import write_json
from pipeline.core.layout import FAILED, LAUNCHED

log = logging.getLogger(__name__)


def sweep_variants(overrides: list[str]) -> list[list[str]]:
    """Override lists that together use every value of every sweep once.

    >>> sweep_variants(["seed=1,2", "anonymizer=mcadams"])
    [['seed=1', 'anonymizer=mcadams'], ['seed=2', 'anonymizer=mcadams']]
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
        choices = [[f"{o.get_key_element()}={value}" for value in o.sweep_string_iterator()]
                   if o.is_sweep_override() else [o.input_line] for o in parsed]
    except Exception:  # noqa: BLE001  (sweep syntax Hydra itself will report: globs, bad ranges)
        return []
    firsts = [values[0] for values in choices]
    variants = [firsts]
    for i, values in enumerate(choices):
        variants += [[*firsts[:i], value, *firsts[i + 1:]] for value in values[1:]]
    return variants


def sweep_points(overrides: list[str]) -> list[list[str]]:
    """The overrides of every job Hydra's basic sweeper launches, in job-number order.

    >>> sweep_points(["seed=1,2", "name=x"])
    [['seed=1', 'name=x'], ['seed=2', 'name=x']]
    """
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    batches = BasicSweeper.split_arguments(OverridesParser.create().parse_overrides(list(overrides)), None)
    return [list(job) for batch in batches for job in batch]


def node_rank(config: DictConfig) -> int:
    """This process's node in a multi-node job: `distributed.node_rank`, else Slurm's, else 0."""
    rank = (config.get("distributed") or {}).get("node_rank")
    return int(rank) if rank is not None else int(os.environ.get("SLURM_NODEID", 0))


def error_line(error: BaseException) -> str:
    """One line: a VpevalError's text, else the exception type and its first line."""
    text = str(error).strip().splitlines()
    first = text[0] if text else ""
    return first if isinstance(error, VpevalError) else f"{type(error).__name__}: {first}"


def record_failure(job_dir: str | Path, error: BaseException, overrides: list[str]) -> Path:
    return write_json(Path(job_dir) / FAILED, {"error": error_line(error), "overrides": list(overrides)})


def clear_failure(job_dir: str | Path) -> None:
    (Path(job_dir) / FAILED).unlink(missing_ok=True)


class AggregateCallback(Callback):
    """Keeps `<sweep dir>/aggregate/` up to date during a Hydra multirun."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        sweep = Path(config.hydra.sweep.dir)
        write_json(sweep / LAUNCHED, {"points": sweep_points(list(config.hydra.overrides.task))})

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        hydra_cfg = config.get("hydra")
        if hydra_cfg is None or hydra_cfg.get("mode") != RunMode.MULTIRUN or node_rank(config) != 0:
            return
        job_dir = Path(hydra_cfg.runtime.output_dir)
        if job_return.status == JobStatus.FAILED and not (job_dir / FAILED).is_file():
            record_failure(job_dir, job_return._return_value, list(job_return.overrides or []))
        self.aggregate(Path(hydra_cfg.sweep.dir), config)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        self.aggregate(Path(config.hydra.sweep.dir), config)

    @staticmethod
    def aggregate(sweep: Path, config: DictConfig) -> None:
        detect = config.get("detect") or {}
        try:
            trusted = detect.get("trusted")
            trusted = trusted if trusted is None or isinstance(trusted, str) else [str(s) for s in trusted]
            out = aggregate(sweep, trusted=trusted)  # the detection settings are the jobs' own
        except VpevalError as error:
            log.error("aggregate: %s", error)
            return
        log.info("aggregate report: %s", out / "report.md")
