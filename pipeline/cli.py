"""The `vpeval` command (also `python -m pipeline`).

    vpeval [hydra overrides]          run an experiment (a Hydra app; -m for sweeps)
    vpeval metrics FILE... [--json]   metrics of score files
    vpeval validate [overrides]       prepare and check the configured corpus, nothing else

An experiment prints the path of its report folder as its last line. Errors the user can
fix print one line and exit with status 2.
"""
from __future__ import annotations

import logging
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from pipeline.config import CONFIG_DIR
from pipeline.errors import VpevalError

log = logging.getLogger("vpeval")


def fail(error: VpevalError) -> None:
    print(f"vpeval: error: {error}", file=sys.stderr)
    sys.exit(2)


@hydra.main(config_path=str(CONFIG_DIR), config_name="config", version_base="1.3")
def experiment_app(cfg: DictConfig) -> None:
    from pipeline.experiment import run_experiment

    try:
        report = run_experiment(cfg, Path(HydraConfig.get().runtime.output_dir))
    except VpevalError as error:
        fail(error)
    if report is None:  # a follower node of a multi-node run: node 0 reports
        return
    log.info("report: %s", report / "report.md")
    print(report, flush=True)


@hydra.main(config_path=str(CONFIG_DIR), config_name="config", version_base="1.3")
def validate_app(cfg: DictConfig) -> None:
    from pipeline.cache import Cache
    from pipeline.stages import prepare, validate

    try:
        prepared = prepare.run(cfg.data, Cache(Path(cfg.paths.cache)))
        result = validate.check(prepared, tuple(cfg.eval_splits))
    except VpevalError as error:
        fail(error)
    print(result.render())
    if result.problems:
        sys.exit(2)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["metrics"]:
        from pipeline.metrics.cli import main as metrics_main

        sys.exit(metrics_main(argv[1:]))
    app = validate_app if argv[:1] == ["validate"] else experiment_app
    overrides = argv[1:] if argv[:1] == ["validate"] else argv
    check_overrides(overrides)
    sys.argv = [sys.argv[0], *overrides]
    app()


def check_overrides(overrides: list[str]) -> None:
    """Unknown keys and wrongly typed values stop here in one line, before Hydra starts (whose
    own errors span several lines). Runs with Hydra flags (-m, --cfg, ...) are left to Hydra."""
    if any(arg.startswith("-") for arg in overrides):
        return
    from pipeline.config import compose

    try:
        compose(overrides)
    except VpevalError as error:
        fail(error)
