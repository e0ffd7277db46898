"""Why the DTR heuristics give no plan on the Moccasin RLG graphs at tight
budgets: the executor's status per score with the shipped step limit and with
a limit of 10^7 steps (``python -m benchmarks.tight_diagnose``).

The graphs are read from the shared Moccasin directory (never copied here).
"""

from __future__ import annotations

import argparse
import time

from benchmarks._common import moccasin_graph

__all__ = ["main"]

STATUS = {0: "ok", 1: "no_victim (pinned)", 2: "step_limit (thrashing)", 3: "over_budget", 4: "work_spent"}
SCORES = ("belady", "next_use_full", "dtr_eq", "dtr", "size")


def main(argv=None) -> int:
    from hybrid_remat.budgets import keep_all_peak, min_feasible_budget
    from hybrid_remat.heuristics.common import SAMPLE, SCAN_ALL, GraphArrays, WorkMeter
    from hybrid_remat.heuristics.dtr import STEP_FACTOR
    from hybrid_remat.loaders import load_graph
    from hybrid_remat.problem import Problem

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", default="rlg_n100,rlg_n250,rlg_n500,rlg_n1000")
    ap.add_argument("--budgets", default="70,60")
    args = ap.parse_args(argv)
    print("| graph | n | budget | min feasible / keep-all | score | shipped limit: status (steps) "
          "| 10^7 steps: status (steps) | s |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.graphs.split(","):
        g = load_graph(moccasin_graph(name))
        for frac in args.budgets.split(","):
            p = Problem.single(g, f"{frac}%")
            a = GraphArrays.from_problem(p)
            ratio = f"{min_feasible_budget(g) / keep_all_peak(g):.2f}"
            for sc in SCORES:
                t0 = time.perf_counter()
                cells = []
                for steps in (int(STEP_FACTOR * g.n) + 1000, 10**7):
                    r = WorkMeter(None).execute(a, score=sc, seed=0, scan_all=SCAN_ALL, sample=SAMPLE,
                                                max_steps=steps)
                    cells.append(f"{STATUS.get(int(r.status), r.status)} ({len(r.seq)})")
                print(f"| {name} | {g.n} | {frac}% | {ratio} | {sc} | {cells[0]} | {cells[1]} "
                      f"| {time.perf_counter() - t0:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
