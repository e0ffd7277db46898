"""Training-graph families of our own, sized from ~1k to ~100k nodes.

Each family builds the graph of one training step (forward, loss,
backward) as a :class:`~hybrid_remat.graph.Graph` with ``"gpu"`` and
``"cpu"`` cost columns in seconds and output sizes in bytes at the scale of
the profiled graphs in ``datasets/`` (an H200 GPU and a 16-thread Xeon; fp32
tensors; the same ``transfer`` and ``devices`` records), so that budgets,
links and TDI figures mean what they mean on a real model.  They exist to
test every claim on more than one shape of graph:

* :func:`decoder_checkmate` -- a llama-like decoder of identical layers in
  the convention of the public Checkmate / Moccasin graphs (one backward
  node per forward node; see :func:`checkmate_training`), embedding first,
  LM head last, so the first and the last layer's backward differ from the
  others;
* :func:`decoder_tracer` -- the profiled llama layer of our own tracer
  (``datasets/llama_8l_b4_s512``) repeated (:func:`llama_layers`);
* :func:`with_cost_noise` -- every operator's time times a seeded lognormal
  factor, as a profiler measures (applies to any graph);
* :func:`decoder_varied` -- a decoder whose layers all differ (width, heads,
  FFN ratio, 1-4 experts: MoE);
* :func:`unet` -- a diffusion U-Net (levels, skips, attention, time
  embedding);
* :func:`resnet_stages` -- bottleneck ResNet stages of four widths (several
  runs of repetition);
* :func:`random_layered_training` -- a random layered forward DAG and its
  backward in the Checkmate convention.

:data:`FAMILIES` maps a family name to ``builder(size_nodes, seed)``; the
node count lands within a few percent of ``size_nodes`` (one repeated unit)
and a seed gives the same graph every time.

Examples
--------
>>> from hybrid_remat.families import FAMILIES
>>> g = FAMILIES["decoder_checkmate"](2000, 0)
>>> g.n, g.cost_kinds
(2013, ('gpu', 'cpu'))
>>> sorted(FAMILIES)[:3]
['decoder_checkmate', 'decoder_checkmate_noise', 'decoder_tracer']
"""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Callable, Sequence

import numpy as np

from .errors import GraphError
from .graph import Graph

__all__ = [
    "FAMILIES", "ForwardBuilder", "checkmate_training", "decoder_checkmate", "decoder_tracer", "llama_layers",
    "with_cost_noise", "decoder_varied", "unet", "resnet_stages", "random_layered_training", "family_graph",
]

#: the profiled llama graph whose layer :func:`llama_layers` repeats
LLAMA_GRAPH = pathlib.Path(__file__).resolve().parents[1] / "datasets" / "llama_8l_b4_s512.json.gz"

# Operator time = launch + flops / rate + bytes moved / bandwidth, fitted to the
# profiled datasets (H200 fp32 eager: ~30 us per launch, ~28 TFLOP/s on large mm;
# Xeon, 16 threads: ~1 TFLOP/s, ~60 GB/s).
_GPU = (3.0e-5, 2.8e13, 1.0e12)
_CPU = (1.5e-5, 1.05e12, 6.0e10)
#: backward time over forward time (two matmuls per matmul; elementwise alike)
BACKWARD_FACTOR = 2.0
#: what the profiled graphs record about the machine (copied from ``datasets/``)
MACHINE_META = {
    "transfer": {"h2d_bytes_per_s": 5.4731756e10, "d2h_bytes_per_s": 5.4969305e10, "latency_s": 1.1167e-05},
    "devices": {"gpu": {"name": "NVIDIA H200", "memory_bytes": 150109880320},
                "cpu": {"name": "Intel(R) Xeon(R) Processor", "threads": 16}},
}
F32 = 4


def _op_time(machine, flops: float, moved: float) -> float:
    launch, rate, bw = machine
    return launch + flops / rate + moved / bw


