"""The bounds battery: every registered bound and the portfolio's claims
against the all-plans brute force on tiny instances whose costs and bytes
are rescaled over 24 orders of magnitude (costs 1e-12..1e12 s, bytes up to
5e17).

A violation is any of: a bound over every plan above the brute-force
optimum (beyond a relative 1e-9); a bound that says it is exact
(``stats["exact"]``, the state-search bound) and differs from the optimum; a cut bound of ``+inf`` where a plan
exists; ``anytime_solve`` reporting ``infeasible`` where a plan exists, or
``optimal`` with a plan worse than the optimum (beyond the relative 2e-6 of
its definition), or a result that is not the best plan of its own report.
The test (``tests/test_bounds_battery.py``) runs a few hundred instances; this
script runs thousands.

Usage (from the repository root)::

    python -m benchmarks.bounds_battery --count 5000 --solve-every 10
    python -m benchmarks.bounds_battery --count 300 --seed 3
    python -m benchmarks.bounds_battery --compare 3,4 --out bounds_mini_mlp   # bounds vs the optimum

Examples
--------
>>> probs = rescaled_instances(3, seed=0)
>>> len(probs), all(p.graph.n <= 6 for p in probs)
(3, True)
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from hybrid_remat.budgets import budget_lower_bound, keep_all_peak
from hybrid_remat.graph import Graph
from hybrid_remat.oracle import brute_force
from hybrid_remat.problem import Problem

__all__ = ["rescaled_instances", "violations", "run", "mini_mlp", "compare"]

#: a bound over every plan may exceed the optimum by this relative round-off
BOUND_RTOL = 1e-9
#: a plan within this relative distance of the optimum counts as optimal (the ledger's definition)
OPTIMAL_RTOL = 2e-6


def _graph(rng, n: int, huge_bytes: bool, cost_scale: float) -> Graph:
    if rng.random() < 0.5:  # a random DAG
        edges = [(u, v) for v in range(1, n) for u in range(v) if rng.random() < 0.4]
        for v in range(1, n):
            if not any(e[1] == v for e in edges):
                edges.append((int(rng.integers(0, v)), v))
    else:  # forward chain and its mirrored backward part (a training graph in miniature)
        k = n // 2
        edges = [(v - 1, v) for v in range(1, k)] + [(k - 1, k)] if k else []
        for i in range(k):  # backward node of forward node i is n-1-i, reading the forward value
            b = n - 1 - i
            if b > k:
                edges.append((b - 1, b))
            if b != i and (i, b) not in edges and i < b:
                edges.append((i, b))
        for v in range(1, n):
            if not any(e[1] == v for e in edges):
                edges.append((v - 1, v))
    if huge_bytes:  # every byte count distinct and above 2**53 in sum: float sums lose bytes
        nbytes = rng.integers(1, 5 * 10**17, n, dtype=np.int64)
    else:
        nbytes = rng.integers(1, 6, n)
    cost = rng.integers(1, 10, n).astype(float) * cost_scale * (1.0 + 1e-3 * rng.random(n))
    return Graph.from_arrays(nbytes, sorted(set(edges)), {"cost": cost})


def rescaled_instances(count: int, seed: int = 0, *, max_nodes: int = 6) -> list:
    """``count`` single-device problems of 3..``max_nodes`` nodes: costs
    scaled by ``10**k`` for ``k`` uniform in [-12, 12], half of them with
    bytes up to 5e17, budgets at the node bound, the keep-all peak or
    between."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < count:
        n = int(rng.integers(3, max_nodes + 1))
        g = _graph(rng, n, bool(rng.random() < 0.5), float(10.0 ** rng.uniform(-12, 12)))
        lo, hi = budget_lower_bound(g), keep_all_peak(g)
        pick = rng.random()
        budget = lo if pick < 0.25 else hi if pick < 0.4 else int(rng.integers(lo, hi + 1))
        out.append(Problem.single(g, max(lo, budget)))
    return out


