"""Peak memory and step time of real training steps: no plan, hybrid_remat
plans at 70% and 50% of the traced keep-all peak, and torch.utils.checkpoint
on every block.

Two self-contained models: a ResNet-like CNN (batch norm, in-place ReLU) and a
GPT-like transformer (SDPA attention, dropout), sized to take a few GB on a
GPU.  For each configuration: peak ``torch.cuda.max_memory_allocated()``
above the memory allocated just before the step (parameters, inputs; the
gradients, already allocated), and the median wall time of ``--steps`` steps
after one warm-up step.  On CPU (``--device cpu``, for smoke tests) the peak
is the live bytes of the step counted by ``hybrid_remat.torch.LiveBytes``.

Usage::

    python benchmarks/torch_gpu.py --out benchmarks/results          # GPU, ~3-5 min on one H200
    python benchmarks/torch_gpu.py --device cpu --quick --out /tmp/t  # smoke run, ~1 min

Writes ``torch_<device>[_quick].md`` and ``.json`` into ``--out`` and, on CUDA,
the two traced steps as ``remat-graph/1`` graphs (``torch_<model>_graph.json.gz``,
GPU-timed, with module paths), readable by ``hybrid_remat.load_graph``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.utils.checkpoint import checkpoint  # noqa: E402

import hybrid_remat.torch as hrt  # noqa: E402
from hybrid_remat.budgets import keep_all_peak  # noqa: E402


# ------------------------------------------------------------------ models
class Bottleneck(nn.Module):
    def __init__(self, cin, c, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, c, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)
        self.relu = nn.ReLU(inplace=True)
        self.down = None
        if stride != 1 or cin != c:
            self.down = nn.Sequential(nn.Conv2d(cin, c, 1, stride, bias=False), nn.BatchNorm2d(c))

    def forward(self, x):
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        y += x if self.down is None else self.down(x)
        return self.relu(y)


class ResNetLike(nn.Module):
    """ResNet-18/34-like CNN."""

    def __init__(self, widths=(64, 128, 256, 512), depth=(3, 3, 3, 3), classes=1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, widths[0], 7, 2, 3, bias=False), nn.BatchNorm2d(widths[0]),
                                  nn.ReLU(inplace=True))
        blocks, cin = [], widths[0]
        for i, (w, d) in enumerate(zip(widths, depth, strict=True)):
            for j in range(d):
                blocks.append(Bottleneck(cin, w, 2 if (j == 0 and i > 0) else 1))
                cin = w
        self.blocks = nn.ModuleList(blocks)
        self.head = nn.Linear(cin, classes)
        self.ckpt = False

    def forward(self, x):
        x = self.stem(x)
        for b in self.blocks:
            x = checkpoint(b, x, use_reentrant=False) if self.ckpt else b(x)
        return self.head(x.mean((2, 3)))


class GPTBlock(nn.Module):
    def __init__(self, d, h, p):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.h, self.drop = h, nn.Dropout(p)

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=2)
        q, k, v = (t.view(B, T, self.h, D // self.h).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.drop(self.proj(y.transpose(1, 2).reshape(B, T, D)))
        return x + self.drop(self.out(F.gelu(self.fc(self.ln2(x)))))


class GPTLike(nn.Module):
    """GPT-2-like decoder."""

    def __init__(self, vocab=8192, d=1024, h=16, layers=8, T=1024, p=0.1):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(T, d) * 0.02)
        self.blocks = nn.ModuleList([GPTBlock(d, h, p) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.drop = nn.Dropout(p)
        self.ckpt = False

    def forward(self, idx):
        x = self.drop(self.tok(idx) + self.pos[: idx.shape[1]])
        for b in self.blocks:
            x = checkpoint(b, x, use_reentrant=False) if self.ckpt else b(x)
        return self.head(self.ln(x))


def make_cases(device, quick):
    """(name, model, inputs, loss_fn) per model."""
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    if quick:
        cnn = ResNetLike(widths=(8, 16, 32, 64), depth=(1, 1, 1, 1), classes=10)
        x_cnn = torch.randn(4, 3, 32, 32, generator=g)
        gpt = GPTLike(vocab=128, d=64, h=4, layers=2, T=64)
        idx = torch.randint(0, 128, (2, 64), generator=g)
    else:
        cnn = ResNetLike()
        x_cnn = torch.randn(32, 3, 224, 224, generator=g)
        gpt = GPTLike()
        idx = torch.randint(0, 8192, (8, 1024), generator=g)
    y_cnn = torch.randint(0, cnn.head.out_features, (x_cnn.shape[0],), generator=g).to(device)
    y_gpt = torch.randint(0, gpt.head.out_features, idx.shape, generator=g).to(device)
    cases = [
        ("resnet_like", cnn.to(device).train(), (x_cnn.to(device),), lambda out: F.cross_entropy(out, y_cnn)),
        ("gpt_like", gpt.to(device).train(), (idx.to(device),),
         lambda out: F.cross_entropy(out.flatten(0, 1), y_gpt.flatten())),
    ]
    return cases


# ---------------------------------------------------------------- measures
def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def measure(model, inputs, run_step, device, steps):
    """(peak bytes above the pre-step allocation, median step seconds, last loss).

    Gradients are allocated before each measured step (``zero_grad(set_to_none=False)``
    after a warm-up step), so the peak counts what the step itself adds:
    activations, temporaries and the incoming gradients before they are
    accumulated -- the quantity the budget bounds."""
    model.zero_grad(set_to_none=True)
    loss = run_step()  # warm-up; leaves .grad allocated
    model.zero_grad(set_to_none=False)
    _sync(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        loss = run_step()
        _sync(device)
        peak = torch.cuda.max_memory_allocated(device) - base
    else:
        meter = hrt.LiveBytes()
        with meter:
            loss = run_step()
        peak = meter.peak()
    times = []
    for _ in range(steps):
        model.zero_grad(set_to_none=False)
        _sync(device)
        t0 = time.perf_counter()
        loss = run_step()
        _sync(device)
        times.append(time.perf_counter() - t0)
    model.zero_grad(set_to_none=True)
    return int(peak), statistics.median(times), float(loss)


def plain_step(model, inputs, loss_fn):
    def run():
        loss = loss_fn(model(*inputs))
        loss.backward()
        return loss.detach()

    return run


def bench_case(name, model, inputs, loss_fn, device, args, log):
    rows = []
    state = copy.deepcopy(model.state_dict())

    def reset():
        model.load_state_dict(state)

    reset()
    log(f"[{name}] no plan")
    peak, t, loss = measure(model, inputs, plain_step(model, inputs, loss_fn), device, args.steps)
    rows.append({"model": name, "config": "no plan", "peak_bytes": peak, "step_s": t, "loss": loss})

    t0 = time.perf_counter()
    graph = hrt.trace(model, inputs, loss_fn, repeats=args.repeats, name=name)
    trace_s = time.perf_counter() - t0
    kap = keep_all_peak(graph)
    log(f"[{name}] traced {graph.n} nodes in {trace_s:.1f}s, keep-all peak {kap / 2**30:.3f} GiB")
    if device.type == "cuda" and not args.quick:  # the traced step, as a profiled remat-graph/1 graph
        try:
            from hybrid_remat.torch.export import write_remat_graph

            path = os.path.join(args.out, f"torch_{name}_graph.json.gz")
            write_remat_graph(
                path, graph, overwrite=True,
                params_bytes=sum(p.numel() * p.element_size() for p in model.parameters()),
                input_bytes=sum(x.numel() * x.element_size() for x in inputs),
                measured_peak_bytes={"gpu_above_base": rows[0]["peak_bytes"]},
                device_name=torch.cuda.get_device_name(device),
            )
            log(f"[{name}] wrote {path}")
        except Exception as e:  # noqa: BLE001 - a by-product; never fail the run for it
            log(f"[{name}] could not write the graph: {e}")
    for pct in args.budgets:
        reset()
        t0 = time.perf_counter()
        row = {"model": name, "config": f"plan {pct}%", "trace_s": trace_s, "graph_nodes": graph.n,
               "keep_all_peak_bytes": kap}
        try:
            tp = hrt.plan(model, inputs, loss_fn, budget=f"{pct}%", graph=graph, time_limit=args.time_limit,
                          use_solvers=args.solvers)
        except Exception as e:  # noqa: BLE001 - report and go on
            row.update({"error": f"{type(e).__name__}: {e}"})
            rows.append(row)
            log(f"[{name}] plan {pct}%: {row['error']}")
            continue
        row.update({"plan_s": time.perf_counter() - t0, "budget_bytes": tp.budget_bytes,
                    "predicted_peak_bytes": tp.predicted_peak_bytes, "predicted_overhead_pct": tp.predicted.tdi_pct,
                    "family": tp.family, "n_dropped": int(len(tp.dropped))})
        step = hrt.apply(model, tp, loss_fn)
        peak, t, loss = measure(model, inputs, lambda step=step: step(*inputs), device, args.steps)
        row.update({"peak_bytes": peak, "step_s": t, "loss": loss,
                    "saved_peak_bytes": step.stats.get("saved_peak_bytes"),
                    "fallback": step.stats.get("fallback")})
        rows.append(row)
        log(f"[{name}] plan {pct}%: peak {peak / 2**30:.3f} GiB (budget {tp.budget_bytes / 2**30:.3f}, "
            f"predicted {tp.predicted_peak_bytes / 2**30:.3f}), {t * 1e3:.1f} ms")

    reset()
    model.ckpt = True
    log(f"[{name}] checkpoint every block")
    peak, t, loss = measure(model, inputs, plain_step(model, inputs, loss_fn), device, args.steps)
    model.ckpt = False
    rows.append({"model": name, "config": "checkpoint every block", "peak_bytes": peak, "step_s": t, "loss": loss})
    base = rows[0]
    for r in rows:
        if "peak_bytes" in r:
            r["peak_vs_no_plan"] = r["peak_bytes"] / base["peak_bytes"]
            r["time_vs_no_plan"] = r["step_s"] / base["step_s"]
    return rows


def to_markdown(rows, meta):
    gib = 2**30 if not meta["quick"] else 2**20
    unit = "GiB" if not meta["quick"] else "MiB"
    lines = [
        f"# PyTorch frontend on {meta['device_name']} ({meta['torch']})",
        "",
        f"Peak = {meta['peak_definition']}. Step time = median of {meta['steps']} steps after a warm-up.",
        "Budget = % of the traced step's keep-all peak (activations, temporaries, incoming gradients).",
        "Saved peak = bytes held for backward by the planned step (autograd-saved, held, recomputed).",
        "The traced graph does not see library workspaces (cuDNN, cuBLAS) or allocator rounding; the measured",
        "peak does. Plan step times include the runtime's per-op recording and the recomputation.",
        "",
        f"| model | config | peak ({unit}) | vs no plan | step (ms) | vs no plan | budget ({unit}) "
        f"| predicted peak ({unit}) | saved peak ({unit}) | note |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['config']} | - | - | - | - | - | - | - | {r['error']} |")
            continue

        def f(key, scale=gib, fmt="{:.3f}", r=r):
            v = r.get(key)
            return fmt.format(v / scale) if isinstance(v, (int, float)) else "-"

        note = r.get("family", "")
        if r.get("fallback"):
            note += f" FALLBACK: {r['fallback']}"
        lines.append(
            f"| {r['model']} | {r['config']} | {f('peak_bytes')} | {r['peak_vs_no_plan']:.2f} | "
            f"{r['step_s'] * 1e3:.1f} | {r['time_vs_no_plan']:.2f} | {f('budget_bytes')} | "
            f"{f('predicted_peak_bytes')} | {f('saved_peak_bytes')} | {note} |"
        )
    lines += ["", f"Wall time of the whole run: {meta['wall_s']:.0f} s."]
    if meta["quick"]:
        lines += ["", "Smoke run (--quick): tiny models; step times on a shared CPU are not meaningful."]
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--quick", action="store_true", help="tiny models, 2 steps (smoke run)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    ap.add_argument("--steps", type=int, default=None, help="timed steps per config (default 5; quick 2)")
    ap.add_argument("--budgets", type=int, nargs="+", default=[70, 50], help="budgets in %% of keep-all")
    ap.add_argument("--time-limit", type=float, default=None, help="planning seconds per budget (default 15; quick 2)")
    ap.add_argument("--repeats", type=int, default=3, help="timed re-runs per op when tracing")
    ap.add_argument("--solvers", action="store_true",
                    help="also try anytime_solve / registered heuristics (off by default: bounded run time)")
    args = ap.parse_args(argv)
    args.steps = args.steps or (2 if args.quick else 5)
    args.time_limit = args.time_limit or (2.0 if args.quick else 15.0)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        ap.error("CUDA is not available; use --device cpu")
    os.makedirs(args.out, exist_ok=True)
    t_start = time.perf_counter()

    def log(msg):
        print(f"{time.perf_counter() - t_start:7.1f}s {msg}", flush=True)

    rows = []
    for name, model, inputs, loss_fn in make_cases(device, args.quick):
        rows += bench_case(name, model, inputs, loss_fn, device, args, log)
        del model
        if device.type == "cuda":
            torch.cuda.empty_cache()
    meta = {
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "CPU",
        "torch": torch.__version__,
        "quick": args.quick,
        "steps": args.steps,
        "budgets_pct": args.budgets,
        "time_limit_s": args.time_limit,
        "solvers": args.solvers,
        "peak_definition": (
            "torch.cuda.max_memory_allocated() minus memory_allocated() just before the step"
            if device.type == "cuda" else "live bytes of storages allocated during the step (LiveBytes)"
        ),
        "wall_s": time.perf_counter() - t_start,
    }
    stem = f"torch_{device.type}{'_quick' if args.quick else ''}"
    with open(os.path.join(args.out, stem + ".json"), "w") as fh:
        json.dump({"meta": meta, "rows": rows}, fh, indent=1)
    md = to_markdown(rows, meta)
    with open(os.path.join(args.out, stem + ".md"), "w") as fh:
        fh.write(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
