"""How the single-device heuristics, improvers and the cut bound scale: time
at ~1k, 10k and 100k nodes and the fitted exponent of time vs graph size,
on several graph families.

Graphs: :data:`hybrid_remat.families.FAMILIES` (``--families``, default
our tracer's llama layers repeated, the llama-like decoder in the Checkmate
convention, the diffusion U-Net and the random layered training graph) at
``--sizes`` nodes (default 1000, 10000, 100000), budgets 50% and 30% of the
keep-all peak.  After the Numba warm-up, every (component, graph,
budget) runs once in a forked child process with a hard timeout
(``--timeout``): the heuristics as registered, without limits (their
natural time; ``local_search`` and ``staged_evict`` have time caps of their
own, also shown uncapped), and the improvers on the best plan of the fast
heuristics (``local_search`` and ``lns`` with a fixed number of moves); the
cut bound as the portfolio calls it (``CutBoundSource().bound`` with
:data:`BOUND_LIMIT_S`, the share it gets of a 60-s limit).  The column
*first phase* says whether the default portfolio's scheduler puts the
component in its first (construct) phase at the largest size and with what
predicted seconds.  The
exponent ``k`` of ``time ~ n^k`` is fitted (least squares in log-log) on
CPU seconds; a run cut by the timeout enters the fit at the timeout, so its
exponent is a lower bound (``>``).  A second table runs every component at
the largest size with ``limits=Limits.seconds(--limit)``: the wall time says
whether it honours its limits, and the fastest valid plan is the time to a
first plan.

Usage::

    python3 -m benchmarks.heuristic_scaling                    # full run
    python3 -m benchmarks.heuristic_scaling --families unet --sizes 1000,10000 --timeout 20 --out /tmp/scaling.md
    python3 -m benchmarks.heuristic_scaling --jobs 12           # in parallel (a quiet many-core machine)

Writes ``benchmarks/results/heuristic_scaling.{md,json}`` (or ``--out``).
"""

from __future__ import annotations

import argparse
import copy
import inspect
import json
import math
import multiprocessing as mp
import os
import pathlib
import platform
import time

import numpy as np

from benchmarks._common import RESULTS, ROOT
from hybrid_remat import plugins
from hybrid_remat.families import family_graph
from hybrid_remat.heuristics import warmup
from hybrid_remat.interfaces import accepts
from hybrid_remat.limits import Limits
from hybrid_remat.problem import Problem
from hybrid_remat.simulate import simulate

FAMILIES = ("decoder_tracer", "decoder_checkmate", "unet", "random_layered")
#: the cut bound's limits: the construct share (25 %) of a 60-s limit
BOUND_LIMIT_S = 15.0
#: heuristics whose plan starts the improvers (fast at every size)
STARTS = ("dtr_size", "dtr_next_use", "dtr_eq")
MOVES = 10

_PROBLEMS: dict = {}   # (family, size, budget) -> Problem; filled before the children fork
_STARTS: dict = {}     # (family, size, budget) -> start plan of the improvers


class RuinMoves:
    """``MOVES`` ruin-and-recreate moves (the move of ``local_search`` and
    ``lns``) from a plan, best kept: the cost of a move."""

    def improve(self, problem, plan, *, seed=0, limits=None):
        from hybrid_remat.heuristics.common import GraphArrays, WorkMeter, finish, sequence_of_plan
        from hybrid_remat.heuristics.lifetime_split import ruin_and_recreate

        if plan is None:
            return None
        a = GraphArrays.from_problem(problem)
        meter = WorkMeter(limits)
        rng = np.random.default_rng(seed)
        best = sequence_of_plan(plan)
        for _ in range(MOVES):
            cand = ruin_and_recreate(a, best, rng, frac=float(rng.uniform(0.05, 0.5)), pick=int(rng.integers(3)),
                                     noise=float(rng.uniform(0.0, 0.5)), meter=meter)
            if cand is not None and a.cost[cand].sum() <= a.cost[best].sum():
                best = cand
        return finish(problem, a, best, "ruin_moves")


