"""What a speaker encoder is to vpeval: any `nn.Module` with the members of `Encoder`.

Training, extraction, attacker folders (`model.json` + `model.pt`) and checkpoints use only
these members (and two optional ones: `context_samples`, the length of a clean whole-utterance
context training gives `forward(crops, context=...)` besides each crop, `pipeline.asv.crops`;
`max_samples`, the longest utterance extraction may give it), so a new attacker is one module plus one YAML file in `conf/attacker/` (see
docs/attacker.md); nothing lists the encoder classes. Its front end is a `_target_` node
(`_partial_: true`), called with `(sample_rate, n_mels)`.

>>> spec = frontend_spec("pipeline.asv.features.KaldiFbank")
>>> spec
{'_target_': 'pipeline.asv.features.KaldiFbank', '_partial_': True}
>>> build_frontend(spec, 16000, 80).window_shift
160
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, runtime_checkable

import torch
from hydra.utils import get_class, get_method
from torch import nn

from pipeline.core.checks import COUNT
from pipeline.core.errors import VpevalError

# The ranges of the keys the shipped encoders share, their classes' `settings_checks`
# (pipeline.core.checks.Checked): checked before any stage runs.
ENCODER_SETTINGS = {"embedding_dim": COUNT, "n_mels": COUNT}


@runtime_checkable
class Encoder(Protocol):
    """Waveforms and lengths in, embeddings out (implemented by an `nn.Module`)."""

    sample_rate: int  # audio is read at this rate
    embedding_dim: int  # size of an embedding
    architecture: dict  # constructor arguments: `{"_target_": class, **architecture}` rebuilds it
    min_samples: int  # the shortest utterance it embeds
    frame_hop: int  # samples per feature frame: extraction pads batches to multiples of it

    def forward(self, wavs: torch.Tensor, wav_lens: torch.Tensor | None = None) -> torch.Tensor:
        """(B, N) waveforms in [-1, 1], optional (B,) relative lengths -> (B, embedding_dim)."""

    def embed_samples(self, wavs: torch.Tensor, num_samples: torch.Tensor) -> torch.Tensor:
        """(B, N) padded waveforms + (B,) sample counts (each >= min_samples) -> (B, embedding_dim);
        an utterance's embedding does not depend on what it is batched with."""


def check_encoder(encoder: Any, where: str) -> nn.Module:
    """`encoder` if it is an `nn.Module` with the `Encoder` members, else one line naming `where`."""
    missing = [name for name in ("sample_rate", "embedding_dim", "architecture", "min_samples", "frame_hop",
                                 "embed_samples") if not hasattr(encoder, name)]
    if not isinstance(encoder, nn.Module) or missing:
        problem = f"missing {', '.join(missing)}" if missing else "not an nn.Module"
        raise VpevalError(f"{where}: builds a {type(encoder).__name__}, not a speaker encoder ({problem}; "
                          f"see docs/attacker.md)")
    return encoder


def class_path(obj: Any) -> str:
    """'module.QualName' of a class or of an object's class."""
    cls = obj if isinstance(obj, type) else type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def frontend_spec(frontend: str | Mapping | functools.partial) -> dict:
    """The `_target_` node of a front end given as a node, a partial (what Hydra builds from
    the node) or a class path (attacker folders written before front ends were nodes)."""
    if isinstance(frontend, functools.partial):
        return {"_target_": class_path(frontend.func), "_partial_": True, **frontend.keywords}
    if isinstance(frontend, str):
        return {"_target_": frontend, "_partial_": True}
    if isinstance(frontend, Mapping) and "_target_" in frontend:
        return {**{key: value for key, value in frontend.items()}, "_partial_": True}
    raise VpevalError(f"attacker.model.frontend must be a _target_ node, got {frontend!r}")


def build_frontend(spec: Mapping, sample_rate: int, n_mels: int) -> nn.Module:
    """The front-end module of `spec` (see `frontend_spec`) for `sample_rate` and `n_mels`."""
    arguments = {key: value for key, value in spec.items() if key not in ("_target_", "_partial_")}
    try:
        cls = get_class(str(spec["_target_"]))
    except (ImportError, ValueError) as exc:
        raise VpevalError(f"attacker.model.frontend._target_={spec['_target_']!r}: "
                          f"{str(exc).splitlines()[0]}") from None
    if not issubclass(cls, nn.Module):
        raise VpevalError(f"attacker.model.frontend._target_={spec['_target_']!r}: not an nn.Module class")
    return cls(sample_rate, n_mels, **arguments)


def check_module_targets(spec: Any, where: str | Path) -> None:
    """Refuse a model description (a `_target_` tree from a model folder) whose `_target_`s are
    not all `nn.Module` classes, before anything is built: a model folder must not make the
    loader call an arbitrary function or class (`os.system`, `subprocess.Popen`)."""
    if isinstance(spec, Mapping):
        target = spec.get("_target_")
        if target is not None:
            try:
                builder: Callable | type = get_method(str(target))
            except (ImportError, ValueError):
                raise VpevalError(f"{where}: refused builder {target!r} (not an importable nn.Module class)") from None
            if not (isinstance(builder, type) and issubclass(builder, nn.Module)):
                raise VpevalError(f"{where}: refused builder {target!r} (not an nn.Module class)")
        for value in spec.values():
            check_module_targets(value, where)
    elif isinstance(spec, list):
        for value in spec:
            check_module_targets(value, where)
