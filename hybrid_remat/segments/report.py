"""What structure detection found in a graph, as lines for ``info``.

Examples
--------
>>> from hybrid_remat.families import decoder_checkmate
>>> print("\\n".join(structure_lines(decoder_checkmate(layers=6))))
structure    1 run of repeated blocks: 6 blocks of 17+17 nodes (same costs)
segments     8 stages: 6 blocks, 2 segments of their own (largest 17 forward nodes)
"""

from __future__ import annotations

from ..blocks.detect import detect_runs
from .chain import segment_chain

__all__ = ["structure_lines"]


def structure_lines(graph) -> list:
    """Runs of repeated blocks (or why none), the notes of detection, and the
    segment chain the ``segments`` formulation solves."""
    st = graph.derived("runs", detect_runs)
    out = []
    if st.runs:
        runs = ", ".join(f"{r.n_blocks} blocks of {r.fwd.shape[1]}+{r.bwd.shape[1]} nodes"
                         f" ({'same' if r.same_costs else 'different'} costs)" for r in st.runs[:6])
        more = f", and {len(st.runs) - 6} more" if len(st.runs) > 6 else ""
        out.append(f"structure    {len(st.runs)} run{'s' if len(st.runs) > 1 else ''} of repeated blocks: "
                   f"{runs}{more}")
        out += [f"             {note}" for note in dict.fromkeys(st.notes)]
    else:
        out.append(f"structure    no repeated blocks: {st.why_not}")
    ch = graph.derived("segment_chain", segment_chain)
    if ch is None:
        out.append("segments     none: not a training graph (no backward phase after the forward phase)")
    else:
        d = ch.describe()
        blocks = sum(r["blocks"] for r in d["runs"])
        own = d["segments"]
        out.append(f"segments     {d['stages']} stages: {blocks} blocks, {own} segment{'s' if own != 1 else ''} "
                   f"of their own (largest {d['largest_segment']} forward nodes)")
    return out