def components(problem) -> list[tuple[str, str, object]]:
    """``(label, kind, object)`` of every single-device heuristic and improver that accepts ``problem``."""
    from hybrid_remat.heuristics.local_search import LocalSearch

    out = []
    for name, h in sorted(plugins.heuristics().items(), key=lambda kv: (getattr(kv[1], "rank", 10.0), kv[0])):
        caps = set(getattr(h, "capabilities", ()))
        if "bound_only" in caps or not accepts(h, problem)[0]:
            continue
        out.append((name, "heuristic", h))
        if getattr(h, "max_seconds", None) or getattr(h, "time_limit", None):
            u = copy.copy(h)  # the same object without its own time cap
            if getattr(u, "max_seconds", None):
                u.max_seconds = math.inf
            if getattr(u, "time_limit", None):
                u.time_limit = None
            out.append((f"{name} (uncapped)", "heuristic", u))
    for name, imp in sorted(plugins.improvers().items(), key=lambda kv: (getattr(kv[1], "rank", 10.0), kv[0])):
        if not accepts(imp, problem)[0]:
            continue
        if isinstance(imp, LocalSearch):  # they run until their limits: the second table
            continue
        out.append((name, "improver", imp))
    out.append((f"ruin-and-recreate ({MOVES} moves)", "improver", RuinMoves()))
    cut = plugins.bounds().get("cut_bound")
    if cut is not None and accepts(cut, problem)[0]:
        out.append(("cut_bound", "bound", cut))
    return out


def first_phase(problem, limit: float = 60.0) -> dict:
    """``{name: cell}``: whether the default portfolio's scheduler puts each
    heuristic and bound in its first (construct) phase on ``problem`` (with
    its predicted seconds; skipped there when that exceeds a ``limit``-s
    solve), or why it does not admit it."""
    from hybrid_remat.portfolio.scheduler import Scheduler

    s = Scheduler(problem, heuristics=list(plugins.heuristics().values()), bounds=list(plugins.bounds().values()))
    out = {}
    for t in s.construct:
        p = t.predicted
        out[t.name] = ("yes" if p is None else f"yes ({p:.2g})") if p is None or p <= limit else f"skipped ({p:.2g} s)"
    for _, obj, why in s.skipped:
        out[getattr(obj, "name", "?")] = f"no: {why}"
    return out


def _takes(method, name: str) -> bool:
    try:
        return name in inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False


def call(kind: str, obj, problem, start, lim):
    """Run a component with ``limits=`` when it takes them, else the older
    way (``run_detailed(deadline=)`` or plain ``run``), as the portfolio does."""
    if kind == "improver":
        return obj.improve(problem, start, seed=0, limits=lim)
    if kind == "bound":
        return obj.bound(problem, limits=lim or Limits.seconds(BOUND_LIMIT_S))
    if _takes(obj.run, "limits"):
        return obj.run(problem, seed=0, limits=lim)
    if lim is not None and callable(getattr(obj, "run_detailed", None)) and _takes(obj.run_detailed, "deadline"):
        return obj.run_detailed(problem, seed=0, deadline=lim.deadline).get("plan")
    return obj.run(problem, seed=0)


def _run_one(key, label, kind, obj, limit, conn) -> None:
    """Child process: run one component and send ``(wall, cpu, tdi, note)``."""
    problem = _PROBLEMS[key]
    lim = Limits.seconds(limit) if limit else None
    try:
        t0, c0 = time.perf_counter(), time.process_time()
        plan = call(kind, obj, problem, _STARTS.get(key), lim)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        tdi, note = None, "no plan"
        if kind == "bound":
            tdi, note = (plan.value - problem.base_cost) / problem.base_cost * 100, "bound"
        elif plan is not None:
            r = simulate(problem, plan)
            tdi, note = (r.tdi_pct, "") if r.valid else (None, f"INVALID: {r.error}")
        conn.send((wall, cpu, tdi, note))
    except Exception as e:  # noqa: BLE001 - reported in the table
        conn.send((math.nan, math.nan, None, f"error: {e!r}"[:120]))


