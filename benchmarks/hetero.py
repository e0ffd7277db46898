"""CPU+GPU benchmark: the best single device versus CPU+GPU plans, per hardware pair.

For every profiled graph in ``datasets/``, every hardware pair and GPU
budgets of 100/75/50/35 % of the GPU keep-all peak (CPU memory 64 GiB),
report the serial time and the makespan of

(a) GPU only: the best plan of every registered single-device heuristic,
(b) CPU only: keep-all on the CPU,
(c) CPU+GPU: the heterogeneous heuristics (``hetero_heft`` for each
    objective, ``hetero_heft_offload``, and ``hetero_lift``'s lifting of the
    top three GPU-only plans of (a)) and the exact staged
    MILP (``hetero_xengine``) warm-started from the best of them,

and the gain of (c) over the better of (a) and (b), the *best single
device*, for the serial time (XEngine's objective) and for the makespan.
Every number comes from the simulator; makespans count memory in time
(a step that would overfill a device waits), and every plan's peak over
time is checked against the budgets.

Hardware pairs (``hybrid_remat_roofline.PAIRS``): ``h200_xeon`` is the
measured pair of the profiled graphs; ``rtx3060_7950x`` (consumer GPU on
PCIe), ``irisxe_1185g7`` and ``uhd630_9900k`` (integrated GPUs sharing the
CPU's DRAM) cost the same graphs with the roofline model on published
spec figures: the class of hardware where XEngine reports its gains (up to
22.5 % over the best single device).

``--scale`` measures ``hetero_heft`` instead: one kernel variant and the
whole scheduler on ``repeat_layers(llama_8l_b4_s512, L)`` for L = 8, 80,
750 (about 1k, 10k, 100k nodes), single-device and CPU+GPU, and fits the
exponent of time against size.

Usage::

    python -m benchmarks.hetero                 # everything (the lead's full table)
    python -m benchmarks.hetero --quick         # reduced: 3 graphs, 2 budgets, every pair, MILP 5 s
    python -m benchmarks.hetero --pairs irisxe_1185g7 --graphs resnet18
    python -m benchmarks.hetero --scale [--quick]
    python -m benchmarks.hetero --timed         # makespan plans in time, with and without waiting
"""

from __future__ import annotations

import argparse
import csv
import glob
import json
import math
import os
import statistics
import sys
import time

import numpy as np

from benchmarks._common import DATASETS, LLAMA, RESULTS, require_plugin
from hybrid_remat import plugins
from hybrid_remat.budgets import keep_all_peak, node_need_bytes
from hybrid_remat.hetero.heft import WORK_RATE, HeftScheduler, heft_run
from hybrid_remat.hetero.lift import lift_plan
from hybrid_remat.hetero.paging import HeftOffload
from hybrid_remat.hetero.xengine import MAX_VARIABLES, XEngineMILP, model_size
from hybrid_remat.interfaces import accepts
from hybrid_remat.limits import Limits
from hybrid_remat.loaders import load_graph
from hybrid_remat.plan import OP_COMPUTE, OP_COPY, keep_all_plan
from hybrid_remat.problem import Device, Problem
from hybrid_remat.simulate import simulate

_roofline = require_plugin("hybrid_remat_roofline", "hybrid-remat-roofline")  # the hardware pairs
PAIRS, apply_pair = _roofline.PAIRS, _roofline.apply_pair

FRACTIONS = (1.0, 0.75, 0.5, 0.35)
CPU_BYTES = 64 * 2**30

#: XEngine's published gains over the best single device, % (serial time; from the table data of the
#: paper in the authors' plotting script, see /work/shared/reference/moccasin_xengine.md section 1.5;
#: the abstract says "up to 22.5 %")
XENGINE_GAINS = {
    "IrisXe": [0.6, 0.0, 14.5, 23.8, 10.3, 5.2, 9.3, 8.8, 4.0, 0.7, 2.5, 2.1, 6.0, 2.5, 1.5, 0.7, 10.6, 6.5,
               3.3, 2.1, 1.0, 0.3, 12.5, 6.5, 14.6],
    "Gen9": [7.0, 8.9, 3.6, 3.4, 6.8, 14.0, 13.5, 13.6, 15.7, 15.7],
}
XENGINE_ABSTRACT = 22.5


