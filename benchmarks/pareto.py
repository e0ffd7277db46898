"""The README's figure: time overhead (TDI%) vs memory budget on the
profiled graphs of ``datasets/``, with the gap to the lower bound as a band.

One :func:`hybrid_remat.sweep.sweep` (``portfolio`` solver, every default
heuristic and formulation) over every profiled graph at 90, 80, ..., 30 % of
its keep-all peak.  Writes ``benchmarks/results/pareto_profiled.{csv,png,md}``
(the CSV is the sweep's; plans are not kept).

Usage (from the repository root)::

    python -m benchmarks.pareto                       # 11 graphs x 7 budgets x 5 s, 2 jobs: about 4 minutes
    python -m benchmarks.pareto --only resnet18_b64 --budgets 90%,50% --time-limit 2 --out /tmp/p   # reduced
    python -m benchmarks.pareto --replot              # redraw the figure from the CSV
"""

from __future__ import annotations

import argparse
import pathlib
import time

from benchmarks._common import RESULTS, command, profiled_graphs, stem, write_results
from hybrid_remat.plot import pareto
from hybrid_remat.sweep import read_csv, sweep


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budgets", default="90%,80%,...,30%")
    ap.add_argument("--time-limit", type=float, default=5.0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--ray", nargs="?", const=True, help="run on Ray (a local runtime, or the cluster ADDRESS)")
    ap.add_argument("--only", default="", help="comma-separated graph names")
    ap.add_argument("--out", default=str(RESULTS / "pareto_profiled"), help="path prefix of the outputs")
    ap.add_argument("--replot", action="store_true", help="no solving: redraw the figure from the CSV")
    args = ap.parse_args(argv)
    if args.replot:
        pareto(read_csv(f"{args.out}.csv"), f"{args.out}.png", overwrite=True)
        return 0
    files = [f for f in profiled_graphs() if not args.only or stem(f) in args.only.split(",")]
    out = pathlib.Path(args.out)
    t0 = time.perf_counter()
    sweep(files, args.budgets, time_limit=args.time_limit, jobs=args.jobs, ray=args.ray, out=f"{out}.csv",
          plans=False, plot=f"{out}.png", force=True, progress=True)
    wall = time.perf_counter() - t0
    rows = read_csv(f"{out}.csv")
    solved = [r for r in rows if r["status"] in ("optimal", "feasible")]
    proved = sum(r["status"] == "optimal" for r in rows)
    gaps = sorted(r["gap"] for r in solved)
    median_gap = gaps[len(gaps) // 2] if gaps else float("nan")
    write_results(str(out), markdown="\n".join([
        "# Time overhead vs memory budget on the profiled graphs", "",
        f"![TDI% vs budget]({out.name}.png)", "",
        f"Command: `{command(__file__, argv)}` (wall {wall:.0f} s on the shared 2-core machine, "
        f"{args.time_limit:g} s per solve). Rows: `{out.name}.csv` (one per graph and budget; every figure from "
        "the re-simulated plan).", "",
        f"{len(rows)} solves: {len(solved)} with a plan ({proved} proved optimal over every plan), "
        f"{sum(r['status'] == 'below_min' for r in rows)} budgets below the smallest feasible one; "
        f"median gap to the lower bound {100 * median_gap:.3f}%.",
    ]) + "\n")
    print(f"wrote {out}.csv, {out}.png, {out}.md in {wall:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
