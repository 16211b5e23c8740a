"""Whether an attacker's training starts from pretrained weights: `attacker.init` (the folder)
and `attacker.finetune` (null: fine-tune iff `init` is set; true: `init` is required, as VPC
2026's `finetuning: True`; false: from scratch, `init` must be unset). Kept free of torch so
that the settings check (pipeline.app.settings, before any stage) uses the same rule as training.
"""
from __future__ import annotations

from typing import Any, Mapping

from pipeline.core.errors import VpevalError


def finetune_problem(attacker: Mapping[str, Any]) -> str | None:
    """The one-line problem of the attacker's `finetune` / `init` pair, or None."""
    finetune, init = attacker.get("finetune"), attacker.get("init")
    if finetune is True and not init:
        return ("attacker.finetune=true: needs attacker.init, the pretrained attacker folder to start from "
                "(add attacker.init=<folder>)")
    if finetune is False and init:
        return f"attacker.finetune=false (train from scratch) but attacker.init={init} is set: unset one of them"
    return None


def init_folder(init: str | None, finetune: bool | None) -> str | None:
    """The folder whose weights start training, or None (from scratch); a bad pair is a VpevalError.

    >>> init_folder("asv_ssl", None), init_folder(None, False)
    ('asv_ssl', None)
    """
    problem = finetune_problem({"init": init, "finetune": finetune})
    if problem:
        raise VpevalError(problem)
    return str(init) if init else None
