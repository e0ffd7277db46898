"""``CompilePartitioner(offload=...)`` on the CPU (aot_eager), structurally:
the compiled graphs carry torch's offload/reload ops for exactly the values
the report names, gradients equal eager's bit for bit (dropout too), values
``can_offload`` refuses are never offloaded, and on the CPU no device-memory
saving is claimed (``offload=True`` is refused, ``"test"`` says so)."""

from __future__ import annotations

import copy
import functools

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import hybrid_remat.torch as hrt  # noqa: E402
from hybrid_remat.errors import HybridRematError  # noqa: E402
from hybrid_remat.torch.examples import DropMLP  # noqa: E402

pytestmark = pytest.mark.torch
torch.set_num_threads(1)


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(*(m for _ in range(4) for m in (nn.Linear(64, 64), nn.Tanh()))), torch.randn(256, 64)


def _compile_step(model, x, part, seed=7):
    """One compiled step; the forward and backward graphs as compiled."""
    from torch._dynamo.backends.common import aot_autograd

    graphs = []

    def keep(gm, _inputs):
        from functorch.compile import make_boxed_func

        graphs.append(gm)
        return make_boxed_func(gm)

    backend = aot_autograd(fw_compiler=keep, bw_compiler=keep,
                           partition_fn=functools.partial(part, compiler="inductor"))
    torch._dynamo.reset()
    try:
        torch.manual_seed(seed)
        hrt.default_loss(torch.compile(model, backend=backend)(x)).backward()
    finally:
        torch._dynamo.reset()
    return graphs


def _eager(model, x, seed=7):
    ref = copy.deepcopy(model)
    torch.manual_seed(seed)
    hrt.default_loss(ref(x)).backward()
    return ref


def _transfers(gm, prefix):
    return sorted(n.name for n in gm.graph.nodes if n.op == "call_function" and n.name.startswith(prefix))


def test_offload_reaches_a_budget_keep_and_recompute_do_not():
    model, x = _mlp()
    ref = _eager(model, x)
    part = hrt.CompilePartitioner(0.6, time_limit=2, offload="test")
    fw, bw = _compile_step(model, x, part)
    rep = part.reports[-1]
    off = rep["offload"]
    # no partition without offload fits; the chosen one offloads and fits, by the simulator's figures
    assert all(c["peak_bytes"] > rep["budget_bytes"] for f, c in rep["candidates"].items() if "+offload" not in f)
    assert rep["fits"] and rep["family"].endswith("+offload") and rep["predicted_peak_bytes"] <= rep["budget_bytes"]
    assert off["values"] and off["applied"] == off["values"] and off["bytes"] > 0 and off["transfer_s"] > 0
    # the compiled graphs: torch's pass offloaded exactly those values, each reloaded in the backward
    assert _transfers(fw, "cpu_offload_") == sorted(f"cpu_offload_{v}" for v in off["values"])
    assert _transfers(bw, "gpu_reload_") == sorted(f"gpu_reload_{v}" for v in off["values"])
    assert all(n.target == torch.ops.prims.device_put.default for n in fw.graph.nodes if n.name.startswith("cpu_off"))
    # on the CPU nothing is saved: the report says so, the promise counts the offloaded values as resident
    assert off["mode"] == "test" and off["device"] == "cpu" and off["saves_device_memory"] is False
    assert off["device_peak_bytes"] > rep["predicted_peak_bytes"]
    assert part.promised_peak >= off["device_peak_bytes"]
    assert all(torch.equal(p.grad, q.grad) for p, q in zip(model.parameters(), ref.parameters(), strict=True))


def test_offload_with_dropout_gives_eager_gradients_and_never_offloads_a_refused_value():
    torch.manual_seed(0)
    model, x = DropMLP(scale=1.5, p=0.2), torch.randn(512, 64)
    ref = _eager(model, x)
    part = hrt.CompilePartitioner(0.45, time_limit=2, offload="test")
    fw, bw = _compile_step(model, x, part)
    rep = part.reports[-1]
    off = rep["offload"]
    assert rep["fits"] and off["values"] and rep["n_random_saved"] == 4
    assert _transfers(fw, "cpu_offload_") == sorted(f"cpu_offload_{v}" for v in off["values"])
    assert _transfers(bw, "gpu_reload_") == sorted(f"gpu_reload_{v}" for v in off["values"])
    # the dropout masks are getitems, which can_offload refuses: saved on the device, never offloaded
    saved = {a.name for a in fw.graph.find_nodes(op="output")[0].args[0] if isinstance(a, torch.fx.Node)}
    refused = set(off["refused"])
    assert len(refused) == 4 and refused <= saved and not refused & set(off["values"])
    assert all(torch.equal(p.grad, q.grad) for p, q in zip(model.parameters(), ref.parameters(), strict=True))


