"""Named heuristics standalone at tight budgets
(``python -m benchmarks.tight_standalone``): ``run(p, limits=Limits.seconds(L))``
on random layered training graphs and the Moccasin RLG graphs (read from the
shared directory, never copied), TDI from the simulator or ``none``.
"""

from __future__ import annotations

import argparse
import os
import time

from benchmarks._common import command, moccasin_graph, write_results

__all__ = ["main"]


def main(argv=None) -> int:
    from hybrid_remat import plugins
    from hybrid_remat.anytime import warmup
    from hybrid_remat.families import FAMILIES
    from hybrid_remat.limits import Limits
    from hybrid_remat.loaders import load_graph
    from hybrid_remat.problem import Problem
    from hybrid_remat.simulate import simulate

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--heuristics", default="cone_recompute,dtr_next_use")
    ap.add_argument("--sizes", default="2000,10000")
    ap.add_argument("--budgets", default="40,35,30")
    ap.add_argument("--rlg", default="rlg_n100,rlg_n250,rlg_n500,rlg_n1000")
    ap.add_argument("--rlg-budgets", default="70,60,50")
    ap.add_argument("--limit", type=float, default=10.0)
    ap.add_argument("--out", default="tight_standalone")
    args = ap.parse_args(argv)
    warmup()
    reg = plugins.heuristics()
    names = [x for x in args.heuristics.split(",") if x]
    cases = [(FAMILIES["random_layered"](int(s), 0), args.budgets) for s in args.sizes.split(",") if s]
    cases += [(load_graph(moccasin_graph(nm)), args.rlg_budgets) for nm in args.rlg.split(",") if nm]
    lines = ["# Heuristics standalone at tight budgets", "",
             f"Command: `{command(__file__, argv)}`; 2 cores shared with other jobs, the 1-min load in each row. "
             "TDI % from the simulator; `none`: no plan.", "",
             "| graph | n | budget | heuristic | TDI % | recomputations | s | load |", "|---|---|---|---|---|---|---|---|"]
    for g, budgets in cases:
        for fr in budgets.split(","):
            try:
                p = Problem.single(g, f"{fr}%")
            except Exception as e:  # below the node bound
                lines.append(f"| {g.name} | {g.n} | {fr}% | - | {type(e).__name__} | - | - | - |")
                continue
            for nm in names:
                t0 = time.perf_counter()
                plan = reg[nm].run(p, limits=Limits.seconds(args.limit))
                dt = time.perf_counter() - t0
                r = simulate(p, plan) if plan is not None else None
                cell = "none" if r is None else (f"{r.tdi_pct:.1f}" if r.valid else "INVALID")
                rec = "-" if r is None else str(r.n_recompute)
                lines.append(f"| {g.name} | {g.n} | {fr}% | {nm} | {cell} | {rec} | {dt:.1f} | {os.getloadavg()[0]:.1f} |")
                print(lines[-1], flush=True)
                write_results(args.out, markdown="\n".join(lines) + "\n")
    write_results(args.out, markdown="\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
