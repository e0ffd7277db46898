"""Calibrate the portfolio scheduler: each built-in component's time to a
useful result as ``c * n**k`` and its value, at 1k-100k nodes.

Instances: llama-like training graphs made by repeating the profiled layer
of ``datasets/llama_8l_b4_s512`` (:func:`hybrid_remat.generators.repeat_layers`)
at 8, 24, 80, 250 and 750 layers (1k-97k nodes), at 50% and 30% of keep-all
on one device, and with a CPU beside a GPU at 50% for the multi-device
components (``--multi-depths``); plus the profiled graphs of ``datasets/`` at
the same budgets.

Every default heuristic, bound and formulation (plugins included) runs once
per instance that admits it, in a forked process after the warm-up, with
``--timeout / 2`` seconds of limits (all of them honour their limits; one
that does not is killed at ``--timeout``).  A component whose own
``predict_seconds`` exceeds its limits is skipped, as the scheduler would.

Time: seconds to its *first useful result*: the return of a heuristic or a
bound, the first plan a formulation streams (else its return).  When the
component reached it before 90% of its limits in at least half of its runs,
``k`` and ``c`` are a least-squares fit of ``log seconds`` on ``log n`` (runs
that used their whole limits count at the limits: the fit is then a lower
bound); otherwise it *uses the time it is given* (``c = None``): the
scheduler gives it a share instead of a prediction.

Value (per instance, averaged over the instances that admitted it): 1 when
its plan was within 0.1% of the best plan of all components, or its bound
(over every plan) within 0.1% of the best bound; 0.1 when it gave a valid
plan or a bound above the trivial one, but not the best; 0 otherwise.  The
scheduler orders by value per predicted second.

Plans (heuristics and formulations): the share of the instances that
admitted it where it gave a valid plan within its limits.  The scheduler's
quick start is the fastest heuristic that plans almost everywhere (a
heuristic that thrashes on some structure wastes the first second there).

``--families`` measures on the graph families of :mod:`hybrid_remat.families`
instead (``--sizes`` nodes, ``--budgets``), ``--kinds`` keeps some kinds of
component, ``--merge`` keeps the shipped table: a component it has no row for
gets the new row, the others only the new ``plans`` (their time fits and
values stay those of the llama run).

Writes ``hybrid_remat/portfolio/calibration_table.py`` (the table the
scheduler ships) and ``benchmarks/results/portfolio_calibration.{md,json}``
(``portfolio_calibration_families.{md,json}`` with ``--families``).

Usage::

    python3 -m benchmarks.portfolio_calibration            # about 30 minutes on 2 busy cores
    python3 -m benchmarks.portfolio_calibration --quick    # two small depths, for a smoke test
    python3 -m benchmarks.portfolio_calibration --refit    # refit the last run's raw figures
    python3 -m benchmarks.portfolio_calibration --families all --sizes 2000,10000,32000 --kinds heuristic \
        --timeout 6 --merge                                # the heuristics on every family
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import pprint
import time
import warnings

import numpy as np

from benchmarks._common import DATASETS, LLAMA, ROOT
from benchmarks._common import RESULTS as RESULTS_DIR
from hybrid_remat import plugins
from hybrid_remat.anytime import warmup
from hybrid_remat.errors import BudgetError
from hybrid_remat.generators import repeat_layers
from hybrid_remat.interfaces import ALL_PLANS, accepts
from hybrid_remat.limits import Limits
from hybrid_remat.loaders import load_graph
from hybrid_remat.portfolio.calls import formulation_scope
from hybrid_remat.problem import Problem
from hybrid_remat.simulate import simulate

TABLE_PATH = ROOT / "hybrid_remat" / "portfolio" / "calibration_table.py"
RESULTS = RESULTS_DIR / "portfolio_calibration.md"
RAW = RESULTS_DIR / "portfolio_calibration.json"
PROFILED = ("resnet18_b64", "vgg16_b16", "gpt2_small_b4_s512", "mobilenet_v2_b32", "unet_b8")
#: a result within this relative distance of the best plan (or bound) is the best
BEST_RTOL = 1e-3
#: value of a valid plan or a bound above the trivial one that is not the best
SOME_VALUE = 0.1
#: a run that took this share of its limits used the time it was given
USED_ALL = 0.9


def instances(depths, budgets=("50%", "30%"), multi_depths=()):
    """``(label, problem)`` pairs: repeated llama layers and the profiled graphs."""
    base = load_graph(LLAMA)
    out = []

    def add(label, make):
        try:
            out.append((label, make()))
        except BudgetError:  # below the smallest feasible budget: not an instance
            pass

    for L in depths:
        g = repeat_layers(base, L)
        for b in budgets:
            add(f"llama x{L} @{b}", lambda g=g, b=b: Problem.single(g, b, kind="gpu"))
        if L in multi_depths:
            add(f"llama x{L} gpu={budgets[0]}+cpu",
                lambda g=g: Problem.from_specs(g, [f"gpu={budgets[0]}", "cpu=64GiB"]))
    for name in PROFILED:
        g = load_graph(DATASETS / f"{name}.json.gz")
        for b in budgets:
            add(f"{name} @{b}", lambda g=g, b=b: Problem.single(g, b, kind="gpu"))
    return out


def family_instances(names, sizes, budgets=("50%",)):
    """``(label, problem)`` pairs on the graph families (seed 0)."""
    from hybrid_remat.families import FAMILIES, family_graph

    out = []
    for fam in (sorted(FAMILIES) if names == ["all"] else names):
        for n in sizes:
            g = family_graph(fam, n, 0)
            for b in budgets:
                try:
                    out.append((f"{fam} n{g.n} @{b}", Problem.single(g, b, kind="gpu")))
                except BudgetError:
                    pass
    return out


def components():
    """``(kind, object)`` of every default heuristic, bound and formulation."""
    out = [("heuristic", h) for h in plugins.heuristics().values()]
    out += [("bound", b) for b in plugins.bounds().values()]
    out += [("formulation", f) for f in plugins.formulations().values()]
    return [(k, o) for k, o in out if getattr(o, "run_by_default", True)]


def _child(kind, obj, problem, conn, limits):
    t0 = time.perf_counter()
    first = []

    def on_incumbent(plan, source=None):
        if not first:
            first.append(time.perf_counter() - t0)

    try:
        plan = bound = None
        if kind == "bound":
            res = obj.bound(problem, limits=limits)
            bound = None if res is None or res.scope != ALL_PLANS else res.value
        elif kind == "heuristic":
            plan = obj.run(problem, seed=0, limits=limits)
        else:
            fr = obj.solve(problem, limits=limits, seed=0, on_incumbent=on_incumbent)
            plan = fr.plan
            if formulation_scope(obj) == ALL_PLANS and fr.lower_bound is not None:
                bound = fr.lower_bound
        secs = time.perf_counter() - t0
        conn.send(("ok", secs, first[0] if first and plan is not None else secs, plan, bound))
    except Exception as e:
        secs = time.perf_counter() - t0
        conn.send(("error", secs, secs, None, repr(e)))


def measure(kind, obj, problem, timeout):
    """``(seconds to its first result, plan value or None, bound or None,
    used its whole limits)`` of one run in a forked process."""
    ctx = mp.get_context("fork")
    r, w = ctx.Pipe(duplex=False)
    limit = timeout / 2
    p = ctx.Process(target=_child, args=(kind, obj, problem, w, Limits.seconds(limit)))
    p.start()
    w.close()
    if r.poll(timeout):
        try:
            status, _, first, plan, bound = r.recv()
        except EOFError:
            status, first, plan, bound = "error", timeout, None, None
        p.join(5)
        value = None
        if status == "ok" and plan is not None:
            sim = simulate(problem, plan)
            value = problem.objective.value(sim) if sim.valid else None
        ok = status == "ok" and bound is not None and math.isfinite(bound)
        # a formulation that returned nothing gave no first result: no time fit (the scheduler gives it a share)
        fruitless = kind == "formulation" and value is None and not ok
        return min(first, limit), value, float(bound) if ok else None, first >= USED_ALL * limit or fruitless
    p.kill()
    p.join()
    return float(limit), None, None, True


def fit(points, min_n: int = 500):
    """``(c, k)`` of ``seconds = c * n**k``: least squares in log-log over
    the points with at least ``min_n`` nodes (small graphs measure overhead,
    not growth) when two sizes are that large; ``k`` in [0.5, 3]."""
    large = [(n, t) for n, t in points if n >= min_n]
    if len({n for n, _ in large}) >= 2:
        points = large
    ns = np.array([n for n, _ in points], dtype=float)
    ts = np.maximum(np.array([t for _, t in points], dtype=float), 1e-4)
    if len(set(ns)) < 2:
        return float(ts.mean() / ns.mean()), 1.0
    k, logc = np.polyfit(np.log(ns), np.log(ts), 1)
    k = float(min(3.0, max(0.5, k)))
    c = float(np.exp(np.mean(np.log(ts) - k * np.log(ns))))
    return c, k


def scores(results: dict, trivial: float) -> dict:
    """Each component's value on one instance (module docstring) from
    ``{name: (plan value or None, bound or None)}``."""
    plans = [v for v, _ in results.values() if v is not None]
    bounds = [b for _, b in results.values() if b is not None and b > trivial * (1 + 1e-9)]
    best_plan = min(plans, default=math.inf)
    best_bound = max(bounds, default=trivial)
    out = {}
    for name, (v, b) in results.items():
        s = 0.0
        if v is not None:
            s = max(s, 1.0 if v <= best_plan * (1 + BEST_RTOL) else SOME_VALUE)
        if b is not None and b > trivial * (1 + 1e-9):
            s = max(s, 1.0 if b >= best_bound * (1 - BEST_RTOL) else SOME_VALUE)
        out[name] = s
    return out


def table_of(comps, times, score_sum, ran, planned=None) -> dict:
    """The scheduler's table from the raw figures (``planned``: instances
    with a valid plan, by name)."""
    table = {}
    for kind, obj in comps:
        pts = times.get(obj.name)
        if not pts:
            continue
        returned = sum(1 for _, _, used in pts if not used)
        c, k = fit([(n, t) for n, t, _ in pts]) if returned * 2 >= len(pts) else (None, None)
        table[obj.name] = {"kind": kind, "c": None if c is None else float(f"{c:.4g}"),
                           "k": None if k is None else round(k, 3),
                           "value": round(score_sum.get(obj.name, 0.0) / max(1, ran.get(obj.name, 1)), 3),
                           "sizes": sorted({n for n, _, _ in pts})}
        if planned is not None and kind in ("heuristic", "formulation"):
            table[obj.name]["plans"] = round(planned.get(obj.name, 0) / max(1, ran.get(obj.name, 1)), 3)
    return table


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--depths", default="8,24,80,250,750")
    ap.add_argument("--multi-depths", default="8,24,80")
    ap.add_argument("--timeout", type=float, default=20.0)
    ap.add_argument("--refit", action="store_true", help="refit from the last run's raw figures (no new runs)")
    ap.add_argument("--families", default="", help="comma-separated family names (or 'all'): measure on them")
    ap.add_argument("--sizes", default="2000,10000,32000", help="node counts of the family graphs")
    ap.add_argument("--budgets", default="50%", help="comma-separated budgets")
    ap.add_argument("--kinds", default="heuristic,bound,formulation", help="kinds of component to measure")
    ap.add_argument("--merge", action="store_true", help="replace only the measured rows of the shipped table")
    args = ap.parse_args(argv)
    fams = [x for x in args.families.split(",") if x]
    warnings.simplefilter("ignore")
    depths = [2, 6] if args.quick else [int(x) for x in args.depths.split(",")]
    multi = [2] if args.quick else [int(x) for x in args.multi_depths.split(",") if x]
    kinds = {x for x in args.kinds.split(",") if x}
    comps = [(k, o) for k, o in components() if k in kinds]
    t0 = time.perf_counter()
    raw_path = RAW.with_name("portfolio_calibration.quick.json") if args.quick else RAW
    if fams:
        raw_path = RAW.with_name("portfolio_calibration_families.json")
    if args.refit:
        raw = json.loads(raw_path.read_text())
        times = {k: [tuple(x) for x in v] for k, v in raw["times"].items()}
        score_sum, ran, n_inst = raw["scores"], raw["ran"], raw["instances"]
        planned = raw.get("planned")
    else:
        warmup([o for _, o in comps])
        budgets = tuple(x for x in args.budgets.split(",") if x)
        insts = (family_instances(fams, [int(x) for x in args.sizes.split(",")], budgets) if fams
                 else instances(depths, multi_depths=multi))
        times, score_sum, ran, planned = _run(comps, insts, args.timeout)
        n_inst = len(insts)
        raw_path.write_text(json.dumps({"times": times, "scores": score_sum, "ran": ran, "instances": n_inst,
                                        "planned": planned, "families": fams, "sizes": args.sizes,
                                        "budgets": args.budgets, "kinds": args.kinds,
                                   "timeout": args.timeout, "depths": depths, "multi_depths": multi,
                                   "wall_s": time.perf_counter() - t0, "load": os.getloadavg()[0]}) + "\n")
    table = table_of(comps, times, score_sum, ran, planned)
    if not args.quick:
        _write_table(table, merge=args.merge)
    _write_results(table, times, n_inst, args, json.loads(raw_path.read_text()))
    return 0


def _run(comps, insts, timeout):
    times: dict = {}
    score_sum: dict = {}
    ran: dict = {}
    planned: dict = {}
    for label, p in insts:
        trivial = float(p.objective.trivial_bound(p))
        results = {}
        for kind, obj in comps:
            ok, _ = accepts(obj, p)
            pred = getattr(obj, "predict_seconds", None)
            if not ok or (callable(pred) and pred(p) > timeout / 2):
                continue
            secs, value, bound, used = measure(kind, obj, p, timeout)
            results[obj.name] = (value, bound)
            planned[obj.name] = planned.get(obj.name, 0) + (value is not None)
            times.setdefault(obj.name, []).append((p.graph.n, secs, used))
            print(f"{label:<34} {obj.name:<24} {secs:8.3f}s {'(all)' if used else '     '} "
                  f"{'' if value is None else f'{value:.6g}'} {'' if bound is None else f'bound {bound:.6g}'}",
                  flush=True)
        for name, s in scores(results, trivial).items():
            ran[name] = ran.get(name, 0) + 1
            score_sum[name] = score_sum.get(name, 0.0) + s
    return times, score_sum, ran, planned


def _write_table(table, *, merge: bool = False) -> None:
    if merge:
        from hybrid_remat.portfolio.calibration_table import TABLE

        table = {**table, **{k: ({**v, "plans": table[k]["plans"]} if "plans" in table.get(k, {}) else v)
                             for k, v in TABLE.items()}}
    head = TABLE_PATH.read_text().split("TABLE: dict = ")[0]
    TABLE_PATH.write_text(head + "TABLE: dict = " + pprint.pformat(table, width=110, sort_dicts=True) + "\n")


def _write_results(table, times, n_inst, args, raw) -> None:
    if raw.get("families"):
        cmd = (f"--families {','.join(raw['families'])} --sizes {raw.get('sizes')} --budgets {raw.get('budgets')} "
               f"--kinds {raw.get('kinds')} --timeout {raw.get('timeout', args.timeout):g}{' --merge' if args.merge else ''}")
        what = f"the families {', '.join(raw['families'])} at {raw.get('sizes')} nodes, {raw.get('budgets')}"
    else:
        cmd = " --quick" if args.quick else ""
        what = (f"llama x{raw.get('depths')} (multi-device x{raw.get('multi_depths')}) and the "
                f"profiled graphs")
    lines = ["# Portfolio calibration", "",
             f"`python3 -m benchmarks.portfolio_calibration {cmd.strip()}` "
             f"({n_inst} instances: {what}; limits {raw.get('timeout', args.timeout) / 2:g} s per run; load average "
             f"{raw.get('load', float('nan')):.1f} on 2 cores; {raw.get('wall_s', 0) / 60:.0f} min).", "",
             "Predicted seconds to a first useful result `c * n**k`, fitted on the runs of at least 500 nodes "
             "(`*`: the run used its whole limits, counted at them); `-`: the component used the time it was "
             "given in most runs (no prediction: it gets a share).  Value: 1 per instance where its plan (or its "
             "bound over every plan) was within 0.1% of the best, 0.1 where it gave a valid plan (a bound above "
             "the trivial one) but not the best, averaged over the instances that admitted it.  Plans: the share "
             "of those instances where it gave a valid plan.", "",
             "| component | kind | c | k | value | plans | measured (n: seconds) |", "|---|---|---|---|---|---|---|"]
    for name, row in sorted(table.items(), key=lambda kv: (kv[1]["kind"], kv[0])):
        pts = {}
        for n, t, used in times[name]:
            pts.setdefault(n, []).append(f"{t:.3g}{'*' if used else ''}")
        meas = "; ".join(f"{n}: {'/'.join(v)}" for n, v in sorted(pts.items()))
        ck = ("-", "-") if row["c"] is None else (f"{row['c']:.3g}", f"{row['k']:.2f}")
        pl = "" if row.get("plans") is None else f"{row['plans']:.2f}"
        lines.append(f"| {name} | {row['kind']} | {ck[0]} | {ck[1]} | {row['value']:.2f} | {pl} | {meas} |")
    if raw.get("families"):
        path = RESULTS.with_name("portfolio_calibration_families.md")
    else:
        path = RESULTS.with_name("portfolio_calibration.quick.md") if args.quick else RESULTS
    path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