def run_jobs(jobs: list[tuple], timeout: float, parallel: int) -> list[dict]:
    """Run ``(key, label, kind, obj, limit)`` jobs in forked children, ``parallel`` at a time."""
    ctx = mp.get_context("fork")
    pending = list(enumerate(jobs))
    running: list = []
    out = []
    while pending or running:
        while pending and len(running) < parallel:
            idx, job = pending.pop(0)
            rx, tx = ctx.Pipe(duplex=False)
            p = ctx.Process(target=_run_one, args=(*job, tx))
            p.start()
            running.append(((idx, job), p, rx, time.perf_counter()))
        time.sleep(0.02)
        still = []
        for (idx, job), p, rx, t0 in running:
            key, label, kind, obj, limit = job
            row = {"idx": idx, "family": key[0], "size": key[1], "budget": key[2], "n": _PROBLEMS[key].graph.n,
                   "component": label,
                   "kind": kind, "limit_s": limit,
                   "honours_limits": "honours_limits" in set(getattr(obj, "capabilities", ()))}
            if rx.poll():
                wall, cpu, tdi, note = rx.recv()
                p.join()
                out.append({**row, "wall_s": wall, "cpu_s": cpu, "tdi_pct": tdi, "note": note, "timed_out": False})
                print(f"{key} {label}: {cpu:.2f} CPU s, {wall:.2f} s, {tdi} {note}", flush=True)
            elif time.perf_counter() - t0 > timeout:
                p.kill()
                p.join()
                out.append({**row, "wall_s": timeout, "cpu_s": timeout, "tdi_pct": None, "note": "timeout",
                            "timed_out": True})
                print(f"{key} {label}: timeout", flush=True)
            else:
                still.append(((idx, job), p, rx, t0))
        running = still
    return sorted(out, key=lambda r: r["idx"])


def fit_exponent(ns, ts) -> float:
    """Least-squares slope of log(t) vs log(n) (``nan`` with fewer than two points)."""
    pts = [(math.log(n), math.log(max(t, 1e-4))) for n, t in zip(ns, ts) if t is not None and math.isfinite(t)]
    if len(pts) < 2:
        return math.nan
    x, y = np.array(pts).T
    return float(np.polyfit(x, y, 1)[0])


def _fmt_t(r) -> str:
    if r is None:
        return "-"
    if r["timed_out"]:
        return f">{r['wall_s']:.0f}"
    return f"{r['cpu_s']:.2f}" if r["cpu_s"] < 10 else f"{r['cpu_s']:.1f}"


def _fmt_plan(r) -> str:
    if r is None or r["timed_out"]:
        return "-"
    if r["tdi_pct"] is None:
        return "none" if r["note"] == "no plan" else r["note"][:30]
    return f"{r['tdi_pct']:.1f}"


def _honours(label: str) -> bool:
    """Whether the registered component behind a table label declares ``honours_limits``."""
    if label.startswith("ruin-and-recreate"):
        return True  # the move of local_search and lns, metered by their work budgets
    name = label.split(" ")[0]
    obj = plugins.heuristics().get(name) or plugins.improvers().get(name)
    return obj is not None and "honours_limits" in set(getattr(obj, "capabilities", ()))


