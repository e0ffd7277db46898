"""Dropout recomputed from its saved mask, never drawn again.

``aten.native_dropout(x, p, train)`` returns ``(out, mask)``: ``out = x * mask
* (1 / (1 - p))`` (ATen's CPU kernel computes exactly that product: the
rewrite is bit-identical), ``mask`` a bool tensor of 1 byte per element.  The
compiled backward of a model with dropout reads ``out`` (the next layer's
weight gradient) and ``mask`` (dropout's own gradient).  Saving ``out`` costs
4 bytes per element (float32); recomputing the dropout draws other masks (no
RNG replay on CPU: the gradients would differ from eager's).

:func:`recompute_dropout_from_masks` rewrites the joint graph so that every
reader of ``out`` reads ``mul(mul(x, mask), scale)`` instead: the random op
itself still runs once, in the forward, and its mask is what a partition
saves (the partitioner never recomputes it, :func:`~.compile.is_rng_node`);
``out`` becomes an ordinary deterministic value, saved or recomputed from
``x`` and the mask like any other.  ``native_dropout``'s own ``out`` is then
read by nothing: a temporary freed as soon as the op returns (the
simulation counts the op's node as its mask only, see
:func:`mask_only_bytes`).
"""

from __future__ import annotations

import operator

__all__ = ["MASK_ONLY", "mask_only_bytes", "recompute_dropout_from_masks"]

#: ``node.meta`` key marking a ``native_dropout`` whose ``out`` nothing reads (the rewrite's).
MASK_ONLY = "hybrid_remat_mask_only"


def _train(node) -> bool:
    train = node.args[2] if len(node.args) > 2 else node.kwargs.get("train", None)
    return train is None or bool(train)  # ATen: no value means training


def recompute_dropout_from_masks(graph) -> int:
    """Rewrite ``graph`` (a joint ``torch.fx.Graph``) in place; the number of
    dropouts rewritten.  Left alone: eval-mode dropout, a ``p`` that is not a
    plain number, and any use of the op other than ``getitem``."""
    import torch
    from torch.fx.passes.shape_prop import _extract_tensor_metadata

    aten = torch.ops.aten
    done = 0
    for nd in list(graph.nodes):
        if nd.op != "call_function" or nd.target is not aten.native_dropout.default or not _train(nd):
            continue
        x, p = nd.args[0], nd.args[1]
        if not isinstance(x, torch.fx.Node) or not isinstance(p, (int, float)) or isinstance(p, bool):
            continue
        users = list(nd.users)
        if not users or any(u.target is not operator.getitem or u.args[1] not in (0, 1) for u in users):
            continue
        outs = [u for u in users if u.args[1] == 0]
        if not outs or not any(u.users for u in outs):
            continue
        val = nd.meta.get("val")
        if not (isinstance(val, (tuple, list)) and len(val) == 2 and isinstance(x.meta.get("val"), torch.Tensor)):
            continue
        scale = 0.0 if p >= 1.0 else 1.0 / (1.0 - float(p))
        with graph.inserting_after(nd):
            mask = graph.call_function(operator.getitem, (nd, 1))
        with graph.inserting_after(mask):
            kept = graph.call_function(aten.mul.Tensor, (x, mask))
        with graph.inserting_after(kept):
            out = graph.call_function(aten.mul.Tensor, (kept, scale))
        mask.meta["val"] = val[1]
        kept.meta["val"] = aten.mul.Tensor(x.meta["val"], val[1])
        out.meta["val"] = aten.mul.Tensor(kept.meta["val"], scale)
        for new in (mask, kept, out):
            new.meta["tensor_meta"] = _extract_tensor_metadata(new.meta["val"])
            for key in ("stack_trace", "seq_nr", "partitioner_tag", "nn_module_stack", "original_aten"):
                if key in nd.meta:
                    new.meta[key] = nd.meta[key]
        for u in users:
            u.replace_all_uses_with(out if u.args[1] == 0 else mask)
            graph.erase_node(u)
        nd.meta[MASK_ONLY] = True
        done += 1
    return done


def mask_only_bytes(node) -> int | None:
    """Bytes a rewritten ``native_dropout`` node holds (its mask: its ``out`` dies
    as the op returns), ``None`` for any other node."""
    if not node.meta.get(MASK_ONLY):
        return None
    from ._joint import _nbytes

    return _nbytes(node.meta["val"][1])