def ms(x):
    return None if x is None or not math.isfinite(x) else round(x * 1e3, 3)


def gain(best_single, c):
    if c is None or best_single is None or not (math.isfinite(c) and math.isfinite(best_single)):
        return None
    return round((best_single - c) / best_single * 100.0, 2)


def gpu_only(g, budget):
    """Best serial and best makespan over the registered single-device
    heuristics, and their valid plans best first (for lifting)."""
    if budget < node_need_bytes(g).max():
        return None
    sub = Problem(g, [Device("gpu", "gpu", budget)])
    best_s, best_m, who = math.inf, math.inf, None
    plans = []
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
        plans.append((r.total_time, name, plan))
        if r.total_time < best_s:
            best_s, who = r.total_time, name
        best_m = min(best_m, r.makespan)
    plans.sort(key=lambda x: x[0])
    return best_s, best_m, who, plans


def lifted(p, plans, objective, top=3):
    """What ``hetero_lift`` does, on the GPU-only plans already found: the
    best of the top plans lifted with host offload (both policies)."""
    best, best_val = None, math.inf
    for _, name, plan in plans[:top]:
        meta_source = name
        plan = plan.renamed(["gpu"] * len(plan.devices)) if len(plan.devices) == 1 else plan
        for policy in ("serial", "all"):
            lp = lift_plan(p, plan, policy=policy)
            r = simulate(p, lp)
            val = r.total_time if objective == "serial" else r.makespan
            if r.valid and val < best_val:
                best, best_val = lp, val
                lp.meta["source"] = meta_source
    return best


def check_in_time(p, plan):
    """Simulate; the plan must be valid and hold every budget over time."""
    r = simulate(p, plan)
    assert r.valid, r.error
    for d in p.devices:
        assert r.timed_peak_bytes[d.name] <= d.memory_bytes, (d.name, r.timed_peak_bytes, d.memory_bytes)
    n_cpu = int(sum(1 for o, d in zip(plan.op, plan.device, strict=True) if o == OP_COMPUTE and plan.devices[d] == "cpu"))
    return r, {"recomputes": r.n_recompute, "copies": int((plan.op == OP_COPY).sum()), "cpu_ops": n_cpu,
               "copy_ms": ms(r.copy_time), "wait_ms": ms(r.memory_wait)}


