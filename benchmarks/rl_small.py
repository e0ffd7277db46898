"""Which side of the random_layered gap is loose: small instances of
:func:`hybrid_remat.families.random_layered_training` (few, narrow layers)
where the optimum over every plan is known, the portfolio's plan and every
registered bound side by side.

Columns: the exact optimum (``state_search_bound`` when it finishes, else
``oracle.brute_force(scope="all")``), ``anytime_solve``'s plan (``--limit``
seconds, one worker) and each bound's value, all as TDI % (time over
keep-all's, in per cent).  ``-`` : the bound declined or gave nothing.

    python3 -m benchmarks.rl_small --sizes 12,16,20,24 --limit 5
    python3 -m benchmarks.rl_small --sizes 200,400 --width 0 --limit 30 --no-exact

(``--width 0``: the generator's own layer width, sqrt of the forward size.)
"""

from __future__ import annotations

import argparse
import math
import subprocess
import time

from benchmarks._common import command, tdi_of, write_results
from hybrid_remat import plugins
from hybrid_remat.anytime import anytime_solve
from hybrid_remat.errors import BudgetError
from hybrid_remat.families import random_layered_training
from hybrid_remat.interfaces import ALL_PLANS
from hybrid_remat.limits import Limits
from hybrid_remat.problem import Problem

__all__ = ["row", "main"]

BOUNDS = ("first_moment_bound", "frontier_cuts_bound", "placed_cuts_bound", "recompute_bound", "cut_bound",
          "multicut_bound", "state_search_bound")


def row(size: int, seed: int, width: float | None, budget: int, limit: float, exact: bool, bound_s: float) -> dict:
    g = random_layered_training(size, seed=seed, layer_width=width)
    try:
        p = Problem.single(g, f"{budget}%")
    except BudgetError:
        return None
    out = {"size": size, "nodes": g.n, "seed": seed, "width": width, "budget": budget}
    regs = plugins.bounds()
    for name in BOUNDS:
        b = regs.get(name)
        val = None
        if b is not None:
            ok = getattr(b, "applicable", lambda _p: (True, ""))(p)
            if ok[0]:
                try:
                    r = b.bound(p, limits=Limits.seconds(bound_s))
                    val = r.value if r.scope == ALL_PLANS else None
                except Exception as exc:  # a bound that fails says nothing here
                    out[f"{name}_error"] = repr(exc)[:120]
        out[name] = tdi_of(p, val) if val is not None and math.isfinite(val) else None
    out["exact"] = None
    if exact:
        from hybrid_remat.bounds.state_search import state_search_bound
        r = state_search_bound(p, limits=Limits.seconds(max(bound_s, 60.0)))
        out["exact_by"] = "state_search" if r.exact else "state_search bound (stopped)"
        if r.exact:
            out["exact"] = tdi_of(p, r.value)
        else:
            from hybrid_remat.oracle import MAX_NODES, brute_force
            if g.n <= MAX_NODES:
                v, _ = brute_force(p, scope="all", max_states=3_000_000)
                out["exact"], out["exact_by"] = tdi_of(p, v), "brute_force"
    t0 = time.perf_counter()
    res = anytime_solve(p, limit, workers=1)
    out["plan"] = tdi_of(p, res.objective)
    out["solver"] = res.solver
    out["status"] = res.status
    out["anytime_bound"] = tdi_of(p, res.lower_bound)
    out["wall"] = time.perf_counter() - t0
    ss = out.get("state_search_bound")
    if out["exact"] is None and ss is not None and out["plan"] is not None and abs(ss - out["plan"]) < 1e-6:
        out["exact"], out["exact_by"] = ss, "plan meets state_search bound"
    if out["exact"] is None and res.status == "optimal":
        out["exact"], out["exact_by"] = out["plan"], "anytime_solve proved optimal"
    return out


def _f(x) -> str:
    return "-" if x is None else f"{x:.3f}"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="12,16,20,24")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--width", type=float, default=2.0, help="layer width (0: the generator's default)")
    ap.add_argument("--budgets", default="70,50")
    ap.add_argument("--limit", type=float, default=5.0)
    ap.add_argument("--bound-s", type=float, default=10.0)
    ap.add_argument("--no-exact", action="store_true")
    ap.add_argument("--out", default="rl_small")
    a = ap.parse_args(argv)
    rows = []
    for size in map(int, a.sizes.split(",")):
        for seed in map(int, a.seeds.split(",")):
            for budget in map(int, a.budgets.split(",")):
                r = row(size, seed, a.width or None, budget, a.limit, not a.no_exact, a.bound_s)
                if r is None:
                    continue
                rows.append(r)
                print({k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()}, flush=True)
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    cols = ["exact", "plan", *BOUNDS, "anytime_bound"]
    head = "| nodes | seed | budget | " + " | ".join(cols) + " | plan from | status |"
    lines = ["# random_layered: plan vs bounds on small instances (TDI %)", "",
             f"**Command** `{command(__file__, argv)}`; load at the end: `{load}`.", "",
             "`exact`: the optimum over every plan (state search / brute force); `plan`: anytime_solve's "
             f"plan in {a.limit:g} s, one worker; bounds given {a.bound_s:g} s each.", "",
             head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        lines.append(f"| {r['nodes']} | {r['seed']} | {r['budget']}% | " + " | ".join(_f(r[c]) for c in cols)
                     + f" | {r['solver']} | {r['status']} |")
    write_results(a.out, markdown="\n".join(lines) + "\n", json_doc=rows)


if __name__ == "__main__":
    main()
