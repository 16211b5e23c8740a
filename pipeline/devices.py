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


def _canonical(device: torch.device) -> torch.device:
    """'cuda' -> 'cuda:<current>' so that the two spellings of one GPU compare equal."""
    if device.type == "cuda" and device.index is None and torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return device


def module_device(module: torch.nn.Module, requested: str | torch.device | None = None, *,
                  what: str = "the model") -> torch.device:
    """The device `module`'s parameters and buffers live on (CPU for a module without any);
    a `requested` device that is another one is an error naming both, never a silent copy.

    >>> module_device(torch.nn.Linear(2, 2), "cpu")
    device(type='cpu')
    """
    devices = {_canonical(t.device) for t in (*module.parameters(), *module.buffers())}
    if len(devices) > 1:
        raise VpevalError(f"{what} has tensors on several devices ({', '.join(sorted(map(str, devices)))}); "
                          f"move all of it with .to(device)")
    if not devices:
        return torch.device("cpu") if requested is None else torch.device(requested)
    device = devices.pop()
    if requested is not None and _canonical(torch.device(requested)) != device:
        raise VpevalError(f"{what} is on {device} but device {str(requested)!r} was asked for; "
                          f"pass its device (or none) or move it with .to({str(requested)!r})")
    return device
