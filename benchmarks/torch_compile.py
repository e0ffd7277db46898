"""``torch.compile`` with our partitioner: ask for a peak, get at most that peak.

For each model and backend: eager, PT2's default partition (the min-cut,
``activation_memory_budget=1``) and :class:`hybrid_remat.torch.CompilePartitioner`
asked for 70/50/30 % of the PT2 default step's **measured** allocator peak,
in bytes.  Columns: the budget in bytes; what the partitioner did (compiled,
or its BudgetError's lowest reachable budget); its predicted program peak;
the measured allocator peak of the compiled step (``hrt.allocator_peak``:
the profiler's allocation events on CPU, every allocation above what exists
before the step: parameters, inputs and ``.grad`` are allocated before);
ok = measured <= budget (a BudgetError's row is followed by one asking for
the lowest peak it names); time = median step over eager's and over PT2
default's (interleaved ``--rounds``); grads = max |grad - eager grad| (same
seed; inductor with ``fallback_random`` so that dropout draws as eager).

Models (CPU, random weights, no download; batches large enough that the
activations outweigh the gradients, which a compiled backward returns all at
once, a floor no partition lowers): ``mlp_dropout`` (6 x Linear 256 + tanh +
dropout 0.2, batch 1024), ``resnetish`` (:class:`hybrid_remat.torch.examples.ResNetish`,
c=16, 4 blocks, 32x32, batch 16, BatchNorm) and ``gpt2`` (transformers
GPT2LMHeadModel, GPT2Config(n_layer=4, n_embd=128, n_head=4, n_positions=64,
vocab_size=512), 8 x 64 tokens, ``labels=``: two compiled graphs, the loss
after a graph break).  torchvision and timm are not installed here.

Usage::

    python -m benchmarks.torch_compile                                  # aot_eager, all models
    python -m benchmarks.torch_compile --backends inductor --models gpt2 --fractions 70

Writes ``benchmarks/results/torch_compile.md`` and ``.json`` (``--out``).
"""

from __future__ import annotations

import argparse
import copy
import functools
import os
import platform
import statistics
import time
import warnings

import torch

import hybrid_remat.torch as hrt
from benchmarks._common import command, write_results
from hybrid_remat.errors import BudgetError

MODELS = ("mlp_dropout", "resnetish", "gpt2")


def make(name: str):
    """(model, call(model) -> loss)."""
    torch.manual_seed(0)
    if name == "mlp_dropout":
        from hybrid_remat.torch.examples import DropMLP

        m, x = DropMLP(d=256, layers=6, p=0.2), torch.randn(1024, 256)
        return m, lambda mod: mod(x).square().mean()
    if name == "resnetish":
        from hybrid_remat.torch.examples import ResNetish

        m, x = ResNetish(c=16, blocks=4), torch.randn(16, 3, 32, 32)
        y = torch.randint(0, 10, (16,))
        return m, lambda mod: torch.nn.functional.cross_entropy(mod(x), y)
    if name == "gpt2":
        import transformers
        from transformers import GPT2Config, GPT2LMHeadModel

        transformers.logging.set_verbosity_error()
        m = GPT2LMHeadModel(GPT2Config(n_layer=4, n_embd=128, n_head=4, n_positions=64, vocab_size=512))
        ids = torch.randint(0, 512, (8, 64))
        return m, lambda mod: mod(ids, labels=ids).loss
    raise SystemExit(f"unknown model {name!r}: choose from {', '.join(MODELS)}")


def pt2_default(kind: str):
    if kind == "inductor":
        return "inductor"
    from torch._dynamo.backends.common import aot_autograd
    from torch._dynamo.backends.debugging import get_nop_func
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    return aot_autograd(fw_compiler=get_nop_func(), bw_compiler=get_nop_func(),
                        partition_fn=functools.partial(min_cut_rematerialization_partition, compiler="inductor"))


class Runner:
    """A model copy, compiled (or not), stepping with a fixed seed."""

    def __init__(self, base, call, backend=None):
        self.model = copy.deepcopy(base)
        self.call = call
        self.fn = torch.compile(self.model, backend=backend) if backend is not None else self.model

    def step(self):
        torch.manual_seed(1)
        self.call(self.fn).backward()

    def grads(self):
        return [p.grad.detach().clone() for p in self.model.parameters() if p.grad is not None]


