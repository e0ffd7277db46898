"""Calibrate the portfolio scheduler: each built-in heuristic's and bound's
run time as ``c * n**k`` and its value (win rate).

Instances: llama-like training graphs made by repeating the profiled layer
of ``datasets/llama_8l_b4_s512`` (:func:`hybrid_remat.generators.repeat_layers`)
at several depths, at 50% and 30% of keep-all on one device, and with a CPU
beside a GPU at 50% for the multi-device heuristics; plus the profiled
graphs of ``datasets/`` at the same budgets for the win rates.

Each component runs once per instance in a forked process (after the
warm-up), killed after ``--timeout`` seconds (a killed run counts at the
timeout, so its fitted time is a lower bound).  ``k`` and ``c`` are a
least-squares fit of ``log seconds`` on ``log n``.  Value: heuristics, the
share of instances where the plan was within 0.1% of the best heuristic
plan; bounds, the share where the bound beat the trivial one.  Components
that declare ``"honours_limits"`` use the time they are given: they run
within half the timeout for their value, and get no time prediction.

Writes ``hybrid_remat/portfolio/calibration_table.py`` (the table the
scheduler ships) and ``benchmarks/results/portfolio_calibration.md``.

Usage::

    python3 -m benchmarks.portfolio_calibration            # about 10 minutes on 2 busy cores
    python3 -m benchmarks.portfolio_calibration --quick    # two small depths, for a smoke test
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
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
from hybrid_remat.interfaces import accepts
from hybrid_remat.limits import Limits
from hybrid_remat.loaders import load_graph
from hybrid_remat.portfolio.calls import call_bound, call_heuristic
from hybrid_remat.portfolio.runner import honours_limits
from hybrid_remat.problem import Problem
from hybrid_remat.simulate import simulate

TABLE_PATH = ROOT / "hybrid_remat" / "portfolio" / "calibration_table.py"
RESULTS = RESULTS_DIR / "portfolio_calibration.md"
RAW = RESULTS_DIR / "portfolio_calibration.json"
PROFILED = ("resnet18_b64", "vgg16_b16", "gpt2_small_b4_s512", "mobilenet_v2_b32", "unet_b8")


def instances(depths, budgets=("50%", "30%")):
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
        add(f"llama x{L} gpu={budgets[0]}+cpu", lambda g=g: Problem.from_specs(g, [f"gpu={budgets[0]}", "cpu=64GiB"]))
    for name in PROFILED:
        g = load_graph(DATASETS / f"{name}.json.gz")
        for b in budgets:
            add(f"{name} @{b}", lambda g=g, b=b: Problem.single(g, b, kind="gpu"))
    return out


def _child(kind, obj, problem, conn, limits):
    t0 = time.perf_counter()
    try:
        if kind == "bound":
            res = call_bound(obj, problem, limits=limits)
            out = (None, None if res is None or res.scope != "all plans" else res.value)
        else:
            out = call_heuristic(obj, problem, seed=0, limits=limits)
        conn.send(("ok", time.perf_counter() - t0, out[0], out[1]))
    except Exception as e:
        conn.send(("error", time.perf_counter() - t0, None, repr(e)))


def measure(kind, obj, problem, timeout):
    """``(seconds, value or None, bound or None, timed_out)`` of one run in a forked process."""
    ctx = mp.get_context("fork")
    r, w = ctx.Pipe(duplex=False)
    # a component that honours its limits uses what it is given: measured for its value only, within half the timeout
    limits = Limits.seconds(timeout / 2) if honours_limits(obj) else None
    p = ctx.Process(target=_child, args=(kind, obj, problem, w, limits))
    p.start()
    w.close()
    if r.poll(timeout):
        try:
            status, secs, plan, bound = r.recv()
        except EOFError:
            status, secs, plan, bound = "error", timeout, None, None
        p.join(5)
        value = None
        if status == "ok" and plan is not None:
            sim = simulate(problem, plan)
            value = sim.total_time if sim.valid else None
        return secs, value, bound if status == "ok" else None, False
    p.kill()
    p.join()
    return float(timeout), None, None, True


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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--depths", default="2,6,18,54")
    ap.add_argument("--timeout", type=float, default=20.0)
    ap.add_argument("--refit", action="store_true", help="refit from the last run's raw figures (no new runs)")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    depths = [2, 6] if args.quick else [int(x) for x in args.depths.split(",")]
    comps = [("heuristic", h) for h in plugins.heuristics().values()] + \
            [("bound", b) for b in plugins.bounds().values()]
    if args.refit:
        raw = json.loads(RAW.read_text())
        times = {k: [tuple(x) for x in v] for k, v in raw["times"].items()}
        wins, ran, n_inst = raw["wins"], raw["ran"], raw["instances"]
    else:
        warmup([o for _, o in comps])
        insts = instances(depths)
        times, wins, ran = _run(comps, insts, args.timeout)
        n_inst = len(insts)
        RAW.write_text(json.dumps({"times": times, "wins": wins, "ran": ran, "instances": n_inst, "timeout": args.timeout,
                                   "depths": depths}))
    table = {}
    for kind, obj in comps:
        if obj.name not in times:
            continue
        # a bound that returned nothing (it declined the instance) says nothing about its growth
        pts = [(n, t) for n, t, timed_out, got in times[obj.name] if got or timed_out or kind == "heuristic"]
        c, k = fit(pts) if pts and not honours_limits(obj) else (None, None)
        table[obj.name] = {"kind": kind, "c": None if c is None else float(f"{c:.4g}"),
                           "k": None if k is None else round(k, 3),
                           "value": round(wins.get(obj.name, 0) / max(1, ran.get(obj.name, 1)), 3),
                           "sizes": sorted({n for n, _ in pts})}
    _write_table(table)
    _write_results(table, times, n_inst, args)
    return 0


def _run(comps, insts, timeout):
    times: dict = {}
    wins: dict = {}
    ran: dict = {}
    for label, p in insts:
        trivial = float(p.objective.trivial_bound(p))
        results = {}
        for kind, obj in comps:
            ok, _ = accepts(obj, p)
            if not ok:
                continue
            secs, value, bound, timed_out = measure(kind, obj, p, timeout)
            results[obj.name] = (kind, value, bound)
            times.setdefault(obj.name, []).append((p.graph.n, secs, timed_out, value is not None or bound is not None))
            print(f"{label:<34} {obj.name:<22} {secs:8.3f}s {'timeout' if timed_out else ''} "
                  f"{'' if value is None else f'{value:.6g}'} {'' if bound is None else f'bound {bound:.6g}'}",
                  flush=True)
        best = min([v for k, v, _ in results.values() if k == "heuristic" and v is not None], default=math.inf)
        for name, (kind, value, bound) in results.items():
            ran[name] = ran.get(name, 0) + 1
            if kind == "heuristic":
                won = value is not None and value <= best * (1 + 1e-3)
            else:
                won = bound is not None and bound > trivial * (1 + 1e-9)
            wins[name] = wins.get(name, 0) + int(won)
    return times, wins, ran


def _write_table(table) -> None:
    head = TABLE_PATH.read_text().split("TABLE: dict = ")[0]
    TABLE_PATH.write_text(head + "TABLE: dict = " + pprint.pformat(table, width=110, sort_dicts=True) + "\n")


def _write_results(table, times, n_inst, args) -> None:
    lines = ["# Portfolio calibration", "",
             f"`python3 -m benchmarks.portfolio_calibration{' --quick' if args.quick else ''}` "
             f"({n_inst} instances, timeout {args.timeout:g} s per run).", "",
             "Predicted seconds `c * n**k`, fitted on the runs of at least 500 nodes (of bounds: those that returned "
             "a bound or timed out) (`+`: killed at the timeout, counted at it: the fit is then a lower bound); value = win "
             "rate (heuristics: within 0.1% of the best heuristic plan; bounds: above the trivial bound).  "
             "Components that honour their limits get no prediction.", "",
             "| component | kind | c | k | value | measured (n: seconds) |", "|---|---|---|---|---|---|"]
    for name, row in sorted(table.items(), key=lambda kv: (kv[1]["kind"], kv[0])):
        pts = {}
        for n, t, to, _ in times[name]:
            pts.setdefault(n, []).append(f"{t:.3g}{'+' if to else ''}")
        meas = "; ".join(f"{n}: {'/'.join(v)}" for n, v in sorted(pts.items()))
        ck = ("-", "-") if row["c"] is None else (f"{row['c']:.3g}", f"{row['k']:.2f}")
        lines.append(f"| {name} | {row['kind']} | {ck[0]} | {ck[1]} | {row['value']:.2f} | {meas} |")
    RESULTS.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
