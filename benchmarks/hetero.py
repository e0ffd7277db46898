"""CPU+GPU benchmark: GPU-only versus CPU-only versus CPU+GPU plans.

For every profiled graph in ``datasets/`` and GPU budgets of 100/75/50/35 %
of the GPU keep-all peak (CPU memory 64 GiB), report the serial time and
the makespan of

(a) the best GPU-only plan of every registered single-device heuristic,
(b) CPU-only (keep-all on the CPU),
(c) CPU+GPU: the heterogeneous heuristics (``hetero_heft`` with serial and
    makespan objectives, ``hetero_heft_offload``, ``hetero_lift``) and the
    exact staged MILP (``hetero_xengine``) warm-started from the best of
    them, where the model is small enough to build,

and the gain of (c) over the better of (a) and (b).  Every number comes
from the simulator.

Usage::

    python benchmarks/hetero.py                # all graphs, exact 60 s
    python benchmarks/hetero.py --quick        # 3 small graphs, 2 budgets, exact 10 s
"""

from __future__ import annotations

import argparse
import csv
import glob
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


from hybrid_remat import plugins  # noqa: E402
from hybrid_remat.budgets import keep_all_peak, node_need_bytes  # noqa: E402
from hybrid_remat.hetero.heft import HeftScheduler  # noqa: E402
from hybrid_remat.hetero.lift import LiftedSingleDevice  # noqa: E402
from hybrid_remat.hetero.paging import HeftOffload  # noqa: E402
from hybrid_remat.hetero.xengine import MAX_VARIABLES, XEngineMILP, model_size  # noqa: E402
from hybrid_remat.interfaces import accepts  # noqa: E402
from hybrid_remat.loaders import load_graph  # noqa: E402
from hybrid_remat.plan import OP_COMPUTE, OP_COPY, keep_all_plan  # noqa: E402
from hybrid_remat.problem import Device, Problem, default_links  # noqa: E402
from hybrid_remat.simulate import simulate  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FRACTIONS = (1.0, 0.75, 0.5, 0.35)
CPU_BYTES = 64 * 2**30


def ms(x):
    return None if x is None or not math.isfinite(x) else round(x * 1e3, 3)


def gain(best_single, c):
    if c is None or not math.isfinite(c):
        return None
    if best_single is None or not math.isfinite(best_single):
        return None
    return round((best_single - c) / best_single * 100.0, 2)


def gpu_only(g, budget):
    """Best serial and best makespan over the registered single-device heuristics."""
    if budget < node_need_bytes(g).max():
        return None
    sub = Problem(g, [Device("gpu", "gpu", budget)])
    best_s, best_m, who = math.inf, math.inf, None
    for name, h in plugins.heuristics().items():
        if not accepts(h, sub)[0]:
            continue
        try:
            plan = h.run(sub)
        except Exception as e:  # a broken plugin must not stop the benchmark
            print(f"  {name} failed: {e}", file=sys.stderr)
            continue
        if plan is None:
            continue
        r = simulate(sub, plan)
        if not r.valid:
            continue
        if r.total_time < best_s:
            best_s, who = r.total_time, name
        best_m = min(best_m, r.makespan)
    return best_s, best_m, who


def describe(plan, problem):
    r = simulate(problem, plan)
    n_cpu = int(sum(1 for o, d in zip(plan.op, plan.device, strict=False) if o == OP_COMPUTE and plan.devices[d] == "cpu"))
    return r, {"recomputes": r.n_recompute, "copies": int((plan.op == OP_COPY).sum()), "cpu_ops": n_cpu,
               "copy_ms": ms(r.copy_time)}