def compiled(base, call, backend, part=None):
    torch._dynamo.reset()
    r = Runner(base, call, backend)
    r.step()  # compiles
    if part is not None and part.overshoot:  # a later graph needed room the earlier ones took: compile again
        torch._dynamo.reset()
        part.reset()
        r = Runner(base, call, part.backend(backend_kind(part, backend)))
        r.step()
    return r


def backend_kind(part, backend) -> str:
    return "inductor" if getattr(backend, "__name__", "") == "inductor" else "aot_eager"


def peak(r: Runner) -> int:
    r.model.zero_grad(set_to_none=False)
    return hrt.allocator_peak(r.step, torch.device("cpu"))["live_peak_bytes"]


def timing(runners: dict, rounds: int) -> dict:
    times = {k: [] for k in runners}
    for _ in range(rounds):
        for k, r in runners.items():
            t = time.perf_counter()
            r.step()
            times[k].append(time.perf_counter() - t)
    return {k: statistics.median(v) for k, v in times.items()}


def max_diff(a, b) -> float:
    return max(float((x - y).abs().max()) for x, y in zip(a, b, strict=True))


def run_model(name: str, kind: str, fractions, rounds: int, time_limit: float, args_retry_hint: bool = True) -> list[dict]:
    base, call = make(name)
    base.train()
    eager = Runner(base, call)
    eager.step()
    ref = eager.grads()
    # caches off: a graph served from inductor's FX or AOTAutograd cache never reaches the partitioner (no report,
    # no ledger: a row asking again for the same budget would show no prediction)
    ctx = torch._inductor.config.patch(fallback_random=True, fx_graph_cache=False)
    rows = []
    with ctx, torch._functorch.config.patch(enable_autograd_cache=False), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # leftover graphs charged to the program
        t0 = time.perf_counter()
        pt2 = compiled(base, call, pt2_default(kind))
        pt2_compile = time.perf_counter() - t0
        pt2_grads = max_diff(pt2.grads(), ref)
        p_pt2 = peak(pt2)
        p_eager = peak(eager)
        base_t = timing({"eager": eager, "pt2": pt2}, rounds)
        rows.append({"model": name, "backend": kind, "method": "eager", "measured_peak_bytes": p_eager,
                     "time_vs_eager": 1.0, "time_vs_pt2": base_t["eager"] / base_t["pt2"], "grad_max_diff": 0.0})
        rows.append({"model": name, "backend": kind, "method": "PT2 default", "measured_peak_bytes": p_pt2,
                     "time_vs_eager": base_t["pt2"] / base_t["eager"], "time_vs_pt2": 1.0, "grad_max_diff": pt2_grads,
                     "compile_s": pt2_compile})
        for f in fractions:
            budget = int(f / 100.0 * p_pt2)
            part = hrt.CompilePartitioner(budget, time_limit=time_limit)
            row = {"model": name, "backend": kind, "method": f"ours {f}%", "budget_bytes": budget}
            t0 = time.perf_counter()
            try:
                ours = compiled(base, call, part.backend(kind), part)
            except Exception as e:  # noqa: BLE001 - a BudgetError arrives wrapped in BackendCompilerFailed
                msg = str(e)
                hint = msg.split("budget=")[1].split()[0] if "budget=" in msg else None
                row.update(result="BudgetError" if "BudgetError" in msg or isinstance(e, BudgetError) else type(e).__name__,
                           lowest_budget_bytes=int(hint) if hint and hint.isdigit() else None,
                           error=msg.strip().splitlines()[-3 if len(msg.splitlines()) > 3 else -1][:400])
                rows.append(row)
                if row["lowest_budget_bytes"] and not args_retry_hint:
                    continue
                if row["lowest_budget_bytes"]:  # ask for the peak the error names: get at most that?
                    budget = row["lowest_budget_bytes"]
                    part = hrt.CompilePartitioner(budget, time_limit=time_limit)
                    row = {"model": name, "backend": kind, "method": f"ours at {f}%'s hint", "budget_bytes": budget}
                    t0 = time.perf_counter()
                    try:
                        ours = compiled(base, call, part.backend(kind), part)
                    except Exception as e:  # noqa: BLE001
                        row.update(result=type(e).__name__, error=str(e).strip().splitlines()[-1][:400])
                        rows.append(row)
                        continue
                else:
                    continue
            row["compile_s"] = time.perf_counter() - t0
            grads = max_diff(ours.grads(), ref)  # after one step, as eager's
            measured = peak(ours)  # before PT2's runner recompiles (dynamo was reset for ours)
            pt2.step()  # warm again
            t = timing({"eager": eager, "pt2": pt2, "ours": ours}, rounds)
            row.update(result="compiled", predicted_peak_bytes=part.program.predicted_peak, measured_peak_bytes=measured,
                       ok=measured <= budget, time_vs_eager=t["ours"] / t["eager"], time_vs_pt2=t["ours"] / t["pt2"],
                       grad_max_diff=grads, graphs=len(part.program.graphs),
                       families=[r.get("family") for r in part.reports[-len(part.program.graphs):]])
            rows.append(row)
    torch._dynamo.reset()
    return rows


