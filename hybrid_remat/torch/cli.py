"""``hybrid-remat torch-plan``: trace a model's training step and write its plan.

The main CLI wires a ``torch-plan`` subcommand to :func:`add_arguments` and
:func:`run`.  Example::

    hybrid-remat torch-plan mypkg.models:make_resnet --input-shape 32,3,224,224 \\
        --budget 60% --out resnet.plan.json

``MODULE:FACTORY`` names a callable returning an ``nn.Module`` (``MODULE`` is
a dotted module name, found from the current directory too, or a ``.py``
file, which may import modules beside it).  Inputs are random tensors of the
given shapes (``--input-dtype int64 --input-high N`` for token ids).  The
loss is a stand-in, the mean of the squared outputs (the plan's forward
decisions do not depend on it); apply the written plan to your model with
``hybrid_remat.torch.load(model, "plan.json", loss_fn)``.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys

from ..budgets import BUDGET_GRAMMAR
from ..errors import HybridRematError

__all__ = ["add_arguments", "run", "load_factory", "make_inputs"]

_DTYPES = ("float32", "float16", "bfloat16", "float64", "int64", "int32")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``torch-plan`` options to ``parser``."""
    parser.add_argument("factory", metavar="MODULE:FACTORY", help="callable returning the nn.Module to plan")
    parser.add_argument(
        "--input-shape", action="append", required=True, metavar="D0,D1,...",
        help="shape of one model input (repeat for several inputs)",
    )
    parser.add_argument(
        "--input-dtype", action="append", choices=_DTYPES, metavar="DTYPE",
        help=f"dtype per input ({', '.join(_DTYPES)}; default float32; one value applies to all)",
    )
    parser.add_argument("--input-high", type=int, default=2, help="integer inputs are drawn from [0, HIGH)")
    parser.add_argument("--budget", required=True,
                        help="live activation budget: " + BUDGET_GRAMMAR.replace("%", "%%"))
    parser.add_argument("--time-limit", type=float, default=10.0, help="search seconds (default 10)")
    parser.add_argument("--device", default="cpu", help="torch device to trace and time on (default cpu)")
    parser.add_argument("--costs", choices=("measure", "flops"), default="measure", help="op times: measured or FLOPs")
    parser.add_argument("--repeats", type=int, default=3, help="timed re-runs per op (default 3)")
    parser.add_argument("--seed", type=int, default=0, help="seed for the model and inputs")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch intra-op threads while tracing and timing (default: torch's own); the predicted "
                             "overhead holds for steps run with the same number")
    parser.add_argument("-o", "--out", required=True, help="plan JSON to write (remat-plan/1)")
    parser.add_argument("--force", action="store_true", help="overwrite --out if it exists")


def _with_path(folder: str):
    """Put ``folder`` first on ``sys.path`` (once)."""
    folder = os.path.abspath(folder)
    if folder not in [os.path.abspath(p or os.curdir) for p in sys.path]:
        sys.path.insert(0, folder)


def load_factory(spec: str):
    """``"pkg.mod:fn"`` or ``"path/file.py:fn"`` -> the callable.

    A dotted module is imported with the current directory on ``sys.path``
    (as ``python -m`` would); a ``.py`` file with its own folder on it, so
    that it can import the modules beside it."""
    mod_name, sep, attr = spec.rpartition(":")
    if not sep or not mod_name or not attr:
        raise HybridRematError(f"factory {spec!r} must be MODULE:FACTORY")
    try:
        if mod_name.endswith(".py") or os.sep in mod_name:
            if not os.path.exists(mod_name):
                raise HybridRematError(f"factory module file {mod_name} does not exist")
            _with_path(os.path.dirname(mod_name) or os.curdir)
            name = "_hybrid_remat_factory_" + os.path.splitext(os.path.basename(mod_name))[0]
            sp = importlib.util.spec_from_file_location(name, mod_name)
            module = importlib.util.module_from_spec(sp)
            sys.modules[name] = module
            sp.loader.exec_module(module)
        else:
            _with_path(os.curdir)
            module = importlib.import_module(mod_name)
    except HybridRematError:
        raise
    except Exception as e:  # noqa: BLE001 - user code: report in one line
        raise HybridRematError(f"cannot import {mod_name!r}: {type(e).__name__}: {e}") from None
    fn = getattr(module, attr, None)
    if fn is None or not callable(fn):
        raise HybridRematError(f"{mod_name!r} has no callable {attr!r}")
    return fn


def _shape(text: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(x) for x in text.replace("x", ",").split(",") if x.strip())
    except ValueError:
        raise HybridRematError(f"input shape {text!r} is not a list of integers like 8,3,32,32") from None
    if not dims or any(d <= 0 for d in dims):
        raise HybridRematError(f"input shape {text!r} needs positive dimensions")
    return dims