class ForwardBuilder:
    """The forward part of a training graph, one operator at a time.

    Examples
    --------
    >>> fb = ForwardBuilder()
    >>> x = fb.add("embedding", "embed", 1024)
    >>> y = fb.add("mm", "proj", 1024, flops=2e6, inputs=[x], params=True)
    >>> g = checkmate_training(fb, name="tiny")
    >>> g.n, [g.names[v] for v in g.preds(g.n - 1)]   # the embedding's backward
    (5, ['embed', 'proj', 'proj_backward'])
    """

    def __init__(self) -> None:
        self.ops, self.names, self.params = [], [], []
        self.bytes, self.flops, self.gpu, self.cpu = [], [], [], []
        self.src, self.dst = [], []   # edges

    def __len__(self) -> int:
        return len(self.ops)

    def add(self, op: str, name: str, nbytes: int, *, flops: float = 0.0, inputs: Sequence[int] = (),
            params: bool = False) -> int:
        """Append an operator reading ``inputs``; return its index.  Its
        times follow from its FLOPs and the bytes it reads and writes."""
        v = len(self.ops)
        moved = float(nbytes) + sum(self.bytes[u] for u in inputs)
        self.ops.append(op)
        self.names.append(name)
        self.bytes.append(int(nbytes))
        self.flops.append(float(flops))
        self.params.append(bool(params))
        self.gpu.append(_op_time(_GPU, flops, moved))
        self.cpu.append(_op_time(_CPU, flops, moved))
        for u in sorted(set(inputs)):
            self.src.append(u)
            self.dst.append(v)
        return v


def checkmate_training(fwd: ForwardBuilder, *, name: str, op_names: bool = True) -> Graph:
    """Loss and backward nodes in the convention of the public Checkmate /
    Moccasin graphs.

    Forward node ``i`` (of ``L``, in the builder's order) keeps index ``i``;
    the loss is node ``L`` (forward phase, reading the last forward node);
    the backward node of ``i`` is ``2L - i`` and reads the forward output
    ``i``, the forward outputs of ``i``'s successors (the inputs its
    successors' backward needs) and the gradients of ``i``'s successors (the
    loss for the last node).  Backward nodes hold as many bytes as their
    forward node and take :data:`BACKWARD_FACTOR` times its time; those of
    operators with parameters are the required outputs.

    Parameters
    ----------
    fwd : ForwardBuilder
    name : str
    op_names : bool
        Record the operator kinds in ``meta["op"]`` (``"mm"``,
        ``"mm_backward"``, ...), as an exporter that knows them would; else
        the graph carries only its node names.
    """
    L = len(fwd)
    if L == 0:
        raise GraphError("checkmate_training: the forward graph is empty")
    src, dst = np.asarray(fwd.src, np.int64), np.asarray(fwd.dst, np.int64)
    idx = np.arange(L, dtype=np.int64)
    bwd = 2 * L - idx
    edges = np.concatenate([
        np.stack([src, dst], 1),
        np.stack([dst, 2 * L - src], 1),          # successor's output -> my backward
        np.stack([2 * L - dst, 2 * L - src], 1),  # successor's gradient -> my backward
        np.stack([idx, bwd], 1),                  # my output -> my backward
        np.array([[L - 1, L], [L, L + 1]], np.int64),
    ])
    fb, fg, fc = (np.asarray(x) for x in (fwd.bytes, fwd.gpu, fwd.cpu))
    nbytes = np.concatenate([fb, [F32], fb[::-1]]).astype(np.int64)
    gpu = np.concatenate([fg, [_op_time(_GPU, 0.0, F32 + fb[-1])], BACKWARD_FACTOR * fg[::-1]])
    cpu = np.concatenate([fc, [_op_time(_CPU, 0.0, F32 + fb[-1])], BACKWARD_FACTOR * fc[::-1]])
    flops = np.concatenate([fwd.flops, [0.0], BACKWARD_FACTOR * np.asarray(fwd.flops)[::-1]])
    names = list(fwd.names) + ["loss"] + [f"{s}_backward" for s in reversed(fwd.names)]
    meta = {**MACHINE_META}
    if op_names:
        meta["op"] = list(fwd.ops) + ["loss"] + [f"{s}_backward" for s in reversed(fwd.ops)]
    required = bwd[np.asarray(fwd.params, bool)]
    return Graph.from_arrays(nbytes, edges, {"gpu": gpu, "cpu": cpu}, name=name, names=names,
                             phase=[0] * (L + 1) + [1] * L, flops=flops, required=required, meta=meta)


