"""The skeleton every vpeval trainer shares (the attacker's, the voice converter's, the OHNN
map's), cut like SpeechBrain's `Brain.fit` + `Checkpointer`: `fit()` resumes, then runs units
of work (an epoch, a step) until the run is finished; `resume()` and `save()` move what
`checkpointed()` names, the run's progress (`state`) and the RNG states in and out of one
atomic, weights-only checkpoint. A subclass gives the hooks and keeps its own maths.

A subclass sets, before `fit()`: `checkpoint_path` (None: never checkpointed),
`checkpoint_format` and `what` (the checkpoint's "format" entry and the word naming it in
errors), `run_identity` (the settings a resume must match), `state` (a dict of progress,
saved and restored whole) and `device`.
"""
from __future__ import annotations

import json
import logging
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, Iterable, Mapping

import torch
from torch import nn

from pipeline.runtime.checkpoint import (
    check_same_run,
    load_resumable,
    load_state_checked,
    restore_rng_state,
    rng_state,
    save_checkpoint,
)
from pipeline.core.fileio import write_lines

log = logging.getLogger(__name__)


class Trainer(ABC):
    """A resumable training run; see the module docstring for what a subclass sets."""

    checkpoint_path: Path | None
    checkpoint_format: str
    what: str
    run_identity: dict
    state: dict
    device: torch.device
    # Checkpoint entries loaded before the run's settings are compared, so that a checkpoint
    # of another architecture is named as such (the attacker's "model").
    loaded_before_settings: tuple[str, ...] = ()
    # Words naming a module entry in errors, when not the entry's own name.
    entry_labels: Mapping[str, str] = {}

    @abstractmethod
    def checkpointed(self) -> dict[str, Any]:
        """Entry name -> module, optimiser, scheduler or grad scaler saved in the checkpoint."""

    @abstractmethod
    def finished(self) -> bool:
        """Whether the run has done all its units."""

    @abstractmethod
    def fit_unit(self) -> None:
        """One unit of training (an epoch, a step), `state` advanced and checkpointed as the trainer wants."""

    def on_fit_start(self) -> None:
        """After resuming, before the first unit."""

    def on_fit_stop(self) -> None:
        """After the last unit, or when a unit raised: release what `on_fit_start` opened (a
        progress bar left open would shift the lines printed after it, the error included)."""

    def on_fit_end(self) -> Any:
        """After `on_fit_stop`, when every unit is done; returns what `fit()` returns."""

    def fit(self) -> Any:
        """Resume (or start), train until finished, return `on_fit_end()`."""
        self.resume()
        self.on_fit_start()
        try:
            while not self.finished():
                self.fit_unit()
        finally:
            self.on_fit_stop()
        return self.on_fit_end()

    def writes_checkpoint(self) -> bool:
        """Whether this process writes the checkpoint (rank 0 only, in a multi-rank run)."""
        return self.checkpoint_path is not None

    def resume(self) -> None:
        """Restore everything from `checkpoint_path` when there is a checkpoint there."""
        path = self.checkpoint_path
        checkpoint = load_resumable(path, self.checkpoint_format, self.what, self.device)
        if checkpoint is None:
            return
        entries = self.checkpointed()
        for name in self.loaded_before_settings:
            self._load_entry(name, entries[name], checkpoint[name], path)
        check_same_run(path, checkpoint["run"], self.run_identity)
        for name, target in entries.items():
            if name not in self.loaded_before_settings:
                self._load_entry(name, target, checkpoint[name], path)
        restore_rng_state(checkpoint["rng"], self.device)
        self.state = {key: checkpoint[key] for key in self.state}
        log.info("%s: resuming from %s (%s)", self.what, path,
                 ", ".join(f"{key} {value}" for key, value in self.state.items() if isinstance(value, int)))

    def _load_entry(self, name: str, target: Any, saved: Any, path: Path) -> None:
        if isinstance(target, nn.Module):
            load_state_checked(target, saved, path, self.entry_labels.get(name, name))
        elif saved:  # a grad scaler saved without fp16 (e.g. a run begun on CPU) has an empty state
            target.load_state_dict(saved)

    def save(self) -> None:
        """Write the checkpoint atomically: format, run identity, every entry's state, RNG states, `state`."""
        if not self.writes_checkpoint():
            return
        entries = {name: target.state_dict() for name, target in self.checkpointed().items()}
        save_checkpoint(self.checkpoint_path, {"format": self.checkpoint_format, "run": self.run_identity, **entries,
                                               "rng": rng_state(self.device), **self.state})


def write_log(path: Path, records: Iterable[Mapping[str, Any]]) -> None:
    """training_log.jsonl: one JSON line per record, written atomically."""
    write_lines(path, (json.dumps(record) for record in records))
