"""Does ``hybrid-remat solve`` return within its time limit on large graphs?

Builds llama-like training graphs (the profiled layer of
``datasets/llama_8l_b4_s512`` repeated, :func:`~hybrid_remat.generators.repeat_layers`;
77 and 217 layers: about 10k and 28k nodes) into a temporary directory (graph
files are not committed), runs the command line on each as a user would
(``python3 -m hybrid_remat.cli solve GRAPH --budget 50% --time-limit T``)
and reads its summary line ``time Xs (warm-up Ys, ...)``: the solve took
``X - Y`` seconds; graph loading is the rest of the process's wall time.

Usage::

    python3 -m benchmarks.solve_limits                      # 10k and 28k nodes, 20 s, default workers
    python3 -m benchmarks.solve_limits --layers 77 --limit 10 --workers 1

Writes ``benchmarks/results/solve_limits.md``.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

from benchmarks._common import LLAMA, RESULTS, ROOT
from hybrid_remat.generators import repeat_layers
from hybrid_remat.loaders import load_graph
from hybrid_remat.testing import write_remat_graph

RESULT = RESULTS / "solve_limits.md"
SUMMARY = re.compile(r"^time\s+([0-9.]+)s \(warm-up ([0-9.]+)s, (\d+) worker", re.M)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", default="77,217")
    ap.add_argument("--limit", type=float, default=20.0)
    ap.add_argument("--budget", default="50%")
    ap.add_argument("--workers", default=None, help="comma-separated; default: the CLI default")
    args = ap.parse_args(argv)
    base = load_graph(LLAMA)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for L in [int(x) for x in args.layers.split(",")]:
            g = repeat_layers(base, L)
            path = os.path.join(tmp, f"llama_x{L}.json.gz")
            write_remat_graph(g, path)
            for w in (args.workers.split(",") if args.workers else [None]):
                cmd = [sys.executable, "-m", "hybrid_remat.cli", "solve", path, "--budget", args.budget,
                       "--time-limit", str(args.limit), "--quiet"] + (["--workers", w] if w else [])
                t0 = time.perf_counter()
                out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT,
                                     env={**os.environ, "PYTHONPATH": str(ROOT)})
                wall = time.perf_counter() - t0
                m = SUMMARY.search(out.stdout)
                status = re.search(r"^status\s+(\S+)", out.stdout, re.M)
                gap = re.search(r"gap ([0-9.]+)%", out.stdout)
                if m is None:
                    print(out.stdout[-2000:], out.stderr[-2000:], file=sys.stderr)
                    rows.append((L, g.n, w, None, None, None, wall, out.returncode, "-", "-"))
                    continue
                total, warm, nw = float(m.group(1)), float(m.group(2)), m.group(3)
                solve = total - warm
                rows.append((L, g.n, nw, solve, warm, wall - total, wall, out.returncode,
                             status.group(1) if status else "-", gap.group(1) if gap else "-"))
                print(f"x{L} n={g.n} workers={nw}: solve {solve:.2f} s (limit {args.limit:g}), warm-up {warm:.2f} s, "
                      f"load+start {wall - total:.2f} s, status {rows[-1][8]}, gap {rows[-1][9]}%", flush=True)
    lines = ["# Time limits on large graphs", "",
             f"`python3 -m benchmarks.solve_limits --layers {args.layers} --limit {args.limit:g} --budget {args.budget}"
             f"{' --workers ' + args.workers if args.workers else ''}`: `hybrid-remat solve` as a user runs it.", "",
             "solve = the CLI's own time minus its warm-up (outside the limit); load = the rest of the process "
             "(Python start, imports, reading the graph).", "",
             "| layers | nodes | workers | solve s | within limit + 1 s | warm-up s | load s | status | gap % |",
             "|---|---|---|---|---|---|---|---|---|"]
    for L, n, w, solve, warm, load, _wall, _rc, st, gap in rows:
        ok = "-" if solve is None else ("yes" if solve <= args.limit + 1.0 else "NO")
        f = (lambda x: "-" if x is None else f"{x:.2f}")
        lines.append(f"| {L} | {n} | {w} | {f(solve)} | {ok} | {f(warm)} | {f(load)} | {st} | {gap} |")
    RESULT.write_text("\n".join(lines) + "\n")
    return 0 if all(r[3] is not None and r[3] <= args.limit + 1.0 for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
