"""``CompilePartitioner`` under ``torch.compile`` (aot_eager: quick, and
random ops draw as eager does): gradients equal eager with dropout, a graph
break compiles, a size budget is a measured peak, misuse gets clear errors."""

from __future__ import annotations

import copy
import warnings

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import hybrid_remat.torch as hrt  # noqa: E402
from hybrid_remat.errors import BudgetError, HybridRematError  # noqa: E402
from hybrid_remat.torch.examples import DropMLP  # noqa: E402

pytestmark = pytest.mark.torch
torch.set_num_threads(1)


class Broken(nn.Module):
    """A graph break before a small tail with nothing to recompute."""

    def __init__(self, d=64):
        super().__init__()
        self.body = nn.Sequential(*(m for _ in range(4) for m in (nn.Linear(d, d), nn.GELU())))
        self.head = nn.Linear(d, 4)

    def forward(self, x):
        h = self.body(x)
        torch._dynamo.graph_break()
        return torch.log_softmax(self.head(h), -1)


def _step(model, x, part):
    torch._dynamo.reset()
    try:
        torch.manual_seed(7)
        hrt.default_loss(torch.compile(model, backend=part.backend("aot_eager"))(x)).backward()
    finally:
        torch._dynamo.reset()


def _eager(model, x):
    ref = copy.deepcopy(model)
    torch.manual_seed(7)
    hrt.default_loss(ref(x)).backward()
    return ref


def _same_grads(a, b) -> bool:
    return all(torch.allclose(p.grad, q.grad, rtol=1e-4, atol=1e-6)
               for p, q in zip(a.parameters(), b.parameters(), strict=True))


def test_gradients_equal_eager_with_dropout_while_recomputing():
    torch.manual_seed(0)
    model, x = DropMLP(scale=1.5), torch.randn(32, 64)
    ref = _eager(model, x)
    part = hrt.CompilePartitioner(0.8, time_limit=2)
    _step(model, x, part)
    rep = part.reports[-1]
    # a fraction budgets the activations (of their keep-all peak); the gradients returned come on top
    assert rep["fits"] and rep["predicted_peak_bytes"] <= rep["budget_bytes"]
    assert rep["budget_bytes"] - rep["gradient_bytes"] < rep["program"]["program_keep_all_peak_bytes"]
    assert rep["n_random_saved"] == 4  # every dropout's mask saved, the rest planned around them
    assert _same_grads(ref, model)


def test_recomputing_dropout_would_change_the_gradients(monkeypatch):
    """What the test above guards against (so it can fail)."""
    import hybrid_remat.torch.partition as hp

    monkeypatch.setattr(hp, "is_rng_node", lambda node: False)
    monkeypatch.setattr(hp, "recompute_dropout_from_masks", lambda graph: 0)  # the float outputs, as before
    torch.manual_seed(0)
    model, x = DropMLP(scale=1.5), torch.randn(512, 64)  # activations over the gradients
    ref = _eager(model, x)
    part = hrt.CompilePartitioner(0.05, time_limit=2, over_budget="warn")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        _step(model, x, part)
    assert not _same_grads(ref, model)