def violations(problem, opt: float, *, bounds=None, solve: bool = False, node_limit: int = 200) -> list[str]:
    """What is wrong on ``problem`` with brute-force optimum ``opt`` (empty: nothing)."""
    from hybrid_remat import plugins
    from hybrid_remat.limits import Limits

    bad = []
    srcs = plugins.bounds() if bounds is None else bounds
    for name, src in srcs.items():
        ok, _ = src.applicable(problem) if hasattr(src, "applicable") else (True, "")
        if not ok:
            continue
        r = src.bound(problem, limits=Limits(nodes=node_limit))
        if r.scope != "all plans":
            continue
        if r.value > opt + BOUND_RTOL * abs(opt):
            bad.append(f"{name}: bound {r.value!r} above the optimum {opt!r}")
        if r.stats.get("exact") and not (r.value == opt or abs(r.value - opt) <= BOUND_RTOL * abs(opt)):
            bad.append(f"{name}: claims the optimum {r.value!r}, the brute force finds {opt!r}")
        if name == "cut_bound" and math.isfinite(opt) and not math.isfinite(r.value):
            bad.append(f"cut_bound: +inf where a plan of {opt!r} exists")
    if solve:
        from hybrid_remat.anytime import anytime_solve

        res = anytime_solve(problem, 30.0, workers=1, node_limit=node_limit, work_limit=10**6)
        if res.status == "infeasible" and math.isfinite(opt):
            bad.append(f"anytime: infeasible where a plan of {opt!r} exists")
        if res.status == "optimal" and res.objective > opt + OPTIMAL_RTOL * abs(opt):
            bad.append(f"anytime: optimal at {res.objective!r} above the optimum {opt!r}")
        if math.isfinite(res.lower_bound) and res.lower_bound > opt + BOUND_RTOL * abs(opt):
            bad.append(f"anytime: lower bound {res.lower_bound!r} above the optimum {opt!r}")
        plans = [r.objective for r in res.report if r.kind == "heuristic" and r.status == "valid"]
        if plans and res.objective > min(plans) * (1 + 1e-12):
            bad.append(f"anytime: result {res.objective!r} is not the best plan of its report ({min(plans)!r})")
    return bad


def run(count: int, seed: int = 0, *, solve_every: int = 0, max_nodes: int = 6) -> dict:
    """Check ``count`` instances; ``solve_every``: run ``anytime_solve`` on
    every that-many-th one too (0: never).  Returns the counts and the
    violations found."""
    found, solved, feasible = [], 0, 0
    for i, p in enumerate(rescaled_instances(count, seed, max_nodes=max_nodes)):
        opt = brute_force(p)[0]
        feasible += math.isfinite(opt)
        solve = bool(solve_every) and i % solve_every == 0
        solved += solve
        for v in violations(p, opt, solve=solve):
            found.append(f"instance {i} (seed {seed}, n={p.graph.n}, B={p.budgets[0]}): {v}")
    return {"instances": count, "with_plan": feasible, "solved": solved, "violations": found}


def mini_mlp(layers: int, seed: int = 0, wbytes: int = 4) -> Graph:
    """An MLP training graph in miniature (the structure of
    ``datasets/mlp_chain_b256``): per layer a forward ``addmm`` and ``gelu``,
    a loss, and per layer backward a gradient, its product (not for the
    first layer), a ``wbytes`` weight gradient and a 0-byte bias gradient
    (sinks); unit bytes otherwise, costs 3-4 (addmm), 1-1.3 (gelu), 2-3."""
    rng = np.random.default_rng(seed)
    nb, cost, edges = [], [], []

    def node(b, c, preds):
        nb.append(b)
        cost.append(c)
        edges.extend((u, len(nb) - 1) for u in preds)
        return len(nb) - 1

    a, h, prev = [], [], []
    for _ in range(layers):
        a.append(node(1, 3.0 + rng.random(), prev))
        h.append(node(1, 1.0 + 0.3 * rng.random(), [a[-1]]))
        prev = [h[-1]]
    grad = node(1, 1.0, [h[-1]])
    for j in range(layers - 1, -1, -1):
        gb = node(1, 2.0, [a[j], grad])
        if j > 0:
            grad = node(1, 3.0, [gb])
            node(wbytes, 3.0, [h[j - 1], gb])
        node(0, 0.5, [gb])
    return Graph.from_arrays(nb, edges, {"cost": cost})


