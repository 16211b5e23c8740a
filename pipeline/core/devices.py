"""Device placement shared by every torch component."""
from __future__ import annotations

import contextlib
import re

import torch

from pipeline.core.errors import VpevalError, byte_size


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


COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def compile_mode(value: bool | str | None, device: torch.device, *, config_key: str) -> str | None:
    """torch.compile's mode for a config value (false/null: no compile; true: 'default';
    'reduce-overhead': CUDA graphs), after checking that Inductor can build code for `device`
    (triton on CUDA, a C++ compiler on CPU), so a missing compiler fails at once in one line."""
    if value is None or value is False:
        return None
    mode = "default" if value is True else str(value)
    if mode not in COMPILE_MODES:
        raise VpevalError(f"{config_key} must be false, true or one of {list(COMPILE_MODES)}, got {value!r}")
    missing = _missing_compiler(device)
    if missing:
        raise VpevalError(f"{config_key}={value}: torch.compile cannot build code here ({missing}); "
                          f"set {config_key}=false")
    return mode


def compile_failed(error: Exception, mode: str, config_key: str) -> VpevalError:
    """A torch.compile failure ("backend='inductor' raised:\nTheError: ...") as one line naming
    the setting that turns compilation off."""
    reason = " ".join([line.strip() for line in str(error).splitlines() if line.strip()][:2])
    return VpevalError(f"{config_key}={mode}: torch.compile failed ({reason}); set {config_key}=false")


def _missing_compiler(device: torch.device) -> str | None:
    """What Inductor lacks to generate kernels for `device`, or None."""
    if device.type == "cuda":
        from torch.utils._triton import has_triton
        return None if has_triton() else "triton is not installed"
    from torch._inductor.cpp_builder import get_cpp_compiler
    try:
        get_cpp_compiler()
    except Exception as exc:  # noqa: BLE001 - any failure to find one is the same answer
        return f"no C++ compiler: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
    return None


def autocast(device_type: str, dtype: torch.dtype | None) -> contextlib.AbstractContextManager:
    """`torch.autocast` to `dtype` (None: autocast off inside), or nothing on a device type
    without autocast (`meta`, which tests use to catch host syncs). While torch.compile traces,
    the device is one with autocast and the availability check is skipped: on the H200 (torch
    2.11) Dynamo broke the compiled training step's graph at the fbank's `with autocast(...)`
    line, recompiled the rest at every step up to its limit of 8, then ran it eagerly; this
    call is the likely cause (torch 2.13 traces it, so it was not reproduced here;
    docs/performance.md)."""
    if not torch.compiler.is_compiling() and not torch.amp.is_autocast_available(device_type):
        return contextlib.nullcontext()
    return torch.autocast(device_type=device_type, dtype=dtype, enabled=dtype is not None)


_UNITS = {"B": 1, "KiB": 2 ** 10, "MiB": 2 ** 20, "GiB": 2 ** 30, "TiB": 2 ** 40}


def out_of_memory(error: torch.OutOfMemoryError, device: torch.device, what: str, setting: str,
                  advice: str) -> VpevalError:
    """One line for an out-of-memory `error` while doing `what` on `device`: `setting` (the batch
    size behind it), the memory it needed (on CUDA: what is allocated, called while `error` and
    its frames' tensors are alive, plus what the failed allocation asked for) against the
    device's, and `advice`.

    >>> str(out_of_memory(torch.OutOfMemoryError("x"), torch.device("cpu"), "a step of 8 crops",
    ...                   "attacker.training.batch_size=8", "lower it"))
    "attacker.training.batch_size=8: a step of 8 crops ran out of the CPU's memory (the machine's RAM); lower it"
    """
    if device.type != "cuda":
        return VpevalError(f"{setting}: {what} ran out of the {device.type.upper()}'s memory (the machine's RAM); "
                           f"{advice}")
    free, total = torch.cuda.mem_get_info(device)
    asked = re.search(r"Tried to allocate ([0-9.]+) (B|KiB|MiB|GiB|TiB)", str(error))
    needed = torch.cuda.memory_allocated(device) + (float(asked[1]) * _UNITS[asked[2]] if asked else 0)
    return VpevalError(f"{setting}: {what} needs more than {byte_size(needed)} of GPU memory; {device} has "
                       f"{byte_size(total)} ({byte_size(free)} free after the failure); {advice}")
