"""Orthogonal Householder neural network (OHNN, Miao et al. 2023): a learnt orthogonal map of
speaker embeddings.

The map is a product of Householder reflections H_k = I - 2 v_k v_k^T / |v_k|^2, so it is
orthogonal by construction (norms and angles between embeddings are kept: the image of the
embedding distribution is a rotated copy of it) and deterministic: utterances of one speaker,
whose embeddings are close, land on nearly the same pseudo-speaker.

>>> ohnn = HouseholderMap(dim=4, reflections=3)
>>> x = torch.randn(5, 4)
>>> torch.allclose(ohnn(x).norm(dim=1), x.norm(dim=1), atol=1e-5)
True
"""
from __future__ import annotations

import torch
from torch import nn

OHNN_FORMAT = "vpeval-ohnn-1"


class HouseholderMap(nn.Module):
    """x -> H_R ... H_1 x for (..., dim) embeddings. `reflections` defaults to `dim` (enough
    to express any orthogonal matrix). Initialised from a seeded random draw."""

    def __init__(self, *, dim: int, reflections: int | None = None, seed: int = 0):
        super().__init__()
        count = int(reflections or dim)
        generator = torch.Generator().manual_seed(int(seed))
        self.vectors = nn.Parameter(torch.randn(count, int(dim), generator=generator))
        self.dim = int(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        units = self.vectors / self.vectors.norm(dim=1, keepdim=True).clamp_min(1e-12)
        for v in units.to(x.dtype):
            x = x - 2 * (x @ v)[..., None] * v
        return x

    def matrix(self) -> torch.Tensor:
        """The (dim, dim) orthogonal matrix M with forward(x) = x @ M.T."""
        return self(torch.eye(self.dim, dtype=self.vectors.dtype, device=self.vectors.device)).T
