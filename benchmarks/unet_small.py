"""Which side is loose on the U-Net family: the plan or the bound?

On small instances of :func:`hybrid_remat.families.unet` (1-4 levels, the
resolution chosen so that the lowest level is 8x8 for fewer than 4 levels)
at one budget, ``anytime_solve`` gives the plan (checked by the simulator
here) and each strong bound over every plan that applies at these sizes
runs on its own with ``--bound-limit`` seconds: ``first_moment_bound``,
``frontier_cuts_bound``, ``placed_cuts_bound``, ``recompute_bound``.
Gap = (plan - bound) / plan against the best of them and the portfolio's.

    python -m benchmarks.unet_small --rows 100:2,200:2,400:2 --limit 30 --bound-limit 40
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time

from benchmarks._common import command, write_results

BOUNDS = ("first_moment_bound", "frontier_cuts_bound", "placed_cuts_bound", "recompute_bound")


def small_unet(size: int, levels: int):
    """The family's generator at ``levels`` levels (lowest level 8x8 below 4 levels)."""
    from hybrid_remat.families import unet

    return unet(size, levels=levels, res=8 * 2 ** (levels - 1) if levels < 4 else 64)


def run_row(size: int, levels: int, budget: int, limit: float, bound_limit: float) -> dict:
    from hybrid_remat.anytime import anytime_solve
    from hybrid_remat.limits import Limits
    from hybrid_remat.plugins import bounds
    from hybrid_remat.problem import Problem
    from hybrid_remat.simulate import simulate

    g = small_unet(size, levels)
    p = Problem.single(g, f"{budget}%")
    base = p.base_cost
    t0 = time.perf_counter()
    r = anytime_solve(p, limit, workers=1)
    wall = time.perf_counter() - t0
    sim = simulate(p, r.plan) if r.plan is not None else None
    row = {"graph": g.name, "nodes": g.n, "budget": budget, "limit": limit, "wall_s": wall,
           "valid": bool(sim is not None and sim.valid), "plan_tdi": sim.tdi_pct if sim is not None else None,
           "best_from": r.solver, "portfolio_bound_tdi": (r.lower_bound - base) / base * 100,
           "portfolio_bound_from": r.bound_source, "bounds": {}}
    by_name = bounds()
    for name in BOUNDS:
        b = by_name.get(name)
        if b is None:
            continue
        ok, why = b.applicable(p)
        if not ok:
            row["bounds"][name] = {"skipped": why}
            continue
        t0 = time.perf_counter()
        br = b.bound(p, limits=Limits.seconds(bound_limit))
        row["bounds"][name] = {"tdi": (br.value - base) / base * 100, "scope": br.scope,
                               "seconds": time.perf_counter() - t0}
    best = max([row["portfolio_bound_tdi"]] + [v["tdi"] for v in row["bounds"].values()
                                               if "tdi" in v and v["scope"] == "all plans"])
    row["best_bound_tdi"] = best
    if row["plan_tdi"] is not None:
        row["gap_pct"] = (row["plan_tdi"] - best) / (100 + row["plan_tdi"]) * 100
        row["portfolio_gap_pct"] = (row["plan_tdi"] - row["portfolio_bound_tdi"]) / (100 + row["plan_tdi"]) * 100
    row["load"] = os.getloadavg()[0]
    return row


def markdown(rows, cmd: str) -> str:
    lines = ["# U-Net in miniature: plan against the strong bounds (`benchmarks/unet_small.py`)", "",
             f"`{cmd}`; 2 cores shared with other jobs (load: the 1-min average at the row's end). TDI % of the "
             "plan (simulator-checked) and of each bound over every plan (each run alone with the bound limit); "
             "gap % = (plan - best bound) / plan.", "",
             "| graph | nodes | budget | plan TDI % | best from | portfolio bound TDI % (from) | "
             + " | ".join(f"{b} TDI %" for b in BOUNDS) + " | gap % to best | gap % to portfolio's | load |",
             "|---|---|---|---|---|---|" + "---|" * len(BOUNDS) + "---|---|---|"]
    for r in rows:
        cells = []
        for b in BOUNDS:
            v = r["bounds"].get(b, {})
            cells.append(f"{v['tdi']:.3f} ({v['seconds']:.0f} s)" if "tdi" in v else "n/a")
        lines.append(f"| {r['graph']} | {r['nodes']} | {r['budget']}% | {r['plan_tdi']:.3f} | {r['best_from']} | "
                     f"{r['portfolio_bound_tdi']:.3f} ({r['portfolio_bound_from']}) | " + " | ".join(cells)
                     + f" | {r.get('gap_pct', math.nan):.3f} | {r.get('portfolio_gap_pct', math.nan):.3f} | "
                       f"{r['load']:.1f} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default="100:2,200:2,400:2", help="size:levels, comma-separated")
    ap.add_argument("--budget", type=int, default=50)
    ap.add_argument("--limit", type=float, default=30.0)
    ap.add_argument("--bound-limit", type=float, default=40.0)
    ap.add_argument("--out", default="unet_small")
    args = ap.parse_args(argv)
    rows = []
    for spec in args.rows.split(","):
        size, levels = (int(x) for x in spec.split(":"))
        rows.append(run_row(size, levels, args.budget, args.limit, args.bound_limit))
        print(json.dumps(rows[-1], default=str), flush=True)
    write_results(args.out, markdown=markdown(rows, command(__file__, argv)), json_doc=rows)


if __name__ == "__main__":
    main()
