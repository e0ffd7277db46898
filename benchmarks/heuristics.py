"""Benchmark the single-device heuristic portfolio.

For every graph in ``datasets/`` and the public Moccasin/Checkmate graphs
(``../shared/benchmarks/moccasin/*_train.json`` and ``rlg_*.json``, read in
place, never copied) at budgets of 90/80/70/60/50% of the keep-all peak,
run each registered single-device heuristic once after a warm-up, verify
its plan with the simulator and record TDI% (or "infeasible") and run time.
Writes ``benchmarks/results/heuristics.{md,csv}`` including a comparison of
the best heuristic with the published Moccasin results.

Usage::

    python benchmarks/heuristics.py            # full run
    python benchmarks/heuristics.py --quick    # a few graphs, 90/80% only
"""

from __future__ import annotations

import argparse
import csv
import glob
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from hybrid_remat.budgets import keep_all_peak, min_feasible_budget  # noqa: E402
from hybrid_remat.heuristics import builtin_heuristics, warmup  # noqa: E402
from hybrid_remat.heuristics.local_search import LocalSearch  # noqa: E402
from hybrid_remat.loaders import load_graph  # noqa: E402
from hybrid_remat.problem import Problem  # noqa: E402
from hybrid_remat.simulate import simulate  # noqa: E402

PUBLISHED = {  # Moccasin (ICML'23) TDI% at 0.9 / 0.8, see ../shared/benchmarks/moccasin/README.md
    "rlg_n100": ("RLG1", 0.79, 2.30),
    "rlg_n250": ("RLG2", 0.9, 4.9),
    "rlg_n500": ("RLG3", None, None),
    "rlg_n1000": ("RLG4", 0.7, 3.4),
    "fcn_8_vgg_b32_416x608_train": ("CM1", 0.0, 0.1),
    "resnet50_b256_224x224_train": ("CM2", 0.2, 0.3),
}


def moccasin_dir() -> str | None:
    for cand in (os.environ.get("HYBRID_REMAT_MOCCASIN_DIR"), os.path.join(ROOT, "..", "shared", "benchmarks", "moccasin"),
                 os.path.join(ROOT, "..", "..", "shared", "benchmarks", "moccasin"), "/work/shared/benchmarks/moccasin"):
        if cand and os.path.isdir(cand):
            return os.path.abspath(cand)
    return None


def graph_files(quick: bool) -> list[str]:
    files = sorted(glob.glob(os.path.join(ROOT, "datasets", "*.json.gz")))
    md = moccasin_dir()
    if md:
        files += sorted(glob.glob(os.path.join(md, "*_train.json"))) + sorted(glob.glob(os.path.join(md, "rlg_*.json")))
    if quick:
        keep = ("resnet18_b64", "fcn_8_vgg", "rlg_n100", "rlg_n250")
        files = [f for f in files if any(k in f for k in keep)]
    return files


