"""The ``hybrid-remat`` command line.

Subcommands::

    hybrid-remat info GRAPH
    hybrid-remat solve GRAPH --budget B --time-limit S [--device NAME=SIZE ...] [--out plan.json]
    hybrid-remat simulate GRAPH PLAN [--budget B | --device NAME=SIZE ...]
    hybrid-remat plugins
    hybrid-remat plot GRAPH PLAN -o timeline.png [--kind auto|memory|gantt]
    hybrid-remat sweep GRAPH... --budgets 90%,80%,...,30% --time-limit S [--solver ...] [--ray [ADDRESS]]
    hybrid-remat torch-plan MODULE:FACTORY --input-shape ... --budget B --out plan.json

Graphs are ``remat-graph/1`` JSON (plain or ``.gz``, ``datasets/README.md``)
or networkx node-link JSON (Checkmate/Moccasin exports).  Errors are one
line on stderr and exit code 2; arguments are checked before any solve
starts.  Existing files are never overwritten unless ``--force`` is given.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time

from ._cli_checks import MAX_TIME_LIMIT, CLIError, check_args, check_budget_spec, check_seconds
from ._cli_signals import Terminated, exit_code, signal_name, terminate_raises
from .budgets import BUDGET_GRAMMAR
from .errors import HybridRematError

__all__ = ["main", "build_parser", "MAX_TIME_LIMIT", "GRAPH_FORMATS", "CLIError"]
#: what the graph argument accepts, for --help
GRAPH_FORMATS = ("graph file: remat-graph/1 JSON, plain or gzip (.json, .json.gz; datasets/README.md), "
                 "or networkx node-link JSON (Checkmate/Moccasin exports)")


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse prints usage + message)
        raise CLIError(message)

    def format_help(self):
        lazy = getattr(self, "lazy_epilog", None)
        if callable(lazy):  # registry names are read only when help is shown (plugins load slowly)
            self.epilog = lazy()
        return super().format_help()


def _registered_names() -> str:
    """The valid --heuristic, --bound, --improver and --formulation names, from the registry."""
    from . import plugins

    def names(reg):
        return ", ".join(sorted(reg)) or "none"

    return (f"heuristics (--heuristic): {names(plugins.heuristics())}.  bounds (--bound): {names(plugins.bounds())}."
            f"  improvers (--improver): {names(plugins.improvers())}.  formulations (--formulation): "
            f"{names(plugins.formulations())}.")


def _fmt_time(x: float) -> str:
    if x != x or x in (float("inf"), float("-inf")):
        return "-"
    return f"{x:.6g}"


def _problem(graph, args):
    from .problem import Problem

    return Problem.from_specs(graph, getattr(args, "device", None), getattr(args, "budget", None))


def cmd_info(args) -> int:
    from .bounds.feasibility import EXACT_MAX_NODES, smallest_feasible_budget
    from .budgets import budget_lower_bound, format_bytes, keep_all_peak
    from .limits import Limits
    from .loaders import load_graph
    from .portfolio.runner import catch_signals

    g = load_graph(args.graph)
    peak = keep_all_peak(g)
    print(f"graph        {g.name}")
    print(f"nodes        {g.n} ({int((g.phase == 0).sum())} forward, {int((g.phase == 1).sum())} backward)")
    print(f"edges        {g.m}")
    for k in g.cost_kinds:
        est = int(g.estimated[k].sum())
        extra = f" ({est} estimated)" if est else ""
        print(f"cost sum     {k}: {_fmt_time(float(g.cost(k).sum()))}{extra}")
    print(f"keep-all peak        {peak} B ({format_bytes(peak)})")
    node_bound = budget_lower_bound(g)
    stop = threading.Event()  # a signal ends the search with what it settled (never an exception in a kernel)
    heard: list = []
    with catch_signals(("SIGINT", "SIGTERM"), lambda name: (heard.append(name), stop.set())):
        feas = smallest_feasible_budget(g, limits=Limits.seconds(args.search_time, stop=stop))
    bound = max(node_bound, feas.lower)

    def pct(b):
        return f"{100.0 * b / peak:.1f}% of keep-all" if peak > 0 else "keep-all is 0 B"

    print(f"budget lower bound   {bound} B ({format_bytes(bound)}, {pct(bound)}): no plan fits below it")
    if bound > node_bound:
        print(f"  (largest node with its inputs: {node_bound} B)")
    if feas.exact is not None:
        print(f"smallest feasible    {feas.exact} B ({format_bytes(feas.exact)}, {pct(feas.exact)}; "
              "exact search, plan simulated)")
    else:
        why = (f"the exact search covers graphs up to {EXACT_MAX_NODES} nodes" if g.n > EXACT_MAX_NODES
               else f"the exact search was interrupted by {heard[0]}" if heard
               else f"the exact search did not settle it in {args.search_time:g} s")
        print(f"smallest feasible    between {feas.lower} B and {feas.upper} B ({why})")
    if heard:
        raise Terminated(heard[0]) if heard[0] == "SIGTERM" else KeyboardInterrupt(heard[0])
    from .segments.report import structure_lines

    print("\n".join(structure_lines(g)))
    return 0


def cmd_solve(args) -> int:
    from .anytime import SolveInterrupted, anytime_solve
    from .loaders import load_graph

    g = load_graph(args.graph)
    if args.cost_model:
        first = (args.device or [""])[0].partition("=")[0] or g.cost_kinds[0]
        g = _apply_cost_models(g, args.cost_model, first)
    problem = _problem(g, args)
    t0 = time.perf_counter()
    live = sys.stderr.isatty() and not args.quiet

    def on_improve(event) -> None:
        if args.quiet:
            return
        line = (
            f"[{event.seconds:7.2f}s] incumbent {_fmt_time(event.objective)}  "
            f"bound {_fmt_time(event.bound)}  gap {100 * event.gap:.2f}%  ({event.source})"
        )
        if live:
            print("\r" + line.ljust(100), end="", file=sys.stderr, flush=True)
        else:
            print(line, file=sys.stderr, flush=True)

    code = 0
    try:
        # anytime_solve handles SIGINT and SIGTERM itself: the best plan is kept
        result = anytime_solve(problem, args.time_limit, workers=args.workers, heuristics=args.heuristic or None,
                               bounds=args.bound or None, improvers=args.improver or None,
                               formulations=args.formulation or None, on_improve=on_improve, seed=args.seed,
                               objective=args.objective, signals=("SIGINT", "SIGTERM"))
    except SolveInterrupted as e:  # Ctrl-C or SIGTERM: the best plan so far, marked interrupted
        result = e.result
        code = exit_code(e)
    if live:
        print(file=sys.stderr)
    return _solve_summary(args, problem, result, time.perf_counter() - t0, code)


def _solve_summary(args, problem, result, wall: float, code: int) -> int:
    """Print the report and the status, write the plan; the exit code."""
    from .budgets import format_bytes
    from .plan import write_plan

    print(f"{'source':<22} {'status':<12} {args.objective:>12} {'TDI%':>8} {'seconds':>8}  note")
    for row in result.report:
        obj = _fmt_time(row.objective) if row.objective == row.objective and row.objective < float("inf") else "-"
        tdi = f"{row.tdi_pct:.2f}" if row.tdi_pct == row.tdi_pct else "-"
        note = " ".join(str(row.note).split())
        note = note if len(note) <= 60 else note[:57] + "..."
        print(f"{row.source:<22} {row.status:<12} {obj:>12} {tdi:>8} {row.seconds:>8.2f}  {note}".rstrip())
    print()
    meaning = {"optimal": "a bound over every plan is reached", "feasible": "not proved optimal",
               "infeasible": "no plan exists within the budgets", "no_solution": "nothing found, nothing proved"}
    print(f"status       {result.status} ({meaning.get(result.status, '')})")
    if result.interrupted:
        print(f"interrupted  {result.stats.get('signal') or 'stopped'}: the best plan so far")
    nw = result.stats.get("workers", 1)
    print(f"time         {wall:.1f}s (warm-up {result.stats.get('warmup_s', 0.0):.1f}s, "
          f"{nw} worker{'s' if nw != 1 else ''})")
    if result.plan is None:
        if result.status != "infeasible":
            print(f"lower bound  {_fmt_time(result.lower_bound)} ({result.bound_source})")
        print(_no_plan_why(args, result))
        return code or 1
    sim = result.simulation
    peaks = ", ".join(f"{k}={format_bytes(v)}" for k, v in sim.peak_bytes.items())
    budgets = ", ".join(f"{d.name}={format_bytes(d.memory_bytes)}" for d in problem.devices)
    print(f"objective    {args.objective} {_fmt_time(result.objective)} "
          f"(serial {_fmt_time(sim.total_time)}, TDI {sim.tdi_pct:.3f}%, makespan {_fmt_time(sim.makespan)})")
    print(f"lower bound  {_fmt_time(result.lower_bound)}  gap {100 * result.gap:.3f}%  "
          f"(over every plan, from {result.bound_source})")
    if result.class_bound_scope:
        cls_gap = (result.objective - result.class_bound) / result.objective * 100 if result.objective > 0 else 0.0
        print(f"class bound  {_fmt_time(result.class_bound)}  gap {max(cls_gap, 0.0):.3f}%  "
              f"(plans of {result.class_bound_scope} only)")
    print(f"peak         {peaks}  (budget {budgets})")
    print(f"solver       {result.solver}")
    if args.out:
        write_plan(args.out, result.plan, problem, result.summary(), overwrite=args.force)
        print(f"plan written {args.out}{' (interrupted)' if result.interrupted else ''}")
    return code


def _no_plan_why(args, result) -> str:
    """Why a solve ended without a plan: a signal, no plan exists, every
    component ended (or was skipped) before the limit, or the limit."""
    if result.status == "infeasible":
        return "no plan exists"
    if result.interrupted:
        return f"no plan found before {result.stats.get('signal') or 'the stop request'}"
    spent = float(result.stats.get("seconds", 0.0))
    if spent < 0.9 * args.time_limit:
        skipped = sorted({r.source for r in result.report if r.status == "skipped"})
        extra = f"; skipped: {', '.join(skipped)}" if skipped else ""
        return (f"no plan found: every component ended after {spent:.1f} s of the {args.time_limit:g} s limit "
                f"without one (see the notes above{extra})")
    return f"no plan found within the {args.time_limit:g} s limit"


def cmd_simulate(args) -> int:
    from .budgets import format_bytes
    from .loaders import load_graph
    from .plan import plan_from_json
    from .plot import problem_for_plan
    from .simulate import simulate

    doc = _read_plan_doc(args.plan)
    g = load_graph(args.graph)
    problem = problem_for_plan(g, doc, budget=args.budget, devices=args.device, objective="serial",
                               source=args.plan, check=True)
    plan = plan_from_json(doc, g)
    r = simulate(problem, plan)
    print(f"valid        {'yes' if r.valid else 'NO: ' + str(r.error)}")
    print(f"steps        {len(plan)} ({plan.n_computes()} computes, {r.n_recompute} recomputations)")
    for d in problem.devices:
        pk = r.peak_bytes[d.name]
        print(f"peak {d.name:<8}{pk} B ({format_bytes(pk)}) of budget {d.memory_bytes} B ({format_bytes(d.memory_bytes)})")
    print(f"total time   {_fmt_time(r.total_time)} (TDI {r.tdi_pct:.3f}%)")
    print(f"makespan     {_fmt_time(r.makespan)}")
    return 0 if r.valid else 1


def cmd_plugins(args) -> int:
    from .plugin_report import format_plugin_table

    print(format_plugin_table())
    return 0


def cmd_plot(args) -> int:
    from .loaders import load_graph
    from .plan import plan_from_json
    from .plot import problem_for_plan, save, timeline

    graph_path, plan_path = _plot_order(args.graph, args.plan)
    doc = _read_plan_doc(plan_path)
    g = load_graph(graph_path)
    problem = problem_for_plan(g, doc, budget=args.budget, devices=args.device, objective=args.objective,
                               source=plan_path)
    fig = timeline(problem, plan_from_json(doc, g), kind=args.kind, max_points=args.max_points)
    save(fig, args.out, overwrite=args.force)
    print(f"figure written {args.out}")
    return 0


def _is_plan_file(path: str) -> bool:
    from .plan import PLAN_FORMAT

    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("format") == PLAN_FORMAT


def _plot_order(first: str, second: str) -> tuple[str, str]:
    """``plot GRAPH PLAN`` (as ``simulate``); the older ``plot PLAN GRAPH`` is
    still read when the files tell which is which (a plan file names its
    format, a graph never names that one)."""
    if not _is_plan_file(second) and _is_plan_file(first):
        print("hybrid-remat: note: plot takes GRAPH PLAN (as simulate); read as PLAN GRAPH", file=sys.stderr)
        return second, first
    return first, second


def _read_plan_doc(path: str) -> dict:
    from .errors import PlanError
    from .plan import PLAN_FORMAT

    try:
        with open(path) as f:
            doc = json.load(f)
    except FileNotFoundError:
        raise PlanError(f"{path}: no such file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise PlanError(f"{path}: not a JSON plan ({e}); the order is: GRAPH PLAN") from None
    if not isinstance(doc, dict) or doc.get("format") != PLAN_FORMAT:
        raise PlanError(f"{path} is not a {PLAN_FORMAT} plan; the order is: GRAPH PLAN")
    return doc


def cmd_sweep(args) -> int:
    from .sweep import parse_budgets, sweep

    solvers = [s for spec in (args.solver or ["portfolio"]) for s in spec.split(",") if s]
    try:
        rows = sweep(args.graphs, parse_budgets(args.budgets), time_limit=args.time_limit, solvers=solvers,
                     heuristics=args.heuristic, formulations=args.formulation, objective=args.objective,
                     devices=args.device or (), seed=args.seed, node_limit=args.node_limit, jobs=args.jobs,
                     ray=args.ray, out=args.out, plans=not args.no_plans, force=args.force, plot=args.plot,
                     progress=not args.quiet)
    except KeyboardInterrupt as e:
        print(f"hybrid-remat: interrupted ({signal_name(e)}); the rows done are in {args.out}", file=sys.stderr)
        return exit_code(e)
    n = len(rows)
    print(f"{n} rows written {args.out}" + (f"; figure written {args.plot}" if args.plot else ""))
    return 0


def _apply_cost_models(graph, specs, default_kind):
    """``--cost-model [KIND=]MODEL:DEVICE``: replace cost column KIND (default:
    the primary device's) with a registered cost model's estimate."""
    from . import plugins
    from .cost_models import apply_cost_model

    models = plugins.cost_models()
    for spec in specs or []:
        kind, _, rest = spec.rpartition("=") if "=" in spec else ("", "", spec)
        name, _, device = rest.partition(":")
        if name not in models:
            raise CLIError(f"unknown cost model {name!r}; registered: {', '.join(sorted(models)) or 'none'}")
        if not device:
            raise CLIError(f"--cost-model {spec!r}: name the device, e.g. {name}:h200")
        graph = apply_cost_model(graph, models[name], device, kind=kind or default_kind)
    return graph


def cmd_torch_plan(args) -> int:
    try:
        from .torch import cli as torch_cli
    except (HybridRematError, ImportError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise CLIError(f"torch-plan is unavailable: {reason}") from None
    p = _Parser(prog="hybrid-remat torch-plan", description="Trace a PyTorch model's training step and plan it.")
    torch_cli.add_arguments(p)
    ns = p.parse_args(args.rest)
    check_budget_spec("--budget", ns.budget)  # the one budget grammar, before the model is traced
    check_seconds("--time-limit", ns.time_limit)
    return torch_cli.run(ns)


_BUDGET_HELP = BUDGET_GRAMMAR.replace("%", "%%")
_EXITS = "Exit codes: 0 done, 2 a usage or input error (one line on stderr), 130 Ctrl-C, 143 SIGTERM."


def _device_arg(s, extra: str) -> None:
    s.add_argument("--device", action="append", metavar="NAME[=SIZE]",
                   help="a device and its budget, e.g. gpu=2GiB (SIZE in the --budget grammar); repeat for "
                        "CPU+GPU (cpu=64GiB)" + extra)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="hybrid-remat",
                description="Plan rematerialization and CPU/GPU placement under memory budgets.  "
                            f"GRAPH is a {GRAPH_FORMATS}.  Budgets: {BUDGET_GRAMMAR}.",
                epilog=_EXITS)
    sub = p.add_subparsers(dest="command", parser_class=_Parser, metavar="COMMAND")

    s = sub.add_parser("info", help="graph statistics, keep-all peak and the smallest feasible budget (or bounds on it)",
                       description="Graph statistics, the keep-all peak, a lower bound on the smallest feasible "
                                   "budget and, where an exact search settles it within --search-time, the "
                                   "smallest feasible budget.", epilog=_EXITS)
    s.add_argument("graph", metavar="GRAPH", help=GRAPH_FORMATS)
    s.add_argument("--search-time", type=float, default=2.0, metavar="S",
                   help="seconds for the exact search of the smallest feasible budget (default: %(default)s; "
                        "0: none; graphs up to 63 nodes)")
    s.set_defaults(func=cmd_info)

    s = sub.add_parser(
        "solve", help="plan under a budget with heuristics + exact SCIP model",
        description="Plan under memory budgets: heuristics, exact models and search within the time limit; "
                    "the best plan (simulated) is written with --out.  All arguments are checked before the "
                    f"solve starts.  Ctrl-C or SIGTERM stops the solve and writes the best plan, marked "
                    f"interrupted.  {_EXITS}",
    )
    s.lazy_epilog = _registered_names
    s.add_argument("graph", metavar="GRAPH", help=GRAPH_FORMATS)
    s.add_argument("--budget", help=f"{_BUDGET_HELP}; with --device it applies to the devices given without a "
                                    "size (an error if all have one)")
    _device_arg(s, "; NAME alone takes --budget")
    s.add_argument("--time-limit", type=float, default=20.0, metavar="S",
                   help="seconds of search after the Numba warm-up (default: %(default)s; at most 7 days)")
    s.add_argument("--workers", type=int, metavar="N",
                   help="worker processes (default: the cores this process may use)")
    s.add_argument("--heuristic", action="append", metavar="NAME",
                   help="run only these heuristics (repeatable; default: every default one; names below)")
    s.add_argument("--bound", action="append", metavar="NAME", help="run only these bounds (repeatable)")
    s.add_argument("--improver", action="append", metavar="NAME", help="run only these improvers (repeatable)")
    s.add_argument("--formulation", action="append", metavar="NAME",
                   help="run only these exact formulations (repeatable; a named one runs even where it is "
                        "predicted not to finish)")
    s.add_argument("--cost-model", action="append", metavar="[KIND=]MODEL:DEVICE",
                   help="replace a cost column with a registered cost model's estimate, e.g. roofline:h200")
    s.add_argument("--objective", choices=("serial", "makespan"), default="serial",
                   help="serial time (sum of compute and copy times) or makespan with overlap "
                        "(default: %(default)s)")
    s.add_argument("--seed", type=int, default=0,
                   help="random seed of the heuristics and solvers (default: %(default)s)")
    s.add_argument("--out", metavar="PLAN", help="write the plan as remat-plan/1 JSON (its directory must exist)")
    s.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    s.add_argument("--quiet", action="store_true", help="no live progress lines")
    s.set_defaults(func=cmd_solve)

    s = sub.add_parser("simulate", help="check a remat-plan/1 file and report peaks and times",
                       description="Replay a plan on its graph: validity, peak memory per device against its "
                                   "budget, total time and makespan.  Exit code 1 when the plan is invalid.",
                       epilog=_EXITS)
    s.add_argument("graph", metavar="GRAPH", help=GRAPH_FORMATS)
    s.add_argument("plan", metavar="PLAN", help="a remat-plan/1 JSON file")
    s.add_argument("--budget", help=f"{_BUDGET_HELP} (default: the plan's own devices)")
    _device_arg(s, " (default: the plan's own devices)")
    s.set_defaults(func=cmd_simulate)

    s = sub.add_parser("plugins", help="list registered heuristics, formulations, cost models and loaders",
                       description="List every registered component: kind, name, version, the plugin that "
                                   "registered it and its capabilities.", epilog=_EXITS)
    s.set_defaults(func=cmd_plugins)

    s = sub.add_parser("plot", help="draw a plan: memory per device over its steps (and a Gantt chart)",
                       description="Draw a plan: memory per device over its steps against the budget and, for "
                                   "makespan plans, a Gantt chart of devices and copy streams.  The arguments "
                                   "are GRAPH PLAN, as for simulate (the older PLAN GRAPH is still read).",
                       epilog=_EXITS)
    s.add_argument("graph", metavar="GRAPH", help=GRAPH_FORMATS)
    s.add_argument("plan", metavar="PLAN", help="a remat-plan/1 JSON file")
    s.add_argument("-o", "--out", required=True, metavar="FIGURE", help="figure file: .png, .svg or .pdf")
    s.add_argument("--budget", help=f"check against this budget instead of the plan's devices: {_BUDGET_HELP}")
    _device_arg(s, " (default: the plan's own devices)")
    s.add_argument("--kind", choices=("auto", "memory", "gantt"), default="auto",
                   help="auto: add the Gantt chart of devices and copy streams for makespan plans "
                        "(default: %(default)s)")
    s.add_argument("--objective", choices=("serial", "makespan"), help="default: the plan's summary")
    s.add_argument("--max-points", type=int, default=2000, metavar="N",
                   help="points per curve; long plans are bucketed (default: %(default)s)")
    s.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    s.set_defaults(func=cmd_plot)

    s = sub.add_parser("sweep", help="solve graphs x budgets x solvers into a CSV (and a Pareto figure)",
                       description="Solve every graph at every budget with every solver, one solve per worker; "
                                   "one CSV row per solve (figures from re-simulating its plan), the plans "
                                   "beside the CSV.  Every argument and graph is checked before the first "
                                   "solve.  Ctrl-C or SIGTERM keeps the rows done.", epilog=_EXITS)
    s.add_argument("graphs", nargs="+", metavar="GRAPH", help=GRAPH_FORMATS)
    s.add_argument("--budgets", default="90%,80%,...,30%", metavar="B[,B...]",
                   help=f"comma list of budgets ({_BUDGET_HELP}); '...' continues a step of percentages "
                        "(default: %(default)s)")
    s.add_argument("--time-limit", type=float, default=10.0, metavar="S",
                   help="seconds per solve (default: %(default)s; at most 7 days)")
    s.add_argument("--solver", action="append", metavar="NAME[,NAME]",
                   help="portfolio (default), heuristics, or a registered heuristic or formulation")
    s.add_argument("--heuristic", action="append", metavar="NAME",
                   help="only these heuristics in portfolio/heuristics")
    s.add_argument("--formulation", action="append", metavar="NAME", help="only these formulations in portfolio")
    s.add_argument("--objective", choices=("serial", "makespan"), default="serial",
                   help="(default: %(default)s)")
    s.add_argument("--device", action="append", metavar="NAME=SIZE",
                   help="extra devices after the budgeted one, e.g. cpu=64GiB")
    s.add_argument("--seed", type=int, default=0, help="(default: %(default)s)")
    s.add_argument("--node-limit", type=int, metavar="N", help="branch-and-bound node limit (deterministic runs)")
    s.add_argument("--jobs", type=int, metavar="N",
                   help="parallel solves (default: the CPUs, at most the solves); 1 = in this process")
    s.add_argument("--ray", nargs="?", const=True, metavar="ADDRESS",
                   help="run on Ray: a local runtime, or the cluster at ADDRESS (extra [ray])")
    s.add_argument("--out", default="sweep.csv", metavar="CSV",
                   help="CSV file; plans go to <stem>_plans/ beside it (default: %(default)s)")
    s.add_argument("--no-plans", action="store_true", help="do not write the plans")
    s.add_argument("--plot", metavar="FIGURE", help="also draw budget vs TDI%% per graph (.png/.svg/.pdf)")
    s.add_argument("--force", action="store_true", help="overwrite the CSV, plans and figure")
    s.add_argument("--quiet", action="store_true", help="no progress")
    s.set_defaults(func=cmd_sweep)

    # torch is imported only when this command runs (it is optional and slow to import)
    s = sub.add_parser("torch-plan", help="trace a PyTorch model and write a plan (needs the torch extra)",
                       add_help=False)
    s.set_defaults(func=cmd_torch_plan)
    return p


def main(argv=None) -> int:
    """Entry point of the ``hybrid-remat`` console script.

    Exit codes: 0 done, 1 ``simulate`` found the plan invalid, 2 a usage or
    input error (one line on stderr), 130 Ctrl-C, 143 SIGTERM (the best
    result so far written, marked interrupted)."""
    try:
        with terminate_raises():
            return _main(argv)
    except KeyboardInterrupt as e:  # Terminated (SIGTERM) too
        print(f"hybrid-remat: interrupted ({signal_name(e)})", file=sys.stderr)
        return exit_code(e)


def _main(argv) -> int:
    try:
        parser = build_parser()
        args, rest = parser.parse_known_args(argv)
        if getattr(args, "command", None) == "torch-plan":
            args.rest = rest
        elif rest:
            raise CLIError(f"unrecognized arguments: {' '.join(rest)}")
        if not getattr(args, "command", None):
            parser.print_help()
            return 2
        if args.command != "torch-plan":  # torch-plan checks its own arguments
            check_args(args)
        return int(args.func(args) or 0)
    except (HybridRematError, FileExistsError) as e:
        msg = " ".join(str(e).split())
        print(f"hybrid-remat: error: {msg}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"hybrid-remat: error: {e.strerror or e}: {getattr(e, 'filename', '') or ''}".rstrip(": "), file=sys.stderr)
        return 2
    except SystemError as e:  # a signal's exception raised as a compiled (Numba) kernel returned
        if isinstance(e.__context__, KeyboardInterrupt):
            raise e.__context__ from None
        raise


if __name__ == "__main__":
    sys.exit(main())
