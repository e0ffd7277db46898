"""Benchmark the single-device heuristic portfolio.

For every graph in ``datasets/`` and the public Moccasin/Checkmate graphs
(``*_train.json`` and ``rlg_*.json``, read in place, never copied) at budgets
of 90/80/70/60/50% of the keep-all peak, run each built-in single-device
heuristic alone through :func:`hybrid_remat.sweep.sweep` (one solver per
heuristic, no polish), which re-simulates its plan: TDI% (or "infeasible")
and the heuristic's run time as ``anytime_solve`` reports it.  Writes
``benchmarks/results/heuristics.{md,csv}`` including a comparison of the
best heuristic with the published Moccasin results.

Usage::

    python -m benchmarks.heuristics            # full run
    python -m benchmarks.heuristics --quick    # a few graphs, 90/80% only
"""

from __future__ import annotations

import argparse
import time

from benchmarks._common import (
    command,
    moccasin_graphs,
    moccasin_id,
    moccasin_reported,
    profiled_graphs,
    stem,
    write_results,
)
from hybrid_remat.anytime import warmup
from hybrid_remat.heuristics import builtin_heuristics
from hybrid_remat.heuristics.local_search import LocalSearch
from hybrid_remat.sweep import Solver, sweep

QUICK = ("resnet18_b64", "fcn_8_vgg_b32_416x608_train", "rlg_n100", "rlg_n250")
#: statuses of a heuristic in anytime_solve's report -> the table's words
WORDS = {"no_plan": "infeasible", "over_budget": "INVALID", "error": "error", "skipped": "skipped"}


def graph_files(quick: bool) -> list:
    files = profiled_graphs() + moccasin_graphs("*_train.json") + moccasin_graphs("rlg_*.json")
    return [f for f in files if not quick or stem(f) in QUICK]


def cells(rows: list, names: list) -> dict:
    """(graph, budget%) -> {heuristic: TDI cell, heuristic_ms: run time, n, budget_bytes}."""
    table: dict = {}
    for r in rows:
        key = (r["graph"], int(r["budget"].rstrip("%")))
        entry = table.setdefault(key, {"graph": r["graph"], "n": r["n"], "budget_pct": key[1],
                                       "budget_bytes": r["budget_bytes"]})
        name = r["solver"]
        if r["status"] == "below_min":
            entry[name], entry[name + "_ms"] = "below-min", ""
            continue
        src = next((x for x in r.get("report", []) if x["kind"] == "heuristic"), None)
        if r["tdi_pct"] == r["tdi_pct"] and r["tdi_pct"] is not None:
            entry[name] = f"{r['tdi_pct']:.2f}"
        else:
            entry[name] = WORDS.get(src["status"], "infeasible") if src else "infeasible"
        if src is not None:
            entry[name + "_ms"] = f"{src['seconds'] * 1000:.1f}"
    for entry in table.values():
        vals = [(float(entry[h]), h) for h in names if h in entry and _is_number(entry[h])]
        entry["best"] = f"{min(vals)[0]:.2f}" if vals else "infeasible"
        entry["best_by"] = min(vals)[1] if vals else ""
    return table