def test_a_graph_break_program_compiles_within_one_budget():
    torch.manual_seed(0)
    model, x = Broken(), torch.randn(64, 64)
    ref = _eager(model, x)
    part = hrt.CompilePartitioner(0.7, time_limit=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the tail is charged to the program
        _step(model, x, part)
    assert len(part.reports) == 2
    body, tail = part.reports
    assert body["fits"] and body["predicted_peak_bytes"] <= body["budget_bytes"]
    assert tail["program"]["held_before_bytes"] == body["held_bytes"] > 0
    assert tail["fits"] or tail.get("no_choice")
    assert _same_grads(ref, model)


def _compile_measure(model, x, part):
    """Compile (again if a later graph needed room), one step; the allocator's peak of a second step."""
    torch._dynamo.reset()
    try:
        step = torch.compile(model, backend=part.backend("aot_eager"))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            hrt.default_loss(step(x)).backward()
            if part.overshoot:  # the tail needed more than the body left: compile again, leaving it room
                torch._dynamo.reset()
                part.reset()
                step = torch.compile(model, backend=part.backend("aot_eager"))
                hrt.default_loss(step(x)).backward()
        assert part.overshoot == 0
        model.zero_grad(set_to_none=False)
        return hrt.allocator_peak(lambda: hrt.default_loss(step(x)).backward(), torch.device("cpu"))["live_peak_bytes"]
    finally:
        torch._dynamo.reset()


def test_a_size_budget_is_the_measured_peak():
    """Ask for a peak in bytes, get at most that peak (the allocator's view of the
    compiled step); too low a peak names the lowest one that plans, and that one holds."""
    torch.manual_seed(0)
    model, x = Broken(d=128), torch.randn(256, 128)
    with pytest.raises(Exception, match=r"budget=\d+ plans") as info:
        _compile_measure(model, x, hrt.CompilePartitioner(300_000, time_limit=2))
    hint = int(str(info.value).split("budget=")[1].split()[0])
    part = hrt.CompilePartitioner(hint, time_limit=2)
    got = _compile_measure(model, x, part)
    assert part.reports[0]["keep_all_peak_bytes"] > part.reports[0]["budget_bytes"]  # the budget makes it recompute
    assert got <= hint


@pytest.mark.parametrize("bad, words", [
    (1.5, "ambiguous"), ("0", "positive"), ("-1GB", "positive"), ("lots", "cannot be read"), (None, "needs a budget"),
    (True, "needs a budget"), ("12 parsecs", "unit"),
])
def test_budget_misuse_is_a_clear_error(bad, words):
    with pytest.raises(BudgetError, match=words):
        hrt.CompilePartitioner(bad)


@pytest.mark.parametrize("good, nbytes, fraction", [
    ("2GiB", 2 * 2**30, None), ("300MB", 300 * 10**6, None), (123456, 123456, None), ("50%", None, 0.5),
    (0.3, None, 0.3), ("0.7", None, 0.7), (1, None, 1.0),
])
def test_budget_spellings(good, nbytes, fraction):
    spec = hrt.CompilePartitioner(good).program.spec
    assert spec.bytes == nbytes and (spec.fraction is None if fraction is None else float(spec.fraction) == fraction)


def test_other_misuse():
    with pytest.raises(HybridRematError, match="over_budget"):
        hrt.CompilePartitioner(0.5, over_budget="ignore")
    with pytest.raises(HybridRematError, match="time_limit"):
        hrt.CompilePartitioner(0.5, time_limit=0)
    with pytest.raises(HybridRematError, match="backend kind"):
        hrt.CompilePartitioner(0.5).backend("eager")
    a, b = hrt.CompilePartitioner(0.5).uuid(), hrt.CompilePartitioner(0.6).uuid()
    assert a and b and a != b


def test_an_unreachable_budget_names_a_budget_that_plans():
    torch.manual_seed(0)
    model, x = DropMLP(scale=1.5), torch.randn(32, 64)
    part = hrt.CompilePartitioner(0.05, time_limit=2)
    with pytest.raises(Exception, match=r"budget=0\.\d+ plans") as info:
        _step(model, x, part)
    hint = float(str(info.value).split("budget=")[1].split()[0])
    part = hrt.CompilePartitioner(hint, time_limit=2)
    _step(model, x, part)
    assert part.reports[-1]["fits"]


def test_batch_norm_is_not_recomputed_and_matches_eager():
    """Recomputing a training batch norm in backward would read the running
    statistics it has updated (autograd's version check fails): saved."""
    from hybrid_remat.torch.examples import ResNetish

    torch.manual_seed(0)
    model, x = ResNetish(c=8, blocks=2), torch.randn(4, 3, 16, 16)
    ref = _eager(model, x)
    part = hrt.CompilePartitioner(0.85, time_limit=2)
    _step(model, x, part)
    rep = part.reports[-1]
    assert rep["fits"] and rep["predicted_peak_bytes"] < rep["keep_all_peak_bytes"] and rep["n_must_save"] >= 5
    assert _same_grads(ref, model)
    assert all(torch.allclose(a, b) for a, b in zip(ref.buffers(), model.buffers(), strict=True))
