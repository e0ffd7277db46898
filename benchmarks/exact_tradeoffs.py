"""Trade-offs of the exact model: stages of 1 vs g nodes, recomputation cap
C = inf vs C = 2 (Moccasin's), each measured by objective (TDI%), the proof
status and solve time.

Every configuration gets the same staged greedy incumbent
(``staged_evict``) and the same time limit (``--limit``, default 20 s), one
SCIP thread.  A restricted configuration (g > 1 or C = 2) optimises over a
subset of the staged plans: its optimum can only be worse or equal, and its
bound is not a bound of the staged class.

Writes ``benchmarks/results/exact_tradeoffs.{md,json}``.  Wall time about
16 x limit (about 6 minutes at 20 s).  ``--quick``: two instances, 8 s.

Usage::

    python -m benchmarks.exact_tradeoffs [--limit 20] [--quick]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from benchmarks._common import command, moccasin_graph, tdi_of, write_results
from hybrid_remat.anytime import warmup
from hybrid_remat.budgets import keep_all_peak, min_feasible_budget
from hybrid_remat.exact.checkmate import CheckmateFormulation
from hybrid_remat.generators import random_layered
from hybrid_remat.heuristics.staged_evict import StagedEvict
from hybrid_remat.limits import Limits
from hybrid_remat.loaders import load_graph
from hybrid_remat.problem import Problem
from hybrid_remat.simulate import simulate

CONFIGS = [(1, None), (1, 2), (4, None), (4, 2)]


def instances(quick):
    out = []
    g = random_layered(40, seed=3)
    out.append(("rlg40 (generated)", Problem.single(g, int(min_feasible_budget(g) + 0.3 * (keep_all_peak(g) - min_feasible_budget(g))))))
    wanted = [("RLG1 @0.9", "rlg_n100", "90%")]
    if not quick:
        wanted += [("CM1 @0.8", "fcn_8_vgg_b32_416x608_train", "80%"), ("vgg16 train @0.9", "vgg16_b256_224x224_train", "90%")]
    for label, name, budget in wanted:
        if moccasin_graph(name).exists():
            out.append((label, Problem.single(load_graph(moccasin_graph(name)), budget)))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=float, default=20.0)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default="exact_tradeoffs", help="results name or path prefix")
    ap.add_argument("--proofs", action="store_true",
                    help="instead: anytime_solve(problem, 60, formulations=['checkmate']) on vgg16/vgg19 train "
                         "at 0.9/0.8 (proved optima), written to <out>_proofs.{md,json}")
    args = ap.parse_args(argv)
    if args.proofs:
        return proofs(args.out + "_proofs")
    limit = min(args.limit, 8.0) if args.quick else args.limit
    out = args.out + ("_quick" if args.quick and args.out.endswith("exact_tradeoffs") else "")
    warmup()
    rows = []
    for name, p in instances(args.quick):
        inc = StagedEvict().run(p)
        inc_tdi = simulate(p, inc).tdi_pct if inc is not None else None
        for size, cap in CONFIGS:
            t0 = time.perf_counter()
            first = []

            def on_inc(plan, src, _t0=t0, _first=first):
                _first.append(time.perf_counter() - _t0)

            r = CheckmateFormulation(stage_size=size, recompute_cap=cap).solve(p, incumbent=inc, limits=Limits.seconds(limit),
                                                                                on_incumbent=on_inc)
            secs = time.perf_counter() - t0
            tdi = simulate(p, r.plan).tdi_pct if r.plan is not None else None
            ph = r.stats["phases"][0] if r.stats.get("phases") else {}
            mb = ph.get("model_bound")
            row = {
                "instance": name, "n": p.graph.n, "stage_size": size, "cap": "inf" if cap is None else cap,
                "status": ph.get("scip_status"), "tdi_pct": tdi, "incumbent_tdi_pct": inc_tdi,
                "model_bound_tdi_pct": tdi_of(p, mb),
                "seconds": secs, "vars": ph.get("vars"), "rows": ph.get("rows"), "build_s": ph.get("build_s"),
                "nodes": ph.get("nodes"), "improvements_at_s": [round(x, 1) for x in first],
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    write_results(out, json_doc={"limit_s": limit, "rows": rows})

    def fmt(x, nd=3):
        return "-" if x is None else f"{x:.{nd}f}"

    lines = [
        "# Exact model trade-offs: stage size g and recomputation cap C",
        "",
        f"`{command(__file__, (['--quick'] if args.quick else []) + ['--limit', f'{limit:g}'])}`; same staged-greedy "
        "incumbent for every run, one SCIP thread, shared 2-core machine. `model bound` is the SCIP dual bound "
        "of *that* model (a bound of the staged class only for g = 1, C = inf with exact memory units).",
        "",
        "| instance | n | g | C | SCIP status | TDI% | start TDI% | model bound TDI% | seconds | vars | rows | nodes |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['instance']} | {r['n']} | {r['stage_size']} | {r['cap']} | {r['status']} | {fmt(r['tdi_pct'])} | "
            f"{fmt(r['incumbent_tdi_pct'])} | "
            f"{'inf (class empty)' if r['status'] == 'infeasible' else fmt(r['model_bound_tdi_pct'])} | "
            f"{r['seconds']:.1f} | {r['vars']} | "
            f"{r['rows']} | {r['nodes']} |"
        )
    write_results(out, markdown="\n".join(lines) + "\n")
    return 0


def proofs(out):
    from hybrid_remat.anytime import anytime_solve
    from hybrid_remat.errors import BudgetError

    warmup()
    rows = []
    for fname in ("vgg16_b256_224x224_train", "vgg19_b256_224x224_train"):
        g = load_graph(moccasin_graph(fname))
        for frac in ("90%", "80%"):
            try:
                p = Problem.single(g, frac)
            except BudgetError as e:
                rows.append({"graph": fname, "n": g.n, "budget": frac, "status": "budget below the smallest feasible",
                             "note": str(e)[:120]})
                continue
            t0 = time.perf_counter()
            r = anytime_solve(p, 60, formulations=["checkmate"])
            rows.append({
                "graph": fname, "n": g.n, "budget": frac, "status": r.status,
                "tdi_pct": r.simulation.tdi_pct if r.simulation is not None else None,
                "lower_bound_tdi_pct": tdi_of(p, r.lower_bound),
                "bound_scope": r.bound_scope, "gap": r.gap, "seconds": time.perf_counter() - t0,
                "class_bound_tdi_pct": tdi_of(p, r.class_bound) if r.class_bound > float("-inf") else None,
                "class_bound_scope": r.class_bound_scope,
            })
            print(json.dumps(rows[-1]), flush=True)
    write_results(out, json_doc={"rows": rows})
    lines = ["# Checkmate on small training graphs (60 s limit)", "",
             "`python -m benchmarks.exact_tradeoffs --proofs`: `anytime_solve(problem, 60, formulations=['checkmate'])`"
             ". `status` says what was proved over *every* plan (`optimal` only when the bound over every plan is "
             "reached: the `bound` column, with the component that gave it); the class bound covers only the "
             "staged plans of the modelled first-compute order (`staged`), and a class optimum is shown there, "
             "never as `optimal`.", "",
             "| graph | n | budget | status | TDI% | bound TDI% (from) | gap | class bound TDI% (scope) | seconds |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "tdi_pct" not in r:
            lines.append(f"| {r['graph']} | {r['n']} | {r['budget']} | {r['status']} | - | - | - | - | - |")
            continue
        cb = "-" if r.get("class_bound_tdi_pct") is None else \
            f"{r['class_bound_tdi_pct']:.4f} ({r.get('class_bound_scope') or '-'})"
        lines.append(f"| {r['graph']} | {r['n']} | {r['budget']} | {r['status']} | {r['tdi_pct']:.4f} | "
                     f"{r['lower_bound_tdi_pct']:.4f} ({r['bound_scope']}) | {r['gap']:.2e} | {cb} | "
                     f"{r['seconds']:.1f} |")
    write_results(out, markdown="\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
