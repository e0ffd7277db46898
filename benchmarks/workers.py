"""Speed-up from worker processes: ``anytime_solve(..., workers=W)``.

For each instance and each ``W``: the objective reached at the time limit,
and the time to reach a fixed objective (the worst of the final objectives
over all ``W``: a value every setting reached), from the ``on_improve``
stream.  Speed-up = time to target with one worker / with ``W``.

Instances: llama-like training graphs (the profiled layer of
``datasets/llama_8l_b4_s512`` repeated, :func:`~hybrid_remat.generators.repeat_layers`)
at about 2.3k and 10k nodes, and two profiled graphs.

Usage::

    python3 -m benchmarks.workers                           # W = 1, 2 (this machine: 2 cores)
    python3 -m benchmarks.workers --workers 1,2,4,8,16      # a 16-core machine
    python3 -m benchmarks.workers --quick                   # one small instance, 5 s

Writes ``benchmarks/results/workers.md`` (and ``workers.json``); with
``--out NAME`` it writes ``NAME.md``/``NAME.json`` instead.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time
import warnings

from benchmarks._common import DATASETS, LLAMA, RESULTS
from hybrid_remat.anytime import anytime_solve
from hybrid_remat.generators import repeat_layers
from hybrid_remat.loaders import load_graph
from hybrid_remat.portfolio import default_workers
from hybrid_remat.problem import Problem


def instances(quick: bool):
    llama = load_graph(LLAMA)
    if quick:
        return [("llama x6 @50%", Problem.single(repeat_layers(llama, 6), "50%", kind="gpu"))]
    out = []
    for L, b in ((18, "30%"), (77, "50%")):
        out.append((f"llama x{L} @{b}", Problem.single(repeat_layers(llama, L), b, kind="gpu")))
    for name, b in (("gpt2_small_b4_s512", "50%"), ("resnet50_b32", "40%")):
        out.append((f"{name} @{b}", Problem.single(load_graph(DATASETS / f"{name}.json.gz"), b, kind="gpu")))
    return out


def run_one(problem, limit: float, workers: int, seed: int):
    trace = []

    def on_improve(ev):
        if math.isfinite(ev.objective):
            trace.append((ev.seconds, ev.objective))

    t0 = time.perf_counter()
    r = anytime_solve(problem, limit, workers=workers, seed=seed, on_improve=on_improve)
    wall = time.perf_counter() - t0
    return {"objective": r.objective, "gap": r.gap, "status": r.status, "solver": r.solver,
            "seconds": r.stats["seconds"], "warmup_s": r.stats["warmup_s"], "wall_s": wall, "trace": trace,
            "first_plan_s": trace[0][0] if trace else None}


def time_to(trace, target: float):
    for t, v in trace:
        if v <= target * (1 + 1e-9):
            return t
    return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", default="1,2", help="comma-separated worker counts (default 1,2)")
    ap.add_argument("--limit", type=float, default=20.0, help="seconds per solve (default 20)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default="workers", help="result file stem in benchmarks/results")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    ws = [int(x) for x in args.workers.split(",")]
    limit = 5.0 if args.quick else args.limit
    rows = []
    for label, p in instances(args.quick):
        runs = {}
        for w in ws:
            runs[w] = run_one(p, limit, w, args.seed)
            print(f"{label:<28} n={p.graph.n:<6} W={w:<3} objective {runs[w]['objective']:.6g} "
                  f"gap {100 * runs[w]['gap']:.3f}% first plan {runs[w]['first_plan_s']} s "
                  f"solve {runs[w]['seconds']:.2f} s", flush=True)
        target = max(r["objective"] for r in runs.values())
        for w in ws:
            runs[w]["time_to_target_s"] = time_to(runs[w]["trace"], target)
        base = runs[ws[0]]["time_to_target_s"]
        for w in ws:
            t = runs[w]["time_to_target_s"]
            runs[w]["speedup"] = base / t if base is not None and t else None
        rows.append({"instance": label, "n": p.graph.n, "target": target, "runs": runs})
    _write(rows, ws, limit, args)
    return 0


def _fmt(x, spec=".3g"):
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, spec)


def _write(rows, ws, limit, args) -> None:
    cores = default_workers()
    lines = ["# Workers: speed-up of the portfolio", "",
             f"`python3 -m benchmarks.workers --workers {','.join(map(str, ws))} --limit {limit:g}"
             f"{' --quick' if args.quick else ''}` on {platform.node() or 'this machine'} "
             f"({cores} usable cores, {os.cpu_count()} in all), seed {args.seed}.", "",
             "Objective at the limit, time to the target (the worst final objective over all W, so every W "
             "reached it), speed-up = time to target with "
             f"W={ws[0]} / with W.  Times are solve seconds (warm-up apart).", "",
             "| instance | n | W | objective | gap % | first plan s | time to target s | speed-up |",
             "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        for w in ws:
            r = row["runs"][w]
            lines.append(f"| {row['instance']} | {row['n']} | {w} | {r['objective']:.6g} | {100 * r['gap']:.3f} | "
                         f"{_fmt(r['first_plan_s'])} | {_fmt(r['time_to_target_s'])} | {_fmt(r['speedup'], '.2f')} |")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.out}.md").write_text("\n".join(lines) + "\n")
    (RESULTS / f"{args.out}.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    raise SystemExit(main())