def _natural_table(rows: list[dict], sizes: list[int], nodes: dict, phase: dict) -> tuple[list[str], dict]:
    """The table without limits of one family, and the fitted exponents."""
    lines = ["| component | kind | budget | " + " | ".join(f"{nodes[s]:,} nodes" for s in sizes)
             + " | exponent | plan (TDI%) " + " / ".join(f"{nodes[s] // 1000}k" if nodes[s] >= 1000 else str(nodes[s])
                                                          for s in sizes)
             + f" | first phase at {nodes[sizes[-1]]:,} (predicted s), 60-s solve |",
             "|---|---|---|" + "---|" * len(sizes) + "---|---|---|"]
    order = []
    for r in rows:
        if (r["component"], r["budget"]) not in order:
            order.append((r["component"], r["budget"]))
    exps = {}
    for comp, bud in order:
        by_s = {r["size"]: r for r in rows if r["component"] == comp and r["budget"] == bud}
        upto = []  # the sizes up to the first timeout (later ones say nothing more)
        for sz in sizes:
            if sz in by_s:
                upto.append(sz)
                if by_s[sz]["timed_out"]:
                    break
        ns = [nodes[sz] for sz in upto]
        ts = [by_s[sz]["cpu_s"] if not by_s[sz]["timed_out"] else by_s[sz]["wall_s"] for sz in upto]
        k = fit_exponent(ns, ts)
        lower = any(by_s[sz]["timed_out"] for sz in upto)
        exps[(comp, bud)] = (k, lower)
        kind = next(iter(by_s.values()))["kind"]
        ks = "-" if math.isnan(k) else (">" if lower else "") + f"{k:.2f}"
        name = comp.split(" ")[0]
        fp = "-" if "(" in comp or kind == "improver" else phase.get(bud, {}).get(name, "-")
        lines.append(f"| {comp} | {kind} | {bud} | " + " | ".join(_fmt_t(by_s.get(sz)) for sz in sizes)
                     + f" | {ks} | " + " / ".join(_fmt_plan(by_s.get(sz)) for sz in sizes) + f" | {fp} |")
    return lines, exps


