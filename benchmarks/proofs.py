"""What is proved: for each instance the plan, every bound with its scope
and time, and the gap.

Instances: the published ones (Moccasin's RLG1-RLG4, CM1, CM2 and the
other Checkmate training graphs, read from ``../shared/benchmarks/moccasin``,
never copied) and every graph in ``datasets/``, at 90 ... 30 % of the
keep-all peak, ``anytime_solve`` with everything registered and
``--limit`` seconds (default 60).  Every plan was checked by the simulator
(``anytime_solve`` keeps no other).  Columns:

* ``plan TDI%`` and the component that found it;
* ``bound TDI%``: the best bound over **every** plan and its source;
* each registered bound's own value (``name TDI% (s)``), as the portfolio
  ran it (``-``: skipped or nothing proved);
* ``class bound``: the best bound of a restricted class, with the class
  (e.g. ``staged``: Checkmate's staged plans of the modelled order); never
  used for the status;
* ``gap``: plan TDI minus bound TDI, in TDI points (over every plan).

A full run is long (about 20 graphs x 7 budgets x 60 s: over 2 hours);
subsets: ``--graphs`` (names or paths, e.g. a hold-out graph), ``--budgets``,
``--set published|datasets|all``.

Usage (from the repository root)::

    python -m benchmarks.proofs --graphs vgg16_b16,mlp_chain_b256 --budgets 90,70,50 --limit 60
    python -m benchmarks.proofs --set published --budgets 90,80
    python -m benchmarks.proofs --graphs /path/to/holdout.json.gz --out proofs_holdout
"""

from __future__ import annotations

import argparse
import math
import os
import pathlib
import time

from benchmarks._common import (
    MOCCASIN_IDS,
    command,
    fmt,
    moccasin_graph,
    moccasin_graphs,
    profiled_graphs,
    stem,
    tdi_of,
    write_results,
)

__all__ = ["instances", "prove", "main"]

FRACTIONS = (90, 80, 70, 60, 50, 40, 30)


def instances(which: str, names: list[str] | None) -> list[pathlib.Path]:
    """Graph files: ``names`` (stems of ``datasets/`` or the Moccasin
    directory, or paths) or the set ``which``."""
    if names:
        out = []
        for nm in names:
            if os.path.exists(nm):
                out.append(pathlib.Path(nm))
            elif profiled_graphs([nm]):
                out += profiled_graphs([nm])
            elif moccasin_graph(nm).exists():
                out.append(moccasin_graph(nm))
            else:
                raise SystemExit(f"proofs: no graph {nm!r} in datasets/ or the Moccasin directory")
        return out
    published = moccasin_graphs("rlg_*.json") + moccasin_graphs("*_train.json")
    return {"published": published, "datasets": profiled_graphs(), "all": published + profiled_graphs()}[which]


def prove(graph, fraction: int, limit: float, workers: int | None) -> dict:
    """One ``anytime_solve`` of ``graph`` at ``fraction`` % and what it proved."""
    from hybrid_remat.anytime import anytime_solve
    from hybrid_remat.errors import BudgetError
    from hybrid_remat.problem import Problem

    row = {"graph": graph.name, "n": graph.n, "budget": f"{fraction}%"}
    try:
        p = Problem.single(graph, f"{fraction}%")
    except BudgetError as e:
        return {**row, "status": "below the node bound", "note": str(e).split(":")[0]}
    t0 = time.perf_counter()
    res = anytime_solve(p, limit, workers=workers)
    wall = time.perf_counter() - t0
    bounds = {}
    for r in res.report:
        if r.kind == "bound":
            val = r.objective if r.status == "bound" and math.isfinite(r.objective) else None
            bounds[r.source] = {"tdi": tdi_of(p, val), "seconds": r.seconds, "status": r.status,
                                "note": r.note}
    plan_tdi, bound_tdi = tdi_of(p, res.objective), tdi_of(p, res.lower_bound)
    return {
        **row, "budget_bytes": int(p.budgets[0]), "status": res.status, "plan_tdi": plan_tdi, "solver": res.solver,
        "bound_tdi": bound_tdi, "bound_source": res.bound_source,
        "class_tdi": tdi_of(p, res.class_bound) if math.isfinite(res.class_bound) else None,
        "class_scope": res.class_bound_scope or None,
        "gap_points": None if plan_tdi is None or bound_tdi is None else plan_tdi - bound_tdi,
        "bounds": bounds, "wall_s": wall,
    }