# ----------------------------------------------------------------- decoders
def _attention(fb: ForwardBuilder, x: int, p: str, *, tokens: int, seq: int, d: int, heads: int,
               kv_heads: int) -> int:
    """Self-attention (pre-norm, GQA, rotary) from ``x``; returns the residual sum."""
    act = tokens * d * F32
    dh = d // heads
    kv = tokens * kv_heads * dh * F32
    batch = tokens // seq
    norm = fb.add("rmsnorm", f"{p}.attn_norm", act, flops=4 * tokens * d, inputs=[x])
    q = fb.add("mm", f"{p}.q_proj", act, flops=2 * tokens * d * d, inputs=[norm], params=True)
    k = fb.add("mm", f"{p}.k_proj", kv, flops=2 * tokens * d * kv_heads * dh, inputs=[norm], params=True)
    v = fb.add("mm", f"{p}.v_proj", kv, flops=2 * tokens * d * kv_heads * dh, inputs=[norm], params=True)
    qr = fb.add("rope", f"{p}.q_rope", act, flops=3 * tokens * d, inputs=[q])
    kr = fb.add("rope", f"{p}.k_rope", kv, flops=3 * tokens * kv_heads * dh, inputs=[k])
    scores = fb.add("bmm", f"{p}.scores", batch * heads * seq * seq * F32, flops=2 * batch * heads * seq * seq * dh,
                    inputs=[qr, kr])
    probs = fb.add("softmax", f"{p}.softmax", batch * heads * seq * seq * F32, flops=5 * batch * heads * seq * seq,
                   inputs=[scores])
    ctx = fb.add("bmm", f"{p}.context", act, flops=2 * batch * heads * seq * seq * dh, inputs=[probs, v])
    o = fb.add("mm", f"{p}.o_proj", act, flops=2 * tokens * d * d, inputs=[ctx], params=True)
    return fb.add("add", f"{p}.attn_residual", act, flops=tokens * d, inputs=[x, o])