def write_md(path: pathlib.Path, rows: list[dict], meta: dict) -> None:
    sizes = meta["sizes"]
    natural = [r for r in rows if not r["limit_s"]]
    limited = [r for r in rows if r["limit_s"]]
    lines = [
        "# Heuristic scaling: time vs graph size, several families", "",
        f"Command: `{meta['command']}`; {meta['machine']}; {meta['date']}; commit {meta.get('commit', '?')}; "
        f"wall {meta['wall_s']:.0f} s." + (f" {meta['note']}" if meta.get("note") else ""), "",
        "Graphs: `hybrid_remat.families.family_graph(family, size)`.  Each run is one forked child after the "
        "Numba warm-up; CPU seconds of the call (the plan is then checked by the simulator, not timed).  `>T`: "
        "stopped by the timeout (the exponent is then a lower bound, `>`).  Plan: TDI% of the plan (`none`: no "
        f"plan; for `cut_bound` the bound's TDI%, called as the portfolio does with {BOUND_LIMIT_S:g}-s limits).  "
        "First phase: whether the default portfolio's scheduler runs the component in its first (construct) "
        "phase at the largest size, with its predicted seconds.", ""]
    exps = {}
    for fam in meta["families"]:
        nodes = {int(k): v for k, v in meta["nodes"][fam].items()}
        fam_rows = [r for r in natural if r["family"] == fam]
        if not fam_rows:
            continue
        lines += [f"## {fam}: without limits", "",
                  "Built in " + ", ".join(f"{meta['build_s'][fam][str(sz)]:.1f} s ({nodes[sz]:,} nodes)"
                                          for sz in sizes) + ".", ""]
        table, e = _natural_table(fam_rows, sizes, nodes, meta.get("first_phase", {}).get(fam, {}))
        lines += table + [""]
        declined = {(name, cell) for ph in meta.get("first_phase", {}).get(fam, {}).values()
                    for name, cell in ph.items()
                    if cell.startswith("no: ") and "multi-device" not in cell and "repeated blocks" not in cell
                    and name in plugins.heuristics()}
        if declined:
            lines += [f"Declined at {nodes[sizes[-1]]:,} nodes (not in any phase, no row): "
                      + "; ".join(f"{name} ({cell[4:]})" for name, cell in sorted(declined)) + ".", ""]
        for (comp, bud), v in e.items():
            exps.setdefault((comp, bud), []).append(v)
    steep = sorted({c for (c, _), vs in exps.items() for k, _ in vs if not math.isnan(k) and k > 1.3})
    unsettled = sorted({c for (c, _), vs in exps.items() for k, low in vs if low and not math.isnan(k) and k <= 1.3}
                       - set(steep))
    near = sorted({c for (c, _), vs in exps.items() for k, _ in vs if not math.isnan(k) and k <= 1.3}
                  - set(steep) - set(unsettled) - {c.replace(" (uncapped)", "") for c in steep})
    honours = {r["component"]: r.get("honours_limits", _honours(r["component"])) for r in rows}
    gated = [c for c in steep if honours.get(c)]
    ungated = [c for c in steep if not honours.get(c)]
    lines += [f"Near-linear (exponent at most 1.3 at every budget and family): {', '.join(near) or '-'}.  ",
              f"Super-linear (exponent above 1.3 somewhere), gated by their work budgets and deadlines "
              f"(`honours_limits`): {', '.join(gated) or '-'}.  ",
              f"Super-linear and not declaring `honours_limits`: {', '.join(ungated) or '-'}.  ",
              f"Not settled (timed out at the largest size, the exponent is only a lower bound): "
              f"{', '.join(unsettled) or '-'}."]
    if limited:
        lim = limited[0]["limit_s"]
        lines += ["", f"## With limits: `limits=Limits.seconds({lim:g})` at the largest size", "",
                  "Wall and CPU seconds of the call: a component that honours its limits returns within the "
                  "limit plus its last kernel step, simulator check or fixed set-up (the work budgets assume the "
                  "share of a core the load average leaves, so on a loaded machine wall exceeds CPU time).", "",
                  "| family | nodes | component | kind | budget | wall s | CPU s | wall within limit + 0.5 s | "
                  "plan (TDI%) |", "|---|---|---|---|---|---|---|---|---|"]
        for r in limited:
            within = "yes" if (not r["timed_out"] and r["wall_s"] <= r["limit_s"] + 0.5) else "**no**"
            lines.append(f"| {r['family']} | {r['n']:,} | {r['component']} | {r['kind']} | {r['budget']} | "
                         f"{_fmt_t({**r, 'cpu_s': r['wall_s']})} | {_fmt_t(r)} | {within} | {_fmt_plan(r)} |")
        lines.append("")
        for fam in meta["families"]:
            for bud in meta["budgets"]:
                f = sorted((r["wall_s"], r["component"], r["n"]) for r in limited if r["family"] == fam
                           and r["budget"] == bud and r["kind"] == "heuristic" and r["tdi_pct"] is not None)
                if f:
                    lines.append(f"First plan, {fam} at {f[0][2]:,} nodes, {bud}: {f[0][0]:.2f} s wall ({f[0][1]}).  ")
    path.write_text("\n".join(lines) + "\n")


