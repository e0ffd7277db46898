"""Models of the PyTorch benchmarks (``torch_cpu.py``, ``torch_gpu.py``).

Each case: a model in training mode, its inputs, a loss and the module paths
of its *blocks* (what per-block ``torch.utils.checkpoint`` wraps, as a user
would).  torchvision models are built with random weights (no download).

torchvision: its CUDA wheels fail to load their C++ ops on a CPU-only torch
(``operator torchvision::nms does not exist``); the models used here never
call those ops, so :func:`import_torchvision` skips the registrations that
need them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F

from hybrid_remat.torch.examples import ResNetish

__all__ = ["Case", "make_case", "CPU_CASES", "GPU_CASES", "import_torchvision"]

CPU_CASES = ("resnet18", "mobilenet_v2", "efficientnet_b0", "transformer_lm", "control_flow", "inplace_bn")
GPU_CASES = ("resnet50", "gpt2")


@dataclass
class Case:
    name: str
    model: nn.Module
    inputs: tuple
    loss_fn: object
    blocks: list
    note: str = ""
    kwargs: dict = field(default_factory=dict)


def import_torchvision():
    """``torchvision``, or None when it is not installed."""
    import torch.library as lib

    try:
        import torchvision

        return torchvision
    except ImportError:
        return None
    except RuntimeError:  # C++ ops unavailable: register only what exists
        pass
    orig = lib.register_fake

    def register_fake(op, *args, **kwargs):
        if isinstance(op, str) and op.startswith("torchvision::"):
            ns, name = op.split("::")
            try:
                getattr(getattr(torch.ops, ns), name)
            except (AttributeError, RuntimeError):
                return lambda fn: fn
        return orig(op, *args, **kwargs)

    lib.register_fake = register_fake
    try:
        import importlib
        import sys

        for mod in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[mod]
        return importlib.import_module("torchvision")
    except (ImportError, RuntimeError):
        return None
    finally:
        lib.register_fake = orig


def _ce(target):
    def loss_fn(out):
        return F.cross_entropy(out, target)

    return loss_fn


def _lm_loss(target):
    def loss_fn(out):
        return F.cross_entropy(out.flatten(0, 1), target.flatten())

    return loss_fn


class TransformerLM(nn.Module):
    """``nn.TransformerEncoder`` language model with dropout (causal mask)."""

    def __init__(self, vocab, d, heads, layers, ff, T, p=0.1):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(T, d) * 0.02)
        self.drop = nn.Dropout(p)
        layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=p, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(T), persistent=False)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.drop(self.tok(idx) + self.pos[:T])
        x = self.encoder(x, mask=self.mask[:T, :T], is_causal=True)
        return self.head(self.ln(x))


class GateBlock(nn.Module):
    """A block whose work depends on the data: an extra branch runs when the
    activation's mean is positive, and a loop runs a data-dependent number
    of times."""

    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.extra = nn.Conv2d(c, c, 3, padding=1)
        self.norm = nn.GroupNorm(4, c)

    def forward(self, x):
        y = F.gelu(self.norm(self.conv(x)))
        if y.mean() > 0:  # data-dependent branch
            y = y + torch.tanh(self.extra(y))
        for _ in range(int(y.abs().mean().item() * 4) % 3 + 1):  # data-dependent loop
            y = y * torch.sigmoid(y)
        return x + y


class ControlFlowNet(nn.Module):
    def __init__(self, c=32, blocks=6, classes=10):
        super().__init__()
        self.stem = nn.Conv2d(3, c, 3, padding=1)
        self.blocks = nn.ModuleList([GateBlock(c) for _ in range(blocks)])
        self.head = nn.Linear(c, classes)

    def forward(self, x):
        x = self.stem(x)
        for b in self.blocks:
            x = b(x)
        return self.head(x.mean((2, 3)))


class Bottleneck(nn.Module):
    def __init__(self, cin, mid, stride):
        super().__init__()
        cout = 4 * mid
        self.conv1, self.bn1 = nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid)
        self.conv2, self.bn2 = nn.Conv2d(mid, mid, 3, stride, 1, bias=False), nn.BatchNorm2d(mid)
        self.conv3, self.bn3 = nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        idt = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        y += idt
        return self.relu(y)


class ResNet50(nn.Module):
    """ResNet-50's architecture (bottlenecks 3-4-6-3), used when torchvision is missing."""

    def __init__(self, classes=1000):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64)
        self.relu, self.maxpool = nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)
        cin = 64
        for i, (mid, n) in enumerate(zip((64, 128, 256, 512), (3, 4, 6, 3), strict=True)):
            blocks = []
            for j in range(n):
                blocks.append(Bottleneck(cin, mid, 2 if (j == 0 and i > 0) else 1))
                cin = 4 * mid
            setattr(self, f"layer{i + 1}", nn.Sequential(*blocks))
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        for i in range(1, 5):
            x = getattr(self, f"layer{i}")(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class GPT2Block(nn.Module):
    def __init__(self, d, h, p):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.h, self.drop = h, nn.Dropout(p)

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=2)
        q, k, v = (t.view(B, T, self.h, D // self.h).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=self.drop.p if self.training else 0.0)
        x = x + self.drop(self.proj(y.transpose(1, 2).reshape(B, T, D)))
        return x + self.drop(self.out(F.gelu(self.fc(self.ln2(x)))))


class GPT2(nn.Module):
    """GPT-2-sized decoder (124M parameters at the defaults)."""

    def __init__(self, vocab=50257, d=768, h=12, layers=12, T=1024, p=0.1):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(T, d)
        self.drop = nn.Dropout(p)
        self.h = nn.ModuleList([GPT2Block(d, h, p) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.drop(self.tok(idx) + self.pos(pos))
        for b in self.h:
            x = b(x)
        return self.head(self.ln(x))


def _tv_blocks(name, model):
    if name.startswith("resnet"):
        return [f"layer{i}.{j}" for i in range(1, 5) for j in range(len(getattr(model, f"layer{i}")))]
    if name == "mobilenet_v2":
        return [f"features.{i}" for i in range(1, len(model.features) - 1)]
    if name == "efficientnet_b0":
        return [f"features.{i}.{j}" for i in range(1, len(model.features) - 1) for j in range(len(model.features[i]))]
    raise KeyError(name)


def make_case(name: str, device, *, size: str = "cpu", seed: int = 0) -> Case:
    """One benchmark case on ``device`` (``size``: ``"cpu"`` small inputs,
    ``"gpu"`` full-size, ``"tiny"`` for smoke runs)."""
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    tiny = size == "tiny"
    if name in ("resnet18", "mobilenet_v2", "efficientnet_b0", "resnet50"):
        tv = import_torchvision()
        if tv is None and name != "resnet50":
            raise RuntimeError(f"{name} needs torchvision (pip install torchvision matching torch)")
        model = getattr(tv.models, name)(weights=None) if tv is not None else ResNet50()
        src = "torchvision" if tv is not None else "ResNet-50 architecture (torchvision missing)"
        batch, res = {"tiny": (2, 32), "cpu": (8, 64), "gpu": (64, 224)}[size]
        x = torch.randn(batch, 3, res, res, generator=g)
        y = torch.randint(0, 1000, (batch,), generator=g)
        case = Case(name, model, (x,), _ce(y.to(device)), _tv_blocks(name, model), f"{name}: {src}, {batch}x3x{res}x{res}")
    elif name == "transformer_lm":
        V, d, L, T, B = (256, 32, 2, 16, 2) if tiny else (2000, 256, 4, 128, 8)
        model = TransformerLM(V, d, 4, L, 4 * d, T)
        idx = torch.randint(0, V, (B, T), generator=g)
        tgt = torch.randint(0, V, (B, T), generator=g)
        case = Case(name, model, (idx,), _lm_loss(tgt.to(device)), [f"encoder.layers.{i}" for i in range(L)],
                    f"nn.TransformerEncoder, d={d}, {L} layers, {B}x{T} tokens, dropout 0.1")
    elif name in ("control_flow", "inplace_bn"):
        c, n, B, R = (8, 2, 2, 8) if tiny else (32, 6, 8 if name == "control_flow" else 16, 32)
        model = ControlFlowNet(c, n) if name == "control_flow" else ResNetish(c, n)
        x = torch.randn(B, 3, R, R, generator=g)
        y = torch.randint(0, 10, (B,), generator=g)
        note = ("data-dependent branch and loop per block" if name == "control_flow"
                else "in-place ReLU and residual add, batch norm")
        case = Case(name, model, (x,), _ce(y.to(device)), [f"blocks.{i}" for i in range(n)], note)
    elif name == "gpt2":
        V, d, h, L, T, B = (512, 64, 4, 2, 64, 2) if size != "gpu" else (50257, 768, 12, 12, 1024, 8)
        model = GPT2(V, d, h, L, T)
        idx = torch.randint(0, V, (B, T), generator=g)
        tgt = torch.randint(0, V, (B, T), generator=g)
        case = Case(name, model, (idx,), _lm_loss(tgt.to(device)), [f"h.{i}" for i in range(L)],
                    f"GPT-2 sized: d={d}, {L} layers, {B}x{T} tokens")
    else:
        raise KeyError(f"unknown case {name!r}")
    case.model = case.model.to(device).train()
    case.inputs = tuple(t.to(device) for t in case.inputs)
    return case