def markdown(rows, meta) -> str:
    def kb(x):
        return "-" if x is None else f"{x / 1024:.0f}"

    out = ["# torch.compile: our partitioner asked for a peak in bytes", "",
           f"`{meta['command']}`; torch {meta['torch']}, {meta['threads']} thread, load {meta['load']}; "
           f"{meta['rounds']} interleaved rounds (timings indicative on a loaded machine).", "",
           "Budget = the percentage of the PT2 default compiled step's measured allocator peak, in bytes. "
           "ok: measured allocator peak <= budget.  grads: max |grad - eager's| (same seed).", "",
           "| model | backend | method | budget KiB | result | predicted KiB | measured KiB | ok | time / eager | "
           "time / PT2 | grads max diff |",
           "|---|---|---|---:|---|---:|---:|---|---:|---:|---:|"]
    for r in rows:
        res = r.get("result", "")
        if res == "BudgetError":
            res = f"BudgetError: lowest {kb(r.get('lowest_budget_bytes'))} KiB"
        ok = "" if "ok" not in r else ("yes" if r["ok"] else "**no**")
        tv = "-" if r.get("time_vs_eager") is None else f"{r['time_vs_eager']:.2f}"
        tp = "-" if r.get("time_vs_pt2") is None else f"{r['time_vs_pt2']:.2f}"
        gd = "-" if r.get("grad_max_diff") is None else f"{r['grad_max_diff']:.1e}"
        out.append(f"| {r['model']} | {r['backend']} | {r['method']} | {kb(r.get('budget_bytes'))} | {res} | "
                   f"{kb(r.get('predicted_peak_bytes'))} | {kb(r.get('measured_peak_bytes'))} | {ok} | {tv} | {tp} | {gd} |")
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    ap.add_argument("--backends", nargs="+", default=["aot_eager"], choices=["aot_eager", "inductor"])
    ap.add_argument("--fractions", nargs="+", type=float, default=[70, 50, 30])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--time-limit", type=float, default=5.0)
    ap.add_argument("--out", default="torch_compile")
    ap.add_argument("--append", action="store_true",
                    help="replace the rows of these models and backends in the existing JSON table")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    rows = []
    prefix = args.out
    old = None
    if args.append:
        import json
        import pathlib

        from benchmarks._common import RESULTS

        path = pathlib.Path(RESULTS) / f"{prefix}.json"
        if path.exists():
            old = json.loads(path.read_text())
            rows = [r for r in old["rows"] if not (r["model"] in args.models and r["backend"] in args.backends)]
    for kind in args.backends:
        for name in args.models:
            got = run_model(name, kind, args.fractions, args.rounds, args.time_limit)
            for r in got:
                print({k: v for k, v in r.items() if k != "error"}, flush=True)
            rows.extend(got)
    meta = {"command": command(__file__, argv), "torch": torch.__version__, "threads": 1,
            "load": " ".join(f"{x:.1f}" for x in os.getloadavg()), "rounds": args.rounds,
            "platform": platform.platform(), "time_limit": args.time_limit}
    if old is not None:
        meta["command"] = old["meta"]["command"] + "; then " + meta["command"]
        meta["load"] = old["meta"]["load"] + "; then " + meta["load"]
    write_results(prefix, markdown=markdown(rows, meta), json_doc={"meta": meta, "rows": rows})


if __name__ == "__main__":
    main()