def run_case(g, links, pair, frac, exact_limit, max_vars):
    """One graph on one hardware pair at one GPU budget: every figure of a table row."""
    peak = keep_all_peak(g)
    gb = math.ceil(frac * peak)
    row = {"pair": pair, "graph": g.name, "n": g.n, "budget_pct": int(round(frac * 100)),
           "gpu_budget_MiB": round(gb / 2**20, 1)}
    t0 = time.perf_counter()
    # (a) GPU only, (b) CPU only
    a = gpu_only(g, gb)
    row["gpu_only_serial_ms"] = ms(a[0]) if a else None
    row["gpu_only_makespan_ms"] = ms(a[1]) if a else None
    row["gpu_only_by"] = a[2] if a else "infeasible"
    rb = simulate(Problem(g, [Device("cpu", "cpu", CPU_BYTES)]), keep_all_plan(g, "cpu"))
    row["cpu_only_serial_ms"], row["cpu_only_makespan_ms"] = ms(rb.total_time), ms(rb.makespan)
    single_s = min(a[0] if a else math.inf, rb.total_time)
    single_m = min(a[1] if a else math.inf, rb.makespan)
    row["best_single"] = "gpu" if a and a[0] <= rb.total_time else "cpu"
    # (c) CPU + GPU heuristics, each for the objective it is run with
    p = Problem(g, [Device("gpu", "gpu", gb), Device("cpu", "cpu", CPU_BYTES)], links)
    plans = a[3] if a else []
    heurs = [("heft", HeftScheduler(), "serial"), ("heft_mk", HeftScheduler(), "makespan"),
             ("offload", HeftOffload(), "serial"), ("offload_mk", HeftOffload(), "makespan"),
             ("lift", None, "serial"), ("lift_mk", None, "makespan")]
    best_s = (math.inf, None, None, {})
    best_m = (math.inf, None)
    for name, h, objective in heurs:
        th = time.perf_counter()
        plan = h.run(p.with_objective(objective)) if h is not None else lifted(p, plans, objective)
        row[f"t_{name}_s"] = round(time.perf_counter() - th, 3)
        if plan is None:
            row[f"{name}_serial_ms"] = None
            continue
        r, info = check_in_time(p, plan)
        row[f"{name}_serial_ms"] = ms(r.total_time)
        row[f"{name}_makespan_ms"] = ms(r.makespan)
        if r.total_time < best_s[0]:
            best_s = (r.total_time, name, plan, info)
        if r.makespan < best_m[0]:
            best_m = (r.makespan, name)
    row["heur_serial_ms"], row["heur_serial_by"] = ms(best_s[0]), best_s[1]
    row["heur_makespan_ms"], row["heur_makespan_by"] = ms(best_m[0]), best_m[1]
    row.update({f"heur_{k}": v for k, v in best_s[3].items()})
    # (c) exact, warm-started from the best serial plan
    milp_s = milp_m = math.inf
    if exact_limit > 0:
        size = model_size(p)
        row["milp_vars_est"] = size["variables"]
        res = XEngineMILP(max_variables=max_vars).solve(p, incumbent=best_s[2], limits=Limits.seconds(exact_limit))
        if "skipped" in res.stats:
            row["milp_status"] = f"skipped: ~{size['variables'] // 1000}k vars > {max_vars // 1000}k"
        else:
            grid = res.stats.get("grid", "")
            row["milp_status"] = f"{res.status} ({res.stats.get('scip_status', '-')}, {grid}, {exact_limit:.0f}s)"
            if res.plan is not None:
                r, _ = check_in_time(p, res.plan)
                milp_s, milp_m = r.total_time, r.makespan
            row["milp_bound_ms"] = ms(res.lower_bound) if math.isfinite(res.lower_bound) else None
    else:
        row["milp_status"] = "not run (--exact-limit 0)"
    row["milp_serial_ms"], row["milp_makespan_ms"] = ms(milp_s), ms(milp_m)
    c_serial, c_makespan = min(best_s[0], milp_s), min(best_m[0], milp_m)
    row["best_cg_serial_ms"], row["best_cg_makespan_ms"] = ms(c_serial), ms(c_makespan)
    row["best_single_serial_ms"], row["best_single_makespan_ms"] = ms(single_s), ms(single_m)
    row["gain_serial_pct"] = gain(single_s, c_serial)
    row["gain_makespan_pct"] = gain(single_m, c_makespan)
    row["wall_s"] = round(time.perf_counter() - t0, 2)
    return row


COLUMNS = [
    ("pair", "pair"), ("graph", "graph"), ("budget_pct", "GPU %"), ("gpu_only_serial_ms", "GPU-only serial"),
    ("cpu_only_serial_ms", "CPU-only"), ("best_single", "best single"), ("heur_serial_ms", "C+G heur serial"),
    ("heur_serial_by", "by"), ("milp_serial_ms", "C+G MILP serial"), ("milp_status", "MILP status"),
    ("gain_serial_pct", "gain serial %"), ("best_single_makespan_ms", "best single mksp"),
    ("best_cg_makespan_ms", "C+G mksp"), ("heur_makespan_by", "by"), ("gain_makespan_pct", "gain mksp %"),
    ("heur_cpu_ops", "CPU ops"), ("heur_copies", "copies"), ("wall_s", "wall s"),
]


def _stats(values):
    v = [x for x in values if x is not None]
    if not v:
        return "-"
    return f"median {statistics.median(v):.2f}, max {max(v):.2f} (n={len(v)})"


def _argv() -> str:
    """The options this run was given (for the tables' headings)."""
    import shlex
    import sys

    return "".join(" " + shlex.quote(a) for a in sys.argv[1:])