def _commit() -> str:
    import subprocess

    if os.environ.get("HYBRID_REMAT_COMMIT"):  # a copy of the tree without its git directory
        return os.environ["HYBRID_REMAT_COMMIT"]
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              timeout=10).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--families", default=",".join(FAMILIES), help="comma-separated names of hybrid_remat.families")
    ap.add_argument("--sizes", default="1000,10000,100000", help="comma-separated node counts")
    ap.add_argument("--budgets", default="50%,30%")
    ap.add_argument("--timeout", type=float, default=60.0, help="hard limit of one run without limits (s)")
    ap.add_argument("--limit", type=float, default=1.0, help="limits of the second table (s); 0: skip it")
    ap.add_argument("--jobs", type=int, default=1, help="runs at a time")
    ap.add_argument("--only", default="", help="comma-separated component names (default: all)")
    ap.add_argument("--note", default="", help="a sentence for the header (e.g. the machine's load)")
    ap.add_argument("--out", default=str(RESULTS / "heuristic_scaling.md"))
    ap.add_argument("--render", default="", help="only write the table of a saved .json (no runs)")
    args = ap.parse_args(argv)
    if args.render:
        saved = json.loads(pathlib.Path(args.render).read_text())
        write_md(pathlib.Path(args.out), saved["rows"], saved["meta"])
        print(pathlib.Path(args.out).read_text())
        return
    t_start = time.perf_counter()
    families = [x.strip() for x in args.families.split(",") if x.strip()]
    sizes = [int(x) for x in args.sizes.split(",")]
    budgets = [b.strip() for b in args.budgets.split(",")]
    warmup()
    from hybrid_remat.bounds.cut import warmup as bounds_warmup
    bounds_warmup()
    meta = {"families": families, "sizes": sizes, "budgets": budgets, "nodes": {}, "build_s": {}, "first_phase": {},
            "command": "python3 -m benchmarks.heuristic_scaling" + "".join(
                f" --{k} {v}" for k, v in (("families", args.families), ("sizes", args.sizes),
                                            ("budgets", args.budgets), ("timeout", f"{args.timeout:g}"),
                                            ("limit", f"{args.limit:g}"), ("jobs", args.jobs)))
            + (f" --only {args.only}" if args.only else ""),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}",
            "date": time.strftime("%Y-%m-%d"), "commit": _commit(), "note": args.note}
    for fam in families:
        meta["nodes"][fam], meta["build_s"][fam], meta["first_phase"][fam] = {}, {}, {}
        for sz in sizes:
            t0 = time.perf_counter()
            g = family_graph(fam, sz, 0)
            meta["build_s"][fam][str(sz)] = time.perf_counter() - t0
            meta["nodes"][fam][str(sz)] = g.n
            for b in budgets:
                p = Problem.single(g, b)
                _PROBLEMS[(fam, sz, b)] = p
                if sz == max(sizes):
                    meta["first_phase"][fam][b] = first_phase(p)
                best = None
                hs = plugins.heuristics()
                for name in STARTS:
                    plan = hs[name].run(p, limits=Limits.seconds(30)) if name in hs else None
                    if plan is not None and simulate(p, plan).valid:
                        v = simulate(p, plan).total_time
                        if best is None or v < best[0]:
                            best = (v, plan)
                _STARTS[(fam, sz, b)] = None if best is None else best[1]
    only = {x.strip() for x in args.only.split(",") if x.strip()}
    jobs = []
    for fam in families:
        for sz in sizes:
            for b in budgets:
                for label, kind, obj in components(_PROBLEMS[(fam, sz, b)]):
                    if only and label.split(" ")[0] not in only:
                        continue
                    jobs.append(((fam, sz, b), label, kind, obj, 0.0))
    if args.limit > 0:
        big = max(sizes)
        for fam in families:
            for b in budgets:
                key = (fam, big, b)
                comps = [c for c in components(_PROBLEMS[key])
                         if "uncapped" not in c[0] and "moves" not in c[0] and c[1] != "bound"]
                comps += [(name, "improver", imp) for name, imp in sorted(plugins.improvers().items())
                          if name not in {c[0] for c in comps if c[1] == "improver"} and accepts(imp, _PROBLEMS[key])[0]]
                for label, kind, obj in comps:
                    if only and label.split(" ")[0] not in only:
                        continue
                    jobs.append((key, label, kind, obj, args.limit))
    rows = run_jobs(jobs, args.timeout, max(1, args.jobs))
    meta["wall_s"] = time.perf_counter() - t_start
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_md(out, rows, meta)
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1, default=str) + "\n")
    print(out.read_text())


if __name__ == "__main__":
    main()
