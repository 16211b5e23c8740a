"""Device placement shared by every torch component."""
from __future__ import annotations

import torch

from pipeline.errors import VpevalError


def resolve_device(name: str = "auto") -> torch.device:
    """'auto' -> CUDA when present, else CPU; 'cuda[:n]' without CUDA is an error.

    >>> resolve_device("cpu")
    device(type='cpu')
    """
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise VpevalError(f"device={name!r} requested but CUDA is not available; use device=auto or device=cpu")
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise VpevalError(f"device={name!r} requested but only {torch.cuda.device_count()} GPU(s) are visible")
    return device
