"""PyTorch frontend on CPU: model x budget x method.

Methods: plain training; ``torch.utils.checkpoint`` on every block (as a user
writes it); our eager runtime (``hrt.plan`` + ``hrt.apply``) at 70/50/30% of
the traced keep-all peak and at the live peak per-block checkpointing
measured ("= ckpt", to the byte); ``torch.compile`` with PT2's default partition, with
its knapsack solver "dp" at ``activation_memory_budget`` 0.7/0.5/0.3 ("greedy"
and "ilp" at 0.5), and with :class:`hybrid_remat.torch.CompileSolver` at the
same budgets (ours: a fraction of the compiled graph's keep-all peak).  A
row of ours reads "refused" where no partition of the compiled graph fits its
budget: ``CompileSolver`` raises a ``BudgetError`` naming the lowest peak and
a budget that plans, rather than run over budget.

Columns: held at backward = bytes the step holds when backward starts (saved
activations, output, loss); live peak = the storages ATen calls allocate,
alive at once (``hrt.LiveBytes``, parameter gradients left out: what the
traced graph's peak and the budget count); allocator peak = the allocator's
peak during the step above what was allocated before it (``torch.profiler``
memory events, which see compiled code and kernels' workspaces too;
parameter gradients pre-allocated); ok = live peak within the row's budget
(% of the traced keep-all peak of the plain step; compiled rows: their
allocator peak less the plain step's allocator-over-live excess); time = fastest step over the fastest plain step, run in
turn; predicted = our plan's predicted step time (op times + the runtime's
own measured cost) over the plain step; recomputed GFLOP = forward FLOPs
the compiled backward runs again.

By default the compiled rows use the partitioner with eager kernels
(``--backend aot_eager``: same partition as inductor, no code generation, so
the run fits a small CPU): "held at bwd" (what the partition saves) and the
recomputed FLOPs are the partition's, but the allocator peak is that of the
partitioned graphs run op by op (decomposed, unfused), not inductor's, so
"ok" reads n/a there; ``--backend inductor`` compiles for real (minutes per
variant on a small CPU).

Usage::

    python -m benchmarks.torch_cpu                     # all models (from the repository root), ~30-60 min on 2 busy cores
    python -m benchmarks.torch_cpu --quick             # tiny models, two budgets (smoke run)
    python -m benchmarks.torch_cpu --models inplace_bn transformer_lm --budgets 50

Needs torchvision for resnet18 / mobilenet_v2 / efficientnet_b0 (random
weights); those rows are skipped without it.  Writes
``benchmarks/results/torch_cpu.md`` and ``.json`` (``--out`` or ``$OUT``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import traceback

import torch

import hybrid_remat.torch as hrt
from benchmarks._common import RESULTS
from benchmarks.torch_bench import (
    aten_live_peak,
    checkpoint_method,
    compiled_method,
    eager_method,
    measure_memory,
    plain_method,
    time_ratio,
)
from benchmarks.torch_models import CPU_CASES, make_case
from hybrid_remat.budgets import keep_all_peak
from hybrid_remat.errors import BudgetError

MB = 2**20


class CaseRun:
    """The rows of one model, measured in two phases (eager, compiled)."""

    def __init__(self, name, args, device, log):
        self.name, self.args, self.device, self.log = name, args, device, log
        self.case = make_case(name, device, size=args.size)
        self.rows: list[dict] = []
        self.plain = plain_method(self.case)
        self.budgets: list = []

    def late(self) -> bool:
        return self.args.deadline is not None and time.perf_counter() > self.args.deadline

    def skip(self, method, pct=None, nbytes=None):
        self.rows.append({"model": self.name, "method": method, "budget_pct": pct, "budget_bytes": nbytes,
                          "error": "skipped: out of time (--max-seconds)"})

    def offset(self) -> int:
        r = self.rows[0]
        return r["live_peak_bytes"] - r.get("aten_live_peak_bytes", r["live_peak_bytes"])

    def add(self, m, budget_pct=None, budget_bytes=None, compiled=False, **extra):
        t0 = time.perf_counter()
        mem = measure_memory(m, self.device)
        if not compiled:
            mem["aten_live_peak_bytes"] = aten_live_peak(m)
        tr = time_ratio(m, self.plain, self.device, self.args.rounds) if m is not self.plain else {"time_ratio": 1.0}
        row = {"model": self.name, "method": m.name, "budget_pct": budget_pct, "budget_bytes": budget_bytes, **mem,
               **tr, **m.info, **extra}
        if budget_bytes:
            if compiled:  # the allocator's peak less what it sees beyond the graph in the plain step
                row["offset_bytes"] = self.offset()
                row["within_budget"] = mem["live_peak_bytes"] - self.offset() <= budget_bytes
            else:
                row["within_budget"] = mem["aten_live_peak_bytes"] <= budget_bytes
        self.rows.append(row)
        self.log(f"[{self.name}] {m.name:<24} alloc {_mb(mem['live_peak_bytes'])} MB, live "
                 f"{_mb(mem.get('aten_live_peak_bytes'))} MB, held {_mb(mem['held_at_backward_bytes'])} MB, "
                 f"time x{tr['time_ratio']:.2f} ({time.perf_counter() - t0:.1f}s)")
        return row

    def eager(self):
        args, case, name = self.args, self.case, self.name
        self.add(self.plain, note=case.note)
        ck_row = self.add(checkpoint_method(case))
        t0 = time.perf_counter()
        graph = hrt.trace(case.model, case.inputs, case.loss_fn, example_kwargs=case.kwargs, repeats=args.repeats,
                          name=name)
        kap = keep_all_peak(graph)
        self.rows[0]["keep_all_peak_bytes"] = kap
        self.log(f"[{name}] traced {graph.n} nodes in {time.perf_counter() - t0:.1f}s, keep-all peak {_mb(kap)} MB")
        self.budgets = [(f"{b}%", b, int(round(b / 100 * kap))) for b in args.budgets]
        ck_live = int(ck_row["aten_live_peak_bytes"])  # per-block checkpointing's live peak, to the byte
        calibration = True  # measured once, reused for every budget
        for label, pct, nbytes in [*self.budgets, ("= ckpt", round(100 * ck_live / kap, 1), ck_live)]:
            if self.late():
                self.skip(f"ours eager @ {label}", pct, nbytes)
                continue
            t0 = time.perf_counter()
            try:
                tp = hrt.plan(case.model, case.inputs, case.loss_fn, budget=nbytes, example_kwargs=case.kwargs,
                              graph=graph, time_limit=args.time_limit, use_solvers=args.solvers,
                              calibrate=calibration)
                calibration = tp.overheads
            except BudgetError as e:
                self.rows.append({"model": name, "method": f"ours eager @ {label}", "budget_pct": pct,
                                  "budget_bytes": nbytes, "error": str(e).split("; ")[-1]})
                self.log(f"[{name}] ours eager @ {label}: {self.rows[-1]['error']}")
                continue
            self.add(eager_method(case, tp, f"ours eager @ {label}"), pct, nbytes, plan_s=time.perf_counter() - t0)

    def compiled(self, budgets_pct=None, default=True):
        args, case = self.args, self.case
        todo = []
        mid = self.budgets[len(self.budgets) // 2][1] if self.budgets else None
        for _, pct, nbytes in self.budgets:
            if budgets_pct is not None and pct not in budgets_pct:
                continue
            for pt2 in args.pt2_solvers:  # "dp" at every budget, the others at the middle one
                if pt2 == "dp" or pct == mid:
                    todo.append((f"PT2 {pt2} @ {pct}%", pct, nbytes, pct / 100, pt2))
            todo.append((f"PT2 + ours @ {pct}%", pct, nbytes, None,
                         hrt.CompileSolver(budget=pct / 100, time_limit=args.time_limit, use_solvers=args.solvers)))
        if default:
            todo.append(("PT2 default", None, None, None, None))
        for label, pct, nbytes, budget, solver in todo:
            if self.late():
                self.skip(label, pct, nbytes)
                continue
            try:
                m = compiled_method(case, label, backend=args.backend, budget=budget, solver=solver)
            except Exception as e:
                refusal = budget_error_in(e)
                if refusal is None:
                    raise
                # our solver refuses a budget no partition fits (and names one that plans)
                self.rows.append({"model": self.name, "method": label, "budget_pct": pct, "budget_bytes": nbytes,
                                  "error": refusal_note(solver.reports[-1]), "refusal": str(refusal)})
                self.log(f"[{self.name}] {label}: {self.rows[-1]['error']}")
                continue
            self.add(m, pct, nbytes, compiled=True)


def budget_error_in(exc: BaseException):
    """The :class:`BudgetError` behind ``exc`` (``torch.compile`` wraps its
    backend's errors), or None."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, BudgetError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def refusal_note(report: dict) -> str:
    """A table cell for :class:`hrt.CompileSolver`'s refusal, from its
    report (the full message stays in the JSON rows)."""
    pct = 100.0 * report["predicted_peak_bytes"] / max(1, report["keep_all_peak_bytes"])
    return (f"refused: no partition fits (lowest simulated peak {pct:.1f}% of the compiled graph's keep-all; "
            f"budget={report['budget_hint']} plans)")


def run_case(name, args, device, log) -> list[dict]:
    run = CaseRun(name, args, device, log)
    run.eager()
    if not args.no_compile:
        run.compiled()
    return run.rows


def _mb(x):
    return f"{x / MB:.2f}" if isinstance(x, (int, float)) else "-"


def _live(r) -> int:
    """The budget's quantity: the ATen live peak (eager rows); compiled rows
    have only the allocator's peak, less the plain step's allocator-over-live
    excess (``offset``)."""
    return r.get("aten_live_peak_bytes", r["live_peak_bytes"] - r.get("offset_bytes", 0))


def summary(rows) -> list[str]:
    """Per model: is one of ours as fast as per-block checkpointing at equal or lower live peak?

    Compiled rows run without memory planning (``aot_eager``) do not take part."""
    out = []
    for model in dict.fromkeys(r["model"] for r in rows):
        mine = [r for r in rows if r["model"] == model and "live_peak_bytes" in r and r.get("backend") != "aot_eager"]
        ck = next((r for r in mine if r["method"] == "per-block checkpoint"), None)
        ours = [r for r in mine if r["method"].startswith(("ours", "PT2 + ours"))]
        if ck is None or not ours:
            continue
        cands = [r for r in ours if _live(r) <= _live(ck)]
        over = [r["method"] for r in ours if r.get("within_budget") is False]
        if cands:
            best = min(cands, key=lambda r: r["time_ratio"])
            verdict = "yes" if best["time_ratio"] <= ck["time_ratio"] else "no"
            out.append(f"- {model}: per-block checkpoint x{ck['time_ratio']:.2f} at {_mb(_live(ck))} MB live "
                       f"({_mb(ck['live_peak_bytes'])} MB allocator); fastest of ours at equal or lower live peak: "
                       f"{best['method']} x{best['time_ratio']:.2f} at {_mb(_live(best))} MB live "
                       f"({_mb(best['live_peak_bytes'])} MB allocator) -> as fast: **{verdict}**"
                       + (f"; over budget: {', '.join(over)}" if over else "; no live peak over its budget"))
        else:
            out.append(f"- {model}: none of ours reached per-block checkpointing's {_mb(_live(ck))} MB live peak")
    return out


def to_markdown(rows, meta, doc: str | None = None) -> str:
    doc = doc or __doc__
    lines = [
        f"# PyTorch frontend on CPU ({meta['torch']}, {meta['threads']} thread(s), compiled rows: {meta['backend']})",
        "",
        doc.split("Usage::")[0].strip().split("\n\n", 1)[1],
        "",
        "| model | method | budget | held at bwd (MB) | live peak (MB) | allocator peak (MB) | ok | time | predicted "
        "| recomputed GFLOP | note |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        bud = f"{r['budget_pct']}% ({_mb(r['budget_bytes'])} MB)" if r.get("budget_pct") is not None else "-"
        if "error" in r:
            lines.append(f"| {r['model']} | {r['method']} | {bud} | - | - | - | - | - | - | - | {r['error']} |")
            continue
        ok = {True: "yes", False: "**NO**"}.get(r.get("within_budget"), "-")
        if r.get("backend") == "aot_eager" and r.get("budget_bytes"):
            ok = "n/a"  # the partitioned graphs ran without inductor's memory planning
        pred = f"x{r['predicted_ratio']:.2f}" if r.get("predicted_ratio") else "-"
        flops = "-"
        if r.get("partitions"):
            flops = f"{sum(p['recomputed_flops'] for p in r['partitions']) / 1e9:.3f}"
        note = r.get("note", "")
        if r.get("mechanism"):
            note = f"{r['mechanism']}" + (f", {r['n_regions']} regions" if r["mechanism"] == "regions" else "")
            note += f", {r['family']}"
        if r.get("solver_reports"):
            rep = r["solver_reports"][-1]
            note = (f"simulated peak {_mb(rep.get('predicted_peak_bytes'))} MB of {_mb(rep.get('keep_all_peak_bytes'))}"
                    f", {rep.get('n_recomputed_banned')}/{rep.get('n_banned')} banned recomputed, {rep.get('family')}")
        if r.get("compile_s") is not None:
            note += f" (compile {r['compile_s']:.0f}s)"
        if r["method"] == "plain" and r.get("keep_all_peak_bytes"):
            note += f"; traced keep-all peak {_mb(r['keep_all_peak_bytes'])} MB"
        lines.append(
            f"| {r['model']} | {r['method']} | {bud} | {_mb(r['held_at_backward_bytes'])} | "
            f"{_mb(r.get('aten_live_peak_bytes'))} | {_mb(r['live_peak_bytes'])} | {ok} | x{r['time_ratio']:.2f} | {pred} | {flops} | {note} |"
        )
    lines += ["", "## Ours vs per-block checkpointing", "", *summary(rows), "",
              f"Command: `{meta['command']}`; wall time {meta['wall_s'] / 60:.1f} min on {meta['machine']}."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=list(CPU_CASES))
    ap.add_argument("--budgets", type=int, nargs="+", default=[70, 50, 30], help="%% of the traced keep-all peak")
    ap.add_argument("--rounds", type=int, default=5, help="timed steps per method (fastest kept)")
    ap.add_argument("--time-limit", type=float, default=5.0, help="planning seconds per budget")
    ap.add_argument("--repeats", type=int, default=2, help="timed re-runs per op when tracing")
    ap.add_argument("--backend", choices=("aot_eager", "inductor"), default="aot_eager")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (1: stable on a shared machine)")
    ap.add_argument("--solvers", action="store_true", help="also map anytime_solve's plan (slower)")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile rows")
    ap.add_argument("--pt2-solvers", nargs="+", default=["dp", "greedy", "ilp"],
                    help="PT2's knapsack solvers to compare (dp at every budget, the others at the middle one)")
    ap.add_argument("--quick", action="store_true", help="tiny models, budgets 70 50, 2 rounds")
    ap.add_argument("--from-json", metavar="JSON", help="only re-render the table of an earlier run")
    ap.add_argument("--tag", default="", help="suffix of the output files (torch_cpu_<tag>.md)")
    ap.add_argument("--out", default=os.environ.get("OUT") or str(RESULTS))
    args = ap.parse_args(argv)
    if args.from_json:
        with open(args.from_json) as fh:
            doc = json.load(fh)
        stem = os.path.splitext(os.path.basename(args.from_json))[0]
        write_outputs(os.path.dirname(os.path.abspath(args.from_json)), stem, doc["rows"], doc["meta"],
                      to_markdown(doc["rows"], doc["meta"]))
        return 0
    args.deadline = None
    args.size = "tiny" if args.quick else "cpu"
    if args.quick:
        args.budgets, args.rounds, args.time_limit = args.budgets[:2], 2, min(args.time_limit, 2.0)
    torch.set_num_threads(args.threads)
    device = torch.device("cpu")
    os.makedirs(args.out, exist_ok=True)
    t_start = time.perf_counter()

    def log(msg):
        print(f"{time.perf_counter() - t_start:7.1f}s {msg}", flush=True)

    rows = []
    for name in args.models:
        try:
            rows += run_case(name, args, device, log)
        except Exception as e:  # noqa: BLE001 - one model failing must not lose the others
            traceback.print_exc()
            rows.append({"model": name, "method": "-", "error": f"{type(e).__name__}: {e}".splitlines()[0]})
    meta = {"torch": torch.__version__, "threads": args.threads, "backend": args.backend,
            "machine": platform.processor() or platform.machine(), "wall_s": time.perf_counter() - t_start,
            "command": "python -m benchmarks.torch_cpu " + " ".join(argv if argv is not None else sys.argv[1:]),
            "budgets": args.budgets, "rounds": args.rounds, "time_limit": args.time_limit}
    stem = "torch_cpu" + ("_quick" if args.quick else "") + (f"_{args.tag}" if args.tag else "")
    write_outputs(args.out, stem, rows, meta, to_markdown(rows, meta))
    return 0


def write_outputs(out: str, stem: str, rows, meta, md: str) -> None:
    """``<stem>.json`` (rows and meta) and ``<stem>.md`` under ``out``; prints the table."""
    with open(os.path.join(out, stem + ".json"), "w") as fh:
        json.dump({"meta": meta, "rows": rows}, fh, indent=1, default=str)
    with open(os.path.join(out, stem + ".md"), "w") as fh:
        fh.write(md)
    print(md)


if __name__ == "__main__":
    sys.exit(main())
