import pytest
import torch

from pipeline.core.checks import PRECISION
from pipeline.core.errors import VpevalError
from pipeline.runtime.precision import AUTOCAST_DTYPES, autocast_dtype


def test_a_precision_is_checked_by_the_settings_own_rule():
    """The guard an API caller meets is the `precision` check of the settings (one home), with its words."""
    with pytest.raises(VpevalError, match=r"^attacker.training.precision=fp8: must be fp32 or bf16 or fp16$"):
        autocast_dtype("fp8", torch.device("cpu"), config_key="attacker.training.precision")
    assert all(PRECISION.test(precision) for precision in AUTOCAST_DTYPES)


def test_cpu_runs_float32_and_cuda_autocasts():
    assert autocast_dtype("bf16", torch.device("cpu"), config_key="k") is None
    assert autocast_dtype("bf16", torch.device("cuda"), config_key="k") is torch.bfloat16
    assert autocast_dtype("fp32", torch.device("cuda"), config_key="k") is None
