"""Moccasin's class on its random layered graphs: the fixed-order class
bound next to the best plan in any order.

For RLG1-RLG4 (read from ``../shared/benchmarks/moccasin``) at 90 and 80 %:
the search for an order without recomputation
(:func:`hybrid_remat.bounds.order_search.search_orders`, ``--limit`` s), the
fixed-order class bound
(:func:`hybrid_remat.exact.checkmate.order_bound.fixed_order_lower_bound`,
``--limit`` s; it bounds every plan whose first computations follow the
graph's order, Moccasin's and Checkmate's class) and Moccasin's published
and 2-core figures.  A plan of TDI 0 is optimal over every plan; a class
bound above it says that the fixed order cannot reach the optimum.

Usage (from the repository root)::

    python -m benchmarks.fixed_order_rlg --limit 20
"""

from __future__ import annotations

import argparse

from benchmarks._common import command, moccasin_graph, moccasin_reference, write_results

IDS = {"RLG1": "rlg_n100", "RLG2": "rlg_n250", "RLG3": "rlg_n500", "RLG4": "rlg_n1000"}


def main(argv=None) -> int:
    from hybrid_remat.exact.checkmate.order_bound import fixed_order_lower_bound
    from hybrid_remat.heuristics.order_search import no_recompute_plan
    from hybrid_remat.limits import Limits
    from hybrid_remat.loaders import load_graph
    from hybrid_remat.problem import Problem
    from hybrid_remat.simulate import simulate

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=float, default=20.0, help="seconds for each of the two components")
    ap.add_argument("--note", default="", help="a line for the table (e.g. the machine's load)")
    args = ap.parse_args(argv)
    rows = []
    for iid, fname in IDS.items():
        if not moccasin_graph(fname).exists():
            raise SystemExit(f"fixed_order_rlg: {moccasin_graph(fname)} is missing")
        g = load_graph(moccasin_graph(fname))
        for frac in (0.9, 0.8):
            p = Problem.single(g, f"{round(frac * 100)}%")
            base = float(p.base_cost)
            plan = no_recompute_plan(p, limits=Limits.seconds(args.limit))
            zero = plan is not None and simulate(p, plan).valid
            fb = fixed_order_lower_bound(p, limits=Limits.seconds(args.limit))
            ref = moccasin_reference(iid, frac)
            rows.append({"id": iid, "n": g.n, "budget": frac, "no_recompute_plan": zero,
                         "class_bound_tdi": fb.extra / base * 100, "class_method": fb.method,
                         "class_cuts": len(fb.cuts), "class_s": fb.stats.get("seconds"),
                         "moccasin_published": ref.published if ref else None,
                         "moccasin_2core": ref.rerun_2core if ref else None})
            print(rows[-1], flush=True)
    cell = lambda x: "-" if x is None else f"{x:.2f}" if isinstance(x, float) else str(x)  # noqa: E731
    lines = ["# Moccasin's class (the graph's order) against every order on RLG1-RLG4", "",
             f"Command: `{command(__file__, argv)}` ({args.limit:g} s for each component). {args.note}", "",
             "`TDI 0 plan`: an order whose peak fits without recomputation (simulator-checked): optimal over "
             "every plan.  `fixed-order bound`: no plan whose first computations follow the graph's order "
             "(Moccasin's class, Checkmate's staged plans) is below it (TDI %, method, cuts, seconds).", "",
             "| id | n | B | TDI 0 plan | fixed-order bound TDI % | Moccasin published | Moccasin 2-core |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['id']} | {r['n']} | {r['budget']} | {'yes' if r['no_recompute_plan'] else 'not found'} "
                     f"| {r['class_bound_tdi']:.3f} ({r['class_method']}, {r['class_cuts']} cuts, "
                     f"{r['class_s'] or 0:.0f} s) | {cell(r['moccasin_published'])} | {cell(r['moccasin_2core'])} |")
    write_results("fixed_order_rlg", json_doc={"command": command(__file__, argv), "rows": rows},
                  markdown="\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
