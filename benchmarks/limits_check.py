"""Does every registered heuristic and bound keep its time limit?  Each one
runs on the graph families at several sizes with ``limits=Limits.seconds(L)``
for several ``L`` and the table reports the seconds used over the limit.

A time limit is a promise (``hybrid_remat.limits``): a component given a
:class:`~hybrid_remat.limits.Limits` returns within it, at every size.  This
script measures it the way the portfolio calls a component (heuristics
``run(problem, seed=0, limits=...)``, bounds ``bound(problem,
limits=...)``), each call in a forked child (after the Numba warm-up, which
the portfolio does outside user limits) with a hard timeout of
``--timeout`` seconds; components that decline the problem
(``applicable``) are listed as such, not run.  The unit of interest is
``used / limit``: above ``1 + slack`` (``--slack``, default 0.25 s plus
10 %) a row is marked **over**.

Usage::

    python3 -m benchmarks.limits_check --families random_layered --sizes 10000 --limits 0.3,1
    python3 -m benchmarks.limits_check --only multicut_bound,dtr_eq,memory_order,hetero_heft --sizes 2000,10000
    python3 -m benchmarks.limits_check                                   # everything (long: hours)

Writes ``benchmarks/results/limits_check_s32.md`` (or ``--out``); ``--append``
adds rows to an existing table's JSON next to it.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import pathlib
import time

from benchmarks._common import RESULTS
from hybrid_remat import plugins
from hybrid_remat.limits import Limits

FAMILIES = ("random_layered", "decoder_tracer", "decoder_checkmate", "unet", "resnet_stages")
_PROBLEMS: dict = {}   # (family, size, budget) -> Problem, built before the children fork


def components(only: set[str]) -> list[tuple[str, str, object]]:
    """``(name, kind, object)`` of every registered heuristic and bound (``only``: those names)."""
    out = [(n, "heuristic", h) for n, h in sorted(plugins.heuristics().items())]
    out += [(n, "bound", b) for n, b in sorted(plugins.bounds().items())]
    return [c for c in out if not only or c[0] in only]


def _child(key, name, kind, obj, limit, conn) -> None:
    problem = _PROBLEMS[key]
    try:
        lim = Limits.seconds(limit)
        t0, c0 = time.perf_counter(), time.process_time()
        if kind == "bound":
            r = obj.bound(problem, limits=lim)
            what = f"bound TDI {(r.value - problem.base_cost) / problem.base_cost * 100:.3f} %"
        else:
            plan = obj.run(problem, seed=0, limits=lim)
            what = "no plan" if plan is None else "plan"
        conn.send((time.perf_counter() - t0, time.process_time() - c0, what))
    except Exception as e:  # noqa: BLE001 - reported in the table
        conn.send((math.nan, math.nan, f"error: {e!r}"[:100]))


def run_one(key, name, kind, obj, limit, timeout) -> dict:
    """One call in a forked child: ``{used_s, cpu_s, what}`` (``used_s = timeout`` when killed)."""
    ctx = mp.get_context("fork")
    rx, tx = ctx.Pipe(duplex=False)
    p = ctx.Process(target=_child, args=(key, name, kind, obj, limit, tx))
    t0 = time.perf_counter()
    p.start()
    if rx.poll(timeout):
        used, cpu, what = rx.recv()
        p.join()
    else:
        p.kill()
        p.join()
        used, cpu, what = time.perf_counter() - t0, math.nan, "killed at the timeout"
    return {"used_s": used, "cpu_s": cpu, "what": what}


def warm_up(family: str, comps) -> None:
    """Each component once on a small graph of ``family`` in this process
    (its Numba kernels compiled or loaded from the cache before the children
    fork: the portfolio warms up outside user limits too)."""
    from hybrid_remat.families import family_graph
    from hybrid_remat.problem import Problem

    g = family_graph(family, 300)
    try:
        p = Problem.single(g, "50%")
    except Exception:  # noqa: BLE001 - a small graph whose node bound is above half its peak
        p = Problem.single(g, "90%")
    for _, kind, obj in comps:
        try:
            if applicable(obj, p)[0]:
                (obj.bound(p, limits=Limits.seconds(2.0)) if kind == "bound"
                 else obj.run(p, seed=0, limits=Limits.seconds(2.0)))
        except Exception:  # noqa: BLE001 - the measured call reports it
            pass


def applicable(obj, problem) -> tuple[bool, str]:
    from hybrid_remat.interfaces import accepts

    ok, why = accepts(obj, problem)
    if ok and hasattr(obj, "applicable"):
        ok, why = obj.applicable(problem)
    return bool(ok), str(why or "")


def write_md(path: pathlib.Path, rows: list[dict], meta: dict) -> None:
    lines = ["# Time limits kept? every registered heuristic and bound, families x sizes x limits", "",
             f"Command: `{meta['command']}`; {meta['machine']}; {meta['date']}; commit {meta['commit']}.", "",
             "Each call in a forked child after the Numba warm-up; `used` = wall seconds of the call "
             "(`run(problem, seed=0, limits=Limits.seconds(L))` or `bound(problem, limits=...)`); **over** where "
             f"used > L x {1 + meta['slack_rel']:g} + {meta['slack_abs']:g} s.  Times under load are indicative "
             "(the load average when each row ran is in its column).", "",
             "| family | nodes | budget | component | kind | limit s | used s | CPU s | used/limit | load | result |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r.get("declined"):
            continue
        over = r["used_s"] > r["limit_s"] * (1 + meta["slack_rel"]) + meta["slack_abs"]
        ratio = r["used_s"] / r["limit_s"]
        lines.append(f"| {r['family']} | {r['n']:,} | {r['budget']} | {r['component']} | {r['kind']} | "
                     f"{r['limit_s']:g} | {r['used_s']:.2f} | {r['cpu_s']:.2f} | "
                     f"{'**' if over else ''}{ratio:.2f}{' over**' if over else ''} | {r['load']:.1f} | {r['what']} |")
    declined = sorted({(r["component"], r["family"], r["n"], r["why"]) for r in rows if r.get("declined")})
    if declined:
        lines += ["", "Declined (not run; `applicable` says why):", ""]
        lines += [f"- {c} on {f} {n:,}: {w}" for c, f, n, w in declined]
    path.write_text("\n".join(lines) + "\n")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--sizes", default="2000,10000,100000")
    ap.add_argument("--budgets", default="50%")
    ap.add_argument("--limits", default="0.3,1,3")
    ap.add_argument("--only", default="", help="comma-separated component names (default: every registered one)")
    ap.add_argument("--timeout", type=float, default=30.0, help="a call is killed after this many seconds")
    ap.add_argument("--slack", type=float, default=0.25, help="absolute slack (s) before a row is 'over'")
    ap.add_argument("--out", default=str(RESULTS / "limits_check_s32.md"))
    ap.add_argument("--append", action="store_true", help="keep the rows of the JSON next to --out")
    args = ap.parse_args(argv)
    from benchmarks.heuristic_scaling import _commit
    from hybrid_remat.bounds.cut import warmup as bounds_warmup
    from hybrid_remat.families import family_graph
    from hybrid_remat.heuristics import warmup
    from hybrid_remat.problem import Problem

    warmup()
    bounds_warmup()
    out = pathlib.Path(args.out)
    store = out.with_suffix(".json")
    rows = json.loads(store.read_text())["rows"] if args.append and store.exists() else []
    only = {x.strip() for x in args.only.split(",") if x.strip()}
    limits = [float(x) for x in args.limits.split(",")]
    for fam in [x.strip() for x in args.families.split(",") if x.strip()]:
        warm_up(fam, components(only))
        for size in [int(x) for x in args.sizes.split(",")]:
            g = family_graph(fam, size)
            for bud in [b.strip() for b in args.budgets.split(",")]:
                key = (fam, size, bud)
                _PROBLEMS[key] = p = Problem.single(g, bud)
                for name, kind, obj in components(only):
                    ok, why = applicable(obj, p)
                    base = {"family": fam, "size": size, "n": g.n, "budget": bud, "component": name, "kind": kind}
                    if not ok:
                        rows.append({**base, "declined": True, "why": why[:120]})
                        continue
                    for L in limits:
                        r = run_one(key, name, kind, obj, L, max(args.timeout, 3 * L + 5))
                        rows.append({**base, "limit_s": L, "load": os.getloadavg()[0], **r})
                        print(f"{fam} {g.n} {bud} {name} L={L:g}: used {r['used_s']:.2f} s ({r['what']})", flush=True)
                del _PROBLEMS[key]
        store.write_text(json.dumps({"rows": rows}, indent=1))   # kept if a later family fails
    cmd = "python3 -m benchmarks.limits_check" + "".join(
        f" --{k} {v}" for k, v in (("families", args.families), ("sizes", args.sizes), ("budgets", args.budgets),
                                    ("limits", args.limits)) if v) + (f" --only {args.only}" if args.only else "")
    meta = {"command": cmd + (" (rows appended to earlier runs)" if args.append else ""),
            "machine": f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f} at the end",
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": _commit(),
            "slack_abs": args.slack, "slack_rel": 0.10}
    store.write_text(json.dumps({"rows": rows, "meta": meta}, indent=1))
    write_md(out, rows, meta)
    print(out.read_text())


if __name__ == "__main__":
    main()