def run_case(g, frac, exact_limit, max_vars):
    """One graph at one GPU budget: every figure of a table row."""
    peak = keep_all_peak(g)
    gb = math.ceil(frac * peak)
    row = {"graph": g.name, "n": g.n, "budget_pct": int(frac * 100), "gpu_budget_MiB": round(gb / 2**20, 1)}
    t0 = time.perf_counter()
    # (a) GPU only
    a = gpu_only(g, gb)
    row["gpu_only_serial_ms"] = ms(a[0]) if a else None
    row["gpu_only_makespan_ms"] = ms(a[1]) if a else None
    row["gpu_only_by"] = a[2] if a else "infeasible"
    # (b) CPU only
    cpu_p = Problem(g, [Device("cpu", "cpu", CPU_BYTES)])
    rb = simulate(cpu_p, keep_all_plan(g, "cpu"))
    row["cpu_only_serial_ms"], row["cpu_only_makespan_ms"] = ms(rb.total_time), ms(rb.makespan)
    # (c) CPU + GPU heuristics
    p = Problem(g, [Device("gpu", "gpu", gb), Device("cpu", "cpu", CPU_BYTES)], default_links(g, ["gpu", "cpu"]))
    heurs = [("heft", HeftScheduler("serial")), ("heft_mk", HeftScheduler("makespan")),
             ("offload", HeftOffload("serial")), ("offload_mk", HeftOffload("makespan")),
             ("lift", LiftedSingleDevice("serial")), ("lift_mk", LiftedSingleDevice("makespan"))]
    best_s = (math.inf, None, None)
    best_m = (math.inf, None)
    for name, h in heurs:
        th = time.perf_counter()
        plan = h.run(p)
        row[f"t_{name}_s"] = round(time.perf_counter() - th, 3)
        if plan is None:
            row[f"{name}_serial_ms"] = None
            continue
        r, info = describe(plan, p)
        assert r.valid, (g.name, name, r.error)
        row[f"{name}_serial_ms"] = ms(r.total_time)
        row[f"{name}_makespan_ms"] = ms(r.makespan)
        if r.total_time < best_s[0]:
            best_s = (r.total_time, name, plan, info)
        if r.makespan < best_m[0]:
            best_m = (r.makespan, name)
    row["heur_serial_ms"] = ms(best_s[0])
    row["heur_serial_by"] = best_s[1]
    row["heur_makespan_ms"] = ms(best_m[0])
    row["heur_makespan_by"] = best_m[1]
    if best_s[1]:
        row.update({f"heur_{k}": v for k, v in best_s[3].items()})
    # (c) exact
    size = model_size(p)
    row["milp_vars_est"] = size["variables"]
    row["milp_limit_s"] = exact_limit
    res = XEngineMILP(max_variables=max_vars).solve(p, incumbent=best_s[2], time_limit=exact_limit)
    if "skipped" in res.stats:
        row["milp_status"] = f"skipped: ~{size['variables'] // 1000}k vars > {max_vars // 1000}k, no coarse grid"
        row["milp_serial_ms"] = None
    else:
        r = simulate(p, res.plan) if res.plan is not None else None
        grid = res.stats.get("grid", "")
        grid = "per-node" if grid == "per node" else grid.replace("coarse (", "").replace(" stages)", " st")
        row["milp_status"] = (f"{res.status} ({res.stats.get('scip_status', '-')}, {grid}, "
                              f"{exact_limit:.0f}s, warm {res.stats.get('warm_start')})")
        row["milp_serial_ms"] = ms(r.total_time) if r is not None and r.valid else None
        row["milp_makespan_ms"] = ms(r.makespan) if r is not None and r.valid else None
        row["milp_bound_ms"] = ms(res.lower_bound) if math.isfinite(res.lower_bound) else None
        sb = res.stats.get("staged_lower_bound", -math.inf)
        row["milp_staged_bound_ms"] = ms(sb) if math.isfinite(sb) else None
        row["milp_frontier"] = res.stats.get("frontier")
        row["milp_build_s"] = round(res.stats.get("build_s", 0.0), 1)
    c_serial = min(x for x in (best_s[0], (row["milp_serial_ms"] or math.inf) / 1e3))
    row["best_cg_serial_ms"] = ms(c_serial)
    single_s = min(a[0] if a else math.inf, rb.total_time)
    single_m = min(a[1] if a else math.inf, rb.makespan)
    row["gain_serial_pct"] = gain(single_s, c_serial)
    row["gain_makespan_pct"] = gain(single_m, best_m[0])
    row["wall_s"] = round(time.perf_counter() - t0, 2)
    return row


