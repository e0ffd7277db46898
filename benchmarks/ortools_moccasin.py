"""The OR-Tools CP-SAT formulation (plugin ``hybrid-remat-ortools``) on the
12 Moccasin instances: rlg_n100/250/500/1000, FCN-8 and ResNet-50 (train)
at ``ceil(0.9 x keep-all peak)`` and ``ceil(0.8 x keep-all peak)``.

Each run: the registered heuristics are run and the best simulated-valid
plan is the warm start (hint + topological order); then one CP-SAT solve
with one worker, seed 0, the given time limit (default 60 s, including
model building).  Every reported plan passed the simulator.  Graphs are
read from ``../shared/benchmarks/moccasin`` (never copied).

Writes ``benchmarks/results/ortools_moccasin.{md,json}`` (``--quick``:
``ortools_moccasin.quick.*``, two small instances at 10 s).

Usage::

    python -m benchmarks.ortools_moccasin               # 12 x 60 s: about 13 min
    python -m benchmarks.ortools_moccasin --quick       # about 30 s
    python -m benchmarks.ortools_moccasin --time-limit 30 --only rlg_n100
    python -m benchmarks.ortools_moccasin --render      # re-render the table from the JSON
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time

from benchmarks._common import (
    MOCCASIN_INSTANCES,
    RESULTS,
    SHARED,
    moccasin_graph,
    moccasin_reference,
    reference_cell,
    require_plugin,
    write_results,
)
from hybrid_remat import Problem, plugins, simulate
from hybrid_remat.budgets import keep_all_peak
from hybrid_remat.interfaces import accepts
from hybrid_remat.limits import Limits
from hybrid_remat.loaders import load_graph

GRAPHS = tuple(name for _, name in MOCCASIN_INSTANCES)
FRACTIONS = (0.9, 0.8)


def formulation():
    forms = plugins.formulations()
    if "ortools" in forms:
        return forms["ortools"], plugins.identity("formulations", "ortools")
    plugin = require_plugin("hybrid_remat_ortools", "hybrid-remat-ortools")  # installed but autoload is off
    return plugin.CpSatRemat(), "hybrid_remat_ortools (not registered)"


def best_heuristic_plan(problem):
    """Run every registered heuristic that accepts the problem; the best valid plan."""
    best, best_name, tried = None, None, []
    for name, h in sorted(plugins.heuristics().items(), key=lambda kv: getattr(kv[1], "rank", 10.0)):
        if not accepts(h, problem)[0]:
            continue
        t0 = time.perf_counter()
        try:
            plan = h.run(problem, seed=0)
        except Exception as e:  # a broken heuristic must not stop the benchmark
            tried.append({"name": name, "error": repr(e)})
            continue
        r = simulate(problem, plan) if plan is not None else None
        tried.append({"name": name, "valid": bool(r and r.valid), "seconds": time.perf_counter() - t0,
                      "tdi_pct": r.tdi_pct if r and r.valid else None})
        if r is not None and r.valid and (best is None or r.total_time < best[1]):
            best, best_name = (plan, r.total_time), name
    return (best[0] if best else None), best_name, tried


def run_one(form, name: str, frac: float, time_limit: float) -> dict:
    g = load_graph(moccasin_graph(name))
    peak = keep_all_peak(g)
    budget = math.ceil(frac * peak)
    problem = Problem.single(g, budget)
    t0 = time.perf_counter()
    warm, warm_name, tried = best_heuristic_plan(problem)
    heur_s = time.perf_counter() - t0
    warm_tdi = simulate(problem, warm).tdi_pct if warm is not None else None
    res = form.solve(problem, incumbent=warm, limits=Limits.seconds(time_limit), seed=0)
    row = {"graph": name, "n": g.n, "m": g.m, "fraction": frac, "budget": budget, "keep_all_peak": peak,
           "status": res.status, "model_status": res.stats.get("model_status"), "hint": res.stats.get("hint"),
           "warm_start": warm_name, "warm_tdi_pct": warm_tdi, "heuristics": tried, "heuristics_s": heur_s,
           "build_s": res.stats.get("build_s"), "solve_s": res.stats.get("solve_s"),
           "n_solutions": res.stats.get("n_solutions")}
    if res.plan is not None:
        r = simulate(problem, res.plan)
        assert r.valid, r.error
        history = res.stats.get("history") or [(math.nan, r.total_time)]
        row.update(tdi_pct=r.tdi_pct, peak=r.peak_bytes[problem.primary.name], n_recompute=r.n_recompute,
                   t_best_s=history[-1][0], t_first_s=history[0][0])
        if "model_bound" in res.stats:
            row["model_bound_tdi_pct"] = (res.stats["model_bound"] - problem.base_cost) / problem.base_cost * 100
    return row


def scip_results() -> tuple[dict, str]:
    """TDI% of the SCIP engine's anytime_solve on the same instances, from
    ``benchmarks/results/moccasin_protocol.json`` (or its ``_quick`` run)
    when that file exists: ``{(graph, fraction): (tdi_pct or None, limit_s)}``."""
    for stem in ("moccasin_protocol", "moccasin_protocol_quick"):
        path = RESULTS / f"{stem}.json"
        if path.exists():
            with open(path) as f:
                doc = json.load(f)
            out = {(r.get("graph"), float(r.get("fraction", 0))): (r.get("tdi_pct"), r.get("limit_s", doc.get("limit_s")))
                   for r in doc.get("rows", [])}
            return out, f"benchmarks/results/{stem}.json"
    return {}, ""


def scip_cell(entry) -> str:
    if entry is None:
        return "-"
    tdi, limit = entry
    return f"{fmt(tdi, '.3f', 'none')} [{fmt(limit, 'g')} s]"


def fmt(x, spec=".2f", none="-"):
    return none if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="rlg_n100 and FCN-8 at 0.9, 10 s each")
    ap.add_argument("--time-limit", type=float, default=None)
    ap.add_argument("--only", action="append", help="graph names to run (repeatable)")
    ap.add_argument("--out", help="results name or path prefix (default by mode)")
    ap.add_argument("--render", action="store_true",
                    help="no solving: rewrite the markdown from the saved JSON (e.g. once the SCIP results exist)")
    args = ap.parse_args(argv)
    if args.render:
        stem = "ortools_moccasin.quick" if args.quick else "ortools_moccasin"
        doc = json.loads((RESULTS / f"{stem}.json").read_text())
        text = render(doc["rows"], doc["time_limit"], doc["formulation"], doc["wall_s"], args.quick)
        write_results(stem, markdown=text)
        print(text)
        return 0
    if not SHARED.is_dir():
        print(f"{SHARED} not found", file=sys.stderr)
        return 2
    time_limit = args.time_limit or (10.0 if args.quick else 60.0)
    graphs = args.only or (("rlg_n100", "fcn_8_vgg_b32_416x608_train") if args.quick else GRAPHS)
    fracs = (0.9,) if args.quick else FRACTIONS
    form, ident = formulation()
    t0 = time.perf_counter()
    rows = []
    for name in graphs:
        for frac in fracs:
            row = run_one(form, name, frac, time_limit)
            rows.append(row)
            print(f"{name:<32} {frac:.1f}  {row['status']:<12} TDI {fmt(row.get('tdi_pct'), '.3f')}%  "
                  f"model {row['model_status']}  best at {fmt(row.get('t_best_s'), '.1f')} s", flush=True)
    wall = time.perf_counter() - t0
    text = render(rows, time_limit, ident, wall, args.quick)
    print(text)
    stem = "ortools_moccasin.quick" if args.quick else "ortools_moccasin"
    if args.only and not args.quick:
        stem = "ortools_moccasin.partial"
    write_results(args.out or stem, markdown=text,
                  json_doc={"time_limit": time_limit, "formulation": ident, "wall_s": wall, "rows": rows})
    return 0


def render(rows: list, time_limit: float, ident: str, wall: float, quick: bool) -> str:
    """The markdown table of a run (with the SCIP engine's column when its results exist)."""
    scip, scip_file = scip_results()
    heur_names = sorted({h["name"] for r in rows for h in r["heuristics"]})
    lines = [
        f"# OR-Tools CP-SAT formulation on the Moccasin instances ({time_limit:g} s, 1 worker)",
        "",
        f"Formulation `{ident}` (C = 2 computations per node, staged event grid). Warm start: the best",
        f"simulated-valid plan of the registered heuristics ({', '.join(heur_names) or 'none'}), given as a",
        "complete hint and as the topological order; `-` = none valid, then the formulation's phase 1 (memory",
        "capacity minimised from the keep-all hint down to the budget, up to half the time) supplies the hint",
        "(`phase1 (...)`; `none` = phase 1 reached no plan within budget). TDI% of the best plan found (simulated);",
        "`model bound` = CP-SAT's bound *inside its restricted model* (staged order, C = 2), not a bound on the",
        "problem; `t best` = seconds from the start of the solve (model building included) to the best plan.",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores shared with other jobs; OR-Tools "
        f"{_ortools_version()}; wall {wall:.0f} s.",
        "",
        f"SCIP engine column: `anytime_solve` TDI% from `{scip_file}` (its own time limit in brackets)."
        if scip_file else "SCIP engine column: no `benchmarks/results/moccasin_protocol.json` yet (re-render with "
        "`--render` once it exists).",
        "",
        "| graph | n | B | status | TDI % | peak / B | t best (s) | model status | model bound TDI % | warm start "
        "(TDI %) | SCIP engine TDI % | Moccasin published TDI % | Moccasin 2-core re-run TDI % |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        key = (r["graph"], r["fraction"])
        ref = moccasin_reference(r["graph"], r["fraction"])
        warm = (f"{r['warm_start']} ({fmt(r['warm_tdi_pct'], '.2f')})" if r["warm_start"]
                else f"- (hint: {r.get('hint') or 'none'})")
        peak_ratio = fmt(r["peak"] / r["budget"], ".4f") if "peak" in r else "-"
        lines.append(
            f"| {r['graph']} | {r['n']} | {r['fraction']:.1f} | {r['status']} | {fmt(r.get('tdi_pct'), '.3f')} | "
            f"{peak_ratio} | {fmt(r.get('t_best_s'), '.1f')} | {r['model_status']} | "
            f"{fmt(r.get('model_bound_tdi_pct'), '.3f')} | {warm} | {scip_cell(scip.get(key))} | "
            f"{reference_cell(ref.published, 1) if ref else '-'} | {reference_cell(ref.rerun_2core) if ref else '-'} |")
    lines += ["", f"Reproduce: `python -m benchmarks.ortools_moccasin{' --quick' if quick else ''}` "
              "(with `pip install ./plugins/hybrid-remat-ortools`)."]
    return "\n".join(lines) + "\n"


def _ortools_version() -> str:
    try:
        import ortools

        return ortools.__version__
    except Exception:
        return "?"


if __name__ == "__main__":
    raise SystemExit(main())
