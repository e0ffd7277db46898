"""The minimum-cut window test on Moccasin's RLG4 at 90 %: the first bound
over every plan above the base cost there (issue 24).

For the window of 20 consecutive nodes starting at ``--start`` (740: the one
the search found) and each cost level ``c`` of ``--levels``, the projected
order search (:func:`hybrid_remat.bounds.projected_order.projected_search`)
with ``Z = sinks + {nodes costing less than c}``, once with the plain move
test and once with the minimum-cut test (``cuts=True``,
:mod:`hybrid_remat.bounds.window_cuts`).  ``none`` (exhausted) proves that
every plan recomputes some node costing ``c`` or more: every plan costs at
least the base cost plus the least such cost.

Usage::

    python -m benchmarks.rlg_window_cuts          # writes benchmarks/results/rlg_window_cuts.md
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from benchmarks._common import moccasin_graph, write_results

__all__ = ["main"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graph", default="rlg_n1000")
    ap.add_argument("--budget", default="90%")
    ap.add_argument("--start", type=int, default=740)
    ap.add_argument("--size", type=int, default=20)
    ap.add_argument("--levels", default="1,13,16,17")
    ap.add_argument("--out", default="rlg_window_cuts")
    a = ap.parse_args(argv)
    from hybrid_remat.bounds.projected_order import Tables, projected_search
    from hybrid_remat.limits import now
    from hybrid_remat.loaders import load_graph
    from hybrid_remat.problem import Problem

    p = Problem.single(load_graph(moccasin_graph(a.graph)), a.budget)
    cost = np.asarray(p.cost_matrix[0], dtype=np.float64)
    tb = Tables(p.graph)
    win = range(a.start, a.start + a.size)
    rows = []
    for c in (float(x) for x in a.levels.split(",")):
        free = cost < c
        row = {"level": c}
        for cuts in (False, True):
            t0 = now()
            r = projected_search(p, win, free, tables=tb, cuts=cuts)
            row["cuts" if cuts else "plain"] = (r.status, round(now() - t0, 1))
        rest = ~(free | tb.sink)
        if row["cuts"][0] == "none" and rest.any():
            lb = p.base_cost + float(cost[rest].min())
            row["bound_tdi_pct"] = (lb - p.base_cost) / p.base_cost * 100
        rows.append(row)
    load = os.getloadavg()
    lines = [f"# Window {a.start}-{a.start + a.size - 1} of {a.graph} at {a.budget}: plain vs minimum-cut move test "
             "(`python -m benchmarks.rlg_window_cuts`)", "",
             f"`none` = exhausted: every plan recomputes a node costing at least the level. Load average "
             f"{load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f} at the end.", "",
             "| cost level | plain test (status, s) | minimum-cut test (status, s) | bound over every plan, TDI % |",
             "|---|---|---|---|"]
    for r in rows:
        b = f"{r['bound_tdi_pct']:.4f}" if "bound_tdi_pct" in r else "-"
        lines.append(f"| {r['level']:g} | {r['plain'][0]} ({r['plain'][1]}) | {r['cuts'][0]} ({r['cuts'][1]}) | {b} |")
    write_results(a.out, markdown="\n".join(lines) + "\n", json_doc={"rows": rows, "load": load})
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
