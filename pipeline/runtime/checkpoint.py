"""Safe checkpoints: atomic `torch.save`, `torch.load(weights_only=True)`, clear mismatch errors."""
from __future__ import annotations

import pickle
import random
import re
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch
from torch import nn

from pipeline.core import faults
from pipeline.core.errors import VpevalError
from pipeline.core.fileio import atomic_path

SHOWN_DIFFERENCES = 3


def save_checkpoint(path: str | Path, state: Mapping[str, Any]) -> Path:
    """torch.save `state` atomically (tensors, numbers, strings, lists and dicts only)."""
    with atomic_path(path) as tmp:
        torch.save(dict(state), tmp)
        faults.hit("checkpoint")
    return Path(path)


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict:
    """torch.load with `weights_only=True`; anything else (pickled objects) is refused."""
    path = Path(path)
    if not path.is_file():
        raise VpevalError(f"{path}: checkpoint not found")
    with open(path, "rb") as handle:
        magic = handle.read(4)
    if not (magic.startswith(b"PK") or magic[:1] == b"\x80"):  # a torch zip archive, or a legacy pickle
        raise VpevalError(f"{path}: not a readable torch checkpoint (neither a torch zip archive nor a pickle); "
                          "point at the model.pt / checkpoint.pt a vpeval run wrote")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as exc:
        found = re.search(r"Unsupported (?:global|operand)[^.\n]*", re.sub(r"\x1b\[[0-9;]*m", "", str(exc)))
        reason = found.group(0).strip() if found else "not weights only"
        raise VpevalError(f"{path}: refused to load, it holds more than weights: pickled code or objects ({reason}); "
                          "vpeval loads checkpoints with torch.load(weights_only=True) and never runs their code") from None
    except (RuntimeError, EOFError, OSError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise VpevalError(f"{path}: not a readable torch checkpoint ({reason})") from None
    if not isinstance(state, dict):
        raise VpevalError(f"{path}: expected a dict of tensors, found {type(state).__name__}")
    return state


def load_resumable(path: str | Path | None, expected_format: str, what: str,
                   device: str | torch.device) -> dict | None:
    """The checkpoint a training run resumes from: None when there is none yet, else the
    file's contents once checked to be a `what` checkpoint (its "format" entry)."""
    if path is None or not Path(path).is_file():
        return None
    checkpoint = load_checkpoint(path, map_location=device)
    if checkpoint.get("format") != expected_format:
        raise VpevalError(f"{path}: not a vpeval {what} checkpoint (format {checkpoint.get('format')!r})")
    return checkpoint


def load_state_checked(module: nn.Module, state_dict: Mapping[str, Any], path: str | Path, what: str, *,
                       assign: bool = False) -> None:
    """Load `state_dict` into `module`, or name the file and the expected vs found keys/shapes.
    `assign`: the module's tensors become the state's, cast to their dtypes (a module built on
    the meta device, without initialising weights that would be overwritten)."""
    if not isinstance(state_dict, Mapping) or not all(isinstance(v, torch.Tensor) for v in state_dict.values()):
        raise VpevalError(f"{path}: the {what} entry is not a state dict of tensors")
    current = module.state_dict()
    expected = {name: tuple(tensor.shape) for name, tensor in current.items()}
    found = {name: tuple(tensor.shape) for name, tensor in state_dict.items()}
    problems = []
    missing = sorted(expected.keys() - found.keys())
    unexpected = sorted(found.keys() - expected.keys())
    reshaped = [f"{name}: expected {expected[name]} found {found[name]}"
                for name in sorted(expected.keys() & found.keys()) if expected[name] != found[name]]
    for label, items in (("missing keys", missing), ("unexpected keys", unexpected), ("shape mismatches", reshaped)):
        if items:
            more = f" (+{len(items) - SHOWN_DIFFERENCES} more)" if len(items) > SHOWN_DIFFERENCES else ""
            problems.append(f"{len(items)} {label} [{'; '.join(items[:SHOWN_DIFFERENCES])}]{more}")
    if problems:
        raise VpevalError(f"{path}: {what} is from another architecture: {', '.join(problems)}")
    if assign:
        state_dict = {name: tensor.to(current[name].dtype) for name, tensor in state_dict.items()}
    module.load_state_dict(state_dict, assign=assign)


def check_builders(spec: Any, where: str | Path, allowed: tuple[str, ...]) -> None:
    """Refuse a model description (a `_target_` tree from a model folder) that names a builder
    outside the `allowed` module prefixes, before anything is instantiated: a model folder
    must not be able to make the loader call an arbitrary function."""
    if isinstance(spec, Mapping):
        target = spec.get("_target_")
        if target is not None and not str(target).startswith(allowed):
            raise VpevalError(f"{where}: refused builder {target!r} (allowed: {', '.join(allowed)}*)")
        for value in spec.values():
            check_builders(value, where, allowed)
    elif isinstance(spec, list):
        for value in spec:
            check_builders(value, where, allowed)


def check_same_run(path: str | Path, saved: Mapping[str, Any], current: dict) -> None:
    """Refuse to resume a checkpoint written with other result-affecting settings (`saved`,
    the checkpoint's record of them, against `current`), naming the first differences."""
    changed = differences(dict(saved), current)
    if changed:
        more = f" (+{len(changed) - SHOWN_DIFFERENCES} more)" if len(changed) > SHOWN_DIFFERENCES else ""
        raise VpevalError(f"{path}: written by a run with other settings ({'; '.join(changed[:SHOWN_DIFFERENCES])}"
                          f"{more}); use another output folder or delete the checkpoint")


def differences(old: Any, new: Any, prefix: str = "") -> list[str]:
    """'key: old -> new' for every leaf that differs between two nested dicts."""
    if isinstance(old, dict) and isinstance(new, dict):
        return [line for key in sorted(old.keys() | new.keys(), key=str)
                for line in differences(old.get(key), new.get(key), f"{prefix}{key}.")]
    return [] if old == new else [f"{prefix.rstrip('.')}: {old!r} -> {new!r}"]


def rng_state(device: torch.device) -> dict:
    """The global RNG states (torch, CUDA of `device`, numpy, random) as checkpoint-safe values."""
    kind, keys, position, has_gauss, gauss = np.random.get_state()
    version, internal, gauss_next = random.getstate()
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state(device) if device.type == "cuda" else None,
        "numpy": {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)), "position": int(position),
                  "has_gauss": int(has_gauss), "gauss": float(gauss)},
        "random": {"version": version, "internal": list(internal), "gauss_next": gauss_next},
    }


def restore_rng_state(state: Mapping[str, Any], device: torch.device) -> None:
    """Inverse of `rng_state`."""
    torch.set_rng_state(state["torch"].cpu())  # RNG states must be CPU tensors, whatever map_location did
    if device.type == "cuda" and state["cuda"] is not None:
        torch.cuda.set_rng_state(state["cuda"].cpu(), device)
    numpy_state = state["numpy"]
    np.random.set_state((numpy_state["kind"], numpy_state["keys"].cpu().numpy().astype(np.uint32),
                         numpy_state["position"], numpy_state["has_gauss"], numpy_state["gauss"]))
    python_state = state["random"]
    random.setstate((python_state["version"], tuple(python_state["internal"]), python_state["gauss_next"]))