def _mlp(fb: ForwardBuilder, h: int, p: str, *, tokens: int, d: int, ffn: int, experts: int = 1) -> int:
    """SwiGLU MLP from ``h`` (``experts > 1``: a routed mixture of that many
    experts, each seeing the tokens routed to it); returns the residual sum."""
    act = tokens * d * F32
    norm = fb.add("rmsnorm", f"{p}.mlp_norm", act, flops=4 * tokens * d, inputs=[h])
    route = None
    routed = tokens
    if experts > 1:
        logits = fb.add("mm", f"{p}.router", tokens * experts * F32, flops=2 * tokens * d * experts, inputs=[norm],
                        params=True)
        route = fb.add("topk_softmax", f"{p}.route", tokens * experts * F32, flops=5 * tokens * experts,
                       inputs=[logits])
        routed = max(1, 2 * tokens // experts)  # top-2 routing
    outs = []
    for e in range(experts):
        q = f"{p}.expert{e}" if experts > 1 else p
        src = [norm] if route is None else [norm, route]
        hid = routed * ffn * F32
        gate = fb.add("mm", f"{q}.gate_proj", hid, flops=2 * routed * d * ffn, inputs=src, params=True)
        up = fb.add("mm", f"{q}.up_proj", hid, flops=2 * routed * d * ffn, inputs=src, params=True)
        a = fb.add("silu_mul", f"{q}.silu_mul", hid, flops=5 * routed * ffn, inputs=[gate, up])
        outs.append(fb.add("mm", f"{q}.down_proj", routed * d * F32, flops=2 * routed * d * ffn, inputs=[a],
                           params=True))
    if route is not None:
        outs.append(route)
        return fb.add("moe_combine", f"{p}.mlp_residual", act, flops=tokens * d * 3, inputs=[h, *outs])
    return fb.add("add", f"{p}.mlp_residual", act, flops=tokens * d, inputs=[h, *outs])


def _embedding(fb: ForwardBuilder, tokens: int, d: int) -> int:
    return fb.add("embedding", "embed", tokens * d * F32)


def _head(fb: ForwardBuilder, x: int, tokens: int, d: int, vocab: int) -> int:
    norm = fb.add("rmsnorm", "final_norm", tokens * d * F32, flops=4 * tokens * d, inputs=[x])
    return fb.add("mm", "lm_head", tokens * vocab * F32, flops=2 * tokens * d * vocab, inputs=[norm], params=True)


def _layers_for(size: int, per_layer: int, fixed: int) -> int:
    return max(1, round((size - fixed) / per_layer))


def decoder_checkmate(size: int = 2000, seed: int = 0, *, layers: int | None = None, batch: int = 4,
                      seq: int = 512, d: int = 1024, heads: int = 16, kv_heads: int = 4, ffn: int = 2816,
                      vocab: int = 32000, op_names: bool = True) -> Graph:
    """A llama-like decoder of identical layers, Checkmate convention.

    Each layer has 17 forward operators (34 nodes with their backward); the
    embedding, final norm, LM head and loss add 7 nodes.  ``layers`` (default:
    from ``size``) overrides the size; ``seed`` is unused (identical layers).

    Examples
    --------
    >>> g = decoder_checkmate(layers=2)
    >>> g.n, g.names[g.n - 1]
    (75, 'embed_backward')
    """
    L = layers or _layers_for(size, 34, 7)
    tokens = batch * seq
    fb = ForwardBuilder()
    x = _embedding(fb, tokens, d)
    for i in range(L):
        h = _attention(fb, x, f"L{i}", tokens=tokens, seq=seq, d=d, heads=heads, kv_heads=kv_heads)
        x = _mlp(fb, h, f"L{i}", tokens=tokens, d=d, ffn=ffn)
    _head(fb, x, tokens, d, vocab)
    return checkmate_training(fb, name=f"decoder_checkmate_{L}l", op_names=op_names)


def decoder_varied(size: int = 2000, seed: int = 0, *, batch: int = 4, seq: int = 512, vocab: int = 32000) -> Graph:
    """A decoder whose layers all differ, Checkmate convention.

    Per layer (drawn from ``seed``): hidden width 768-1536 (a projection
    where it changes), 8-24 heads with 1-8 KV heads, FFN ratio 2-4 and 1-4
    experts (a routed mixture of experts, top-2, where more than one).

    Examples
    --------
    >>> a, b = decoder_varied(1500, 3), decoder_varied(1500, 3)
    >>> a.n == b.n and bool((a.cost("gpu") == b.cost("gpu")).all())
    True
    """
    rng = np.random.default_rng(seed)
    tokens = batch * seq
    fb = ForwardBuilder()
    d = 1024
    x = _embedding(fb, tokens, d)
    i = 0
    while len(fb) * 2 + 5 < size - 25:
        d_new = int(rng.choice([768, 1024, 1280, 1536]))
        if d_new != d:
            x = fb.add("mm", f"L{i}.resize", tokens * d_new * F32, flops=2 * tokens * d * d_new, inputs=[x],
                       params=True)
            d = d_new
        heads = int(rng.choice([8, 12, 16, 24]))
        heads = heads if d % heads == 0 else 16
        kv = int(rng.choice([h for h in (1, 2, 4, 8) if heads % h == 0]))
        ffn = 64 * round(d * float(rng.uniform(2.0, 4.0)) / 64)
        experts = int(rng.integers(1, 5))
        h = _attention(fb, x, f"L{i}", tokens=tokens, seq=seq, d=d, heads=heads, kv_heads=kv)
        x = _mlp(fb, h, f"L{i}", tokens=tokens, d=d, ffn=ffn, experts=experts)
        i += 1
    _head(fb, x, tokens, d, vocab)
    return checkmate_training(fb, name=f"decoder_varied_{i}l_s{seed}")


def llama_layers(layers: int, *, path: str | pathlib.Path | None = None) -> Graph:
    """The profiled llama layer of our tracer repeated ``layers`` times
    (:func:`~hybrid_remat.generators.repeat_layers` of
    ``datasets/llama_8l_b4_s512``: 129 nodes a layer plus 41).

    Raises
    ------
    GraphError
        The dataset is not there (an installed package without the
        repository's ``datasets/``).
    """
    from .generators import repeat_layers
    from .loaders import load_graph

    src = pathlib.Path(path) if path is not None else LLAMA_GRAPH
    if not src.exists():
        raise GraphError(f"llama_layers needs the profiled graph {src} (the repository's datasets/)")
    return repeat_layers(load_graph(str(src)), layers)


def decoder_tracer(size: int = 2000, seed: int = 0) -> Graph:
    """:func:`llama_layers` with as many layers as make ``size`` nodes
    (``seed`` unused: the copies are identical)."""
    return llama_layers(_layers_for(size, 129, 41))


# --------------------------------------------------------------- cost noise
def with_cost_noise(graph: Graph, sigma: float = 0.05, seed: int = 0) -> Graph:
    """``graph`` with every operator's time in every cost kind multiplied by
    its own ``lognormal(0, sigma)`` factor (seeded), as repeated profiling
    measures identical operators: structure and sizes unchanged.

    Examples
    --------
    >>> from hybrid_remat.generators import chain
    >>> g = with_cost_noise(chain(4), 0.1, seed=1)
    >>> g.name, bool((g.cost() != 1.0).all()), g.m
    ('chain4_noise0.1_s1', True, 3)
    """
    if not sigma >= 0:
        raise GraphError(f"cost noise sigma must be >= 0, not {sigma}")
    rng = np.random.default_rng(seed)
    noisy = {k: c * rng.lognormal(0.0, sigma, graph.n) for k, c in graph.costs.items()}
    return dataclasses.replace(graph.with_costs(noisy, estimated=graph.estimated),
                               name=f"{graph.name}_noise{sigma:g}_s{seed}")


# ----------------------------------------------------------- vision families
def _conv(fb, name, x, c_in, c_out, hw, batch, k=3, stride=1, params=True):
    out_hw = hw // stride
    return fb.add("conv", name, batch * c_out * out_hw * out_hw * F32,
                  flops=2 * batch * c_in * c_out * k * k * out_hw * out_hw, inputs=x, params=params), out_hw


def _pointwise(fb, op, name, x, nbytes, elems):
    return fb.add(op, name, nbytes, flops=4 * elems, inputs=x)


def resnet_stages(size: int = 2000, seed: int = 0, *, batch: int = 32, widths=(64, 128, 256, 512),
                  depths=(3, 4, 6, 3)) -> Graph:
    """Bottleneck ResNet stages of different widths, Checkmate convention.

    A stem, then ``len(widths)`` stages of bottleneck blocks (1x1, 3x3, 1x1
    convolutions with batch norm and ReLU, a residual add; the first block
    of a stage downsamples and projects its skip) at halving resolutions
    (56 -> 7 at 224x224 input), pooling and a classifier.  Stage depths are
    ``depths`` scaled to reach ``size`` nodes: runs of identical blocks of
    four kinds.  ``seed`` is unused.

    Examples
    --------
    >>> g = resnet_stages(1000)
    >>> g.n, g.name
    (987, 'resnet_stages_11-15-23-11')
    """
    scale = max(1.0, (size - 20 - 4 * len(widths)) / (2 * 8 * sum(depths)))   # 8 operators a block
    counts = [max(1, round(k * scale)) for k in depths]
    fb = ForwardBuilder()
    hw, c = 224, 3
    x, hw = _conv(fb, "stem.conv", [], c, 64, hw, batch, k=7, stride=2)
    x = _pointwise(fb, "batchnorm_relu", "stem.bn_relu", [x], fb.bytes[x], fb.bytes[x] // F32)
    x = fb.add("maxpool", "stem.pool", fb.bytes[x] // 4, inputs=[x])
    hw, c = hw // 2, 64
    for s, (w, count) in enumerate(zip(widths, counts)):
        out_c = 4 * w
        for b in range(count):
            p = f"S{s}.B{b}"
            stride = 2 if (b == 0 and s > 0) else 1
            y, _ = _conv(fb, f"{p}.conv1", [x], c, w, hw, batch, k=1)
            y = _pointwise(fb, "batchnorm_relu", f"{p}.bn1", [y], fb.bytes[y], fb.bytes[y] // F32)
            y, hw2 = _conv(fb, f"{p}.conv2", [y], w, w, hw, batch, stride=stride)
            y = _pointwise(fb, "batchnorm_relu", f"{p}.bn2", [y], fb.bytes[y], fb.bytes[y] // F32)
            y, _ = _conv(fb, f"{p}.conv3", [y], w, out_c, hw2, batch, k=1)
            y = _pointwise(fb, "batchnorm", f"{p}.bn3", [y], fb.bytes[y], fb.bytes[y] // F32)
            skip = x
            if b == 0:
                skip, _ = _conv(fb, f"{p}.down", [x], c, out_c, hw, batch, k=1, stride=stride)
                skip = _pointwise(fb, "batchnorm", f"{p}.down_bn", [skip], fb.bytes[skip], fb.bytes[skip] // F32)
            y = fb.add("add", f"{p}.add", fb.bytes[y], flops=fb.bytes[y] // F32, inputs=[y, skip])
            x = _pointwise(fb, "relu", f"{p}.relu", [y], fb.bytes[y], fb.bytes[y] // F32)
            c, hw = out_c, hw2
    x = fb.add("avgpool", "pool", batch * c * F32, flops=batch * c * hw * hw, inputs=[x])
    fb.add("mm", "fc", batch * 1000 * F32, flops=2 * batch * c * 1000, inputs=[x], params=True)
    return checkmate_training(fb, name=f"resnet_stages_{'-'.join(map(str, counts))}")


def unet(size: int = 2000, seed: int = 0, *, levels: int = 4, batch: int = 8, res: int = 64,
         channels=(128, 256, 512, 512), attention_from: int = 2) -> Graph:
    """A diffusion U-Net, Checkmate convention.

    ``levels`` resolutions (``res`` halving per level) of ``k`` residual
    blocks each on the way down and ``k + 1`` on the way up (each up block
    reads a skip from the down path through a concatenation), self-attention
    from level ``attention_from`` down, a middle block (res, attention,
    res), and a time embedding (sinusoid, two projections) read by every
    residual block.  ``k`` is chosen to reach ``size`` nodes; ``seed`` is
    unused.

    Examples
    --------
    >>> g = unet(600)
    >>> g.n, g.name
    (547, 'unet_4lv_2res')
    """
    channels = tuple(channels)[:levels]

    def res_block(fb, x, temb, c_in, c_out, hw, p):
        e = batch * c_out * hw * hw
        h = _pointwise(fb, "groupnorm_silu", f"{p}.norm1", [x], fb.bytes[x], fb.bytes[x] // F32)
        h, _ = _conv(fb, f"{p}.conv1", [h], c_in, c_out, hw, batch)
        t = fb.add("mm", f"{p}.temb_proj", batch * c_out * F32, flops=2 * batch * 1024 * c_out, inputs=[temb],
                   params=True)
        h = fb.add("add", f"{p}.temb_add", e * F32, flops=e, inputs=[h, t])
        h = _pointwise(fb, "groupnorm_silu", f"{p}.norm2", [h], e * F32, e)
        h, _ = _conv(fb, f"{p}.conv2", [h], c_out, c_out, hw, batch)
        if c_in != c_out:
            x, _ = _conv(fb, f"{p}.skip_proj", [x], c_in, c_out, hw, batch, k=1)
        return fb.add("add", f"{p}.residual", e * F32, flops=e, inputs=[x, h])

    def attn(fb, x, c, hw, p):
        t = hw * hw
        e = batch * c * t
        h = _pointwise(fb, "groupnorm", f"{p}.norm", [x], e * F32, e)
        qkv = fb.add("mm", f"{p}.qkv", 3 * e * F32, flops=6 * e * c, inputs=[h], params=True)
        s = fb.add("bmm", f"{p}.scores", batch * t * t * F32, flops=2 * batch * t * t * c, inputs=[qkv])
        pr = fb.add("softmax", f"{p}.softmax", batch * t * t * F32, flops=5 * batch * t * t, inputs=[s])
        ctx = fb.add("bmm", f"{p}.context", e * F32, flops=2 * batch * t * t * c, inputs=[pr, qkv])
        o = fb.add("mm", f"{p}.proj", e * F32, flops=2 * e * c, inputs=[ctx], params=True)
        return fb.add("add", f"{p}.residual", e * F32, flops=e, inputs=[x, o])

    def build(k: int) -> ForwardBuilder:
        fb = ForwardBuilder()
        temb = fb.add("sinusoid", "temb.sinusoid", batch * 256 * F32, inputs=[])
        temb = fb.add("mm", "temb.fc1", batch * 1024 * F32, flops=2 * batch * 256 * 1024, inputs=[temb], params=True)
        temb = _pointwise(fb, "silu", "temb.silu", [temb], batch * 1024 * F32, batch * 1024)
        temb = fb.add("mm", "temb.fc2", batch * 1024 * F32, flops=2 * batch * 1024 * 1024, inputs=[temb], params=True)
        hw = res
        x, _ = _conv(fb, "in.conv", [], 4, channels[0], hw, batch)
        skips, c = [(x, channels[0])], channels[0]
        for lv, ch in enumerate(channels):
            for b in range(k):
                x = res_block(fb, x, temb, c, ch, hw, f"D{lv}.R{b}")
                c = ch
                if lv >= attention_from:
                    x = attn(fb, x, c, hw, f"D{lv}.A{b}")
                skips.append((x, c))
            if lv < levels - 1:
                x, hw = _conv(fb, f"D{lv}.down", [x], c, c, hw, batch, stride=2)
                skips.append((x, c))
        x = res_block(fb, x, temb, c, c, hw, "M.R0")
        x = attn(fb, x, c, hw, "M.A")
        x = res_block(fb, x, temb, c, c, hw, "M.R1")
        for lv in reversed(range(levels)):
            ch = channels[lv]
            for b in range(k + 1):
                s, cs = skips.pop()
                e = batch * (c + cs) * hw * hw
                x = fb.add("cat", f"U{lv}.R{b}.cat", e * F32, flops=0, inputs=[x, s])
                x = res_block(fb, x, temb, c + cs, ch, hw, f"U{lv}.R{b}")
                c = ch
                if lv >= attention_from:
                    x = attn(fb, x, c, hw, f"U{lv}.A{b}")
            if lv > 0:
                x = fb.add("upsample", f"U{lv}.up", batch * c * 4 * hw * hw * F32, inputs=[x])
                hw *= 2
                x, _ = _conv(fb, f"U{lv}.up_conv", [x], c, c, hw, batch)
        x = _pointwise(fb, "groupnorm_silu", "out.norm", [x], fb.bytes[x], fb.bytes[x] // F32)
        _conv(fb, "out.conv", [x], c, 4, hw, batch)
        return fb

    per_k = 2 * (len(build(2)) - len(build(1)))
    k = max(1, round((size - 2 * len(build(1)) - 1) / per_k) + 1)
    return checkmate_training(build(k), name=f"unet_{levels}lv_{k}res")


# ----------------------------------------------------------- random layered
def random_layered_training(size: int = 2000, seed: int = 0, *, in_degree: float = 3.0,
                            skip_density: float = 0.14, layer_width: float | None = None) -> Graph:
    """A random layered forward DAG (about ``size / 2`` nodes) and its
    backward in the Checkmate convention.

    Layers of random widths around ``layer_width`` (default ``sqrt(n)``);
    each node reads about ``in_degree`` random nodes of the previous layer
    (at least one), skip connections from two or more layers back make up a
    fraction ``skip_density`` of the edges, and every node feeds the next
    layer.  Operators are random matmul-like or elementwise ones of random
    sizes (1-64 MiB outputs), timed by the same rule as the other families.

    Examples
    --------
    >>> g = random_layered_training(1000, seed=2)
    >>> g.n, g.name
    (1001, 'random_layered_training_n1001_s2')
    """
    rng = np.random.default_rng(seed)
    nf = max(4, (size - 1) // 2)
    width = layer_width or max(2.0, np.sqrt(nf))
    sizes, left = [1], nf - 1   # one source first
    while left > 0:
        sizes.append(min(left, int(max(1, round(width * rng.uniform(0.25, 1.75))))))
        left -= sizes[-1]
    starts = np.cumsum([0] + sizes)
    layer_of = np.repeat(np.arange(len(sizes)), sizes)
    src, dst = [], []
    for li in range(1, len(sizes)):
        a, b = starts[li - 1], starts[li]
        nodes = np.arange(b, starts[li + 1])
        k = np.minimum(b - a, np.maximum(1, rng.poisson(in_degree, nodes.size)))
        for v, kk in zip(nodes.tolist(), k.tolist()):
            for u in rng.choice(np.arange(a, b), size=kk, replace=False).tolist():
                src.append(u)
                dst.append(v)
        fed = set(src[-int(k.sum()):])
        for u in range(a, b):   # every node of the previous layer feeds this one
            if u not in fed:
                src.append(u)
                dst.append(int(rng.integers(b, starts[li + 1])))
    n_skip = int(round(len(src) * skip_density / (1 - skip_density)))
    if len(sizes) > 2:
        v = rng.integers(starts[2], nf, n_skip)
        for vv in v.tolist():
            lu = int(rng.integers(0, layer_of[vv] - 1))
            src.append(int(rng.integers(starts[lu], starts[lu + 1])))
            dst.append(vv)
    preds: list[list[int]] = [[] for _ in range(nf)]
    for u, v in zip(src, dst):
        preds[v].append(u)
    fb = ForwardBuilder()
    out_mib = np.exp(rng.uniform(0, np.log(64), nf))
    matmul = rng.random(nf) < 0.3
    for v in range(nf):
        nbytes = int(out_mib[v] * 2**20) // F32 * F32
        elems = nbytes // F32
        flops = 2.0 * elems * 1024 if matmul[v] else 2.0 * elems
        fb.add("mm" if matmul[v] else "pointwise", f"n{v}", nbytes, flops=flops, inputs=sorted(set(preds[v])),
               params=bool(matmul[v]))
    # the last node must be the forward graph's only sink for the loss: join the sinks
    sinks = np.setdiff1d(np.arange(nf), src).tolist()
    if len(sinks) > 1 or sinks != [nf - 1]:
        fb.add("sum", "output", F32 * 1024, flops=1024.0 * len(sinks), inputs=sinks)
    return checkmate_training(fb, name=f"random_layered_training_n{2 * len(fb) + 1}_s{seed}")


# ----------------------------------------------------------------- registry
def _noisy(builder: Callable[[int, int], Graph], sigma: float = 0.05) -> Callable[[int, int], Graph]:
    def build(size: int, seed: int = 0) -> Graph:
        return with_cost_noise(builder(size, seed), sigma, seed)

    build.__doc__ = f"{builder.__name__} with lognormal(sigma={sigma}) cost noise."
    return build


#: family name -> ``builder(size_nodes, seed)``
FAMILIES: dict[str, Callable[[int, int], Graph]] = {
    "decoder_checkmate": decoder_checkmate,
    "decoder_checkmate_noise": _noisy(decoder_checkmate),
    "decoder_tracer": decoder_tracer,
    "decoder_tracer_noise": _noisy(decoder_tracer),
    "decoder_varied": decoder_varied,
    "unet": unet,
    "resnet_stages": resnet_stages,
    "random_layered": random_layered_training,
}


def family_graph(family: str, size: int, seed: int = 0) -> Graph:
    """``FAMILIES[family](size, seed)``, with a clear error for an unknown name.

    Examples
    --------
    >>> family_graph("nope", 10)
    Traceback (most recent call last):
    ...
    hybrid_remat.errors.GraphError: unknown graph family 'nope'; known: decoder_checkmate, decoder_checkmate_noise, decoder_tracer, decoder_tracer_noise, decoder_varied, unet, resnet_stages, random_layered
    """
    try:
        builder = FAMILIES[family]
    except KeyError:
        raise GraphError(f"unknown graph family {family!r}; known: {', '.join(FAMILIES)}") from None
    return builder(size, seed)
