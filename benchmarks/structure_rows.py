"""The issue-20 rows that structure detection and the segment chain address:
``anytime_solve(problem, 60, workers=1)`` at 50 % of keep-all on the
families' graphs (Checkmate-convention decoder at ~2.6k and 32k nodes, the
same with lognormal(0.05) cost noise, random layered training graphs at 10k
and 40k), one JSON line per row (status, gap to the bound over every plan,
TDI, wall, the components that found the plan and the bound).

Run it once per code version to compare (``--tag before`` on the old code
with this file and ``hybrid_remat/families.py`` copied in)::

    PYTHONPATH=. nice -n 10 python3 benchmarks/structure_rows.py --tag after

Timings taken on a loaded machine say so in the table
(``benchmarks/results/structure_rows.md``).
"""

from __future__ import annotations

import argparse
import json
import time

ROWS = [("decoder_checkmate", 2600), ("decoder_checkmate", 32000), ("decoder_checkmate_noise", 32000),
        ("random_layered", 10000), ("random_layered", 40000)]


def run_row(family: str, size: int, seconds: float, tag: str) -> dict:
    from hybrid_remat.anytime import anytime_solve
    from hybrid_remat.families import FAMILIES
    from hybrid_remat.problem import Problem
    from hybrid_remat.simulate import simulate

    g = FAMILIES[family](size, 0)
    p = Problem.single(g, "50%")
    t = time.time()
    r = anytime_solve(p, seconds, workers=1)
    wall = time.time() - t
    sim = simulate(p, r.plan)
    return {"tag": tag, "family": family, "nodes": g.n, "status": r.status, "gap_pct": round(100 * r.gap, 3),
            "tdi_pct": round(sim.tdi_pct, 3), "valid": bool(sim.valid), "plan_from": r.solver,
            "bound_from": r.bound_source, "wall_s": round(wall, 1),
            "first_plan_s": round(r.history[0][0], 2) if r.history else None}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tag", default="after")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--rows", default="", help="family:size,... (default: the issue's rows)")
    args = ap.parse_args(argv)
    rows = [(r.split(":")[0], int(r.split(":")[1])) for r in args.rows.split(",") if r] or ROWS
    for family, size in rows:
        print(json.dumps(run_row(family, size, args.seconds, args.tag)), flush=True)


if __name__ == "__main__":
    main()