def summary(rows, args, total_wall) -> str:
    """The per-pair gains over the best single device, against XEngine's figures."""
    out = ["# CPU+GPU planning: gains per hardware pair\n",
           f"Written by `python -m benchmarks.hetero{_argv()}` (MILP limit {args.exact_limit:g} s up to "
           f"{args.large_n} nodes, {args.exact_limit_large:g} s above) "
           f"(total wall {total_wall:.0f} s on the shared 2-core machine). Graphs: "
           f"{', '.join(sorted({r['graph'] for r in rows}))}; GPU budgets "
           f"{', '.join(str(b) for b in sorted({r['budget_pct'] for r in rows}, reverse=True))} % of the GPU "
           f"keep-all peak, CPU 64 GiB. Baseline: the **best single device**: the better of the best GPU-only "
           f"plan of every registered single-device heuristic and CPU-only keep-all. Gain = (baseline - best "
           f"CPU+GPU plan) / baseline. Serial time is XEngine's objective (compute plus copy times); the "
           f"makespan overlaps devices and copy directions, with memory counted in time. Every figure was "
           f"confirmed by the simulator, every plan holds its budgets over time.\n",
           "Cases where the GPU alone cannot hold some node with its inputs (no GPU-only plan) are counted "
           "apart: there the baseline is CPU-only and the gain measures what the GPU adds.\n",
           "| pair | link | XEngine class | cases (GPU-only infeasible) | best single = CPU | gain serial % | "
           "gain makespan % | gain serial %, GPU-only infeasible | XEngine's gain % (table data) |",
           "|---|---|---|---|---|---|---|---|---|"]
    for pname in [p for p in PAIRS if any(r["pair"] == p for r in rows)]:
        pr = [r for r in rows if r["pair"] == pname]
        both = [r for r in pr if r["gpu_only_serial_ms"] is not None]
        gpu_inf = [r for r in pr if r["gpu_only_serial_ms"] is None]
        pair = PAIRS[pname]
        ref = XENGINE_GAINS.get(pair.xengine_class)
        xe = (f"{pair.xengine_class}: median {statistics.median(ref):.1f}, max {max(ref):.1f}" if ref else "-")
        n_cpu = sum(1 for r in both if r["best_single"] == "cpu")
        out.append(f"| {pname} | {pair.link} | {pair.xengine_class or '-'} | {len(pr)} ({len(gpu_inf)}) | "
                   f"{n_cpu} of {len(both)} | {_stats([r['gain_serial_pct'] for r in both])} | "
                   f"{_stats([r['gain_makespan_pct'] for r in both])} | "
                   f"{_stats([r['gain_serial_pct'] for r in gpu_inf])} | {xe} |")
    out.append(f"\nXEngine's abstract: up to {XENGINE_ABSTRACT} % faster than the fastest single-device Checkmate "
               "schedule (serial time, Intel IrisXe/Gen9 GPUs with their host CPUs, thread counts tuned so that "
               "CPU and GPU are about equally fast).\n")
    out.append("## Per graph (gain serial % / gain makespan %)\n")
    graphs = sorted({r["graph"] for r in rows})
    pairs = [p for p in PAIRS if any(r["pair"] == p for r in rows)]
    out.append("| graph | GPU % | " + " | ".join(pairs) + " |")
    out.append("|---|---|" + "---|" * len(pairs))
    for gname in graphs:
        for b in sorted({r["budget_pct"] for r in rows if r["graph"] == gname}, reverse=True):
            cells = []
            for pname in pairs:
                r = next((x for x in rows if x["pair"] == pname and x["graph"] == gname and x["budget_pct"] == b), None)
                cells.append("-" if r is None else f"{r['gain_serial_pct']} / {r['gain_makespan_pct']}")
            out.append(f"| {gname} | {b} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def write(rows, out, total_wall, args):
    os.makedirs(out, exist_ok=True)
    stem = os.path.join(out, "hetero" + (".quick" if args.quick else ""))
    with open(stem + ".json", "w") as f:
        json.dump({"rows": rows, "total_wall_s": total_wall, "exact_limit_s": args.exact_limit,
                   "max_vars": args.max_vars, "pairs": {k: vars(v) for k, v in PAIRS.items()}}, f, indent=1)
    keys = sorted({k for r in rows for k in r})
    with open(stem + ".csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    with open(stem + ".md", "w") as f:
        f.write("# CPU+GPU planning (hybrid_remat.hetero), per hardware pair\n\n")
        f.write(f"Times in ms (simulated; makespans with memory in time). GPU budget = % of the GPU keep-all peak; "
                f"CPU 64 GiB. Exact MILP limit {args.exact_limit:.0f} s (graphs up to {args.large_n} nodes) or "
                f"{args.exact_limit_large:.0f} s (larger). Total wall time {total_wall:.0f} s. Gains over the best "
                f"single device; per-pair summary in `{os.path.basename(stem)}.summary.md`.\n\n")
        f.write("| " + " | ".join(h for _, h in COLUMNS) + " |\n")
        f.write("|" + "---|" * len(COLUMNS) + "\n")
        for r in rows:
            f.write("| " + " | ".join("" if r.get(k) is None else str(r.get(k)) for k, _ in COLUMNS) + " |\n")
    with open(stem + ".summary.md", "w") as f:
        f.write(summary(rows, args, total_wall))
    return stem


# ----------------------------------------------------------------- scale
def fit_exponent(ns, ts):
    """Least-squares slope of log(time) against log(size)."""
    x, y = np.log(np.asarray(ns, float)), np.log(np.maximum(np.asarray(ts, float), 1e-6))
    return float(np.polyfit(x, y, 1)[0]) if len(ns) > 1 else float("nan")


def run_scale(args):
    from hybrid_remat.generators import repeat_layers

    base = load_graph(LLAMA)
    layers = (8, 80) if args.quick else (8, 80, 750)
    heft_run(Problem.single(base, "50%"))  # compile outside the timings
    rows = []
    for L in layers:
        g = repeat_layers(base, L)
        gb = math.ceil(0.5 * keep_all_peak(g))
        kinds = {"single-device": Problem(g, [Device("gpu", "gpu", gb)]),
                 "cpu+gpu": Problem(g, [Device("gpu", "gpu", gb), Device("cpu", "cpu", CPU_BYTES)],
                                    apply_pair(g, "h200_xeon")[1])}
        for kind, p in kinds.items():
            t = time.perf_counter()
            plan, st, work = heft_run(p)
            t_kernel = time.perf_counter() - t
            t = time.perf_counter()
            best = HeftScheduler().run(p, limits=Limits.seconds(args.scale_limit))
            t_sched = time.perf_counter() - t
            r = simulate(p, best)
            t = time.perf_counter()
            short = HeftScheduler().run(p, limits=Limits.seconds(args.short_limit))
            t_short = time.perf_counter() - t
            rows.append({"L": L, "n": g.n, "problem": kind, "kernel_s": round(t_kernel, 3), "work": int(work),
                         "rate_per_s": round(work / max(t_kernel, 1e-9)), "scheduler_s": round(t_sched, 2),
                         "scheduler_limit_s": args.scale_limit, "valid": bool(r.valid),
                         "variant": best.meta.get("order", "") + f"/mode {best.meta.get('mode')}",
                         "short_limit_s": args.short_limit, "short_wall_s": round(t_short, 2),
                         "short_valid": short is not None and simulate(p, short).valid})
            print(json.dumps(rows[-1]), flush=True)
    fits = {}
    for kind in ("single-device", "cpu+gpu"):
        sel = [r for r in rows if r["problem"] == kind]
        fits[kind] = {}
        for what in ("kernel_s", "work", "scheduler_s"):
            ns, ts = [r["n"] for r in sel], [r[what] for r in sel]
            fits[kind][what] = {"all": round(fit_exponent(ns, ts), 2),
                                "steps": [round(fit_exponent(ns[i:i + 2], ts[i:i + 2]), 2) for i in range(len(ns) - 1)]}
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, "hetero_scale" + (".quick" if args.quick else ""))
    with open(stem + ".json", "w") as f:
        json.dump({"rows": rows, "exponents": fits, "work_rate_constant": WORK_RATE}, f, indent=1)
    with open(stem + ".md", "w") as f:
        f.write("# hetero_heft at scale\n\n")
        f.write(f"`python -m benchmarks.hetero --scale{' --quick' if args.quick else ''}`: "
                "`repeat_layers(load_graph('datasets/llama_8l_b4_s512.json.gz'), L)`, GPU budget 50 % of keep-all, "
                "CPU 64 GiB (cpu+gpu, links of the profiled graphs). *kernel*: one variant (reference order, serial "
                f"mode); *scheduler*: `HeftScheduler().run(p, limits=Limits.seconds({args.scale_limit:g}))` (16 "
                "variants while the limit lasts, each simulated). Work = kernel work units (nodes placed, steps emitted, "
                f"eviction candidates scored); the scheduler turns time into work at {WORK_RATE:.2g} units/s.\n\n")
        f.write(f"*short*: the same scheduler with `Limits.seconds({args.short_limit:g})`: its wall time (plan "
                "valid in every row unless marked).\n\n")
        f.write("| L | nodes | problem | kernel s | work | units/s | scheduler s | short limit: wall s |\n"
                "|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            ok = "" if r["valid"] and r["short_valid"] else " (no valid plan)"
            f.write(f"| {r['L']} | {r['n']} | {r['problem']} | {r['kernel_s']} | {r['work']} | {r['rate_per_s']:.3g} "
                    f"| {r['scheduler_s']} | {r['short_wall_s']}{ok} |\n")
        f.write("\nExponent of time (and work) against nodes, least squares in log-log over all sizes, and between "
                "consecutive sizes:\n\n| problem | kernel time | kernel work | scheduler time |\n|---|---|---|---|\n")
        for k, v in fits.items():
            f.write(f"| {k} | " + " | ".join(f"{v[w]['all']} (steps {', '.join(map(str, v[w]['steps']))})"
                                              for w in ("kernel_s", "work", "scheduler_s")) + " |\n")
    print(f"wrote {stem}.md/.json; exponents {fits}")
    return 0


# ------------------------------------------------------------ memory in time
TIMED_GRAPHS = ("mlp_chain_b256", "gpt2_small_b4_s512", "vit_b_16_b16", "resnet152_b16")


def run_timed(args):
    """Issue 14.2's measurement: makespan plans at 35 % replayed in time,
    without waiting for memory (the old accounting) and with it (now)."""
    rows = []
    for name in (args.graphs or TIMED_GRAPHS):
        f = next(iter(glob.glob(os.path.join(args.datasets, f"*{name}*.json.gz"))), None)
        if f is None:
            continue
        g, links = apply_pair(load_graph(f), "h200_xeon")
        gb = math.ceil(0.35 * keep_all_peak(g))
        p = Problem(g, [Device("gpu", "gpu", gb), Device("cpu", "cpu", CPU_BYTES)], links).with_objective("makespan")
        for hname, h in (("hetero_heft", HeftScheduler()), ("hetero_heft_offload", HeftOffload()),
                         ("hetero_lift", None)):
            plan = h.run(p) if h is not None else lifted(p, (gpu_only(g, gb) or [0, 0, 0, []])[3], "makespan")
            if plan is None:
                continue
            free = simulate(p, plan, wait_for_memory=False)
            wait = simulate(p, plan)
            rows.append({"graph": g.name, "heuristic": hname, "gpu_budget_MB": round(gb / 1e6, 2),
                         "plan_order_peak_MB": round(wait.peak_bytes["gpu"] / 1e6, 2),
                         "timed_peak_no_wait_MB": round(free.timed_peak_bytes["gpu"] / 1e6, 2),
                         "makespan_no_wait_ms": ms(free.makespan),
                         "timed_peak_MB": round(wait.timed_peak_bytes["gpu"] / 1e6, 2),
                         "makespan_ms": ms(wait.makespan), "memory_wait_ms": ms(wait.memory_wait)})
            print(json.dumps(rows[-1]), flush=True)
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, "hetero_timed")
    with open(stem + ".json", "w") as f:
        json.dump({"rows": rows}, f, indent=1)
    with open(stem + ".md", "w") as f:
        f.write("# Makespan plans and memory in time (issue 14.2)\n\n`python -m benchmarks.hetero --timed`: GPU 35 % of "
                "the keep-all peak, CPU 64 GiB, links of the profiled graphs; the makespan plans of each heuristic "
                "replayed *without* waiting for memory (each value held until its last reader ends, allocations at "
                "their stream's time: the accounting the issue measured) and *with* waiting (the simulator now). "
                "MB = 1e6 bytes; `memory wait` sums the delays of all steps.\n\n")
        f.write("| graph | heuristic | GPU budget MB | plan-order peak | in time, no wait | makespan, no wait ms | "
                "in time, waiting | makespan ms | memory wait ms |\n|---|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            f.write(f"| {r['graph']} | {r['heuristic']} | {r['gpu_budget_MB']} | {r['plan_order_peak_MB']} | "
                    f"{r['timed_peak_no_wait_MB']} | {r['makespan_no_wait_ms']} | {r['timed_peak_MB']} | "
                    f"{r['makespan_ms']} | {r['memory_wait_ms']} |\n")
    print(f"wrote {stem}.md/.json")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default=str(DATASETS))
    ap.add_argument("--exact-limit", type=float, default=60.0, help="MILP seconds for graphs up to --large-n nodes "
                    "(0: no MILP)")
    ap.add_argument("--exact-limit-large", type=float, default=15.0, help="MILP seconds for larger graphs")
    ap.add_argument("--large-n", type=int, default=200)
    ap.add_argument("--max-vars", type=int, default=MAX_VARIABLES)
    ap.add_argument("--quick", action="store_true", help="reduced: resnet18, mlp_chain, gpt2; budgets 75 and 35 %%")
    ap.add_argument("--graphs", nargs="*", help="graph names to run (default: all)")
    ap.add_argument("--pairs", nargs="*", default=list(PAIRS), help=f"hardware pairs (default: {' '.join(PAIRS)})")
    ap.add_argument("--fractions", nargs="*", type=float, help="GPU budgets as fractions of keep-all")
    ap.add_argument("--scale", action="store_true", help="measure hetero_heft at 1k/10k/100k nodes instead")
    ap.add_argument("--scale-limit", type=float, default=120.0, help="seconds for the scheduler in --scale")
    ap.add_argument("--short-limit", type=float, default=5.0, help="a short limit the scheduler must honour (--scale)")
    ap.add_argument("--timed", action="store_true", help="makespan plans replayed in time, with and without "
                    "waiting for memory (issue 14.2)")
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    if args.scale:
        return run_scale(args)
    if args.timed:
        return run_timed(args)
    unknown = [p for p in args.pairs if p not in PAIRS]
    if unknown:
        ap.error(f"unknown pair(s) {', '.join(unknown)}: choose from {', '.join(PAIRS)}")
    files = sorted(glob.glob(os.path.join(args.datasets, "*.json.gz")))
    fracs = tuple(args.fractions) if args.fractions else FRACTIONS
    if args.quick:
        files = [f for f in files if any(k in f for k in ("resnet18", "mlp_chain", "gpt2"))]
        fracs = tuple(args.fractions) if args.fractions else (0.75, 0.35)
        args.exact_limit = min(args.exact_limit, 5.0)
        args.exact_limit_large = min(args.exact_limit_large, 5.0)
    if args.graphs:
        files = [f for f in files if any(k in os.path.basename(f) for k in args.graphs)]
    t0 = time.perf_counter()
    rows = []
    for f in files:
        g0 = load_graph(f)
        for pname in args.pairs:
            g, links = apply_pair(g0, pname)
            for frac in fracs:
                limit = args.exact_limit if g.n <= args.large_n else args.exact_limit_large
                row = run_case(g, links, pname, frac, limit, args.max_vars)
                rows.append(row)
                print(json.dumps({k: row.get(k) for k, _ in COLUMNS}), flush=True)
    total = time.perf_counter() - t0
    stem = write(rows, args.out, total, args)
    print(f"wrote {stem}.md/.csv/.json/.summary.md; total wall {total:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