def test_offload_true_on_the_cpu_is_refused_clearly():
    model, x = _mlp()
    part = hrt.CompilePartitioner(0.6, time_limit=1, offload=True)
    with pytest.raises(Exception, match="activations are on the CPU.*offload='test'"):
        _compile_step(model, x, part)


def test_without_offload_nothing_is_offloaded_and_misuse_is_an_error():
    model, x = _mlp()
    part = hrt.CompilePartitioner(0.9, time_limit=1)
    fw, bw = _compile_step(model, x, part)
    assert "offload" not in part.reports[-1] and not _transfers(fw, "cpu_offload_") and not _transfers(bw, "gpu_")
    with pytest.raises(HybridRematError, match="offload must be"):
        hrt.CompilePartitioner(0.5, offload="yes")
    with pytest.raises(HybridRematError, match="offload_bandwidth"):
        hrt.CompilePartitioner(0.5, offload=True, offload_bandwidth=0)


def test_plan_offload_figures_are_the_simulators():
    """On a remat graph: the offloaded plan is valid, its device peak is lower by what leaves the device, the
    copies are in its time, and a value is out of the device only between its last forward and first backward reader."""
    import numpy as np

    from hybrid_remat.graph import Graph
    from hybrid_remat.problem import Device, Problem
    from hybrid_remat.simulate import simulate
    from hybrid_remat.torch._offload import HOST, offload_problem, plan_offload
    from hybrid_remat.torch._planner import executable_plan

    # forward 0 -> 1 -> 2 -> 3, backward 4 (reads 3) -> 5 (reads 2) -> 6 (reads 1) -> 7 (reads 0)
    edges = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (2, 5), (5, 6), (1, 6), (6, 7), (0, 7)]
    tm = {"op": ["op"] * 8, "n_forward": 4, "overwritten": [False] * 8, "takes_from": [[] for _ in range(8)],
          "moves": [[] for _ in range(8)], "device": "gpu", "costs": "flops"}
    g = Graph.from_arrays([10] * 8, edges, {"gpu": [1.0] * 8}, phase=[0] * 4 + [1] * 4, required=[7],
                          meta={"torch": tm})
    keep = np.ones(4, dtype=bool)
    base = executable_plan(g, keep, "gpu")
    prob = Problem(g, [Device("gpu", "gpu", 10 ** 6)], check=False)
    ref = simulate(prob, base, check_budget=False)
    oprob = offload_problem(prob, bandwidth=10.0)
    plan, chosen, sim = plan_offload(oprob, base, 4, {0: [], 1: [], 2: [], 3: []}, ref.peak_bytes["gpu"] - 10,
                                     float("inf"))
    again = simulate(oprob, plan, check_budget=False)
    assert sim.valid and again.peak_bytes == sim.peak_bytes and chosen
    assert sim.peak_bytes["gpu"] <= ref.peak_bytes["gpu"] - 10 and sim.peak_bytes[HOST] >= 10
    n_copies = int((plan.op == 2).sum())
    assert n_copies == 2 * len(chosen)
    assert sim.total_time == pytest.approx(ref.total_time + sum(2 * (1e-5 + 10 / 10.0) for _ in chosen))
    # nothing to offload across the peak: the plan stays as it was
    _, none, same = plan_offload(oprob, base, 4, {}, 1, float("inf"))
    assert not none and same.peak_bytes["gpu"] == ref.peak_bytes["gpu"]


def test_the_gpu_benchmark_skips_without_cuda(capsys):
    if torch.cuda.is_available():
        pytest.skip("a CUDA device: the benchmark would run")
    from benchmarks.torch_compile_offload import main

    assert main([]) == 0
    assert "skipped, no CUDA" in capsys.readouterr().out
