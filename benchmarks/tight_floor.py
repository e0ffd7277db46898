"""Where the memory goes on random layered training graphs at tight budgets
(``python -m benchmarks.tight_floor``): a diagnosis, no library change.

For each graph (``hybrid_remat.families`` ``random_layered``, Checkmate
convention) it measures, as fractions of the keep-all peak:

* ``grads``: the gradients alive in the reference backward order (each from
  its computation to its last backward reader) plus the op's own inputs,
  at their peak: what any plan that keeps the reference backward order and
  never recomputes a gradient holds at least (the backward order is nearly
  forced here: a node's backward waits for all its successors');
* ``fwd ref`` / ``fwd greedy``: the peak of the forward pass alone (each
  value freed after its last forward reader) in the reference order and in
  :func:`hybrid_remat.core.reductions.memory_greedy_order`: the working set
  of recomputing the whole forward from its input;
* ``cone plan``: the peak of the *from-scratch cone plan*: forward once,
  then before every backward op every missing forward input is recomputed
  with its missing ancestors (in index order) and kept for ``h`` more
  stages; gradients are computed once.  (:func:`hybrid_remat.heuristics.cone_recompute.cone_plan_kernel`), and at
  its peak the split between gradients and forward values.  The peak is
  the simulator's (``simulate(..., check_budget=False)``).

Examples
--------
>>> from hybrid_remat.families import FAMILIES
>>> row = floor_row(FAMILIES["random_layered"](200, 0), horizons=(0,))
>>> 0 < row["grads"] < 1 and row["cone"][0]["valid"]
True
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks._common import command, write_results
from hybrid_remat.heuristics.cone_recompute import cone_plan_kernel

__all__ = ["floor_row", "main"]


def _forward_graph(g, L):
    from hybrid_remat.graph import Graph

    edges = [(int(u), v) for v in range(L) for u in g.preds(v)]
    return Graph.from_arrays(g.bytes[:L], edges, [1.0] * L)


def floor_row(g, horizons=(0, 1, 2)) -> dict:
    """The figures of the module docstring for one training graph."""
    from hybrid_remat.budgets import keep_all_peak
    from hybrid_remat.core.reductions import memory_greedy_order
    from hybrid_remat.core.sequence import minimal_plan, sequence_peak
    from hybrid_remat.problem import Problem
    from hybrid_remat.simulate import simulate

    n, b = g.n, np.asarray(g.bytes, dtype=np.int64)
    ph = np.asarray(g.phase)
    L = int((ph == 0).sum()) - 1          # forward nodes before the loss
    K = keep_all_peak(g)
    last = np.arange(n)
    same = np.arange(n)
    for v in range(n):
        s = g.succs(v)
        if len(s):
            last[v] = int(s.max())
            s2 = s[ph[s] == ph[v]]
            if len(s2):
                same[v] = int(s2.max())
    grad = np.zeros(n + 1, dtype=np.int64)
    for v in range(L + 1, n):
        grad[v] += b[v]
        grad[last[v] + 1] -= b[v]
    grad = np.cumsum(grad)[:n]
    op_in = np.array([sum(int(b[u]) for u in g.preds(v) if ph[u] == 0) for v in range(n)])
    fg = _forward_graph(g, L)
    row = {"graph": g.name, "n": n, "grads": float((grad + op_in)[L + 1:].max() / K),
           "fwd_ref": sequence_peak(fg, np.arange(L)) / K,
           "fwd_greedy": sequence_peak(fg, memory_greedy_order(fg)) / K, "cone": []}
    p = Problem.single(g, "100%")
    for h in horizons:
        t0 = time.perf_counter()
        seq, ok = cone_plan_kernel(g.pred_ptr, g.pred_idx, ph != 0, same, int(h), 4000 * n)
        if not ok:
            row["cone"].append({"h": h, "valid": False})
            continue
        plan, _ = minimal_plan(g, seq, p.primary.name)
        r = simulate(p, plan, check_budget=False)
        mem = r.timeline[:, 0]
        k = int(np.argmax(mem))
        ops = plan.op[:k + 1].astype(np.int64)
        resident = np.bincount(plan.node[:k + 1], weights=(ops == 0) * 1.0 - (ops == 1) * 1.0, minlength=n) > 0.5
        row["cone"].append({
            "h": h, "valid": r.valid, "peak": r.peak_bytes[p.primary.name] / K, "tdi": r.tdi_pct,
            "grads_at_peak": b[resident & (ph != 0)].sum() / K, "fwd_at_peak": b[resident & (ph == 0)].sum() / K,
            "s": time.perf_counter() - t0})
    return row


def main(argv=None) -> int:
    from hybrid_remat.families import FAMILIES

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="2000,10000")
    ap.add_argument("--horizons", default="0,1,2")
    ap.add_argument("--out", default="tight_floor")
    ap.add_argument("--note", default="")
    args = ap.parse_args(argv)
    hs = [int(x) for x in args.horizons.split(",")]
    lines = ["# Where the memory goes on random layered graphs at tight budgets", "",
             f"Command: `{command(__file__, argv)}`. {args.note}", "",
             "Fractions of the keep-all peak (module docstring of `benchmarks/tight_floor.py`).", "",
             "| graph | n | grads + op inputs (ref backward) | fwd pass ref | fwd pass greedy | h | cone plan peak "
             "| gradients at its peak | forward at its peak | TDI % | valid | s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    rows = []
    for size in [int(x) for x in args.sizes.split(",")]:
        r = floor_row(FAMILIES["random_layered"](size, 0), hs)
        rows.append(r)
        for c in r["cone"]:
            lines.append(f"| {r['graph']} | {r['n']} | {r['grads']:.3f} | {r['fwd_ref']:.3f} | {r['fwd_greedy']:.3f} "
                         f"| {c['h']} | {c.get('peak', float('nan')):.3f} | {c.get('grads_at_peak', float('nan')):.3f} "
                         f"| {c.get('fwd_at_peak', float('nan')):.3f} | {c.get('tdi', float('nan')):.0f} "
                         f"| {c['valid']} | {c.get('s', 0):.1f} |")
            print(lines[-1], flush=True)
    write_results(args.out, markdown="\n".join(lines) + "\n", json_doc={"rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
