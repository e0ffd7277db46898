"""Small models to try the frontend on (and that its tests and benchmarks
use): a ResNet-like CNN with batch norm, in-place ReLU and in-place residual
adds -- the case where a checkpoint runtime must neither replay an in-place
op on its input nor update batch-norm statistics twice; and an MLP with
dropout, the case where a recomputed random op would change the gradients.

>>> import torch
>>> from hybrid_remat.torch.examples import ResNetish
>>> ResNetish(c=8, blocks=2)(torch.randn(2, 3, 8, 8)).shape
torch.Size([2, 10])
"""

from __future__ import annotations

import torch.nn as nn

__all__ = ["Block", "ResNetish", "DropMLP"]


class Block(nn.Module):
    """conv-BN-ReLU(in place)-conv-BN, in-place residual add, ReLU (in place)."""

    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        y += x
        return self.relu(y)


class ResNetish(nn.Module):
    """ResNet-like CNN: a stem, ``blocks`` :class:`Block` s of ``c`` channels, a linear head."""

    def __init__(self, c=8, blocks=3, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU(inplace=True))
        self.blocks = nn.Sequential(*[Block(c) for _ in range(blocks)])
        self.head = nn.Linear(c, classes)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)).mean((2, 3)))


class DropMLP(nn.Module):
    """``layers`` x (linear, tanh scaled by ``scale``, dropout ``p``) of width ``d``."""

    def __init__(self, d: int = 64, layers: int = 4, p: float = 0.3, scale: float = 1.0):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(d, d) for _ in range(layers))
        self.drop = nn.Dropout(p)
        self.scale = scale

    def forward(self, x):
        import torch

        for lin in self.layers:
            x = self.drop(torch.tanh(lin(x)) * self.scale)
        return x