def _is_number(x) -> bool:
    try:
        float(x)
    except (TypeError, ValueError):
        return False
    return True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--ls-time", type=float, default=0.7, help="local search time limit (s; the registered default)")
    ap.add_argument("--ls-long", type=float, default=10.0,
                    help="also run local search this long on the 12 published Moccasin instances (0: skip)")
    ap.add_argument("--jobs", type=int, default=1, help="parallel solves (1 keeps run times comparable)")
    ap.add_argument("--out", default="heuristics", help="results name or path prefix")
    args = ap.parse_args(argv)
    budgets = ["90%", "80%"] if args.quick else ["90%", "80%", "70%", "60%", "50%"]
    t0 = time.perf_counter()
    warmup()
    heur = [h for h in builtin_heuristics() if h.name != "local_search"] + [LocalSearch(time_limit=args.ls_time)]
    names = [h.name for h in heur]
    solvers = [Solver(h.name, (h,), (), local_search=False) for h in heur]
    files = graph_files(args.quick)
    # the time limit is only a safety net: each heuristic runs to completion (local search has its own limit)
    # bounds: the cut bound only (its gap column); the block bound's SCIP models would use the safety net's time
    rows = sweep(files, budgets, time_limit=600, solvers=solvers, jobs=args.jobs, detail=True, progress=True,
                 solve_options={"bounds": ["cut_bound"]})
    table = cells(rows, names)
    published = [f for f in files if moccasin_id(stem(f))]
    if args.ls_long > 0 and published:
        long = sweep(published, ["90%", "80%"], time_limit=600, jobs=args.jobs, progress=True,
                     solvers=[Solver("ls_long", (LocalSearch(time_limit=args.ls_long),), (), local_search=False)],
                     solve_options={"bounds": ["cut_bound"]})
        for r in long.to_dict("records") if hasattr(long, "to_dict") else long:
            entry = table.get((r["graph"], int(r["budget"].rstrip("%"))))
            if entry is not None and r["status"] != "below_min":
                entry["ls_long"] = f"{r['tdi_pct']:.2f}" if r["tdi_pct"] == r["tdi_pct"] else "infeasible"
                entry["ls_long_s"] = f"{r['wall_s']:.1f}"
    wall = time.perf_counter() - t0
    ordered = [table[k] for k in sorted(table, key=lambda k: ([stem(f) for f in files].index(k[0]), -k[1]))]
    cols = (["graph", "n", "budget_pct", "budget_bytes"] + [c for h in names for c in (h, h + "_ms")]
            + ["best", "best_by", "ls_long", "ls_long_s"])
    write_results(args.out, markdown=render(ordered, names, args, wall), csv_rows=ordered, columns=cols)
    print(f"wrote {args.out}.md/.csv in {wall:.0f} s")
    return 0


def render(rows: list, names: list, args, wall: float) -> str:
    lines = [
        "# Single-device heuristics: TDI% (run time ms)",
        "",
        f"Command: `{command(__file__)}`; wall time {wall:.0f} s (2-core machine). Each heuristic runs alone "
        "through `hybrid_remat.sweep` (no polish); run time = the heuristic's own time in `anytime_solve`'s "
        "report (Numba warm, first run on each problem). Budgets are ceil(pct x keep-all peak); 'below-min' = "
        "under the largest node+inputs need; 'infeasible' = the heuristic found no plan. local_search has a time "
        f"limit of {args.ls_time:g} s and a budget of 300 moves. Every number comes from a plan the simulator "
        "accepted.",
        "",
        "| graph | n | B% | " + " | ".join(names) + " | best |",
        "|---|---|---|" + "---|" * len(names) + "---|",
    ]
    for r in rows:
        cells_ = [r[h] if r[h] == "below-min" else f"{r[h]} ({r.get(h + '_ms', '')})" for h in names]
        best_ = "below-min" if all(r[h] == "below-min" for h in names) else f"{r.get('best', '')} {r.get('best_by', '')}"
        lines.append(f"| {r['graph']} | {r['n']} | {r['budget_pct']} | " + " | ".join(cells_) + f" | {best_} |")
    lines += ["", "## Best heuristic vs published Moccasin (CP-SAT, 16 workers, up to 1 h)", "",
              f"| id | graph | B | best heuristic TDI% | by | Moccasin TDI% | within 2 points "
              f"| local_search {args.ls_long:g} s TDI% |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        iid = moccasin_id(r["graph"])
        if not iid or r["budget_pct"] not in (90, 80):
            continue
        ref = moccasin_reported(r["graph"], r["budget_pct"] / 100)
        best = r.get("best", "")
        ok = "" if ref is None or best in ("", "infeasible") else ("yes" if float(best) <= ref + 2 else "no")
        lines.append(f"| {iid} | {r['graph']} | 0.{r['budget_pct'] // 10} | {best} | {r.get('best_by', '')} | "
                     f"{'-' if ref is None else ref} | {ok} | {r.get('ls_long', '')} |")
    slow = [(float(r[h + "_ms"]), h, r["graph"], r["budget_pct"]) for r in rows for h in names
            if h != "local_search" and r.get(h + "_ms")]
    if slow:
        worst = max(slow)
        lines += ["", f"Slowest single run (excluding local_search): {worst[0]:.0f} ms ({worst[1]} on {worst[2]} "
                  f"at {worst[3]}%)."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
