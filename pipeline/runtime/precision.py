"""The autocast dtype of a precision setting on a device."""
from __future__ import annotations

import torch

from pipeline.core.checks import PRECISION
from pipeline.core.schemas import require

AUTOCAST_DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def autocast_dtype(precision: str, device: torch.device, *, config_key: str) -> torch.dtype | None:
    """The autocast dtype for `precision` ("fp32", "bf16", "fp16") on `device`; CPU always runs float32."""
    require(PRECISION, precision, config_key)
    return AUTOCAST_DTYPES[precision] if device.type == "cuda" else None