def compare(layer_counts, *, max_states: int = 3_000_000) -> list[dict]:
    """Every budget of the miniature MLPs: the all-plans optimum (the state
    search, exact) and each bound over every plan, with seconds."""
    from hybrid_remat.bounds.cut import cut_lower_bound
    from hybrid_remat.bounds.multicut import multicut_lower_bound
    from hybrid_remat.bounds.placed_cuts import placed_cuts_lower_bound
    from hybrid_remat.bounds.state_search import state_search_bound
    from hybrid_remat.errors import BudgetError

    rows = []
    for L in layer_counts:
        g = mini_mlp(L)
        for B in range(budget_lower_bound(g), keep_all_peak(g) + 1):
            try:
                p = Problem.single(g, B)
            except BudgetError:
                continue
            row = {"layers": L, "n": g.n, "budget": B, "base": p.base_cost}
            for name, fn in (("optimum", lambda q: state_search_bound(q, max_states=max_states)),
                             ("cut_bound", cut_lower_bound), ("multicut_bound", multicut_lower_bound),
                             ("placed_cuts_bound", placed_cuts_lower_bound)):
                t0 = time.perf_counter()
                r = fn(p)
                row[name] = float(r.value)
                row[name + "_s"] = time.perf_counter() - t0
                if name == "optimum":
                    row["exact"] = bool(r.exact)
            rows.append(row)
    return rows


def _cell(r: dict, nm: str) -> str:
    ext, got = r["optimum"] - r["base"], r[nm] - r["base"]
    pct = "100" if ext <= 0 and got >= ext else f"{100 * got / ext:.0f}" if ext > 0 else "-"
    return f"{r[nm]:.3f} ({pct} %, {r[nm + '_s']:.1f} s)"


def _compare_table(rows, cmd: str) -> str:
    names = ("cut_bound", "multicut_bound", "placed_cuts_bound")
    out = ["# Bounds over every plan against the optimum on MLP training chains in miniature", "",
           f"Command: `{cmd}`.  `optimum`: the state search (A* over resident and computed sets, exact: every "
           "plan in any order); each bound as its extra over the base cost, in % of the optimum's extra "
           "(100 %: the bound proves the optimum); seconds on the shared 2-core machine (indicative).", "",
           "| layers | n | budget | optimum (exact, s) | " + " | ".join(names) + " |", "|" + "---|" * (4 + len(names))]
    for r in rows:
        out.append(f"| {r['layers']} | {r['n']} | {r['budget']} | {r['optimum']:.3f} ({r['exact']}, "
                   f"{r['optimum_s']:.1f} s) | " + " | ".join(_cell(r, nm) for nm in names) + " |")
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--solve-every", type=int, default=10, help="run anytime_solve on every k-th instance (0: never)")
    ap.add_argument("--max-nodes", type=int, default=6)
    ap.add_argument("--compare", default="", help="layer counts of miniature MLPs: bounds against the optimum")
    ap.add_argument("--out", default="bounds_mini_mlp", help="results name for --compare")
    args = ap.parse_args()
    if args.compare:
        import sys

        from benchmarks._common import write_results

        rows = compare([int(x) for x in args.compare.split(",") if x])
        cmd = "python -m benchmarks.bounds_battery " + " ".join(sys.argv[1:])
        write_results(args.out, json_doc={"command": cmd, "rows": rows})
        write_results(args.out, markdown=_compare_table(rows, cmd))
        print(_compare_table(rows, cmd))
        return
    t0 = time.perf_counter()
    out = run(args.count, args.seed, solve_every=args.solve_every, max_nodes=args.max_nodes)
    for v in out["violations"][:50]:
        print(v)
    print(f"{out['instances']} instances ({out['with_plan']} with a plan, {out['solved']} solved by anytime_solve), "
          f"{len(out['violations'])} violations, {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
