"""Does the staged (Checkmate) model improve a first plan on the Moccasin
RLG graphs at tight budgets when it is warm-started from it?
(``python -m benchmarks.warm_start_rlg``; a measurement, no library change).

For each graph and budget: every registered single-device heuristic runs
standalone for ``--heuristic-limit`` seconds; the best simulated plan is
given to the ``checkmate`` formulation as its incumbent for ``--limit``
seconds; both TDIs are the simulator's.  The graphs are read from the
shared Moccasin directory (never copied here).
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
    from hybrid_remat.limits import Limits
    from hybrid_remat.loaders import load_graph
    from hybrid_remat.problem import Problem
    from hybrid_remat.simulate import simulate

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", default="rlg_n100,rlg_n250,rlg_n500,rlg_n1000")
    ap.add_argument("--budgets", default="70")
    ap.add_argument("--heuristic-limit", type=float, default=10.0)
    ap.add_argument("--limit", type=float, default=30.0)
    ap.add_argument("--out", default="warm_start_rlg")
    args = ap.parse_args(argv)
    warmup()
    lines = ["# Warm-starting the staged model on RLG at tight budgets", "",
             f"Command: `{command(__file__, argv)}`; 2 cores shared with other jobs, load (1 min) in each row.", "",
             "| graph | budget | best standalone heuristic (TDI %, s) | heuristics with a plan | checkmate from it: "
             "status, TDI % | s | load |", "|---|---|---|---|---|---|---|"]
    hs = {nm: h for nm, h in plugins.heuristics().items() if "single_device" in h.capabilities}
    form = plugins.formulations()["checkmate"]
    for name in args.graphs.split(","):
        g = load_graph(moccasin_graph(name))
        for fr in args.budgets.split(","):
            p = Problem.single(g, f"{fr}%")
            best, found = None, []
            for hn, h in hs.items():
                t0 = time.perf_counter()
                plan = h.run(p, limits=Limits.seconds(args.heuristic_limit))
                dt = time.perf_counter() - t0
                if plan is not None and simulate(p, plan).valid:
                    tdi = simulate(p, plan).tdi_pct
                    found.append(f"{hn} {tdi:.2f}")
                    if best is None or tdi < best[1]:
                        best = (hn, tdi, dt, plan)
            if best is None:
                lines.append(f"| {name} | {fr}% | none | - | - | - | {os.getloadavg()[0]:.1f} |")
                print(lines[-1], flush=True)
                continue
            t0 = time.perf_counter()
            res = form.solve(p, incumbent=best[3], limits=Limits.seconds(args.limit))
            dt = time.perf_counter() - t0
            cell = res.status
            if res.plan is not None:
                sim = simulate(p, res.plan)
                cell += f", {sim.tdi_pct:.2f}" + ("" if sim.valid else " (INVALID)")
            lines.append(f"| {name} | {fr}% | {best[0]} ({best[1]:.2f}, {best[2]:.1f} s) | {'; '.join(found)} "
                         f"| {cell} | {dt:.1f} | {os.getloadavg()[0]:.1f} |")
            print(lines[-1], flush=True)
            write_results(args.out, markdown="\n".join(lines) + "\n")
    write_results(args.out, markdown="\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
