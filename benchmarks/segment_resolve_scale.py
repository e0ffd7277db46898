"""segment_resolve at scale: from the same start plan, ``lns`` alone for
``--limit`` seconds, and ``lns`` for half of it then ``segment_resolve``
(:mod:`hybrid_remat.heuristics.segment_resolve`) for the other half.

The start is the first plan ``anytime_solve`` finds (heuristics only,
``--first`` seconds).  Records TDI % (checked by the simulator), wall and
CPU seconds (the machine is shared: CPU seconds say how much each run
really got), and segment_resolve's counters.  Writes
``benchmarks/results/segment_resolve_scale.{md,json}``.

Usage::

    python3 -m benchmarks.segment_resolve_scale --families unet,random_layered,decoder_varied --size 32000
"""

from __future__ import annotations

import argparse
import json
import os
import time

from benchmarks._common import RESULTS, command
from benchmarks.lns_scale import first_plan


def _timed(fn):
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t0, time.process_time() - c0


def run(family: str, size: int, budget: str, limit: float, first_s: float) -> dict:
    from hybrid_remat.families import family_graph
    from hybrid_remat.heuristics.local_search import LNS
    from hybrid_remat.heuristics.segment_resolve import SegmentResolve
    from hybrid_remat.limits import Limits
    from hybrid_remat.problem import Problem
    from hybrid_remat.simulate import simulate

    p = Problem.single(family_graph(family, size, 0), budget)
    start, src = first_plan(p, first_s)
    tdi = lambda plan: simulate(p, plan).tdi_pct  # noqa: E731
    if start is None:
        return {"family": family, "nodes": p.graph.n, "budget": budget, "limit": limit,
                "start_from": f"no plan in {first_s:g} s", "load": os.getloadavg()[0]}
    assert simulate(p, start).valid
    lns_out, lns_w, lns_c = _timed(lambda: LNS().improve(p, start, limits=Limits.seconds(limit)))
    half, h_w, h_c = _timed(lambda: LNS().improve(p, start, limits=Limits.seconds(limit / 2)))
    res, r_w, r_c = _timed(lambda: SegmentResolve().improve(p, half, limits=Limits.seconds(limit / 2)))
    for plan in (lns_out, half, res):
        assert simulate(p, plan).valid
    meta = {k: v for k, v in res.meta.items() if k.startswith("resolve_")} if res is not half else {}
    return {"family": family, "nodes": p.graph.n, "budget": budget, "limit": limit, "start_from": src,
            "start_tdi": tdi(start), "lns_tdi": tdi(lns_out), "lns_wall": lns_w, "lns_cpu": lns_c,
            "half_tdi": tdi(half), "resolve_tdi": tdi(res), "split_wall": h_w + r_w, "split_cpu": h_c + r_c,
            "resolve_cpu": r_c, **meta, "load": os.getloadavg()[0]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--families", default="unet,random_layered,decoder_varied")
    ap.add_argument("--size", type=int, default=32000)
    ap.add_argument("--budget", default="50%")
    ap.add_argument("--limit", type=float, default=10.0)
    ap.add_argument("--first", type=float, default=5.0)
    ap.add_argument("--out", default=str(RESULTS / "segment_resolve_scale.md"))
    args = ap.parse_args(argv)
    load0 = os.getloadavg()
    rows = []
    for fam in args.families.split(","):
        rows.append(run(fam, args.size, args.budget, args.limit, args.first))
        print(json.dumps(rows[-1]), flush=True)
    load1 = os.getloadavg()
    head = (f"# segment_resolve at scale (`{command(__file__, argv)}`)\n\nSame start (first heuristic plan); lns for the limit, "
            "or lns for half then segment_resolve for half. TDI % by the simulator; CPU s = what the process got "
            f"on a shared 2-core machine. Load (1/5/15 min) {load0[0]:.1f}/{load0[1]:.1f}/{load0[2]:.1f} at the start, "
            f"{load1[0]:.1f}/{load1[1]:.1f}/{load1[2]:.1f} at the end.\n\n")
    cols = ["family", "nodes", "budget", "limit", "start_from", "start_tdi", "lns_tdi", "lns_cpu", "half_tdi",
            "resolve_tdi", "split_cpu", "resolve_cpu", "resolve_windows", "resolve_exact", "resolve_improved",
            "resolve_exact_improved", "load"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(f"{r.get(c):.4f}" if isinstance(r.get(c), float) else str(r.get(c, ""))
                                       for c in cols) + " |")
    with open(args.out, "w") as f:
        f.write(head + "\n".join(lines) + "\n")
    with open(args.out[:-3] + ".json", "w") as f:
        json.dump(rows, f, indent=1)
    print("wrote", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
