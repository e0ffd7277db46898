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