def stem(path: str) -> str:
    b = os.path.basename(path)
    for ext in (".json.gz", ".json"):
        if b.endswith(ext):
            return b[: -len(ext)]
    return b


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--ls-time", type=float, default=0.7, help="local search time limit (s; the registered default)")
    ap.add_argument("--ls-long", type=float, default=10.0,
                    help="also run local search this long on the 12 published Moccasin instances (0: skip)")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "heuristics"))
    args = ap.parse_args(argv)
    budgets = (90, 80) if args.quick else (90, 80, 70, 60, 50)
    t0 = time.perf_counter()
    warmup()
    heur = [h for h in builtin_heuristics() if h.name != "local_search"] + [LocalSearch(time_limit=args.ls_time)]
    names = [h.name for h in heur]
    rows = []
    for path in graph_files(args.quick):
        g = load_graph(path)
        peak, lo = keep_all_peak(g), min_feasible_budget(g)
        for pct in budgets:
            B = math.ceil(pct / 100 * peak)
            row = {"graph": stem(path), "n": g.n, "budget_pct": pct, "budget_bytes": B}
            if B < lo:
                for h in names:
                    row[h] = "below-min"
                    row[h + "_ms"] = ""
                rows.append(row)
                continue
            p = Problem.single(g, B)
            for h in heur:
                h.run(p)  # warm-up on this problem (caches, first-call effects)
                t = time.perf_counter()
                plan = h.run(p)
                dt = time.perf_counter() - t
                if plan is None:
                    row[h.name] = "infeasible"
                else:
                    r = simulate(p, plan)
                    row[h.name] = f"{r.tdi_pct:.2f}" if r.valid else "INVALID"
                row[h.name + "_ms"] = f"{dt * 1000:.1f}"
            if args.ls_long > 0 and stem(path) in PUBLISHED and pct in (90, 80):
                t = time.perf_counter()
                plan = LocalSearch(time_limit=args.ls_long).run(p)
                r = simulate(p, plan) if plan is not None else None
                row["ls_long"] = f"{r.tdi_pct:.2f}" if r is not None and r.valid else "infeasible"
                row["ls_long_s"] = f"{time.perf_counter() - t:.1f}"
            vals = [(float(row[h]), h) for h in names if row[h] not in ("infeasible", "INVALID", "below-min")]
            row["best"] = f"{min(vals)[0]:.2f}" if vals else "infeasible"
            row["best_by"] = min(vals)[1] if vals else ""
            rows.append(row)
            print(f"{row['graph']:32s} {pct:3d}%  best {row['best']:>10s} ({row['best_by']})", flush=True)
    wall = time.perf_counter() - t0
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    cols = (["graph", "n", "budget_pct", "budget_bytes"] + [c for h in names for c in (h, h + "_ms")]
            + ["best", "best_by", "ls_long", "ls_long_s"])
    with open(args.out + ".csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow(r)
    with open(args.out + ".md", "w") as f:
        f.write("# Single-device heuristics: TDI% (run time ms after warm-up)\n\n")
        f.write(f"Command: `python benchmarks/heuristics.py{' --quick' if args.quick else ''}`; wall time {wall:.0f} s "
                f"(2-core machine). Budgets are ceil(pct x keep-all peak); 'below-min' = under the largest "
                f"node+inputs need; 'infeasible' = the heuristic found no plan. local_search has a time limit of "
                f"{args.ls_time:g} s and a budget of 300 moves. Every number comes from a plan the simulator accepted.\n\n")
        f.write("| graph | n | B% | " + " | ".join(names) + " | best |\n")
        f.write("|---|---|---|" + "---|" * len(names) + "---|\n")
        for r in rows:
            cells = []
            for h in names:
                v = r[h]
                cells.append(v if v in ("below-min",) else f"{v} ({r[h + '_ms']})")
            f.write(f"| {r['graph']} | {r['n']} | {r['budget_pct']} | " + " | ".join(cells)
                    + f" | {r.get('best', '')} {r.get('best_by', '')} |\n")
        f.write("\n## Best heuristic vs published Moccasin (CP-SAT, 16 workers, up to 1 h)\n\n")
        f.write(f"| id | graph | B | best heuristic TDI% | by | Moccasin TDI% | within 2 points "
                f"| local_search {args.ls_long:g} s TDI% |\n|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            pub = PUBLISHED.get(r["graph"])
            if not pub or r["budget_pct"] not in (90, 80):
                continue
            ref = pub[1] if r["budget_pct"] == 90 else pub[2]
            best = r.get("best", "")
            ok = "" if ref is None or best in ("", "infeasible") else ("yes" if float(best) <= ref + 2 else "no")
            f.write(f"| {pub[0]} | {r['graph']} | 0.{r['budget_pct'] // 10} | {best} | {r.get('best_by', '')} | "
                    f"{'-' if ref is None else ref} | {ok} | {r.get('ls_long', '')} |\n")
        slow = [(float(r[h + "_ms"]), h, r["graph"], r["budget_pct"]) for r in rows for h in names
                if h != "local_search" and r.get(h + "_ms")]
        if slow:
            worst = max(slow)
            f.write(f"\nSlowest single run (excluding local_search): {worst[0]:.0f} ms ({worst[1]} on {worst[2]} "
                    f"at {worst[3]}%).\n")
    print(f"wrote {args.out}.md/.csv in {wall:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