def _bound_cell(b) -> str:
    if not b:
        return "-"
    if b["tdi"] is None:
        return f"- ({b['status']})"
    return f"{b['tdi']:.3f} ({b['seconds']:.1f} s)"


def table(rows, cmd: str, limit: float, note: str) -> str:
    names = sorted({k for r in rows for k in r.get("bounds", {})})
    solved = [r for r in rows if r.get("plan_tdi") is not None]
    closed = [r for r in solved if r["gap_points"] is not None and r["gap_points"] <= 0.5]
    summary = (f"{len(rows)} instances: {len(solved)} with a plan, {sum(r['status'] == 'optimal' for r in rows)} "
               f"proved optimal over every plan, {len(closed)} within 0.5 TDI points of a bound over every plan, "
               f"{sum(r['status'] == 'infeasible' for r in rows)} proved infeasible.")
    lines = [
        "# Proofs: plan, bounds with their scope and time, gap",
        "",
        f"Command: `{cmd}` ({limit:g} s per instance, `anytime_solve` with every registered component). "
        f"{note}",
        "`bound`: the best bound over every plan (its source); one column per registered bound over every "
        "plan (its value as TDI% and seconds in the portfolio); `class bound`: the best bound of a restricted "
        "plan class (its scope), never used for the status; `gap`: plan TDI minus bound TDI (points).",
        "",
        summary,
        "",
        "| graph | n | budget | status | plan TDI% (by) | bound TDI% (from) | " + " | ".join(names)
        + " | class bound TDI% (scope) | gap (points) | s |",
        "|" + "---|" * (9 + len(names)),
    ]
    for r in rows:
        if "plan_tdi" not in r:
            lines.append(f"| {r['graph']} | {r['n']} | {r['budget']} | {r['status']} |" + " - |" * (5 + len(names)))
            continue
        cls = "-" if r["class_tdi"] is None else f"{r['class_tdi']:.3f} ({r['class_scope']})"
        lines.append(
            f"| {r['graph']} | {r['n']} | {r['budget']} | {r['status']} | {fmt(r['plan_tdi'])} ({r['solver'] or '-'}) "
            f"| {fmt(r['bound_tdi'])} ({r['bound_source']}) | "
            + " | ".join(_bound_cell(r["bounds"].get(nm)) for nm in names)
            + f" | {cls} | {fmt(r['gap_points'])} | {r['wall_s']:.0f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", default="all", choices=["published", "datasets", "all"])
    ap.add_argument("--graphs", default="", help="comma-separated graph names or paths (instead of --set)")
    ap.add_argument("--budgets", default=",".join(map(str, FRACTIONS)), help="percentages, e.g. 90,70,50")
    ap.add_argument("--limit", type=float, default=60.0, help="seconds per instance")
    ap.add_argument("--workers", type=int, default=None, help="anytime_solve's workers (default: its own)")
    ap.add_argument("--out", default="proofs", help="results name or path prefix")
    ap.add_argument("--note", default="", help="a line for the table (e.g. the machine's load)")
    args = ap.parse_args(argv)
    from hybrid_remat.anytime import warmup
    from hybrid_remat.loaders import load_graph

    warmup()
    files = instances(args.set, [x for x in args.graphs.split(",") if x])
    fractions = [int(x) for x in args.budgets.split(",") if x]
    rows = []
    cmd = command(__file__, argv)
    for f in files:
        g = load_graph(f)
        name = stem(f)
        for fr in fractions:
            r = prove(g, fr, args.limit, args.workers)
            r["graph"] = f"{name} ({MOCCASIN_IDS[name]})" if name in MOCCASIN_IDS else name
            rows.append(r)
            print(f"{r['graph']} @{fr}%: {r['status']} plan {fmt(r.get('plan_tdi'))} bound {fmt(r.get('bound_tdi'))} "
                  f"class {fmt(r.get('class_tdi'))} gap {fmt(r.get('gap_points'))}", flush=True)
            write_results(args.out, json_doc={"command": cmd, "limit_s": args.limit, "rows": rows})
            write_results(args.out, markdown=table(rows, cmd, args.limit, args.note))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
