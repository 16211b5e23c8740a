"""Model folders of the voice-conversion parts: `model.json` (what builds the module) and
`model.pt` (a weights-only state dict), written atomically, `model.json` last.

Loading is safe: `model.json` may only name builders under `anonymizers.vc.` or
`torchaudio.models.`, and `model.pt` goes through `torch.load(weights_only=True)`, so a file
holding pickled code is refused; a state dict of another architecture is an error that
lists expected against found keys.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

import torch
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from torch import nn

from pipeline.core.errors import VpevalError
from pipeline.core.fileio import read_text, write_json
from pipeline.runtime.checkpoint import check_builders, load_checkpoint, load_state_checked, save_checkpoint

ALLOWED_BUILDERS = ("anonymizers.vc.", "torchaudio.models.")
VC_RECIPE = "vpeval train-vc vc (see recipes/train_vc/README.md)"
OHNN_RECIPE = "vpeval train-vc ohnn (see recipes/train_vc/README.md)"
WEIGHTS, SPEC = "model.pt", "model.json"


def require_folder(value: str | None, key: str, recipe: str) -> Path:
    """The configured model folder, or an error naming the key and the recipe that trains it."""
    if value in (None, ""):
        raise VpevalError(f"{key} is not set: no trained weights configured; train them with {recipe} "
                          f"and set {key}=<output folder>")
    folder = Path(str(value))
    if not (folder / SPEC).is_file() or not (folder / WEIGHTS).is_file():
        raise VpevalError(f"{key}={folder}: no {SPEC} and {WEIGHTS} there; train the model with {recipe}")
    return folder


def build(spec: Mapping[str, Any], where: Path) -> nn.Module:
    """Instantiate a module spec (`_target_` tree) after checking every builder's name."""
    check_builders(spec, where, ALLOWED_BUILDERS)
    try:
        return instantiate(dict(spec), _convert_="all")
    except (InstantiationException, TypeError, ValueError) as exc:
        raise VpevalError(f"{where}: cannot build the model ({str(exc).strip().splitlines()[0]})") from None


def save_module(folder: str | Path, module: nn.Module, spec: Mapping[str, Any], info: Mapping[str, Any]) -> Path:
    """Write `model.pt` (state dict) then `model.json` ({"format", "model": spec, **info})."""
    folder = Path(folder)
    save_checkpoint(folder / WEIGHTS, {k: v.detach().cpu() for k, v in module.state_dict().items()})
    write_json(folder / SPEC, {"model": spec, **info})
    return folder


def read_spec(folder: Path, expected_format: str) -> dict:
    path = folder / SPEC
    try:
        spec = json.loads(read_text(path))
    except (OSError, json.JSONDecodeError) as exc:
        raise VpevalError(f"{path}: unreadable model description ({exc})") from None
    if not isinstance(spec, dict) or spec.get("format") != expected_format or "model" not in spec:
        found = spec.get("format") if isinstance(spec, dict) else type(spec).__name__
        raise VpevalError(f"{path}: expected a {expected_format!r} model description, found {found!r}")
    return spec


def load_module(folder: str | Path, expected_format: str, expected_type: type, what: str,
                device: torch.device | str) -> tuple[nn.Module, dict]:
    """Rebuild and load a model folder; returns (module in eval mode on `device`, model.json)."""
    folder = Path(folder)
    spec = read_spec(folder, expected_format)
    module = build(spec["model"], folder / SPEC)
    if not isinstance(module, expected_type):
        raise VpevalError(f"{folder / SPEC}: builds a {type(module).__name__}, not a {expected_type.__name__}")
    load_state_checked(module, load_checkpoint(folder / WEIGHTS), folder / WEIGHTS, what)
    return module.to(device).eval(), spec
