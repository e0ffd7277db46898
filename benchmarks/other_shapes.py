"""Shapes the families table does not have, run the way it runs them.

:mod:`benchmarks.families` measures issue 20's families; the library's
components were developed against them.  This benchmark builds two more
training-graph shapes, written after that work and used to tune nothing,
with :class:`~hybrid_remat.families.ForwardBuilder` and
:func:`~hybrid_remat.families.checkmate_training` (the Checkmate
convention), and runs them through the same row code (a fresh process per
row, detection inside the limit, every plan re-simulated, the same
criteria):

* :func:`encoder_decoder` -- a transformer encoder-decoder: encoder layers,
  then decoder layers that each read the encoder's output (cross-attention:
  one value read by every decoder layer, across the whole backward pass);
* :func:`densenet` -- DenseNet blocks: each layer reads the concatenation of
  every earlier layer of its block (dense skips), blocks joined by
  transitions that halve the channels and now and then the resolution.

Usage::

    python3 -m benchmarks.other_shapes --sizes 10000,50000 --budgets 50,30 --workers 1 --limit 60
"""

from __future__ import annotations

from benchmarks.families import main as families_main
from hybrid_remat.families import F32, ForwardBuilder, checkmate_training

__all__ = ["SHAPES", "encoder_decoder", "densenet"]


