"""What one checkpointed call costs: our region runtime vs ``torch.utils.checkpoint``.

A model of 16 small blocks (a linear layer and three batch norms each, tiny
tensors, so that per-call costs dominate, as on a launch-bound GPU) trained
three ways, in turn: plain, every block under non-reentrant
``torch.utils.checkpoint`` (as a user writes it), and every block as a region
of :class:`hybrid_remat.torch._regions.RegionRunner` (which also keeps the
batch norms' running statistics as plain training leaves them: plain
checkpointing updates them twice).  The table gives the fastest step of each
and the difference per checkpointed call.

Usage::

    python -m benchmarks.torch_checkpoint_call                 # CPU
    python -m benchmarks.torch_checkpoint_call --device cuda   # on a GPU machine

Writes ``torch_checkpoint_call_<device>.md`` and ``.json`` under ``--out``
(default ``benchmarks/results``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import torch
import torch.nn as nn

from benchmarks._common import RESULTS
from benchmarks.torch_bench import block_checkpoint
from hybrid_remat.torch._regions import Region, RegionRunner

__all__ = ["measure"]


class _Block(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.lin = nn.Linear(width, width)
        self.bn1, self.bn2, self.bn3 = nn.BatchNorm1d(width), nn.BatchNorm1d(width), nn.BatchNorm1d(width)

    def forward(self, x):
        return x + self.bn3(self.bn2(torch.relu(self.bn1(self.lin(x)))))


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(device: torch.device, *, blocks: int = 16, width: int = 8, batch: int = 4, rounds: int = 200) -> dict:
    """Fastest step (s) of plain, per-block checkpoint and our regions, run in turn."""
    torch.manual_seed(0)
    model = nn.Sequential(*[_Block(width) for _ in range(blocks)]).to(device)
    x = torch.randn(batch, width, device=device, requires_grad=True)
    paths = [str(i) for i in range(blocks)]
    runner = RegionRunner(model, [Region(p) for p in paths])

    def plain():
        model(x).sum().backward()

    def per_block():
        with block_checkpoint(model, paths):
            y = model(x)
        y.sum().backward()

    def regions():
        with runner.installed():
            y = model(x)
        y.sum().backward()

    fns = {"plain": plain, "per-block checkpoint": per_block, "our regions": regions}
    for fn in fns.values():  # warm-up
        fn()
        fn()
    times: dict[str, list] = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            model.zero_grad(set_to_none=True)
            _sync(device)
            t0 = time.perf_counter()
            fn()
            _sync(device)
            times[k].append(time.perf_counter() - t0)
    best = {k: min(v) for k, v in times.items()}
    return {"device": str(device), "blocks": blocks, "width": width, "batch": batch, "rounds": rounds,
            "step_s": best,
            "ours_minus_checkpoint_per_call_us": 1e6 * (best["our regions"] - best["per-block checkpoint"]) / blocks,
            "checkpoint_minus_plain_per_call_us": 1e6 * (best["per-block checkpoint"] - best["plain"]) / blocks}


def to_markdown(r: dict, machine: str, command: str) -> str:
    lines = [f"# One checkpointed call: our regions vs torch.utils.checkpoint ({machine})", "",
             __doc__.split("Usage::")[0].split("\n\n", 1)[1].strip(), "",
             "| method | fastest step (us) | per call vs plain (us) |", "|---|---|---|"]
    plain = r["step_s"]["plain"]
    for k, v in r["step_s"].items():
        per = "-" if k == "plain" else f"{1e6 * (v - plain) / r['blocks']:.1f}"
        lines.append(f"| {k} | {1e6 * v:.0f} | {per} |")
    lines += ["", f"Ours minus per-block checkpoint: **{r['ours_minus_checkpoint_per_call_us']:+.1f} us per call** "
              f"({r['blocks']} blocks, width {r['width']}, batch {r['batch']}, fastest of {r['rounds']} rounds).", "",
              f"Command: `{command}`; torch {torch.__version__}."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        ap.error("CUDA is not available")
    if device.type == "cpu":
        torch.set_num_threads(1)
    r = measure(device, rounds=args.rounds)
    machine = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.machine()
    command = "python -m benchmarks.torch_checkpoint_call " + " ".join(argv if argv is not None else sys.argv[1:])
    md = to_markdown(r, machine, command.strip())
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, f"torch_checkpoint_call_{device.type}")
    with open(stem + ".json", "w") as fh:
        json.dump(r, fh, indent=1)
    with open(stem + ".md", "w") as fh:
        fh.write(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
