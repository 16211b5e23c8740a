"""Learning-rate schedules, stepped once per optimiser step.

Each is a factory `(optimizer, total_steps, **options) -> LRScheduler` so that a config can
name it with `_target_` and `_partial_: true`; training supplies the optimiser and the
total number of steps (epochs x steps per epoch). The peak learning rate is the optimiser's
`lr`. Scheduler state is plain numbers, so checkpoints load with `weights_only=True`.
"""
from __future__ import annotations

import math

import torch
from torch.optim.lr_scheduler import CyclicLR, LambdaLR, LRScheduler


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
           mode: str = "triangular") -> LRScheduler:
    """SpeechBrain's / VPC 2024's cyclic schedule: a triangle between `base_lr` and the
    optimiser's lr with `step_size_up` steps per half cycle, whatever `total_steps` is."""
    del total_steps  # the cycle length is fixed by step_size_up, as in the VPC recipe
    return CyclicLR(optimizer, base_lr=base_lr, max_lr=[group["lr"] for group in optimizer.param_groups],
                    step_size_up=int(step_size_up), mode=mode, cycle_momentum=False)
