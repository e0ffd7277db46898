"""Where the CPU goes on the way to the first plan (issue 20: first plan
under 1 s at 100k nodes), and which component returns after its deadline.

For each (family, size, budget) one fresh process builds the graph (seed 0)
and measures, in CPU seconds (``time.process_time``, every thread of the
process) and wall seconds:

* ``admit cold``: the scheduler's admission (every component's
  ``applicable`` and prediction, inside the limit) on a graph whose structure
  was never detected (what a user's ``anytime_solve`` pays);
* ``admit warm``: the same once the structure is kept with the graph (what
  ``benchmarks.families`` measures: it detects the structure first);
* the quick start (``dtr_belady``) in pieces: the executor kernel, the prune,
  the minimal-memory plan, the simulator check in ``finish``, and the
  ledger's own simulation of the plan;
* ``solve -> first plan``: ``anytime_solve`` (warm-up done before, structure
  detected) until its first plan, ``workers=1``.

With ``--deadlines`` it also runs the whole solve (``--limit``) and lists
every assignment with its deadline and when it ended (``late`` > 0: it
returned after its deadline).

Usage::

    python3 -m benchmarks.first_plan --families resnet_stages --sizes 100000 --budgets 50,30
    python3 -m benchmarks.first_plan --families resnet_stages --sizes 100000 --budgets 30 --deadlines --limit 20
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time

from benchmarks._common import RESULTS, ROOT

__all__ = ["measure", "main"]


def _clock():
    return time.process_time(), time.perf_counter()


def _since(c):
    return time.process_time() - c[0], time.perf_counter() - c[1]


def _components():
    from hybrid_remat import plugins

    return (list(plugins.heuristics().values()), list(plugins.bounds().values()),
            list(plugins.improvers().values()), list(plugins.formulations().values()))


def measure(family: str, size: int, budget: int, *, deadlines: bool = False, limit: float = 20.0) -> dict:
    """One row (in this process): ``{piece: (cpu_s, wall_s)}`` and facts."""
    from hybrid_remat.anytime import anytime_solve, warmup
    from hybrid_remat.families import family_graph
    from hybrid_remat.heuristics.common import GraphArrays, WorkMeter, plan_from_sequence
    from hybrid_remat.heuristics.dtr import STEP_FACTOR, sampling
    from hybrid_remat.portfolio.scheduler import Scheduler
    from hybrid_remat.problem import Problem
    from hybrid_remat.segments.report import structure_lines
    from hybrid_remat.simulate import simulate

    heur, bnds, imps, forms = _components()
    warmup(heur + bnds + imps + forms)
    g = family_graph(family, size, seed=0)
    p = Problem.single(g, f"{budget}%")
    row = {"family": family, "nodes": g.n, "budget": budget}
    kw = {"heuristics": heur, "bounds": bnds, "improvers": imps, "formulations": forms}
    c = _clock()
    Scheduler(p, **kw)
    row["admit cold"] = _since(c)
    structure_lines(g)   # what benchmarks.families does before the solve (kept with the graph)
    c = _clock()
    sched = Scheduler(p, **kw)
    row["admit warm"] = _since(c)
    row["quick start"] = sched.quick.name if sched.quick is not None else None
    a = GraphArrays.from_problem(p)
    scan_all, sample = sampling(a.n)
    meter = WorkMeter(None)
    c = _clock()
    res = meter.execute(a, score="belady", seed=0, scan_all=scan_all, sample=sample,
                        max_steps=int(STEP_FACTOR * a.n) + 1000)
    row["belady kernel"] = _since(c)
    row["belady status"] = res.status
    if res.ok:
        c = _clock()
        seq = meter.prune(a, res.seq)
        row["prune"] = _since(c)
        c = _clock()
        plan, _ = plan_from_sequence(a, seq, {"solver": "dtr_belady"})
        row["minimal plan"] = _since(c)
        c = _clock()
        sim = simulate(p, plan)
        row["simulate (finish)"] = _since(c)
        c = _clock()
        simulate(p, plan)
        row["simulate (ledger)"] = _since(c)
        row["belady TDI %"] = sim.tdi_pct if sim.valid else None
    stop, first = threading.Event(), {}
    c = _clock()

    def on_improve(imp):
        if imp.plan is not None and "at" not in first:
            first["at"] = _since(c)
            first["source"] = imp.source
            stop.set()

    anytime_solve(p, limit, workers=1, stop=stop, on_improve=on_improve, warm=False)
    row["solve -> first plan"] = first.get("at")
    row["first plan from"] = first.get("source")
    if deadlines:
        row["assignments"] = _deadlines(p, limit)
    row["load"] = os.getloadavg()[0]
    return row


def _deadlines(p, limit: float) -> list:
    """Every assignment of a whole solve: ``[name, kind, round, share, deadline, ended]`` (seconds from the
    first assignment's start)."""
    from hybrid_remat.anytime import anytime_solve
    from hybrid_remat.limits import now
    from hybrid_remat.portfolio import scheduler as sched_mod

    log = []
    orig = sched_mod.Scheduler.done

    def done(self, a, outcome, *args, **kw):
        log.append([a.task.name, a.task.kind, a.round, a.share, a.deadline, now(), str(getattr(outcome, "status", ""))])
        return orig(self, a, outcome, *args, **kw)

    sched_mod.Scheduler.done = done
    try:
        t = time.perf_counter()
        r = anytime_solve(p, limit, workers=1)
        wall = time.perf_counter() - t - r.stats.get("warmup_s", 0.0)
    finally:
        sched_mod.Scheduler.done = orig
    t0 = min((x[4] - x[3] for x in log), default=0.0)
    return [{"wall_s": wall}] + [[n, k, rd, sh, dl - t0, end - t0, st] for n, k, rd, sh, dl, end, st in log]


def _cell(v) -> str:
    if isinstance(v, (tuple, list)) and len(v) == 2 and all(isinstance(x, float) for x in v):
        return f"{v[0]:.3f} ({v[1]:.2f})"
    if isinstance(v, float):
        return f"{v:.3f}"
    return "-" if v is None else str(v)


PIECES = ("admit cold", "admit warm", "belady kernel", "prune", "minimal plan", "simulate (finish)",
          "simulate (ledger)", "solve -> first plan")


def write_md(rows: list, path, command: str, load0) -> None:
    head = "| family | nodes | budget | " + " | ".join(PIECES) + " | first plan from | belady TDI % | load |"
    lines = ["# The path to the first plan (`python3 -m benchmarks.first_plan`)", "",
             f"Command: `{command}`; load average at the start {load0[0]:.1f} / {load0[1]:.1f} / {load0[2]:.1f} "
             "(2 cores, shared). Each cell: CPU s (wall s). Warm-up (Numba kernels) before everything; "
             "`admit cold`: the scheduler's admission (inside the limit) before the graph's structure was detected, "
             "`admit warm` after (`benchmarks.families` detects it first, outside the limit).", "", head,
             "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        lines.append(f"| {r['family']} | {r['nodes']} | {r['budget']}% | "
                     + " | ".join(_cell(r.get(k)) for k in PIECES)
                     + f" | {_cell(r.get('first plan from'))} | {_cell(r.get('belady TDI %'))} | {r['load']:.1f} |")
    for r in rows:
        if r.get("assignments"):
            w, rest = r["assignments"][0], r["assignments"][1:]
            lines += ["", f"Assignments of the whole solve, {r['family']} {r['nodes']} {r['budget']} %: wall "
                      f"{w['wall_s']:.2f} s (warm-up excluded)", "",
                      "| component | kind | round | share s | deadline s | ended s | late s | status |",
                      "|---|---|---|---|---|---|---|---|"]
            lines += [f"| {n} | {k} | {rd} | {sh:.2f} | {dl:.2f} | {end:.2f} | {end - dl:+.2f} | {st} |"
                      for n, k, rd, sh, dl, end, st in rest]
    path.write_text("\n".join(lines) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--families", default="random_layered,resnet_stages,decoder_checkmate")
    ap.add_argument("--sizes", default="100000")
    ap.add_argument("--budgets", default="50,30")
    ap.add_argument("--limit", type=float, default=20.0)
    ap.add_argument("--deadlines", action="store_true", help="also run the whole solve and list each deadline")
    ap.add_argument("--out", default=str(RESULTS / "first_plan.md"))
    ap.add_argument("--row", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.row:
        fam, size, budget = args.row.split(":")
        print("ROW " + json.dumps(measure(fam, int(size), int(budget), deadlines=args.deadlines, limit=args.limit)))
        return 0
    load0, rows = os.getloadavg(), []
    for fam in args.families.split(","):
        for size in args.sizes.split(","):
            for budget in args.budgets.split(","):
                cmd = [sys.executable, "-m", "benchmarks.first_plan", "--row", f"{fam}:{size}:{budget}",
                       "--limit", str(args.limit)] + (["--deadlines"] if args.deadlines else [])
                out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
                line = next((x for x in out.stdout.splitlines() if x.startswith("ROW ")), None)
                if line is None:
                    print(out.stdout[-2000:], out.stderr[-2000:], file=sys.stderr)
                    continue
                rows.append(json.loads(line[4:]))
                print({k: rows[-1][k] for k in rows[-1] if k != "assignments"}, flush=True)
    out = __import__("pathlib").Path(args.out)
    write_md(rows, out, "python3 -m benchmarks.first_plan " + " ".join(argv if argv is not None else sys.argv[1:]),
             load0)
    out.with_suffix(".json").write_text(json.dumps(rows, indent=1))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
