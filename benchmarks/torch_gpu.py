"""PyTorch frontend on one GPU: torchvision ResNet-50 and a GPT-2-sized LM.

One prepared script (about 5 minutes on one H200): per model, plain
training, ``torch.utils.checkpoint`` on every block, our eager runtime at
70/50/30% of the traced keep-all peak and at per-block checkpointing's live
peak, then ``torch.compile`` (inductor) with PT2's knapsack solver "dp" and
with :class:`hybrid_remat.torch.CompileSolver` at 50%, and PT2's default
partition.  Peak = ``torch.cuda.max_memory_allocated()`` during the step
above what was allocated before it (parameter gradients pre-allocated); live
peak = the storages ATen calls allocate (``hrt.LiveBytes``: what the budget
counts); time = fastest step over the fastest plain step, run in turn.  What
does not fit in ``--max-seconds`` is listed as skipped.

Usage::

    python -m benchmarks.torch_gpu --out "$OUT"                   # the GPU run, from the repository root
    python -m benchmarks.torch_gpu --device cpu --out /tmp/t        # tiny sizes, end to end on CPU

Needs torchvision for ResNet-50 (random weights, no download); without it a
self-contained ResNet-50 of the same architecture is used and the table says
so.  Writes ``torch_<device>.md`` and ``.json`` under ``--out`` (default
``$OUT``, else ``benchmarks/results``).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import traceback

import torch

from benchmarks._common import RESULTS
from benchmarks.torch_cpu import CaseRun, to_markdown, write_outputs
from benchmarks.torch_models import GPU_CASES


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--models", nargs="+", default=list(GPU_CASES))
    ap.add_argument("--budgets", type=int, nargs="+", default=[70, 50, 30], help="eager budgets, %% of keep-all")
    ap.add_argument("--compile-budgets", type=int, nargs="*", default=[50], help="torch.compile budgets, %%")
    ap.add_argument("--backend", choices=("inductor", "aot_eager"), default=None,
                    help="compiled rows (default: inductor on CUDA, aot_eager on CPU)")
    ap.add_argument("--rounds", type=int, default=None, help="timed steps per method (default 5; CPU 2)")
    ap.add_argument("--time-limit", type=float, default=None, help="planning seconds per budget (default 4; CPU 2)")
    ap.add_argument("--repeats", type=int, default=1, help="timed re-runs per op when tracing")
    ap.add_argument("--max-seconds", type=float, default=270.0, help="skip what would start after this")
    ap.add_argument("--solvers", action="store_true", help="also map anytime_solve's plan")
    ap.add_argument("--out", default=os.environ.get("OUT") or str(RESULTS))
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        ap.error("CUDA is not available; use --device cpu")
    cpu = device.type == "cpu"
    args.size = "tiny" if cpu else "gpu"
    args.backend = args.backend or ("aot_eager" if cpu else "inductor")
    args.rounds = args.rounds or (2 if cpu else 5)
    args.time_limit = args.time_limit or (2.0 if cpu else 4.0)
    args.no_compile = False
    args.pt2_solvers = ["dp"]
    if cpu:
        torch.set_num_threads(1)
    os.makedirs(args.out, exist_ok=True)
    t_start = time.perf_counter()
    args.deadline = t_start + args.max_seconds

    def log(msg):
        print(f"{time.perf_counter() - t_start:7.1f}s {msg}", flush=True)

    runs, rows = [], []
    for name in args.models:  # eager rows of every model first, then the compiles (the slow part)
        try:
            run = CaseRun(name, args, device, log)
            run.eager()
            runs.append(run)
        except Exception as e:  # noqa: BLE001 - report and go on
            traceback.print_exc()
            rows.append({"model": name, "method": "-", "error": f"{type(e).__name__}: {e}".splitlines()[0]})
        if device.type == "cuda":
            torch.cuda.empty_cache()
    for run in runs:
        try:
            run.compiled(budgets_pct=set(args.compile_budgets), default=False)
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            run.rows.append({"model": run.name, "method": "torch.compile", "error": f"{type(e).__name__}: {e}"[:200]})
    for run in runs:
        try:
            if not run.late():
                run.compiled(budgets_pct=set(), default=True)
            else:
                run.skip("PT2 default")
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            run.rows.append({"model": run.name, "method": "PT2 default", "error": f"{type(e).__name__}: {e}"[:200]})
    for run in runs:
        rows += run.rows
    notes = [r.case.note for r in runs]
    meta = {
        "torch": torch.__version__, "threads": torch.get_num_threads(), "backend": args.backend,
        "machine": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "CPU",
        "wall_s": time.perf_counter() - t_start, "models": notes,
        "command": "python -m benchmarks.torch_gpu " + " ".join(argv if argv is not None else sys.argv[1:]),
        "budgets": args.budgets, "compile_budgets": args.compile_budgets, "rounds": args.rounds,
    }
    md = to_markdown(rows, meta, __doc__).replace("# PyTorch frontend on CPU", f"# PyTorch frontend on {meta['machine']}", 1)
    write_outputs(args.out, f"torch_{device.type}" + ("_smoke" if cpu else ""), rows, meta,
                  md + "\nModels: " + "; ".join(notes) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