COLUMNS = [
    ("graph", "graph"), ("budget_pct", "GPU %"), ("gpu_only_serial_ms", "GPU-only serial"),
    ("gpu_only_makespan_ms", "GPU-only mksp"), ("cpu_only_serial_ms", "CPU-only"),
    ("heur_serial_ms", "C+G heur serial"), ("heur_serial_by", "by"), ("heur_makespan_ms", "C+G heur mksp"),
    ("heur_makespan_by", "by"), ("milp_serial_ms", "C+G MILP serial"), ("milp_status", "MILP status"),
    ("gain_serial_pct", "gain serial %"), ("gain_makespan_pct", "gain mksp %"), ("heur_recomputes", "recomp"),
    ("heur_copies", "copies"), ("heur_cpu_ops", "CPU ops"), ("offload_serial_ms", "offload-only serial"),
    ("lift_serial_ms", "lift serial"), ("wall_s", "wall s"),
]


def write(rows, out, total_wall, args):
    os.makedirs(out, exist_ok=True)
    stem = os.path.join(out, "hetero" + (".quick" if args.quick else ""))
    with open(stem + ".json", "w") as f:
        json.dump({"rows": rows, "total_wall_s": total_wall, "exact_limit_s": args.exact_limit,
                   "max_vars": args.max_vars}, f, indent=1)
    keys = sorted({k for r in rows for k in r})
    with open(stem + ".csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    with open(stem + ".md", "w") as f:
        f.write("# CPU+GPU planning (hybrid_remat.hetero)\n\n")
        f.write(f"Times in ms (simulated). GPU budget = % of the GPU keep-all peak; CPU 64 GiB; links from each "
                f"graph's transfer record. Exact MILP limit {args.exact_limit:.0f} s (graphs up to {args.large_n} "
                f"nodes) or {args.exact_limit_large:.0f} s (larger), per-node stage grid below {args.max_vars} "
                f"estimated variables, else a coarse grid cut for the incumbent (stage count in the status). "
                f"Total wall time {total_wall:.0f} s.\n\n")
        single = sorted(n for n, h in plugins.heuristics().items() if "single_device" in getattr(h, "capabilities", ()))
        f.write(f"GPU-only = best of the registered single-device heuristics: {', '.join(single)}. "
                "C+G heur = best of hetero_heft (serial, makespan), hetero_heft_offload, hetero_lift; "
                "MILP = hetero_xengine warm-started from the best of them (bound columns in the csv/json: "
                "milp_bound_ms is the proven sum of per-op minima, milp_staged_bound_ms the bound over staged plans).\n\n")
        f.write("| " + " | ".join(h for _, h in COLUMNS) + " |\n")
        f.write("|" + "---|" * len(COLUMNS) + "\n")
        for r in rows:
            f.write("| " + " | ".join("" if r.get(k) is None else str(r.get(k)) for k, _ in COLUMNS) + " |\n")
    return stem


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default=os.path.join(ROOT, "datasets"))
    ap.add_argument("--exact-limit", type=float, default=60.0, help="MILP seconds for graphs up to --large-n nodes")
    ap.add_argument("--exact-limit-large", type=float, default=15.0, help="MILP seconds for larger graphs")
    ap.add_argument("--large-n", type=int, default=200)
    ap.add_argument("--max-vars", type=int, default=MAX_VARIABLES)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--graphs", nargs="*", help="graph names to run (default: all)")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    args = ap.parse_args(argv)
    files = sorted(glob.glob(os.path.join(args.datasets, "*.json.gz")))
    fracs = FRACTIONS
    if args.quick:
        files = [f for f in files if any(k in f for k in ("vgg16", "resnet18", "mlp_chain"))]
        fracs = (0.75, 0.35)
        args.exact_limit = min(args.exact_limit, 10.0)
        args.exact_limit_large = min(args.exact_limit_large, 5.0)
    if args.graphs:
        files = [f for f in files if any(k in os.path.basename(f) for k in args.graphs)]
    t0 = time.perf_counter()
    rows = []
    for f in files:
        g = load_graph(f)
        for frac in fracs:
            limit = args.exact_limit if g.n <= args.large_n else args.exact_limit_large
            row = run_case(g, frac, limit, args.max_vars)
            rows.append(row)
            print(json.dumps({k: row.get(k) for k, _ in COLUMNS}), flush=True)
    total = time.perf_counter() - t0
    stem = write(rows, args.out, total, args)
    print(f"wrote {stem}.md/.csv/.json; total wall {total:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