def _attention(fb: ForwardBuilder, q_in: int, kv_in: int, p: str, *, tokens: int, seq: int, d: int,
               heads: int) -> int:
    """Multi-head attention (pre-norm on ``q_in``; keys and values from
    ``kv_in``, the encoder's output for cross-attention); the residual sum."""
    act = tokens * d * F32
    batch = tokens // seq
    att = batch * heads * seq * seq * F32
    norm = fb.add("layernorm", f"{p}.norm", act, flops=4 * tokens * d, inputs=[q_in])
    kv_src = norm if kv_in == q_in else kv_in
    q = fb.add("mm", f"{p}.q", act, flops=2 * tokens * d * d, inputs=[norm], params=True)
    k = fb.add("mm", f"{p}.k", act, flops=2 * tokens * d * d, inputs=[kv_src], params=True)
    v = fb.add("mm", f"{p}.v", act, flops=2 * tokens * d * d, inputs=[kv_src], params=True)
    s = fb.add("bmm", f"{p}.scores", att, flops=2 * batch * heads * seq * seq * (d // heads), inputs=[q, k])
    pr = fb.add("softmax", f"{p}.softmax", att, flops=5 * batch * heads * seq * seq, inputs=[s])
    c = fb.add("bmm", f"{p}.context", act, flops=2 * batch * heads * seq * seq * (d // heads), inputs=[pr, v])
    o = fb.add("mm", f"{p}.out", act, flops=2 * tokens * d * d, inputs=[c], params=True)
    return fb.add("add", f"{p}.residual", act, flops=tokens * d, inputs=[q_in, o])


def _mlp(fb: ForwardBuilder, x: int, p: str, *, tokens: int, d: int, ffn: int) -> int:
    act = tokens * d * F32
    norm = fb.add("layernorm", f"{p}.mlp_norm", act, flops=4 * tokens * d, inputs=[x])
    up = fb.add("mm", f"{p}.fc1", tokens * ffn * F32, flops=2 * tokens * d * ffn, inputs=[norm], params=True)
    a = fb.add("gelu", f"{p}.gelu", tokens * ffn * F32, flops=8 * tokens * ffn, inputs=[up])
    down = fb.add("mm", f"{p}.fc2", act, flops=2 * tokens * d * ffn, inputs=[a], params=True)
    return fb.add("add", f"{p}.mlp_residual", act, flops=tokens * d, inputs=[x, down])


def encoder_decoder(size: int = 10000, seed: int = 0, *, batch: int = 4, seq: int = 256, d: int = 768,
                    heads: int = 12, ffn: int = 3072, vocab: int = 32000):
    """A transformer encoder-decoder of ``size`` nodes or so (``seed``
    unused: identical layers).

    Examples
    --------
    >>> g = encoder_decoder(2000)
    >>> g.n, g.names[g.n - 1]
    (2009, 'embed_backward')
    """
    per_pair = 2 * (14 + 23)          # an encoder layer (14 operators) and a decoder layer (23), with backward
    layers = max(1, round((size - 10) / per_pair))
    tokens = batch * seq
    act = tokens * d * F32
    fb = ForwardBuilder()
    x = fb.add("embedding", "embed", act)
    for i in range(layers):
        x = _attention(fb, x, x, f"E{i}.self", tokens=tokens, seq=seq, d=d, heads=heads)
        x = _mlp(fb, x, f"E{i}", tokens=tokens, d=d, ffn=ffn)
    enc = fb.add("layernorm", "enc_norm", act, flops=4 * tokens * d, inputs=[x])
    y = fb.add("embedding", "dec_embed", act)
    for i in range(layers):
        y = _attention(fb, y, y, f"D{i}.self", tokens=tokens, seq=seq, d=d, heads=heads)
        y = _attention(fb, y, enc, f"D{i}.cross", tokens=tokens, seq=seq, d=d, heads=heads)
        y = _mlp(fb, y, f"D{i}", tokens=tokens, d=d, ffn=ffn)
    norm = fb.add("layernorm", "dec_norm", act, flops=4 * tokens * d, inputs=[y])
    fb.add("mm", "lm_head", tokens * vocab * F32, flops=2 * tokens * d * vocab, inputs=[norm], params=True)
    return checkmate_training(fb, name=f"encoder_decoder_{layers}x2l", op_names=False)


def densenet(size: int = 10000, seed: int = 0, *, batch: int = 32, growth: int = 32, per_block: int = 12,
             hw: int = 56):
    """DenseNet blocks of ``per_block`` layers, ``size`` nodes or so
    (``seed`` unused).

    Examples
    --------
    >>> g = densenet(2000)
    >>> g.n
    2045
    """
    fb = ForwardBuilder()
    c = 64
    x = fb.add("conv", "stem", batch * c * hw * hw * F32, flops=2 * batch * c * 3 * 49 * hw * hw, params=True)
    blocks = max(1, round(size / (2 * (4 * per_block + 3))))
    for b in range(blocks):
        feats = [x]
        for j in range(per_block):
            cin = c + j * growth
            p = f"B{b}.L{j}"
            cat = fb.add("cat", f"{p}.cat", batch * cin * hw * hw * F32, flops=batch * cin * hw * hw, inputs=feats)
            bn = fb.add("bn_relu", f"{p}.bn", batch * cin * hw * hw * F32, flops=4 * batch * cin * hw * hw,
                        inputs=[cat], params=True)
            c1 = fb.add("conv", f"{p}.conv1x1", batch * 4 * growth * hw * hw * F32,
                        flops=2 * batch * cin * 4 * growth * hw * hw, inputs=[bn], params=True)
            feats.append(fb.add("conv", f"{p}.conv3x3", batch * growth * hw * hw * F32,
                                flops=2 * batch * 4 * growth * growth * 9 * hw * hw, inputs=[c1], params=True))
        cout = c + per_block * growth
        cat = fb.add("cat", f"B{b}.out", batch * cout * hw * hw * F32, flops=batch * cout * hw * hw, inputs=feats)
        c = cout // 2
        t = fb.add("conv", f"B{b}.transition", batch * c * hw * hw * F32, flops=2 * batch * cout * c * hw * hw,
                   inputs=[cat], params=True)
        new_hw = max(7, hw // 2) if b % 4 == 3 else hw
        x = fb.add("pool", f"B{b}.pool", batch * c * new_hw * new_hw * F32, flops=batch * c * hw * hw, inputs=[t])
        hw = new_hw
    fb.add("mm", "fc", batch * 1000 * F32, flops=2 * batch * c * 1000, inputs=[x], params=True)
    return checkmate_training(fb, name=f"densenet_{blocks}b", op_names=False)


#: shape name -> ``builder(size, seed)``
SHAPES = {"encoder_decoder": encoder_decoder, "densenet": densenet}


def main(argv=None) -> int:
    return families_main(argv, builders=SHAPES, module="benchmarks.other_shapes",
                         description=__doc__.split("\n\n")[0], default_out="other_shapes.md",
                         default_sizes=(10000, 50000),
                         title="# Shapes the families table does not have (`python3 -m benchmarks.other_shapes`)")


if __name__ == "__main__":
    raise SystemExit(main())
