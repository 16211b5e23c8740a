"""Regressions of attacker training."""
import pytest
import torch

from pipeline.asv.schedules import cyclic


def test_cyclic_schedule_is_not_one_step_behind_vpc():
    """Regression: `cyclic` (torch's CyclicLR) ran the first optimiser step at base_lr and every
    later step at the rate VPC uses one step earlier: VPC 2024 / 2026 call SpeechBrain's
    CyclicLRScheduler.on_batch_end before each optimiser step, so step k runs at clr(k)."""
    optimizer = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))], lr=0.01)
    schedule = cyclic(optimizer, total_steps=3, base_lr=1e-8, step_size_up=65000)
    rates = []
    for _ in range(3):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        schedule.step()
    assert rates == pytest.approx([1e-8 + (0.01 - 1e-8) * k / 65000 for k in (1, 2, 3)], rel=1e-9)