def make_inputs(shapes, dtypes, high: int, device: str):
    """Random inputs: normal floats, integers in ``[0, high)``."""
    import torch

    dtypes = list(dtypes or ["float32"])
    if len(dtypes) == 1:
        dtypes = dtypes * len(shapes)
    if len(dtypes) != len(shapes):
        raise HybridRematError(f"{len(dtypes)} --input-dtype values for {len(shapes)} inputs")
    out = []
    for s, d in zip(shapes, dtypes, strict=True):
        dt = getattr(torch, d)
        if dt.is_floating_point:
            out.append(torch.randn(*_shape(s), device=device).to(dt))
        else:
            out.append(torch.randint(0, max(int(high), 1), _shape(s), device=device, dtype=dt))
    return tuple(out)


def run(args) -> int:
    """Trace, plan and write; returns 0.  Errors are HybridRematError."""
    try:
        return _run(args)
    except KeyboardInterrupt as stop:  # a signal before planning began (importing torch, the factory, the inputs)
        return _interrupted(args, stop)


def _run(args) -> int:
    import torch

    from . import default_loss
    from . import plan as torch_plan

    if os.path.exists(args.out) and not args.force:
        raise HybridRematError(f"{args.out} exists; pass --force to replace it")
    factory = load_factory(args.factory)
    try:
        device = torch.device(args.device)
    except RuntimeError as e:
        raise HybridRematError(f"bad --device {args.device!r}: {e}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise HybridRematError("--device cuda: this torch has no CUDA device")
    threads = getattr(args, "threads", None)
    if threads is not None:
        if threads < 1:
            raise HybridRematError(f"--threads must be at least 1, not {threads}")
        torch.set_num_threads(threads)
    torch.manual_seed(args.seed)
    try:
        model = factory()
    except Exception as e:  # noqa: BLE001 - user code
        raise HybridRematError(f"{args.factory}() failed: {type(e).__name__}: {e}") from None
    if not isinstance(model, torch.nn.Module):
        raise HybridRematError(f"{args.factory}() returned {type(model).__name__}, not an nn.Module")
    model = model.to(device).train()
    inputs = make_inputs(args.input_shape, args.input_dtype, args.input_high, args.device)
    try:
        tp = torch_plan(
            model, inputs, default_loss, budget=_budget(args.budget), time_limit=args.time_limit, costs=args.costs,
            repeats=args.repeats, name=args.factory.rpartition(":")[2],
        )
    except KeyboardInterrupt as stop:  # Ctrl-C or SIGTERM: the best plan so far, marked interrupted
        return _interrupted(args, stop)
    except HybridRematError:
        raise
    except Exception as e:  # noqa: BLE001 - errors from the user's model (shapes, dtypes, devices)
        raise HybridRematError(f"tracing {args.factory} failed: {type(e).__name__}: {e}".splitlines()[0]) from None
    tp.write(args.out, overwrite=args.force)
    s = tp.summary()
    how = (f"checkpoint {', '.join(r.path or '<model>' for r in tp.regions)}" if tp.mechanism == "regions"
           else f"{len(s['dropped'])} outputs dropped (op replay)")
    print(
        f"{args.out}: {tp.graph.n} nodes, budget {s['budget_bytes']} B, predicted peak {s['predicted_peak_bytes']} B "
        f"(keep-all {s['keep_all_peak_bytes']} B), +{s['overhead_pct']:.1f}% time with {torch.get_num_threads()} torch "
        f"thread(s), {how}; loss: mean of squared "
        f"outputs (stand-in); apply with hybrid_remat.torch.load(model, {args.out!r}, loss_fn)"
    )
    return 0


def _interrupted(args, stop: KeyboardInterrupt) -> int:
    """Write the best plan so far (simulated, marked interrupted) when there
    is one, else say so; the exit code 130 (SIGINT) or 143 (SIGTERM)."""
    from .._cli_signals import exit_code, signal_name

    tp = getattr(stop, "plan", None)
    if tp is None:
        print(f"hybrid-remat: interrupted ({signal_name(stop)}) before any plan was found; nothing written",
              file=sys.stderr)
        return exit_code(stop)
    tp.write(args.out, overwrite=args.force)
    s = tp.summary()
    print(f"{args.out}: plan written (interrupted): the best plan so far, predicted peak "
          f"{s['predicted_peak_bytes']} B of budget {s['budget_bytes']} B, +{s['overhead_pct']:.1f}% time")
    print(f"hybrid-remat: interrupted ({signal_name(stop)}); the best plan so far is in {args.out}", file=sys.stderr)
    return exit_code(stop)


def _budget(text: str):
    """The budget as written: the one budget grammar (``hybrid_remat.budgets``)
    reads it, ``"0.6"`` as a fraction of the keep-all peak."""
    return text


def main(argv=None) -> int:  # pragma: no cover - the lead's cli.py is the entry point
    parser = argparse.ArgumentParser(prog="hybrid-remat torch-plan", description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except HybridRematError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
