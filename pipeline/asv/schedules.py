"""Learning-rate schedules, stepped once per optimiser step.

Each is a factory `(optimizer, total_steps, **options) -> LRScheduler` so that a config can
name it with `_target_` and `_partial_: true`; training supplies the optimiser and the
total number of steps (epochs x steps per epoch). The peak learning rate is the optimiser's
`lr`. Scheduler state is plain numbers, so checkpoints load with `weights_only=True`.
"""
from __future__ import annotations

import math

import torch
from torch.optim.lr_scheduler import LambdaLR, LRScheduler

from pipeline.core.errors import VpevalError


def one_cycle(optimizer: torch.optim.Optimizer, total_steps: int, *, warmup_fraction: float = 0.05,
              initial_lr_ratio: float = 0.04, final_lr_ratio: float = 1e-3) -> LRScheduler:
    """Linear warm-up from `initial_lr_ratio * lr` to `lr` over `warmup_fraction` of the steps,
    then cosine decay to `final_lr_ratio * lr` at the last step (held there afterwards).

    >>> opt = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))], lr=0.01)
    >>> schedule = one_cycle(opt, total_steps=5, warmup_fraction=0.4, initial_lr_ratio=0.5, final_lr_ratio=0.0)
    >>> rates = []
    >>> for _ in range(5):
    ...     rates.append(round(schedule.get_last_lr()[0], 6)); opt.step(); schedule.step()
    >>> rates
    [0.005, 0.0075, 0.01, 0.005, 0.0]
    """
    warmup_steps = round(warmup_fraction * total_steps)
    decay_steps = max(total_steps - 1 - warmup_steps, 1)

    def factor(step: int) -> float:
        if step < warmup_steps:
            return initial_lr_ratio + (1.0 - initial_lr_ratio) * step / warmup_steps
        progress = min((step - warmup_steps) / decay_steps, 1.0)
        return final_lr_ratio + (1.0 - final_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))

    return LambdaLR(optimizer, factor)


def cyclic(optimizer: torch.optim.Optimizer, total_steps: int, *, base_lr: float, step_size_up: int,
           mode: str = "triangular", gamma: float = 1.0) -> LRScheduler:
    """SpeechBrain's `CyclicLRScheduler` as VPC 2024 and 2026 step it: a triangle between
    `base_lr` and the optimiser's lr with `step_size_up` steps per half cycle, whatever
    `total_steps` is. VPC calls `on_batch_end` before each optimiser step, so step k (from 1)
    runs at SpeechBrain's clr(k), never at `base_lr` itself.

    >>> opt = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))], lr=0.3)
    >>> schedule = cyclic(opt, total_steps=4, base_lr=0.1, step_size_up=2)
    >>> rates = []
    >>> for _ in range(4):
    ...     rates.append(round(schedule.get_last_lr()[0], 6)); opt.step(); schedule.step()
    >>> rates
    [0.2, 0.3, 0.2, 0.1]
    """
    del total_steps  # the cycle length is fixed by step_size_up, as in the VPC recipe
    return SpeechBrainCyclic(optimizer, base_lr=base_lr, step_size=int(step_size_up), mode=mode, gamma=gamma)


class SpeechBrainCyclic(LRScheduler):
    """SpeechBrain's cyclic learning rate (speechbrain.nnet.schedulers.CyclicLRScheduler,
    re-implemented: same formula, same float operations), peak = each group's initial lr."""

    MODES = ("triangular", "triangular2", "exp_range")

    def __init__(self, optimizer: torch.optim.Optimizer, *, base_lr: float, step_size: int, mode: str = "triangular",
                 gamma: float = 1.0):
        if mode not in self.MODES:
            raise VpevalError(f"attacker.training.scheduler.mode={mode}: must be one of {', '.join(self.MODES)}")
        if step_size < 1:
            raise VpevalError(f"attacker.training.scheduler.step_size_up={step_size}: must be an integer >= 1")
        self.low, self.step_size, self.mode, self.gamma = float(base_lr), step_size, mode, float(gamma)
        super().__init__(optimizer)

    def clr(self, iterations: int, peak: float) -> float:
        """SpeechBrain's `clr`: the learning rate after `iterations` calls of `on_batch_end`."""
        cycle = math.floor(1 + iterations / (2 * self.step_size))
        x = abs(iterations / self.step_size - 2 * cycle + 1)
        scale = {"triangular": 1.0, "triangular2": 1 / (2.0 ** (cycle - 1)),
                 "exp_range": self.gamma ** iterations}[self.mode]
        return self.low + (peak - self.low) * max(0, (1 - x)) * scale

    def get_lr(self) -> list[float]:
        return [self.clr(self.last_epoch + 1, peak) for peak in self.base_lrs]
