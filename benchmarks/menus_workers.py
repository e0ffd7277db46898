"""The segment chain's menus: serial vs the portfolio's forked workers (and
Ray tasks), on graphs of other families (hybrid_remat.families).

For each graph: the chain's menu tasks (:func:`hybrid_remat.segments.menus.menu_tasks`),
then :func:`~hybrid_remat.segments.menus.compute_menus` on each executor

* with node limits and no deadline (``--nodes``; every exact solve
  finishes): wall time and whether the menus are exactly the serial ones;
* with a deadline (``--limit`` seconds for the menus, 60 % of it for the
  exact solves, as in the solver): how many menus are exact in that time,
  how many fell back to the greedy menu, and the wall (limit + grace).

The load average (1 min) is read before each row.  Ray's runtime is started
before its timer (its start-up is stated apart).  Writes
``benchmarks/results/menus_workers_s33.{md,json}``.

Usage::

    python -m benchmarks.menus_workers                      # unet and random layered at 10k, 2 workers
    python -m benchmarks.menus_workers --size 2000 --no-ray
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from benchmarks._common import command, write_results
from hybrid_remat.families import random_layered_training, unet
from hybrid_remat.limits import Limits
from hybrid_remat.problem import Problem
from hybrid_remat.segments.chain import segment_chain
from hybrid_remat.segments.menu_exec import PoolMenus, RayMenus
from hybrid_remat.segments.menus import compute_menus, menu_tasks

FAMILIES = {"unet": unet, "random_layered": random_layered_training}


def _same(a: dict, b: dict) -> bool:
    return list(a) == list(b) and all(
        m.held == b[k].held and m.extra == b[k].extra and m.exact == b[k].exact
        and all(np.array_equal(x, y) for x, y in zip(m.options, b[k].options)) for k, m in a.items())


def _run(tasks, ex, limits) -> tuple[dict, float, float]:
    load = os.getloadavg()[0]
    t = time.perf_counter()
    menus = compute_menus(tasks, limits=limits() if callable(limits) else limits, executor=ex)
    return menus, time.perf_counter() - t, load


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=10_000)
    ap.add_argument("--families", default="unet,random_layered")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--nodes", type=int, default=200, help="node limit of each exact solve (the no-deadline rows)")
    ap.add_argument("--limit", type=float, default=10.0, help="seconds for the menus (the deadline rows)")
    ap.add_argument("--no-ray", action="store_true")
    args = ap.parse_args(argv)
    rows = []
    ray_start = None
    ray_ex = None
    ray_warm = None
    if not args.no_ray:
        t = time.perf_counter()
        from hybrid_remat._ray import start_ray

        start_ray(True, args.workers)
        ray_start = time.perf_counter() - t
        ray_ex = RayMenus(True)
    try:
        for fam in args.families.split(","):
            g = FAMILIES[fam](args.size, 0)
            p = Problem.single(g, "50%")
            ch = segment_chain(g)
            tasks = menu_tasks(p, ch)
            exact_tasks = sum(t.exact for t in tasks)
            execs = [("serial", None), (f"pool {args.workers}", PoolMenus(args.workers))]
            if ray_ex is not None:
                execs.append((f"ray {args.workers}", ray_ex))
            if ray_ex is not None and ray_warm is None:     # Ray's workers import hybrid_remat (and SCIP) once
                t = time.perf_counter()
                compute_menus(tasks[:2 * args.workers], limits=Limits(nodes=args.nodes), executor=ray_ex)
                ray_warm = time.perf_counter() - t
            base = None
            for mode in ("nodes", "deadline"):
                for name, ex in execs:
                    lim = Limits(nodes=args.nodes) if mode == "nodes" else (lambda: Limits.seconds(args.limit, nodes=args.nodes))
                    menus, wall, load = _run(tasks, ex, lim)
                    if mode == "nodes" and name == "serial":
                        base = menus
                    fell = sum("fallback" in m.stats for m in menus.values())
                    rows.append({"family": fam, "n": g.n, "stages": ch.n_stages, "tasks": len(tasks),
                                 "exact_tasks": exact_tasks, "mode": mode,
                                 "limit_s": None if mode == "nodes" else args.limit, "executor": name,
                                 "wall_s": round(wall, 2), "exact_menus": sum(m.exact for m in menus.values()),
                                 "fallback": fell, "same_as_serial": _same(base, menus) if mode == "nodes" else None,
                                 "load": round(load, 2)})
                    print(rows[-1], flush=True)
    finally:
        if ray_ex is not None:
            import ray

            ray.shutdown()
    lines = [f"# Segment menus: serial vs {args.workers} workers", "",
             f"`{command(__file__, argv)}`; load: the 1-min load average before each row (2 shared cores, other "
             "engineers' runs beside: speed-ups are indicative only).  Ray's local runtime was started before the "
             f"timers ({ray_start:.1f} s) and its workers warmed up on a few menus ({ray_warm or 0:.1f} s)." if ray_start is not None else
             f"`{command(__file__, argv)}`; load: the 1-min load average before each row (2 shared cores: speed-ups "
             "are indicative only).", "",
             f"`nodes`: node limit {args.nodes} per exact solve, no deadline (every exact solve finishes; "
             "`same` = the menus equal the serial ones exactly).  `deadline`: the menus get "
             f"{args.limit:g} s (60 % for the exact solves, as the solver gives them), exact menus in that time, "
             "the rest greedy (`fallback`: not back by the deadline).", "",
             "| family | nodes | tasks (exact-sized) | mode | executor | wall s | exact menus | fallback | same | load |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        same = "" if r["same_as_serial"] is None else ("yes" if r["same_as_serial"] else "NO")
        lines.append(f"| {r['family']} | {r['n']} | {r['tasks']} ({r['exact_tasks']}) | {r['mode']} | {r['executor']} | "
                     f"{r['wall_s']:.2f} | {r['exact_menus']} | {r['fallback']} | {same} | {r['load']:.2f} |")
    write_results("menus_workers_s33", markdown="\n".join(lines) + "\n",
                  json_doc={"command": command(__file__, argv), "ray_start_s": ray_start, "ray_warm_s": ray_warm, "rows": rows})


if __name__ == "__main__":
    main()
