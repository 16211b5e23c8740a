"""torch.distributed for the attacker: this process's place among the ranks, the few
collectives training and extraction use, and batch norm over the global batch.

A `World` is either `World.single(device)` (one process; every collective is a no-op) or
`World.from_env(...)` inside a process launched by torchrun, which joins the process group
described by torchrun's environment variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
MASTER_PORT): NCCL on CUDA, gloo on CPU, with a timeout on joining and on every collective.

>>> world = World.single("cpu")
>>> world.rows(8), world.broadcast(0.25), world.is_main
(slice(0, 8, None), 0.25, True)
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Iterator

import torch
import torch.distributed as dist
from torch import nn

from pipeline.core.errors import VpevalError


@dataclass(frozen=True)
class World:
    """Rank `rank` of `size` ranks, on `device` (on CUDA, the node's GPU of its local rank)."""

    rank: int
    size: int
    device: torch.device

    @classmethod
    def single(cls, device: str | torch.device) -> "World":
        """This process alone on `device`."""
        return cls(0, 1, torch.device(device))

    @classmethod
    def from_env(cls, device_type: str, timeout_s: float) -> "World":
        """Join the process group torchrun describes in the environment (NCCL on CUDA, gloo on CPU)."""
        rank, size, local_rank = (int(os.environ[key]) for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK"))
        timeout = timedelta(seconds=timeout_s)
        if device_type == "cuda":
            torch.cuda.set_device(local_rank)
            device = torch.device("cuda", local_rank)
            dist.init_process_group("nccl", rank=rank, world_size=size, timeout=timeout, device_id=device)
        else:
            device = torch.device("cpu")
            dist.init_process_group("gloo", rank=rank, world_size=size, timeout=timeout)
        return cls(rank, size, device)

    @property
    def is_main(self) -> bool:
        """Rank 0: the one that writes files and shows progress."""
        return self.rank == 0

    def rows(self, batch_size: int) -> slice:
        """This rank's rows of a global batch of `batch_size` (a multiple of the world size)."""
        if batch_size % self.size:
            raise VpevalError(f"a global batch of {batch_size} crops cannot be split evenly over {self.size} ranks; "
                              f"make attacker.training.batch_size a multiple of the number of GPUs")
        share = batch_size // self.size
        return slice(self.rank * share, (self.rank + 1) * share)

    def barrier(self) -> None:
        if self.size > 1:
            dist.barrier()

    @contextmanager
    def main_first(self) -> Iterator[None]:
        """Run the body on rank 0 first, then on the others (e.g. build a cache once, then open it)."""
        if not self.is_main:
            self.barrier()
        yield
        if self.is_main:
            self.barrier()

    def broadcast(self, value: float) -> float:
        """Rank 0's `value` on every rank."""
        if self.size == 1:
            return float(value)
        tensor = torch.tensor([float(value)], dtype=torch.float64, device=self.device)
        dist.broadcast(tensor, src=0)
        return float(tensor.item())

    def sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """Element-wise sum over ranks, in place, on every rank (no-op for one process)."""
        if self.size > 1:
            dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return tensor


class GlobalBatchNorm1d(nn.BatchNorm1d):
    """BatchNorm1d whose training statistics cover the global batch, across every rank.

    One differentiable all-reduce of (sum, sum of squares, count) per call, accumulated in
    float64, so the output, the gradients and the running statistics are those of one
    process seeing the whole batch, up to float rounding. Outside training, or without a
    process group, it is a plain BatchNorm1d. Works with gloo (CPU) and NCCL (CUDA).
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or not dist.is_initialized() or dist.get_world_size() == 1:
            return super().forward(x)
        channels = x.shape[1]
        dims = [0] if x.dim() == 2 else [0, 2]
        values = x.float()
        local = torch.cat([values.sum(dims, dtype=torch.float64), values.square().sum(dims, dtype=torch.float64),
                           torch.full((1,), values.numel() / channels, dtype=torch.float64, device=x.device)])
        total = _SumOverRanks.apply(local)
        count = total[-1]
        mean = total[:channels] / count
        variance = (total[channels:2 * channels] / count - mean.square()).clamp(min=0)
        if self.track_running_stats:
            with torch.no_grad():
                self.num_batches_tracked.add_(1)
                factor = self.momentum if self.momentum is not None else 1.0 / float(self.num_batches_tracked)
                unbiased = variance * count / (count - 1).clamp(min=1)
                self.running_mean.lerp_(mean.to(self.running_mean.dtype), factor)
                self.running_var.lerp_(unbiased.to(self.running_var.dtype), factor)
        shape = (1, channels) + (1,) * (x.dim() - 2)
        scale = (variance + self.eps).rsqrt().float()
        output = (values - mean.float().view(shape)) * scale.view(shape)
        if self.affine:
            output = output * self.weight.view(shape) + self.bias.view(shape)
        return output.to(x.dtype)


class _SumOverRanks(torch.autograd.Function):
    """All-reduce (sum) whose backward all-reduces the gradient: every rank's loss depends on the sum."""

    @staticmethod
    def forward(ctx, tensor: torch.Tensor) -> torch.Tensor:
        total = tensor.clone()
        dist.all_reduce(total, op=dist.ReduceOp.SUM)
        return total

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        total = grad.clone()
        dist.all_reduce(total, op=dist.ReduceOp.SUM)
        return total


def use_global_batchnorm(module: nn.Module) -> nn.Module:
    """Replace every BatchNorm1d inside `module` by a GlobalBatchNorm1d with the same state."""
    for name, child in module.named_children():
        if type(child) is nn.BatchNorm1d:
            replacement = GlobalBatchNorm1d(child.num_features, eps=child.eps, momentum=child.momentum,
                                            affine=child.affine, track_running_stats=child.track_running_stats)
            state = child.state_dict()
            replacement.load_state_dict(state)
            if state:
                replacement.to(next(iter(state.values())).device)
            replacement.train(child.training)
            setattr(module, name, replacement)
        else:
            use_global_batchnorm(child)
    return module
