"""``CompilePartitioner(offload=True)`` on CUDA: ask for a peak below what keep
and recompute reach, get at most that peak.

Model: ``--layers`` x (Linear(``--width``) + tanh), batch ``--batch`` (the
activations outweigh the parameters' gradients, which a compiled backward
returns all at once).  For each backend, first PT2's default partition
(measured allocator peak ``P``, the step above what exists before it:
parameters, inputs, ``.grad`` allocated by a warm-up step); then the lowest
byte budget keep and recompute alone reach, ``L`` (``CompilePartitioner``
asked for 2 bytes without offload: its BudgetError names the budget that
plans); then for each fraction ``f`` of ``L``, the byte budget ``B = f x L``:

* keep/recompute alone (``offload=False``): compiled, or refused with the
  lowest peak it found (the BudgetError);
* with offload (``offload=True``): the values offloaded and their bytes, the
  predicted peak, the promise, the **measured** ``torch.cuda.max_memory_allocated``
  of a step, ok = measured <= B, the step time over PT2 default's (median of
  ``--rounds`` interleaved), max |grad - eager grad|.

Without CUDA it prints that it skipped and exits 0 (``--device cpu`` runs the
same code with ``offload="test"`` on tiny sizes, a smoke test: on the CPU the
host is the device and no memory is saved).

Usage::

    python -m benchmarks.torch_compile_offload                    # CUDA, aot_eager and inductor
    python -m benchmarks.torch_compile_offload --device cpu --width 64 --batch 256 --layers 4 --out /tmp/x

Writes ``torch_compile_offload.md`` and ``.json`` into ``--out`` (default benchmarks/results).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import platform
import statistics
import sys
import time
import warnings


def _model(width: int, layers: int, batch: int, device):
    import torch

    torch.manual_seed(0)
    nn = torch.nn
    m = nn.Sequential(*(x for _ in range(layers) for x in (nn.Linear(width, width), nn.Tanh()))).to(device)
    return m, torch.randn(batch, width, device=device)


def _backend(kind: str, part):
    if part is None:
        return kind
    return part.backend(kind)


def _measure(model, x, backend, device, rounds: int = 0):
    """(peak bytes of a step after a warm-up, grads, median step seconds)."""
    import torch

    import hybrid_remat.torch as hrt

    torch._dynamo.reset()
    step_model = torch.compile(model, backend=backend)

    def step():
        step_model(x).square().mean().backward()

    step()  # compile, and .grad allocated before the measured step
    model.zero_grad(set_to_none=False)
    peak = hrt.allocator_peak(step, device)["live_peak_bytes"]
    grads = [p.grad.detach().clone() for p in model.parameters()]  # of one step
    times = []
    for _ in range(rounds):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - t0)
    return int(peak), grads, (statistics.median(times) if times else float("nan"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--backends", default="aot_eager,inductor")
    ap.add_argument("--fractions", default="90,70",
                    help="percent of the lowest byte budget keep/recompute reach")
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--batch", type=int, default=8192)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    import torch

    import hybrid_remat.torch as hrt
    from benchmarks._common import command, write_results
    from hybrid_remat.errors import BudgetError

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("torch_compile_offload: skipped, no CUDA device (torch.cuda.is_available() is False)")
        return 0
    device = torch.device(args.device)
    mode = True if device.type != "cpu" else "test"
    model, x = _model(args.width, args.layers, args.batch, device)
    eager = copy.deepcopy(model)
    eager(x).square().mean().backward()
    ref = [p.grad for p in eager.parameters()]
    rows = []

    def write():  # after each backend: a timeout later keeps what ran
        head = (f"# `CompilePartitioner(offload=...)`: ask for a peak, get at most that peak\n\n"
                f"`{command(__file__, argv)}`; {platform.node()}, torch {torch.__version__}, device {device}"
                f"{' (' + torch.cuda.get_device_name(device) + ')' if device.type == 'cuda' else ''}; "
                f"model {args.layers} x (Linear({args.width}) + tanh), batch {args.batch}; "
                f"bandwidth: torch's activation_offload_cpu_gpu_bw.\n\n")
        if device.type == "cpu":
            head += "**CPU: offload='test' (the host is the device: no memory saved, 'ok' means nothing).**\n\n"
        cols = ["backend", "what", "budget_bytes", "keep_recompute", "offload", "n_offloaded", "offloaded_bytes",
                "predicted_peak_bytes", "promised_peak_bytes", "measured_peak_bytes", "ok", "time_x", "grad_max_diff"]
        lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        for r in rows:
            lines.append("| " + " | ".join("" if r.get(c) is None else (f"{r[c]:.3g}" if isinstance(r[c], float) else
                                                                       str(r[c]).replace("\n", " ").replace("|", "/"))
                                           for c in cols) + " |")
        write_results("torch_compile_offload", markdown=head + "\n".join(lines), json_doc={"rows": rows, "args": vars(args)},
                      directory=args.out)

    for kind in [b for b in args.backends.split(",") if b]:
        m = copy.deepcopy(model)
        p_default, _, t_default = _measure(m, x, kind, device, args.rounds)
        rows.append({"backend": kind, "what": "PT2 default", "budget_bytes": None, "measured_peak_bytes": p_default,
                     "time_x": 1.0})
        print(rows[-1], flush=True)
        low = hrt.CompilePartitioner(2, time_limit=args.time_limit)
        with contextlib.suppress(Exception):  # noqa: BLE001 - the BudgetError, wrapped by torch
            _measure(copy.deepcopy(model), x, _backend(kind, low), device)
        hint = next((r.get("budget_hint") for r in reversed(low.reports) if r.get("budget_hint")), None)
        if hint is None or not str(hint).isdigit():
            rows.append({"backend": kind, "what": f"keep/recompute's lowest budget: not found ({hint})"})
            continue
        lowest = int(hint)
        rows.append({"backend": kind, "what": "keep/recompute's lowest byte budget", "budget_bytes": lowest})
        print(rows[-1], flush=True)
        for f in [float(s) / 100.0 for s in args.fractions.split(",") if s]:
            budget = int(f * lowest)
            row = {"backend": kind, "what": f"{f:.0%} of that", "budget_bytes": budget}
            plain = hrt.CompilePartitioner(budget, time_limit=args.time_limit)
            try:
                got, _, _ = _measure(copy.deepcopy(model), x, _backend(kind, plain), device)
                row["keep_recompute"] = f"compiles, measured {got} B"
            except Exception as e:  # noqa: BLE001 - torch wraps the BudgetError
                cause = e if isinstance(e, BudgetError) else e.__cause__ or e
                last = plain.reports[-1] if plain.reports else {}
                row["keep_recompute"] = (f"refused (lowest simulated graph peak {last['predicted_peak_bytes']} B "
                                         f"> {last['budget_bytes']} B)" if "error" in last else
                                         "failed: " + str(cause)[:120])
            part = hrt.CompilePartitioner(budget, time_limit=args.time_limit, offload=mode)
            m = copy.deepcopy(model)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    peak, grads, t = _measure(m, x, _backend(kind, part), device, args.rounds)
            except Exception as e:  # noqa: BLE001
                last = part.reports[-1] if part.reports else {}
                row["offload"] = (f"refused (lowest simulated graph peak {last['predicted_peak_bytes']} B "
                                  f"> {last['budget_bytes']} B)" if "error" in last else
                                  "failed: " + str(e.__cause__ or e)[:200])
                rows.append(row)
                print(row, flush=True)
                continue
            rep = next((r for r in reversed(part.reports) if "predicted_peak_bytes" in r), {})
            off = rep.get("offload") or {}
            row.update(offload="compiles", n_offloaded=off.get("n_values", 0), offloaded_bytes=off.get("bytes", 0),
                       predicted_peak_bytes=rep.get("predicted_peak_bytes"), promised_peak_bytes=part.promised_peak,
                       measured_peak_bytes=peak, ok=peak <= budget, time_x=t / t_default,
                       grad_max_diff=max(float((a - b).abs().max()) for a, b in zip(grads, ref, strict=True)),
                       saves_device_memory=off.get("saves_device_memory", device.type != "cpu"))
            rows.append(row)
            print(row, flush=True)
        write()
    write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
